//! Fuzz target: the crate's RESP parser (`src/base/connection/resp.rs`, which reads the replies
//! of plain TCP and Unix-socket connections) against redis-rs' (`redis::parse_redis_value`, of
//! the redis-rs the crate links) on the same bytes. No server is needed.
//!
//! The two answer in different shapes. Ours gives the complete reply at the start of the bytes
//! and where it ends, `None` while that reply is incomplete (the connection then reads more), or
//! an error. Redis-rs' gives the value of the reply at the start (what follows it is ignored) or
//! an error, an incomplete reply being the I/O error `UnexpectedEof`. "The same" is, for every
//! input:
//!
//! - ours `Some((v, end))`: redis-rs gives a value equal to `v` (equal as `Value`s are, but
//!   doubles bit for bit, so that a NaN equals itself); it gives that value from `bytes[..end]`
//!   too, and `UnexpectedEof` from `bytes[..end - 1]`: `end` is exactly where the reply ends;
//! - ours `None`: redis-rs gives no value: `UnexpectedEof`, or a parse error in what has come
//!   (ours reads the numbers and text of a reply once the reply is whole, redis-rs as it goes; a
//!   reply that is wrong gives ours its parse error once the rest comes);
//! - ours an error: it is a parse error (never an I/O error: an incomplete reply is `None`), and
//!   redis-rs gives a parse error too. Redis-rs names the byte after the one it refuses, so where
//!   that is the input's last, it says `UnexpectedEof`: it is then given one byte more. But
//!   where ours refuses by the bounds that keep a peer that is not Redis from making the buffer
//!   or the stack grow without end, redis-rs may wait for more: a length beyond 512 MB, a line
//!   over 64 KB without its CRLF, aggregates nested more than 128 deep, and a negative length of
//!   a blob error or verbatim string (redis-rs waits for ever for its bytes).
//!
//! One bound is redis-rs' own: it refuses aggregates nested 100 deep or more. Where redis-rs
//! gives that error, ours (which frames up to 128 deep, and hands a rare reply type to redis-rs
//! at its depth 0) is not compared.
//!
//! A difference panics (a crash for libFuzzer) with both answers. Seeds: fuzz/corpus/resp_diff.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redislock::fuzzing::parse_reply;
use redislock::fuzzing::redis::{self, ErrorKind, RedisError, Value};

fuzz_target!(|data: &[u8]| check(data));

/// Redis-rs' answer, classified.
#[derive(Debug)]
enum Theirs {
    Value(Value),
    /// `UnexpectedEof`: the reply is not whole.
    Incomplete,
    /// Its bound on nesting.
    TooDeep,
    /// Any other error (a parse error), shown in the panics.
    Refused(#[allow(dead_code)] RedisError),
}

fn theirs(bytes: &[u8]) -> Theirs {
    match redis::parse_redis_value(bytes) {
        Ok(v) => Theirs::Value(v),
        Err(e) if e.kind() == ErrorKind::Io => Theirs::Incomplete,
        Err(e) if e.to_string().contains("Maximum recursion depth exceeded") => Theirs::TooDeep,
        Err(e) => Theirs::Refused(e),
    }
}

/// The errors by which ours refuses what redis-rs would wait on (see the top).
fn our_bound(e: &RedisError) -> bool {
    let detail = e.detail().unwrap_or("");
    [
        "a length beyond 512 MB",
        "a line longer than 64 KB",
        "aggregates nested too deep",
        "a negative length",
    ]
    .iter()
    .any(|b| detail.ends_with(b))
}

fn check(bytes: &[u8]) {
    let ours = parse_reply(bytes);
    let whole = theirs(bytes);
    if matches!(whole, Theirs::TooDeep) {
        return;
    }
    match ours {
        Ok(Some((v, end))) => {
            assert!(0 < end && end <= bytes.len(), "ours ends at {end}");
            let Theirs::Value(t) = &whole else {
                panic!("ours: {v:?} (ending at {end}); redis-rs: {whole:?}");
            };
            assert!(same(&v, t), "ours: {v:?}; redis-rs: {t:?}");
            match theirs(&bytes[..end]) {
                Theirs::Value(t) if same(&v, &t) => {}
                other => panic!("ours: {v:?} ending at {end}; redis-rs on those bytes: {other:?}"),
            }
            let short = theirs(&bytes[..end - 1]);
            assert!(
                matches!(short, Theirs::Incomplete),
                "ours: {v:?} ending at {end}; redis-rs on one byte less: {short:?}"
            );
        }
        Ok(None) => {
            if let Theirs::Value(t) = whole {
                panic!("ours: incomplete; redis-rs: {t:?}");
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Parse, "ours: {e} (not a parse error)");
            let more = match whole {
                Theirs::Incomplete => theirs(&[bytes, b"\r"].concat()),
                other => other,
            };
            match more {
                Theirs::Value(t) => panic!("ours: {e}; redis-rs: {t:?}"),
                Theirs::Incomplete => {
                    assert!(our_bound(&e), "ours: {e}; redis-rs: incomplete")
                }
                Theirs::Refused(_) | Theirs::TooDeep => {}
            }
        }
    }
}

/// Equal values; doubles bit for bit.
fn same(a: &Value, b: &Value) -> bool {
    let all =
        |x: &[Value], y: &[Value]| x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b));
    let pairs = |x: &[(Value, Value)], y: &[(Value, Value)]| {
        x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|((k, v), (l, w))| same(k, l) && same(v, w))
    };
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) | (Value::Set(x), Value::Set(y)) => all(x, y),
        (Value::Map(x), Value::Map(y)) => pairs(x, y),
        (
            Value::Attribute {
                data: d,
                attributes: x,
            },
            Value::Attribute {
                data: e,
                attributes: y,
            },
        ) => same(d, e) && pairs(x, y),
        (Value::Push { kind: k, data: x }, Value::Push { kind: l, data: y }) => k == l && all(x, y),
        _ => a == b,
    }
}
