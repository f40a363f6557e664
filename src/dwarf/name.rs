//! [`Name`]: a DIE's name in the columns where it is most of a record.

use std::marker::PhantomData;
use std::ptr::NonNull;

/// A name as the decoder read it (the bytes from the name on, to be cut at
/// its NUL by [`super::nm`]), in 12 bytes aligned to 4 where a slice takes
/// 16 aligned to 8: the member and parameter columns hold one per record,
/// and an LTO file's merged unit holds 5 M of them at once.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
pub struct Name<'a> {
    ptr: NonNull<u8>,
    len: u32,
    bytes: PhantomData<&'a [u8]>,
}

// SAFETY: a `Name` is a `&[u8]` stored in two parts; shared byte slices
// may be sent between threads.
unsafe impl Send for Name<'_> {}
// SAFETY: and shared between them (the bytes are never written).
unsafe impl Sync for Name<'_> {}

impl<'a> Name<'a> {
    /// `s`, of which at most the first 4 GiB are kept: the decoder refuses
    /// larger sections, and a name stops at its section's end.
    #[inline]
    pub fn new(s: &'a [u8]) -> Name<'a> {
        Name {
            ptr: NonNull::from(s).cast(),
            len: s.len().min(u32::MAX as usize) as u32,
            bytes: PhantomData,
        }
    }

    #[inline]
    pub fn get(self) -> &'a [u8] {
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: `ptr` and `len` come from a `&'a [u8]` (`len` at most its
        // length), whose pointer carries the provenance of all of it.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len as usize) }
    }
}

impl<'a> From<&'a [u8]> for Name<'a> {
    fn from(s: &'a [u8]) -> Name<'a> {
        Name::new(s)
    }
}

impl std::ops::Deref for Name<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.get()
    }
}

impl std::fmt::Debug for Name<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(super::nm(self.get())))
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}
impl Eq for Name<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_its_slice_in_12_bytes() {
        assert_eq!((size_of::<Name<'_>>(), align_of::<Name<'_>>()), (12, 4));
        let section = b"\0first\0second";
        for s in [&section[..0], &section[1..], &section[7..], &section[13..]] {
            let n = Name::new(s);
            assert_eq!((n.get(), &*n), (s, s));
            assert_eq!(n.get().as_ptr(), s.as_ptr());
        }
    }
}
