//! What dedup derives from a base BTF alone, built once for a batch.

use std::borrow::Cow;

use super::*;

/// What dedup derives from a base BTF alone: its records and nodes laid out,
/// the candidate table after the prep pass, and the names of its structs and
/// unions for the unambiguous-FWD pass. A batch of modules over one vmlinux
/// builds it once instead of once per module, where it was much of the
/// CPU time (inserting every base type, checking and copying their records).
/// Using it gives the same state the per-module passes would build: they
/// depend on the base alone.
pub struct BaseIndex {
    pub(super) base: std::sync::Arc<Btf>,
    pub(super) words: Vec<u32>,
    pub(super) nodes: Vec<u32>,
    pub(super) table: CandTable,
    pub(super) composite_names: hashbrown::HashMap<u32, u32>,
}

impl BaseIndex {
    pub fn new(base: &std::sync::Arc<Btf>) -> Result<BaseIndex, DedupError> {
        let (words, nodes, _) = layout(
            base.base(),
            Cow::Borrowed(base.type_offsets()),
            Cow::Borrowed(base.raw_words()),
            true,
            None,
        )?;
        let words = words.into_owned();
        let mut table = CandTable::with_capacity(1 << 16);
        let mut composite_names = hashbrown::HashMap::new();
        for id in 1..nodes.len() as u32 {
            let w = rec_at(&words, nodes[id as usize]);
            if let Some(h) = prep_hash(w, id)? {
                table.insert(h, id);
            }
            if is_composite(w.kind()) {
                composite_names.entry(w[0]).and_modify(|v| *v = 0).or_insert(id);
            }
        }
        Ok(BaseIndex {
            base: base.clone(),
            words,
            nodes,
            table,
            composite_names,
        })
    }

    pub(super) fn serves(&self, base: Option<&std::sync::Arc<Btf>>) -> bool {
        base.is_some_and(|b| std::sync::Arc::ptr_eq(b, &self.base))
    }
}
