//! Sort, combine, decide and emit (encoding-funcs-vars.md §5).
//!
//! All saved states are ordered by ELF table entry — the table is sorted by
//! key, so entry order *is* the reference's name order — with a stable
//! counting sort (CU order kept within a name). Each group is combined into
//! its first state, decided, and emitted as
//! `[TYPE_TAG, PTR]* FUNC_PROTO FUNC [bpf_kfunc] [bpf_fastcall] [annotation]*`.

mod compare;
mod emit;

use crate::btf::Btf;
use crate::elf::functab::FuncTable;

use super::kfuncs::KfuncMarks;
use super::{FuncStates, FuncsError, StateId, flags};
use compare::funcs_mismatch;
pub use compare::{ProtoMatch, types_match};
use emit::emit_one;

/// The features the function phase looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmitOptions {
    /// Drop names whose instances disagree (§5.3).
    pub consistent_func: bool,
    /// Function annotations and kfunc decl tags.
    pub decl_tag: bool,
    /// kfunc marks from `.BTF_ids`.
    pub decl_tag_kfuncs: bool,
    /// Arena type tags for kfuncs.
    pub attributes: bool,
    /// How function pointers' prototypes are compared.
    pub protos: ProtoMatch,
    /// Which of a name's states is emitted.
    pub pick: Pick,
    /// Which functions are left out.
    pub decide: Decide,
    /// (next reference) An `.isra`/`.constprop`-style clone is emitted under
    /// its symbol's name with the parameters it was compiled with.
    pub true_signature: bool,
}

/// What [`decide_next`] emits for a name.
enum Emit<'t> {
    Func(StateId),
    /// A state under the name of the `.`-suffixed symbol at its address.
    TrueSignature(StateId, &'t [u8]),
}

/// Which of a name's functions are left out of BTF.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decide {
    /// v1.31: the states' flags are joined, and only under
    /// `consistent_func` does a flag leave the function out.
    #[default]
    V1_31,
    /// The next reference (dwarves fb8328e and before): an unexpected
    /// register, an uncertain location, reordered parameters or an
    /// ambiguous address always leave it out, disagreeing instances under
    /// `consistent_func`; optimized-out parameters only when the emitted
    /// state's signature changed (clang's `DW_CC_nocall`) or its address is
    /// an `.isra`/`.constprop` clone's, and a state that is not left out
    /// for that is preferred among those the linker kept. Each state keeps
    /// its own optimized-parameters flag.
    Next,
}

/// Which state of a function's combined group gives its BTF.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pick {
    /// The first recorded (v1.31): with a weak and a strong definition in
    /// two CUs, whichever CU came first.
    #[default]
    First,
    /// The first whose DW_AT_low_pc is the address of one of the name's
    /// ELF symbols: the definition the linker kept (the next reference,
    /// dwarves faaa3f1); the first recorded if none is.
    Linked,
}

/// What the phase did, for summaries and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmitSummary {
    pub states: usize,
    pub groups: usize,
    pub emitted: usize,
    /// Groups dropped under `consistent_func`, by first reason (in the order
    /// unexpected_reg, inconsistent, uncertain_parm_loc, ambiguous address).
    pub dropped_unexpected_reg: usize,
    pub dropped_inconsistent: usize,
    pub dropped_uncertain_loc: usize,
    pub dropped_ambiguous: usize,
    /// (next reference) reordered parameters, optimized-out parameters of
    /// a changed signature.
    pub dropped_reordered: usize,
    pub dropped_optimized: usize,
    pub kfunc_tags: usize,
    pub fastcall_tags: usize,
    pub arena_tags: usize,
}

/// State ids ordered by ELF entry, stable (counting sort: O(states +
/// entries)), and where each entry's group starts in that order (one more
/// element than there are entries).
fn sorted_order(states: &FuncStates, nentries: usize) -> (Vec<StateId>, Vec<u32>) {
    let entries = states.entries();
    let mut start = vec![0u32; nentries + 1];
    for &e in entries {
        start[e as usize + 1] += 1;
    }
    for i in 0..nentries {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    let mut order = vec![StateId::new(0); entries.len()];
    for (s, &e) in entries.iter().enumerate() {
        let slot = &mut next[e as usize];
        order[*slot as usize] = StateId::new(s as u32);
        *slot += 1;
    }
    (order, start)
}

/// The function phase after the last CU: sorts `states` by name, combines
/// each name's instances, decides under `opts.consistent_func`, and appends
/// the survivors to `btf` (the pre-dedup BTF the states' type ids refer to).
///
/// `states` is consumed in spirit: arena tags rewrite the emitted states'
/// types in place.
pub fn emit_funcs(
    btf: &mut Btf,
    states: &mut FuncStates,
    table: &FuncTable<'_>,
    kfuncs: &KfuncMarks,
    opts: &EmitOptions,
) -> Result<EmitSummary, FuncsError> {
    emit_funcs_logged(btf, states, table, kfuncs, opts, None)
}

/// [`emit_funcs`], with the reference's `--verbose` lines about functions
/// added to `skips` (without its trailing newline): `NAME : skipping BTF
/// encoding of function due to REASON`, for each disagreement found while
/// combining a function's states and for an uncertain parameter location,
/// in the order the reference prints them (whether or not the function is
/// then left out: that depends on `consistent_func`, as there).
pub fn emit_funcs_logged(
    btf: &mut Btf,
    states: &mut FuncStates,
    table: &FuncTable<'_>,
    kfuncs: &KfuncMarks,
    opts: &EmitOptions,
    mut skips: Option<&mut Vec<String>>,
) -> Result<EmitSummary, FuncsError> {
    let mut sum = EmitSummary {
        states: states.len(),
        ..Default::default()
    };
    if states.is_empty() {
        return Ok(sum);
    }
    if let Some(&bad) = states.entries().iter().find(|&&e| e as usize >= table.entries.len()) {
        return Err(FuncsError::BadEntry {
            entry: bad,
            entries: table.entries.len(),
        });
    }
    let (order, start) = sorted_order(states, table.entries.len());
    for entry in 0..table.entries.len() {
        let group = &order[start[entry] as usize..start[entry + 1] as usize];
        let Some((&a, rest)) = group.split_first() else {
            continue;
        };
        let e = &table.entries[entry];
        let mut skip = |why: &str| {
            if let Some(log) = skips.as_deref_mut() {
                log.push(format!(
                    "{} : skipping BTF encoding of function due to {why}",
                    String::from_utf8_lossy(e.key)
                ));
            }
        };
        let syms = &table.syms[e.first as usize..(e.first + e.count) as usize];
        if opts.decide == Decide::Next {
            match decide_next(btf, states, group, syms, e.ambiguous, opts, &mut sum, &mut skip) {
                Some(Emit::Func(chosen)) => {
                    let kfunc = kfuncs.flags(entry as u32);
                    emit_one(btf, states, chosen, e.key, entry as u32, kfunc, opts, &mut sum)?
                }
                // under its clone's name, without a kfunc's tags
                Some(Emit::TrueSignature(chosen, sym)) => {
                    emit_one(btf, states, chosen, sym, entry as u32, None, opts, &mut sum)?
                }
                None => {}
            }
            continue;
        }
        let mut fl = states.flags(a);
        for &b in rest {
            fl |= states.flags(b);
            if fl & (flags::UNEXPECTED_REG | flags::INCONSISTENT) == 0
                && let Some(why) = funcs_mismatch(btf, states, a, b, opts.protos)
            {
                skip(&why);
                fl |= flags::INCONSISTENT;
            }
        }
        if fl & flags::UNCERTAIN_PARM_LOC != 0 {
            skip("uncertain parameter location");
        }
        states.add_flags(a, fl);
        sum.groups += 1;
        if opts.consistent_func {
            let reason = if fl & flags::UNEXPECTED_REG != 0 {
                Some(&mut sum.dropped_unexpected_reg)
            } else if fl & flags::INCONSISTENT != 0 {
                Some(&mut sum.dropped_inconsistent)
            } else if fl & flags::UNCERTAIN_PARM_LOC != 0 {
                Some(&mut sum.dropped_uncertain_loc)
            } else if e.ambiguous {
                Some(&mut sum.dropped_ambiguous)
            } else {
                None
            };
            if let Some(r) = reason {
                *r += 1;
                continue;
            }
        }
        let chosen = match opts.pick {
            Pick::First => a,
            Pick::Linked => group.iter().copied().find(|&s| linked(states, s, syms)).unwrap_or(a),
        };
        let kfunc = kfuncs.flags(entry as u32);
        emit_one(btf, states, chosen, e.key, entry as u32, kfunc, opts, &mut sum)?;
    }
    Ok(sum)
}

/// Whether state `s` is at one of the name's symbol addresses: the
/// definition the linker kept.
fn linked(states: &FuncStates, s: StateId, syms: &[(&[u8], u64)]) -> bool {
    syms.iter().any(|&(_, at)| at == states.low_pc(s))
}

/// The next reference's combine and decision for one name's `group` of
/// states (`syms`: the name's ELF symbols): what to emit, or `None` if the
/// function is left out.
#[allow(clippy::too_many_arguments)]
fn decide_next<'t>(
    btf: &Btf,
    states: &mut FuncStates,
    group: &[StateId],
    syms: &[(&'t [u8], u64)],
    ambiguous: bool,
    opts: &EmitOptions,
    sum: &mut EmitSummary,
    skip: &mut impl FnMut(&str),
) -> Option<Emit<'t>> {
    const JOINED: u8 = flags::UNEXPECTED_REG | flags::INCONSISTENT | flags::UNCERTAIN_PARM_LOC | flags::REORDERED_PARM;
    let (&a, rest) = group.split_first()?;
    let mut fl = states.flags(a) & JOINED;
    for &b in rest {
        fl |= states.flags(b) & JOINED;
        if fl & (flags::UNEXPECTED_REG | flags::INCONSISTENT | flags::REORDERED_PARM) == 0
            && let Some(why) = funcs_mismatch(btf, states, a, b, opts.protos)
        {
            skip(&why);
            fl |= flags::INCONSISTENT;
        }
        // each state is joined with those before it, the first with all
        states.add_flags(b, fl);
    }
    states.add_flags(a, fl);
    sum.groups += 1;
    if opts.true_signature {
        // The first state at a `.`-suffixed symbol's address whose
        // registers can be trusted gives the clone's true signature (its
        // joined flags, as far as the combine got to it).
        for &s in group {
            let addr = states.low_pc(s);
            if addr == 0 || states.flags(s) & (flags::UNEXPECTED_REG | flags::UNCERTAIN_PARM_LOC) != 0 {
                continue;
            }
            if let Some(&(sym, _)) = syms.iter().find(|&&(name, at)| at == addr && name.contains(&b'.')) {
                return Some(Emit::TrueSignature(s, sym));
            }
        }
    }
    // Optimized-out parameters are no reason to leave a function out,
    // unless its signature is not the one its DWARF states.
    let drops_optimized = |s: StateId| {
        let f = states.flags(s);
        if opts.true_signature {
            return false;
        }
        let addr = states.low_pc(s);
        f & flags::OPTIMIZED_PARMS != 0
            && (f & flags::SIGNATURE_CHANGED != 0
                || (addr != 0
                    && syms
                        .iter()
                        .any(|&(name, at)| at == addr && crate::elf::functab::is_signature_clone(name))))
    };
    let chosen = if rest.is_empty() {
        a
    } else {
        let mut first = None;
        let mut pick = None;
        for s in group.iter().copied().filter(|&s| linked(states, s, syms)) {
            first.get_or_insert(s);
            if !drops_optimized(s) {
                pick = Some(s);
                break;
            }
        }
        pick.or(first).unwrap_or(a)
    };
    // the last reason found is the one given, as there
    let mut why = None;
    if fl & flags::UNEXPECTED_REG != 0 {
        why = Some((
            "unexpected register usage for parameter",
            &mut sum.dropped_unexpected_reg,
        ));
    }
    if opts.consistent_func && fl & flags::INCONSISTENT != 0 {
        why = Some(("inconsistet prototype", &mut sum.dropped_inconsistent));
    }
    if fl & flags::UNCERTAIN_PARM_LOC != 0 {
        why = Some(("uncertain parameter location", &mut sum.dropped_uncertain_loc));
    }
    if fl & flags::REORDERED_PARM != 0 {
        why = Some(("reordered parameters", &mut sum.dropped_reordered));
    }
    if drops_optimized(chosen) {
        why = Some(("optimized parameters", &mut sum.dropped_optimized));
    }
    if ambiguous {
        why = Some(("ambiguous address", &mut sum.dropped_ambiguous));
    }
    match why {
        Some((reason, count)) => {
            *count += 1;
            skip(reason);
            None
        }
        None => Some(Emit::Func(chosen)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::kfuncs::{KF_ARENA_ARG1, KF_ARENA_ARG2, KF_ARENA_RET, KF_FASTCALL};
    use super::*;
    use crate::btf::{Endian, INT_SIGNED, Kind, LINKAGE_STATIC, StrOff, TypeId};
    use crate::elf::functab::FuncTable;

    /// A pre-dedup BTF with the types the tests need.
    struct Types {
        btf: Btf,
        int: TypeId,
        int2: TypeId,
        long: TypeId,
        uint: TypeId,
        cint: TypeId,
        vint: TypeId,
        foo: TypeId,
        foo2: TypeId,
        fwd_foo: TypeId,
        fwd_foo_union: TypeId,
        ufoo: TypeId,
        pfoo: TypeId,
        pcfoo: TypeId,
        pfwd: TypeId,
        td: TypeId,
        td2: TypeId,
        arr4: TypeId,
        arr5: TypeId,
        arr4c: TypeId,
        e32: TypeId,
        e64: TypeId,
        proto_ii: TypeId,
        proto_il: TypeId,
        proto_li: TypeId,
        proto_i: TypeId,
        pint: TypeId,
        flt: TypeId,
        dbl4: TypeId,
        ttag: TypeId,
    }

    fn types() -> Types {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, INT_SIGNED);
        let int2 = b.add_int(b"int", 4, INT_SIGNED); // a second CU's copy
        let long = b.add_int(b"long", 8, INT_SIGNED);
        let uint = b.add_int(b"unsigned int", 4, 0);
        let cint = b.add_ref(Kind::Const, int2);
        let vint = b.add_ref(Kind::Volatile, int2);
        let foo = b.begin(Kind::Struct, b"foo", 4, false);
        b.push_member(b"a", int, 0, 0);
        let foo2 = b.begin(Kind::Struct, b"foo", 8, false); // same name, other layout
        b.push_member(b"b", long, 0, 0);
        let fwd_foo = b.add_fwd(b"foo", false);
        let fwd_foo_union = b.add_fwd(b"foo", true);
        let ufoo = b.begin(Kind::Union, b"foo", 4, false);
        let pfoo = b.add_ref(Kind::Ptr, foo);
        let cfoo = b.add_ref(Kind::Const, foo2);
        let pcfoo = b.add_ref(Kind::Ptr, cfoo);
        let pfwd = b.add_ref(Kind::Ptr, fwd_foo);
        let td = b.add_typedef(b"u32", uint);
        let td2 = b.add_typedef(b"u32", long); // same name, other target
        let arr4 = b.add_array(int, int, 4);
        let arr5 = b.add_array(int, int, 5);
        let arr4c = b.add_array(cint, long, 4);
        let e32 = b.begin(Kind::Enum, b"e", 4, false);
        let e64 = b.begin(Kind::Enum64, b"e", 8, false);
        let proto_ii = b.begin(Kind::FuncProto, b"", int.get(), false);
        b.push_param(b"", int);
        b.push_param(b"", int);
        let proto_il = b.begin(Kind::FuncProto, b"", int2.get(), false);
        b.push_param(b"", long);
        b.push_param(b"", long);
        let proto_li = b.begin(Kind::FuncProto, b"", long.get(), false);
        b.push_param(b"", int);
        b.push_param(b"", int);
        let proto_i = b.begin(Kind::FuncProto, b"", int.get(), false);
        b.push_param(b"", int);
        let pint = b.add_ref(Kind::Ptr, int);
        let flt = b.add_float(b"float", 4);
        let dbl4 = b.add_float(b"double", 4);
        let ttag = b.add_type_tag(b"user", int, false);
        Types {
            btf: b,
            int,
            int2,
            long,
            uint,
            cint,
            vint,
            foo,
            foo2,
            fwd_foo,
            fwd_foo_union,
            ufoo,
            pfoo,
            pcfoo,
            pfwd,
            td,
            td2,
            arr4,
            arr5,
            arr4c,
            e32,
            e64,
            proto_ii,
            proto_il,
            proto_li,
            proto_i,
            pint,
            flt,
            dbl4,
            ttag,
        }
    }

    #[test]
    fn types_match_rules() {
        let t = types();
        let m = |x: TypeId, y: TypeId| types_match(&t.btf, x, y, ProtoMatch::ReturnOnly);
        assert!(m(TypeId::new(0), TypeId::new(0)));
        assert!(!m(TypeId::new(0), t.int));
        assert!(!m(t.int, TypeId::new(0)));
        // INT: size, encoding word and name.
        assert!(m(t.int, t.int2));
        assert!(!m(t.int, t.uint));
        assert!(!m(t.int, t.long));
        // const skipped on either side, volatile strict.
        assert!(m(t.cint, t.int));
        assert!(m(t.int, t.cint));
        assert!(!m(t.vint, t.int));
        // Named kinds by name only; FWD counts as STRUCT/UNION by kind flag.
        assert!(m(t.foo, t.foo2));
        assert!(m(t.fwd_foo, t.foo));
        assert!(!m(t.fwd_foo, t.ufoo));
        assert!(m(t.fwd_foo_union, t.ufoo));
        assert!(!m(t.foo, t.ufoo));
        assert!(m(t.td, t.td2));
        assert!(!m(t.td, t.uint));
        assert!(!m(t.e32, t.e64));
        // Pointers follow; const under a pointer skipped.
        assert!(m(t.pfoo, t.pcfoo));
        assert!(m(t.pfwd, t.pfoo));
        assert!(!m(t.pfoo, t.pint));
        // Arrays: count, then element (index type ignored).
        assert!(m(t.arr4, t.arr4c));
        assert!(!m(t.arr4, t.arr5));
        // FLOAT: size and name.
        assert!(!m(t.flt, t.dbl4));
        // TYPE_TAG follows its target.
        assert!(!m(t.ttag, t.int), "TYPE_TAG vs INT: different kinds");
    }

    #[test]
    fn func_proto_compares_only_vlen_and_return() {
        let t = types();
        let m = |x, y, p| types_match(&t.btf, x, y, p);
        // (int, int) → int vs (long, long) → int: the v1.31 quirk says
        // equal, the next reference compares the parameters.
        assert!(m(t.proto_ii, t.proto_il, ProtoMatch::ReturnOnly));
        assert!(!m(t.proto_ii, t.proto_il, ProtoMatch::Params));
        assert!(m(t.proto_ii, t.proto_ii, ProtoMatch::Params));
        for p in [ProtoMatch::ReturnOnly, ProtoMatch::Params] {
            // Different return type.
            assert!(!m(t.proto_ii, t.proto_li, p));
            // Different vlen.
            assert!(!m(t.proto_ii, t.proto_i, p));
        }
    }

    /// A table with the given (key, address) symbols.
    fn table(syms: &[(&'static str, u64)]) -> FuncTable<'static> {
        FuncTable::build(syms.iter().map(|(k, a)| (k.as_bytes(), k.as_bytes(), *a)).collect())
    }

    fn opts(consistent: bool) -> EmitOptions {
        EmitOptions {
            consistent_func: consistent,
            decl_tag: true,
            decl_tag_kfuncs: true,
            attributes: false,
            protos: ProtoMatch::ReturnOnly,
            pick: Pick::First,
            decide: Decide::V1_31,
            true_signature: false,
        }
    }

    /// A FUNC's name, its prototype's return type and (param name, type)s.
    type Emitted = (String, u32, Vec<(String, u32)>);

    fn funcs(b: &Btf, from: u32) -> Vec<Emitted> {
        let mut out = Vec::new();
        for id in from..=b.type_count() {
            let t = b.ty(TypeId::new(id));
            if t.kind() == Kind::Func {
                let p = b.ty(t.type_id());
                let params = p
                    .pairs()
                    .map(|[n, ty]| (b.name(StrOff::new(n)).into_owned(), ty))
                    .collect();
                out.push((b.name(t.name_off()).into_owned(), p.type_id().get(), params));
            }
        }
        out
    }

    fn state(st: &mut FuncStates, b: &mut Btf, entry: u32, ret: TypeId, params: &[(&str, TypeId)], fl: u8) {
        st.push(entry, ret, fl, None);
        for (n, ty) in params {
            let n = b.add_str(n.as_bytes());
            st.push_param(n, *ty);
        }
    }

    #[test]
    fn the_linked_definition_is_picked_over_a_weak_one() {
        // a.c: __weak int hook(int file); b.c: int hook(int file__nullable),
        // the one linked at 0x40. v1.31 emits a.c's, the next reference b.c's.
        let mut t = types();
        let tab = table(&[("hook", 0x40), ("main", 0x80)]);
        let hook = tab.lookup(b"hook").unwrap();
        let mut st = FuncStates::new();
        st.push(hook, t.int, 0, Some(0x10));
        let n = t.btf.add_str(b"file");
        st.push_param(n, t.int);
        st.push(hook, t.int, 0, Some(0x40));
        let n = t.btf.add_str(b"file__nullable");
        st.push_param(n, t.int);
        let start = t.btf.type_count() + 1;
        for (pick, name) in [(Pick::First, "file"), (Pick::Linked, "file__nullable")] {
            let mut b = t.btf.clone();
            let o = EmitOptions { pick, ..opts(true) };
            emit_funcs(&mut b, &mut st.clone(), &tab, &KfuncMarks::none(tab.len()), &o).unwrap();
            let got = funcs(&b, start);
            assert_eq!(got.len(), 1, "{pick:?}");
            assert_eq!(got[0].2, [(name.to_string(), t.int.get())], "{pick:?}");
        }
        // neither address linked: the first recorded
        let mut st2 = FuncStates::new();
        for a in [0x10, 0x20] {
            st2.push(hook, t.int, 0, Some(a));
        }
        let mut b = t.btf.clone();
        let o = EmitOptions {
            pick: Pick::Linked,
            ..opts(true)
        };
        emit_funcs(&mut b, &mut st2, &tab, &KfuncMarks::none(tab.len()), &o).unwrap();
        assert_eq!(funcs(&b, start).len(), 1);
    }

    /// What the next reference leaves out that v1.31 keeps, and the state
    /// it emits: each case is a group of (flags, address) states of `f`,
    /// whose symbols are `f` at 0x40 and its clone `f.isra.0` at 0x80.
    #[test]
    fn the_next_reference_decides_by_its_own_rules() {
        let t = types();
        let tab = FuncTable::build(vec![(&b"f"[..], &b"f"[..], 0x40), (b"f", b"f.isra.0", 0x80)]);
        let f = tab.lookup(b"f").unwrap();
        let run = |decide: Decide, consistent: bool, group: &[(u8, u64)]| {
            let mut st = FuncStates::new();
            for &(fl, addr) in group {
                st.push(f, t.int, fl, Some(addr));
            }
            let mut b = t.btf.clone();
            let start = b.type_count() + 1;
            let o = EmitOptions {
                decide,
                pick: Pick::Linked,
                ..opts(consistent)
            };
            let sum = emit_funcs(&mut b, &mut st, &tab, &KfuncMarks::none(tab.len()), &o).unwrap();
            (sum.emitted, (start..=b.type_count()).count())
        };
        use flags::*;
        // without consistent_func v1.31 keeps everything; the next
        // reference leaves out unexpected registers and reordered
        // parameters anyway
        for fl in [UNEXPECTED_REG, REORDERED_PARM, UNCERTAIN_PARM_LOC] {
            assert_eq!(run(Decide::V1_31, false, &[(fl, 0x40)]).0, 1, "{fl}");
            assert_eq!(run(Decide::Next, false, &[(fl, 0x40)]).0, 0, "{fl}");
        }
        // optimized-out parameters: kept, unless the state is an .isra
        // clone's or its signature changed
        assert_eq!(run(Decide::Next, true, &[(OPTIMIZED_PARMS, 0x40)]).0, 1);
        assert_eq!(run(Decide::Next, true, &[(OPTIMIZED_PARMS, 0x80)]).0, 0);
        assert_eq!(
            run(Decide::Next, true, &[(OPTIMIZED_PARMS | SIGNATURE_CHANGED, 0x40)]).0,
            0
        );
        assert_eq!(run(Decide::V1_31, true, &[(OPTIMIZED_PARMS, 0x80)]).0, 1);
        // of two linked states the one not left out for that is emitted,
        // and each state keeps its own flag
        assert_eq!(run(Decide::Next, true, &[(OPTIMIZED_PARMS, 0x80), (0, 0x40)]).0, 1);
        assert_eq!(
            run(Decide::Next, true, &[(OPTIMIZED_PARMS, 0x80), (OPTIMIZED_PARMS, 0x80)]).0,
            0
        );
    }

    /// Under `true_signature` the clone's state is emitted under its
    /// symbol's name, with the parameters it was compiled with, unless its
    /// registers cannot be trusted; then the name is decided as without.
    #[test]
    fn true_signatures_name_the_clone() {
        let mut t = types();
        let tab = FuncTable::build(vec![(&b"f"[..], &b"f"[..], 0x40), (b"f", b"f.isra.0", 0x80)]);
        let f = tab.lookup(b"f").unwrap();
        let run = |t: &mut Types, clone_flags: u8| {
            let mut st = FuncStates::new();
            // the abstract instance (no address), then the clone, which
            // kept only `b`
            state(
                &mut st,
                &mut t.btf,
                f,
                t.int,
                &[("a", t.int), ("b", t.long)],
                flags::OPTIMIZED_PARMS,
            );
            st.push(f, t.int, clone_flags, Some(0x80));
            let n = t.btf.add_str(b"b");
            st.push_param(n, t.long);
            let mut b = t.btf.clone();
            let start = b.type_count() + 1;
            let o = EmitOptions {
                decide: Decide::Next,
                pick: Pick::Linked,
                true_signature: true,
                ..opts(true)
            };
            emit_funcs(&mut b, &mut st, &tab, &KfuncMarks::none(tab.len()), &o).unwrap();
            funcs(&b, start)
        };
        assert_eq!(
            run(&mut t, flags::OPTIMIZED_PARMS),
            [(
                "f.isra.0".to_string(),
                t.int.get(),
                vec![("b".to_string(), t.long.get())]
            )]
        );
        // an unexpected register in the clone: joined into the group, the
        // whole name is left out
        assert_eq!(run(&mut t, flags::UNEXPECTED_REG), []);
    }

    #[test]
    fn same_static_name_with_different_prototypes() {
        // a.c: static int helper(int x, struct foo *f); b.c: static long
        // helper(long x, long y). Both clones → one entry, two addresses.
        let mut t = types();
        let tab = table(&[("helper", 0x10), ("helper", 0x20), ("main", 0x30)]);
        let helper = tab.lookup(b"helper").unwrap();
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, helper, t.int, &[("x", t.int), ("f", t.pfoo)], 0);
        state(&mut st, &mut t.btf, helper, t.long, &[("x", t.long), ("y", t.long)], 0);
        let start = t.btf.type_count() + 1;
        let strs_before = t.btf.raw_strings().len();
        let mut b = t.btf.clone();
        let mut s2 = st.clone();
        let sum = emit_funcs(&mut b, &mut s2, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        // Without consistent_func: emitted, prototype of the first state.
        assert_eq!(sum.emitted, 1);
        assert_eq!(
            funcs(&b, start),
            vec![(
                "helper".into(),
                t.int.get(),
                vec![("x".into(), t.int.get()), ("f".into(), t.pfoo.get())]
            )]
        );
        // "y" (only in the dropped instance) stays in the string table.
        assert!(b.strtab().find_own(b"y").is_some());
        assert_eq!(
            &b.raw_strings()[strs_before..],
            b"helper\0",
            "only the FUNC name is added at emission"
        );
        // With consistent_func: dropped (inconsistent and ambiguous).
        let mut b = t.btf.clone();
        let sum = emit_funcs(&mut b, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!(sum.emitted, 0);
        assert_eq!(sum.dropped_inconsistent, 1);
        assert_eq!(b.type_count(), start - 1);
    }

    #[test]
    fn identical_copies_are_kept() {
        // The same inline function in two CUs: int f(const struct foo *p)
        // vs int f(struct foo *p) through a FWD; the names differ too.
        let mut t = types();
        let tab = table(&[("f", 0x10), ("g", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("p", t.pcfoo)], 0);
        state(&mut st, &mut t.btf, 0, t.int2, &[("q", t.pfwd)], 0);
        let start = t.btf.type_count() + 1;
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!((sum.groups, sum.emitted), (1, 1));
        assert_eq!(
            funcs(&t.btf, start),
            vec![("f".into(), t.int.get(), vec![("p".into(), t.pcfoo.get())])]
        );
    }

    #[test]
    fn param_count_mismatch_and_varargs() {
        let mut t = types();
        let tab = table(&[("f", 0x10), ("g", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("a", t.int)], 0);
        state(&mut st, &mut t.btf, 0, t.int, &[("a", t.int)], 0);
        st.push_varargs();
        let mut b = t.btf.clone();
        let sum = emit_funcs(&mut b, &mut st.clone(), &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!(sum.dropped_inconsistent, 1);
        // Without consistent_func the first state's (non-varargs) proto is used.
        let start = t.btf.type_count() + 1;
        let mut b = t.btf.clone();
        emit_funcs(&mut b, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        assert_eq!(
            funcs(&b, start),
            vec![("f".into(), t.int.get(), vec![("a".into(), t.int.get())])]
        );
    }

    #[test]
    fn varargs_slot_is_emitted_unnamed_void() {
        let mut t = types();
        let tab = table(&[("printk", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("fmt", t.pint)], 0);
        st.push_varargs();
        let start = t.btf.type_count() + 1;
        emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!(
            funcs(&t.btf, start),
            vec![(
                "printk".into(),
                t.int.get(),
                vec![("fmt".into(), t.pint.get()), ("".into(), 0)]
            )]
        );
    }

    #[test]
    fn optimized_clones_and_optimized_out_params_are_kept() {
        // A .isra clone of f (one entry, one address) whose abstract and
        // concrete instances agree, one with optimized-out parameters.
        let mut t = types();
        let tab = table(&[("f", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("a", t.int), ("b", t.long)], 0);
        state(
            &mut st,
            &mut t.btf,
            0,
            t.int,
            &[("a", t.int), ("b", t.long)],
            flags::OPTIMIZED_PARMS,
        );
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!(sum.emitted, 1);
        assert_ne!(
            st.flags(StateId::new(0)) & flags::OPTIMIZED_PARMS,
            0,
            "flags accumulate into the first state"
        );
    }

    #[test]
    fn reordered_clone_params_are_inconsistent() {
        // with_struct(int unused, struct foo p) whose concrete DIE lists p first.
        let mut t = types();
        let tab = table(&[("with_struct", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.long, &[("unused", t.int), ("p", t.foo)], 0);
        state(&mut st, &mut t.btf, 0, t.long, &[("p", t.foo), ("unused", t.int)], 0);
        let mut b = t.btf.clone();
        let sum = emit_funcs(&mut b, &mut st.clone(), &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!((sum.emitted, sum.dropped_inconsistent), (0, 1));
        let start = t.btf.type_count() + 1;
        emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        assert_eq!(
            funcs(&t.btf, start)[0].2,
            vec![("unused".into(), t.int.get()), ("p".into(), t.foo.get())]
        );
    }

    #[test]
    fn unexpected_register_drops_and_stops_comparing() {
        let mut t = types();
        let tab = table(&[("drop_first", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        // The first instance has the flag; the second even mismatches, but
        // comparisons stop once unexpected_reg is set.
        state(
            &mut st,
            &mut t.btf,
            0,
            t.int,
            &[("unused", t.int), ("b", t.int)],
            flags::UNEXPECTED_REG,
        );
        state(&mut st, &mut t.btf, 0, t.long, &[("b", t.int)], 0);
        let mut b = t.btf.clone();
        let mut s2 = st.clone();
        let sum = emit_funcs(&mut b, &mut s2, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!((sum.emitted, sum.dropped_unexpected_reg), (0, 1));
        assert_eq!(
            s2.flags(StateId::new(0)) & flags::INCONSISTENT,
            0,
            "no comparison after unexpected_reg"
        );
        // A later instance's flag also drops the name.
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("b", t.int)], 0);
        state(&mut st, &mut t.btf, 0, t.int, &[("b", t.int)], flags::UNEXPECTED_REG);
        let mut b = t.btf.clone();
        let sum = emit_funcs(&mut b, &mut st.clone(), &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!(sum.dropped_unexpected_reg, 1);
        // Without consistent_func it is emitted.
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        assert_eq!(sum.emitted, 1);
    }

    #[test]
    fn inconsistency_is_only_checked_against_the_first_state() {
        // A = int(int), B = long(int) sets inconsistent; C is not compared.
        let mut t = types();
        let tab = table(&[("f", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("a", t.int)], 0);
        state(&mut st, &mut t.btf, 0, t.int, &[("a", t.cint)], 0);
        state(&mut st, &mut t.btf, 0, t.int2, &[("a", t.int2)], 0);
        let sum = emit_funcs(
            &mut t.btf.clone(),
            &mut st,
            &tab,
            &KfuncMarks::none(tab.len()),
            &opts(true),
        )
        .unwrap();
        assert_eq!(sum.emitted, 1, "const int vs int and a second int copy all match");
    }

    #[test]
    fn uncertain_location_drops() {
        let mut t = types();
        let tab = table(&[("f7", 0x10), ("z", 0x20)]);
        let mut st = FuncStates::new();
        state(
            &mut st,
            &mut t.btf,
            0,
            t.int,
            &[("a", t.int)],
            flags::UNCERTAIN_PARM_LOC,
        );
        let sum = emit_funcs(
            &mut t.btf.clone(),
            &mut st.clone(),
            &tab,
            &KfuncMarks::none(tab.len()),
            &opts(true),
        )
        .unwrap();
        assert_eq!((sum.emitted, sum.dropped_uncertain_loc), (0, 1));
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        assert_eq!(sum.emitted, 1);
    }

    #[test]
    fn ambiguous_address_drops_except_for_the_last_name() {
        let mut t = types();
        // scale + scale.constprop.0 at two addresses; zz likewise but last.
        let tab = table(&[("scale", 0x10), ("scale", 0x20), ("zz", 0x30), ("zz", 0x40)]);
        assert!(tab.entries[0].ambiguous && !tab.entries[1].ambiguous);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[("x", t.int)], 0);
        state(&mut st, &mut t.btf, 1, t.int, &[("x", t.int)], 0);
        let start = t.btf.type_count() + 1;
        let mut b = t.btf.clone();
        let sum = emit_funcs(&mut b, &mut st.clone(), &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        assert_eq!((sum.emitted, sum.dropped_ambiguous), (1, 1));
        assert_eq!(funcs(&b, start)[0].0, "zz");
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(false)).unwrap();
        assert_eq!(sum.emitted, 2);
    }

    #[test]
    fn part_only_function_has_no_entry() {
        // `check` exists only as check.part.0: no table entry, so recording
        // never produces a state and nothing is emitted for it.
        let tab = FuncTable::build(
            [&b"check.part.0"[..], b"main"]
                .iter()
                .filter_map(|n| crate::elf::functab::func_key(n).map(|k| (k, *n, 0x10)))
                .collect(),
        );
        assert_eq!(tab.lookup(b"check"), None);
        assert_eq!(tab.len(), 1);
    }

    #[test]
    fn sort_is_by_name_and_stable_within_a_name() {
        // States recorded in CU order b, a(first), c, a(second): FUNCs come
        // out a, b, c and a's prototype is the first a's (param name "first").
        let mut t = types();
        let tab = table(&[("c", 0x30), ("a", 0x10), ("b", 0x20)]);
        let (a, b_, c) = (
            tab.lookup(b"a").unwrap(),
            tab.lookup(b"b").unwrap(),
            tab.lookup(b"c").unwrap(),
        );
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, b_, t.int, &[], 0);
        state(&mut st, &mut t.btf, a, t.int, &[("first", t.int)], 0);
        state(&mut st, &mut t.btf, c, TypeId::VOID, &[], 0);
        state(&mut st, &mut t.btf, a, t.int, &[("second", t.int)], 0);
        let start = t.btf.type_count() + 1;
        emit_funcs(&mut t.btf, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        let f = funcs(&t.btf, start);
        assert_eq!(f.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), vec!["a", "b", "c"]);
        assert_eq!(f[0].2, vec![("first".into(), t.int.get())]);
        assert_eq!(f[2].1, 0);
    }

    #[test]
    fn emission_order_with_kfunc_and_annotation_tags() {
        let mut t = types();
        let tab = table(&[("bpf_fast", 0x10), ("bpf_obj", 0x20), ("plain", 0x30)]);
        let mut marks = KfuncMarks::none(tab.len());
        marks.set(0, KF_FASTCALL);
        marks.set(1, 1);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 2, t.int, &[("x", t.int)], 0);
        let v = t.btf.add_str(b"my_tag");
        st.push_annot(v, -1);
        let w = t.btf.add_str(b"arg_tag");
        st.push_annot(w, 0);
        state(&mut st, &mut t.btf, 1, t.int, &[], 0);
        state(&mut st, &mut t.btf, 0, t.int, &[], 0);
        let start = t.btf.type_count() + 1;
        let strs = t.btf.raw_strings().len();
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &marks, &opts(true)).unwrap();
        assert_eq!((sum.kfunc_tags, sum.fastcall_tags), (2, 1));
        let kinds: Vec<(Kind, String, u32)> = (start..=t.btf.type_count())
            .map(|id| {
                let ty = t.btf.ty(TypeId::new(id));
                (
                    ty.kind(),
                    t.btf.name(ty.name_off()).into_owned(),
                    if ty.kind() == Kind::DeclTag { ty.extra() } else { 0 },
                )
            })
            .collect();
        let want = vec![
            (Kind::FuncProto, "".to_string(), 0),
            (Kind::Func, "bpf_fast".into(), 0),
            (Kind::DeclTag, "bpf_kfunc".into(), u32::MAX),
            (Kind::DeclTag, "bpf_fastcall".into(), u32::MAX),
            (Kind::FuncProto, "".into(), 0),
            (Kind::Func, "bpf_obj".into(), 0),
            (Kind::DeclTag, "bpf_kfunc".into(), u32::MAX),
            (Kind::FuncProto, "".into(), 0),
            (Kind::Func, "plain".into(), 0),
            (Kind::DeclTag, "my_tag".into(), u32::MAX),
            (Kind::DeclTag, "arg_tag".into(), 0),
        ];
        assert_eq!(kinds, want);
        // FUNC linkage static; the tags point at the FUNC.
        assert_eq!(t.btf.ty(TypeId::new(start + 1)).vlen(), LINKAGE_STATIC);
        assert_eq!(t.btf.ty(TypeId::new(start + 2)).type_id(), TypeId::new(start + 1));
        // Strings in emission order, bpf_kfunc / bpf_fastcall once.
        assert_eq!(
            &t.btf.raw_strings()[strs..],
            b"bpf_fast\0bpf_kfunc\0bpf_fastcall\0bpf_obj\0plain\0"
        );
        // Without decl_tag: no kfunc tags (annotations were never recorded then).
        let mut b = types().btf;
        let mut st2 = FuncStates::new();
        state(&mut st2, &mut b, 0, TypeId::VOID, &[], 0);
        let o = EmitOptions {
            decl_tag: false,
            ..opts(true)
        };
        let sum = emit_funcs(&mut b, &mut st2, &tab, &marks, &o).unwrap();
        assert_eq!((sum.emitted, sum.kfunc_tags), (1, 0));
    }

    #[test]
    fn arena_tags() {
        let mut t = types();
        let tab = table(&[("alloc", 0x10), ("walk", 0x20), ("z", 0x30)]);
        let mut marks = KfuncMarks::none(tab.len());
        marks.set(0, KF_ARENA_RET | KF_ARENA_ARG2);
        marks.set(1, KF_ARENA_ARG1 | KF_ARENA_ARG2);
        let mut st = FuncStates::new();
        state(
            &mut st,
            &mut t.btf,
            0,
            t.pfoo,
            &[("arena", t.pint), ("hint", t.pfoo), ("cnt", t.int)],
            0,
        );
        state(&mut st, &mut t.btf, 1, t.long, &[("head", t.pfoo), ("stop", t.pfoo)], 0);
        let start = t.btf.type_count() + 1;
        let strs = t.btf.raw_strings().len();
        let o = EmitOptions {
            attributes: true,
            ..opts(true)
        };
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &marks, &o).unwrap();
        assert_eq!(sum.arena_tags, 4);
        let b = &t.btf;
        let k = |id: u32| b.ty(TypeId::new(id));
        // alloc: ret tag+ptr, arg2 tag+ptr, proto, func, bpf_kfunc.
        assert_eq!(
            (k(start).kind(), k(start).kflag(), k(start).type_id()),
            (Kind::TypeTag, true, t.foo)
        );
        assert_eq!(
            (k(start + 1).kind(), k(start + 1).type_id()),
            (Kind::Ptr, TypeId::new(start))
        );
        assert_eq!((k(start + 2).kind(), k(start + 2).type_id()), (Kind::TypeTag, t.foo));
        assert_eq!(k(start + 3).kind(), Kind::Ptr);
        let proto = k(start + 4);
        assert_eq!(proto.kind(), Kind::FuncProto);
        assert_eq!(proto.type_id(), TypeId::new(start + 1));
        let p: Vec<u32> = proto.pairs().map(|x| x[1]).collect();
        assert_eq!(p, vec![t.pint.get(), start + 3, t.int.get()]);
        // walk: two pairs, then its proto.
        let proto = k(start + 11);
        assert_eq!(proto.kind(), Kind::FuncProto);
        assert_eq!(
            proto.pairs().map(|x| x[1]).collect::<Vec<_>>(),
            vec![start + 8, start + 10]
        );
        // address_space(1) is interned once, before the first FUNC name.
        assert_eq!(&b.raw_strings()[strs..], b"address_space(1)\0alloc\0bpf_kfunc\0walk\0");
    }

    #[test]
    fn arena_flag_on_non_pointer_is_an_error() {
        let mut t = types();
        let tab = table(&[("f", 0x10), ("z", 0x30)]);
        let mut marks = KfuncMarks::none(tab.len());
        marks.set(0, KF_ARENA_RET);
        let mut st = FuncStates::new();
        state(&mut st, &mut t.btf, 0, t.int, &[], 0);
        let o = EmitOptions {
            attributes: true,
            ..opts(false)
        };
        let e = emit_funcs(&mut t.btf.clone(), &mut st.clone(), &tab, &marks, &o).unwrap_err();
        assert!(e.to_string().contains("KF_ARENA_RET"), "{e}");
        marks.set(0, KF_ARENA_ARG2);
        let e = emit_funcs(&mut t.btf.clone(), &mut st.clone(), &tab, &marks, &o).unwrap_err();
        assert!(e.to_string().contains("only 0 parameter"), "{e}");
        // Without `attributes` the flags are ignored.
        let sum = emit_funcs(&mut t.btf, &mut st, &tab, &marks, &opts(false)).unwrap();
        assert_eq!(sum.emitted, 1);
    }

    #[test]
    fn combine_compares_each_state_once_with_its_first() {
        // 330 k consistent states over 60 k names: each name's states are
        // compared with its first, 270 k pairs, not every pair of a name's
        // (a quadratic combine) nor of the run's. The grouping itself is a
        // counting sort over the names.
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, INT_SIGNED);
        let p = b.add_ref(Kind::Ptr, int);
        let names: Vec<String> = (0..60_000).map(|i| format!("f{i:06}")).collect();
        let tab = FuncTable::build(names.iter().map(|n| (n.as_bytes(), n.as_bytes(), 0x1000)).collect());
        let mut st = FuncStates::with_capacity(330_000, 900_000);
        let x = b.add_str(b"x");
        for i in 0..330_000u32 {
            st.push((i.wrapping_mul(7919)) % 60_000, int, 0, None);
            st.push_param(x, p);
            st.push_param(x, int);
        }
        let before = compare::PAIRS_COMPARED.with(|c| c.get());
        let sum = emit_funcs(&mut b, &mut st, &tab, &KfuncMarks::none(tab.len()), &opts(true)).unwrap();
        let pairs = compare::PAIRS_COMPARED.with(|c| c.get()) - before;
        assert_eq!(sum.emitted, 60_000);
        assert_eq!(pairs, 330_000 - 60_000);
    }

    #[test]
    fn split_btf_types_match_through_base() {
        let base = std::sync::Arc::new(types().btf);
        let t = types();
        let mut split = Btf::new_split(base.clone());
        let c = split.add_ref(Kind::Const, t.foo);
        let pc = split.add_ref(Kind::Ptr, c);
        assert!(types_match(&split, pc, t.pfoo, ProtoMatch::ReturnOnly));
        assert!(!types_match(&split, pc, t.pint, ProtoMatch::ReturnOnly));
        let _ = (t.int2, t.long);
    }
}
