//! Random lock tokens: 128 bits from the operating system's generator, never time, pid or counter.
//!
//! A token is a bearer secret (whoever knows it can release the lock), so `Debug` shows only its
//! first four characters.

use std::fmt;

use crate::error::Error;

/// A lock owner's token: 32 lowercase hex digits (128 random bits).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl Token {
    /// A fresh 128-bit token.
    pub(crate) fn new() -> Result<Token, Error> {
        random_hex::<16>().map(Token)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({}…)", &self.0[..4])
    }
}

/// `N` random bytes from the OS generator, as lowercase hex.
pub(crate) fn random_hex<const N: usize>() -> Result<String, Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::internal(format!("the OS random generator failed: {e}")))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * N);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let a = Token::new().unwrap();
        let b = Token::new().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn debug_hides_the_token() {
        let t = Token::new().unwrap();
        let shown = format!("{t:?}");
        assert!(!shown.contains(t.as_str()));
        assert!(shown.contains(&t.as_str()[..4]));
    }
}
