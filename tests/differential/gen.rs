//! A seeded generator of random multi-CU C programs for tests/differential.rs.
//!
//! A program has a universe of named types ("entities": structs, unions,
//! enums, typedefs of anonymous aggregates, typedef aliases), each with one
//! to three definitions ("variants"). Every compile unit decides, per entity,
//! to leave it out, only forward-declare it, or define it with one of its
//! variants; the same variant's text is the same in every CU, like a shared
//! header. So a type comes out identical in some CUs, declared only in others,
//! different (another variant, or the same text over other variants of its
//! members' types) in others: the cases libbpf's dedup, and a collapse of
//! exact copies, must tell apart.
//!
//! Every program the generator writes must compile; the rules that make it
//! so are kept in one place each:
//! - entity `i` uses by value (members, array elements, typedef targets)
//!   only entities below `i`, so emitting definitions in index order
//!   defines everything before it is needed whole;
//! - structs and unions are forward-declared at the top of a CU, so
//!   pointers to any of them, including itself or a later one, need no
//!   order (mutual recursion, lists, trees);
//! - a CU's choices are closed (`CuPlan::close`): whatever a definition,
//!   variable or function uses by value is defined, whatever it points to is
//!   at least declared.

use std::fmt::Write;

/// splitmix64: small, seedable, and good enough to spread choices; the
/// same seed must give the same program on every machine, so no `rand`.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// A C type, kept as a tree so it can be both printed as a declarator and
/// walked for what it needs declared or defined.
#[derive(Clone, Debug)]
pub enum Ty {
    /// Only as a pointee or a return type.
    Void,
    Scalar(&'static str),
    /// Entity by its tag or typedef name.
    Ent(usize),
    /// An anonymous struct or union written inline.
    Anon {
        union: bool,
        members: Vec<Member>,
    },
    /// Qualifiers (or a type tag attribute) on a base type, printed before
    /// or after it (`const int` / `int const`).
    Qual {
        quals: Vec<&'static str>,
        after: bool,
        base: Box<Ty>,
    },
    Ptr {
        to: Box<Ty>,
        quals: Vec<&'static str>,
    },
    Array {
        of: Box<Ty>,
        len: u32,
    },
    /// Only as a pointee: `int (*)(struct foo *, long)`.
    Func {
        ret: Box<Ty>,
        params: Vec<Ty>,
        variadic: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Member {
    /// None: an anonymous aggregate member or an unnamed bitfield.
    pub name: Option<String>,
    pub ty: Ty,
    pub bits: Option<u32>,
    pub attr: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    Struct,
    Union,
    Enum,
    /// `typedef struct { ... } name;` (or a union).
    AnonTypedef {
        union: bool,
    },
    /// `typedef TYPE name;`
    Alias,
}

#[derive(Clone, Debug)]
pub enum Def {
    Members {
        members: Vec<Member>,
        packed: bool,
        attr: Option<String>,
    },
    Enumerators {
        items: Vec<(String, Option<i128>)>,
        packed: bool,
    },
    Alias(Ty),
}

pub struct Entity {
    pub name: String,
    pub kind: Kind,
    pub variants: Vec<Def>,
}

#[derive(Clone)]
pub struct Sig {
    pub ret: Ty,
    pub params: Vec<Ty>,
    pub variadic: bool,
    /// Bit i: the body never reads parameter i, so the compiler may drop
    /// or clone it away (what `optimized_func` has to notice).
    pub unused: u32,
}

/// What one CU does with an entity.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Absent,
    Declared,
    Defined(usize),
}

/// A generated program: one C source per CU, and the DWARF version gcc
/// is asked for (4 or 5; clang keeps its default).
pub struct Program {
    pub cus: Vec<Cu>,
    pub dwarf: u8,
}

pub struct Cu {
    pub source: String,
    /// Compiler flags of this CU only: `-funsigned-char` turns every plain
    /// `char` into another base type, so the same text gives another type
    /// graph; `-gdwarf-N` mixes DWARF versions in one object.
    pub flags: Vec<String>,
}

const WORDS: &[&str] = &[
    "node", "list", "tree", "buf", "req", "ctx", "ops", "page", "inode", "sock", "task", "file", "dev", "queue", "map",
    "entry", "hdr", "msg", "rule", "slot", "ring", "zone", "pool", "cfg",
];

/// Scalars with the widest bitfield of them (0: not a bitfield type here).
/// The last three are drawn less often.
const SCALARS: &[(&str, u32)] = &[
    ("int", 32),
    ("unsigned int", 32),
    ("long", 64),
    ("unsigned long", 64),
    ("long long", 64),
    ("unsigned long long", 64),
    ("short", 16),
    ("unsigned short", 16),
    ("char", 8),
    ("signed char", 8),
    ("unsigned char", 8),
    ("_Bool", 1),
    ("float", 0),
    ("double", 0),
    ("long double", 0),
    ("__int128", 0),
    ("unsigned __int128", 0),
];

/// Where a type is generated: which entities it may use.
#[derive(Clone, Copy)]
struct Scope {
    /// Entities below this index may be used in any position.
    below: usize,
    /// Whether pointers may go to any struct or union (not for typedef
    /// targets, which are emitted in index order with nothing forward).
    any_tag_ptr: bool,
}

struct Gen<'a> {
    rng: &'a mut Rng,
    ents: &'a [Entity],
    /// Counter for member names, unique within one top-level definition
    /// (anonymous members share their parent's names).
    field: usize,
}

impl Gen<'_> {
    fn scalar(&mut self) -> Ty {
        // 16-byte integers and long double are rarer: a few per program
        // reach their encodings, and more would crowd out the rest.
        let n = if self.rng.chance(90) {
            SCALARS.len() - 3
        } else {
            SCALARS.len()
        };
        let base = Ty::Scalar(SCALARS[self.rng.below(n)].0);
        self.maybe_qual(base)
    }

    /// const/volatile in either order, before or after the base.
    fn maybe_qual(&mut self, base: Ty) -> Ty {
        if !self.rng.chance(20) {
            return base;
        }
        let quals = match self.rng.below(4) {
            0 => vec!["const"],
            1 => vec!["volatile"],
            2 => vec!["const", "volatile"],
            _ => vec!["volatile", "const"],
        };
        Ty::Qual {
            quals,
            after: self.rng.chance(50),
            base: Box::new(base),
        }
    }

    fn tags(&self) -> Vec<usize> {
        (0..self.ents.len())
            .filter(|&j| matches!(self.ents[j].kind, Kind::Struct | Kind::Union))
            .collect()
    }

    /// A type usable by value: a member's, an array element's, a variable's.
    fn value(&mut self, sc: Scope, depth: u32) -> Ty {
        loop {
            let r = self.rng.below(100);
            let t = match r {
                0..=29 => self.scalar(),
                30..=51 if sc.below > 0 => {
                    let j = self.rng.below(sc.below);
                    self.maybe_qual(Ty::Ent(j))
                }
                52..=79 => self.pointer(sc, depth + 1),
                80..=88 if depth < 3 => {
                    let len = self.rng.range(1, 5) as u32;
                    let of = self.value(sc, depth + 1);
                    if matches!(of, Ty::Anon { .. }) {
                        continue;
                    }
                    Ty::Array { of: Box::new(of), len }
                }
                89..=93 if depth < 2 => {
                    let union = self.rng.chance(40);
                    let members = self.members(sc, depth + 1, union);
                    Ty::Anon { union, members }
                }
                94..=99 => self.func_ptr(sc, depth + 1),
                _ => continue,
            };
            return t;
        }
    }

    fn pointer(&mut self, sc: Scope, depth: u32) -> Ty {
        let tags = self.tags();
        let to = loop {
            let t = match self.rng.below(100) {
                0..=9 => self.maybe_qual(Ty::Void),
                10..=24 => self.scalar(),
                // Pointers to structs and unions, any of them: self-references,
                // mutual recursion, lists and trees come from here.
                25..=64 if sc.any_tag_ptr && !tags.is_empty() => Ty::Ent(*self.rng.pick(&tags)),
                65..=79 if sc.below > 0 => {
                    let j = self.rng.below(sc.below);
                    self.maybe_qual(Ty::Ent(j))
                }
                80..=89 if depth < 4 => self.pointer(sc, depth + 1),
                90..=94 if depth < 4 => {
                    let len = self.rng.range(2, 4) as u32;
                    Ty::Array {
                        of: Box::new(self.scalar()),
                        len,
                    }
                }
                95..=99 if depth < 4 => return self.func_ptr(sc, depth + 1),
                _ => continue,
            };
            break t;
        };
        // A type tag on the pointee, as the kernel's __user (clang encodes
        // it; gcc 12 ignores the attribute).
        let to = if self.rng.chance(4) && !matches!(to, Ty::Array { .. } | Ty::Ptr { .. }) {
            let tag = if self.rng.chance(50) { TAG_USER } else { TAG_RCU };
            Ty::Qual {
                quals: vec![tag],
                after: true,
                base: Box::new(to),
            }
        } else {
            to
        };
        let quals = self.ptr_quals();
        Ty::Ptr {
            to: Box::new(to),
            quals,
        }
    }

    fn ptr_quals(&mut self) -> Vec<&'static str> {
        if !self.rng.chance(15) {
            return vec![];
        }
        let mut q: Vec<&'static str> = ["const", "volatile", "restrict"]
            .into_iter()
            .filter(|_| self.rng.chance(50))
            .collect();
        if self.rng.chance(50) {
            q.reverse();
        }
        q
    }

    fn func_ptr(&mut self, sc: Scope, depth: u32) -> Ty {
        let ret = match self.rng.below(4) {
            0 => Ty::Void,
            1 => self.pointer(sc, depth + 1),
            _ => self.scalar(),
        };
        let n = self.rng.range(0, 3);
        let params = (0..n)
            .map(|_| {
                if self.rng.chance(60) {
                    self.pointer(sc, depth + 1)
                } else {
                    self.scalar()
                }
            })
            .collect();
        let variadic = n > 0 && self.rng.chance(10);
        let f = Ty::Func {
            ret: Box::new(ret),
            params,
            variadic,
        };
        Ty::Ptr {
            to: Box::new(f),
            quals: vec![],
        }
    }

    fn members(&mut self, sc: Scope, depth: u32, union: bool) -> Vec<Member> {
        let n = self.rng.range(1, if depth == 0 { 8 } else { 4 });
        let mut out = Vec::new();
        for _ in 0..n {
            let attr = if self.rng.chance(5) {
                Some(DECL_TAG.to_string())
            } else if self.rng.chance(3) {
                Some("__attribute__((aligned(16)))".to_string())
            } else {
                None
            };
            if self.rng.chance(15) {
                out.push(self.bitfield(sc));
                continue;
            }
            let ty = self.value(sc, depth);
            // An anonymous aggregate without a name is a C11 anonymous
            // member: its fields join the parent's.
            let name = if matches!(ty, Ty::Anon { .. }) && self.rng.chance(50) {
                None
            } else {
                Some(self.field_name())
            };
            out.push(Member {
                name,
                ty,
                bits: None,
                attr,
            });
        }
        // A zero-length trailing array (GNU), the kernel's flexible array of
        // old; not in unions.
        if !union && self.rng.chance(8) {
            let of = Box::new(self.scalar());
            let name = Some(self.field_name());
            out.push(Member {
                name,
                ty: Ty::Array { of, len: 0 },
                bits: None,
                attr: None,
            });
        }
        out
    }

    fn field_name(&mut self) -> String {
        self.field += 1;
        format!("f{}", self.field)
    }

    fn bitfield(&mut self, sc: Scope) -> Member {
        let enums: Vec<usize> = (0..sc.below).filter(|&j| self.ents[j].kind == Kind::Enum).collect();
        let (ty, width) = if !enums.is_empty() && self.rng.chance(15) {
            (Ty::Ent(*self.rng.pick(&enums)), 8)
        } else {
            let ints: Vec<_> = SCALARS.iter().filter(|s| s.1 > 0).collect();
            let (name, w) = **self.rng.pick(&ints);
            (Ty::Scalar(name), w)
        };
        // Unnamed bitfields: padding, and `: 0` to start a new unit.
        if self.rng.chance(15) {
            let bits = if self.rng.chance(50) {
                0
            } else {
                self.rng.range(1, width as usize) as u32
            };
            return Member {
                name: None,
                ty,
                bits: Some(bits),
                attr: None,
            };
        }
        let bits = self.rng.range(1, width as usize) as u32;
        let ty = self.maybe_qual(ty);
        Member {
            name: Some(self.field_name()),
            ty,
            bits: Some(bits),
            attr: None,
        }
    }

    fn enumerators(&mut self, name: &str) -> Def {
        let n = self.rng.range(1, 6);
        let style = self.rng.below(5);
        let mut items = Vec::new();
        for k in 0..n {
            let v = match style {
                // Implicit values, from 0.
                0 => None,
                // Small, some negative: a signed enum.
                1 => Some(self.rng.range(0, 40) as i128 - 10),
                // Above 2^32: a 64-bit enum, ENUM64 with the feature.
                2 => Some((1i128 << 32) + self.rng.below(1 << 20) as i128),
                // Negative below -2^31: a signed 64-bit enum.
                3 => Some(-(5_000_000_000i128 + self.rng.below(1000) as i128)),
                // Up to the full unsigned 32-bit range.
                _ => Some(0xffff_fff0i128 + self.rng.below(16) as i128),
            };
            items.push((format!("{}_{k}", name.to_uppercase()), v));
        }
        Def::Enumerators {
            items,
            packed: self.rng.chance(15),
        }
    }
}

/// The attribute strings; clang turns them into DECL_TAG / TYPE_TAG, gcc
/// 12 warns and ignores them (the build passes -w).
const DECL_TAG: &str = "__attribute__((btf_decl_tag(\"dtag\")))";
const TAG_USER: &str = "__attribute__((btf_type_tag(\"user\")))";
const TAG_RCU: &str = "__attribute__((btf_type_tag(\"rcu\")))";

/// The program for `seed`.
pub fn generate(seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let ents = entities(&mut rng);
    let n_helpers = rng.range(1, 4);
    let helpers: Vec<Vec<Sig>> = (0..n_helpers)
        .map(|_| {
            // One prototype, or two: the same static name with another
            // prototype in other CUs.
            let variants = if rng.chance(30) { 2 } else { 1 };
            (0..variants).map(|_| sig(&mut rng, &ents, false)).collect()
        })
        .collect();
    let n_cus = rng.range(2, 6);
    let mixed_dwarf = rng.chance(10);
    let mut plans: Vec<CuPlan> = Vec::new();
    let mut cus = Vec::new();
    for c in 0..n_cus {
        // Some CUs take an earlier CU's choice of types: whole type graphs
        // then repeat exactly, the copies the collapse is for.
        let like = (c > 0 && rng.chance(35)).then(|| plans[rng.below(c)].mode.clone());
        let plan = CuPlan::new(&mut rng, &ents, &helpers, c, like);
        let mut flags = Vec::new();
        if rng.chance(12) {
            flags.push("-funsigned-char".to_string());
        }
        if mixed_dwarf {
            flags.push(format!("-gdwarf-{}", rng.range(4, 5)));
        }
        cus.push(Cu {
            source: plan.render(&ents, seed, c),
            flags,
        });
        plans.push(plan);
    }
    let dwarf = if rng.chance(50) { 4 } else { 5 };
    Program { cus, dwarf }
}

fn entities(rng: &mut Rng) -> Vec<Entity> {
    let n = rng.range(5, 14);
    let mut words: Vec<&str> = WORDS.to_vec();
    let mut ents: Vec<Entity> = Vec::new();
    for i in 0..n {
        let w = words.remove(rng.below(words.len()));
        let kind = match rng.below(100) {
            0..=44 => Kind::Struct,
            45..=54 => Kind::Union,
            55..=69 => Kind::Enum,
            70..=79 => Kind::AnonTypedef { union: rng.chance(25) },
            _ => Kind::Alias,
        };
        let name = match kind {
            Kind::AnonTypedef { .. } | Kind::Alias => format!("{w}_t"),
            _ => w.to_string(),
        };
        // Mostly one definition; some names get a second or third, which
        // other CUs define instead.
        let nvar = match rng.below(100) {
            0..=59 => 1,
            60..=89 => 2,
            _ => 3,
        };
        let mut variants = Vec::new();
        for _ in 0..nvar {
            let mut g = Gen {
                rng,
                ents: &ents,
                field: 0,
            };
            let sc = Scope {
                below: i,
                any_tag_ptr: kind != Kind::Alias,
            };
            let def = match kind {
                Kind::Struct | Kind::Union | Kind::AnonTypedef { .. } => {
                    let union = matches!(kind, Kind::Union | Kind::AnonTypedef { union: true });
                    let members = g.members(sc, 0, union);
                    let packed = !union && g.rng.chance(10);
                    let attr = g.rng.chance(5).then(|| DECL_TAG.to_string());
                    Def::Members { members, packed, attr }
                }
                Kind::Enum => g.enumerators(&name),
                Kind::Alias => Def::Alias(alias_target(&mut g, sc)),
            };
            variants.push(def);
        }
        ents.push(Entity { name, kind, variants });
    }
    ents
}

/// A typedef's target: often a struct by name (`typedef struct foo foo_t`)
/// or an earlier typedef (a chain), else any value type.
fn alias_target(g: &mut Gen, sc: Scope) -> Ty {
    if sc.below > 0 && g.rng.chance(50) {
        let j = g.rng.below(sc.below);
        return g.maybe_qual(Ty::Ent(j));
    }
    loop {
        let t = g.value(sc, 1);
        // An anonymous aggregate here is the AnonTypedef kind's job.
        if !matches!(t, Ty::Anon { .. }) {
            return t;
        }
    }
}

/// A function prototype over the whole universe (functions come after all
/// the types of a CU). `variadic_ok`: the helpers are called with their
/// caller's arguments, so they are never variadic.
fn sig(rng: &mut Rng, ents: &[Entity], variadic_ok: bool) -> Sig {
    let mut g = Gen { rng, ents, field: 0 };
    let sc = Scope {
        below: ents.len(),
        any_tag_ptr: true,
    };
    let ret = match g.rng.below(10) {
        0..=1 => Ty::Void,
        2..=4 => g.pointer(sc, 1),
        5..=6 if !ents.is_empty() => Ty::Ent(g.rng.below(ents.len())),
        _ => g.scalar(),
    };
    // Up to 7: beyond the six argument registers, and with structs by
    // value sooner.
    let n = g.rng.range(0, 7);
    let params: Vec<Ty> = (0..n)
        .map(|_| match g.rng.below(10) {
            0..=4 => g.pointer(sc, 1),
            5..=6 if !ents.is_empty() => Ty::Ent(g.rng.below(ents.len())),
            _ => g.scalar(),
        })
        .collect();
    let variadic = variadic_ok && !params.is_empty() && g.rng.chance(10);
    let unused = (0..n).filter(|_| g.rng.chance(12)).fold(0, |m, i| m | 1 << i);
    Sig {
        ret,
        params,
        variadic,
        unused,
    }
}

/// Adds what `ty` needs to `out`: `(entity, whole)`, `whole` when it is
/// used by value (so it must be defined), else a declaration is enough.
fn needs(ty: &Ty, by_value: bool, out: &mut Vec<(usize, bool)>) {
    match ty {
        Ty::Void | Ty::Scalar(_) => {}
        Ty::Ent(j) => out.push((*j, by_value)),
        Ty::Anon { members, .. } => members.iter().for_each(|m| needs(&m.ty, true, out)),
        Ty::Qual { base, .. } => needs(base, by_value, out),
        Ty::Ptr { to, .. } => needs(to, false, out),
        // An array's element type must be complete even behind a pointer.
        Ty::Array { of, .. } => needs(of, true, out),
        Ty::Func { ret, params, .. } => {
            needs(ret, false, out);
            params.iter().for_each(|p| needs(p, false, out));
        }
    }
}

struct Var {
    name: String,
    ty: Ty,
    /// `static`, `section(".data..percpu")` and other attributes.
    prefix: String,
}

struct Func {
    name: String,
    sig: Sig,
    /// Some(k): a wrapper calling static helper `hK` with its arguments.
    calls: Option<usize>,
    attr: Option<String>,
}

struct CuPlan {
    mode: Vec<Mode>,
    /// For aliases: used by value somewhere, so its target must be whole.
    whole: Vec<bool>,
    vars: Vec<Var>,
    /// Static helpers: (index, prototype, attributes).
    helpers: Vec<(usize, Sig, &'static str)>,
    funcs: Vec<Func>,
}

impl CuPlan {
    /// `like`: start from another CU's modes instead of fresh ones.
    fn new(rng: &mut Rng, ents: &[Entity], helpers: &[Vec<Sig>], cu: usize, like: Option<Vec<Mode>>) -> CuPlan {
        let mode = like.unwrap_or_else(|| {
            ents.iter()
                .map(|e| match rng.below(100) {
                    0..=29 => Mode::Absent,
                    30..=44 if !matches!(e.kind, Kind::Alias | Kind::AnonTypedef { .. }) => Mode::Declared,
                    _ => Mode::Defined(pick_variant(rng, e)),
                })
                .collect()
        });
        let mut plan = CuPlan {
            mode,
            whole: vec![false; ents.len()],
            vars: Vec::new(),
            helpers: Vec::new(),
            funcs: Vec::new(),
        };
        let mut g = Gen { rng, ents, field: 0 };
        let sc = Scope {
            below: ents.len(),
            any_tag_ptr: true,
        };
        for k in 0..g.rng.range(1, 5) {
            // Per-CPU variables are what the `var` feature encodes; static
            // ones may share a name across CUs.
            let (name, prefix, ty) = match g.rng.below(4) {
                0 => (format!("pcpu_{cu}_{k}"), PERCPU.to_string(), percpu_type(&mut g, sc)),
                1 => (
                    format!("spcpu_{k}"),
                    format!("static {PERCPU_USED}"),
                    percpu_type(&mut g, sc),
                ),
                2 => (format!("g_{cu}_{k}"), String::new(), var_type(&mut g, sc)),
                _ => (
                    format!("sv_{k}"),
                    "static __attribute__((used))".to_string(),
                    var_type(&mut g, sc),
                ),
            };
            let prefix = if g.rng.chance(5) {
                format!("{prefix} {DECL_TAG}")
            } else {
                prefix
            };
            plan.vars.push(Var { name, ty, prefix });
        }
        for (k, variants) in helpers.iter().enumerate() {
            if g.rng.chance(60) {
                let s = g.rng.pick(variants).clone();
                // Mostly kept out of line; else gcc and clang decide, and
                // may inline it, clone it (.isra, .constprop) or both.
                let attr = if g.rng.chance(75) {
                    "__attribute__((noinline)) "
                } else {
                    ""
                };
                plan.helpers.push((k, s.clone(), attr));
                plan.funcs.push(Func {
                    name: format!("c{cu}_h{k}"),
                    sig: s,
                    calls: Some(k),
                    attr: None,
                });
            }
        }
        for k in 0..g.rng.range(0, 3) {
            let s = sig(g.rng, ents, true);
            let attr = g.rng.chance(5).then(|| DECL_TAG.to_string());
            plan.funcs.push(Func {
                name: format!("c{cu}_f{k}"),
                sig: s,
                calls: None,
                attr,
            });
        }
        plan.close(rng, ents);
        plan.fix_returns(ents);
        plan
    }

    /// Upgrades modes until every use is declared or defined as it needs.
    fn close(&mut self, rng: &mut Rng, ents: &[Entity]) {
        let mut roots = Vec::new();
        for v in &self.vars {
            needs(&v.ty, true, &mut roots);
        }
        let sigs = self
            .helpers
            .iter()
            .map(|h| &h.1)
            .chain(self.funcs.iter().map(|f| &f.sig));
        for s in sigs {
            // Defined functions need their parameter and return types whole.
            needs(&s.ret, true, &mut roots);
            s.params.iter().for_each(|p| needs(p, true, &mut roots));
        }
        let mut work: Vec<usize> = (0..ents.len())
            .filter(|&i| matches!(self.mode[i], Mode::Defined(_)))
            .collect();
        for (j, whole) in roots {
            self.require(rng, ents, j, whole, &mut work);
        }
        while let Some(i) = work.pop() {
            let Mode::Defined(v) = self.mode[i] else { unreachable!() };
            let mut out = Vec::new();
            match &ents[i].variants[v] {
                Def::Members { members, .. } => members.iter().for_each(|m| needs(&m.ty, true, &mut out)),
                Def::Enumerators { .. } => {}
                Def::Alias(t) => needs(t, self.whole[i], &mut out),
            }
            for (j, whole) in out {
                self.require(rng, ents, j, whole, &mut work);
            }
        }
    }

    fn require(&mut self, rng: &mut Rng, ents: &[Entity], j: usize, whole: bool, work: &mut Vec<usize>) {
        let e = &ents[j];
        let typedef = matches!(e.kind, Kind::Alias | Kind::AnonTypedef { .. });
        if (whole || typedef) && !matches!(self.mode[j], Mode::Defined(_)) {
            self.mode[j] = Mode::Defined(pick_variant(rng, e));
            work.push(j);
        } else if self.mode[j] == Mode::Absent {
            self.mode[j] = Mode::Declared;
        }
        if e.kind == Kind::Alias && whole && !self.whole[j] {
            self.whole[j] = true;
            work.push(j);
        }
    }

    /// What `ty` is in this CU once typedefs are looked through.
    fn shape(&self, ents: &[Entity], ty: &Ty) -> Shape {
        match ty {
            Ty::Void => Shape::Void,
            Ty::Scalar(_) | Ty::Ptr { .. } => Shape::Scalar,
            Ty::Qual { base, .. } => self.shape(ents, base),
            Ty::Anon { .. } => Shape::Aggregate,
            Ty::Array { .. } | Ty::Func { .. } => Shape::Array,
            Ty::Ent(j) => match ents[*j].kind {
                Kind::Enum => Shape::Scalar,
                Kind::Struct | Kind::Union | Kind::AnonTypedef { .. } => Shape::Aggregate,
                Kind::Alias => {
                    let Mode::Defined(v) = self.mode[*j] else {
                        unreachable!("closed")
                    };
                    let Def::Alias(t) = &ents[*j].variants[v] else {
                        unreachable!()
                    };
                    self.shape(ents, t)
                }
            },
        }
    }

    /// A typedef may name an array here: C returns no arrays, so such
    /// prototypes return `long` instead.
    fn fix_returns(&mut self, ents: &[Entity]) {
        let fix = |plan: &CuPlan, s: &Sig| -> Option<Sig> {
            (plan.shape(ents, &s.ret) == Shape::Array).then(|| Sig {
                ret: Ty::Scalar("long"),
                ..s.clone()
            })
        };
        for i in 0..self.helpers.len() {
            if let Some(s) = fix(self, &self.helpers[i].1) {
                self.helpers[i].1 = s;
            }
        }
        for i in 0..self.funcs.len() {
            if let Some(s) = fix(self, &self.funcs[i].sig) {
                self.funcs[i].sig = s;
            }
        }
    }

    fn render(&self, ents: &[Entity], seed: u64, cu: usize) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "/* differential seed {seed}, cu {cu} */");
        o.push_str("static volatile unsigned long sink;\n\n");
        for (i, e) in ents.iter().enumerate() {
            let decl = match (e.kind, self.mode[i]) {
                (_, Mode::Absent) => continue,
                (Kind::Struct, _) => "struct",
                (Kind::Union, _) => "union",
                // GNU C: an enum declared before (or without) its definition.
                (Kind::Enum, Mode::Declared) => "enum",
                _ => continue,
            };
            let _ = writeln!(o, "{decl} {};", e.name);
        }
        o.push('\n');
        for (i, e) in ents.iter().enumerate() {
            if let Mode::Defined(v) = self.mode[i] {
                render_def(&mut o, ents, e, &e.variants[v]);
            }
        }
        for v in &self.vars {
            let _ = writeln!(o, "{} {};", v.prefix, decl(ents, &v.ty, &v.name).trim());
        }
        o.push('\n');
        for (k, s, attr) in &self.helpers {
            let head = proto(ents, &format!("h{k}"), s);
            let _ = writeln!(o, "static {attr}{head}\n{{\n{}}}\n", self.body(ents, s));
        }
        for f in &self.funcs {
            let head = proto(ents, &f.name, &f.sig);
            let attr = f.attr.as_deref().map(|a| format!("{a} ")).unwrap_or_default();
            let body = match f.calls {
                Some(k) => {
                    let args: Vec<String> = (0..f.sig.params.len()).map(|i| format!("a{i}")).collect();
                    let call = format!("h{k}({})", args.join(", "));
                    if self.shape(ents, &f.sig.ret) == Shape::Void {
                        format!("\tsink++;\n\t{call};\n")
                    } else {
                        format!("\tsink++;\n\treturn {call};\n")
                    }
                }
                None => self.body(ents, &f.sig),
            };
            let _ = writeln!(o, "{attr}{head}\n{{\n{body}}}\n");
        }
        o
    }

    /// A body that reads every parameter (so it is not dropped as unused)
    /// and returns something of the return type.
    fn body(&self, ents: &[Entity], s: &Sig) -> String {
        let mut b = String::new();
        for (i, p) in s.params.iter().enumerate() {
            if s.unused & 1 << i != 0 {
                continue;
            }
            match self.shape(ents, p) {
                Shape::Aggregate => {
                    let _ = writeln!(b, "\tsink += *(volatile unsigned char *)&a{i};");
                }
                _ => {
                    let _ = writeln!(b, "\tsink += (unsigned long)a{i};");
                }
            }
        }
        match self.shape(ents, &s.ret) {
            Shape::Void => {}
            Shape::Aggregate => {
                let local = decl(ents, unqualified(&s.ret), "r");
                let _ = writeln!(b, "\t{local};\n\t__builtin_memset(&r, 0, sizeof r);\n\treturn r;");
            }
            _ => {
                let _ = writeln!(b, "\treturn ({})sink;", decl(ents, &s.ret, "").trim());
            }
        }
        b
    }
}

#[derive(PartialEq)]
enum Shape {
    Void,
    Scalar,
    Aggregate,
    Array,
}

const PERCPU: &str = "__attribute__((section(\".data..percpu\")))";
const PERCPU_USED: &str = "__attribute__((section(\".data..percpu\"), used))";

fn unqualified(t: &Ty) -> &Ty {
    match t {
        Ty::Qual { base, .. } => base,
        t => t,
    }
}

/// A variable's type: no top-level qualifier (a const object in a writable
/// section is a section type conflict) and nothing incomplete-by-nature.
fn var_type(g: &mut Gen, sc: Scope) -> Ty {
    loop {
        let t = g.value(sc, 1);
        if !matches!(t, Ty::Qual { .. } | Ty::Anon { .. }) {
            return t;
        }
    }
}

/// A per-CPU variable's type: nothing that could be const at the top (an
/// alias may name a const type), since a read-only object in the writable
/// `.data..percpu` is a section type conflict.
fn percpu_type(g: &mut Gen, sc: Scope) -> Ty {
    loop {
        let t = g.value(sc, 1);
        let ok = match &t {
            Ty::Scalar(_) => true,
            Ty::Ptr { quals, .. } => !quals.contains(&"const"),
            Ty::Ent(j) => g.ents[*j].kind != Kind::Alias,
            _ => false,
        };
        if ok {
            return t;
        }
    }
}

fn pick_variant(rng: &mut Rng, e: &Entity) -> usize {
    // The first definition is the common one: most CUs agree on it.
    if e.variants.len() == 1 || rng.chance(60) {
        0
    } else {
        rng.below(e.variants.len())
    }
}

fn render_def(o: &mut String, ents: &[Entity], e: &Entity, def: &Def) {
    match (e.kind, def) {
        (Kind::Enum, Def::Enumerators { items, packed }) => {
            let attr = if *packed { " __attribute__((packed))" } else { "" };
            let _ = writeln!(o, "enum{attr} {} {{", e.name);
            for (n, v) in items {
                match v {
                    None => {
                        let _ = writeln!(o, "\t{n},");
                    }
                    Some(v) if *v < 0 => {
                        let _ = writeln!(o, "\t{n} = {v}LL,");
                    }
                    Some(v) => {
                        let _ = writeln!(o, "\t{n} = {v:#x}ULL,");
                    }
                }
            }
            o.push_str("};\n");
        }
        (Kind::Alias, Def::Alias(t)) => {
            let _ = writeln!(o, "typedef {};", decl(ents, t, &e.name).trim());
        }
        (kind, Def::Members { members, packed, attr }) => {
            let union = matches!(kind, Kind::Union | Kind::AnonTypedef { union: true });
            let kw = if union { "union" } else { "struct" };
            let attr = attr.as_deref().map(|a| format!(" {a}")).unwrap_or_default();
            let packed = if *packed { " __attribute__((packed))" } else { "" };
            let body = aggregate_body(ents, members);
            match kind {
                Kind::AnonTypedef { .. } => {
                    let _ = writeln!(o, "typedef {kw}{attr} {body}{packed} {};", e.name);
                }
                _ => {
                    let _ = writeln!(o, "{kw}{attr} {} {body}{packed};", e.name);
                }
            }
        }
        _ => unreachable!("kind and definition agree"),
    }
    o.push('\n');
}

fn aggregate_body(ents: &[Entity], members: &[Member]) -> String {
    let mut s = String::from("{\n");
    for m in members {
        let name = m.name.as_deref().unwrap_or("");
        let mut line = decl(ents, &m.ty, name).trim().to_string();
        if let Some(b) = m.bits {
            let _ = write!(line, " : {b}");
        }
        if let Some(a) = &m.attr {
            let _ = write!(line, " {a}");
        }
        let _ = writeln!(s, "\t{line};");
    }
    s.push('}');
    s
}

fn proto(ents: &[Entity], name: &str, s: &Sig) -> String {
    let mut params: Vec<String> = s
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| decl(ents, p, &format!("a{i}")).trim().to_string())
        .collect();
    if s.variadic {
        params.push("...".into());
    }
    if params.is_empty() {
        params.push("void".into());
    }
    decl(ents, &s.ret, &format!("{name}({})", params.join(", ")))
        .trim()
        .to_string()
}

/// `ty` declaring `inner` (a name, or "" for an abstract declarator), in C
/// declarator syntax: built inside out, with parentheses where a pointer
/// meets an array or a function.
pub fn decl(ents: &[Entity], ty: &Ty, inner: &str) -> String {
    let join = |base: &str, inner: &str| {
        if inner.is_empty() {
            base.to_string()
        } else {
            format!("{base} {inner}")
        }
    };
    match ty {
        Ty::Void => join("void", inner),
        Ty::Scalar(s) => join(s, inner),
        Ty::Ent(j) => {
            let e = &ents[*j];
            let base = match e.kind {
                Kind::Struct => format!("struct {}", e.name),
                Kind::Union => format!("union {}", e.name),
                Kind::Enum => format!("enum {}", e.name),
                _ => e.name.clone(),
            };
            join(&base, inner)
        }
        Ty::Anon { union, members } => {
            let kw = if *union { "union" } else { "struct" };
            join(&format!("{kw} {}", aggregate_body(ents, members)), inner)
        }
        Ty::Qual { quals, after, base } => {
            let b = decl(ents, base, "");
            let q = quals.join(" ");
            let b = if *after { format!("{b} {q}") } else { format!("{q} {b}") };
            join(&b, inner)
        }
        Ty::Ptr { to, quals } => {
            let mut p = String::from("*");
            for q in quals {
                // restrict qualifies pointers to objects only.
                if *q == "restrict" && matches!(**to, Ty::Func { .. }) {
                    continue;
                }
                p.push_str(q);
                p.push(' ');
            }
            let p = format!("{}{}", p, inner).trim().to_string();
            match **to {
                Ty::Array { .. } | Ty::Func { .. } => decl(ents, to, &format!("({p})")),
                _ => decl(ents, to, &p),
            }
        }
        Ty::Array { of, len } => decl(ents, of, &format!("{inner}[{len}]")),
        Ty::Func { ret, params, variadic } => {
            let mut ps: Vec<String> = params.iter().map(|p| decl(ents, p, "")).collect();
            if *variadic {
                ps.push("...".into());
            }
            if ps.is_empty() {
                ps.push("void".into());
            }
            decl(ents, ret, &format!("{inner}({})", ps.join(", ")))
        }
    }
}
