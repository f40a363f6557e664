//! One object against one kernel: every CO-RE relocation resolved and
//! applied to a copy of the instructions, in libbpf's order and with its
//! outcome (`bpf_object__relocate_core`, `bpf_core_calc_relo_insn`,
//! `bpf_core_patch_insn`).

use hashbrown::HashMap;

use super::log::Log;
use super::object::{BpfObject, Insn};
use super::spec::{self, ParseFault, Spec};
use super::target::{Cand, Target};
use super::types::{self, errno, skip_mods};
use super::{ReloKind, ext::CoreRelo};
use crate::btf::{Kind, TypeId};

/// libbpf's helper id for a poisoned instruction (`0xbad2310`).
pub const POISON_HELPER: i32 = 195_896_080;

/// What became of one relocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The instruction now holds `new` where it held `orig`.
    Patched {
        orig: u64,
        new: u64,
        /// A load or store whose width changed with the field: (old, new) bytes.
        mem_size: Option<(u32, u32)>,
    },
    /// No candidate matched (or a load's width cannot follow the field):
    /// the instruction was replaced by a call to an invalid helper. The
    /// program still loads if the verifier never reaches it.
    Poisoned(PoisonCause),
    /// libbpf does not apply it: its program is not loaded (`SEC("?…")`),
    /// or it belongs to a weak function another object's copy replaced.
    Skipped(SkipCause),
    /// libbpf stops here and refuses the whole object.
    Failed(Failure),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoisonCause {
    NoMatch,
    MemSize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipCause {
    NotLoaded,
    NoProgram,
}

/// A relocation libbpf refuses: its errno and the reason in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub errno: i32,
    pub reason: String,
}

/// One relocation's result.
#[derive(Clone, Debug)]
pub struct Relocation {
    /// The `.BTF.ext` block and the record's index in it (libbpf's `relo #N`).
    pub block: usize,
    pub index: usize,
    /// The program (index in [`BpfObject::programs`]) and the instruction
    /// in it, when libbpf found one.
    pub program: Option<usize>,
    pub insn: u32,
    pub kind: Option<ReloKind>,
    /// The access path, e.g. `struct task_struct.__state`.
    pub path: String,
    /// The matching target type: its BTF's name and id.
    pub target: Option<(String, TypeId)>,
    pub outcome: Outcome,
}

/// The object after relocation against one kernel.
#[derive(Debug)]
pub struct Relocated {
    /// In libbpf's order; processing stops at the first failure.
    pub relocations: Vec<Relocation>,
    /// Each program's instructions after patching (same order as the
    /// object's programs).
    pub insns: Vec<Vec<Insn>>,
}

impl Relocated {
    pub fn failure(&self) -> Option<&Relocation> {
        self.relocations
            .iter()
            .find(|r| matches!(r.outcome, Outcome::Failed(_)))
    }
}

/// Relocates `obj` against `target`, writing libbpf's log lines to `log`.
pub fn relocate(obj: &BpfObject, target: &Target, log: &mut Log) -> Relocated {
    let mut insns: Vec<Vec<Insn>> = obj.programs.iter().map(|p| p.insns.clone()).collect();
    let mut out = Vec::new();
    let mut cands = Cands {
        cache: HashMap::new(),
        search: Search::Loader,
    };
    let local = &*obj.btf;
    'blocks: for (b, block) in obj.ext.blocks.iter().enumerate() {
        let sec_name = local.str_at(block.sec_name).unwrap_or(b"");
        let sec = obj.section_by_name(sec_name);
        let sec_show = String::from_utf8_lossy(sec_name).into_owned();
        if sec_name.is_empty() {
            out.push(Relocation {
                block: b,
                index: 0,
                program: None,
                insn: 0,
                kind: None,
                path: String::new(),
                target: None,
                outcome: Outcome::Failed(Failure {
                    errno: errno::EINVAL,
                    reason: format!(".BTF.ext block {b} names no section"),
                }),
            });
            break;
        }
        log.line(|| format!("sec '{}': found {} CO-RE relocations", sec_show, block.relos.len()));
        for (i, rec) in block.relos.iter().enumerate() {
            let kind = ReloKind::from_raw(rec.kind);
            let mut r = Relocation {
                block: b,
                index: i,
                program: None,
                insn: rec.insn_off / 8,
                kind,
                path: String::new(),
                target: None,
                outcome: Outcome::Skipped(SkipCause::NoProgram),
            };
            let fail = |r: &mut Relocation, errno: i32, reason: String| {
                r.outcome = Outcome::Failed(Failure { errno, reason });
            };
            if rec.insn_off % 8 != 0 {
                fail(
                    &mut r,
                    errno::EINVAL,
                    format!("instruction offset {} is not a multiple of 8", rec.insn_off),
                );
                out.push(r);
                break 'blocks;
            }
            let sec_insn = rec.insn_off / 8;
            let prog = sec.and_then(|s| obj.program_at(s.index, sec_insn));
            let Some(p) = prog else {
                log.line(|| {
                    format!(
                        "sec '{sec_show}': skipping CO-RE relocation #{i} for insn #{sec_insn} belonging to eliminated weak subprogram"
                    )
                });
                out.push(r);
                continue;
            };
            r.program = Some(p);
            let program = &obj.programs[p];
            if !program.autoload {
                r.outcome = Outcome::Skipped(SkipCause::NotLoaded);
                out.push(r);
                continue;
            }
            let idx = sec_insn - program.sec_insn_off;
            r.insn = idx;
            let pname = program.name.as_str();
            match resolve(obj, target, rec, i, pname, &mut cands, log) {
                Err((errno, reason)) => {
                    log.line(|| format!("prog '{pname}': relo #{i}: failed to relocate: -{errno}"));
                    fail(&mut r, errno, reason);
                    out.push(r);
                    break 'blocks;
                }
                Ok(res) => {
                    r.path = res.path.clone();
                    r.target = res.target.map(|c| (target.btf(c.btf).name.clone(), c.id));
                    match patch(&mut insns[p], idx as usize, i, pname, &res, log) {
                        Ok(o) => r.outcome = o,
                        Err((errno, reason)) => {
                            log.line(|| format!("prog '{pname}': relo #{i}: failed to patch insn #{idx}: -{errno}"));
                            fail(&mut r, errno, reason);
                            out.push(r);
                            break 'blocks;
                        }
                    }
                    out.push(r);
                }
            }
        }
    }
    Relocated {
        relocations: out,
        insns,
    }
}

/// What one relocation found in the target, as BTFGen needs it.
#[derive(Clone, Debug)]
pub struct Found {
    pub section: String,
    pub relo: usize,
    pub kind: ReloKind,
    /// The access path, e.g. `struct task_struct.__state`.
    pub path: String,
    /// The first matching candidate and its spec's raw accessors; `None`
    /// when nothing matched (or for a local type id, which needs no target).
    pub target: Option<(Cand, Vec<i32>)>,
}

/// A relocation BTFGen cannot resolve (the whole run fails on it).
#[derive(Clone, Debug)]
pub struct ResolveFailure {
    pub section: String,
    pub relo: usize,
    pub failure: Failure,
}

/// Resolves every relocation record of `obj`, as `bpftool gen
/// min_core_btf` does: all of them, whether or not a loaded program holds
/// them, with one candidate cache for the object, pruned as the loader's.
pub fn resolve_all(obj: &BpfObject, target: &Target) -> Result<Vec<Found>, ResolveFailure> {
    let mut cands = Cands {
        cache: HashMap::new(),
        search: Search::Btfgen,
    };
    let mut out = Vec::new();
    let mut log = Log::off();
    for block in &obj.ext.blocks {
        let section = String::from_utf8_lossy(obj.btf.str_at(block.sec_name).unwrap_or(b"")).into_owned();
        for (i, rec) in block.relos.iter().enumerate() {
            let res = resolve(obj, target, rec, i, &section, &mut cands, &mut log).map_err(|(errno, reason)| {
                ResolveFailure {
                    section: section.clone(),
                    relo: i,
                    failure: Failure { errno, reason },
                }
            })?;
            let kind = ReloKind::from_raw(rec.kind).expect("resolve refuses an unknown kind");
            out.push(Found {
                section: section.clone(),
                relo: i,
                kind,
                path: res.path,
                target: res.target.map(|c| (c, res.target_raw)),
            });
        }
    }
    Ok(out)
}

/// The values to patch with (libbpf's `bpf_core_relo_res`).
#[derive(Clone, Debug, Default)]
struct Res {
    orig: u64,
    new: u64,
    poison: bool,
    validate: bool,
    fail_memsz: bool,
    orig_sz: u32,
    new_sz: u32,
    orig_type: TypeId,
    new_type: TypeId,
    path: String,
    target: Option<Cand>,
    /// The matching target spec's raw accessors (`bpf_core_spec.raw_spec`).
    target_raw: Vec<i32>,
}

type Fault = (i32, String);

/// The object's candidate cache (pruned as relocations match), and how a
/// local type without a name is searched.
struct Cands {
    cache: HashMap<TypeId, Vec<Cand>>,
    search: Search,
}

/// How the candidates of a local type without a name are searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Search {
    /// libbpf's loader refuses the relocation.
    Loader,
    /// bpftool's BTFGen searches anyway, and no named type matches.
    Btfgen,
}

fn resolve(
    obj: &BpfObject,
    target: &Target,
    rec: &CoreRelo,
    i: usize,
    pname: &str,
    cands: &mut Cands,
    log: &mut Log,
) -> Result<Res, Fault> {
    let (cache, search) = (&mut cands.cache, cands.search);
    let local = &*obj.btf;
    let lt = local.get(rec.type_id).ok_or_else(|| {
        (
            errno::EINVAL,
            format!("local type [{}] does not exist", rec.type_id.get()),
        )
    })?;
    let lname = types::name(local, &lt);
    let kind = ReloKind::from_raw(rec.kind);
    if kind != Some(ReloKind::TypeIdLocal) && !cache.contains_key(&rec.type_id) {
        if lname.is_empty() && search == Search::Loader {
            log.line(|| {
                format!(
                    "prog '{pname}': relo #{i}: target candidate search failed for [{}] {} {}: -{}",
                    rec.type_id.get(),
                    types::kind_str(&lt),
                    "",
                    errno::EINVAL
                )
            });
            return Err((
                errno::EINVAL,
                format!(
                    "relocation on anonymous {} [{}]",
                    types::kind_str(&lt),
                    rec.type_id.get()
                ),
            ));
        }
        let cands = if lname.is_empty() {
            Vec::new()
        } else {
            target.candidates(lt.kind(), lname)
        };
        for c in &cands {
            log.line(|| {
                let tb = target.btf(c.btf);
                let t = tb.btf.ty(c.id);
                format!(
                    "CO-RE relocating [{}] {} {}: found target candidate [{}] {} {} in [{}]",
                    rec.type_id.get(),
                    types::kind_str(&lt),
                    String::from_utf8_lossy(lname),
                    c.id.get(),
                    types::kind_str(&t),
                    String::from_utf8_lossy(types::name(&tb.btf, &t)),
                    tb.name
                )
            });
        }
        cache.insert(rec.type_id, cands);
    }
    let access = local.str_at(rec.access).unwrap_or(b"");
    let Some(kind) = kind else {
        log.line(|| {
            format!(
                "prog '{pname}': relo #{i}: parsing [{}] {} {} + {} failed: -{}",
                rec.type_id.get(),
                types::kind_str(&lt),
                types::show(lname),
                String::from_utf8_lossy(access),
                errno::EINVAL
            )
        });
        return Err((errno::EINVAL, format!("unknown relocation kind {}", rec.kind)));
    };
    let lspec = match spec::parse(local, rec.type_id, access, kind) {
        Ok(s) => s,
        Err((e, fault)) => {
            if let ParseFault::UnexpectedKind { at, id, kind: k } = &fault {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo for [{}]  (at idx {at}) captures type [{}] of unexpected kind {k}",
                        rec.type_id.get(),
                        id.get()
                    )
                });
            }
            log.line(|| {
                format!(
                    "prog '{pname}': relo #{i}: parsing [{}] {} {} + {} failed: -{e}",
                    rec.type_id.get(),
                    types::kind_str(&lt),
                    types::show(lname),
                    String::from_utf8_lossy(access),
                )
            });
            let why = match fault {
                ParseFault::UnexpectedKind { at, kind, .. } => {
                    format!(
                        "access string \"{}\" steps into a {kind} at position {at}",
                        String::from_utf8_lossy(access)
                    )
                }
                ParseFault::Errno => format!(
                    "access string \"{}\" does not parse against {} {}",
                    String::from_utf8_lossy(access),
                    types::kind_str(&lt),
                    types::show(lname)
                ),
            };
            return Err((errno::EINVAL, why));
        }
    };
    log.line(|| format!("prog '{pname}': relo #{i}: {}", lspec.format()));
    let path = lspec.path();
    if kind == ReloKind::TypeIdLocal {
        return Ok(Res {
            orig: rec.type_id.get() as u64,
            new: rec.type_id.get() as u64,
            validate: false,
            path,
            ..Res::default()
        });
    }
    let cands = cache.get_mut(&rec.type_id).expect("searched above");
    let mut kept: Option<(Res, u32)> = None;
    let mut j = 0;
    for ci in 0..cands.len() {
        let c = cands[ci];
        let tb = target.btf(c.btf);
        let mut cspec = Spec::new(&tb.btf, tb.ptr_size, c.id, kind);
        let m = spec::spec_match(&lspec, &mut cspec, log);
        let matched = match m {
            Err(e) => {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo #{i}: error matching candidate #{ci} {}: -{e}\n ",
                        cspec.format()
                    )
                });
                return Err((
                    e,
                    format!("matching candidate [{}] in {} fails (errno {e})", c.id.get(), tb.name),
                ));
            }
            Ok(m) => m,
        };
        log.line(|| {
            format!(
                "prog '{pname}': relo #{i}: {} candidate #{ci} {}",
                if matched { "matching" } else { "non-matching" },
                cspec.format()
            )
        });
        if !matched {
            continue;
        }
        let mut res = calc(&lspec, Some(&cspec), rec, pname, log)?;
        res.target = Some(c);
        match &kept {
            None => {
                res.target_raw = cspec.raw().to_vec();
                kept = Some((res, cspec.bit_offset));
            }
            Some((k, bits)) => {
                if cspec.bit_offset != *bits {
                    log.line(|| {
                        format!(
                            "prog '{pname}': relo #{i}: field offset ambiguity: {} != {bits}",
                            cspec.bit_offset
                        )
                    });
                    return Err((
                        errno::EINVAL,
                        format!(
                            "ambiguous: candidates put {path} at bit {} and at bit {bits}",
                            cspec.bit_offset
                        ),
                    ));
                }
                if res.poison != k.poison || res.new != k.new {
                    let word = |p: bool| if p { "failure" } else { "success" };
                    log.line(|| {
                        format!(
                            "prog '{pname}': relo #{i}: relocation decision ambiguity: {} {} != {} {}",
                            word(res.poison),
                            res.new,
                            word(k.poison),
                            k.new
                        )
                    });
                    return Err((
                        errno::EINVAL,
                        format!("ambiguous: candidates give {path} the values {} and {}", res.new, k.new),
                    ));
                }
            }
        }
        cands[j] = c;
        j += 1;
    }
    if j > 0 {
        cands.truncate(j);
    }
    let mut res = match kept {
        Some((res, _)) => res,
        None => {
            log.line(|| format!("prog '{pname}': relo #{i}: no matching targets found"));
            calc(&lspec, None, rec, pname, log)?
        }
    };
    res.path = path;
    Ok(res)
}

/// Computes the original and new values (`bpf_core_calc_relo`).
fn calc(local: &Spec<'_>, targ: Option<&Spec<'_>>, rec: &CoreRelo, pname: &str, log: &mut Log) -> Result<Res, Fault> {
    let mut res = Res {
        validate: true,
        ..Res::default()
    };
    let kind = local.kind;
    if kind.is_field_based() {
        // libbpf uses its host's byte order; the object's is the one it
        // will be loaded with, and the same on a host of either order.
        let big = local.btf.endian() == crate::btf::Endian::Big;
        let l = field(Some(local), big, rec, pname, log)?;
        let t = field(targ, big, rec, pname, log)?;
        res.orig = l.val;
        res.orig_sz = l.size;
        res.orig_type = l.type_id;
        res.validate = l.validate;
        match t {
            FieldVal { poison: true, .. } => res.poison = true,
            t => {
                res.new = t.val;
                res.new_sz = t.size;
                res.new_type = t.type_id;
            }
        }
        if !res.poison && res.orig_sz != res.new_sz {
            let targ = targ.expect("a size comes from a spec");
            let ot = types::type_of(local.btf, res.orig_type);
            let nt = types::type_of(targ.btf, res.new_type);
            let ok = match (ot, nt) {
                (Some(a), Some(b)) if a.kind() == Kind::Ptr && b.kind() == Kind::Ptr => true,
                (Some(a), Some(b)) if a.kind() == Kind::Int && b.kind() == Kind::Int => {
                    a.int_encoding() != crate::btf::INT_SIGNED && b.int_encoding() != crate::btf::INT_SIGNED
                }
                _ => false,
            };
            res.fail_memsz = !ok;
        }
    } else if kind.is_type_based() {
        res.orig = type_value(local, kind)?;
        match targ {
            Some(t) => {
                res.new = type_value(t, kind)?;
            }
            None => res.new = 0,
        }
        if kind == ReloKind::TypeIdTarget {
            res.validate = false;
        }
    } else {
        res.orig = enumval(local, kind).expect("the local spec is present");
        match targ {
            Some(t) => res.new = enumval(t, kind).expect("a present spec has a value"),
            None if kind == ReloKind::EnumvalExists => res.new = 0,
            None => res.poison = true,
        }
    }
    Ok(res)
}

struct FieldVal {
    val: u64,
    size: u32,
    type_id: TypeId,
    validate: bool,
    poison: bool,
}

/// `bpf_core_calc_field_relo` on one side.
fn field(spec: Option<&Spec<'_>>, big: bool, rec: &CoreRelo, pname: &str, log: &mut Log) -> Result<FieldVal, Fault> {
    let kind = ReloKind::from_raw(rec.kind).expect("parsed");
    let mut v = FieldVal {
        val: 0,
        size: 0,
        type_id: TypeId::VOID,
        validate: true,
        poison: false,
    };
    if kind == ReloKind::FieldExists {
        v.val = spec.is_some() as u64;
        return Ok(v);
    }
    let Some(spec) = spec else {
        v.poison = true;
        return Ok(v);
    };
    let acc = spec.acc[spec.len - 1];
    let size_err = |_| (errno::EINVAL, format!("the size of {} cannot be resolved", spec.path()));
    if acc.name.is_none() {
        let sz = types::resolve_size(spec.btf, acc.type_id, spec.ptr_size).map_err(size_err)?;
        match kind {
            ReloKind::FieldByteOffset => {
                v.val = (spec.bit_offset / 8) as u64;
                v.size = sz;
                v.type_id = acc.type_id;
            }
            ReloKind::FieldByteSize => v.val = sz as u64,
            _ => {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo {} at insn #{} can't be applied to array access",
                        rec.kind,
                        rec.insn_off / 8
                    )
                });
                return Err((
                    errno::EINVAL,
                    format!(
                        "{} cannot be applied to an array element ({})",
                        kind.log_name(),
                        spec.path()
                    ),
                ));
            }
        }
        return Ok(v);
    }
    let t = types::type_of(spec.btf, acc.type_id).expect("an accessor's struct exists");
    let (_, mtype, _, bit_sz) = types::member(&t, acc.idx as usize).expect("an accessor's member exists");
    let (field_type, mt) =
        skip_mods(spec.btf, mtype).ok_or((errno::EINVAL, format!("{}: dangling type", spec.path())))?;
    let bit_off = spec.bit_offset;
    let bitfield = bit_sz > 0;
    let (byte_off, byte_sz, bit_sz) = if bitfield {
        let mut byte_sz = mt.size();
        if byte_sz == 0 {
            return Err((errno::EINVAL, format!("bitfield {} has a zero-sized type", spec.path())));
        }
        let mut byte_off = bit_off / 8 / byte_sz * byte_sz;
        while bit_off.wrapping_add(bit_sz).wrapping_sub(byte_off.wrapping_mul(8)) > byte_sz.wrapping_mul(8) {
            if byte_sz >= 8 {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo {} at insn #{} can't be satisfied for bitfield",
                        rec.kind,
                        rec.insn_off / 8
                    )
                });
                return Err((
                    errno::E2BIG,
                    format!("bitfield {} cannot be read with one 8-byte load", spec.path()),
                ));
            }
            byte_sz *= 2;
            byte_off = bit_off / 8 / byte_sz * byte_sz;
        }
        (byte_off, byte_sz, bit_sz)
    } else {
        let sz = types::resolve_size(spec.btf, field_type, spec.ptr_size).map_err(size_err)?;
        (spec.bit_offset / 8, sz, sz.wrapping_mul(8))
    };
    v.validate = !bitfield;
    match kind {
        ReloKind::FieldByteOffset => {
            v.val = byte_off as u64;
            if !bitfield {
                v.size = byte_sz;
                v.type_id = field_type;
            }
        }
        ReloKind::FieldByteSize => v.val = byte_sz as u64,
        ReloKind::FieldSigned => {
            // libbpf 1.1 reads the INT encoding bits of whatever type this
            // is (the word after the common header), fixed in 1.3.
            let enc_word = mt.words.get(3).copied().unwrap_or_else(|| next_word(spec, field_type));
            let int_signed = (enc_word >> 24) & 0x0f & crate::btf::INT_SIGNED != 0;
            v.val = ((types::is_any_enum(&mt) && mt.kflag()) || int_signed) as u64;
            v.validate = true;
        }
        ReloKind::FieldLshiftU64 => {
            v.val = if !big {
                64u32.wrapping_sub(bit_off.wrapping_add(bit_sz).wrapping_sub(byte_off.wrapping_mul(8))) as u64
            } else {
                (8u32.wrapping_sub(byte_sz))
                    .wrapping_mul(8)
                    .wrapping_add(bit_off.wrapping_sub(byte_off.wrapping_mul(8))) as u64
            };
        }
        ReloKind::FieldRshiftU64 => {
            v.val = 64u32.wrapping_sub(bit_sz) as u64;
            v.validate = true;
        }
        _ => unreachable!("field kinds only"),
    }
    Ok(v)
}

/// The word libbpf 1.1 reads as an INT encoding for a record with no
/// trailing data: the first word of the next record (its name offset).
fn next_word(spec: &Spec<'_>, id: TypeId) -> u32 {
    spec.btf.get(TypeId::new(id.get() + 1)).map_or(0, |t| t.words[0])
}

fn type_value(spec: &Spec<'_>, kind: ReloKind) -> Result<u64, Fault> {
    Ok(match kind {
        ReloKind::TypeIdTarget | ReloKind::TypeIdLocal => spec.root.get() as u64,
        ReloKind::TypeExists | ReloKind::TypeMatches => 1,
        ReloKind::TypeSize => types::resolve_size(spec.btf, spec.root, spec.ptr_size)
            .map_err(|_| (errno::EINVAL, format!("the size of {} cannot be resolved", spec.path())))?
            as u64,
        _ => unreachable!("type kinds only"),
    })
}

fn enumval(spec: &Spec<'_>, kind: ReloKind) -> Option<u64> {
    match kind {
        ReloKind::EnumvalExists => Some(1),
        _ => {
            let a = spec.acc[0];
            let t = types::type_of(spec.btf, a.type_id)?;
            types::enumerator(&t, a.idx as usize).map(|(_, v)| v)
        }
    }
}

const BPF_LD: u8 = 0;
const BPF_LDX: u8 = 1;
const BPF_ST: u8 = 2;
const BPF_STX: u8 = 3;
const BPF_ALU: u8 = 4;
const BPF_ALU64: u8 = 7;
const LDIMM64: u8 = 0x18;

fn poison_one(insns: &mut [Insn], idx: usize, i: usize, pname: &str, log: &mut Log) {
    log.line(|| format!("prog '{pname}': relo #{i}: substituting insn #{idx} w/ invalid insn"));
    if let Some(x) = insns.get_mut(idx) {
        *x = Insn {
            code: 0x85,
            dst: 0,
            src: 0,
            off: 0,
            imm: POISON_HELPER,
        };
    }
}

fn poison(insns: &mut [Insn], idx: usize, i: usize, pname: &str, log: &mut Log) {
    if insns[idx].code == LDIMM64 {
        poison_one(insns, idx + 1, i, pname, log);
    }
    poison_one(insns, idx, i, pname, log);
}

/// Applies `res` to instruction `idx` (`bpf_core_patch_insn`).
fn patch(insns: &mut [Insn], idx: usize, i: usize, pname: &str, res: &Res, log: &mut Log) -> Result<Outcome, Fault> {
    if res.poison {
        poison(insns, idx, i, pname, log);
        return Ok(Outcome::Poisoned(PoisonCause::NoMatch));
    }
    let insn = insns[idx];
    let (orig, new) = (res.orig, res.new);
    match insn.class() {
        BPF_ALU | BPF_ALU64 => {
            if insn.code & 0x08 != 0 {
                return Err((
                    errno::EINVAL,
                    format!("instruction #{idx} is an ALU op with a register source"),
                ));
            }
            if res.validate && insn.imm as i64 as u64 != orig {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo #{i}: unexpected insn #{idx} (ALU/ALU64) value: got {}, exp {orig} -> {new}",
                        insn.imm as u32
                    )
                });
                return Err((
                    errno::EINVAL,
                    format!("instruction #{idx} holds {}, not the expected {orig}", insn.imm),
                ));
            }
            insns[idx].imm = new as u32 as i32;
            log.line(|| {
                format!(
                    "prog '{pname}': relo #{i}: patched insn #{idx} (ALU/ALU64) imm {} -> {new}",
                    insn.imm as i64 as u64
                )
            });
            Ok(Outcome::Patched {
                orig: insn.imm as i64 as u64,
                new,
                mem_size: None,
            })
        }
        BPF_LDX | BPF_ST | BPF_STX => {
            if res.validate && insn.off as i64 as u64 != orig {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo #{i}: unexpected insn #{idx} (LDX/ST/STX) value: got {}, exp {orig} -> {new}",
                        insn.off as i32 as u32
                    )
                });
                return Err((
                    errno::EINVAL,
                    format!("instruction #{idx} holds offset {}, not the expected {orig}", insn.off),
                ));
            }
            if new > i16::MAX as u64 {
                log.line(|| format!("prog '{pname}': relo #{i}: insn #{idx} (LDX/ST/STX) value too big: {new}"));
                return Err((errno::ERANGE, format!("offset {new} does not fit instruction #{idx}")));
            }
            if res.fail_memsz {
                log.line(|| {
                    format!(
                        "prog '{pname}': relo #{i}: insn #{idx} (LDX/ST/STX) accesses field incorrectly. Make sure you are accessing pointers, unsigned integers, or fields of matching type and size."
                    )
                });
                poison(insns, idx, i, pname, log);
                return Ok(Outcome::Poisoned(PoisonCause::MemSize));
            }
            insns[idx].off = new as i16;
            log.line(|| {
                format!(
                    "prog '{pname}': relo #{i}: patched insn #{idx} (LDX/ST/STX) off {} -> {new}",
                    insn.off as i64 as u64
                )
            });
            let mut mem_size = None;
            if res.new_sz != res.orig_sz {
                let size = match insn.code & 0x18 {
                    0x18 => 8,
                    0x00 => 4,
                    0x08 => 2,
                    _ => 1,
                };
                if size != res.orig_sz {
                    log.line(|| {
                        format!(
                            "prog '{pname}': relo #{i}: insn #{idx} (LDX/ST/STX) unexpected mem size: got {size}, exp {}",
                            res.orig_sz
                        )
                    });
                    return Err((
                        errno::EINVAL,
                        format!(
                            "instruction #{idx} accesses {size} bytes, the field has {}",
                            res.orig_sz
                        ),
                    ));
                }
                let bits = match res.new_sz {
                    8 => 0x18,
                    4 => 0x00,
                    2 => 0x08,
                    1 => 0x10,
                    n => {
                        log.line(|| {
                            format!("prog '{pname}': relo #{i}: insn #{idx} (LDX/ST/STX) invalid new mem size: {n}")
                        });
                        return Err((errno::EINVAL, format!("the field's new size {n} is no load width")));
                    }
                };
                insns[idx].code = (insn.code & 0xe0) | bits | insn.class();
                log.line(|| {
                    format!(
                        "prog '{pname}': relo #{i}: patched insn #{idx} (LDX/ST/STX) mem_sz {} -> {}",
                        res.orig_sz, res.new_sz
                    )
                });
                mem_size = Some((res.orig_sz, res.new_sz));
            }
            Ok(Outcome::Patched {
                orig: insn.off as i64 as u64,
                new,
                mem_size,
            })
        }
        BPF_LD => {
            let next = insns.get(idx + 1).copied();
            let ok = insn.code == LDIMM64
                && insn.src == 0
                && insn.off == 0
                && next.is_some_and(|n| n.code == 0 && n.dst == 0 && n.src == 0 && n.off == 0);
            if !ok {
                log.line(|| format!("prog '{pname}': relo #{i}: insn #{idx} (LDIMM64) has unexpected form"));
                return Err((
                    errno::EINVAL,
                    format!("instruction #{idx} is not a plain 64-bit immediate load"),
                ));
            }
            let next = next.expect("checked");
            let imm = insn.imm as u32 as u64 | ((next.imm as u32 as u64) << 32);
            if res.validate && imm != orig {
                log.line(|| {
                    format!("prog '{pname}': relo #{i}: unexpected insn #{idx} (LDIMM64) value: got {imm}, exp {orig} -> {new}")
                });
                return Err((
                    errno::EINVAL,
                    format!("instruction #{idx} holds {imm}, not the expected {orig}"),
                ));
            }
            insns[idx].imm = new as u32 as i32;
            insns[idx + 1].imm = (new >> 32) as u32 as i32;
            log.line(|| format!("prog '{pname}': relo #{i}: patched insn #{idx} (LDIMM64) imm64 {imm} -> {new}"));
            Ok(Outcome::Patched {
                orig: imm,
                new,
                mem_size: None,
            })
        }
        _ => {
            log.line(|| {
                format!(
                    "prog '{pname}': relo #{i}: trying to relocate unrecognized insn #{idx}, code:{:#x}, src:{:#x}, dst:{:#x}, off:{:#x}, imm:{:#x}",
                    insn.code, insn.src, insn.dst, insn.off, insn.imm
                )
            });
            Err((
                errno::EINVAL,
                format!("instruction #{idx} (code {:#x}) cannot take a relocation", insn.code),
            ))
        }
    }
}
