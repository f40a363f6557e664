//! The per-CU bits of recording that are not DWARF walking
//! (encoding-funcs-vars.md §3.3 "Propagation" and "Function-level flags",
//! §4): per-parameter location facts, their propagation onto abstract-origin
//! parameters, and a function's recording-time flags.
//!
//! The intended use by the CU encoder, per CU:
//!
//! 1. while decoding, for every formal parameter at index `i` of a
//!    subprogram: `facts[p] = param_facts(regs.expected(i), …)` (with
//!    [`super::loc::loc_reg_in_unit`] for its `DW_AT_location`);
//! 2. once the CU is decoded, for every parameter that takes its name and
//!    type from `DW_AT_abstract_origin` (no `DW_AT_type`), in
//!    functions-table order: [`propagate`] onto the origin parameter;
//! 3. per subprogram that is recorded (§4 filters): flags =
//!    [`function_flags`] | (`UNCERTAIN_PARM_LOC` from
//!    [`super::packed::uncertain_parm_loc`]), then
//!    [`super::FuncStates::push`] and the parameters (names interned now).

use super::flags;
use super::loc::ParamLoc;

/// Location facts of one parameter DIE.
pub mod fact {
    pub const HAS_LOC: u8 = 1;
    pub const OPTIMIZED: u8 = 2;
    pub const UNEXPECTED_REG: u8 = 4;
}

/// Facts of a parameter: `expected` is `RegParams::expected(index)` (`None`
/// past the register parameters: nothing is analysed, so no location is
/// recorded either), `location` the [`super::loc::loc_reg`] of its
/// `DW_AT_location` if it has one.
pub fn param_facts(expected: Option<i32>, location: Option<i32>, has_const_value: bool) -> u8 {
    let Some(expected) = expected else { return 0 };
    let p = ParamLoc::classify(location, has_const_value, expected);
    (if p.has_loc { fact::HAS_LOC } else { 0 })
        | (if p.optimized { fact::OPTIMIZED } else { 0 })
        | (if p.unexpected_reg { fact::UNEXPECTED_REG } else { 0 })
}

/// A parameter resolved through its abstract origin shares what it knows:
/// each fact set on it is set on the origin (never cleared).
pub fn propagate(facts: &mut [u8], param: usize, origin: usize) {
    let f = facts[param];
    facts[origin] |= f;
}

/// `OPTIMIZED_PARMS` if some parameter is optimized or has no location;
/// `UNEXPECTED_REG` if some parameter has an unexpected register and no
/// parameter's type is a struct (`DW_TAG_structure_type` behind `const` and
/// typedefs; asked lazily through `has_struct_param`).
pub fn function_flags(params: impl IntoIterator<Item = u8>, has_struct_param: impl FnOnce() -> bool) -> u8 {
    let mut out = 0;
    let mut unexpected = false;
    for f in params {
        if f & fact::OPTIMIZED != 0 || f & fact::HAS_LOC == 0 {
            out |= flags::OPTIMIZED_PARMS;
        }
        unexpected |= f & fact::UNEXPECTED_REG != 0;
    }
    if unexpected && !has_struct_param() {
        out |= flags::UNEXPECTED_REG;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::loc::{NO_REG, RegParams};

    #[test]
    fn facts_per_parameter() {
        let x86 = RegParams::for_machine(62);
        // rdi where rdi is expected.
        assert_eq!(param_facts(x86.expected(0), Some(0x55), false), fact::HAS_LOC);
        // b arriving in rdi (clang drop_first): unexpected.
        assert_eq!(
            param_facts(x86.expected(1), Some(0x55), false),
            fact::HAS_LOC | fact::UNEXPECTED_REG
        );
        // On the stack: optimized.
        assert_eq!(
            param_facts(x86.expected(2), Some(NO_REG), false),
            fact::HAS_LOC | fact::OPTIMIZED
        );
        // Constant value, no location: optimized.
        assert_eq!(param_facts(x86.expected(0), None, true), fact::OPTIMIZED);
        // Past the register parameters: nothing recorded, even with a location.
        assert_eq!(param_facts(x86.expected(6), Some(0x55), true), 0);
        // i386: nothing analysed at all.
        assert_eq!(param_facts(RegParams::for_machine(3).expected(0), Some(0x50), false), 0);
    }

    #[test]
    fn abstract_instance_inherits_from_concrete() {
        // Param 0, 1 of the abstract instance (no location), param 2, 3 of
        // the concrete one pointing at them.
        let mut facts = vec![0, 0, fact::HAS_LOC, fact::HAS_LOC | fact::UNEXPECTED_REG];
        propagate(&mut facts, 2, 0);
        propagate(&mut facts, 3, 1);
        assert_eq!(facts[0], fact::HAS_LOC);
        assert_eq!(facts[1], fact::HAS_LOC | fact::UNEXPECTED_REG);
        // Never cleared.
        let mut facts = vec![fact::HAS_LOC | fact::OPTIMIZED, 0];
        propagate(&mut facts, 1, 0);
        assert_eq!(facts[0], fact::HAS_LOC | fact::OPTIMIZED);
        // Without propagation the abstract instance would count as optimized.
        assert_eq!(function_flags([0u8, 0], || false), flags::OPTIMIZED_PARMS);
        assert_eq!(function_flags([fact::HAS_LOC], || false), 0);
    }

    #[test]
    fn function_level_flags() {
        let ok = fact::HAS_LOC;
        let unexp = fact::HAS_LOC | fact::UNEXPECTED_REG;
        assert_eq!(
            function_flags([ok, ok], || unreachable!("only asked with an unexpected register")),
            0
        );
        assert_eq!(function_flags([ok, unexp], || false), flags::UNEXPECTED_REG);
        // A struct parameter anywhere exempts the function.
        assert_eq!(function_flags([ok, unexp], || true), 0);
        // A parameter with no location (e.g. the 7th on x86-64) → optimized.
        assert_eq!(function_flags([ok, 0], || false), flags::OPTIMIZED_PARMS);
        assert_eq!(
            function_flags([fact::OPTIMIZED | fact::HAS_LOC, unexp], || false),
            flags::OPTIMIZED_PARMS | flags::UNEXPECTED_REG
        );
        // No parameters: nothing.
        assert_eq!(function_flags([], || false), 0);
    }
}
