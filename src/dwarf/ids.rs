//! The id spaces of a decoded unit, each its own type: a DIE's offset as
//! references name it ([`UnitOff`]), a placed type ([`CoreId`]), a member's
//! bitfield record ([`BitsId`]), and a run of children in one of the unit's
//! columns ([`IdxRange`]). `Option` of each is as small as the id: the
//! values that cannot occur (offset `u32::MAX`, core id 0) are the niche.

use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::ops::{Index, Range};

/// A DIE's offset in `.debug_info`, where messages point (a supplementary
/// file's DIEs are placed after the file's own, as in [`super::InfoSpace`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct DieOffset(u64);

impl DieOffset {
    #[inline]
    pub const fn new(off: u64) -> DieOffset {
        DieOffset(off)
    }
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::LowerHex for DieOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::LowerHex::fmt(&self.0, f)
    }
}

/// A DIE's offset as references name it: in its unit, or in `.debug_info`
/// for the parts of a merged unit. Offsets stop short of 4 GiB (the decoder
/// refuses larger sections), which frees `u32::MAX` for `None`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct UnitOff(NonZeroU32);

// By offset (the stored form is inverted).
impl Ord for UnitOff {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.get().cmp(&other.get())
    }
}
impl PartialOrd for UnitOff {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl UnitOff {
    /// `None` for `u32::MAX`, the one offset no DIE has.
    #[inline]
    pub const fn new(off: u32) -> Option<UnitOff> {
        match NonZeroU32::new(!off) {
            Some(n) => Some(UnitOff(n)),
            None => None,
        }
    }

    #[inline]
    pub const fn get(self) -> u32 {
        !self.0.get()
    }
}

impl std::fmt::Debug for UnitOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.get())
    }
}

/// A placed type of a unit, numbered 1, 2, … in placing order (containers
/// after their contents); also its unit-local BTF type id, where void is 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(transparent)]
pub struct CoreId(NonZeroU32);

impl CoreId {
    /// The core id of the slot at `index` in [`super::Cu::slots`].
    #[inline]
    pub fn at(index: usize) -> CoreId {
        CoreId(NonZeroU32::new(index as u32 + 1).expect("fewer than 4 G slots"))
    }

    /// `None` for 0 (void).
    #[inline]
    pub const fn new(id: u32) -> Option<CoreId> {
        match NonZeroU32::new(id) {
            Some(n) => Some(CoreId(n)),
            None => None,
        }
    }

    #[inline]
    pub const fn get(self) -> u32 {
        self.0.get()
    }

    /// Its index in [`super::Cu::slots`].
    #[inline]
    pub const fn index(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// The unit-local type id of an optional core id: 0 for void.
#[inline]
pub fn local_id(core: Option<CoreId>) -> u32 {
    core.map_or(0, CoreId::get)
}

/// A member's bitfield attributes in [`super::Cu::member_bits`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub struct BitsId(NonZeroU32);

impl BitsId {
    #[inline]
    pub(super) fn at(index: usize) -> BitsId {
        BitsId(NonZeroU32::new(index as u32 + 1).expect("fewer than 4 G members"))
    }

    #[inline]
    pub(super) fn index(self) -> usize {
        self.0.get() as usize - 1
    }

    #[inline]
    pub(super) fn shifted(self, by: usize) -> BitsId {
        BitsId::at(self.index() + by)
    }
}

/// A run of `T`s in one of the unit's columns: a type's members, a
/// function's parameters, a declaration's annotations.
#[repr(C)]
pub struct IdxRange<T> {
    start: u32,
    len: u32,
    of: PhantomData<fn() -> T>,
}

impl<T> IdxRange<T> {
    pub const EMPTY: IdxRange<T> = IdxRange::new(0, 0);

    #[inline]
    pub const fn new(start: usize, len: usize) -> IdxRange<T> {
        IdxRange {
            start: start as u32,
            len: len as u32,
            of: PhantomData,
        }
    }

    /// The run from `start` to the end of `column`.
    #[inline]
    pub fn tail(column: &[T], start: usize) -> IdxRange<T> {
        IdxRange::new(start, column.len() - start)
    }

    #[inline]
    pub const fn len(self) -> usize {
        self.len as usize
    }

    #[inline]
    pub const fn is_empty(self) -> bool {
        self.len == 0
    }

    #[inline]
    pub const fn start(self) -> usize {
        self.start as usize
    }

    #[inline]
    pub const fn range(self) -> Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }

    /// The run without its element type, for a field whose column depends
    /// on another field (a type's children: members, enumerators or
    /// parameters by its tag).
    #[inline]
    pub const fn erased(self) -> IdxRange<()> {
        IdxRange::new(self.start as usize, self.len as usize)
    }

    /// The same run after `by` more entries were put in front of it.
    #[inline]
    pub const fn shifted(self, by: usize) -> IdxRange<T> {
        IdxRange::new(self.start as usize + by, self.len as usize)
    }
}

impl<T> Clone for IdxRange<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for IdxRange<T> {}

impl<T> PartialEq for IdxRange<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.start, self.len) == (other.start, other.len)
    }
}
impl<T> Eq for IdxRange<T> {}

impl<T> Default for IdxRange<T> {
    fn default() -> Self {
        IdxRange::EMPTY
    }
}

impl<T> std::fmt::Debug for IdxRange<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..+{}", self.start, self.len)
    }
}

// On `Vec`, not `[T]`: a slice's own `SliceIndex` indexing is tried first
// there and refuses any other index type.
impl<T> Index<IdxRange<T>> for Vec<T> {
    type Output = [T];
    #[inline]
    fn index(&self, r: IdxRange<T>) -> &[T] {
        &self[r.range()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_as_small_as_the_ids() {
        assert_eq!(size_of::<Option<UnitOff>>(), 4);
        assert_eq!(size_of::<Option<CoreId>>(), 4);
        assert_eq!(size_of::<Option<BitsId>>(), 4);
        assert_eq!(size_of::<IdxRange<u8>>(), 8);
    }

    #[test]
    fn ids_round_trip() {
        assert_eq!(UnitOff::new(0).map(UnitOff::get), Some(0));
        assert_eq!(UnitOff::new(u32::MAX - 1).map(UnitOff::get), Some(u32::MAX - 1));
        assert_eq!(UnitOff::new(u32::MAX), None);
        assert!(UnitOff::new(3) < UnitOff::new(4));
        assert_eq!(CoreId::new(0), None);
        assert_eq!(CoreId::at(0).get(), 1);
        assert_eq!(local_id(None), 0);
        #[allow(clippy::useless_vec)] // indexing by a run is for Vec
        let v = vec![1, 2, 3, 4];
        assert_eq!(&v[IdxRange::new(1, 2)], &[2, 3]);
        assert_eq!(IdxRange::<u8>::new(1, 2).shifted(3).range(), 4..6);
    }
}
