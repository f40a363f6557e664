//! Which poisoned instructions can the verifier reach?
//!
//! libbpf poisons the instruction of a relocation that found no target and
//! loads the program anyway: if the verifier proves the instruction dead,
//! it is removed, and that is how guarded code works:
//!
//! ```c
//! if (bpf_core_field_exists(t->__state))   // relocated to 0 or 1
//!         state = BPF_CORE_READ(t, __state);  // poisoned where it is 0
//! ```
//!
//! The verifier knows the relocated constant and follows only the branch
//! it selects. This walk does the same, path by path: registers and 8-byte
//! stack slots hold a known constant or nothing, a conditional jump on
//! known operands goes one way, a call clobbers r0–r5. It is an
//! approximation of the verifier from the safe side: it tracks less (no
//! ranges, no pointers), so it can only find more paths, never fewer, and
//! a poison it calls unreachable is one the verifier also proves dead as
//! long as the guard is a constant test, which is what CO-RE guards are.
//! A walk that exceeds its budget says so, and every poison in the
//! function is then counted as reachable.

use hashbrown::{HashMap, HashSet};

use super::object::{BpfObject, Insn, SecIdx};
use super::relocate::POISON_HELPER;

/// Paths explored per function before giving up on precision.
const BUDGET: usize = 200_000;

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    regs: [Option<u64>; 11],
    /// Known 8-byte values spilled at `r10 + off`.
    stack: Vec<(i16, u64)>,
}

/// What one function (program or subprogram) can reach.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// Poisoned instructions (function-relative) some path reaches.
    pub poisons: Vec<u32>,
    /// Functions (indices into the object's programs) some path calls.
    pub callees: Vec<usize>,
    /// False when the budget ran out (then every poison counts).
    pub exact: bool,
}

pub fn is_poison(i: &Insn) -> bool {
    i.code == 0x85 && i.src == 0 && i.imm == POISON_HELPER
}

/// Walks function `f` of `obj` with its patched instructions `insns`.
pub fn walk(obj: &BpfObject, f: usize, insns: &[Insn], calls: &HashMap<(SecIdx, u32), (SecIdx, u32)>) -> Reach {
    let prog = &obj.programs[f];
    let n = insns.len();
    let mut seen: HashSet<(usize, State)> = HashSet::new();
    let mut stack = vec![(
        0usize,
        State {
            regs: [None; 11],
            stack: Vec::new(),
        },
    )];
    let mut poisons = HashSet::new();
    let mut callees = HashSet::new();
    let mut steps = 0usize;
    let callee_of = |pc: usize, insn: &Insn| -> Option<usize> {
        let from = (prog.section, prog.sec_insn_off + pc as u32);
        let (sec, at) = match calls.get(&from) {
            Some(&to) => to,
            None => {
                let at = prog.sec_insn_off as i64 + pc as i64 + insn.imm as i64 + 1;
                (prog.section, u32::try_from(at).ok()?)
            }
        };
        obj.program_at(sec, at)
    };
    while let Some((mut pc, mut st)) = stack.pop() {
        loop {
            steps += 1;
            if steps > BUDGET {
                return Reach {
                    poisons: (0..n).filter(|&i| is_poison(&insns[i])).map(|i| i as u32).collect(),
                    callees: all_callees(insns, &callee_of),
                    exact: false,
                };
            }
            if pc >= n || !seen.insert((pc, st.clone())) {
                break;
            }
            let i = insns[pc];
            let class = i.class();
            match class {
                // ALU, ALU64
                4 | 7 => {
                    alu(&mut st, &i, class == 7);
                    pc += 1;
                }
                // LD: only the 64-bit immediate load is more than a clobber
                0 => {
                    if i.code == 0x18 {
                        let hi = insns.get(pc + 1).map_or(0, |x| x.imm as u32 as u64);
                        set(&mut st, i.dst, (i.src == 0).then_some(i.imm as u32 as u64 | (hi << 32)));
                        pc += 2;
                    } else {
                        st.regs[0] = None;
                        pc += 1;
                    }
                }
                // LDX
                1 => {
                    let v = if i.code == 0x79 && i.src == 10 {
                        st.stack.iter().find(|(o, _)| *o == i.off).map(|(_, v)| *v)
                    } else {
                        None
                    };
                    set(&mut st, i.dst, v);
                    pc += 1;
                }
                // ST, STX
                2 | 3 => {
                    store(&mut st, &i);
                    pc += 1;
                }
                // JMP, JMP32
                5 | 6 => {
                    let op = i.code & 0xf0;
                    match op {
                        0x00 => {
                            let off = if class == 6 { i.imm as i64 } else { i.off as i64 };
                            match jump(pc, off) {
                                Some(t) => pc = t,
                                None => break,
                            }
                        }
                        0x80 if class == 5 => {
                            if is_poison(&i) {
                                poisons.insert(pc as u32);
                                break;
                            }
                            if i.src == 1
                                && let Some(c) = callee_of(pc, &i)
                            {
                                callees.insert(c);
                            }
                            for r in 0..=5 {
                                st.regs[r] = None;
                            }
                            pc += 1;
                        }
                        0x90 if class == 5 => break,
                        _ => {
                            let taken = branch(&st, &i, class == 6);
                            let target = jump(pc, i.off as i64);
                            match taken {
                                Some(true) => match target {
                                    Some(t) => pc = t,
                                    None => break,
                                },
                                Some(false) => pc += 1,
                                None => {
                                    if let Some(t) = target {
                                        stack.push((t, st.clone()));
                                    }
                                    pc += 1;
                                }
                            }
                        }
                    }
                }
                _ => pc += 1,
            }
        }
    }
    let mut poisons: Vec<u32> = poisons.into_iter().collect();
    poisons.sort_unstable();
    let mut callees: Vec<usize> = callees.into_iter().collect();
    callees.sort_unstable();
    Reach {
        poisons,
        callees,
        exact: true,
    }
}

/// Every function a call instruction of `insns` names, reached or not.
fn all_callees(insns: &[Insn], callee_of: &dyn Fn(usize, &Insn) -> Option<usize>) -> Vec<usize> {
    let mut v: Vec<usize> = insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.code == 0x85 && i.src == 1)
        .filter_map(|(pc, i)| callee_of(pc, i))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn jump(pc: usize, off: i64) -> Option<usize> {
    usize::try_from(pc as i64 + off + 1).ok()
}

fn set(st: &mut State, reg: u8, v: Option<u64>) {
    if let Some(r) = st.regs.get_mut(reg as usize) {
        *r = v;
    }
}

fn get(st: &State, reg: u8) -> Option<u64> {
    st.regs.get(reg as usize).copied().flatten()
}

fn alu(st: &mut State, i: &Insn, wide: bool) {
    let op = i.code & 0xf0;
    let src = if i.code & 0x08 != 0 {
        get(st, i.src)
    } else if wide {
        Some(i.imm as i64 as u64)
    } else {
        Some(i.imm as u32 as u64)
    };
    let dst = get(st, i.dst);
    // sign-extending moves and signed division carry a non-zero `off`
    let v = if i.off != 0 && matches!(op, 0xb0 | 0x30 | 0x90) {
        None
    } else {
        match op {
            0xb0 => src,
            0x80 => dst.map(|d| d.wrapping_neg()),
            0xd0 => None,
            _ => match (dst, src) {
                (Some(d), Some(s)) => {
                    let (d, s) = if wide {
                        (d, s)
                    } else {
                        (d as u32 as u64, s as u32 as u64)
                    };
                    let bits = if wide { 63 } else { 31 };
                    match op {
                        0x00 => Some(d.wrapping_add(s)),
                        0x10 => Some(d.wrapping_sub(s)),
                        0x20 => Some(d.wrapping_mul(s)),
                        0x30 => Some(d.checked_div(s).unwrap_or(0)),
                        0x40 => Some(d | s),
                        0x50 => Some(d & s),
                        0x60 => Some(d.wrapping_shl((s & bits) as u32)),
                        0x70 => Some(d.wrapping_shr((s & bits) as u32)),
                        0x90 => Some(if s == 0 { d } else { d % s }),
                        0xa0 => Some(d ^ s),
                        0xc0 => Some(if wide {
                            ((d as i64) >> (s & 63)) as u64
                        } else {
                            ((d as u32 as i32) >> (s & 31)) as u32 as u64
                        }),
                        _ => None,
                    }
                }
                _ => None,
            },
        }
    };
    set(st, i.dst, if wide { v } else { v.map(|v| v as u32 as u64) });
}

fn store(st: &mut State, i: &Insn) {
    let mode = i.code & 0xe0;
    let size: i32 = match i.code & 0x18 {
        0x18 => 8,
        0x00 => 4,
        0x08 => 2,
        _ => 1,
    };
    if mode == 0xc0 {
        // atomics: a fetch writes the source register (r0 for cmpxchg)
        set(st, i.src, None);
        st.regs[0] = None;
    }
    if i.dst != 10 {
        return;
    }
    let (lo, hi) = (i.off as i32, i.off as i32 + size);
    st.stack.retain(|(o, _)| {
        let (a, b) = (*o as i32, *o as i32 + 8);
        b <= lo || a >= hi
    });
    if mode == 0x60 && size == 8 {
        let v = if i.class() == 3 {
            get(st, i.src)
        } else {
            Some(i.imm as i64 as u64)
        };
        if let Some(v) = v {
            st.stack.push((i.off, v));
            st.stack.sort_unstable();
        }
    }
}

/// Whether a conditional jump is taken, when its operands are known.
fn branch(st: &State, i: &Insn, narrow: bool) -> Option<bool> {
    let a = get(st, i.dst)?;
    let b = if i.code & 0x08 != 0 {
        get(st, i.src)?
    } else if narrow {
        i.imm as u32 as u64
    } else {
        i.imm as i64 as u64
    };
    let (a, b) = if narrow {
        (a as u32 as u64, b as u32 as u64)
    } else {
        (a, b)
    };
    let (sa, sb) = if narrow {
        (a as u32 as i32 as i64, b as u32 as i32 as i64)
    } else {
        (a as i64, b as i64)
    };
    Some(match i.code & 0xf0 {
        0x10 => a == b,
        0x20 => a > b,
        0x30 => a >= b,
        0x40 => a & b != 0,
        0x50 => a != b,
        0x60 => sa > sb,
        0x70 => sa >= sb,
        0xa0 => a < b,
        0xb0 => a <= b,
        0xc0 => sa < sb,
        0xd0 => sa <= sb,
        _ => return None,
    })
}
