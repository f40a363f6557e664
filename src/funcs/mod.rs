//! The function phase (encoding-funcs-vars.md §3–6): saved function states
//! recorded per CU, then one sort-and-combine pass that appends FUNC_PROTO,
//! FUNC and their DECL_TAGs after the last CU.
//!
//! * [`FuncStates`]: the saved-state arena. One per CU while recording (on any
//!   thread), appended to the run-wide one in CU order.
//! * [`packed`]: packed-struct inference for `uncertain_parm_loc`.
//! * [`combine`]: sort, combine, decide and emit.
//! * [`kfuncs`]: kfunc marks from `.BTF_ids`.

pub mod combine;
pub mod kfuncs;
pub mod packed;

use thiserror::Error;

use crate::btf::{StrOff, TypeId};

pub use combine::{Decide, EmitOptions, EmitSummary, Pick, ProtoMatch, emit_funcs, emit_funcs_logged, types_match};
pub use kfuncs::KfuncMarks;

/// Failures of the function phase. The reference fails the whole run on each
/// ("Failed to encode BTF", exit 1, or "Error creating BTF encoder." for the
/// kfunc table); the CLI decides the exit code.
#[derive(Debug, Error)]
pub enum FuncsError {
    /// A kfunc whose flags ask for an arena pointer where there is none.
    #[error("kfunc `{func}`: flag {flag} asks for an arena pointer but {what}")]
    ArenaNotPtr {
        func: String,
        flag: &'static str,
        what: String,
    },
    /// A function name BTF cannot hold (libbpf refuses an empty FUNC name).
    #[error("function at ELF table entry {entry}: empty name, cannot add a FUNC")]
    EmptyName { entry: u32 },
    /// A saved state naming an ELF table entry the table does not have.
    #[error("saved function state refers to ELF table entry {entry}, the table has {entries}")]
    BadEntry { entry: u32, entries: usize },
    /// A prototype with more parameters than BTF's 16-bit vlen.
    #[error("function `{func}`: {count} parameters, more than BTF's 65535")]
    TooManyParams { func: String, count: usize },
    /// `.BTF_ids`: a kfunc's (id, flags) pair lies outside the section.
    #[error(
        "section .BTF_ids: kfunc `{func}` (symbol {sym}) at offset {off:#x} lies outside the section ({size:#x} bytes)"
    )]
    KfuncOutsideSection {
        func: String,
        sym: String,
        off: i64,
        size: usize,
    },
    /// The ELF file around `.BTF_ids` / `.symtab` could not be read.
    #[error("{0}")]
    Elf(String),
}

/// Flag bits of a saved state.
pub mod flags {
    /// Some parameter is optimized out or has no location (no effect in v1.31).
    pub const OPTIMIZED_PARMS: u8 = 1;
    /// A parameter sits in a register other than the ABI's (and no parameter is a struct).
    pub const UNEXPECTED_REG: u8 = 2;
    /// A packed struct is passed on the stack.
    pub const UNCERTAIN_PARM_LOC: u8 = 4;
    /// Set by the combine step: the instances of the name disagree.
    pub const INCONSISTENT: u8 = 8;
    /// A concrete instance lists its parameters in another order than its
    /// abstract origin (the next reference).
    pub const REORDERED_PARM: u8 = 16;
    /// Clang marked the function `DW_CC_nocall`: its signature changed
    /// (the next reference).
    pub const SIGNATURE_CHANGED: u8 = 32;
}

/// One parameter of a saved state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param<T = TypeId, S = StrOff> {
    pub name: S,
    pub ty: T,
}

/// One function annotation (`btf_decl_tag`) of a saved state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Annot<S = StrOff> {
    pub value: S,
    /// −1 for the function, k for its k-th parameter.
    pub component: i32,
}

/// What a saved state's type ids (`T`) and string offsets (`S`) may be:
/// the run's (`TypeId`, `StrOff`, the defaults), or a unit's own before the
/// merge relocates them ([`FuncStates::extend_relocated`]). The default
/// value is void, or the empty string.
pub trait Slot: Copy + Default + PartialEq {}
impl<X: Copy + Default + PartialEq> Slot for X {}

/// Saved function states, struct-of-arrays: per state the ELF table entry,
/// the return type, the flags and where its parameters and annotations start
/// in the shared `params` / `annots` columns (a state's range ends where the
/// next one's starts). No per-function allocation.
///
/// Recording: [`FuncStates::push`] starts a state, then [`push_param`],
/// [`push_varargs`] and [`push_annot`] add to the last state.
///
/// [`push_param`]: FuncStates::push_param
/// [`push_varargs`]: FuncStates::push_varargs
/// [`push_annot`]: FuncStates::push_annot
#[derive(Clone, Debug)]
pub struct FuncStates<T = TypeId, S = StrOff> {
    entry: Vec<u32>,
    ret: Vec<T>,
    flags: Vec<u8>,
    /// The function's DW_AT_low_pc; 0 without one, as the reference keeps
    /// it (and compares it with the ELF symbols' addresses so).
    low_pc: Vec<u64>,
    param_start: Vec<u32>,
    annot_start: Vec<u32>,
    params: Vec<Param<T, S>>,
    annots: Vec<Annot<S>>,
}

impl<T, S> Default for FuncStates<T, S> {
    fn default() -> Self {
        FuncStates {
            entry: Vec::new(),
            ret: Vec::new(),
            flags: Vec::new(),
            low_pc: Vec::new(),
            param_start: Vec::new(),
            annot_start: Vec::new(),
            params: Vec::new(),
            annots: Vec::new(),
        }
    }
}

/// A state in a [`FuncStates`] (its index in every column).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(transparent)]
pub struct StateId(u32);

impl StateId {
    #[inline]
    pub(crate) fn new(index: u32) -> StateId {
        StateId(index)
    }
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl FuncStates {
    pub fn new() -> FuncStates {
        FuncStates::default()
    }

    /// Appends every state of `other` after ours (CU order: call this with the
    /// CUs' arenas in `.debug_info` order).
    pub fn extend(&mut self, other: &FuncStates) {
        self.extend_relocated(other, |t| t, |s| s);
    }
}

impl<T: Slot, S: Slot> FuncStates<T, S> {
    pub fn with_capacity(states: usize, params: usize) -> FuncStates<T, S> {
        FuncStates {
            entry: Vec::with_capacity(states),
            ret: Vec::with_capacity(states),
            flags: Vec::with_capacity(states),
            low_pc: Vec::with_capacity(states),
            param_start: Vec::with_capacity(states),
            annot_start: Vec::with_capacity(states),
            params: Vec::with_capacity(params),
            annots: Vec::new(),
        }
    }

    /// Starts a state for ELF table entry `entry` with return type `ret`
    /// (0 = void), the recording-time flags (see [`flags`]) and the
    /// function's DW_AT_low_pc.
    pub fn push(&mut self, entry: u32, ret: T, flags: u8, low_pc: Option<u64>) -> StateId {
        let id = StateId::new(self.entry.len() as u32);
        self.entry.push(entry);
        self.ret.push(ret);
        self.flags.push(flags);
        self.low_pc.push(low_pc.unwrap_or(0));
        self.param_start.push(self.params.len() as u32);
        self.annot_start.push(self.annots.len() as u32);
        id
    }

    /// Adds a parameter to the last state (its name already interned).
    pub fn push_param(&mut self, name: S, ty: T) {
        debug_assert!(!self.entry.is_empty(), "push_param before push");
        self.params.push(Param { name, ty });
    }

    /// Adds the varargs slot (no name, type void) to the last state.
    pub fn push_varargs(&mut self) {
        self.push_param(S::default(), T::default());
    }

    /// Adds an annotation to the last state (its value already interned).
    pub fn push_annot(&mut self, value: S, component: i32) {
        debug_assert!(!self.entry.is_empty(), "push_annot before push");
        self.annots.push(Annot { value, component });
    }

    /// Ors `f` into the flags of state `s`.
    pub fn add_flags(&mut self, s: StateId, f: u8) {
        self.flags[s.index()] |= f;
    }

    pub fn len(&self) -> usize {
        self.entry.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entry.is_empty()
    }

    /// Total parameters over all states (varargs slots included).
    pub fn param_count(&self) -> usize {
        self.params.len()
    }

    pub fn entry(&self, s: StateId) -> u32 {
        self.entry[s.index()]
    }

    pub fn ret(&self, s: StateId) -> T {
        self.ret[s.index()]
    }

    pub fn flags(&self, s: StateId) -> u8 {
        self.flags[s.index()]
    }

    /// The function's DW_AT_low_pc, 0 without one.
    pub fn low_pc(&self, s: StateId) -> u64 {
        self.low_pc[s.index()]
    }

    pub fn params(&self, s: StateId) -> &[Param<T, S>] {
        let i = s.index();
        let start = self.param_start[i] as usize;
        let end = self.param_start.get(i + 1).map_or(self.params.len(), |&e| e as usize);
        &self.params[start..end]
    }

    pub fn annots(&self, s: StateId) -> &[Annot<S>] {
        let i = s.index();
        let start = self.annot_start[i] as usize;
        let end = self.annot_start.get(i + 1).map_or(self.annots.len(), |&e| e as usize);
        &self.annots[start..end]
    }

    /// Appends `other`, recorded with a unit's own ids, after ours: type
    /// ids go through `ty` (the unit's → ours), non-empty strings through
    /// `map_str`.
    pub fn extend_relocated<U: Slot, V: Slot>(
        &mut self,
        other: &FuncStates<U, V>,
        ty: impl Fn(U) -> T,
        mut map_str: impl FnMut(V) -> S,
    ) {
        let p0 = self.params.len() as u32;
        let a0 = self.annots.len() as u32;
        self.entry.extend_from_slice(&other.entry);
        self.ret.extend(other.ret.iter().map(|&t| ty(t)));
        self.flags.extend_from_slice(&other.flags);
        self.low_pc.extend_from_slice(&other.low_pc);
        self.param_start.extend(other.param_start.iter().map(|&s| s + p0));
        self.annot_start.extend(other.annot_start.iter().map(|&s| s + a0));
        self.params.extend(other.params.iter().map(|p| Param {
            name: if p.name == V::default() {
                S::default()
            } else {
                map_str(p.name)
            },
            ty: ty(p.ty),
        }));
        self.annots.extend(other.annots.iter().map(|a| Annot {
            value: if a.value == V::default() {
                S::default()
            } else {
                map_str(a.value)
            },
            component: a.component,
        }));
    }

    /// Drops every state (keeps the allocations, for reuse per CU).
    pub fn clear(&mut self) {
        self.entry.clear();
        self.ret.clear();
        self.flags.clear();
        self.low_pc.clear();
        self.param_start.clear();
        self.annot_start.clear();
        self.params.clear();
        self.annots.clear();
    }

    /// Overrides the type of parameter `i` of state `s` (arena tags).
    pub(crate) fn set_param_type(&mut self, s: StateId, i: usize, ty: T) {
        let start = self.param_start[s.index()] as usize;
        self.params[start + i].ty = ty;
    }

    pub(crate) fn set_ret(&mut self, s: StateId, ty: T) {
        self.ret[s.index()] = ty;
    }

    pub(crate) fn entries(&self) -> &[u32] {
        &self.entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FuncStates {
        let mut s = FuncStates::new();
        s.push(3, TypeId::new(1), 0, None);
        s.push_param(StrOff::new(5), TypeId::new(2));
        s.push_param(StrOff::new(9), TypeId::new(0));
        s.push_annot(StrOff::new(12), -1);
        s.push(1, TypeId::new(0), flags::OPTIMIZED_PARMS, None);
        s.push(2, TypeId::new(4), 0, None);
        s.push_param(StrOff::new(5), TypeId::new(4));
        s.push_varargs();
        s.push_annot(StrOff::new(20), 0);
        s
    }

    #[test]
    fn ranges_follow_the_next_start() {
        let s = sample();
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.params(StateId::new(0)),
            &[
                Param {
                    name: StrOff::new(5),
                    ty: TypeId::new(2)
                },
                Param {
                    name: StrOff::new(9),
                    ty: TypeId::new(0)
                }
            ]
        );
        assert_eq!(
            s.annots(StateId::new(0)),
            &[Annot {
                value: StrOff::new(12),
                component: -1
            }]
        );
        assert!(s.params(StateId::new(1)).is_empty());
        assert!(s.annots(StateId::new(1)).is_empty());
        assert_eq!(s.flags(StateId::new(1)), flags::OPTIMIZED_PARMS);
        assert_eq!(
            s.params(StateId::new(2))[1],
            Param {
                name: StrOff::EMPTY,
                ty: TypeId::VOID
            }
        );
        assert_eq!(
            s.annots(StateId::new(2)),
            &[Annot {
                value: StrOff::new(20),
                component: 0
            }]
        );
        assert_eq!(s.entry(StateId::new(2)), 2);
    }

    #[test]
    fn extend_keeps_cu_order_and_relocates() {
        let mut run = sample();
        let cu = sample();
        run.extend_relocated(
            &cu,
            |t| if t.get() == 0 { t } else { TypeId::new(t.get() + 100) },
            |s| StrOff::new(s.get() + 1000),
        );
        assert_eq!(run.len(), 6);
        assert_eq!(run.entry(StateId::new(3)), 3);
        assert_eq!(run.ret(StateId::new(3)), TypeId::new(101));
        assert_eq!(run.ret(StateId::new(4)), TypeId::new(0), "void stays void");
        assert_eq!(
            run.params(StateId::new(3)),
            &[
                Param {
                    name: StrOff::new(1005),
                    ty: TypeId::new(102)
                },
                Param {
                    name: StrOff::new(1009),
                    ty: TypeId::new(0)
                }
            ]
        );
        assert_eq!(
            run.params(StateId::new(5))[1],
            Param {
                name: StrOff::EMPTY,
                ty: TypeId::VOID
            },
            "varargs slot untouched"
        );
        assert_eq!(
            run.annots(StateId::new(5)),
            &[Annot {
                value: StrOff::new(1020),
                component: 0
            }]
        );
        // The first half is unchanged.
        assert_eq!(run.params(StateId::new(0)), sample().params(StateId::new(0)));
        let mut plain = FuncStates::new();
        plain.extend(&cu);
        assert_eq!(plain.params(StateId::new(2)), cu.params(StateId::new(2)));
    }
}
