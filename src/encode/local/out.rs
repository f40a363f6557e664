//! The CU's output as it is built: records, and names interned into the
//! CU's string list (by `.debug_str` offset, or by content for the rest).

use hashbrown::HashMap;
use nonmax::NonMaxU32;

/// A local string's offset in `.debug_str`. `Option<DebugStrOff>` is
/// `None` for a name that has none (inline or synthesized) and fits in
/// four bytes: `.debug_str` stops short of 4 GiB (the decoder refuses
/// larger sections), which leaves `u32::MAX` for the niche.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct DebugStrOff(NonMaxU32);

impl DebugStrOff {
    #[inline]
    pub(crate) fn new(off: u32) -> Option<DebugStrOff> {
        NonMaxU32::new(off).map(DebugStrOff)
    }
    #[inline]
    pub(crate) fn get(self) -> u32 {
        self.0.get()
    }
}

use super::{Ctx, CuOut};
use crate::encode::offmap::OffMap;

pub(super) struct Out<'a> {
    pub(super) o: CuOut<'a>,
    /// Strings not in `.debug_str`, by content.
    pub(super) ids: HashMap<&'a [u8], u32>,
    /// Strings in `.debug_str`, by offset: a name at one offset is one
    /// string. The worker thread's map, lent for the CU ([`OFF_MAP`]).
    pub(super) by_off: OffMap,
    /// Address and length of `.debug_str`.
    pub(super) str_sec: (usize, usize),
    /// Where vlen wraps ([`super::vlen_mask`]).
    pub(super) vlen_mask: u32,
}

impl<'a> Out<'a> {
    pub(super) fn s(&mut self, s: &'a [u8]) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let n = self.o.strs.len() as u32 + 1;
        let p = (s.as_ptr() as usize).wrapping_sub(self.str_sec.0);
        if p < self.str_sec.1 {
            let strs = &mut self.o.strs;
            let offs = &mut self.o.strs_off;
            return self.by_off.get_or_insert(p as u32, || {
                strs.push(s);
                offs.push(DebugStrOff::new(p as u32));
                n
            });
        }
        let strs = &mut self.o.strs;
        let offs = &mut self.o.strs_off;
        *self.ids.entry(s).or_insert_with(|| {
            strs.push(s);
            offs.push(None);
            n
        })
    }
    pub(super) fn begin(&mut self) {
        self.o.offs.push(self.o.words.len() as u32);
    }
    pub(super) fn rec(&mut self, w: &[u32]) {
        self.begin();
        self.o.words.extend_from_slice(w);
    }
    pub(super) fn bump_vlen(&mut self) {
        let s = *self.o.offs.last().unwrap() as usize;
        let info = &mut self.o.words[s + 1];
        *info = (*info & !self.vlen_mask) | ((*info + 1) & self.vlen_mask);
    }
    pub(super) fn set_kflag(&mut self) {
        let s = *self.o.offs.last().unwrap() as usize;
        self.o.words[s + 1] |= 1 << 31;
    }
}

thread_local! {
    /// The worker thread's string map, kept from CU to CU (a CU that fails
    /// drops it; the next one starts a new map).
    pub(super) static OFF_MAP: std::cell::Cell<OffMap> = std::cell::Cell::new(OffMap::default());
}

/// Looks up, in parallel with the merge, which strings already have a BTF
/// offset, so that the sequential merge does not have to.
pub(super) fn finish<'a>(ctx: &Ctx<'_, 'a>, mut o: CuOut<'a>) -> CuOut<'a> {
    if let Some(cache) = ctx.str_cache {
        o.strs_known = o
            .strs_off
            .iter()
            .map(|&off| off.and_then(|off| cache.get(off.get())))
            .collect();
    }
    if ctx.collapse && !o.shifted_ids {
        o.type_hashes = super::super::collapse::hash_types(&o);
    }
    o
}
