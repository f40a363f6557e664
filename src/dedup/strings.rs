//! libbpf's string pass, for BTF parsed from bytes ([`super::StringMode::Dedup`]).

use crate::btf::{Btf, StrTab};

/// libbpf marks strings as already deduplicated when the own string section
/// is empty (split) or just the empty string (standalone) on first change.
pub(super) fn strings_already_unique(btf: &Btf) -> bool {
    let n = btf.raw_strings().len();
    n == 0 || (btf.base().is_none() && n == 1)
}

/// The string pass: a new table with `""` (standalone only) and then every
/// referenced string in id order, record order; base strings keep base offsets.
pub(super) fn dedup_strings(btf: &Btf) -> (Vec<u32>, StrTab) {
    let mut words = btf.raw_words().to_vec();
    let start_str = btf.start_str_off();
    let mut tab = match btf.base() {
        Some(b) => StrTab::new_split(start_str, b.clone()),
        None => StrTab::new_base(),
    };
    let offs = btf.type_offsets();
    // Old own offset -> new offset (0: not seen). A string is interned once
    // however many records name it (a vmlinux: 12 M references, 2 MB of
    // strings), and interning is idempotent, so the result is the same.
    let mut memo = vec![0u32; btf.raw_strings().len()];
    for (i, &s) in offs.iter().enumerate() {
        let e = offs.get(i + 1).map(|&e| e as usize).unwrap_or(words.len());
        Btf::for_each_str_ref_mut(&mut words[s as usize..e], |off| {
            if *off == 0 || *off < start_str {
                return;
            }
            let slot = memo.get_mut((*off - start_str) as usize);
            if let Some(&m) = slot.as_deref()
                && m != 0
            {
                *off = m;
                return;
            }
            let s = btf.str_at(crate::btf::StrOff::new(*off)).unwrap_or(b"");
            // `intern` looks in the base first, then the new table: libbpf's order.
            let new = tab.intern(s);
            if let Some(m) = slot {
                *m = new;
            }
            *off = new;
        });
    }
    (words, tab)
}
