//! The RESP parser of a plain connection's read buffer: replies framed without allocation, the
//! common ones (`+`, `:`, `$`, `*`, `_`) parsed in place, the rarer ones by redis-rs' parser;
//! a stream that is not RESP is a parse error, and no peer makes the buffer or the stack grow
//! without end. A reply is read as redis-rs reads it (`fuzz/fuzz_targets/resp_diff.rs` compares
//! the two): lines end at a CRLF and are UTF-8, numbers may have blanks around them.

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// The complete reply at the start of `b` and where it ends; `None` while it is not complete.
/// Framed first (no allocation), parsed once whole: a large reply that comes in many reads is not
/// built again after each.
pub fn reply(b: &[u8]) -> RedisResult<Option<(Value, usize)>> {
    match frame(b, 0, 0)? {
        Some(_) => parse(b, 0),
        None => Ok(None),
    }
}

/// The reply that starts at `b[at]` and where it ends; `None` while it is not complete.
fn parse(b: &[u8], at: usize) -> RedisResult<Option<(Value, usize)>> {
    let Some(&kind) = b.get(at) else {
        return Ok(None);
    };
    if !matches!(kind, b'+' | b':' | b'$' | b'*' | b'_') {
        // Rarer replies: framed here, read by redis-rs' parser.
        let Some(end) = frame(b, at, 0)? else {
            return Ok(None);
        };
        return match redis::parse_redis_value(&b[at..end]) {
            Ok(value) => Ok(Some((value, end))),
            // The reply is whole: redis-rs asks for more only to name the byte after the one it
            // refuses.
            Err(e) if e.kind() == ErrorKind::Io => Err(parse_error(at, "a reply redis-rs refuses")),
            Err(e) => Err(e),
        };
    }
    let Some((line, next)) = line(b, at + 1)? else {
        return Ok(None);
    };
    let value = match kind {
        b'+' if line == b"OK" => Value::Okay,
        b'+' => match std::str::from_utf8(line) {
            Ok(line) => Value::SimpleString(line.to_owned()),
            Err(_) => return Err(parse_error(at, "a line that is not UTF-8")),
        },
        b':' => Value::Int(number(line, at)?),
        b'_' if std::str::from_utf8(line).is_ok() => Value::Nil,
        b'_' => return Err(parse_error(at, "a line that is not UTF-8")),
        b'$' => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let Some(data) = b.get(next..next + n + 2) else {
                return Ok(None);
            };
            if !data.ends_with(b"\r\n") {
                return Err(parse_error(at, "a bulk string does not end with CRLF"));
            }
            return Ok(Some((Value::BulkString(data[..n].to_vec()), next + n + 2)));
        }
        _ => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let mut items = Vec::with_capacity(n.min(1024));
            let mut pos = next;
            for _ in 0..n {
                let Some((item, end)) = parse(b, pos)? else {
                    return Ok(None);
                };
                items.push(item);
                pos = end;
            }
            return Ok(Some((Value::Array(items), pos)));
        }
    };
    Ok(Some((value, next)))
}

/// Where the reply that starts at `b[at]` ends, whatever its type; `None` while incomplete.
/// `depth`: how many aggregates it is inside of (a peer that is not Redis must not exhaust the
/// stack with `*1` after `*1`).
fn frame(b: &[u8], at: usize, depth: usize) -> RedisResult<Option<usize>> {
    let Some(&kind) = b.get(at) else {
        return Ok(None);
    };
    if !b"+-:_#,($=!*~>%|".contains(&kind) {
        return Err(parse_error(at, "not a RESP type"));
    }
    if depth > MAX_DEPTH {
        return Err(parse_error(at, "aggregates nested too deep"));
    }
    let Some((line, next)) = line(b, at + 1)? else {
        return Ok(None);
    };
    let items = match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => return Ok(Some(next)),
        b'$' | b'=' | b'!' => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                // A nil bulk string; a blob error or verbatim string has no nil.
                return match kind {
                    b'$' => Ok(Some(next)),
                    _ => Err(parse_error(at, "a negative length")),
                };
            };
            return Ok((b.len() >= next + n + 2).then_some(next + n + 2));
        }
        b'*' | b'~' | b'>' => length(line, at)?,
        // A map's keys and values; an attribute's, and the reply they are attributes of. Neither
        // has a nil.
        _ => match length(line, at)? {
            n if n < 0 => return Err(parse_error(at, "a negative length")),
            n if kind == b'%' => n * 2,
            n => n * 2 + 1,
        },
    };
    let mut pos = next;
    for _ in 0..items.max(0) {
        match frame(b, pos, depth + 1)? {
            Some(end) => pos = end,
            None => return Ok(None),
        }
    }
    Ok(Some(pos))
}

/// The line that starts at `b[at]` (up to its CRLF: a CR alone is part of the line, as redis-rs
/// reads it) and where the next one starts; `None` while incomplete. Its text is checked where it
/// is read as text (a simple string, a number: UTF-8, as redis-rs requires). A line longer than
/// Redis' own inline limit (64 KB) is refused: a peer that is not Redis must not make the buffer
/// grow without end.
#[inline]
fn line(b: &[u8], at: usize) -> RedisResult<Option<(&[u8], usize)>> {
    let Some(rest) = b.get(at..) else {
        return Ok(None);
    };
    let mut from = 0;
    while let Some(cr) = rest[from..].iter().position(|&c| c == b'\r') {
        let cr = from + cr;
        match rest.get(cr + 1) {
            Some(b'\n') => return Ok(Some((&rest[..cr], at + cr + 2))),
            Some(_) => from = cr + 1,
            None => break,
        }
    }
    if rest.len() > MAX_LINE {
        return Err(parse_error(at, "a line longer than 64 KB"));
    }
    Ok(None)
}

/// An integer reply, or a length (blanks around it ignored, as redis-rs ignores them).
#[inline]
fn number(line: &[u8], at: usize) -> RedisResult<i64> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| parse_error(at, "not a number"))
}

/// A length. Lengths beyond Redis' own limit on a bulk string (512 MB) are refused: a peer that
/// is not Redis must not make the buffer grow without end.
#[inline]
fn length(line: &[u8], at: usize) -> RedisResult<i64> {
    match number(line, at)? {
        n if n > MAX_LENGTH => Err(parse_error(at, "a length beyond 512 MB")),
        n => Ok(n),
    }
}

const MAX_LENGTH: i64 = 512 << 20;
const MAX_LINE: usize = 64 << 10;
/// Far deeper than any reply of Redis (the lock scripts' replies are one level deep).
const MAX_DEPTH: usize = 128;

/// A stream that is not RESP: worded as redis-rs' parser words it ("Parse error at …"), which is
/// how `Error::from_redis` tells a peer that is not a Redis server.
fn parse_error(at: usize, what: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "Invalid response",
        format!("Parse error at {at}: {what}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> RedisResult<Option<(Value, usize)>> {
        reply(bytes)
    }

    #[test]
    fn parses_the_common_replies_in_place() {
        assert_eq!(one(b"+OK\r\n").unwrap(), Some((Value::Okay, 5)));
        assert_eq!(
            one(b"+PONG\r\n").unwrap(),
            Some((Value::SimpleString("PONG".into()), 7))
        );
        assert_eq!(one(b":-42\r\n").unwrap(), Some((Value::Int(-42), 6)));
        assert_eq!(one(b"$-1\r\n").unwrap(), Some((Value::Nil, 5)));
        assert_eq!(one(b"*-1\r\n").unwrap(), Some((Value::Nil, 5)));
        assert_eq!(one(b"_\r\n").unwrap(), Some((Value::Nil, 3)));
        assert_eq!(
            one(b"$3\r\na\r\n\r\n").unwrap(),
            Some((Value::BulkString(b"a\r\n".to_vec()), 9))
        );
        assert_eq!(
            one(b"*2\r\n:1\r\n$1\r\nx\r\n+rest").unwrap(),
            Some((
                Value::Array(vec![Value::Int(1), Value::BulkString(b"x".to_vec())]),
                15
            ))
        );
    }

    #[test]
    fn an_incomplete_reply_waits_for_more() {
        for whole in [
            &b"$5\r\nhello\r\n"[..],
            b"*2\r\n:1\r\n-ERR no\r\n",
            b">2\r\n+a\r\n+b\r\n",
        ] {
            for cut in 0..whole.len() {
                assert_eq!(one(&whole[..cut]).unwrap(), None, "{cut} of {whole:?}");
            }
            assert!(one(whole).unwrap().is_some());
        }
    }

    #[test]
    fn rarer_replies_are_redis_rs_values() {
        let (v, end) = one(b"-NOSCRIPT No matching script\r\n").unwrap().unwrap();
        assert_eq!(end, 30);
        assert!(
            matches!(&v, Value::ServerError(e) if e.code() == "NOSCRIPT"),
            "{v:?}"
        );
        let (v, _) = one(b"*2\r\n:1\r\n-ERR no\r\n").unwrap().unwrap();
        assert!(matches!(&v, Value::Array(a) if matches!(a[1], Value::ServerError(_))));
        let (v, end) = one(b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\np\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(end, 31);
        assert!(matches!(v, Value::Push { .. }), "{v:?}");
        assert_eq!(
            one(b"%1\r\n+a\r\n:1\r\n").unwrap().map(|(_, e)| e),
            Some(12)
        );
    }

    /// Replies read as redis-rs reads them (`fuzz/fuzz_targets/resp_diff.rs` compares the two
    /// parsers on any bytes).
    #[test]
    fn replies_are_read_as_redis_rs_reads_them() {
        for bytes in [
            // An attribute is followed by the reply it is about.
            &b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n+next"[..],
            // A CR alone is part of the line.
            b"+a\rb\r\n",
            b"*2\r\n:1\r\n-ERR a\rb\r\n",
            // Blanks around a number.
            b": 42 \r\n",
            b"$ 1\r\nx\r\n",
        ] {
            let (ours, end) = one(bytes).unwrap().unwrap();
            let theirs = redis::parse_redis_value(&bytes[..end]).unwrap();
            assert_eq!(ours, theirs, "{bytes:?}");
            assert!(redis::parse_redis_value(&bytes[..end - 1]).is_err());
        }
        assert_eq!(one(b"+a\rb").unwrap(), None);
        // A line that is not UTF-8; a negative length of a blob error, verbatim string, map or
        // attribute (none has a nil).
        for bytes in [
            &b"+\xff\r\n"[..],
            b"_\xc3\r\n",
            b"!-1\r\n",
            b"=-2\r\n",
            b"*1\r\n%-1\r\n",
            b"|-1\r\n",
        ] {
            assert_eq!(
                one(bytes).unwrap_err().kind(),
                ErrorKind::Parse,
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn a_stream_that_is_not_resp_is_a_parse_error() {
        for bytes in [
            &b"HTTP/1.1 400 Bad Request\r\n"[..],
            b"SSH-2.0-OpenSSH\r\n",
            b":x\r\n",
            b"$999999999999\r\n",
            b"\x15\x03\x03\x00\x02\x02\x32",
            &[&b"+"[..], &[b'a'; 70_000]].concat(),
            &[&b"*1\r\n".repeat(200)[..], b":1\r\n"].concat(),
        ] {
            let e = one(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Parse, "{bytes:?}");
            assert!(e.detail().unwrap().starts_with("Parse error at"), "{e}");
        }
    }
}
