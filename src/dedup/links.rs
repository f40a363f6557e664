//! The link column: libbpf's `map` as `resolve` follows it, plain or (for
//! the chunked passes) with enum forward declarations tagged.

use std::sync::atomic::Ordering::Relaxed;

use super::incremental;
use crate::btf::TypeId;

/// `map` as `resolve` reads it, per id: the id itself unless mapped.
pub(super) trait Links {
    fn get(&self, id: TypeId) -> TypeId;
    fn set(&mut self, id: TypeId, to: TypeId);
    /// libbpf's first test of a pair: both ends resolve to the same type.
    #[inline(always)]
    fn settled(&self, c: TypeId, k: TypeId) -> bool
    where
        Self: Sized,
    {
        resolve_in(self, c) == resolve_in(self, k)
    }
    /// Whether a walk compared a type whose link goes through `f`.
    fn touched_through(&self, _f: TypeId) -> bool {
        false
    }
}

impl Links for Vec<u32> {
    #[inline(always)]
    fn get(&self, id: TypeId) -> TypeId {
        TypeId::new(self[id.index()])
    }
    #[inline(always)]
    fn set(&mut self, id: TypeId, to: TypeId) {
        self[id.index()] = to.get();
    }
}

/// The link column of dedup's chunked passes ([`Incremental`]): a link per
/// id, the ids of enum forward declarations tagged with [`ENUM_FWD`] (type
/// ids are below 2^31), and which of those a walk compared by their links.
/// The tag rides on the word the walk loads anyway: a separate bit column
/// cost instructions on every walk, for the handful of enum fwds a vmlinux
/// has.
#[derive(Default)]
pub(super) struct TrackedLinks {
    link: Vec<u32>,
    touched: std::cell::RefCell<hashbrown::HashSet<u32>>,
}

/// The tag of an enum forward declaration's link ([`TrackedLinks`]).
const ENUM_FWD: u32 = 1 << 31;

impl TrackedLinks {
    /// Room for `n` more ids.
    pub(super) fn reserve(&mut self, n: usize) {
        incremental::reserve_step(&mut self.link, n);
    }

    pub(super) fn push(&mut self, id: TypeId, enum_fwd: bool) {
        debug_assert_eq!(id.index(), self.link.len());
        let id = id.get();
        self.link.push(if enum_fwd { id | ENUM_FWD } else { id });
    }

    #[cold]
    pub(super) fn note_touched(&self, c: TypeId, k: TypeId) {
        let mut t = self.touched.borrow_mut();
        for id in [c, k] {
            if self.link[id.index()] & ENUM_FWD != 0 {
                t.insert(id.get());
            }
        }
    }

    /// The plain link column (tags dropped).
    pub(super) fn into_column(self) -> Vec<u32> {
        let mut link = self.link;
        for l in &mut link {
            *l &= !ENUM_FWD;
        }
        link
    }
}

impl Links for TrackedLinks {
    #[inline(always)]
    fn get(&self, id: TypeId) -> TypeId {
        TypeId::new(self.link[id.index()] & !ENUM_FWD)
    }
    #[inline(always)]
    fn set(&mut self, id: TypeId, to: TypeId) {
        let l = &mut self.link[id.index()];
        *l = to.get() | (*l & ENUM_FWD);
    }
    /// Also notes the enum fwds among `c` and `k` (see [`Incremental`]).
    #[inline(always)]
    fn settled(&self, c: TypeId, k: TypeId) -> bool {
        let (lc, lk) = (self.link[c.index()], self.link[k.index()]);
        if (lc | lk) & ENUM_FWD != 0 {
            self.note_touched(c, k);
        }
        let (lc, lk) = (TypeId::new(lc & !ENUM_FWD), TypeId::new(lk & !ENUM_FWD));
        let rc = if lc == c { c } else { resolve_in(self, lc) };
        let rk = if lk == k { k } else { resolve_in(self, lk) };
        rc == rk
    }
    fn touched_through(&self, f: TypeId) -> bool {
        self.touched
            .borrow()
            .iter()
            .any(|&x| x == f.get() || self.get(TypeId::new(x)) == f)
    }
}

/// Follows canonical links to the end of the chain.
#[inline(always)]
pub(super) fn resolve_in<L: Links>(link: &L, mut id: TypeId) -> TypeId {
    loop {
        let m = link.get(id);
        if m == id {
            return id;
        }
        id = m;
    }
}

/// `v` as atomics, for threads that each write their own elements.
pub(super) fn shared_u32(v: &mut [u32]) -> &[std::sync::atomic::AtomicU32] {
    use std::sync::atomic::AtomicU32;
    const { assert!(std::mem::align_of::<AtomicU32>() == std::mem::align_of::<u32>()) };
    // SAFETY: AtomicU32 has the size and bit validity of u32 and (asserted
    // above) its alignment; `v` is borrowed exclusively for as long as the
    // view lives, so every access meanwhile goes through the atomics.
    unsafe { &*(v as *mut [u32] as *const [AtomicU32]) }
}

/// Follows links shared by threads to the end of the chain ([`resolve_in`]
/// on a [`shared_u32`] view): a link another thread rewrites meanwhile
/// points further along the same chain.
#[inline]
pub(super) fn resolve_shared(link: &[std::sync::atomic::AtomicU32], mut id: TypeId) -> TypeId {
    loop {
        let m = TypeId::new(link[id.index()].load(Relaxed));
        if m == id {
            return id;
        }
        id = m;
    }
}
