//! BTF 2026's format: a header that names a kind-layout section, and the
//! section itself.
//!
//! The section lists, for each kind the encoder knew, how many bytes follow
//! the 12-byte common record (`info_sz`) and how many each of its `vlen`
//! entries takes (`elem_sz`). A reader that meets a kind it does not know
//! can then step over its records instead of giving up on the whole blob.
//! It sits between the types and the strings. libbpf v1.8.0 writes a
//! 32-byte header on every blob (`layout_off`/`layout_len` zero when there
//! is no section) and, when asked, the layout of the 20 kinds it knows.

use super::kind::{KIND_LIMIT, KIND_MAX, Kind};

/// The original header's length; BTF 2026's is [`HDR_LEN_2026`].
pub const HDR_LEN_ORIGINAL: u32 = 24;
/// The header with `layout_off` and `layout_len`.
pub const HDR_LEN_2026: u32 = 32;

/// One kind's entry in the layout section (4 bytes on disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KindLayout {
    /// Bytes after the common record.
    pub info_sz: u8,
    /// Bytes per vlen entry.
    pub elem_sz: u8,
    /// Unused in BTF 2026; a reader refuses what it cannot interpret.
    pub flags: u16,
}

impl KindLayout {
    /// What this crate knows of `kind`'s records.
    pub fn of(kind: Kind) -> KindLayout {
        KindLayout {
            info_sz: (kind.trailing_words(0) * 4) as u8,
            elem_sz: ((kind.trailing_words(1) - kind.trailing_words(0)) * 4) as u8,
            flags: 0,
        }
    }
}

/// A blob's layout section: entry `k` describes kind `k`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout(Vec<KindLayout>);

impl Layout {
    /// The section an encoder writes: every kind this crate knows, kind 0
    /// (which no record has) included, as libbpf v1.8.0 writes it.
    pub fn known() -> Layout {
        Layout(
            (0..=KIND_MAX)
                .map(|k| KindLayout::of(Kind::from_u8(k).expect("known kind")))
                .collect(),
        )
    }

    /// A section as read (the reader has validated it).
    pub fn from_entries(entries: Vec<KindLayout>) -> Layout {
        Layout(entries)
    }

    pub fn entries(&self) -> &[KindLayout] {
        &self.0
    }

    pub fn get(&self, kind: u32) -> Option<KindLayout> {
        self.0.get(kind as usize).copied()
    }

    /// Its size on disk.
    pub fn byte_len(&self) -> usize {
        self.0.len() * 4
    }

    /// The length in words of a record of `kind` with `vlen` entries, as
    /// this section describes it.
    pub fn record_words(&self, kind: u32, vlen: usize) -> Option<usize> {
        let l = self.get(kind)?;
        Some(3 + l.info_sz as usize / 4 + vlen * (l.elem_sz as usize / 4))
    }
}

/// How a blob is laid out around its records: the header's length and the
/// optional layout section. The default is the original format (24-byte
/// header, no section), what pahole v1.31 writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    hdr_len: u32,
    layout: Option<Layout>,
}

impl Default for Format {
    fn default() -> Format {
        Format::original()
    }
}

impl Format {
    /// The 24-byte header of pahole v1.31 and libbpf before v1.8.
    pub fn original() -> Format {
        Format {
            hdr_len: HDR_LEN_ORIGINAL,
            layout: None,
        }
    }

    /// What libbpf v1.8.0 writes: the 32-byte header, with the layout
    /// section of the kinds it knows when `layout` is asked for.
    pub fn btf_2026(layout: bool) -> Format {
        Format {
            hdr_len: HDR_LEN_2026,
            layout: layout.then(Layout::known),
        }
    }

    /// A format as read: `hdr_len` past 32 carried zeros the reader checked.
    pub(super) fn read(hdr_len: u32, layout: Option<Layout>) -> Format {
        Format { hdr_len, layout }
    }

    pub fn hdr_len(&self) -> u32 {
        self.hdr_len
    }

    pub fn layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// Whether the header has the layout fields.
    pub fn has_layout_fields(&self) -> bool {
        self.hdr_len >= HDR_LEN_2026
    }

    /// The largest vlen a record may have in this format. The original
    /// format's field is 16 bits; a blob with a layout section is read by
    /// tools and kernels of 2026, which read 24.
    pub fn vlen_limit(&self) -> u32 {
        if self.layout.is_some() {
            super::kind::VLEN_LIMIT
        } else {
            0xffff
        }
    }
}

/// The kind numbers a record may carry: 1 to 127.
pub(super) fn kind_in_range(kind: u32) -> bool {
    (1..=KIND_LIMIT).contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_layout_is_libbpf_1_8s_table() {
        let l = Layout::known();
        assert_eq!(l.entries().len(), 20);
        assert_eq!(l.byte_len(), 80);
        let sz = |k: Kind| {
            let e = l.get(k as u32).unwrap();
            (e.info_sz, e.elem_sz)
        };
        assert_eq!(sz(Kind::Unkn), (0, 0));
        assert_eq!(sz(Kind::Int), (4, 0));
        assert_eq!(sz(Kind::Array), (12, 0));
        assert_eq!(sz(Kind::Struct), (0, 12));
        assert_eq!(sz(Kind::Enum), (0, 8));
        assert_eq!(sz(Kind::FuncProto), (0, 8));
        assert_eq!(sz(Kind::Var), (4, 0));
        assert_eq!(sz(Kind::Datasec), (0, 12));
        assert_eq!(sz(Kind::DeclTag), (4, 0));
        assert_eq!(sz(Kind::Enum64), (0, 12));
        assert_eq!(sz(Kind::Ptr), (0, 0));
        for k in 0..=KIND_MAX {
            let kind = Kind::from_u8(k).unwrap();
            for vlen in [0, 1, 7] {
                assert_eq!(
                    l.record_words(k as u32, vlen),
                    Some(3 + kind.trailing_words(vlen as u32) as usize)
                );
            }
        }
    }
}
