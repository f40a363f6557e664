//! The next reference's parameter analysis (dwarves 5239db9, e962904,
//! dd77520, 109e5e4): which of a function's parameters are optimized out
//! or arrive in another register than the ABI's.
//!
//! v1.31 judged each parameter alone, by its position, while decoding
//! ([`crate::dwarf::loc::param_facts`]). The newer encoder keeps what each
//! location says ([`LocFacts`]), lets concrete instances share it with
//! their abstract origins, and then walks each function's parameters in
//! order, counting the argument registers they take: an aggregate wider
//! than a register takes two where the ABI passes it so (all but s390), one
//! too wide for two goes to memory. Clang's functions are judged only by
//! whether each parameter's register lies in its window, unless clang marked
//! the signature as changed (`DW_CC_nocall`).

use crate::dwarf::loc::{LocFacts, RegParams};

/// What the analysis reads of one formal parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ParamIn {
    /// It has a DW_AT_location, or a concrete instance of it has.
    pub has_loc: bool,
    /// It has a DW_AT_const_value, or a concrete instance of it has.
    pub const_value: bool,
    pub loc: LocFacts,
    /// Its type's size (`u16`, as the reference keeps it).
    pub size: u16,
    /// The one member of its struct type its pieces hold (an index into
    /// the CU's members), found from its own location.
    pub member: Option<u32>,
}

impl ParamIn {
    /// A concrete instance's parameter shares what it knows with its
    /// abstract origin: flags are added, a known register replaces the
    /// origin's (the last instance to know one wins).
    pub fn share_into(&self, origin: &mut ParamIn) {
        origin.has_loc |= self.has_loc;
        origin.const_value |= self.const_value;
        origin.loc.constant |= self.loc.constant;
        origin.loc.stack |= self.loc.stack;
        if self.loc.reg.is_some() {
            origin.loc.reg = self.loc.reg;
        }
        if self.loc.reg_wide.is_some() {
            origin.loc.reg_wide = self.loc.reg_wide;
        }
        if self.size != 0 {
            origin.size = self.size;
        }
        origin.loc.pieces[0] |= self.loc.pieces[0];
        origin.loc.pieces[1] |= self.loc.pieces[1];
        if origin.member.is_none() {
            origin.member = self.member;
        }
    }
}

/// The argument-passing convention the analysis assumes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Abi {
    pub regs: RegParams,
    pub addr_size: u16,
    /// An aggregate wider than a register is passed in two (all but s390).
    pub two_regs: bool,
}

const EM_S390: u16 = 22;

impl Abi {
    pub fn new(e_machine: u16, addr_size: u8) -> Abi {
        Abi {
            regs: RegParams::for_machine(e_machine),
            addr_size: addr_size as u16,
            two_regs: e_machine != EM_S390,
        }
    }

    /// How many argument registers a parameter of `size` bytes takes.
    fn slots(&self, size: u16) -> usize {
        if !self.two_regs || size <= self.addr_size {
            1
        } else {
            size.div_ceil(self.addr_size).max(1) as usize
        }
    }

    /// Too large for the argument registers: passed in memory.
    fn in_memory(&self, size: u16) -> bool {
        size > if self.two_regs {
            2 * self.addr_size
        } else {
            self.addr_size
        }
    }

    /// The register the location names, read as the parameter's size says.
    fn reg(&self, p: &ParamIn) -> Option<u8> {
        if p.size <= self.addr_size || !self.two_regs {
            p.loc.reg
        } else {
            p.loc.reg_wide
        }
    }

    /// Argument register `idx`: `None` past the argument registers,
    /// `Some(None)` where the reference knows none, else its `DW_OP_regN`
    /// opcode.
    fn expected(&self, idx: usize) -> Option<Option<u8>> {
        self.regs.expected(idx)
    }

    /// The pieces the location holds, for a wide aggregate (none else).
    pub fn pieces(&self, p: &ParamIn) -> [u64; 2] {
        if p.size > self.addr_size && self.two_regs {
            p.loc.pieces
        } else {
            [0, 0]
        }
    }

    /// The byte offset of the one member a wide aggregate's pieces hold:
    /// one piece in one of the two registers.
    pub fn single_piece(&self, p: &ParamIn) -> Option<u64> {
        match self.pieces(p) {
            [f, 0] if f.count_ones() == 1 => Some(u64::from(f.trailing_zeros())),
            [0, s] if s.count_ones() == 1 => Some(u64::from(self.addr_size) + u64::from(s.trailing_zeros())),
            _ => None,
        }
    }

    /// Whether the parameter after one that starts at register `reg_idx`
    /// and takes `slots` arrives right after it.
    fn next_follows(&self, next: Option<&ParamIn>, reg_idx: usize, slots: usize) -> bool {
        let Some(reg) = next.and_then(|n| self.reg(n)) else {
            return false;
        };
        let at = reg_idx + slots;
        at < self.regs.count() && self.expected(at) == Some(Some(reg))
    }
}

/// The analysis' verdict on one parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Verdict {
    pub optimized: bool,
    pub unexpected_reg: bool,
    /// (true signatures) The member its pieces hold no longer names it:
    /// the whole aggregate is passed after all.
    pub member_dropped: bool,
    /// (true signatures) It is passed as that member: its type is the
    /// member's.
    pub as_member: bool,
}

/// The verdicts on a function's parameters, in order. `clang`: its unit's
/// producer is clang; `changed`: clang marked the signature as changed;
/// `true_sig`: the true signature is wanted (and `changed`), which reads
/// constants, stack slots, missing locations and pieces as the compiled
/// signature's.
pub(super) fn analyse(params: &[ParamIn], abi: &Abi, clang: bool, changed: bool, true_sig: bool) -> Vec<Verdict> {
    let mut out = vec![Verdict::default(); params.len()];
    let nregs = abi.regs.count();
    let mut reg_idx = 0usize;
    if clang && !changed {
        // Only whether each register lies in the parameter's window.
        for (p, v) in params.iter().zip(out.iter_mut()) {
            if abi.in_memory(p.size) {
                continue;
            }
            if reg_idx >= nregs {
                break;
            }
            let slots = abi.slots(p.size);
            if let Some(reg) = abi.reg(p) {
                let in_window = (reg_idx..(reg_idx + slots).min(nregs)).any(|i| abi.expected(i) == Some(Some(reg)));
                v.unexpected_reg = !in_window;
            }
            reg_idx += slots;
        }
        return out;
    }
    for (k, p) in params.iter().enumerate() {
        let next = params.get(k + 1);
        let v = &mut out[k];
        let slots = abi.slots(p.size);
        let regs_left = reg_idx < nregs;
        // registers taken, if the parameter takes its own
        let mut taken = Some(if abi.in_memory(p.size) { 1 } else { slots });
        if p.has_loc {
            if true_sig && p.loc.constant {
                v.optimized = true;
                taken = None;
            } else if !regs_left {
                taken = None;
            } else if true_sig && p.loc.stack {
                if abi.in_memory(p.size) {
                    taken = None;
                } else {
                    v.unexpected_reg = true;
                }
            } else {
                match abi.reg(p) {
                    None if true_sig => v.unexpected_reg = true,
                    None => v.optimized = true,
                    Some(reg) => {
                        let expected = abi.expected(reg_idx).flatten();
                        if expected.is_some_and(|e| e != reg) {
                            v.unexpected_reg = true;
                        } else if true_sig && abi.pieces(p) != [0, 0] {
                            let [first, second] = abi.pieces(p);
                            if first != 0 && second != 0 {
                                // the whole aggregate
                                taken = Some(slots);
                            } else if abi.next_follows(next, reg_idx, slots) {
                                v.member_dropped = true;
                                taken = Some(slots);
                            } else if p.member.is_some() {
                                // one member, in one register
                                v.as_member = true;
                                taken = Some(1);
                            }
                        }
                    }
                }
            }
        } else if p.const_value && !clang {
            v.optimized = true;
        } else if true_sig {
            if regs_left && abi.next_follows(next, reg_idx, slots) {
                taken = Some(slots);
            } else {
                v.optimized = true;
                taken = None;
            }
        }
        reg_idx += taken.unwrap_or(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: u16 = 62;
    const RDI: u8 = 0x55;
    const RSI: u8 = 0x54;
    const RDX: u8 = 0x51;

    fn at(reg: u8, size: u16) -> ParamIn {
        ParamIn {
            has_loc: true,
            loc: LocFacts {
                reg: Some(reg),
                reg_wide: Some(reg),
                ..LocFacts::default()
            },
            size,
            ..ParamIn::default()
        }
    }

    fn verdicts(v: &[Verdict]) -> Vec<(bool, bool)> {
        v.iter().map(|v| (v.optimized, v.unexpected_reg)).collect()
    }

    #[test]
    fn a_wide_aggregate_takes_two_registers() {
        let abi = Abi::new(X86_64, 8);
        // f(__int128 a, long b): a in rdi:rsi, b in rdx
        let ps = [at(RDI, 16), at(RDX, 8)];
        assert_eq!(verdicts(&analyse(&ps, &abi, false, false, false)), [(false, false); 2]);
        // on s390 the same sizes take one register each: b is unexpected
        let s390 = Abi::new(EM_S390, 8);
        let ps = [at(0x52, 16), at(0x54, 8)];
        assert_eq!(
            verdicts(&analyse(&ps, &s390, false, false, false)),
            [(false, false), (false, true)]
        );
    }

    #[test]
    fn no_register_is_optimized_and_a_constant_too_for_gcc() {
        let abi = Abi::new(X86_64, 8);
        let stack = ParamIn {
            has_loc: true,
            loc: LocFacts {
                stack: true,
                ..LocFacts::default()
            },
            size: 8,
            ..ParamIn::default()
        };
        let constant = ParamIn {
            const_value: true,
            size: 4,
            ..ParamIn::default()
        };
        let ps = [stack, constant, at(RDX, 8)];
        assert_eq!(
            verdicts(&analyse(&ps, &abi, false, false, false)),
            [(true, false), (true, false), (false, false)]
        );
        // clang: a constant is not judged, and the window check only
        // compares registers it knows
        assert_eq!(
            verdicts(&analyse(&ps, &abi, true, false, false)),
            [(false, false), (false, false), (false, false)]
        );
    }

    #[test]
    fn clang_checks_windows_unless_the_signature_changed() {
        let abi = Abi::new(X86_64, 8);
        // first parameter dropped by the compiler: b arrives in rdi
        let ps = [
            ParamIn {
                size: 4,
                ..ParamIn::default()
            },
            at(RDI, 4),
        ];
        assert_eq!(
            verdicts(&analyse(&ps, &abi, true, false, false)),
            [(false, false), (false, true)]
        );
        // marked DW_CC_nocall: judged as gcc's, the missing location is
        // no verdict (it counts as optimized later) and b is unexpected
        assert_eq!(
            verdicts(&analyse(&ps, &abi, true, true, false)),
            [(false, false), (false, true)]
        );
        let ok = [at(RDI, 8), at(RSI, 8)];
        assert_eq!(verdicts(&analyse(&ok, &abi, true, false, false)), [(false, false); 2]);
    }

    #[test]
    fn sharing_adds_flags_and_replaces_registers() {
        let mut origin = ParamIn {
            size: 8,
            ..ParamIn::default()
        };
        at(RDI, 8).share_into(&mut origin);
        at(RSI, 8).share_into(&mut origin);
        assert!(origin.has_loc);
        assert_eq!(origin.loc.reg, Some(RSI));
        ParamIn::default().share_into(&mut origin);
        assert_eq!(origin.loc.reg, Some(RSI), "an instance without a register leaves it");
    }
}
