//! libbpf's three notions of a local type fitting a target type: a field's
//! type (`fields_are_compat`), a type relocation's (`types_are_compat`) and
//! the stricter `TYPE_MATCHES` (`types_match`). docs/core-relocation-rules.md
//! §6.4–6.6 has the rules; the comments here say only where they bite.

use super::log::Log;
use super::types::{self, errno, is_any_enum, is_composite, skip_mods, type_of};
use crate::btf::{Btf, Kind, TypeId};

const DEPTH: i32 = 32;

fn core_compat(a: Kind, b: Kind) -> bool {
    a == b || (matches!(a, Kind::Enum | Kind::Enum64) && matches!(b, Kind::Enum | Kind::Enum64))
}

fn names_ess_equal(lb: &Btf, ln: u32, tb: &Btf, tn: u32) -> bool {
    types::essential(types::str_at(lb, ln)) == types::essential(types::str_at(tb, tn))
}

/// A member's type against a target member's (`bpf_core_fields_are_compat`).
pub fn fields_are_compat(lb: &Btf, mut lid: TypeId, tb: &Btf, mut tid: TypeId) -> Result<bool, i32> {
    // libbpf has no limit here; nested arrays are the only way to loop, and
    // a cycle of them exists only in damaged BTF, so a generous bound
    // turns that hang into an error.
    for _ in 0..4096 {
        let (_, lt) = skip_mods(lb, lid).ok_or(errno::EINVAL)?;
        let (_, tt) = skip_mods(tb, tid).ok_or(errno::EINVAL)?;
        if is_composite(&lt) && is_composite(&tt) {
            return Ok(true);
        }
        if !core_compat(lt.kind(), tt.kind()) {
            return Ok(false);
        }
        return Ok(match lt.kind() {
            Kind::Ptr | Kind::Float => true,
            Kind::Fwd | Kind::Enum | Kind::Enum64 => {
                let ln = types::essential(types::name(lb, &lt));
                let tn = types::essential(types::name(tb, &tt));
                ln.is_empty() || tn.is_empty() || ln == tn
            }
            Kind::Int => lt.int_offset() == 0 && tt.int_offset() == 0,
            Kind::Array => {
                lid = lt.array().0;
                tid = tt.array().0;
                continue;
            }
            _ => false,
        });
    }
    Err(errno::EINVAL)
}

/// Type relocations other than TYPE_MATCHES (`bpf_core_types_are_compat`).
pub fn types_are_compat(lb: &Btf, lid: TypeId, tb: &Btf, tid: TypeId, log: &mut Log) -> Result<bool, i32> {
    types_are_compat_at(lb, lid, tb, tid, DEPTH, log)
}

fn types_are_compat_at(
    lb: &Btf,
    mut lid: TypeId,
    tb: &Btf,
    mut tid: TypeId,
    level: i32,
    log: &mut Log,
) -> Result<bool, i32> {
    let lt = type_of(lb, lid).ok_or(errno::EINVAL)?;
    let tt = type_of(tb, tid).ok_or(errno::EINVAL)?;
    if !core_compat(lt.kind(), tt.kind()) {
        return Ok(false);
    }
    let mut depth = DEPTH;
    loop {
        depth -= 1;
        if depth < 0 {
            return Err(errno::EINVAL);
        }
        let (l, lt) = skip_mods(lb, lid).ok_or(errno::EINVAL)?;
        let (t, tt) = skip_mods(tb, tid).ok_or(errno::EINVAL)?;
        (lid, tid) = (l, t);
        if !core_compat(lt.kind(), tt.kind()) {
            return Ok(false);
        }
        match lt.kind() {
            Kind::Unkn | Kind::Struct | Kind::Union | Kind::Enum | Kind::Fwd | Kind::Enum64 => return Ok(true),
            Kind::Int => return Ok(lt.int_offset() == 0 && tt.int_offset() == 0),
            Kind::Ptr => (lid, tid) = (lt.type_id(), tt.type_id()),
            Kind::Array => (lid, tid) = (lt.array().0, tt.array().0),
            Kind::FuncProto => {
                if lt.vlen() != tt.vlen() {
                    return Ok(false);
                }
                for (lp, tp) in lt.pairs().zip(tt.pairs()) {
                    if level <= 0 {
                        return Err(errno::EINVAL);
                    }
                    let lp = skip_mods(lb, TypeId::new(lp[1])).map_or(TypeId::new(lp[1]), |x| x.0);
                    let tp = skip_mods(tb, TypeId::new(tp[1])).map_or(TypeId::new(tp[1]), |x| x.0);
                    if !types_are_compat_at(lb, lp, tb, tp, level - 1, log)? {
                        return Ok(false);
                    }
                }
                lid = skip_mods(lb, lt.type_id()).map_or(lt.type_id(), |x| x.0);
                tid = skip_mods(tb, tt.type_id()).map_or(tt.type_id(), |x| x.0);
            }
            _ => return Ok(unexpected_kind(&lt, lid, tid, log)),
        }
    }
}

/// libbpf's warning for a kind neither rule knows (FLOAT among them): no
/// match.
fn unexpected_kind(lt: &crate::btf::Type<'_>, lid: TypeId, tid: TypeId, log: &mut Log) -> bool {
    log.line(|| {
        format!(
            "unexpected kind {} relocated, local [{}], target [{}]",
            types::kind_str(lt),
            lid.get(),
            tid.get()
        )
    });
    false
}

/// TYPE_MATCHES (`bpf_core_types_match`).
pub fn types_match(lb: &Btf, lid: TypeId, tb: &Btf, tid: TypeId, log: &mut Log) -> Result<bool, i32> {
    types_match_at(lb, lid, tb, tid, false, DEPTH, log)
}

fn names_match(lb: &Btf, ln: u32, tb: &Btf, tn: u32) -> bool {
    let t = types::str_at(tb, tn);
    if t.is_empty() {
        return types::str_at(lb, ln).is_empty();
    }
    names_ess_equal(lb, ln, tb, tn)
}

fn types_match_at(
    lb: &Btf,
    mut lid: TypeId,
    tb: &Btf,
    mut tid: TypeId,
    mut behind_ptr: bool,
    level: i32,
    log: &mut Log,
) -> Result<bool, i32> {
    if level <= 0 {
        return Err(errno::EINVAL);
    }
    let mut depth = DEPTH;
    loop {
        depth -= 1;
        if depth < 0 {
            return Err(errno::EINVAL);
        }
        let (l, lt) = skip_mods(lb, lid).ok_or(errno::EINVAL)?;
        let (t, tt) = skip_mods(tb, tid).ok_or(errno::EINVAL)?;
        (lid, tid) = (l, t);
        if !names_match(lb, lt.name_off().get(), tb, tt.name_off().get()) {
            return Ok(false);
        }
        let (lk, tk) = (lt.kind(), tt.kind());
        match lk {
            Kind::Unkn => return Ok(lk == tk),
            Kind::Fwd => {
                let lf = lt.kflag();
                return Ok(if behind_ptr {
                    if lk == tk {
                        lf == tt.kflag()
                    } else {
                        (tk == Kind::Struct && !lf) || (tk == Kind::Union && lf)
                    }
                } else {
                    lk == tk && lf == tt.kflag()
                });
            }
            Kind::Enum | Kind::Enum64 => {
                if !is_any_enum(&tt) || lt.size() != tt.size() || lt.vlen() > tt.vlen() {
                    return Ok(false);
                }
                for i in 0..lt.vlen() as usize {
                    let (ln, _) = types::enumerator(&lt, i).expect("index below vlen");
                    let hit = (0..tt.vlen() as usize)
                        .any(|j| names_match(lb, ln, tb, types::enumerator(&tt, j).expect("index below vlen").0));
                    if !hit {
                        return Ok(false);
                    }
                }
                return Ok(true);
            }
            Kind::Struct | Kind::Union => {
                if behind_ptr {
                    if lk == tk {
                        return Ok(true);
                    }
                    if tk != Kind::Fwd {
                        return Ok(false);
                    }
                    return Ok((lk == Kind::Union) == tt.kflag());
                }
                if lk != tk || lt.vlen() > tt.vlen() {
                    return Ok(false);
                }
                for i in 0..lt.vlen() as usize {
                    let (ln, lty, _, _) = types::member(&lt, i).expect("index below vlen");
                    let mut matched = false;
                    for j in 0..tt.vlen() as usize {
                        let (tn, tty, _, _) = types::member(&tt, j).expect("index below vlen");
                        if !names_match(lb, ln, tb, tn) {
                            continue;
                        }
                        if types_match_at(lb, lty, tb, tty, behind_ptr, level - 1, log)? {
                            matched = true;
                            break;
                        }
                    }
                    if !matched {
                        return Ok(false);
                    }
                }
                return Ok(true);
            }
            Kind::Int => {
                let sgn = |e: u32| e & crate::btf::INT_SIGNED;
                return Ok(lk == tk && lt.size() == tt.size() && sgn(lt.int_encoding()) == sgn(tt.int_encoding()));
            }
            Kind::Ptr => {
                if lk != tk {
                    return Ok(false);
                }
                behind_ptr = true;
                (lid, tid) = (lt.type_id(), tt.type_id());
            }
            Kind::Array => {
                let (le, _, ln) = lt.array();
                if lk != tk {
                    return Ok(false);
                }
                let (te, _, tn) = tt.array();
                if ln != tn {
                    return Ok(false);
                }
                (lid, tid) = (le, te);
            }
            Kind::FuncProto => {
                if lk != tk || lt.vlen() != tt.vlen() {
                    return Ok(false);
                }
                for (lp, tp) in lt.pairs().zip(tt.pairs()) {
                    if !types_match_at(
                        lb,
                        TypeId::new(lp[1]),
                        tb,
                        TypeId::new(tp[1]),
                        behind_ptr,
                        level - 1,
                        log,
                    )? {
                        return Ok(false);
                    }
                }
                (lid, tid) = (lt.type_id(), tt.type_id());
            }
            _ => return Ok(unexpected_kind(&lt, lid, tid, log)),
        }
    }
}
