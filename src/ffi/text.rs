//! The buffer convention of every call that returns text (the last error's detail, a result
//! code's text, an owner token, an identity, the metrics): the text copied into the
//! caller's buffer, and its whole length returned. A leaf: it uses no other module of `ffi/`.

use std::ffi::c_char;

/// Copies `text` into the caller's buffer: NUL-terminated, cut (on a UTF-8 character boundary)
/// to `buf_len - 1` bytes. Writes nothing when `buf` is NULL or `buf_len` is 0. Returns the
/// length of the whole text, without the NUL.
pub(crate) fn write_text(text: &str, buf: *mut c_char, buf_len: usize) -> usize {
    if !buf.is_null() && buf_len > 0 {
        let mut n = text.len().min(buf_len - 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: the caller gives `buf_len` writable bytes at `buf` (the header's buffer
        // convention); we write `n + 1 <= buf_len` of them, from a `str` that cannot overlap a
        // buffer the caller owns.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    text.len()
}
