//! Layout: where each id's record starts (packed, [`Offsets`]) and its
//! initial state, from the input's records, checked so that no pass reads
//! out of bounds.

use std::borrow::Cow;

use super::*;

/// A standalone BTF's records laid out by one walk, straight into packed
/// offsets and state bits, then checked in parallel (see [`layout`] for what
/// is checked and set; the lowest malformed id is reported either way).
pub(super) fn layout_walk(words: &[u32], end: TypeId, check_ids: bool) -> Result<(Offsets, States), DedupError> {
    let end = end.get();
    let mut nodes = Offsets::growing();
    nodes.reserve(end as usize);
    let mut state = States::with_void(end);
    // void
    nodes.push(0);
    let mut off = 0usize;
    let mut flat: Option<Vec<u32>> = None;
    // the first id whose record does not fit in the words (the walk cannot
    // go past it), or one past the last
    let mut laid = end;
    for id in 1..end {
        let Some(len) = fitting_len(words, off) else {
            laid = id;
            break;
        };
        match &mut flat {
            None if nodes.push(off as u32) => {}
            // a 64-id block spanning 64 K words or more: the general packing
            None => {
                let mut f: Vec<u32> = (0..id).map(|i| nodes.get(TypeId::new(i))).collect();
                f.reserve_exact(end as usize - f.len());
                f.push(off as u32);
                flat = Some(f);
            }
            Some(f) => f.push(off as u32),
        }
        if represents_itself(words[off..off + len].kind()) {
            state.set(TypeId::new(id), State::Mapped);
        }
        off += len;
    }
    let nodes = flat.map_or(nodes, Offsets::new);
    let whole = laid == end && off == words.len();
    check_packed(
        words,
        TypeId::new(end),
        check_ids,
        Packed {
            nodes,
            state,
            laid,
            whole,
        },
    )
}

/// Records laid out up to `laid` (the first that does not fit in the
/// words, or `end`); `whole` if they end exactly at the words' end.
pub(super) struct Packed {
    pub(super) nodes: Offsets,
    pub(super) state: States,
    pub(super) laid: u32,
    pub(super) whole: bool,
}

/// Checks the laid-out records in parallel; the lowest malformed id is the
/// one reported (a record that does not fit counts at its own id).
pub(super) fn check_packed(
    words: &[u32],
    end: TypeId,
    check_ids: bool,
    p: Packed,
) -> Result<(Offsets, States), DedupError> {
    use rayon::prelude::*;
    let id = TypeId::new;
    let Packed {
        nodes,
        state,
        laid,
        whole,
    } = p;
    let bad = (1..laid)
        .into_par_iter()
        .with_min_len(1 << 15)
        .filter(|&i| check_record(words, nodes.get(id(i)) as usize, end, check_ids).is_none())
        .min();
    match bad {
        Some(i) => Err(bad_record(id(i))),
        None if laid < end.get() => Err(bad_record(id(laid))),
        None if !whole => Err(bad_record(id(end.get() - 1))),
        None => Ok((nodes, state)),
    }
}

/// [`layout_walk`]'s packing split at `marks` (where stretches of records
/// start, from the encoder) and run in parallel: each stretch fills the
/// blocks that start in it and the steps of its ids; the few ids of a block
/// begun in the stretch before get their steps afterwards. `None` when a
/// step does not fit (a 64-id block of 64 K words or more) or a record does
/// not fit or the marks do not describe the records: [`layout_walk`] then
/// does it all, and says which record is malformed.
pub(super) fn pack_in_stretches(words: &[u32], end: TypeId, marks: &[(u32, usize)]) -> Option<Packed> {
    use rayon::prelude::*;
    let end = end.get();
    const B: u32 = 64;
    let mut starts: Vec<(u32, usize)> = vec![(1, 0)];
    starts.extend(marks.iter().copied().filter(|&(id, _)| id > 1 && id < end));
    if starts.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1) {
        return None;
    }
    let mut step = vec![0u16; end as usize];
    let mut block = vec![0u32; (end as usize).div_ceil(B as usize)];
    // per stretch: ids, first block it owns, its slices of both columns
    let mut jobs = Vec::with_capacity(starts.len());
    let (mut step_rest, mut block_rest) = (&mut step[1..], &mut block[1..]);
    for (i, &(a, w)) in starts.iter().enumerate() {
        let b = starts.get(i + 1).map_or(end, |s| s.0);
        let (s, sr) = std::mem::take(&mut step_rest).split_at_mut((b - a) as usize);
        let (first_blk, last_blk) = (a.div_ceil(B).max(1), b.div_ceil(B));
        let (bl, br) = std::mem::take(&mut block_rest).split_at_mut((last_blk - first_blk) as usize);
        step_rest = sr;
        block_rest = br;
        jobs.push((a, b, w, first_blk, s, bl));
    }
    // fix-ups (id and offset of ids in a block begun before their stretch)
    // and VAR/DATASEC ids; None if a record does not fit or the stretch
    // does not end where the next begins
    type Stretch = Option<(Vec<(u32, u32)>, Vec<u32>)>;
    let out: Vec<Stretch> = jobs
        .into_par_iter()
        .zip(
            starts
                .par_iter()
                .skip(1)
                .map(|s| s.1)
                .chain(rayon::iter::once(words.len())),
        )
        .map(|((a, b, w, first_blk, s, bl), next)| {
            let (mut fix, mut mapped) = (Vec::new(), Vec::new());
            let mut off = w;
            let mut base = 0u32;
            for id in a..b {
                let len = fitting_len(words, off)?;
                let o = u32::try_from(off).ok()?;
                if id % B == 0 {
                    base = o;
                    bl[(id / B - first_blk) as usize] = o;
                }
                if id / B < first_blk {
                    fix.push((id, o));
                } else {
                    s[(id - a) as usize] = u16::try_from(o - base).ok()?;
                }
                if represents_itself(words[off..off + len].kind()) {
                    mapped.push(id);
                }
                off += len;
            }
            (off == next).then_some((fix, mapped))
        })
        .collect();
    let mut state = States::with_void(end);
    for r in out {
        let (fix, mapped) = r?;
        for (id, o) in fix {
            step[id as usize] = u16::try_from(o.checked_sub(block[(id / B) as usize])?).ok()?;
        }
        for id in mapped {
            state.set(TypeId::new(id), State::Mapped);
        }
    }
    Some(Packed {
        nodes: Offsets::from_parts(block, step),
        state,
        laid: end,
        whole: true,
    })
}

/// Builds the id-indexed state: record offsets, kinds and the initial map
/// (base types and VAR/DATASEC represent themselves, the rest unprocessed).
/// Own types are checked in parallel; the result does not depend on it. An
/// owned offset column becomes the offsets of all ids in place. A base that
/// has a [`BaseIndex`] goes through [`layout_over_index`] instead.
#[allow(clippy::type_complexity)]
pub(super) fn layout<'a>(
    base: Option<&'a std::sync::Arc<Btf>>,
    offs: Cow<'_, [u32]>,
    own: Cow<'a, [u32]>,
    check_ids: bool,
) -> Result<(Cow<'a, [u32]>, Vec<u32>, Vec<State>), DedupError> {
    let mut chain = Vec::new();
    let mut b = base;
    while let Some(x) = b {
        chain.push(&**x);
        b = x.base();
    }
    chain.reverse();
    let start = base.map_or(1, |b| b.type_count() as usize + 1);
    let end = start + offs.len();
    // the base part of the offsets (void first) and the shift of own records
    let mut head: Vec<u32> = vec![0];
    let (words, shift) = if chain.is_empty() {
        (own, 0u32)
    } else {
        let base_len: usize = chain.iter().map(|b| b.raw_words().len()).sum();
        // An owned split BTF makes room for the base in front of its own
        // records (a large allocation grows in place), rather than being
        // copied beside itself: on amdgpu.ko that copy was 118 MB at
        // dedup's memory peak.
        let mut all = match own {
            Cow::Owned(mut v) => {
                let n = v.len();
                v.reserve_exact(base_len);
                v.resize(n + base_len, 0);
                v.copy_within(0..n, base_len);
                v
            }
            Cow::Borrowed(w) => {
                let mut all = vec![0; base_len + w.len()];
                all[base_len..].copy_from_slice(w);
                all
            }
        };
        let mut w0 = 0;
        for b in &chain {
            let part = b.raw_words();
            all[w0..w0 + part.len()].copy_from_slice(part);
            let laid = &all[..w0 + part.len()];
            for &o in b.type_offsets() {
                if check_record(laid, o as usize + w0, TypeId::new(end as u32), check_ids).is_none() {
                    return Err(bad_record(TypeId::new(head.len() as u32)));
                }
                head.push(o + w0 as u32);
            }
            w0 += part.len();
        }
        (Cow::Owned(all), base_len as u32)
    };
    let (nodes, state) = own_layout(&words, head, offs, shift, check_ids)?;
    Ok((words, nodes, state))
}

/// [`layout`] over a base laid out once in `ix`, in a workspace of its
/// ([`Workspace`](super::base_index::Workspace)): the module's own records
/// are appended to the base's there, and its own offsets to the base's
/// packed ones, so that a module's layout costs what its own types do.
pub(super) fn layout_over_index(
    ix: &BaseIndex,
    work: &mut super::base_index::Workspace,
    offs: &[u32],
    own: &[u32],
    check_ids: bool,
) -> Result<(Offsets, States), DedupError> {
    let start = ix.nodes.len();
    let end = start + offs.len();
    let shift = work.words.len() as u32;
    debug_assert_eq!(
        work.words[..],
        ix.words[..],
        "a workspace holds the base's records alone"
    );
    work.words.extend_from_slice(own);
    let words = &work.words[..];
    // the own records checked (the base's were when the index was built),
    // and their initial states
    let mut own_states = Vec::with_capacity(offs.len());
    push_own_states(&mut own_states, words, offs, shift, start, end, check_ids)?;
    let mut state = States::from_words(&ix.states);
    state.grow_to(end);
    for (i, &s) in own_states.iter().enumerate() {
        if s != State::Unprocessed {
            state.set(TypeId::new((start + i) as u32), s);
        }
    }
    let packed = work.nodes.take().and_then(|mut n| {
        let all_fit = offs.iter().all(|&o| n.push(o + shift));
        if all_fit {
            Some(n)
        } else {
            // a 64-id block spanning 64 K words: the workspace keeps its
            // column (cut back when given back), this module gets the
            // general packing
            work.nodes = Some(n);
            None
        }
    });
    let nodes = packed.unwrap_or_else(|| {
        let flat = ix
            .nodes
            .iter()
            .copied()
            .chain(offs.iter().map(|&o| o + shift))
            .collect();
        Offsets::new(flat)
    });
    Ok((nodes, state))
}

/// The offsets of every id (`head`, the base's with void first, then the
/// own `offs` moved up by `shift`) and their initial states, with the own
/// records checked against `words`.
#[inline(never)]
fn own_layout(
    words: &[u32],
    head: Vec<u32>,
    offs: Cow<'_, [u32]>,
    shift: u32,
    check_ids: bool,
) -> Result<(Vec<u32>, Vec<State>), DedupError> {
    use rayon::prelude::*;
    let start = head.len();
    let end = start + offs.len();
    // void and every base type represent themselves
    let mut state: Vec<State> = Vec::with_capacity(end);
    state.resize(start, State::Mapped);
    let mut nodes = offs.into_owned();
    // exact: a doubling here would be 17 MB on a vmlinux, at the peak
    nodes.reserve_exact(head.len());
    nodes.splice(0..0, head);
    const CHUNK: usize = 1 << 15;
    if shift != 0 {
        nodes[start..]
            .par_iter_mut()
            .with_min_len(CHUNK)
            .for_each(|o| *o += shift);
    }
    push_own_states(&mut state, words, &nodes[start..], 0, start, end, check_ids)?;
    Ok((nodes, state))
}

/// Appends to `states` the initial state of each own id (`start`, `start +
/// 1`, …, whose records start at `offs` moved up by `shift`), checking the
/// records in parallel against `words` and ids below `end`; the lowest
/// malformed id is the one reported, at any thread count.
fn push_own_states(
    states: &mut Vec<State>,
    words: &[u32],
    offs: &[u32],
    shift: u32,
    start: usize,
    end: usize,
    check_ids: bool,
) -> Result<(), DedupError> {
    use rayon::prelude::*;
    let bad = std::sync::atomic::AtomicU32::new(u32::MAX);
    states.par_extend(offs.par_iter().enumerate().with_min_len(1 << 15).map(|(i, &o)| {
        let off = (o + shift) as usize;
        if check_record(words, off, TypeId::new(end as u32), check_ids).is_none() {
            bad.fetch_min((start + i) as u32, std::sync::atomic::Ordering::Relaxed);
            return State::Mapped;
        }
        if represents_itself(Info(words[off + 1]).kind()) {
            State::Mapped
        } else {
            State::Unprocessed
        }
    }));
    match bad.into_inner() {
        u32::MAX => Ok(()),
        id => Err(bad_record(TypeId::new(id))),
    }
}

pub(super) fn bad_record(id: TypeId) -> DedupError {
    DedupError::Invalid {
        id,
        what: "record runs past the type data or references an id past the last type",
    }
}

/// The length of the record at `off` if it lies inside `w` and (with
/// `check_ids`) every type id it holds is below `end`. The reader guarantees
/// both for parsed BTF; this keeps BTF built through the API from making
/// dedup index out of bounds.
#[inline(always)]
pub(super) fn check_record(w: &[u32], off: usize, end: TypeId, check_ids: bool) -> Option<usize> {
    let info = *w.get(off + 1)?;
    let len = Info(info).len();
    let r = w.get(off..off + len)?;
    let mut ok = true;
    if check_ids {
        ok = ids_below(r, end);
    } else if r.kind() == FWD {
        // libbpf's id iterator counts a FWD's size/type word, which the
        // reader does not check (it is no reference in BTF): compaction
        // renumbers it, so an id past the end must be refused here.
        ok = r[2] < end.get();
    }
    ok.then_some(len)
}
