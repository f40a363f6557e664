//! Id-free text for types: C type names (`const char *`, `int[16]`,
//! `int (*)(void *, size_t)`) and the labels that name top-level items
//! (`struct sk_buff`, `func tcp_sendmsg`).

use crate::btf::{Btf, Kind, StrOff, TypeId};

/// Deeper chains of anonymous modifiers than this only occur in corrupt
/// input (a PTR cycle without a named type on it); the rendering stops there.
const MAX_DEPTH: u32 = 64;

fn name(btf: &Btf, off: StrOff) -> String {
    btf.name(off).into_owned()
}

fn join(base: &str, inner: &str) -> String {
    if inner.is_empty() {
        base.to_string()
    } else if inner.starts_with('[') {
        format!("{base}{inner}")
    } else {
        format!("{base} {inner}")
    }
}

fn qualifier(btf: &Btf, kind: Kind, value: StrOff) -> String {
    match kind {
        Kind::Const => "const".into(),
        Kind::Volatile => "volatile".into(),
        Kind::Restrict => "restrict".into(),
        _ => format!("__tag({})", name(btf, value)),
    }
}

fn is_qualifier(k: Kind) -> bool {
    matches!(k, Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag)
}

/// Whether `id` is a pointer, possibly under qualifiers (then a qualifier
/// above it binds to the pointer and is written after the `*`).
fn pointer_below(btf: &Btf, mut id: TypeId) -> bool {
    for _ in 0..MAX_DEPTH {
        match btf.get(id) {
            Some(t) if t.kind() == Kind::Ptr => return true,
            Some(t) if is_qualifier(t.kind()) => id = t.type_id(),
            _ => return false,
        }
    }
    false
}

/// The tag keyword of a struct, union, enum or forward declaration.
pub fn tag_keyword(btf: &Btf, id: TypeId) -> &'static str {
    match btf.get(id).map(|t| (t.kind(), t.kflag())) {
        Some((Kind::Struct, _)) | Some((Kind::Fwd, false)) => "struct",
        Some((Kind::Union, _)) | Some((Kind::Fwd, true)) => "union",
        Some((Kind::Enum | Kind::Enum64, _)) => "enum",
        _ => "",
    }
}

fn decl(btf: &Btf, id: TypeId, inner: &str, depth: u32) -> String {
    if depth > MAX_DEPTH {
        return join("...", inner);
    }
    if id == TypeId::VOID {
        return join("void", inner);
    }
    let Some(t) = btf.get(id) else {
        return join(&format!("<bad type id {}>", id.get()), inner);
    };
    let kind = t.kind();
    match kind {
        Kind::Int | Kind::Float | Kind::Typedef => join(&name(btf, t.name_off()), inner),
        Kind::Struct | Kind::Union | Kind::Enum | Kind::Enum64 | Kind::Fwd => {
            let kw = tag_keyword(btf, id);
            if t.name_off().get() == 0 {
                join(&format!("{kw} {{...}}"), inner)
            } else {
                join(&format!("{kw} {}", name(btf, t.name_off())), inner)
            }
        }
        Kind::Ptr => decl(btf, t.type_id(), &format!("*{inner}"), depth + 1),
        Kind::Const | Kind::Volatile | Kind::Restrict | Kind::TypeTag => {
            let q = qualifier(btf, kind, t.name_off());
            if pointer_below(btf, t.type_id()) {
                decl(btf, t.type_id(), &join(&q, inner), depth + 1)
            } else {
                let rest = decl(btf, t.type_id(), inner, depth + 1);
                // C qualifies an array through its elements: `const T[3]`
                // whether the CONST sits above the array, on the elements or
                // (as gcc emits) both.
                let on_array_of_qualified = btf.get(t.type_id()).is_some_and(|a| a.kind() == Kind::Array)
                    && rest.strip_prefix(q.as_str()).is_some_and(|r| r.starts_with(' '));
                if on_array_of_qualified {
                    rest
                } else {
                    format!("{q} {rest}")
                }
            }
        }
        Kind::Array => {
            let (elem, _, n) = t.array();
            let inner = if inner.starts_with('*') {
                format!("({inner})")
            } else {
                inner.to_string()
            };
            decl(btf, elem, &format!("{inner}[{n}]"), depth + 1)
        }
        Kind::FuncProto => {
            let inner = if inner.starts_with('*') {
                format!("({inner})")
            } else {
                inner.to_string()
            };
            let params = params(btf, id, depth);
            // `int (void)`: a bare prototype reads like a function type.
            let inner = if inner.is_empty() {
                format!("({params})")
            } else {
                format!("{inner}({params})")
            };
            decl(btf, t.type_id(), &inner, depth + 1)
        }
        Kind::Func => format!("func {}", name(btf, t.name_off())),
        Kind::Var => format!("var {}", name(btf, t.name_off())),
        Kind::Datasec => format!("datasec {}", name(btf, t.name_off())),
        Kind::DeclTag => format!("decl_tag {}", name(btf, t.name_off())),
        Kind::Unkn => join("<unknown kind>", inner),
    }
}

/// The parameter list of a FUNC_PROTO as written in C, without names.
fn params(btf: &Btf, proto: TypeId, depth: u32) -> String {
    let Some(t) = btf.get(proto) else { return String::new() };
    let n = t.vlen() as usize;
    if n == 0 {
        return "void".into();
    }
    let mut out = String::new();
    for (i, [_, ty]) in t.pairs().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if ty == 0 && i + 1 == n {
            out.push_str("...");
        } else {
            out.push_str(&decl(btf, TypeId::new(ty), "", depth + 1));
        }
    }
    out
}

/// The C name of type `id`: `const char *`, `struct foo *`, `int[16]`,
/// `int (*)(void *, size_t)`; anonymous aggregates are `struct {...}`.
pub fn type_name(btf: &Btf, id: TypeId) -> String {
    decl(btf, id, "", 0)
}

/// `type_name` with a declarator name: `int (*open)(struct inode *)`.
pub fn declaration(btf: &Btf, id: TypeId, var: &str) -> String {
    decl(btf, id, var, 0)
}

/// A FUNC's prototype in C, `int (struct sock *, size_t)`; `type_name` for
/// anything else.
pub fn func_signature(btf: &Btf, func: TypeId) -> String {
    match btf.get(func) {
        Some(t) if t.kind() == Kind::Func => type_name(btf, t.type_id()),
        _ => type_name(btf, func),
    }
}

/// The label of a named type as a top-level item: `struct foo`, `union foo`,
/// `enum foo`, `fwd struct foo`, `typedef foo`, `int 'unsigned int'`,
/// `float 'double'`, `func foo`, `var foo`, `datasec .data`. `None` for
/// anonymous types and kinds that are never items by name.
pub fn named_label(btf: &Btf, id: TypeId) -> Option<String> {
    let t = btf.get(id)?;
    if t.name_off().get() == 0 {
        return None;
    }
    let n = btf.name(t.name_off());
    Some(match t.kind() {
        Kind::Struct => format!("struct {n}"),
        Kind::Union => format!("union {n}"),
        Kind::Enum | Kind::Enum64 => format!("enum {n}"),
        Kind::Fwd => format!("fwd {} {n}", tag_keyword(btf, id)),
        Kind::Typedef => format!("typedef {n}"),
        Kind::Int => format!("int '{n}'"),
        Kind::Float => format!("float '{n}'"),
        Kind::Func => format!("func {n}"),
        Kind::Var => format!("var {n}"),
        Kind::Datasec => format!("datasec {n}"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::Endian;

    #[test]
    fn c_declarators() {
        let mut b = Btf::new(Endian::Little);
        let int = b.add_int(b"int", 4, 1);
        let ch = b.add_int(b"char", 1, 2);
        let cch = b.add_ref(Kind::Const, ch);
        let pcch = b.add_ref(Kind::Ptr, cch);
        assert_eq!(type_name(&b, pcch), "const char *");
        let cp = b.add_ref(Kind::Const, pcch);
        assert_eq!(type_name(&b, cp), "const char *const");
        let ulong = b.add_int(b"unsigned long", 8, 0);
        let size_t = b.add_typedef(b"size_t", ulong);
        let arr = b.add_array(int, ulong, 16);
        assert_eq!(type_name(&b, arr), "int[16]");
        let parr = b.add_ref(Kind::Ptr, arr);
        assert_eq!(type_name(&b, parr), "int (*)[16]");
        let vp = b.add_ref(Kind::Ptr, TypeId::VOID);
        let proto = b.begin(Kind::FuncProto, b"", int.get(), false);
        b.push_param(b"p", vp);
        b.push_param(b"n", size_t);
        assert_eq!(type_name(&b, proto), "int (void *, size_t)");
        let fp = b.add_ref(Kind::Ptr, proto);
        assert_eq!(type_name(&b, fp), "int (*)(void *, size_t)");
        assert_eq!(declaration(&b, fp, "open"), "int (*open)(void *, size_t)");
        let s = b.begin(Kind::Struct, b"foo", 0, false);
        let ps = b.add_ref(Kind::Ptr, s);
        assert_eq!(type_name(&b, ps), "struct foo *");
        let anon = b.begin(Kind::Union, b"", 4, false);
        assert_eq!(type_name(&b, anon), "union {...}");
        let va = b.begin(Kind::FuncProto, b"", 0, false);
        b.push_param(b"fmt", pcch);
        b.push_param(b"", TypeId::VOID);
        assert_eq!(type_name(&b, va), "void (const char *, ...)");
        let none = b.begin(Kind::FuncProto, b"", 0, false);
        let pnone = b.add_ref(Kind::Ptr, none);
        let apnone = b.add_array(pnone, ulong, 4);
        assert_eq!(type_name(&b, apnone), "void (*[4])(void)");
        let fwd = b.add_fwd(b"bar", true);
        assert_eq!(named_label(&b, fwd).unwrap(), "fwd union bar");
        assert_eq!(type_name(&b, fwd), "union bar");
        let tag = b.add_type_tag(b"user", int, false);
        let ptag = b.add_ref(Kind::Ptr, tag);
        assert_eq!(type_name(&b, ptag), "__tag(user) int *");
        assert_eq!(named_label(&b, ulong).unwrap(), "int 'unsigned long'");
        let carr = b.add_array(cch, ulong, 3);
        let ccarr = b.add_ref(Kind::Const, carr);
        assert_eq!(type_name(&b, carr), "const char[3]");
        assert_eq!(type_name(&b, ccarr), "const char[3]");
        let cparr = b.add_ref(Kind::Const, parr);
        assert_eq!(type_name(&b, cparr), "int (*const)[16]");
    }

    #[test]
    fn a_pointer_cycle_without_names_terminates() {
        let mut b = Btf::new(Endian::Little);
        b.add_ref(Kind::Ptr, TypeId::new(2));
        let p = b.add_ref(Kind::Ptr, TypeId::new(1));
        assert!(type_name(&b, p).starts_with("..."));
    }
}
