//! Semantic comparison of two BTFs (`btfkit diff`).
//!
//! Type ids shift whenever anything is added, so the comparison ignores ids,
//! record order and string layout. It answers in one of three ways:
//!
//! * `identical bytes` — same byte order, type words and string bytes (and
//!   the same base, for split BTF);
//! * `equivalent` — the own types of both sides are the same multiset of
//!   structural equivalence classes (see [`equiv`]): same types, other ids,
//!   other order or other string layout;
//! * a sorted list of differences, each naming where it is.
//!
//! Top-level items are matched by kind and name: named STRUCT, UNION,
//! ENUM/ENUM64, FWD, TYPEDEF, INT, FLOAT, and FUNC, VAR, DATASEC by name;
//! DECL_TAGs by their value and what they annotate
//! (`decl_tag bpf_kfunc on func bpf_foo`). Anonymous types are compared
//! where they are reached from (`struct foo.(anon union @64).x`); anonymous
//! types nothing refers to are items of their own (`enum (anon FIRST_VALUE)`,
//! `struct (anon first_member: int)`, `(unreferenced) struct foo *`).
//! Several items with one label are paired by structural class, then by
//! definition (own record plus the C names it refers to, with named types
//! already paired standing for their partners), then by shape, then in order.
//! Types are shown by their C names (`const char *`, `int (*)(void *, size_t)`).
//!
//! A pair of items whose classes differ is examined field by field. A field
//! whose C name is the same on both sides but whose structure differs is
//! followed to the named type it reaches: that type is an item of its own
//! and reports its own differences, unless it was paired with another type
//! of that name (`... refers to struct x (size 4, ...) -> struct x (size 8, ...)`).
//!
//! # Text output
//!
//! One line per difference, sorted by path; `-` is only in A, `+` only in B:
//!
//! ```text
//! - func bar: static int (void *)
//! func tcp_sendmsg: param 3 size_t -> int
//! + struct foo: size 16, 2 members
//! struct sk_buff.(anon union @64).b: type long -> unsigned long
//! struct sk_buff.len: type unsigned int -> int
//! + struct sk_buff.tail: int @192
//! ```
//!
//! then a summary `N differences: 1 added, 1 removed, 1 member_type, ...`.
//!
//! # JSON output (`btfkit diff --json`)
//!
//! One object:
//!
//! ```text
//! {
//!   "a": "<path of A>", "b": "<path of B>",
//!   "result": "identical_bytes" | "equivalent" | "different",
//!   "types": {"a": <own types of A>, "b": <own types of B>},
//!   "equivalence": {"rounds": <refinement rounds>, "classes": <classes>},  // 0, 0 for identical bytes
//!   "summary": {"<kind>": <count>, ...},        // kinds with a count > 0
//!   "differences": [                            // sorted as in the text output
//!     {
//!       "kind": "<kind>",                       // see below
//!       "change": "added" | "removed" | "changed",
//!       "path": "struct sk_buff.len",           // where
//!       "aspect": "type" | null,                // what of it changed (changed only)
//!       "old": "unsigned int" | null,           // A's side (changed, removed)
//!       "new": "int" | null,                    // B's side (changed, added)
//!       "text": "struct sk_buff.len: type unsigned int -> int"
//!     }, ...
//!   ]
//! }
//! ```
//!
//! `kind` is one of: `added` / `removed` (a top-level type, function,
//! variable, section or tag present on one side only), `member` (a struct or
//! union member added, removed, or the member order), `member_type`,
//! `offset` (member bit offset), `bitfield` (bitfield size), `size`,
//! `enum_value` (a value added, removed or changed), `encoding` (int
//! encoding/bits, enum signedness), `kind` (struct vs union, enum vs enum64),
//! `type` (what a typedef or variable refers to), `return`, `param` (a
//! parameter's type, or a parameter added or removed), `param_name`,
//! `linkage`, `datasec` (a section entry added, removed, moved or resized),
//! `retarget` (same C name, but it now refers to a different type of that
//! name), `other` (a structural difference not attributable to one field).
//! For added/removed entries `old`/`new` hold a short description (a
//! prototype, a size, a value).

mod engine;
pub mod equiv;
mod fields;
mod items;
pub mod render;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

use crate::btf::Btf;

pub use engine::compare;

/// The answer of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    IdenticalBytes,
    Equivalent,
    Different,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::IdenticalBytes => "identical_bytes",
            Verdict::Equivalent => "equivalent",
            Verdict::Different => "different",
        }
    }
}

/// What sort of difference a line reports (the summary counts per kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DiffKind {
    Added,
    Removed,
    Member,
    MemberType,
    Offset,
    Bitfield,
    Size,
    EnumValue,
    Encoding,
    Kind,
    Type,
    Return,
    Param,
    ParamName,
    Linkage,
    Datasec,
    Retarget,
    Other,
}

impl DiffKind {
    pub fn name(self) -> &'static str {
        match self {
            DiffKind::Added => "added",
            DiffKind::Removed => "removed",
            DiffKind::Member => "member",
            DiffKind::MemberType => "member_type",
            DiffKind::Offset => "offset",
            DiffKind::Bitfield => "bitfield",
            DiffKind::Size => "size",
            DiffKind::EnumValue => "enum_value",
            DiffKind::Encoding => "encoding",
            DiffKind::Kind => "kind",
            DiffKind::Type => "type",
            DiffKind::Return => "return",
            DiffKind::Param => "param",
            DiffKind::ParamName => "param_name",
            DiffKind::Linkage => "linkage",
            DiffKind::Datasec => "datasec",
            DiffKind::Retarget => "retarget",
            DiffKind::Other => "other",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    Added,
    Removed,
    Changed,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// One difference: where (`path`), what sort (`kind`), and the two sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub kind: DiffKind,
    pub change: Change,
    pub path: String,
    /// What of `path` changed (`type`, `param 3`, `offset`); empty for added/removed.
    pub aspect: String,
    /// A's side; for `Removed` a description of what was removed.
    pub old: Option<String>,
    /// B's side; for `Added` a description of what was added.
    pub new: Option<String>,
}

impl Difference {
    fn sort_key(&self) -> (&str, Change, &str, Option<&str>, Option<&str>) {
        (
            &self.path,
            self.change,
            &self.aspect,
            self.old.as_deref(),
            self.new.as_deref(),
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind.name(),
            "change": self.change.name(),
            "path": self.path,
            "aspect": if self.aspect.is_empty() { Value::Null } else { Value::String(self.aspect.clone()) },
            "old": self.old,
            "new": self.new,
            "text": self.to_string(),
        })
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (sign, desc) = match self.change {
            Change::Added => ("+ ", self.new.as_deref()),
            Change::Removed => ("- ", self.old.as_deref()),
            Change::Changed => {
                let old = self.old.as_deref().unwrap_or("");
                let new = self.new.as_deref().unwrap_or("");
                return if old.is_empty() && new.is_empty() {
                    write!(f, "{}: {}", self.path, self.aspect)
                } else {
                    write!(f, "{}: {} {} -> {}", self.path, self.aspect, old, new)
                };
            }
        };
        write!(f, "{sign}{}", self.path)?;
        match desc {
            // a description that only repeats the path (a tag's) is not said twice
            Some(d) if !d.is_empty() && d != self.path => write!(f, ": {d}"),
            _ => Ok(()),
        }
    }
}

/// The result of [`compare`].
#[derive(Clone, Debug)]
pub struct Report {
    pub verdict: Verdict,
    /// Sorted by path; empty unless `verdict` is `Different`.
    pub differences: Vec<Difference>,
    /// Own types of each side.
    pub types_a: u32,
    pub types_b: u32,
    /// Partition-refinement rounds and classes (0 for identical bytes).
    pub rounds: u32,
    pub classes: u32,
    /// Where two files with the same types and strings differ in their
    /// bytes (their headers or section layout): set by [`compare_files`],
    /// which then says `equivalent`, never `identical bytes`.
    pub layout: Option<String>,
}

impl Report {
    /// Count per kind of difference, in kind order.
    pub fn summary(&self) -> BTreeMap<DiffKind, usize> {
        let mut m = BTreeMap::new();
        for d in &self.differences {
            *m.entry(d.kind).or_insert(0) += 1;
        }
        m
    }

    /// `3 differences: 1 added, 2 member_type`.
    pub fn summary_line(&self) -> String {
        match self.verdict {
            Verdict::IdenticalBytes => return "identical bytes".into(),
            Verdict::Equivalent => {
                return match &self.layout {
                    Some(l) => format!("equivalent ({l})"),
                    None => "equivalent".into(),
                };
            }
            Verdict::Different => {}
        }
        let n = self.differences.len();
        let parts: Vec<String> = self
            .summary()
            .iter()
            .map(|(k, c)| format!("{c} {}", k.name()))
            .collect();
        format!("{n} difference{}: {}", if n == 1 { "" } else { "s" }, parts.join(", "))
    }

    /// One line: the summary and the first `n` differences.
    pub fn first(&self, n: usize) -> First<'_> {
        First { report: self, n }
    }

    pub fn to_json(&self, a: &str, b: &str) -> Value {
        let summary: serde_json::Map<String, Value> = self
            .summary()
            .iter()
            .map(|(k, c)| (k.name().to_string(), Value::from(*c)))
            .collect();
        json!({
            "a": a,
            "b": b,
            "result": self.verdict.name(),
            "types": {"a": self.types_a, "b": self.types_b},
            "equivalence": {"rounds": self.rounds, "classes": self.classes},
            "layout": self.layout,
            "summary": summary,
            "differences": self.differences.iter().map(Difference::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Every difference on its own line, then the summary line.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.differences {
            writeln!(f, "{d}")?;
        }
        writeln!(f, "{}", self.summary_line())
    }
}

pub struct First<'a> {
    report: &'a Report,
    n: usize,
}

impl fmt::Display for First<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.report;
        write!(f, "{}", r.summary_line())?;
        if r.differences.is_empty() {
            return Ok(());
        }
        write!(f, "; first: ")?;
        for (i, d) in r.differences.iter().take(self.n).enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{d}")?;
        }
        if r.differences.len() > self.n {
            write!(f, "; ... {} more", r.differences.len() - self.n)?;
        }
        Ok(())
    }
}

/// [`compare`] of two BTFs read from `a_raw` and `b_raw` (the raw BTF,
/// or the `.BTF` section's bytes): `identical bytes` only where those bytes
/// are; the same types and strings in other bytes (a 24-byte header
/// against libbpf 1.8's 32, padding between the sections) are
/// `equivalent`, with the difference named in [`Report::layout`].
pub fn compare_files(a: &Btf, a_raw: &[u8], b: &Btf, b_raw: &[u8]) -> Report {
    let mut report = compare(a, b);
    if report.verdict == Verdict::IdenticalBytes && a_raw != b_raw {
        report.verdict = Verdict::Equivalent;
        report.layout = Some(layout_difference(a_raw, b_raw));
    }
    report
}

/// How two BTF files with the same types and strings differ in bytes.
fn layout_difference(a: &[u8], b: &[u8]) -> String {
    use crate::btf::read::parse_header;
    let (Ok(ha), Ok(hb)) = (parse_header(a), parse_header(b)) else {
        return "other bytes".into();
    };
    if ha.hdr_len != hb.hdr_len {
        return format!("a {}-byte header against a {}-byte one", ha.hdr_len, hb.hdr_len);
    }
    if a.get(..ha.hdr_len as usize) != b.get(..hb.hdr_len as usize) {
        return format!(
            "other section offsets in the header: types at {:#x}, strings at {:#x} against {:#x}, {:#x}",
            ha.type_off, ha.str_off, hb.type_off, hb.str_off
        );
    }
    format!(
        "other bytes outside the types and strings ({} bytes against {})",
        a.len(),
        b.len()
    )
}

/// Whether two BTFs are the same bytes: byte order, type words, strings,
/// id and string starts, and (split) bases that are themselves identical.
pub fn identical_bytes(a: &Btf, b: &Btf) -> bool {
    if a.endian() != b.endian()
        || a.start_id() != b.start_id()
        || a.start_str_off() != b.start_str_off()
        || a.raw_words() != b.raw_words()
        || a.raw_strings() != b.raw_strings()
    {
        return false;
    }
    match (a.base(), b.base()) {
        (None, None) => true,
        (Some(x), Some(y)) => std::sync::Arc::ptr_eq(x, y) || identical_bytes(x, y),
        _ => false,
    }
}
