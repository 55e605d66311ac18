//! Random lock tokens: 128 bits from the operating system's generator, never time, pid or counter.
//!
//! A token is a bearer secret (whoever knows it can release the lock), so `Debug` shows only its
//! first four characters.

use std::cell::RefCell;
use std::fmt;

use crate::base::error::Error;

/// The shortest owner token accepted from a caller: shorter ones are too easy to guess.
pub const MIN_OWNER_LEN: usize = 16;
/// The longest owner token accepted from a caller.
pub const MAX_OWNER_LEN: usize = 256;

/// A lock owner's token: 32 lowercase hex digits (128 random bits), or an owner token given by
/// the caller (see [`Token::from_owner`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl Token {
    /// A fresh 128-bit token (`pid`: the calling process, see [`random_hex`]).
    pub(crate) fn new(pid: u32) -> Result<Token, Error> {
        random_hex::<16>(pid).map(Token)
    }

    /// A token chosen by the caller: an owner token handed over from another handle or
    /// process, or one the application picked (Laravel's `$owner`). 16 to 256 printable ASCII
    /// characters, no spaces.
    pub(crate) fn from_owner(owner: &str) -> Result<Token, Error> {
        let printable = owner.bytes().all(|b| b.is_ascii_graphic());
        if !(MIN_OWNER_LEN..=MAX_OWNER_LEN).contains(&owner.len()) || !printable {
            return Err(Error::invalid_argument(format!(
                "an owner token must be {MIN_OWNER_LEN} to {MAX_OWNER_LEN} printable ASCII \
                 characters without spaces (got {} bytes)",
                owner.len()
            )));
        }
        Ok(Token(owner.to_owned()))
    }

    /// The token a key holds now (read by [`Client::force_release`](crate::Client)).
    pub(crate) fn from_held(value: String) -> Token {
        Token(value)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({}…)", self.0.get(..4).unwrap_or(""))
    }
}

/// Compares two tokens in time independent of where they differ.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Bytes fetched from the OS generator ahead of use, so that a token costs no system call most
/// of the time. Every byte is handed out once and wiped; the batch belongs to one process and is
/// thrown away in a forked child, which would otherwise repeat its parent's tokens.
struct Batch {
    pid: u32,
    bytes: [u8; 512],
    used: usize,
}

thread_local! {
    static BATCH: RefCell<Batch> = const { RefCell::new(Batch { pid: 0, bytes: [0; 512], used: 512 }) };
}

/// `N` random bytes from the OS generator, as lowercase hex. `pid` is the calling process's id.
pub(crate) fn random_hex<const N: usize>(pid: u32) -> Result<String, Error> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    BATCH.with_borrow_mut(|batch| {
        if batch.pid != pid || batch.used + N > batch.bytes.len() {
            getrandom::fill(&mut batch.bytes)
                .map_err(|e| Error::internal(format!("the OS random generator failed: {e}")))?;
            batch.pid = pid;
            batch.used = 0;
        }
        let mut out = String::with_capacity(2 * N);
        for b in &mut batch.bytes[batch.used..batch.used + N] {
            out.push(HEX[(*b >> 4) as usize] as char);
            out.push(HEX[(*b & 15) as usize] as char);
            *b = 0;
        }
        batch.used += N;
        Ok(out)
    })
}

/// 128 random bits as a version-4 UUID (`pid`: the calling process, see [`random_hex`]), as
/// Java's `UUID.randomUUID()` makes it: a client's id that Java services read as theirs.
pub(crate) fn random_uuid(pid: u32) -> Result<String, Error> {
    let hex = random_hex::<16>(pid)?.into_bytes();
    let mut s = String::with_capacity(36);
    for (i, &c) in hex.iter().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            s.push('-');
        }
        s.push(match i {
            12 => '4',
            16 => ['8', '9', 'a', 'b'][usize::from(c) % 4],
            _ => c as char,
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let id = random_uuid(std::process::id()).unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(id.split('-').map(str::len).eq([8, 4, 4, 4, 12]));
    }

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let pid = std::process::id();
        let a = Token::new(pid).unwrap();
        let b = Token::new(pid).unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let many: std::collections::HashSet<_> =
            (0..2000).map(|_| Token::new(pid).unwrap().0).collect();
        assert_eq!(many.len(), 2000);
    }

    #[test]
    fn debug_hides_the_token() {
        let t = Token::new(std::process::id()).unwrap();
        let shown = format!("{t:?}");
        assert!(!shown.contains(t.as_str()));
        assert!(shown.contains(&t.as_str()[..4]));
    }
}
