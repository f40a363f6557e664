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
//!
//! [`Style::Bpftool78`] writes what bpftool v7.8.0 (2026, libbpf 1.8) prints
//! instead: the same rendering with that fix, attribute type tags as
//! attributes, its sorted order of roots and its kfunc prototypes
//! (`sorted`).

use hashbrown::HashMap;
use thiserror::Error;

use super::{Btf, Kind, StrOff, Type, TypeId};

mod declarator;
mod defs;
mod layout;
mod plan;
mod sorted;
#[cfg(test)]
mod tests;

pub use layout::{align_of, pointer_size, resolve_size};

/// Nesting limit of every recursive walk; real BTF stays far below it (the
/// corpus vmlinux, even before dedup, nests under 20 levels), and a
/// reference loop in malformed BTF ends here instead of in a stack overflow.
pub const MAX_DEPTH: u32 = 256;

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
        let t = btf.ty(TypeId::new(id));
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

/// Which bpftool's `format c` to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// v7.1.0 (Debian bookworm, libbpf 1.1): types by id.
    #[default]
    Bpftool71,
    /// v7.8.0 (June 2026, libbpf 1.8), what reads BTF 2026: a `__ksym`,
    /// `__weak` and `__bpf_fastcall` preamble, the enum sizes of
    /// [`Options::enum_sizes`], the types in its sorted order (`sorted`;
    /// by id with its `unsorted`), and after them an `extern` prototype of
    /// every kfunc (a function with a `bpf_kfunc` decl tag).
    Bpftool78 { sorted: bool },
}

/// Choices beyond the reference's output. The default reproduces bpftool
/// 7.1.0 byte for byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub style: Style,
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
        let t = btf.ty(TypeId::new(id));
        t.kind() == Kind::Array && t.array().0.0 == 0
    }) {
        return Err(CDumpError::VoidElements { id });
    }
    let v78 = matches!(opts.style, Style::Bpftool78 { .. });
    let opts = Options {
        enum_sizes: opts.enum_sizes || v78,
        ..opts
    };
    let mut d = Dumper::new(btf, opts)?;
    d.out.extend_from_slice(HEADER);
    if v78 {
        d.out.extend_from_slice(PREAMBLE_78);
    }
    match roots {
        None => {
            if opts.style == (Style::Bpftool78 { sorted: true }) {
                // (void among them, which writes nothing)
                for id in sorted::sorted_roots(btf).into_iter().filter(|&id| id != 0) {
                    d.dump_type(id)?;
                }
            } else {
                for id in 1..=btf.type_count() {
                    d.dump_type(id)?;
                }
            }
            if v78 {
                d.out
                    .extend_from_slice(b"\n/* BPF kfuncs */\n#ifndef BPF_NO_KFUNC_PROTOTYPES\n");
                for (f, fastcall) in sorted::kfuncs(btf) {
                    d.out.extend_from_slice(b"extern ");
                    if fastcall {
                        d.out.extend_from_slice(b"__bpf_fastcall ");
                    }
                    let t = btf.ty(TypeId::new(f));
                    let name = btf.str_at(t.name_off()).unwrap_or(b"");
                    d.decl(t.type_id().0, name, 0, 0)?;
                    d.out.extend_from_slice(b" __weak __ksym;\n");
                }
                d.out.extend_from_slice(b"#endif\n\n");
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
        let t = btf.ty(TypeId::new(id));
        let k = t.kind();
        if !is_named_kind(k) || t.name_off().0 == 0 || !kind_ok(k, &t) {
            continue;
        }
        if btf.str_at(t.name_off()) == Some(bare) {
            if k == Kind::Fwd {
                fwds.push(TypeId::new(id))
            } else {
                defs.push(TypeId::new(id))
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
const PREAMBLE_78: &[u8] = b"#ifndef __ksym\n#define __ksym __attribute__((section(\".ksyms\")))\n#endif\n\n\
#ifndef __weak\n#define __weak __attribute__((weak))\n#endif\n\n\
#ifndef __bpf_fastcall\n#if __has_attribute(bpf_fastcall)\n#define __bpf_fastcall __attribute__((bpf_fastcall))\n\
#else\n#define __bpf_fastcall\n#endif\n#endif\n\n";
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
            let t = btf.ty(TypeId::new(id));
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
        self.btf.ty(TypeId::new(id))
    }

    #[inline]
    fn kind(&self, id: u32) -> Kind {
        if id == 0 { Kind::Unkn } else { self.ty(id).kind() }
    }

    #[inline]
    fn str(&self, off: u32) -> &'a [u8] {
        let btf: &'a Btf = self.btf;
        btf.str_at(StrOff::new(off)).unwrap_or(b"")
    }
}
