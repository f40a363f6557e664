//! C header rendering of a BTF: the `vmlinux.h` that `bpftool btf dump file X
//! format c` prints, byte for byte as the bpftool of Debian bookworm (v7.1.0,
//! built from Linux 6.1 with its in-tree libbpf 1.1) prints it.
//!
//! The rendering has two passes per root type, both driven by small per-type
//! state machines:
//!
//! 1. *Ordering*: a depth-first walk that queues every named definition a
//!    root needs, dependencies first. A link is *strong* (the target must be
//!    fully defined first) when the target is embedded by value or is
//!    anonymous and so written inline; it is *weak* when a pointer and a named
//!    type lie on the way, and a forward declaration is enough.
//! 2. *Emission*: each queued type is written; named structs met on the way
//!    that are not yet defined get a forward declaration, typedefs seen while
//!    their own target is still being written are written early.
//!
//! Names that repeat within one C namespace (struct/union/enum tags, and
//! typedefs together with enumerators) get a `___N` suffix in the order they
//! are first written, as the reference does. For split BTF every type from id
//! 1 is written, base types included: the header must be self-contained.
//!
//! Differences from that bpftool, on purpose: a BTF whose modifier or pointer
//! chains loop (the reference hangs or overflows its stack) is refused with
//! an error, and so is nesting deeper than [`MAX_DEPTH`] levels (which the
//! reference would still render); an unsatisfiable by-value cycle is an
//! error without partial output (the reference prints a truncated header and
//! fails). [`Options::enum_sizes`] opts into a fix libbpf made after 7.1.0.

use std::borrow::Cow;
use std::io::Write as _;

use hashbrown::HashMap;
use thiserror::Error;

use super::{Btf, Kind, StrOff, Type, TypeId};

/// Nesting limit of every recursive walk; real BTF stays far below it (the
/// corpus vmlinux, even before dedup, nests under 20 levels), and a
/// reference loop in malformed BTF ends here instead of in a stack overflow.
pub const MAX_DEPTH: u32 = 256;

/// Tabs beyond this indent level are not added (the reference's prefix table).
const MAX_INDENT: usize = 13;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CDumpError {
    #[error("type [{id}]: unsatisfiable type cycle (it contains itself by value)")]
    Cycle { id: u32 },
    #[error(
        "type [{id}]: types nest more than {MAX_DEPTH} levels deep (a reference loop, or nesting beyond the supported limit)"
    )]
    TooDeep { id: u32 },
    #[error("type [{id}] refers to type [{target}], which does not exist")]
    BadRef { id: u32, target: u32 },
    #[error("type [{id}]: kind {kind} has no C rendering")]
    BadKind { id: u32, kind: &'static str },
    #[error("root type [{id}] does not exist")]
    BadRoot { id: u32 },
    #[error(
        "type [{id}]: an array of void elements has no C rendering (such BTF comes from DWARF type units read \
         as the reference reads them; bpftool 7.1.0 crashes on it)"
    )]
    VoidElements { id: u32 },
    #[error("no struct, union, enum, typedef or base type named '{name}'{}", did_you_mean(.near))]
    NoSuchName { name: String, near: Vec<String> },
}

type Result<T> = std::result::Result<T, CDumpError>;

/// The kinds `--filter` finds by name.
fn is_named_kind(k: Kind) -> bool {
    matches!(
        k,
        Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Typedef | Kind::Int | Kind::Float | Kind::Fwd
    )
}

fn did_you_mean(near: &[String]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", near.join(", "))
    }
}

/// Up to five names of `btf`'s named types closest to `name` (by edit
/// distance, at most a third of the name's length, or sharing its start).
fn closest_names(btf: &Btf, name: &str) -> Vec<String> {
    let mut scored: Vec<(usize, String)> = Vec::new();
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId(id));
        if t.name_off().0 == 0 || !is_named_kind(t.kind()) {
            continue;
        }
        let Some(n) = btf.str_at(t.name_off()).and_then(|n| std::str::from_utf8(n).ok()) else {
            continue;
        };
        let d = strsim::levenshtein(name, n);
        if d <= (name.len() / 3).max(1) || (name.len() >= 4 && n.starts_with(name)) {
            scored.push((d, n.to_string()));
        }
    }
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, n)| n).collect()
}

/// Choices beyond the reference's output. The default reproduces bpftool
/// 7.1.0 byte for byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Give 1-byte enums `__attribute__((mode(byte)))` and 8-byte enums
    /// that C would make 4 bytes `__attribute__((mode(word)))`, as libbpf
    /// does since 1.2. Without it (bpftool 7.1.0) such enums compile as 4
    /// bytes and every struct holding one (`struct inode`, `struct bio`...)
    /// gets a layout different from the BTF's.
    pub enum_sizes: bool,
}

/// Renders the whole BTF (every type from id 1, base types included) as
/// bpftool 7.1.0 does.
pub fn to_c(btf: &Btf) -> Result<Vec<u8>> {
    render(btf, None, Options::default())
}

/// Renders `roots` (in that order) and every type they need.
pub fn to_c_roots(btf: &Btf, roots: &[TypeId]) -> Result<Vec<u8>> {
    render(btf, Some(roots), Options::default())
}

/// Renders `roots` (every type when None) and what they need.
pub fn render(btf: &Btf, roots: Option<&[TypeId]>, opts: Options) -> Result<Vec<u8>> {
    if let Some(id) = (1..=btf.type_count()).find(|&id| {
        let t = btf.ty(TypeId(id));
        t.kind() == Kind::Array && t.array().0.0 == 0
    }) {
        return Err(CDumpError::VoidElements { id });
    }
    let mut d = Dumper::new(btf, opts)?;
    d.out.extend_from_slice(HEADER);
    match roots {
        None => {
            for id in 1..=btf.type_count() {
                d.dump_type(id)?;
            }
        }
        Some(roots) => {
            for &r in roots {
                if r.0 == 0 || r.0 > btf.type_count() {
                    return Err(CDumpError::BadRoot { id: r.0 });
                }
                d.dump_type(r.0)?;
            }
        }
    }
    d.out.extend_from_slice(FOOTER);
    Ok(d.out)
}

/// Ids of the types a `--filter` name selects: named structs, unions, enums,
/// typedefs, ints and floats called `name` (`struct foo`, `union foo` and
/// `enum foo` restrict the kind), in id order. Forward declarations count
/// only when no definition of that name exists.
pub fn ids_named(btf: &Btf, name: &str) -> Result<Vec<TypeId>> {
    let (want, bare) = match name.split_once(' ') {
        Some(("struct", n)) => (Some(Kind::Struct), n),
        Some(("union", n)) => (Some(Kind::Union), n),
        Some(("enum", n)) => (Some(Kind::Enum), n),
        _ => (None, name),
    };
    let bare = bare.trim().as_bytes();
    let kind_ok = |k: Kind, t: &Type<'_>| match want {
        None => true,
        Some(Kind::Struct) => k == Kind::Struct || (k == Kind::Fwd && !t.kflag()),
        Some(Kind::Union) => k == Kind::Union || (k == Kind::Fwd && t.kflag()),
        Some(Kind::Enum) => k == Kind::Enum || k == Kind::Enum64,
        Some(_) => false,
    };
    let mut defs = Vec::new();
    let mut fwds = Vec::new();
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId(id));
        let k = t.kind();
        if !is_named_kind(k) || t.name_off().0 == 0 || !kind_ok(k, &t) {
            continue;
        }
        if btf.str_at(t.name_off()) == Some(bare) {
            if k == Kind::Fwd {
                fwds.push(TypeId(id))
            } else {
                defs.push(TypeId(id))
            }
        }
    }
    let ids = if defs.is_empty() { fwds } else { defs };
    if ids.is_empty() {
        let bare = String::from_utf8_lossy(bare).into_owned();
        return Err(CDumpError::NoSuchName {
            name: name.to_string(),
            near: closest_names(btf, &bare),
        });
    }
    Ok(ids)
}

const HEADER: &[u8] = b"#ifndef __VMLINUX_H__\n#define __VMLINUX_H__\n\n#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n\
#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)\n#endif\n\n";
const FOOTER: &[u8] =
    b"#ifndef BPF_NO_PRESERVE_ACCESS_INDEX\n#pragma clang attribute pop\n#endif\n\n#endif /* __VMLINUX_H__ */\n";

/// Where a type is in the ordering walk.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
enum Order {
    #[default]
    Todo,
    InProgress,
    Done,
}

/// Where a type is in the emission walk.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
enum Emit {
    #[default]
    Todo,
    InProgress,
    Done,
}

#[derive(Clone, Copy, Default, Debug)]
struct State {
    order: Order,
    emit: Emit,
    /// A forward declaration (or, for a typedef, the typedef itself) is out.
    fwd_emitted: bool,
    /// The type's C name (with any `___N` suffix) has been fixed.
    name_resolved: bool,
    /// Some other type refers to it (tells inline anonymous enums from
    /// top-level anonymous constant enums).
    referenced: bool,
}

struct Dumper<'a> {
    btf: &'a Btf,
    out: Vec<u8>,
    st: Vec<State>,
    /// Names given a `___N` suffix, by type id.
    renamed: HashMap<u32, Vec<u8>>,
    /// Occurrences per name: struct/union/enum tags.
    tag_names: HashMap<&'a [u8], u32>,
    /// Occurrences per name: typedefs and enumerators.
    ident_names: HashMap<&'a [u8], u32>,
    queue: Vec<u32>,
    /// Declaration chains of nested declarators, one frame after another.
    stack: Vec<u32>,
    ptr_sz: u32,
    opts: Options,
}

#[inline]
fn roundup(x: i64, to: i64) -> i64 {
    // A zero alignment only comes from malformed members (the reference
    // divides by zero there); treat it as no constraint.
    if to <= 0 { x } else { (x + to - 1) / to * to }
}

impl<'a> Dumper<'a> {
    fn new(btf: &'a Btf, opts: Options) -> Result<Dumper<'a>> {
        let n = btf.type_count() as usize + 1;
        let mut d = Dumper {
            btf,
            out: Vec::with_capacity(1 << 20),
            st: vec![State::default(); n],
            renamed: HashMap::new(),
            tag_names: HashMap::with_capacity(n / 4),
            ident_names: HashMap::with_capacity(n / 2),
            queue: Vec::new(),
            stack: Vec::with_capacity(64),
            ptr_sz: pointer_size(btf),
            opts,
        };
        // Void is always defined.
        d.st[0].order = Order::Done;
        d.st[0].emit = Emit::Done;
        d.mark_referenced()?;
        Ok(d)
    }

    /// Sets `referenced` on every type another one points at, checking on
    /// the way that every reference exists (so later lookups cannot fail).
    fn mark_referenced(&mut self) -> Result<()> {
        let btf = self.btf;
        let last = btf.type_count();
        for id in 1..=last {
            let t = btf.ty(TypeId(id));
            let mark = |target: u32, st: &mut Vec<State>| {
                if target > last {
                    return Err(CDumpError::BadRef { id, target });
                }
                st[target as usize].referenced = true;
                Ok(())
            };
            match t.kind() {
                Kind::Int | Kind::Enum | Kind::Enum64 | Kind::Fwd | Kind::Float => {}
                Kind::Volatile
                | Kind::Const
                | Kind::Restrict
                | Kind::Ptr
                | Kind::Typedef
                | Kind::Func
                | Kind::Var
                | Kind::DeclTag
                | Kind::TypeTag => mark(t.type_id().0, &mut self.st)?,
                Kind::Array => {
                    let (elem, index, _) = t.array();
                    mark(index.0, &mut self.st)?;
                    mark(elem.0, &mut self.st)?;
                }
                Kind::Struct | Kind::Union => {
                    for [_, ty, _] in t.triples() {
                        mark(ty, &mut self.st)?;
                    }
                }
                Kind::FuncProto => {
                    // The return type is checked but, as in the reference,
                    // does not count as a reference.
                    if t.type_id().0 > last {
                        return Err(CDumpError::BadRef {
                            id,
                            target: t.type_id().0,
                        });
                    }
                    for [_, ty] in t.pairs() {
                        mark(ty, &mut self.st)?;
                    }
                }
                Kind::Datasec => {
                    for [ty, _, _] in t.triples() {
                        mark(ty, &mut self.st)?;
                    }
                }
                Kind::Unkn => {
                    return Err(CDumpError::BadKind {
                        id,
                        kind: Kind::Unkn.name(),
                    });
                }
            }
        }
        Ok(())
    }

    fn dump_type(&mut self, id: u32) -> Result<()> {
        self.queue.clear();
        self.order(id, false, 0)?;
        let queue = std::mem::take(&mut self.queue);
        for &q in &queue {
            self.emit(q, 0, 0)?;
        }
        self.queue = queue;
        Ok(())
    }

    // ---- type access ----

    /// Type `id`; only called for ids other than 0 (void has no record).
    #[inline]
    fn ty(&self, id: u32) -> Type<'a> {
        self.btf.ty(TypeId(id))
    }

    #[inline]
    fn kind(&self, id: u32) -> Kind {
        if id == 0 { Kind::Unkn } else { self.ty(id).kind() }
    }

    #[inline]
    fn str(&self, off: u32) -> &'a [u8] {
        let btf: &'a Btf = self.btf;
        btf.str_at(StrOff(off)).unwrap_or(b"")
    }

    // ---- ordering ----

    /// Queues the named definitions `id` needs; true when the link to `id`
    /// is strong (it must be fully defined before its user).
    fn order(&mut self, id: u32, through_ptr: bool, depth: u32) -> Result<bool> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        let state = self.st[id as usize].order;
        if state == Order::Done {
            return Ok(true);
        }
        let t = self.ty(id);
        let kind = t.kind();
        let named = t.name_off().0 != 0;
        if state == Order::InProgress {
            // A loop is fine when it goes through a pointer to a named
            // struct/union: a forward declaration breaks it.
            if matches!(kind, Kind::Struct | Kind::Union) && through_ptr && named {
                return Ok(false);
            }
            return Err(CDumpError::Cycle { id });
        }
        let depth = depth + 1;
        match kind {
            Kind::Int | Kind::Float => {
                self.st[id as usize].order = Order::Done;
                Ok(false)
            }
            Kind::Ptr => {
                let r = self.order(t.type_id().0, true, depth);
                self.st[id as usize].order = Order::Done;
                r
            }
            Kind::Array => self.order(t.array().0.0, false, depth),
            Kind::Struct | Kind::Union => {
                if through_ptr && named {
                    return Ok(false);
                }
                self.st[id as usize].order = Order::InProgress;
                for [_, ty, _] in t.triples() {
                    self.order(ty, false, depth)?;
                }
                if named {
                    self.queue.push(id);
                }
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Enum | Kind::Enum64 | Kind::Fwd => {
                // Named ones, and anonymous enums nothing refers to (global
                // constants), are top-level declarations.
                if named || !self.st[id as usize].referenced {
                    self.queue.push(id);
                }
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Typedef => {
                let strong = self.order(t.type_id().0, through_ptr, depth)?;
                if through_ptr && !strong {
                    return Ok(false);
                }
                self.queue.push(id);
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
                self.order(t.type_id().0, through_ptr, depth)
            }
            Kind::FuncProto => {
                let mut strong = self.order(t.type_id().0, through_ptr, depth)?;
                for [_, ty] in t.pairs() {
                    strong |= self.order(ty, through_ptr, depth)?;
                }
                Ok(strong)
            }
            Kind::Func | Kind::Var | Kind::Datasec | Kind::DeclTag => {
                self.st[id as usize].order = Order::Done;
                Ok(false)
            }
            Kind::Unkn => Err(CDumpError::BadKind { id, kind: kind.name() }),
        }
    }

    // ---- emission ----

    /// Writes what `id` needs and, at top level (`cont == 0`), `id` itself.
    /// `cont` is the named struct/typedef being written, if any.
    fn emit(&mut self, id: u32, cont: u32, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        let depth = depth + 1;
        let s = self.st[id as usize];
        if s.emit == Emit::Done {
            return Ok(());
        }
        let t = self.ty(id);
        let kind = t.kind();
        let named = t.name_off().0 != 0;
        if s.emit == Emit::InProgress {
            // Met again while being written: only a declaration can help.
            if s.fwd_emitted {
                return Ok(());
            }
            match kind {
                Kind::Struct | Kind::Union => {
                    // Referring to the struct being defined, or an anonymous
                    // loop (nothing can be done about that).
                    if id == cont || !named {
                        return Ok(());
                    }
                    self.struct_fwd(id, t);
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].fwd_emitted = true;
                }
                Kind::Typedef => {
                    if !self.is_builtin_va_list(t) {
                        self.typedef_def(id, t, 0, depth)?;
                        self.out.extend_from_slice(b";\n\n");
                    }
                    self.st[id as usize].fwd_emitted = true;
                }
                _ => {}
            }
            return Ok(());
        }
        let top_level = cont == 0;
        match kind {
            Kind::Int => {
                self.missing_alias(id);
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Enum | Kind::Enum64 => {
                if top_level {
                    self.enum_def(id, t, 0);
                    self.out.extend_from_slice(b";\n\n");
                }
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Ptr | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
                self.emit(t.type_id().0, cont, depth)?
            }
            Kind::Array => self.emit(t.array().0.0, cont, depth)?,
            Kind::Fwd => {
                self.fwd_def(id, t);
                self.out.extend_from_slice(b";\n\n");
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Typedef => {
                self.st[id as usize].emit = Emit::InProgress;
                self.emit(t.type_id().0, id, depth)?;
                if !self.st[id as usize].fwd_emitted && !self.is_builtin_va_list(t) {
                    self.typedef_def(id, t, 0, depth)?;
                    self.out.extend_from_slice(b";\n\n");
                }
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Struct | Kind::Union => {
                self.st[id as usize].emit = Emit::InProgress;
                if top_level || !named {
                    // Its members are written out here: what they refer to
                    // must be declared first.
                    let inner = if named { id } else { cont };
                    for [_, ty, _] in t.triples() {
                        self.emit(ty, inner, depth)?;
                    }
                } else if !self.st[id as usize].fwd_emitted && id != cont {
                    self.struct_fwd(id, t);
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].fwd_emitted = true;
                }
                if top_level {
                    self.struct_def(id, t, 0, depth)?;
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].emit = Emit::Done;
                } else {
                    self.st[id as usize].emit = Emit::Todo;
                }
            }
            Kind::FuncProto => {
                self.emit(t.type_id().0, cont, depth)?;
                for [_, ty] in t.pairs() {
                    self.emit(ty, cont, depth)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `__builtin_va_list` is the compiler's own; defining it breaks builds.
    fn is_builtin_va_list(&self, t: Type<'_>) -> bool {
        t.name_off().0 != 0 && self.str(t.name_off().0) == b"__builtin_va_list"
    }

    /// GCC's ARM SIMD polynomial types have no C definition: alias them.
    fn missing_alias(&mut self, id: u32) {
        const ALIASES: [(&[u8], &[u8]); 4] = [
            (b"__Poly8_t", b"unsigned char"),
            (b"__Poly16_t", b"unsigned short"),
            (b"__Poly64_t", b"unsigned long long"),
            (b"__Poly128_t", b"unsigned __int128"),
        ];
        let name = self.resolve_name(id, false);
        if let Some((n, base)) = ALIASES.iter().find(|(n, _)| *n == &name[..]) {
            self.out.extend_from_slice(b"typedef ");
            self.out.extend_from_slice(base);
            self.out.push(b' ');
            self.out.extend_from_slice(n);
            self.out.extend_from_slice(b";\n\n");
        }
    }

    // ---- names ----

    /// One more occurrence of `name` in a namespace; returns the count so far.
    fn bump(map: &mut HashMap<&'a [u8], u32>, name: &'a [u8]) -> u32 {
        let c = map.entry(name).or_insert(0);
        *c += 1;
        *c
    }

    /// The C name of type `id` in the tag (`ident == false`) or ordinary
    /// identifier namespace, fixed on first use: the N-th distinct type
    /// using a name gets `name___N`.
    fn resolve_name(&mut self, id: u32, ident: bool) -> Cow<'a, [u8]> {
        let t = self.ty(id);
        if t.name_off().0 == 0 {
            return Cow::Borrowed(b"");
        }
        let name = self.str(t.name_off().0);
        if self.st[id as usize].name_resolved {
            return match self.renamed.get(&id) {
                Some(n) => Cow::Owned(n.clone()),
                None => Cow::Borrowed(name),
            };
        }
        self.st[id as usize].name_resolved = true;
        // Declarations without a body never clash with their definition.
        let k = t.kind();
        if k == Kind::Fwd || (k == Kind::Enum && t.vlen() == 0) {
            return Cow::Borrowed(name);
        }
        let map = if ident {
            &mut self.ident_names
        } else {
            &mut self.tag_names
        };
        let n = Self::bump(map, name);
        if n > 1 {
            let mut s = name.to_vec();
            write!(s, "___{n}").unwrap();
            // The reference formats into a 256-byte buffer.
            s.truncate(255);
            self.renamed.insert(id, s.clone());
            return Cow::Owned(s);
        }
        Cow::Borrowed(name)
    }

    fn put_tag_name(&mut self, id: u32) {
        let n = self.resolve_name(id, false);
        self.out.extend_from_slice(&n);
    }

    fn indent(&mut self, lvl: usize) {
        for _ in 0..lvl.min(MAX_INDENT) {
            self.out.push(b'\t');
        }
    }

    // ---- definitions ----

    fn struct_fwd(&mut self, id: u32, t: Type<'_>) {
        self.out
            .extend_from_slice(if t.kind() == Kind::Struct { b"struct" } else { b"union" });
        if t.name_off().0 != 0 {
            self.out.push(b' ');
        }
        self.put_tag_name(id);
    }

    fn fwd_def(&mut self, id: u32, t: Type<'_>) {
        self.out
            .extend_from_slice(if t.kflag() { b"union " } else { b"struct " });
        self.put_tag_name(id);
    }

    fn enum_fwd(&mut self, id: u32) {
        self.out.extend_from_slice(b"enum ");
        self.put_tag_name(id);
    }

    fn enum_def(&mut self, id: u32, t: Type<'a>, lvl: usize) {
        self.out.extend_from_slice(b"enum");
        if t.name_off().0 != 0 {
            self.out.push(b' ');
        }
        self.put_tag_name(id);
        if t.vlen() == 0 {
            return;
        }
        self.out.extend_from_slice(b" {");
        let signed = t.kflag();
        // Enumerators share the ordinary identifier namespace.
        if t.kind() == Kind::Enum {
            for [n, v] in t.pairs() {
                self.enumerator(n, lvl);
                if signed {
                    write!(self.out, " = {},", v as i32).unwrap();
                } else {
                    write!(self.out, " = {},", v).unwrap();
                }
            }
        } else {
            for [n, lo, hi] in t.triples() {
                self.enumerator(n, lvl);
                let v = (hi as u64) << 32 | lo as u64;
                if signed {
                    write!(self.out, " = {}LL,", v as i64).unwrap();
                } else {
                    write!(self.out, " = {}ULL,", v).unwrap();
                }
            }
        }
        self.out.push(b'\n');
        self.indent(lvl);
        self.out.push(b'}');
        // bpftool 7.1.0 stops here; see Options::enum_sizes.
        if self.opts.enum_sizes {
            if t.size() == 1 {
                self.out.extend_from_slice(b" __attribute__((mode(byte)))");
            } else if t.size() == 8 && self.ptr_sz == 8 {
                // C widens an enum to 8 bytes by itself only when a value
                // needs the upper half.
                let wide = t.kind() == Kind::Enum64 && t.triples().any(|[_, _, hi]| hi != 0);
                if !wide {
                    self.out.extend_from_slice(b" __attribute__((mode(word)))");
                }
            }
        }
    }

    fn enumerator(&mut self, name_off: u32, lvl: usize) {
        let name = self.str(name_off);
        let n = Self::bump(&mut self.ident_names, name);
        self.out.push(b'\n');
        self.indent(lvl + 1);
        self.out.extend_from_slice(name);
        if n > 1 {
            write!(self.out, "___{n}").unwrap();
        }
    }

    fn typedef_def(&mut self, id: u32, t: Type<'a>, lvl: usize, depth: u32) -> Result<()> {
        let name = self.resolve_name(id, true);
        // Old GCCs describe __gnuc_va_list as a typedef of void.
        if t.type_id().0 == 0 && &name[..] == b"__gnuc_va_list" {
            self.out.extend_from_slice(b"typedef __builtin_va_list __gnuc_va_list");
            return Ok(());
        }
        self.out.extend_from_slice(b"typedef ");
        self.decl(t.type_id().0, &name, lvl, depth)
    }

    fn struct_def(&mut self, id: u32, t: Type<'a>, lvl: usize, depth: u32) -> Result<()> {
        let is_struct = t.kind() == Kind::Struct;
        let align = align_of(self.btf, self.ptr_sz, id, 0) as i64;
        let packed = is_struct && is_packed(self.btf, self.ptr_sz, t);
        self.struct_fwd(id, t);
        self.out.extend_from_slice(b" {");
        let kflag = t.kflag();
        let mut off: i64 = 0;
        let mut prev_bitfield = false;
        for [name_off, ty, raw_off] in t.triples() {
            let (m_off, m_bits) = if kflag {
                (raw_off & 0xff_ffff, raw_off >> 24)
            } else {
                (raw_off, 0)
            };
            let m_off = m_off as i64;
            let m_align = if packed {
                1
            } else {
                align_of(self.btf, self.ptr_sz, ty, 0) as i64
            };
            let in_bitfield = prev_bitfield && m_bits != 0;
            self.bit_padding(off, m_off, m_align, in_bitfield, lvl + 1);
            self.out.push(b'\n');
            self.indent(lvl + 1);
            self.decl(ty, self.str(name_off), lvl + 1, depth)?;
            if m_bits != 0 {
                write!(self.out, ": {m_bits}").unwrap();
                off = m_off + m_bits as i64;
                prev_bitfield = true;
            } else {
                let sz = resolve_size(self.btf, self.ptr_sz, ty).unwrap_or(0);
                off = m_off + sz as i64 * 8;
                prev_bitfield = false;
            }
            self.out.push(b';');
        }
        if is_struct {
            self.bit_padding(off, t.size() as i64 * 8, align, false, lvl + 1);
        }
        // An empty struct stays on one line.
        if t.vlen() != 0 || t.size() != 0 {
            self.out.push(b'\n');
            self.indent(lvl);
        }
        self.out.push(b'}');
        if packed {
            self.out.extend_from_slice(b" __attribute__((packed))");
        }
        Ok(())
    }

    /// Fills the gap between bit offsets `cur` and `next` with anonymous
    /// bitfields (`long: 64;`, `int: 0;`...), relying on the natural alignment
    /// of the next member where that closes the gap by itself.
    fn bit_padding(&mut self, mut cur: i64, next: i64, next_align: i64, in_bitfield: bool, lvl: usize) {
        if cur >= next {
            return;
        }
        let pads: [(&[u8], i64); 4] = [
            (b"long", self.ptr_sz as i64 * 8),
            (b"int", 32),
            (b"short", 16),
            (b"char", 8),
        ];
        // The widest padding type whose next boundary is within the gap.
        let mut pick = pads.len() - 1;
        let mut new_off = 0;
        for (i, &(_, bits)) in pads.iter().enumerate() {
            new_off = roundup(cur, bits);
            pick = i;
            if new_off <= next {
                break;
            }
        }
        let (mut pad_name, mut pad_bits) = pads[pick];
        if new_off > cur && new_off <= next {
            // An explicit `type: 0` is needed when the next member's own
            // alignment would not reach that boundary, or when a `type: N`
            // would fit in the hole before it and be packed there.
            let need_mark = in_bitfield
                || (new_off == next && roundup(cur, next_align * 8) != new_off)
                || (new_off != next && next - new_off <= new_off - cur);
            if need_mark {
                self.pad_line(pad_name, if in_bitfield { new_off - cur } else { 0 }, lvl);
            }
            cur = new_off;
        }
        while cur != next {
            let bits = (next - cur).min(pad_bits);
            if bits == pad_bits {
                self.pad_line(pad_name, pad_bits, lvl);
                cur += bits;
                continue;
            }
            // The tail gets the smallest type that holds it.
            for &(name, b) in pads.iter().rev() {
                pad_name = name;
                pad_bits = b;
                if b >= bits {
                    self.pad_line(name, bits, lvl);
                    cur += bits;
                    break;
                }
            }
        }
    }

    fn pad_line(&mut self, ty: &[u8], bits: i64, lvl: usize) {
        self.out.push(b'\n');
        self.indent(lvl);
        self.out.extend_from_slice(ty);
        write!(self.out, ": {bits};").unwrap();
    }

    // ---- declarators ----

    /// Writes a declaration of `fname` with type `id` (`int (*fname)[4]`...).
    fn decl(&mut self, id: u32, fname: &[u8], lvl: usize, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        // The chain from the declared name down to the base type, pushed on
        // the shared stack; it is written from the base type outwards.
        let start = self.stack.len();
        let mut cur = id;
        loop {
            if self.stack.len() - start > MAX_DEPTH as usize {
                self.stack.truncate(start);
                return Err(CDumpError::TooDeep { id });
            }
            self.stack.push(cur);
            if cur == 0 {
                break;
            }
            let t = self.ty(cur);
            match t.kind() {
                Kind::Ptr | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::FuncProto | Kind::TypeTag => {
                    cur = t.type_id().0
                }
                Kind::Array => cur = t.array().0.0,
                // Base types end the chain; kinds that cannot appear in a
                // declarator end it too and are skipped when written.
                _ => break,
            }
        }
        let mut cnt = self.stack.len() - start;
        let r = self.chain(start, &mut cnt, fname, lvl, depth + 1);
        self.stack.truncate(start);
        r
    }

    /// Writes the const/volatile/restrict on top of the frame (they precede a
    /// base type in C).
    fn leading_mods(&mut self, start: usize, cnt: &mut usize) {
        while *cnt > 0 {
            let id = self.stack[start + *cnt - 1];
            let word: &[u8] = match self.kind(id) {
                Kind::Volatile => b"volatile ",
                Kind::Const => b"const ",
                Kind::Restrict => b"restrict ",
                _ => return,
            };
            self.out.extend_from_slice(word);
            *cnt -= 1;
        }
    }

    /// Drops qualifiers (and type tags) on top of the frame: GCC puts
    /// qualifiers of the elements on arrays and `volatile` on noreturn
    /// function pointers; C has no place for them there.
    fn drop_mods(&mut self, start: usize, cnt: &mut usize) {
        while *cnt > 0 {
            let id = self.stack[start + *cnt - 1];
            if !matches!(
                self.kind(id),
                Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag
            ) {
                return;
            }
            *cnt -= 1;
        }
    }

    fn put_name(&mut self, fname: &[u8], last_was_ptr: bool) {
        if !fname.is_empty() && !last_was_ptr {
            self.out.push(b' ');
        }
        self.out.extend_from_slice(fname);
    }

    fn chain(&mut self, start: usize, cnt: &mut usize, fname: &[u8], lvl: usize, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id: self.stack[start] });
        }
        // `int ***p`, not `int * * *p`; true at first so that a lone pointer
        // in a function-pointer frame is written `(*name)`.
        let mut last_was_ptr = true;
        while *cnt > 0 {
            *cnt -= 1;
            let id = self.stack[start + *cnt];
            if id == 0 {
                self.leading_mods(start, cnt);
                self.out.extend_from_slice(b"void");
                last_was_ptr = false;
                continue;
            }
            let t = self.ty(id);
            let kind = t.kind();
            match kind {
                Kind::Int | Kind::Float => {
                    self.leading_mods(start, cnt);
                    self.out.extend_from_slice(self.str(t.name_off().0));
                }
                Kind::Struct | Kind::Union => {
                    self.leading_mods(start, cnt);
                    if t.name_off().0 == 0 {
                        self.struct_def(id, t, lvl, depth)?;
                    } else {
                        self.struct_fwd(id, t);
                    }
                }
                Kind::Enum | Kind::Enum64 => {
                    self.leading_mods(start, cnt);
                    if t.name_off().0 == 0 {
                        self.enum_def(id, t, lvl);
                    } else {
                        self.enum_fwd(id);
                    }
                }
                Kind::Fwd => {
                    self.leading_mods(start, cnt);
                    self.fwd_def(id, t);
                }
                Kind::Typedef => {
                    self.leading_mods(start, cnt);
                    let n = self.resolve_name(id, true);
                    self.out.extend_from_slice(&n);
                }
                Kind::Ptr => self.out.extend_from_slice(if last_was_ptr { b"*" } else { b" *" }),
                Kind::Volatile => self.out.extend_from_slice(b" volatile"),
                Kind::Const => self.out.extend_from_slice(b" const"),
                Kind::Restrict => self.out.extend_from_slice(b" restrict"),
                Kind::TypeTag => {
                    self.leading_mods(start, cnt);
                    self.out.extend_from_slice(b" __attribute__((btf_type_tag(\"");
                    self.out.extend_from_slice(self.str(t.name_off().0));
                    self.out.extend_from_slice(b"\")))");
                }
                Kind::Array => {
                    let nelems = t.array().2;
                    self.drop_mods(start, cnt);
                    if *cnt == 0 {
                        self.put_name(fname, last_was_ptr);
                        write!(self.out, "[{nelems}]").unwrap();
                        return Ok(());
                    }
                    let next = self.stack[start + *cnt - 1];
                    // `int a[2][3]`, but `int (*a)[3]`.
                    let multidim = self.kind(next) == Kind::Array;
                    if !fname.is_empty() && !last_was_ptr {
                        self.out.push(b' ');
                    }
                    if !multidim {
                        self.out.push(b'(');
                    }
                    self.chain(start, cnt, fname, lvl, depth + 1)?;
                    if !multidim {
                        self.out.push(b')');
                    }
                    write!(self.out, "[{nelems}]").unwrap();
                    return Ok(());
                }
                Kind::FuncProto => {
                    self.drop_mods(start, cnt);
                    if *cnt > 0 {
                        self.out.extend_from_slice(b" (");
                        self.chain(start, cnt, fname, lvl, depth + 1)?;
                        self.out.push(b')');
                    } else {
                        self.put_name(fname, last_was_ptr);
                    }
                    self.out.push(b'(');
                    let vlen = t.vlen() as usize;
                    // No parameters (or clang's single void one): `(void)`,
                    // as this version (with the 2024 stable fix) writes it.
                    if vlen == 0 || (vlen == 1 && t.pairs().next().is_some_and(|p| p[1] == 0)) {
                        self.out.extend_from_slice(b"void)");
                        return Ok(());
                    }
                    for (i, [pname, pty]) in t.pairs().enumerate() {
                        if i > 0 {
                            self.out.extend_from_slice(b", ");
                        }
                        // A trailing void parameter means varargs.
                        if i == vlen - 1 && pty == 0 {
                            self.out.extend_from_slice(b"...");
                            break;
                        }
                        self.decl(pty, self.str(pname), lvl, depth + 1)?;
                    }
                    self.out.push(b')');
                    return Ok(());
                }
                // Func, var, datasec, decl tag: no declarator form; the
                // reference stops the declaration here.
                _ => return Ok(()),
            }
            last_was_ptr = kind == Kind::Ptr;
        }
        self.put_name(fname, last_was_ptr);
        Ok(())
    }
}

// ---- layout helpers (sizes and alignments as the C compiler sees them) ----

/// Pointer size in bytes: the size of the first integer called some
/// spelling of `long`, else 8.
pub fn pointer_size(btf: &Btf) -> u32 {
    const LONGS: [&[u8]; 11] = [
        b"long",
        b"long int",
        b"int long",
        b"unsigned long",
        b"long unsigned",
        b"unsigned long int",
        b"unsigned int long",
        b"long unsigned int",
        b"long int unsigned",
        b"int unsigned long",
        b"int long unsigned",
    ];
    for id in 1..=btf.type_count() {
        let t = btf.ty(TypeId(id));
        if t.kind() != Kind::Int || (t.size() != 4 && t.size() != 8) {
            continue;
        }
        if let Some(n) = btf.str_at(t.name_off())
            && LONGS.contains(&n)
        {
            return t.size();
        }
    }
    8
}

/// Byte size of type `id`, following typedefs, modifiers and arrays (at most
/// 32 links, like the reference); None for void, forward declarations,
/// functions, or an overflowing array.
pub fn resolve_size(btf: &Btf, ptr_sz: u32, id: u32) -> Option<u64> {
    let mut id = id;
    let mut nelems: u64 = 1;
    for _ in 0..32 {
        if id == 0 {
            return None;
        }
        let t = btf.get(TypeId(id))?;
        match t.kind() {
            Kind::Int | Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Datasec | Kind::Float => {
                let size = t.size() as u64;
                return (nelems == 0 || size <= u32::MAX as u64 / nelems).then_some(nelems * size);
            }
            Kind::Ptr => return Some(nelems * ptr_sz as u64),
            Kind::Typedef
            | Kind::Volatile
            | Kind::Const
            | Kind::Restrict
            | Kind::Var
            | Kind::DeclTag
            | Kind::TypeTag => id = t.type_id().0,
            Kind::Array => {
                let (elem, _, n) = t.array();
                if nelems != 0 && n as u64 > u32::MAX as u64 / nelems {
                    return None;
                }
                nelems *= n as u64;
                id = elem.0;
            }
            Kind::Fwd | Kind::Func | Kind::FuncProto | Kind::Unkn => return None,
        }
    }
    None
}

/// Alignment of type `id` in bytes; 0 when it has none (void, forward
/// declarations, functions). A struct whose layout contradicts its natural
/// alignment counts as packed (alignment 1).
pub fn align_of(btf: &Btf, ptr_sz: u32, id: u32, depth: u32) -> u32 {
    if id == 0 || depth > MAX_DEPTH {
        return 0;
    }
    let Some(t) = btf.get(TypeId(id)) else { return 0 };
    match t.kind() {
        Kind::Int | Kind::Enum | Kind::Enum64 | Kind::Float => ptr_sz.min(t.size()),
        Kind::Ptr => ptr_sz,
        Kind::Typedef | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
            align_of(btf, ptr_sz, t.type_id().0, depth + 1)
        }
        Kind::Array => align_of(btf, ptr_sz, t.array().0.0, depth + 1),
        Kind::Struct | Kind::Union => {
            let kflag = t.kflag();
            let mut max_align = 1;
            for [_, ty, off] in t.triples() {
                let a = align_of(btf, ptr_sz, ty, depth + 1);
                if a == 0 {
                    return 0;
                }
                max_align = max_align.max(a);
                let bitfield = kflag && off >> 24 != 0;
                if !bitfield && off % (8 * a) != 0 {
                    return 1;
                }
            }
            if t.size() % max_align != 0 { 1 } else { max_align }
        }
        _ => 0,
    }
}

/// Whether a struct needs `__attribute__((packed))` to get its recorded
/// layout: a non-bitfield member off its natural alignment, or a size that
/// is not a multiple of the largest member alignment.
fn is_packed(btf: &Btf, ptr_sz: u32, t: Type<'_>) -> bool {
    let kflag = t.kflag();
    let mut max_align = 1;
    for [_, ty, off] in t.triples() {
        let a = align_of(btf, ptr_sz, ty, 0);
        let bitfield = kflag && off >> 24 != 0;
        if a != 0 && !bitfield && off % (8 * a) != 0 {
            return true;
        }
        max_align = max_align.max(a);
    }
    !t.size().is_multiple_of(max_align)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::{Endian, INT_SIGNED};

    fn new() -> Btf {
        Btf::new(Endian::native())
    }

    fn body(btf: &Btf) -> String {
        let out = String::from_utf8(to_c(btf).unwrap()).unwrap();
        out.strip_prefix(std::str::from_utf8(HEADER).unwrap())
            .and_then(|s| s.strip_suffix(std::str::from_utf8(FOOTER).unwrap()))
            .expect("header/footer")
            .to_string()
    }

    /// struct list { struct node *head; }; struct node { struct node *next; struct list owner; };
    fn pointer_cycle() -> Btf {
        let mut b = new();
        let int = b.add_int(b"int", 4, INT_SIGNED);
        let list = b.begin(Kind::Struct, b"list", 8, false);
        b.push_member(b"head", TypeId(4), 0, 0);
        let node = b.begin(Kind::Struct, b"node", 16, false);
        b.push_member(b"next", TypeId(4), 0, 0);
        b.push_member(b"owner", list, 64, 0);
        let p = b.add_ref(Kind::Ptr, node);
        assert_eq!((int.0, p.0), (1, 4));
        b
    }

    #[test]
    fn pointer_cycle_gets_a_forward_declaration() {
        assert_eq!(
            body(&pointer_cycle()),
            "struct node;\n\nstruct list {\n\tstruct node *head;\n};\n\n\
             struct node {\n\tstruct node *next;\n\tstruct list owner;\n};\n\n"
        );
    }

    #[test]
    fn roots_pull_in_only_what_they_need() {
        let mut b = pointer_cycle();
        b.begin(Kind::Struct, b"unrelated", 4, false);
        b.push_member(b"x", TypeId(1), 0, 0);
        // node needs list by value, list needs a declaration of node.
        let out = String::from_utf8(to_c_roots(&b, &[TypeId(3)]).unwrap()).unwrap();
        let body = "struct node;\n\nstruct list {\n\tstruct node *head;\n};\n\nstruct node {\n";
        assert!(out.contains(body), "{out}");
        assert!(!out.contains("unrelated"), "{out}");
        assert_eq!(ids_named(&b, "struct node").unwrap(), vec![TypeId(3)]);
        assert_eq!(
            ids_named(&b, "union node"),
            Err(CDumpError::NoSuchName {
                name: "union node".into(),
                near: vec!["node".into()]
            })
        );
    }

    /// By-value containment loop: no C declaration order exists.
    #[test]
    fn by_value_cycle_is_an_error() {
        let mut b = new();
        b.begin(Kind::Struct, b"a", 4, false);
        b.push_member(b"b", TypeId(2), 0, 0);
        b.begin(Kind::Struct, b"b", 4, false);
        b.push_member(b"a", TypeId(1), 0, 0);
        assert_eq!(to_c(&b), Err(CDumpError::Cycle { id: 1 }));
    }

    #[test]
    fn modifier_loop_is_an_error_not_a_crash() {
        let mut b = new();
        b.add_ref(Kind::Const, TypeId(2));
        b.add_ref(Kind::Volatile, TypeId(1));
        b.add_typedef(b"t", TypeId(1));
        assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));
    }

    /// Thousands of nested anonymous structs, typedefs or pointers: an
    /// error, not a stack overflow (test threads have small stacks).
    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        const N: u32 = 20_000;
        let mut b = new();
        b.add_int(b"int", 4, INT_SIGNED);
        for i in 0..N {
            b.begin(Kind::Struct, if i == 0 { b"outer" } else { b"" }, 4, false);
            b.push_member(b"m", TypeId(i + 3), 0, 0);
        }
        b.begin(Kind::Struct, b"", 4, false);
        b.push_member(b"x", TypeId(1), 0, 0);
        assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));

        // A long typedef chain is fine when each link is written before the
        // next (ids ascending), too deep when the first needs all the others.
        let mut b = new();
        b.add_int(b"int", 4, INT_SIGNED);
        for i in 0..N {
            b.add_typedef(format!("t{i}").as_bytes(), TypeId(i + 1));
        }
        assert!(to_c(&b).is_ok());
        let mut b = new();
        for i in 0..N {
            b.add_typedef(format!("t{i}").as_bytes(), TypeId(i + 2));
        }
        b.add_int(b"int", 4, INT_SIGNED);
        assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));

        let mut b = new();
        b.add_int(b"int", 4, INT_SIGNED);
        for i in 0..N {
            b.add_ref(Kind::Ptr, TypeId(i + 1));
        }
        b.begin(Kind::Struct, b"s", 8, false);
        b.push_member(b"p", TypeId(N + 1), 0, 0);
        assert!(matches!(to_c(&b), Err(CDumpError::TooDeep { .. })));
    }

    #[test]
    fn dangling_reference_is_an_error() {
        let mut b = new();
        b.add_ref(Kind::Ptr, TypeId(7));
        assert_eq!(to_c(&b), Err(CDumpError::BadRef { id: 1, target: 7 }));
    }

    /// struct s { int kind; union { int i; struct { short lo; short hi; } parts; }; long tail; };
    fn anon_nested() -> Btf {
        let mut b = new();
        let int = b.add_int(b"int", 4, INT_SIGNED);
        let short = b.add_int(b"short", 2, INT_SIGNED);
        let long = b.add_int(b"long", 8, INT_SIGNED);
        b.begin(Kind::Struct, b"s", 16, false);
        b.push_member(b"kind", int, 0, 0);
        b.push_member(b"", TypeId(5), 32, 0);
        b.push_member(b"tail", long, 64, 0);
        b.begin(Kind::Union, b"", 4, false);
        b.push_member(b"i", int, 0, 0);
        b.push_member(b"parts", TypeId(6), 0, 0);
        b.begin(Kind::Struct, b"", 4, false);
        b.push_member(b"lo", short, 0, 0);
        b.push_member(b"hi", short, 16, 0);
        b
    }

    #[test]
    fn anonymous_unions_and_structs_are_written_inline() {
        assert_eq!(
            body(&anon_nested()),
            "struct s {\n\tint kind;\n\tunion {\n\t\tint i;\n\t\tstruct {\n\t\t\tshort lo;\n\t\t\tshort hi;\n\
             \t\t} parts;\n\t};\n\tlong tail;\n};\n\n"
        );
    }

    /// Bitfields with a hole between them, a byte member after a gap, and
    /// tail padding.
    fn bitfields() -> Btf {
        let mut b = new();
        let uint = b.add_int(b"unsigned int", 4, 0);
        let uchar = b.add_int(b"unsigned char", 1, 0);
        b.begin(Kind::Struct, b"flags", 8, false);
        b.push_member(b"a", uint, 0, 3);
        b.push_member(b"b", uint, 3, 5);
        b.push_member(b"c", uint, 16, 4);
        b.push_member(b"d", uchar, 32, 0);
        b
    }

    #[test]
    fn bitfields_and_padding() {
        assert_eq!(
            body(&bitfields()),
            "struct flags {\n\tunsigned int a: 3;\n\tunsigned int b: 5;\n\tshort: 8;\n\tunsigned int c: 4;\n\
             \tint: 0;\n\tunsigned char d;\n};\n\n"
        );
    }

    /// struct p { char c; int i; } with i at byte 1; struct outer embeds it at byte 1.
    fn packed() -> Btf {
        let mut b = new();
        let ch = b.add_int(b"char", 1, INT_SIGNED);
        let int = b.add_int(b"int", 4, INT_SIGNED);
        let p = b.begin(Kind::Struct, b"p", 5, false);
        b.push_member(b"c", ch, 0, 0);
        b.push_member(b"i", int, 8, 0);
        b.begin(Kind::Struct, b"outer", 6, false);
        b.push_member(b"x", ch, 0, 0);
        b.push_member(b"inner", p, 8, 0);
        b
    }

    #[test]
    fn packed_is_detected_from_offsets() {
        assert_eq!(
            body(&packed()),
            "struct p {\n\tchar c;\n\tint i;\n} __attribute__((packed));\n\n\
             struct outer {\n\tchar x;\n\tstruct p inner;\n};\n\n"
        );
    }

    /// Clashing names, a top-level anonymous enum, signed enum64, function
    /// pointers (no args, varargs, arrays of them), qualifiers, type tags.
    fn assorted() -> Btf {
        let mut b = new();
        let int = b.add_int(b"int", 4, INT_SIGNED); // 1
        let ch = b.add_int(b"char", 1, INT_SIGNED); // 2
        b.begin(Kind::Struct, b"dup", 4, false); // 3
        b.push_member(b"a", int, 0, 0);
        b.begin(Kind::Struct, b"dup", 8, false); // 4
        b.push_member(b"a", int, 0, 0);
        b.push_member(b"b", int, 32, 0);
        b.add_typedef(b"T", int); // 5
        b.begin(Kind::Enum, b"", 4, false); // 6: nobody refers to it
        b.push_enum_value(b"T", 1);
        b.push_enum_value(b"NEG", -1);
        b.begin(Kind::Enum64, b"big", 8, true); // 7
        b.push_enum64_value(b"SMALL", -5i64 as u64);
        b.push_enum64_value(b"HUGE", 1 << 40);
        let cc = b.add_ref(Kind::Const, ch); // 8
        let pcc = b.add_ref(Kind::Ptr, cc); // 9
        let fmt = b.begin(Kind::FuncProto, b"", int.0, false); // 10: int (const char *, ...)
        b.push_param(b"fmt", pcc);
        b.push_param(b"", TypeId(0));
        let noargs = b.begin(Kind::FuncProto, b"", 0, false); // 11: void (void)
        let pfmt = b.add_ref(Kind::Ptr, fmt); // 12
        let pnoargs = b.add_ref(Kind::Ptr, noargs); // 13
        b.add_typedef(b"printf_fn", pfmt); // 14
        let arr = b.add_array(pnoargs, int, 4); // 15
        let cvp = b.add_ref(Kind::Volatile, pcc); // 16
        let cvp = b.add_ref(Kind::Const, cvp); // 17
        let tag = b.add_type_tag(b"user", ch, false); // 18
        let ptag = b.add_ref(Kind::Ptr, tag); // 19
        b.begin(Kind::Struct, b"ops", 56, false); // 20
        b.push_member(b"hooks", arr, 0, 0);
        b.push_member(b"p", cvp, 256, 0);
        b.push_member(b"ubuf", ptag, 320, 0);
        b.push_member(b"big", TypeId(7), 384, 0);
        b
    }

    #[test]
    fn names_enums_and_declarators() {
        assert_eq!(
            body(&assorted()),
            "struct dup {\n\tint a;\n};\n\nstruct dup___2 {\n\tint a;\n\tint b;\n};\n\ntypedef int T;\n\n\
             enum {\n\tT___2 = 1,\n\tNEG = -1,\n};\n\n\
             enum big {\n\tSMALL = -5LL,\n\tHUGE = 1099511627776LL,\n};\n\n\
             typedef int (*printf_fn)(const char *fmt, ...);\n\n\
             struct ops {\n\tvoid (*hooks[4])(void);\n\tconst char * volatile const p;\n\
             \tchar __attribute__((btf_type_tag(\"user\"))) *ubuf;\n\tenum big big;\n};\n\n"
        );
    }

    /// The hand-built cases above, rendered by the reference when it is
    /// installed: the expectations are the reference's, not ours.
    #[test]
    fn hand_built_cases_match_bpftool() {
        // Debian puts it in /usr/sbin, off a normal user's PATH.
        let found = std::env::var("BPFTOOL")
            .ok()
            .into_iter()
            .chain(["bpftool".into(), "/usr/sbin/bpftool".into()])
            .find(|c| {
                std::process::Command::new(c)
                    .arg("version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            });
        let Some(bpftool) = found else {
            eprintln!("SKIPPED: bpftool is not installed; hand-built cases not checked against it");
            return;
        };
        let dir = std::env::temp_dir().join(format!("btfkit-cdump-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, btf) in [
            ("pointer_cycle", pointer_cycle()),
            ("anon_nested", anon_nested()),
            ("bitfields", bitfields()),
            ("packed", packed()),
            ("assorted", assorted()),
        ] {
            let path = dir.join(format!("{name}.btf"));
            std::fs::write(&path, crate::btf::write::to_bytes(&btf)).unwrap();
            let r = std::process::Command::new(&bpftool)
                .args(["btf", "dump", "file"])
                .arg(&path)
                .args(["format", "c"])
                .output()
                .unwrap();
            assert!(
                r.status.success(),
                "{name}: bpftool failed: {}",
                String::from_utf8_lossy(&r.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&to_c(&btf).unwrap()),
                String::from_utf8_lossy(&r.stdout),
                "{name}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
