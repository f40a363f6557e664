//! Struct and union members: where BTF places them, and why it cannot.

use super::out::Out;
use super::{Enc, kept_entries};
use crate::btf;
use crate::dwarf::nm;
use crate::encode::EncodeError;

impl<'a> Enc<'_, '_, 'a> {
    /// (bit offset, bit size) as BTF stores them (32 bits, cut as the
    /// reference cuts them), and whether the offset was cut: then the
    /// member lies 512 MiB or more into its struct.
    #[inline]
    pub(super) fn member_bit_offset(&self, m: &crate::dwarf::Member<'a>) -> (u32, u32, bool) {
        if m.bits.is_none() {
            return plain_bit_offset(self.cu.member_loc(m));
        }
        let little = self.ctx.elf.endian == btf::Endian::Little;
        let storage = || self.size_of(self.strip(self.cu.core(m.ty)), 0);
        bit_offset_of(self.cu.member_loc(m), self.cu.bits(m), storage, little)
    }

    /// Writes the members of the struct or union just begun, in the order
    /// given, with vlen and kind_flag set once. `false` if BTF cannot place some member: nothing
    /// is written then, and [`Enc::member_error`] names it (the CU then
    /// fails, so the names interned here are moot).
    pub(super) fn emit_members<'m>(
        &self,
        o: &mut Out<'a>,
        members: impl ExactSizeIterator<Item = &'m crate::dwarf::Member<'a>>,
        union: bool,
    ) -> bool
    where
        'a: 'm,
    {
        let rec_start = *o.o.offs.last().expect("the struct's record was just begun") as usize;
        let n = members.len();
        let keep = kept_entries(n, o.vlen_mask);
        o.o.words.reserve(3 * keep);
        let (mut kflag, mut big) = (false, false);
        for (pos, m) in members.enumerate() {
            let (bit_off, bit_size, cut) = self.member_bit_offset(m);
            let is_bitfield = bit_size != 0 || bit_off % 8 != 0;
            // what member_error refuses (some only once the struct's
            // kind_flag is known, hence `big`)
            if cut || (is_bitfield && (bit_size == 0 || bit_off > 0xff_ffff)) || (union && bit_off != 0) {
                o.o.words.truncate(rec_start + 3);
                return false;
            }
            kflag |= is_bitfield;
            big |= bit_off > 0xff_ffff;
            let mn = o.s(m.name.get());
            if pos < keep {
                let ty = crate::dwarf::local_id(self.cu.core(m.ty));
                o.o.words.extend_from_slice(&[mn, ty, bit_off | (bit_size << 24)]);
            }
        }
        if kflag && big {
            o.o.words.truncate(rec_start + 3);
            return false;
        }
        let info = &mut o.o.words[rec_start + 1];
        *info = (*info & !btf::VLEN_LIMIT) | keep as u32 | if kflag { 1 << 31 } else { 0 };
        true
    }

    /// Why [`Enc::emit_members`] refused these members: first a member
    /// lying further into the struct than BTF's offset field holds (32
    /// bits; 24 once the struct has a bitfield, as kind_flag takes the top
    /// 8) — the reference cuts such an offset silently, giving a wrong
    /// layout or one the kernel refuses — then, in `order`, a bitfield BTF
    /// cannot place or a union member off offset 0.
    #[cold]
    #[inline(never)]
    pub(super) fn member_error(
        &self,
        members: &[crate::dwarf::Member<'a>],
        order: Option<&[u32]>,
        union: bool,
        die: crate::dwarf::DieOffset,
    ) -> EncodeError {
        let placed: smallvec::SmallVec<[(u32, u32, bool); 32]> =
            members.iter().map(|m| self.member_bit_offset(m)).collect();
        let kflag = placed.iter().any(|&(bo, bs, _)| bs != 0 || bo % 8 != 0);
        let name = |m: &crate::dwarf::Member<'_>| String::from_utf8_lossy(nm(m.name.get())).into_owned();
        for (m, &(bo, _, cut)) in members.iter().zip(&placed) {
            if cut || (kflag && bo > 0xff_ffff) {
                return self.unsupported(
                    die,
                    format!(
                        "its DW_TAG_member `{}` lies {} bytes into the struct: more than BTF's {}-bit member offset holds{}",
                        name(m),
                        self.cu.member_loc(m).or(self.cu.bits(m).data_bit_offset.map(|b| b / 8)).unwrap_or(0),
                        if cut { 32 } else { 24 },
                        if cut { "" } else { " in a struct with bitfields" },
                    ),
                );
            }
        }
        for pos in 0..members.len() {
            let i = order.map_or(pos, |o| o[pos] as usize);
            let (m, (bit_off, bit_size, _)) = (&members[i], placed[i]);
            if (bit_size != 0 || bit_off % 8 != 0) && (bit_size == 0 || bit_off > 0xff_ffff) {
                return self.unsupported(
                    die,
                    format!(
                        "its DW_TAG_member `{}` at bit offset {bit_off}: BTF cannot place it",
                        name(m)
                    ),
                );
            }
            if union && bit_off != 0 {
                return self.unsupported(
                    die,
                    format!(
                        "its DW_TAG_member `{}` of a union at bit offset {bit_off}: BTF cannot place it",
                        name(m)
                    ),
                );
            }
        }
        // emit_members refuses only what one of the loops above names
        self.unsupported(die, "a member BTF cannot place".into())
    }
}

/// [`bit_offset_of`] for a member without bitfield attributes (nearly every
/// member; the general path showed in a vmlinux encode's profile): every
/// adjustment is zero, and the byte offset's bits fit 32 bits below 2^29
/// bytes.
#[inline]
pub(super) fn plain_bit_offset(loc: Option<u64>) -> (u32, u32, bool) {
    let loc = loc.unwrap_or(0);
    ((loc as u32).wrapping_mul(8), 0, loc >= 1 << 29)
}

/// A member's (bit offset, bit size, cut) from its byte offset and bitfield
/// attributes; `storage` gives the byte size of its type when the member
/// has none of its own.
pub(super) fn bit_offset_of(
    loc: Option<u64>,
    b: crate::dwarf::MemberBits,
    storage: impl FnOnce() -> u64,
    little: bool,
) -> (u32, u32, bool) {
    let bit_size = b.bit_size.map(|b| b as u8 as u32).unwrap_or(0);
    if let Some(dbo) = b.data_bit_offset {
        return (dbo as u32, bit_size, dbo > u32::MAX as u64);
    }
    let wide = loc.unwrap_or(0) as u128 * 8;
    let byte_off = loc.unwrap_or(0) as u32;
    let mut bit_off = byte_off.wrapping_mul(8);
    if b.bit_size.is_some() {
        let storage = match b.byte_size {
            Some(b) => b,
            None => storage(),
        } as u32;
        let bo = b.bit_offset.unwrap_or(0) as i8 as i32 as u32;
        if little {
            bit_off = bit_off.wrapping_add(storage.wrapping_mul(8).wrapping_sub(bo).wrapping_sub(bit_size));
        } else {
            bit_off = bit_off.wrapping_add(bo);
        }
    }
    // The bitfield adjustment is small (within the storage unit), so the
    // true offset is the byte offset's plus the cut offset's distance
    // from the cut byte offset.
    let adjust = bit_off.wrapping_sub(byte_off.wrapping_mul(8)) as i32 as i128;
    let cut = wide as i128 + adjust != bit_off as i128;
    (bit_off, bit_size, cut)
}
