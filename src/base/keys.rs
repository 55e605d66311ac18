//! Redis key names of a lock and its companion keys.
//!
//! The lock for name N lives at `prefix + N`. Its companion keys (fencing counter, waiter queue,
//! per-waiter liveness keys and signal lists) must hash to the same Redis Cluster slot, so they keep
//! the key's own `{hash tag}` when it has one, and otherwise wrap the whole key in braces:
//! `orders:7` → `{orders:7}:fence`, `{orders}:7` → `{orders}:7:fence`. A key that contains `}`
//! but no hash tag (`a{}b`) cannot be wrapped; its companions get a short tag of the same slot in
//! front instead: `{Qx}a{}b:fence`.

use crate::base::error::{Error, show_name};

/// The longest lock name accepted, in bytes (prefix not counted).
pub const MAX_NAME_LEN: usize = 4096;

/// All keys one lock uses, in one allocation: the lock key followed by the base its companion
/// keys are made of (empty when the lock key is its own base, as with a `{hash tag}`).
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    buf: Vec<u8>,
    /// Length of the lock key at the front of `buf`.
    lock_len: usize,
    /// Length of the key prefix in front of the name in the lock key.
    prefix_len: usize,
}

/// Suffixes of the companion keys.
const FENCE: &[u8] = b":fence";
/// A fenced resource's fence (`api/fenced.rs`): a suffix of its own, so that the key is never
/// read as a lock's fencing counter (by `Client::inspect`, or by an operator).
const FENCED: &[u8] = b":fenced";
const QUEUE: &[u8] = b":q";
/// RELEASE makes a waiter's signal list and liveness key from the queue key: keep them in step.
const SIGNAL: &[u8] = b":s:";
const ALIVE: &[u8] = b":e:";
impl LockKeys {
    /// Checks the name and builds the keys.
    pub(crate) fn new(prefix: &[u8], name: &[u8]) -> Result<LockKeys, Error> {
        if name.is_empty() {
            return Err(Error::invalid_argument("lock name is empty"));
        }
        if name.len() > MAX_NAME_LEN {
            return Err(Error::invalid_argument(format!(
                "lock name {} is longer than {MAX_NAME_LEN} bytes",
                show_name(name)
            )));
        }
        let lock_len = prefix.len() + name.len();
        let mut buf = Vec::with_capacity(2 * lock_len + 8);
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(name);
        if hash_tag(&buf).is_none() {
            if !buf.contains(&b'}') {
                buf.push(b'{');
                buf.extend_from_within(..lock_len);
                buf.push(b'}');
            } else {
                let tag = tag_for_slot(slot(&buf));
                buf.push(b'{');
                buf.extend_from_slice(&tag);
                buf.push(b'}');
                buf.extend_from_within(..lock_len);
            }
        }
        Ok(LockKeys {
            buf,
            lock_len,
            prefix_len: prefix.len(),
        })
    }

    /// The lock key itself: holds the owner's token, with a millisecond expiry.
    pub(crate) fn lock(&self) -> &[u8] {
        &self.buf[..self.lock_len]
    }

    /// The lock's name (the lock key without the client's prefix).
    pub(crate) fn name(&self) -> &[u8] {
        &self.buf[self.prefix_len..self.lock_len]
    }

    /// What companion keys start with: the lock key with its hash tag (or wrapped in one).
    fn base(&self) -> &[u8] {
        if self.buf.len() == self.lock_len {
            self.lock()
        } else {
            &self.buf[self.lock_len..]
        }
    }

    /// A companion key: the base, `suffix` and `tail` (a kind names its own in its file).
    pub(crate) fn companion(&self, suffix: &[u8], tail: &[u8]) -> Vec<u8> {
        let base = self.base();
        let mut k = Vec::with_capacity(base.len() + suffix.len() + tail.len());
        k.extend_from_slice(base);
        k.extend_from_slice(suffix);
        k.extend_from_slice(tail);
        k
    }

    /// Fencing counter (INCR on every fenced grant; never expires).
    pub(crate) fn fence(&self) -> Vec<u8> {
        self.companion(FENCE, b"")
    }

    /// For a resource of fenced writes (the key as the "lock"): the largest fencing token a
    /// write was applied with (never expires).
    pub(crate) fn fenced(&self) -> Vec<u8> {
        self.companion(FENCED, b"")
    }

    /// Waiter queue: a list of waiter entries in arrival order.
    pub(crate) fn queue(&self) -> Vec<u8> {
        self.companion(QUEUE, b"")
    }

    /// The signal list of one waiter.
    pub(crate) fn signal(&self, waiter_id: &str) -> Vec<u8> {
        self.companion(SIGNAL, waiter_id.as_bytes())
    }

    /// The liveness key of one waiter: it exists while the waiter's queue entry is valid.
    pub(crate) fn alive(&self, waiter_id: &str) -> Vec<u8> {
        self.companion(ALIVE, waiter_id.as_bytes())
    }

    /// The Redis Cluster slot of the lock key, which every companion key shares: where a
    /// cluster keeps the lock.
    pub(crate) fn slot(&self) -> u16 {
        slot(self.lock())
    }

    /// The name as shown in messages (made only when needed: it is not cheap).
    pub(crate) fn shown(&self) -> String {
        show_name(self.name())
    }
}

/// The part of a key Redis Cluster hashes when it is not the whole key: the bytes between the
/// first `{` and the first `}` after it, if there is at least one.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag or of the whole key.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in hash_tag(key).unwrap_or(key) {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The first short alphanumeric string (in a fixed order) whose slot is `target`. Every slot
/// has one of at most three characters; the search takes about 16k CRCs, once per acquire of
/// such an unusual name.
fn tag_for_slot(target: u16) -> Vec<u8> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let base = ALPHABET.len();
    let mut n = 0usize;
    loop {
        let mut tag = Vec::with_capacity(4);
        let mut m = n;
        loop {
            tag.push(ALPHABET[m % base]);
            m /= base;
            if m == 0 {
                break;
            }
        }
        if slot(&tag) == target {
            return tag;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn companions_share_the_lock_slot() {
        for name in [
            &b"orders:7"[..],
            b"{orders}:7",
            b"a{}b",
            b"{",
            b"x}{y",
            b"\xff\x00bin",
        ] {
            for prefix in [&b""[..], b"app:", b"{app}:"] {
                let k = LockKeys::new(prefix, name).unwrap();
                let s = slot(k.lock());
                for c in [k.fence(), k.queue(), k.signal("ab12"), k.alive("ab12")] {
                    assert_eq!(
                        slot(&c),
                        s,
                        "{:?} vs {:?}",
                        String::from_utf8_lossy(&c),
                        k.shown()
                    );
                }
            }
        }
    }

    #[test]
    fn slots_match_redis() {
        // Values from CLUSTER KEYSLOT on Redis 7.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        for s in [0u16, 1, 8191, 16383] {
            assert_eq!(slot(&tag_for_slot(s)), s);
        }
    }

    #[test]
    fn key_shapes() {
        let k = LockKeys::new(b"p:", b"orders:7").unwrap();
        assert_eq!(k.lock(), b"p:orders:7");
        assert_eq!(k.name(), b"orders:7");
        assert_eq!(k.fence(), b"{p:orders:7}:fence");
        assert_eq!(k.queue(), b"{p:orders:7}:q");
        assert_eq!(k.signal("ab"), b"{p:orders:7}:s:ab");
        assert_eq!(k.alive("ab"), b"{p:orders:7}:e:ab");
        let k = LockKeys::new(b"", b"{orders}:7").unwrap();
        assert_eq!(k.lock(), b"{orders}:7");
        assert_eq!(k.fence(), b"{orders}:7:fence");
        let k = LockKeys::new(b"", b"a{}b").unwrap();
        assert_eq!(k.lock(), b"a{}b");
        assert!(k.fence().starts_with(b"{") && k.fence().ends_with(b"}a{}b:fence"));
    }

    #[test]
    fn bad_names_are_rejected() {
        assert!(LockKeys::new(b"", b"").unwrap_err().is_invalid_argument());
        let huge = vec![b'x'; MAX_NAME_LEN + 1];
        assert!(LockKeys::new(b"", &huge).unwrap_err().is_invalid_argument());
        assert!(LockKeys::new(b"", &huge[..MAX_NAME_LEN]).is_ok());
    }
}
