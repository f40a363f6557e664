//! The final links (old id → new id) and compaction: the survivors' records
//! moved down and renumbered.

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

use super::*;

const MAX_ID: u32 = 0x7fff_ffff;

impl Dedup<'_> {
    /// Turns `link` into old id -> new id (libbpf reuses its hypothetical
    /// map for this): first every link points straight at its canonical
    /// type, then each survivor's own link holds its new id, tagged with
    /// [`NEW`] so a lookup through a non-survivor can tell "new id" from
    /// "canonical old id". Base types (and void) keep their ids: only the
    /// base links a pass re-pointed (`base_moved`) are resolved, the others
    /// are the id itself and are left alone ([`new_id`] knows them by
    /// `start`), so that a module does not pay for its base's 108 K ids.
    /// Returns the surviving own ids and their words.
    /// The first part runs over stretches of ids in parallel: a link is
    /// rewritten only by its own stretch, and whether a reader following it
    /// sees it before or after, it ends at the same canonical type.
    #[inline(never)]
    pub(super) fn final_links(&mut self) -> (Vec<u32>, usize) {
        let (start, end) = (self.st.start, self.st.end);
        let (words, nodes, state) = (self.words, &self.st.nodes, &self.st.state);
        let link = shared_u32(&mut self.st.link);
        // the survivors with their lengths
        debug_assert!({
            let moved: hashbrown::HashSet<u32> = self.st.base_moved.iter().copied().collect();
            (0..start).all(|id| link[id as usize].load(Relaxed) == id || moved.contains(&id))
        });
        for &id in &self.st.base_moved {
            let l = TypeId::new(link[id as usize].load(Relaxed));
            link[id as usize].store(resolve_shared(link, l).get(), Relaxed);
        }
        let kept = in_stretches(TypeId::new(start), TypeId::new(end), |ids, out| {
            for id in ids {
                let l = link[id as usize].load(Relaxed);
                let tid = TypeId::new(id);
                if l == id && state.get(tid) == State::Mapped {
                    out.push((id, Info(words[nodes.get(tid) as usize + 1]).len()));
                } else if l != id {
                    link[id as usize].store(resolve_shared(link, TypeId::new(l)).get(), Relaxed);
                }
            }
        });
        let nwords = kept.iter().map(|&(_, len)| len).sum();
        let survivors: Vec<u32> = kept.into_iter().map(|(id, _)| id).collect();
        for (i, &id) in survivors.iter().enumerate() {
            self.st.link[id as usize] = (start + i as u32) | NEW;
        }
        (survivors, nwords)
    }
}

/// Tags a final link as a new id (see [`Dedup::final_links`]).
pub(super) const NEW: u32 = 1 << 31;

/// The new id of `id` from the final links, where the canonical ids below
/// `start` (void and the base) keep theirs; `None` if its canonical type did
/// not survive.
#[inline]
pub(super) fn new_id(link: &[u32], start: TypeId, id: TypeId) -> Option<TypeId> {
    let l = link[id.index()];
    if l & NEW != 0 {
        return Some(TypeId::new(l & !NEW));
    }
    // `l` is canonical: a base type (whose link is itself) or a survivor
    if l < start.get() {
        return Some(TypeId::new(l));
    }
    let c = link[l as usize];
    (c & NEW != 0).then_some(TypeId::new(c & !NEW))
}

/// Rewrites the type ids of `rec` (a survivor's record, already in its
/// output place) to new ids; `false` if one has no surviving representative.
#[inline]
pub(super) fn renumber(rec: &mut [u32], link: &[u32], start: TypeId) -> bool {
    let mut pos: smallvec::SmallVec<[usize; 16]> = smallvec::SmallVec::new();
    for_each_id_pos(rec, |p| pos.push(p));
    for p in pos {
        match new_id(link, start, TypeId::new(rec[p])) {
            Some(n) if n.get() <= MAX_ID => rec[p] = n.get(),
            _ => return false,
        }
    }
    true
}

/// The survivors' records with their ids renumbered, and their offsets.
#[inline(never)]
pub(super) fn compact(
    mut words: Cow<'_, [u32]>,
    nodes: &Offsets,
    link: &[u32],
    start: TypeId,
    survivors: &[u32],
    nwords: usize,
) -> Result<(Vec<u32>, Vec<u32>), DedupError> {
    // Owned records are compacted in place: survivors keep their order, so
    // each record moves to or below where it was and never over one not yet
    // moved. That saves the output's allocation at dedup's memory peak.
    let (mut out, in_place) = match &mut words {
        Cow::Owned(w) => (std::mem::take(w), true),
        Cow::Borrowed(_) => (Vec::with_capacity(nwords), false),
    };
    let mut offs = Vec::with_capacity(survivors.len());
    let mut at = 0usize;
    for &id in survivors {
        let id = TypeId::new(id);
        let off = nodes.get(id) as usize;
        let len = if in_place {
            let len = Info(out[off + 1]).len();
            out.copy_within(off..off + len, at);
            len
        } else {
            let rec = rec_at(&words, off as u32);
            out.extend_from_slice(rec);
            rec.len()
        };
        offs.push(at as u32);
        if !renumber(&mut out[at..at + len], link, start) {
            return Err(DedupError::Invalid {
                id,
                what: "a referenced type has no surviving representative",
            });
        }
        at += len;
    }
    debug_assert_eq!(at, nwords);
    out.truncate(at);
    out.shrink_to_fit();
    Ok((out, offs))
}
