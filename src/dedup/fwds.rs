//! libbpf's unambiguous-FWD pass.

use super::*;

impl Dedup<'_> {
    /// libbpf's FWD pass: a canonical FWD that nothing resolved goes to the
    /// only canonical struct or union of its name, if there is one (and of
    /// its kind). Neither part depends on order (a name met twice is
    /// ambiguous whichever comes first; each FWD is decided alone), so both
    /// scan the ids in parallel.
    #[inline(never)]
    pub(super) fn resolve_fwds(&mut self) {
        // name_off -> the only canonical struct/union with it, or 0 if several
        let (mut names, first) = match self.base_index {
            // base structs and unions stay canonical: they never get mapped
            Some(i) => (i.composite_names.clone(), self.st.start),
            None => (hashbrown::HashMap::new(), 1),
        };
        let (words, nodes, link, state) = (self.words, &self.st.nodes, &self.st.link, &self.st.state);
        let canonical = |id: u32| state.get(TypeId::new(id)) == State::Mapped && link[id as usize] == id;
        // Canonical first: the state bits and links are read in order and
        // only about one type in forty is canonical, so the records (160 MB
        // on a vmlinux) are not streamed through.
        let composites = in_stretches(TypeId::new(first), TypeId::new(self.st.end), |ids, out| {
            for id in ids.filter(|&id| canonical(id)) {
                let w = rec_from(words, nodes, TypeId::new(id));
                if is_composite(w.kind()) {
                    out.push((w[0], id));
                }
            }
        });
        for (name, id) in composites {
            names.entry(name).and_modify(|v| *v = 0).or_insert(id);
        }
        let resolved = in_stretches(TypeId::new(self.st.start), TypeId::new(self.st.end), |ids, out| {
            for id in ids.filter(|&id| canonical(id)) {
                let w = rec_from(words, nodes, TypeId::new(id));
                if w.kind() != FWD {
                    continue;
                }
                let Some(&cand) = names.get(&w[0]).filter(|&&c| c != 0) else {
                    continue;
                };
                let ck = rec_from(words, nodes, TypeId::new(cand)).kind();
                let union = w.kflag();
                if (ck == STRUCT && !union) || (ck == UNION && union) {
                    out.push((id, cand));
                }
            }
        });
        for (id, cand) in resolved {
            self.set_map(TypeId::new(id), TypeId::new(cand));
        }
    }
}

/// What `f` pushes for the ids of `from..to`, in id order, from stretches
/// of ids scanned in parallel: `f` gets a stretch and loops over it itself
/// (called per id, it was not inlined, and the FWD pass was much slower).
/// A stretch may also rewrite what belongs to its own ids (the final links).
pub(super) fn in_stretches<T: Send>(
    from: TypeId,
    to: TypeId,
    f: impl Fn(std::ops::Range<u32>, &mut Vec<T>) + Sync,
) -> Vec<T> {
    use rayon::prelude::*;
    let (from, to) = (from.get(), to.get());
    const STRETCH: u32 = 1 << 16;
    let parts: Vec<Vec<T>> = (from / STRETCH..to.div_ceil(STRETCH))
        .into_par_iter()
        .map(|s| {
            let mut out = Vec::new();
            f((s * STRETCH).max(from)..((s + 1) * STRETCH).min(to), &mut out);
            out
        })
        .collect();
    parts.into_iter().flatten().collect()
}
