//! Minimal BTF for CO-RE objects: a kernel's BTF cut down to what the
//! objects' relocations touch, so that it can stand in for the kernel's own
//! BTF (`btf_custom_path`) on a kernel built without it. The result is
//! byte for byte what `bpftool gen min_core_btf` (BTFGen) writes for a
//! standalone kernel BTF; with module BTF, what resolves into a module is
//! kept as well, in one standalone BTF.
//!
//! Two steps, as in BTFGen:
//!
//! 1. **Mark.** Every relocation of every object is resolved against the
//!    kernel ([`super::relocate::resolve_all`]); the first matching
//!    candidate's spec says what to keep:
//!    - a field relocation keeps its root type and, along the access path,
//!      each struct or union with only the members passed through, and
//!      those members' types;
//!    - a type relocation (target id, exists, size) keeps the type with no
//!      members, following pointers, typedefs and modifiers;
//!    - an enum-value relocation keeps the whole enum;
//!    - a type-match relocation keeps every member of the structs and
//!      unions it reaches, but not those reached through a pointer;
//!    - a local type id needs nothing, and a relocation that matched
//!      nothing keeps nothing.
//!
//!    Marking a type keeps the types it needs to be whole: a typedef's or
//!    modifier's type, an array's element and index types, a function
//!    prototype's return and parameter types; not a struct's members, and a
//!    pointer's pointee only where pointers are followed. A kind BTFGen does
//!    not handle there (a forward declaration, function, variable, section,
//!    tag) fails the run.
//!
//! 2. **Write.** The marked types in id order (the vmlinux's, then each
//!    module's), a struct or union with its marked members only, every
//!    other type copied whole; references to types not kept become void.
//!    Strings are added as each type is written, once each.

use hashbrown::{HashMap, HashSet};
use thiserror::Error;

use super::ReloKind;
use super::object::BpfObject;
use super::relocate::{self, Failure};
use super::target::{BtfIdx, Target};
use crate::btf::{Btf, Endian, Kind, Type, TypeId};

#[derive(Debug, Error)]
pub enum MinError {
    #[error("{}: section {section} relo #{relo}: {}", object.display(), failure.reason)]
    Relocation {
        object: std::path::PathBuf,
        section: String,
        relo: usize,
        failure: Failure,
    },
    #[error("{kernel}: [{id}] is a {kind}, which minimal BTF cannot hold (bpftool refuses it too)")]
    UnsupportedKind {
        kernel: String,
        id: u32,
        kind: &'static str,
    },
    #[error("{kernel}: struct or union [{id}] member #{member}: {what}")]
    BadMember {
        kernel: String,
        id: u32,
        member: usize,
        what: &'static str,
    },
}

/// A type of the target: which BTF holds it and its id there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Ref {
    btf: BtfIdx,
    id: TypeId,
}

/// What the relocations of a set of objects keep of one kernel.
#[derive(Debug)]
pub struct Marks<'t> {
    target: &'t Target,
    types: HashSet<Ref>,
    /// Types already walked, with the walk's flag (follow pointers, or
    /// behind a pointer): a second walk adds nothing, and a damaged BTF's
    /// reference cycle ends.
    walked: HashSet<(Ref, bool)>,
    /// The same for type-match walks (which keep members too).
    matched: HashSet<(Ref, bool)>,
    /// Kept members, by their struct or union and index.
    members: HashSet<(Ref, u32)>,
    /// Relocations seen, and those that matched a target type.
    pub relocations: usize,
    pub resolved: usize,
    /// Relocations that found nothing to keep, as `section relo #N: path`.
    pub unresolved: Vec<String>,
}

/// The kept BTF and what went into it.
#[derive(Debug)]
pub struct Minimal {
    pub btf: Btf,
    /// Types kept from each module (by name), beside the vmlinux's.
    pub from_modules: Vec<(String, usize)>,
}

impl<'t> Marks<'t> {
    pub fn new(target: &'t Target) -> Marks<'t> {
        Marks {
            target,
            types: HashSet::new(),
            walked: HashSet::new(),
            matched: HashSet::new(),
            members: HashSet::new(),
            relocations: 0,
            resolved: 0,
            unresolved: Vec::new(),
        }
    }

    /// Marks what `obj`'s relocations need.
    pub fn record(&mut self, obj: &BpfObject) -> Result<(), MinError> {
        let found = relocate::resolve_all(obj, self.target).map_err(|f| MinError::Relocation {
            object: obj.path.clone(),
            section: f.section,
            relo: f.relo,
            failure: f.failure,
        })?;
        for f in found {
            self.relocations += 1;
            let Some((cand, raw)) = f.target else {
                if f.kind != ReloKind::TypeIdLocal {
                    let name = obj.path.file_name().unwrap_or_default().to_string_lossy();
                    self.unresolved.push(format!(
                        "{name}: {} relo #{} <{}> {}",
                        f.section,
                        f.relo,
                        f.kind.log_name(),
                        f.path
                    ));
                }
                continue;
            };
            let kind = f.kind;
            self.resolved += 1;
            let root = self.owner(Ref {
                btf: cand.btf,
                id: cand.id,
            });
            if kind.is_field_based() {
                self.field(root, &raw)?;
            } else if kind == ReloKind::TypeMatches {
                self.type_match(root, false)?;
            } else if kind.is_type_based() {
                if kind != ReloKind::TypeIdLocal {
                    self.mark(root, true)?;
                }
            } else {
                self.mark(root, false)?;
            }
        }
        Ok(())
    }

    fn btf(&self, b: BtfIdx) -> &Btf {
        &self.target.btf(b).btf
    }

    fn ty(&self, r: Ref) -> Type<'_> {
        self.btf(r.btf).ty(r.id)
    }

    /// The BTF a type id of `r.btf`'s id space belongs to: a module's ids
    /// below its first own id are the vmlinux's.
    fn owner(&self, r: Ref) -> Ref {
        if r.btf.get() != 0 && r.id.get() < self.btf(r.btf).start_id() {
            Ref {
                btf: BtfIdx::new(0),
                id: r.id,
            }
        } else {
            r
        }
    }

    /// `id` as seen from `from`'s BTF.
    fn at(&self, from: Ref, id: TypeId) -> Option<Ref> {
        (id != TypeId::VOID).then(|| self.owner(Ref { btf: from.btf, id }))
    }

    fn unsupported(&self, r: Ref) -> MinError {
        MinError::UnsupportedKind {
            kernel: self.target.btf(r.btf).name.clone(),
            id: r.id.get(),
            kind: super::types::kind_str(&self.ty(r)),
        }
    }

    /// Keeps `r` and what it needs to be whole (see the module's notes).
    fn mark(&mut self, r: Ref, follow_pointers: bool) -> Result<(), MinError> {
        let mut next = Some(r);
        while let Some(r) = next {
            self.types.insert(r);
            if !self.walked.insert((r, follow_pointers)) {
                break;
            }
            let t = self.ty(r);
            next = match t.kind() {
                Kind::Unkn | Kind::Int | Kind::Float | Kind::Enum | Kind::Enum64 | Kind::Struct | Kind::Union => None,
                Kind::Ptr if !follow_pointers => None,
                Kind::Ptr | Kind::Const | Kind::Volatile | Kind::Restrict | Kind::Typedef => self.at(r, t.type_id()),
                Kind::Array => {
                    let (elem, index, _) = t.array();
                    if let Some(e) = self.at(r, elem) {
                        self.mark(e, follow_pointers)?;
                    }
                    self.at(r, index)
                }
                Kind::FuncProto => {
                    let params: Vec<TypeId> = t.pairs().map(|[_, ty]| TypeId::new(ty)).collect();
                    if let Some(ret) = self.at(r, t.type_id()) {
                        self.mark(ret, follow_pointers)?;
                    }
                    for p in params {
                        if let Some(p) = self.at(r, p) {
                            self.mark(p, follow_pointers)?;
                        }
                    }
                    None
                }
                _ => return Err(self.unsupported(r)),
            };
        }
        Ok(())
    }

    /// A field relocation: the root, then each member the access path
    /// passes through and its type.
    fn field(&mut self, root: Ref, raw: &[i32]) -> Result<(), MinError> {
        self.mark(root, false)?;
        let mut cur = root;
        for &idx in raw.iter().skip(1) {
            loop {
                let t = self.ty(cur);
                let skip = matches!(
                    t.kind(),
                    Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag | Kind::Typedef
                );
                if !skip {
                    break;
                }
                match self.at(cur, t.type_id()) {
                    Some(n) => cur = n,
                    None => return Err(self.unsupported(cur)),
                }
            }
            let t = self.ty(cur);
            match t.kind() {
                Kind::Struct | Kind::Union => {
                    let m = t.triples().nth(idx as usize).expect("a matched spec indexes a member");
                    self.members.insert((cur, idx as u32));
                    match self.at(cur, TypeId::new(m[1])) {
                        Some(mt) => {
                            self.mark(mt, false)?;
                            cur = mt;
                        }
                        None => return Err(self.unsupported(cur)),
                    }
                }
                Kind::Array => match self.at(cur, t.array().0) {
                    Some(e) => cur = e,
                    None => return Err(self.unsupported(cur)),
                },
                _ => return Err(self.unsupported(cur)),
            }
        }
        Ok(())
    }

    /// A type-match relocation: every member of the composites reached,
    /// except behind a pointer.
    fn type_match(&mut self, r: Ref, behind_ptr: bool) -> Result<(), MinError> {
        self.types.insert(r);
        if !self.matched.insert((r, behind_ptr)) {
            return Ok(());
        }
        let t = self.ty(r);
        match t.kind() {
            Kind::Unkn | Kind::Int | Kind::Float | Kind::Enum | Kind::Enum64 => {}
            Kind::Struct | Kind::Union => {
                if behind_ptr {
                    return Ok(());
                }
                let types: Vec<u32> = t.triples().map(|m| m[1]).collect();
                for (i, ty) in types.into_iter().enumerate() {
                    self.members.insert((r, i as u32));
                    if let Some(m) = self.at(r, TypeId::new(ty)) {
                        self.type_match(m, false)?;
                    }
                }
            }
            Kind::Const | Kind::Fwd | Kind::Restrict | Kind::Typedef | Kind::Volatile => {
                if let Some(n) = self.at(r, t.type_id()) {
                    self.type_match(n, behind_ptr)?;
                }
            }
            Kind::Ptr => {
                if let Some(n) = self.at(r, t.type_id()) {
                    self.type_match(n, true)?;
                }
            }
            Kind::Array => {
                let (elem, index, _) = t.array();
                for x in [elem, index] {
                    if let Some(x) = self.at(r, x) {
                        self.type_match(x, false)?;
                    }
                }
            }
            Kind::FuncProto => {
                let mut ids = vec![t.type_id()];
                ids.extend(t.pairs().map(|[_, ty]| TypeId::new(ty)));
                for x in ids {
                    if let Some(x) = self.at(r, x) {
                        self.type_match(x, false)?;
                    }
                }
            }
            _ => return Err(self.unsupported(r)),
        }
        Ok(())
    }

    /// Writes the kept types as one standalone BTF.
    pub fn build(&self) -> Result<Minimal, MinError> {
        let mut kept: Vec<Ref> = self.types.iter().copied().collect();
        kept.sort();
        let new_id: HashMap<Ref, TypeId> = kept
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, TypeId::new(i as u32 + 1)))
            .collect();
        let map = |from: Ref, id: u32| -> u32 {
            self.at(from, TypeId::new(id))
                .and_then(|r| new_id.get(&r))
                .map_or(0, |n| n.get())
        };
        // bpftool writes the host's byte order, whatever the input's.
        let mut out = Btf::new(Endian::native());
        let mut per_module: Vec<usize> = vec![0; self.target.btfs.len()];
        for &r in &kept {
            per_module[r.btf.get() as usize] += 1;
            let src = self.btf(r.btf);
            let t = self.ty(r);
            let name = src.str_at(t.name_off()).unwrap_or(b"");
            match t.kind() {
                Kind::Struct | Kind::Union => {
                    let union = t.kind() == Kind::Union;
                    out.begin(t.kind(), name, t.size(), false);
                    for (i, m) in t.triples().enumerate() {
                        if !self.members.contains(&(r, i as u32)) {
                            continue;
                        }
                        let (off, bits) = if t.kflag() {
                            (m[2] & 0xff_ffff, m[2] >> 24)
                        } else {
                            (m[2], 0)
                        };
                        let bitfield = bits != 0 || !off.is_multiple_of(8);
                        let bad = |what| MinError::BadMember {
                            kernel: self.target.btf(r.btf).name.clone(),
                            id: r.id.get(),
                            member: i,
                            what,
                        };
                        if bitfield && (bits == 0 || off > 0xff_ffff) {
                            return Err(bad("a bit offset that is not a byte's, with no bitfield size"));
                        }
                        if union && off != 0 {
                            return Err(bad("a union member at a non-zero offset"));
                        }
                        let mname = src.str_at(crate::btf::StrOff::new(m[0])).unwrap_or(b"");
                        out.push_member(mname, TypeId::new(map(r, m[1])), off, bits);
                    }
                }
                kind => {
                    let name_off = out.add_str(name);
                    let mut trailing = t.trailing().to_vec();
                    match kind {
                        Kind::Enum => {
                            for v in trailing.chunks_exact_mut(2) {
                                v[0] = out
                                    .add_str(src.str_at(crate::btf::StrOff::new(v[0])).unwrap_or(b""))
                                    .get();
                            }
                        }
                        Kind::Enum64 => {
                            for v in trailing.chunks_exact_mut(3) {
                                v[0] = out
                                    .add_str(src.str_at(crate::btf::StrOff::new(v[0])).unwrap_or(b""))
                                    .get();
                            }
                        }
                        Kind::FuncProto => {
                            for p in trailing.chunks_exact_mut(2) {
                                p[0] = out
                                    .add_str(src.str_at(crate::btf::StrOff::new(p[0])).unwrap_or(b""))
                                    .get();
                                p[1] = map(r, p[1]);
                            }
                        }
                        Kind::Array => {
                            trailing[0] = map(r, trailing[0]);
                            trailing[1] = map(r, trailing[1]);
                        }
                        _ => {}
                    }
                    let size_or_type = if kind.has_type_ref() {
                        map(r, t.type_id().get())
                    } else {
                        t.size()
                    };
                    out.push_raw(name_off, t.info(), size_or_type, &trailing);
                }
            }
        }
        let from_modules = self
            .target
            .btfs
            .iter()
            .zip(&per_module)
            .skip(1)
            .filter(|(_, n)| **n > 0)
            .map(|(tb, n)| (tb.name.clone(), *n))
            .collect();
        Ok(Minimal { btf: out, from_modules })
    }
}

/// The minimal BTF of `objects` against one kernel.
pub fn minimize<'t>(target: &'t Target, objects: &[BpfObject]) -> Result<(Marks<'t>, Minimal), MinError> {
    let mut marks = Marks::new(target);
    for o in objects {
        marks.record(o)?;
    }
    let min = marks.build()?;
    Ok((marks, min))
}

/// One line on what was kept, for people.
pub fn summary(marks: &Marks<'_>, min: &Minimal, bytes: usize) -> String {
    let modules = if min.from_modules.is_empty() {
        String::new()
    } else {
        let m: Vec<String> = min.from_modules.iter().map(|(n, c)| format!("{n} {c}")).collect();
        format!(" (types from modules: {})", m.join(", "))
    };
    format!(
        "{} types, {bytes} bytes; {} of {} relocations resolved, {} matched nothing{modules}",
        min.btf.type_count(),
        marks.resolved,
        marks.relocations,
        marks.unresolved.len()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::btf::Kind;

    /// A damaged kernel BTF whose pointers point at each other: marking
    /// ends, keeping both.
    #[test]
    fn a_pointer_cycle_ends() {
        let mut b = Btf::new(Endian::native());
        let n = b.add_str(b"");
        b.push_raw(n, (Kind::Ptr as u32) << 24, 2, &[]);
        b.push_raw(n, (Kind::Ptr as u32) << 24, 1, &[]);
        let target = Target::single("cycle", Arc::new(b));
        let mut m = Marks::new(&target);
        let one = Ref {
            btf: BtfIdx::new(0),
            id: TypeId::new(1),
        };
        m.mark(one, true).unwrap();
        m.type_match(one, false).unwrap();
        assert_eq!(m.types.len(), 2);
        assert_eq!(m.build().unwrap().btf.type_count(), 2);
    }
}
