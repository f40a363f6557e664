//! Parameter location analysis (encoding-funcs-vars.md §3.3): does a
//! parameter arrive in the register its ABI position says?
//!
//! The reference walks the location with libdw's `dwarf_getlocations`, which
//! returns *every* entry of a location list except base-address selections —
//! empty and tombstoned ranges included — so the entry index used by the
//! "first entry only" rule counts those too. gimli's cooked `LocListIter`
//! drops empty ranges, so this module walks the raw entries instead.
//!
//! Registers are compared as DW_OP opcodes (`DW_OP_reg5` = 0x55), as the
//! reference does; "none" is `None`.

use gimli::{
    AttributeValue, Encoding, Expression, LocationLists, Operation, RawLocListEntry, Reader, ReaderOffset,
    constants as dw,
};

const EM_SPARC: u16 = 2;
const EM_MIPS: u16 = 8;
const EM_PPC: u16 = 20;
const EM_PPC64: u16 = 21;
const EM_S390: u16 = 22;
const EM_ARM: u16 = 40;
const EM_SPARCV9: u16 = 43;
const EM_ARC: u16 = 45;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;
const EM_RISCV: u16 = 243;

const fn reg(n: u8) -> Option<u8> {
    Some(dw::DW_OP_reg0.0 + n)
}

/// The register-parameter convention of an architecture: how many leading
/// parameters are analysed and which `DW_OP_regN` each is expected in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegParams {
    count: u8,
    regs: [Option<u8>; 8],
}

impl RegParams {
    /// The table for ELF `e_machine`; architectures the reference does not
    /// know (i386, loongarch, …) get 0 analysed parameters.
    pub fn for_machine(e_machine: u16) -> RegParams {
        let none = [None; 8];
        match e_machine {
            EM_X86_64 => RegParams {
                count: 6,
                regs: [reg(5), reg(4), reg(1), reg(2), reg(8), reg(9), None, None],
            },
            EM_S390 => RegParams {
                count: 5,
                regs: [reg(2), reg(3), reg(4), reg(5), reg(6), None, None, None],
            },
            EM_AARCH64 | EM_ARM => RegParams {
                count: 8,
                regs: [reg(0), reg(1), reg(2), reg(3), reg(4), reg(5), reg(6), reg(7)],
            },
            EM_SPARC | EM_SPARCV9 => RegParams { count: 6, regs: none },
            EM_MIPS | EM_PPC | EM_PPC64 | EM_RISCV | EM_ARC => RegParams { count: 8, regs: none },
            _ => RegParams { count: 0, regs: none },
        }
    }

    /// Number of leading parameters passed in registers (N).
    pub fn count(&self) -> usize {
        self.count as usize
    }

    /// The expected register of parameter `index` (a `DW_OP_regN` opcode):
    /// `None` if the parameter is not analysed (index ≥ N), `Some(None)` if
    /// analysed without a known register.
    pub fn expected(&self, index: usize) -> Option<Option<u8>> {
        (index < self.count as usize).then(|| self.regs[index])
    }
}

/// What the analysis says about one parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParamLoc {
    /// `DW_AT_location` present (only for analysed parameters).
    pub has_loc: bool,
    pub optimized: bool,
    pub unexpected_reg: bool,
}

impl ParamLoc {
    /// The verdict for an analysed parameter, from whether it has a
    /// `DW_AT_location` (`Some(`[`loc_reg`] of it`)`: the register it names,
    /// if any) or a `DW_AT_const_value`.
    pub fn classify(location: Option<Option<u8>>, has_const_value: bool, expected: Option<u8>) -> ParamLoc {
        match location {
            Some(None) => ParamLoc {
                has_loc: true,
                optimized: true,
                unexpected_reg: false,
            },
            Some(Some(actual)) => ParamLoc {
                has_loc: true,
                optimized: false,
                unexpected_reg: expected.is_some_and(|e| actual != e),
            },
            None => ParamLoc {
                has_loc: false,
                optimized: has_const_value,
                unexpected_reg: false,
            },
        }
    }
}

/// One location expression reduced to what the rule looks at.
enum Single<R: Reader> {
    /// More or fewer than one operation (after dropping a trailing stack_value).
    Other,
    /// Exactly one operation: its opcode, and for entry_value its nested bytes.
    Op(u8, Option<R>),
}

/// Decodes `expr`; `Err` when an operation does not parse (the reference's
/// libdw then fails the whole walk).
fn single_op<R: Reader>(expr: &Expression<R>, enc: Encoding) -> gimli::Result<Single<R>> {
    let mut r = expr.0.clone();
    let mut n = 0usize;
    let mut first: Option<(u8, Option<R>)> = None;
    let mut last = 0u8;
    while !r.is_empty() {
        let opcode = r.clone().read_u8()?;
        let op = Operation::parse(&mut r, enc)?;
        n += 1;
        if n == 1 {
            let nested = match op {
                Operation::EntryValue { expression } => Some(expression),
                _ => None,
            };
            first = Some((opcode, nested));
        }
        last = opcode;
    }
    if n > 1 && last == dw::DW_OP_stack_value.0 {
        n -= 1;
    }
    Ok(match (n, first) {
        (1, Some((opcode, nested))) => Single::Op(opcode, nested),
        _ => Single::Other,
    })
}

/// Opcode of the single operation of a nested (entry_value) expression.
fn nested_single<R: Reader>(bytes: R, enc: Encoding) -> Option<u8> {
    let mut r = bytes;
    let mut n = 0;
    let mut opcode = 0;
    while !r.is_empty() {
        opcode = r.clone().read_u8().ok()?;
        Operation::parse(&mut r, enc).ok()?;
        n += 1;
    }
    (n == 1).then_some(opcode)
}

/// The walk state of the reference's `loc_reg`.
struct Walk {
    expected: Option<u8>,
    result: Option<u8>,
    k: usize,
}

impl Walk {
    fn new(expected: Option<u8>) -> Walk {
        Walk {
            expected,
            result: None,
            k: 0,
        }
    }

    /// Feeds entry `k`; `false` when the walk is over (found, or an
    /// undecodable expression, which makes libdw fail the whole walk).
    fn feed<R: Reader>(&mut self, expr: &Expression<R>, enc: Encoding) -> bool {
        let k = self.k;
        self.k += 1;
        let (opcode, nested) = match single_op(expr, enc) {
            Ok(Single::Op(opcode, nested)) => (opcode, nested),
            Ok(Single::Other) => return true,
            Err(_) => return false,
        };
        if (dw::DW_OP_reg0.0..=dw::DW_OP_reg31.0).contains(&opcode) {
            if k != 0 {
                return true;
            }
            self.result = Some(opcode);
        } else if opcode == dw::DW_OP_entry_value.0 || opcode == dw::DW_OP_GNU_entry_value.0 {
            match nested.and_then(|n| nested_single(n, enc)) {
                Some(inner) => self.result = Some(inner),
                None => return true,
            }
        } else {
            return true;
        }
        self.result != self.expected
    }
}

/// The reference's `loc_reg` over the entries of a location (one expression,
/// or a list's entries in order): the register found, if any.
///
/// A plain `DW_OP_regN` counts only as the first entry; a single-operation
/// `DW_OP_entry_value` / `DW_OP_GNU_entry_value` counts anywhere and yields
/// its nested opcode whatever it is. Either returns at once when it equals
/// `expected`; otherwise the last one seen wins.
pub fn loc_reg_exprs<R: Reader>(
    entries: impl IntoIterator<Item = gimli::Result<Expression<R>>>,
    enc: Encoding,
    expected: Option<u8>,
) -> Option<u8> {
    let mut w = Walk::new(expected);
    for expr in entries {
        match expr {
            Ok(expr) if w.feed(&expr, enc) => {}
            _ => break,
        }
    }
    w.result
}

/// Feeds `feed` the entries of a location list at `offset`, raw: every
/// entry except base-address selections counts, empty ranges included, in
/// order, until `feed` says stop or an entry does not decode.
fn list_entries<R: Reader>(
    locations: &LocationLists<R>,
    offset: gimli::LocationListsOffset<R::Offset>,
    enc: Encoding,
    feed: &mut impl FnMut(&Expression<R>) -> bool,
) {
    let Ok(mut it) = locations.raw_locations(offset, enc) else {
        return;
    };
    loop {
        let data = match it.next() {
            Ok(Some(RawLocListEntry::BaseAddress { .. } | RawLocListEntry::BaseAddressx { .. })) => continue,
            Ok(Some(
                RawLocListEntry::AddressOrOffsetPair { data, .. }
                | RawLocListEntry::OffsetPair { data, .. }
                | RawLocListEntry::StartEnd { data, .. }
                | RawLocListEntry::StartLength { data, .. }
                | RawLocListEntry::StartxEndx { data, .. }
                | RawLocListEntry::StartxLength { data, .. }
                | RawLocListEntry::DefaultLocation { data },
            )) => data,
            Ok(None) | Err(_) => break,
        };
        if !feed(&data) {
            break;
        }
    }
}

/// Feeds `feed` the entries of a `DW_AT_location` value, converted or raw:
/// an expression (exprloc or block form), or a location list
/// (`sec_offset`, `loclistx`, or DWARF 2/3 `data4`/`data8`), as libdw's
/// `dwarf_getlocations` returns them. Other forms have none (libdw fails
/// on them).
fn location_entries<R: Reader>(
    value: &AttributeValue<R>,
    locations: &LocationLists<R>,
    enc: Encoding,
    loclists_base: gimli::DebugLocListsBase<R::Offset>,
    mut feed: impl FnMut(&Expression<R>) -> bool,
) {
    let list = match value {
        AttributeValue::Exprloc(e) => {
            feed(e);
            return;
        }
        AttributeValue::Block(b) => {
            feed(&Expression(b.clone()));
            return;
        }
        AttributeValue::LocationListsRef(off) => Some(*off),
        // Unconverted values (a decoder reading `raw_value()`): a section
        // offset, or in DWARF 2/3 a data4/data8 constant, is a list offset.
        AttributeValue::SecOffset(off) => Some(gimli::LocationListsOffset(*off)),
        AttributeValue::Data4(off) if enc.version <= 3 => Some(gimli::LocationListsOffset(R::Offset::from_u32(*off))),
        AttributeValue::Data8(off) if enc.version <= 3 => {
            R::Offset::from_u64(*off).ok().map(gimli::LocationListsOffset)
        }
        AttributeValue::DebugLocListsIndex(idx) => locations.get_offset(enc, loclists_base, *idx).ok(),
        _ => None,
    };
    if let Some(off) = list {
        list_entries(locations, off, enc, &mut feed);
    }
}

/// [`loc_reg_exprs`] for a `DW_AT_location` attribute value (the forms of
/// [`location_entries`]; others give none).
pub fn loc_reg<R: Reader>(
    value: &AttributeValue<R>,
    locations: &LocationLists<R>,
    enc: Encoding,
    loclists_base: gimli::DebugLocListsBase<R::Offset>,
    expected: Option<u8>,
) -> Option<u8> {
    let mut w = Walk::new(expected);
    location_entries(value, locations, enc, loclists_base, |e| w.feed(e, enc));
    w.result
}

/// [`loc_reg`] with the unit's encoding and `DW_AT_loclists_base`.
pub fn loc_reg_in_unit<R: Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    value: &AttributeValue<R>,
    expected: Option<u8>,
) -> Option<u8> {
    loc_reg(value, &dwarf.locations, unit.encoding(), unit.loclists_base, expected)
}

// The newer reference's reading of a parameter's location (dwarves
// 5239db9 and after, `next`): every parameter's location is read, whatever
// its position, and what it says is kept raw; the verdict (optimized out,
// unexpected register) comes later per function, once the parameters'
// sizes and their concrete instances' locations are known.

/// What the newer reference records of a parameter's `DW_AT_location`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocFacts {
    /// The register the location names (a `DW_OP_regN` opcode), the first
    /// one found: the first entry's `DW_OP_regN`, or its `DW_OP_bregN ...
    /// DW_OP_stack_value` (a value computed from that register), or an
    /// entry value of one register in any entry. For a parameter of at most
    /// a register's size, or on an ABI that passes aggregates in one
    /// register.
    pub reg: Option<u8>,
    /// The same for an aggregate wider than a register where the ABI uses
    /// two: a composition of pieces names its first register in any entry,
    /// and a multi-operation expression starting with a register or a
    /// computed value no longer counts.
    pub reg_wide: Option<u8>,
    /// The first entry is a frame-base offset (`DW_OP_fbreg`): on the stack.
    pub stack: bool,
    /// The first entry is a constant (`DW_OP_litN`, `DW_OP_constu`,
    /// `DW_OP_consts`).
    pub constant: bool,
    /// For a wide aggregate: the byte offsets (bit n = offset n, below 64)
    /// at which a piece of any entry starts in the first argument register
    /// and, past the address size, in the second (offset from it).
    pub pieces: [u64; 2],
}

fn is_reg(op: u8) -> bool {
    (dw::DW_OP_reg0.0..=dw::DW_OP_reg31.0).contains(&op)
}

fn is_breg(op: u8) -> bool {
    (dw::DW_OP_breg0.0..=dw::DW_OP_breg31.0).contains(&op)
}

fn is_constant(op: u8) -> bool {
    (dw::DW_OP_lit0.0..=dw::DW_OP_lit31.0).contains(&op) || op == dw::DW_OP_constu.0 || op == dw::DW_OP_consts.0
}

/// The register a `DW_OP_bregN` reads, as a `DW_OP_regN` opcode.
fn breg_as_reg(op: u8) -> u8 {
    op - dw::DW_OP_breg0.0 + dw::DW_OP_reg0.0
}

fn first_wins(slot: &mut Option<u8>, reg: u8) {
    slot.get_or_insert(reg);
}

impl LocFacts {
    /// Feeds entry `k` of the location (every entry counts, as for
    /// [`loc_reg`]); `false` when an operation does not parse, which ends
    /// the walk (libdw fails it).
    fn feed<R: Reader>(&mut self, k: usize, expr: &Expression<R>, enc: Encoding) -> bool {
        // (opcode, an entry value's expression, a piece's size in bytes)
        let mut ops: smallvec::SmallVec<[(u8, Option<R>, u64); 4]> = smallvec::SmallVec::new();
        let mut r = expr.0.clone();
        while !r.is_empty() {
            let Ok(opcode) = r.clone().read_u8() else { return false };
            let Ok(op) = Operation::parse(&mut r, enc) else {
                return false;
            };
            let (nested, piece) = match op {
                Operation::EntryValue { expression } => (Some(expression), 0),
                Operation::Piece { size_in_bits, .. } => (None, size_in_bits / 8),
                _ => (None, 0),
            };
            ops.push((opcode, nested, piece));
        }
        let Some(&(last, _, _)) = ops.last() else { return true };
        let computed = last == dw::DW_OP_stack_value.0;
        let single = ops.len() == 1 || (ops.len() == 2 && computed);
        let first = ops[0].0;
        if !single {
            if is_constant(first) {
                self.constant |= k == 0;
                return true;
            }
            // a register, or a value computed from one, if the parameter
            // fits one register
            if k == 0 {
                if is_reg(first) {
                    first_wins(&mut self.reg, first);
                } else if is_breg(first) && ops[1..].iter().any(|o| o.0 == dw::DW_OP_stack_value.0) {
                    first_wins(&mut self.reg, breg_as_reg(first));
                }
            }
            // the first register of the pieces, in any entry, if wider, and
            // where each piece but a leading one starts
            if let Some(&(reg, _, _)) = ops.iter().find(|o| is_reg(o.0)) {
                first_wins(&mut self.reg_wide, reg);
            }
            let addr = u64::from(enc.address_size);
            let mut off = 0u64;
            for (i, (op, size)) in ops.iter().map(|o| (o.0, o.2)).enumerate() {
                if op != dw::DW_OP_piece.0 {
                    continue;
                }
                if i == 0 {
                    off = size;
                    continue;
                }
                let (half, at) = if off < addr { (0, off) } else { (1, off - addr) };
                if at < 64 {
                    self.pieces[half] |= 1 << at;
                }
                off = off.wrapping_add(size);
            }
            return true;
        }
        let found = if is_reg(first) {
            (k == 0).then_some(first)
        } else if is_breg(first) {
            (k == 0 && computed).then(|| breg_as_reg(first))
        } else if first == dw::DW_OP_fbreg.0 {
            self.stack |= k == 0;
            None
        } else if is_constant(first) {
            self.constant |= k == 0;
            None
        } else if first == dw::DW_OP_entry_value.0 || first == dw::DW_OP_GNU_entry_value.0 {
            ops[0]
                .1
                .clone()
                .and_then(|n| nested_single(n, enc))
                .filter(|&op| is_reg(op))
        } else {
            None
        };
        if let Some(reg) = found {
            first_wins(&mut self.reg, reg);
            first_wins(&mut self.reg_wide, reg);
        }
        true
    }

    /// The facts of a location: one expression or a list's entries, in
    /// order, ending at an operation that does not parse.
    pub fn of_exprs<R: Reader>(entries: impl IntoIterator<Item = gimli::Result<Expression<R>>>, enc: Encoding) -> Self {
        let mut f = LocFacts::default();
        for (k, expr) in entries.into_iter().enumerate() {
            match expr {
                Ok(expr) if f.feed(k, &expr, enc) => {}
                _ => break,
            }
        }
        f
    }

    /// The facts of a `DW_AT_location` value, in the forms [`loc_reg`]
    /// takes (others: nothing known, as libdw fails on them).
    pub fn of_value<R: Reader>(
        value: &AttributeValue<R>,
        locations: &LocationLists<R>,
        enc: Encoding,
        loclists_base: gimli::DebugLocListsBase<R::Offset>,
    ) -> Self {
        let mut f = LocFacts::default();
        let mut k = 0;
        location_entries(value, locations, enc, loclists_base, |e| {
            k += 1;
            f.feed(k - 1, e, enc)
        });
        f
    }
}

// Per-parameter facts (encoding-funcs-vars.md §3.3 "Propagation"): what
// the recording rules read of a parameter's location.

/// Location facts of one parameter DIE.
pub mod fact {
    pub const HAS_LOC: u8 = 1;
    pub const OPTIMIZED: u8 = 2;
    pub const UNEXPECTED_REG: u8 = 4;
}

/// Facts of a parameter: `expected` is `RegParams::expected(index)` (`None`
/// past the register parameters: nothing is analysed, so no location is
/// recorded either), `location` the [`loc_reg`] of its
/// `DW_AT_location` if it has one.
pub fn param_facts(expected: Option<Option<u8>>, location: Option<Option<u8>>, has_const_value: bool) -> u8 {
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

#[cfg(test)]
mod fact_tests {
    use super::*;

    #[test]
    fn facts_per_parameter() {
        let x86 = RegParams::for_machine(62);
        // rdi where rdi is expected.
        assert_eq!(param_facts(x86.expected(0), Some(Some(0x55)), false), fact::HAS_LOC);
        // b arriving in rdi (clang drop_first): unexpected.
        assert_eq!(
            param_facts(x86.expected(1), Some(Some(0x55)), false),
            fact::HAS_LOC | fact::UNEXPECTED_REG
        );
        // On the stack: optimized.
        assert_eq!(
            param_facts(x86.expected(2), Some(None), false),
            fact::HAS_LOC | fact::OPTIMIZED
        );
        // Constant value, no location: optimized.
        assert_eq!(param_facts(x86.expected(0), None, true), fact::OPTIMIZED);
        // Past the register parameters: nothing recorded, even with a location.
        assert_eq!(param_facts(x86.expected(6), Some(Some(0x55)), true), 0);
        // i386: nothing analysed at all.
        assert_eq!(
            param_facts(RegParams::for_machine(3).expected(0), Some(Some(0x50)), false),
            0
        );
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::{EndianSlice, LittleEndian};

    type R<'a> = EndianSlice<'a, LittleEndian>;

    fn enc(version: u16) -> Encoding {
        Encoding {
            format: gimli::Format::Dwarf32,
            version,
            address_size: 8,
        }
    }

    fn e(b: &[u8]) -> gimli::Result<Expression<R<'_>>> {
        Ok(Expression(EndianSlice::new(b, LittleEndian)))
    }

    const REG5: u8 = 0x55; // rdi
    const REG4: u8 = 0x54; // rsi
    const STACK_VALUE: u8 = 0x9f;
    const ENTRY_VALUE: u8 = 0xa3;
    const GNU_ENTRY_VALUE: u8 = 0xf3;
    const FBREG: u8 = 0x91;
    const BREG7: u8 = 0x77;
    const REGX: u8 = 0x90;
    const PIECE: u8 = 0x93;

    #[test]
    fn register_table() {
        let x = RegParams::for_machine(62);
        assert_eq!(x.count(), 6);
        assert_eq!(
            (0..7).map(|i| x.expected(i)).collect::<Vec<_>>(),
            vec![
                Some(Some(0x55)),
                Some(Some(0x54)),
                Some(Some(0x51)),
                Some(Some(0x52)),
                Some(Some(0x58)),
                Some(Some(0x59)),
                None
            ]
        );
        let s = RegParams::for_machine(22);
        assert_eq!(
            (s.count(), s.expected(0), s.expected(4), s.expected(5)),
            (5, Some(Some(0x52)), Some(Some(0x56)), None)
        );
        for m in [183u16, 40] {
            let a = RegParams::for_machine(m);
            assert_eq!(
                (a.count(), a.expected(0), a.expected(7)),
                (8, Some(Some(0x50)), Some(Some(0x57)))
            );
        }
        for m in [2u16, 43] {
            let a = RegParams::for_machine(m);
            assert_eq!((a.count(), a.expected(5), a.expected(6)), (6, Some(None), None));
        }
        for m in [8u16, 20, 21, 243, 45] {
            let a = RegParams::for_machine(m);
            assert_eq!((a.count(), a.expected(7)), (8, Some(None)));
        }
        for m in [3u16, 258, 0] {
            assert_eq!(RegParams::for_machine(m).count(), 0);
        }
    }

    /// Per ABI: parameter i in its expected register passes, in the register of
    /// parameter i+1 (or any other) is flagged; ABIs without a known register
    /// accept any register; unknown machines analyse nothing.
    #[test]
    fn wrong_register_flagged_per_abi() {
        // (e_machine, name, DW_OP_reg numbers of the argument registers)
        let abis: [(u16, &str, &[u8]); 4] = [
            (62, "x86-64 rdi rsi rdx rcx r8 r9", &[5, 4, 1, 2, 8, 9]),
            (22, "s390 r2..r6", &[2, 3, 4, 5, 6]),
            (183, "aarch64 x0..x7", &[0, 1, 2, 3, 4, 5, 6, 7]),
            (40, "arm r0..r7", &[0, 1, 2, 3, 4, 5, 6, 7]),
        ];
        for (m, name, regs) in abis {
            let t = RegParams::for_machine(m);
            assert_eq!(t.count(), regs.len(), "{name}");
            for (i, &r) in regs.iter().enumerate() {
                let want = t.expected(i).unwrap();
                assert_eq!(want, reg(r), "{name} param {i}");
                // Through the expression walk, as the encoder sees it.
                let right = [0x50 + r];
                let wrong = [0x50 + regs[(i + 1) % regs.len()]];
                let got = loc_reg_exprs([e(&right)], enc(5), want);
                assert!(
                    !ParamLoc::classify(Some(got), false, want).unexpected_reg,
                    "{name} param {i} accepted"
                );
                let got = loc_reg_exprs([e(&wrong)], enc(5), want);
                let v = ParamLoc::classify(Some(got), false, want);
                assert!(
                    v.unexpected_reg && !v.optimized,
                    "{name} param {i} in the wrong register flagged"
                );
                // Entry value of the right register in a later entry rescues it.
                let ev = [ENTRY_VALUE, 1, 0x50 + r, STACK_VALUE];
                let got = loc_reg_exprs([e(&wrong), e(&ev)], enc(5), want);
                assert!(
                    !ParamLoc::classify(Some(got), false, want).unexpected_reg,
                    "{name} param {i} entry value"
                );
            }
            // The first stack-passed parameter is not analysed.
            assert_eq!(t.expected(regs.len()), None, "{name}");
        }
        // sparc, mips, ppc, ppc64, riscv, arc: counted but no expected register,
        // so no register is ever wrong.
        for (m, n) in [(2u16, 6), (43, 6), (8, 8), (20, 8), (21, 8), (243, 8), (45, 8)] {
            let t = RegParams::for_machine(m);
            assert_eq!(t.count(), n, "e_machine {m}");
            for i in 0..n {
                let want = t.expected(i).unwrap();
                let got = loc_reg_exprs([e(&[0x53])], enc(5), want);
                assert!(
                    !ParamLoc::classify(Some(got), false, want).unexpected_reg,
                    "e_machine {m} param {i}"
                );
            }
        }
        // i386 (3) and others: nothing analysed.
        assert_eq!(RegParams::for_machine(3).expected(0), None);
    }

    #[test]
    fn single_register_expression() {
        assert_eq!(loc_reg_exprs([e(&[REG5])], enc(5), Some(0x55)), Some(0x55));
        // Another register: returned, the caller flags unexpected_reg.
        assert_eq!(loc_reg_exprs([e(&[REG4])], enc(5), Some(0x55)), Some(0x54));
        // A trailing stack_value is ignored…
        assert_eq!(loc_reg_exprs([e(&[REG5, STACK_VALUE])], enc(5), Some(0x55)), Some(0x55));
        // … but not a lone one, and two real operations never match.
        assert_eq!(loc_reg_exprs([e(&[STACK_VALUE])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[REG5, REG4])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[])], enc(5), Some(0x55)), None);
    }

    #[test]
    fn stack_and_other_forms_count_as_optimized() {
        assert_eq!(loc_reg_exprs([e(&[FBREG, 0x6c])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[BREG7, 0x08])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[REGX, 0x05])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[REG5, PIECE, 0x04])], enc(5), Some(0x55)), None);
        let p = ParamLoc::classify(Some(None), false, Some(0x55));
        assert!(p.has_loc && p.optimized && !p.unexpected_reg);
    }

    #[test]
    fn plain_register_only_in_first_entry() {
        // Entry 1 holds the expected register, entry 0 does not: only entry 0 counts.
        assert_eq!(loc_reg_exprs([e(&[FBREG, 0x6c]), e(&[REG5])], enc(5), Some(0x55)), None);
        assert_eq!(loc_reg_exprs([e(&[REG4]), e(&[REG5])], enc(5), Some(0x55)), Some(0x54));
        assert_eq!(loc_reg_exprs([e(&[REG5]), e(&[REG4])], enc(5), Some(0x55)), Some(0x55));
    }

    /// The next reference's reading: first register wins, any entry for
    /// an entry value or a piece's register, the first entry only for the
    /// rest; pieces count only for wide aggregates.
    #[test]
    fn next_reference_location_facts() {
        let f = |entries: &[&[u8]]| LocFacts::of_exprs(entries.iter().map(|b| e(b)), enc(5));
        // [reg4] then [reg5]: the first entry's register only
        assert_eq!(f(&[&[REG4], &[REG5]]).reg, Some(REG4));
        assert_eq!(f(&[&[FBREG, 0x10], &[REG5]]).reg, None);
        assert!(f(&[&[FBREG, 0x10], &[REG5]]).stack);
        // an entry value in a later entry still names the register
        let later = f(&[&[FBREG, 0x10], &[ENTRY_VALUE, 1, REG5, STACK_VALUE]]);
        assert_eq!((later.reg, later.reg_wide), (Some(REG5), Some(REG5)));
        // a value computed from a register: breg + stack_value
        assert_eq!(f(&[&[BREG7, 0x08, STACK_VALUE]]).reg, Some(0x57));
        assert_eq!(f(&[&[BREG7, 0x08]]).reg, None, "an address, not a value");
        // a constant (DW_OP_lit3; DW_OP_constu 9, stack_value)
        assert!(f(&[&[0x33]]).constant);
        assert!(f(&[&[0x10, 9, STACK_VALUE, PIECE, 8]]).constant);
        // pieces: [reg5 piece 8, reg4 piece 8]: the small reading takes the
        // first op's register of the first entry, the wide one the first
        // register of any entry's pieces
        let pieces = f(&[&[FBREG, 0], &[REG5, PIECE, 8, REG4, PIECE, 8]]);
        assert_eq!((pieces.reg, pieces.reg_wide), (None, Some(REG5)));
        let first = f(&[&[REG5, PIECE, 8, REG4, PIECE, 8]]);
        assert_eq!((first.reg, first.reg_wide), (Some(REG5), Some(REG5)));
        // an operation that does not parse ends the walk
        assert_eq!(f(&[&[0xff], &[REG5]]).reg, None);
    }

    #[test]
    fn entry_value_counts_anywhere_and_nests_any_op() {
        // reg4 first, then entry_value(reg5): found the expected one later.
        let ev5 = [ENTRY_VALUE, 1, REG5, STACK_VALUE];
        assert_eq!(loc_reg_exprs([e(&[REG4]), e(&ev5)], enc(5), Some(0x55)), Some(0x55));
        let gnu = [GNU_ENTRY_VALUE, 1, REG4, STACK_VALUE];
        assert_eq!(loc_reg_exprs([e(&gnu)], enc(4), Some(0x55)), Some(0x54));
        // The nested op need not be a register: its opcode is the result.
        let ev_breg = [ENTRY_VALUE, 2, BREG7, 0x00, STACK_VALUE];
        assert_eq!(loc_reg_exprs([e(&ev_breg)], enc(5), Some(0x55)), Some(BREG7));
        // Nested expressions of two operations are ignored.
        let ev2 = [ENTRY_VALUE, 2, REG5, REG4, STACK_VALUE];
        assert_eq!(loc_reg_exprs([e(&ev2)], enc(5), Some(0x55)), None);
        // The last seen wins when none matches.
        assert_eq!(
            loc_reg_exprs([e(&[REG4]), e(&gnu), e(&[ENTRY_VALUE, 1, 0x51])], enc(5), Some(0x55)),
            Some(0x51)
        );
    }

    #[test]
    fn undecodable_operation_stops_the_walk() {
        // 0x01 is not an opcode: the walk ends with what it had.
        assert_eq!(
            loc_reg_exprs([e(&[REG4]), e(&[0x01]), e(&[ENTRY_VALUE, 1, REG5])], enc(5), Some(0x55)),
            Some(0x54)
        );
    }

    #[test]
    fn classify() {
        assert_eq!(
            ParamLoc::classify(Some(Some(0x55)), false, Some(0x55)),
            ParamLoc {
                has_loc: true,
                ..Default::default()
            }
        );
        assert_eq!(
            ParamLoc::classify(Some(Some(0x54)), false, Some(0x55)),
            ParamLoc {
                has_loc: true,
                optimized: false,
                unexpected_reg: true
            }
        );
        // No expectation (sparc, mips, …): any register is fine.
        assert_eq!(
            ParamLoc::classify(Some(Some(0x54)), false, None),
            ParamLoc {
                has_loc: true,
                ..Default::default()
            }
        );
        assert_eq!(
            ParamLoc::classify(None, true, Some(0x55)),
            ParamLoc {
                has_loc: false,
                optimized: true,
                unexpected_reg: false
            }
        );
        assert_eq!(ParamLoc::classify(None, false, Some(0x55)), ParamLoc::default());
    }

    fn lists<'a>(loc: &'a [u8], loclists: &'a [u8]) -> LocationLists<R<'a>> {
        LocationLists::new(
            gimli::DebugLoc::new(loc, LittleEndian),
            gimli::DebugLocLists::new(loclists, LittleEndian),
        )
    }

    fn le64(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    /// A DWARF 4 `.debug_loc` list: (begin, end, expr) entries, then 0,0.
    fn dwarf4_list(entries: &[(u64, u64, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        for (b, en, x) in entries {
            v.extend_from_slice(&le64(*b));
            v.extend_from_slice(&le64(*en));
            v.extend_from_slice(&(x.len() as u16).to_le_bytes());
            v.extend_from_slice(x);
        }
        v.extend_from_slice(&[0; 16]);
        v
    }

    #[test]
    fn dwarf4_list_counts_empty_ranges_and_skips_base_selection() {
        // Base selection, then an *empty* range holding rdi, then rsi: libdw
        // returns the empty range as entry 0, so rdi is found.
        let mut loc = Vec::new();
        loc.extend_from_slice(&le64(u64::MAX));
        loc.extend_from_slice(&le64(0x1000));
        loc.extend(dwarf4_list(&[(0x10, 0x10, &[REG5]), (0x10, 0x20, &[REG4])]));
        let l = lists(&loc, &[]);
        let v = AttributeValue::LocationListsRef(gimli::LocationListsOffset(0));
        assert_eq!(
            loc_reg(&v, &l, enc(4), gimli::DebugLocListsBase(0), Some(0x55)),
            Some(0x55)
        );
        // With the registers swapped the first entry is rsi → unexpected.
        let loc = dwarf4_list(&[(0x10, 0x10, &[REG4]), (0x10, 0x20, &[REG5])]);
        let l = lists(&loc, &[]);
        assert_eq!(
            loc_reg(&v, &l, enc(4), gimli::DebugLocListsBase(0), Some(0x55)),
            Some(0x54)
        );
    }

    #[test]
    fn dwarf5_loclist_by_offset_and_index() {
        // DW_LLE_base_addressx 0; offset_pair 0..4 [reg4]; offset_pair 4..8
        // [entry_value(reg5) stack_value]; end.
        let mut body = vec![0x01, 0x00];
        body.extend_from_slice(&[0x04, 0x00, 0x04, 0x01, REG4]);
        body.extend_from_slice(&[0x04, 0x04, 0x08, 0x04, ENTRY_VALUE, 0x01, REG5, STACK_VALUE]);
        body.push(0x00);
        // Header-less layout: an offset table of one entry at base 0x10.
        let mut sec = vec![0u8; 0x10];
        sec.extend_from_slice(&4u32.to_le_bytes());
        sec.extend(body);
        let l = lists(&[], &sec);
        let by_off = AttributeValue::LocationListsRef(gimli::LocationListsOffset(0x14));
        assert_eq!(
            loc_reg(&by_off, &l, enc(5), gimli::DebugLocListsBase(0), Some(0x55)),
            Some(0x55)
        );
        let by_idx = AttributeValue::DebugLocListsIndex(gimli::DebugLocListsIndex(0));
        assert_eq!(
            loc_reg(&by_idx, &l, enc(5), gimli::DebugLocListsBase(0x10), Some(0x55)),
            Some(0x55)
        );
        // Expecting rsi: entry 0 matches immediately.
        assert_eq!(
            loc_reg(&by_off, &l, enc(5), gimli::DebugLocListsBase(0), Some(0x54)),
            Some(0x54)
        );
        // A default_location entry counts as an entry.
        let sec2 = [0x05, 0x01, REG5, 0x00];
        let l2 = lists(&[], &sec2);
        let at0 = AttributeValue::LocationListsRef(gimli::LocationListsOffset(0));
        assert_eq!(
            loc_reg(&at0, &l2, enc(5), gimli::DebugLocListsBase(0), Some(0x55)),
            Some(0x55)
        );
    }

    #[test]
    fn exprloc_and_other_forms() {
        let l = lists(&[], &[]);
        let x = [REG5];
        let v = AttributeValue::Exprloc(Expression(EndianSlice::new(&x[..], LittleEndian)));
        assert_eq!(
            loc_reg(&v, &l, enc(5), gimli::DebugLocListsBase(0), Some(0x55)),
            Some(0x55)
        );
        let b = AttributeValue::Block(EndianSlice::new(&x[..], LittleEndian));
        assert_eq!(
            loc_reg(&b, &l, enc(3), gimli::DebugLocListsBase(0), Some(0x54)),
            Some(0x55)
        );
        assert_eq!(
            loc_reg(
                &AttributeValue::<R<'_>>::Udata(3),
                &l,
                enc(5),
                gimli::DebugLocListsBase(0),
                Some(0x55)
            ),
            None
        );
        // Raw forms of a list offset.
        let loc = dwarf4_list(&[(0x10, 0x20, &[REG4])]);
        let l4 = lists(&loc, &[]);
        assert_eq!(
            loc_reg(
                &AttributeValue::SecOffset(0),
                &l4,
                enc(4),
                gimli::DebugLocListsBase(0),
                Some(0x55)
            ),
            Some(0x54)
        );
        assert_eq!(
            loc_reg(
                &AttributeValue::Data4(0),
                &l4,
                enc(3),
                gimli::DebugLocListsBase(0),
                Some(0x55)
            ),
            Some(0x54)
        );
        assert_eq!(
            loc_reg(
                &AttributeValue::Data4(0),
                &l4,
                enc(4),
                gimli::DebugLocListsBase(0),
                Some(0x55)
            ),
            None
        );
        // A list offset past the section is a decode error: nothing found.
        let bad = AttributeValue::LocationListsRef(gimli::LocationListsOffset(64));
        assert_eq!(loc_reg(&bad, &l, enc(5), gimli::DebugLocListsBase(0), Some(0x55)), None);
    }
}
