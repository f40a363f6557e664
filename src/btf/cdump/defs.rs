//! The writer of definitions: struct and union bodies with their padding
//! and bitfields, enums, typedefs and forward declarations.

use std::io::Write as _;

use super::layout::{align_of, is_packed, resolve_size, roundup};
use super::{Dumper, Result};
use crate::btf::{Kind, Type};

/// Tabs beyond this indent level are not added (the reference's prefix table).
const MAX_INDENT: usize = 13;

impl<'a> Dumper<'a> {
    fn indent(&mut self, lvl: usize) {
        for _ in 0..lvl.min(MAX_INDENT) {
            self.out.push(b'\t');
        }
    }

    pub(super) fn struct_fwd(&mut self, id: u32, t: Type<'_>) {
        self.out
            .extend_from_slice(if t.kind() == Kind::Struct { b"struct" } else { b"union" });
        if t.name_off().0 != 0 {
            self.out.push(b' ');
        }
        self.put_tag_name(id);
    }

    pub(super) fn fwd_def(&mut self, id: u32, t: Type<'_>) {
        self.out
            .extend_from_slice(if t.kflag() { b"union " } else { b"struct " });
        self.put_tag_name(id);
    }

    pub(super) fn enum_fwd(&mut self, id: u32) {
        self.out.extend_from_slice(b"enum ");
        self.put_tag_name(id);
    }

    pub(super) fn enum_def(&mut self, id: u32, t: Type<'a>, lvl: usize) {
        self.out.extend_from_slice(b"enum");
        if t.name_off().0 != 0 {
            self.out.push(b' ');
        }
        self.put_tag_name(id);
        if t.vlen() == 0 {
            return;
        }
        self.out.extend_from_slice(b" {");
        let signed = t.kflag();
        // Enumerators share the ordinary identifier namespace.
        if t.kind() == Kind::Enum {
            for [n, v] in t.pairs() {
                self.enumerator(n, lvl);
                if signed {
                    write!(self.out, " = {},", v as i32).unwrap();
                } else {
                    write!(self.out, " = {},", v).unwrap();
                }
            }
        } else {
            for [n, lo, hi] in t.triples() {
                self.enumerator(n, lvl);
                let v = (hi as u64) << 32 | lo as u64;
                if signed {
                    write!(self.out, " = {}LL,", v as i64).unwrap();
                } else {
                    write!(self.out, " = {}ULL,", v).unwrap();
                }
            }
        }
        self.out.push(b'\n');
        self.indent(lvl);
        self.out.push(b'}');
        // bpftool 7.1.0 stops here; see Options::enum_sizes.
        if self.opts.enum_sizes {
            if t.size() == 1 {
                self.out.extend_from_slice(b" __attribute__((mode(byte)))");
            } else if t.size() == 8 && self.ptr_sz == 8 {
                // C widens an enum to 8 bytes by itself only when a value
                // needs the upper half.
                let wide = t.kind() == Kind::Enum64 && t.triples().any(|[_, _, hi]| hi != 0);
                if !wide {
                    self.out.extend_from_slice(b" __attribute__((mode(word)))");
                }
            }
        }
    }

    fn enumerator(&mut self, name_off: u32, lvl: usize) {
        let name = self.str(name_off);
        let n = Self::bump(&mut self.ident_names, name);
        self.out.push(b'\n');
        self.indent(lvl + 1);
        self.out.extend_from_slice(name);
        if n > 1 {
            write!(self.out, "___{n}").unwrap();
        }
    }

    pub(super) fn typedef_def(&mut self, id: u32, t: Type<'a>, lvl: usize, depth: u32) -> Result<()> {
        let name = self.resolve_name(id, true);
        // Old GCCs describe __gnuc_va_list as a typedef of void.
        if t.type_id().0 == 0 && &name[..] == b"__gnuc_va_list" {
            self.out.extend_from_slice(b"typedef __builtin_va_list __gnuc_va_list");
            return Ok(());
        }
        self.out.extend_from_slice(b"typedef ");
        self.decl(t.type_id().0, &name, lvl, depth)
    }

    pub(super) fn struct_def(&mut self, id: u32, t: Type<'a>, lvl: usize, depth: u32) -> Result<()> {
        let is_struct = t.kind() == Kind::Struct;
        let align = align_of(self.btf, self.ptr_sz, id, 0) as i64;
        let packed = is_struct && is_packed(self.btf, self.ptr_sz, t);
        self.struct_fwd(id, t);
        self.out.extend_from_slice(b" {");
        let kflag = t.kflag();
        let mut off: i64 = 0;
        let mut prev_bitfield = false;
        for [name_off, ty, raw_off] in t.triples() {
            let (m_off, m_bits) = if kflag {
                (raw_off & 0xff_ffff, raw_off >> 24)
            } else {
                (raw_off, 0)
            };
            let m_off = m_off as i64;
            let m_align = if packed {
                1
            } else {
                align_of(self.btf, self.ptr_sz, ty, 0) as i64
            };
            let in_bitfield = prev_bitfield && m_bits != 0;
            self.bit_padding(off, m_off, m_align, in_bitfield, lvl + 1);
            self.out.push(b'\n');
            self.indent(lvl + 1);
            self.decl(ty, self.str(name_off), lvl + 1, depth)?;
            if m_bits != 0 {
                write!(self.out, ": {m_bits}").unwrap();
                off = m_off + m_bits as i64;
                prev_bitfield = true;
            } else {
                let sz = resolve_size(self.btf, self.ptr_sz, ty).unwrap_or(0);
                off = m_off + sz as i64 * 8;
                prev_bitfield = false;
            }
            self.out.push(b';');
        }
        if is_struct {
            self.bit_padding(off, t.size() as i64 * 8, align, false, lvl + 1);
        }
        // An empty struct stays on one line.
        if t.vlen() != 0 || t.size() != 0 {
            self.out.push(b'\n');
            self.indent(lvl);
        }
        self.out.push(b'}');
        if packed {
            self.out.extend_from_slice(b" __attribute__((packed))");
        }
        Ok(())
    }

    /// Fills the gap between bit offsets `cur` and `next` with anonymous
    /// bitfields (`long: 64;`, `int: 0;`...), relying on the natural alignment
    /// of the next member where that closes the gap by itself.
    fn bit_padding(&mut self, mut cur: i64, next: i64, next_align: i64, in_bitfield: bool, lvl: usize) {
        if cur >= next {
            return;
        }
        let pads: [(&[u8], i64); 4] = [
            (b"long", self.ptr_sz as i64 * 8),
            (b"int", 32),
            (b"short", 16),
            (b"char", 8),
        ];
        // The widest padding type whose next boundary is within the gap.
        let mut pick = pads.len() - 1;
        let mut new_off = 0;
        for (i, &(_, bits)) in pads.iter().enumerate() {
            new_off = roundup(cur, bits);
            pick = i;
            if new_off <= next {
                break;
            }
        }
        let (mut pad_name, mut pad_bits) = pads[pick];
        if new_off > cur && new_off <= next {
            // An explicit `type: 0` is needed when the next member's own
            // alignment would not reach that boundary, or when a `type: N`
            // would fit in the hole before it and be packed there.
            let need_mark = in_bitfield
                || (new_off == next && roundup(cur, next_align * 8) != new_off)
                || (new_off != next && next - new_off <= new_off - cur);
            if need_mark {
                self.pad_line(pad_name, if in_bitfield { new_off - cur } else { 0 }, lvl);
            }
            cur = new_off;
        }
        while cur != next {
            let bits = (next - cur).min(pad_bits);
            if bits == pad_bits {
                self.pad_line(pad_name, pad_bits, lvl);
                cur += bits;
                continue;
            }
            // The tail gets the smallest type that holds it.
            for &(name, b) in pads.iter().rev() {
                pad_name = name;
                pad_bits = b;
                if b >= bits {
                    self.pad_line(name, bits, lvl);
                    cur += bits;
                    break;
                }
            }
        }
    }

    fn pad_line(&mut self, ty: &[u8], bits: i64, lvl: usize) {
        self.out.push(b'\n');
        self.indent(lvl);
        self.out.extend_from_slice(ty);
        write!(self.out, ": {bits};").unwrap();
    }
}
