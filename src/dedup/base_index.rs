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
    /// `nodes` packed, when the base's 64-id blocks fit (a vmlinux's do):
    /// a workspace's column, to which each module appends its own.
    offsets: Option<Offsets>,
    /// Void and every base id mapped, packed ([`States::mapped_words`]).
    pub(super) states: Vec<u64>,
    /// Workspaces given back by finished modules, for the next ones.
    spare: std::sync::Mutex<Vec<Workspace>>,
}

/// What one module's dedup changes of the base's state, as a copy of its
/// own: the records (the base's, then the module's) and the candidate
/// table (the base's, then the module's canonical types). A finished
/// module gives it back to the [`BaseIndex`] with its part removed
/// (the table's insertions undone), so that the next module on that
/// thread does not copy the base's state again: once per module, those
/// copies were much of a small module's dedup (docs/perf-notes.md).
pub(super) struct Workspace {
    pub(super) words: Vec<u32>,
    pub(super) table: CandTable,
    /// The base's packed offsets, lent to a module's passes: `None` while
    /// lent, or if the base has none.
    pub(super) nodes: Option<Offsets>,
}

/// A module's own records a workspace keeps room for once it is given
/// back (16 MiB); a larger module's room goes back to the allocator.
const KEPT_OWN_WORDS: usize = 4 << 20;

impl BaseIndex {
    pub fn new(base: &std::sync::Arc<Btf>) -> Result<BaseIndex, DedupError> {
        let (words, nodes, _) = layout(
            base.base(),
            Cow::Borrowed(base.type_offsets()),
            Cow::Borrowed(base.raw_words()),
            true,
        )?;
        let words = words.into_owned();
        let mut table = CandTable::with_capacity(TABLE_ROOM);
        let mut composite_names = hashbrown::HashMap::new();
        for id in 1..nodes.len() as u32 {
            let w = rec_at(&words, nodes[id as usize]);
            if let Some(h) = prep_hash(w, TypeId::new(id))? {
                table.insert(h, TypeId::new(id));
            }
            if is_composite(w.kind()) {
                composite_names.entry(w[0]).and_modify(|v| *v = 0).or_insert(id);
            }
        }
        Ok(BaseIndex {
            base: base.clone(),
            words,
            table,
            composite_names,
            offsets: {
                let mut packed = Offsets::growing();
                nodes.iter().all(|&o| packed.push(o)).then_some(packed)
            },
            states: States::mapped_words(nodes.len() as u32),
            nodes,
            spare: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// A workspace holding the base's state alone: a spare one, or a new copy.
    pub(super) fn take_workspace(&self) -> Workspace {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.unwrap_or_else(|| {
            let mut table = self.table.clone();
            table.mark();
            Workspace {
                words: self.words.clone(),
                table,
                nodes: self.offsets.clone(),
            }
        })
    }

    /// Takes back a workspace a module's dedup is done with: its records
    /// cut back to the base's, its table's insertions undone (or the table
    /// copied again if they cannot be), its offsets (`nodes`, the column its
    /// passes had) cut back to the base's.
    pub(super) fn give_back(&self, mut w: Workspace, nodes: Offsets) {
        if w.nodes.is_none() && self.offsets.is_some() && nodes.growable() {
            w.nodes = Some(nodes);
        }
        if let Some(n) = &mut w.nodes {
            n.truncate(self.nodes.len());
        }
        let base = self.words.len();
        w.words.truncate(base);
        if w.words.capacity() > base + KEPT_OWN_WORDS {
            w.words.shrink_to(base);
        }
        if !w.table.undo() {
            w.table = self.table.clone();
            w.table.mark();
        }
        self.spare.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }

    pub(super) fn serves(&self, base: Option<&std::sync::Arc<Btf>>) -> bool {
        base.is_some_and(|b| std::sync::Arc::ptr_eq(b, &self.base))
    }
}
