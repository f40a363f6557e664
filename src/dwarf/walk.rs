//! The walk over one unit's DIEs: a [`Walker`] owns the unit being built,
//! the scratch columns of the frames still open and their stack, and has a
//! method per role a DIE plays in its parent's context (see [`classify`]).
//!
//! A frame owns the tail of each scratch column from where it started until
//! it ends; `finish` then moves that tail into the unit's columns, so the
//! children of a container end up contiguous even when containers nest.

use gimli::{AttributeValue, DwTag, Section, constants as dw};

use super::attrs::{Attrs, DieRef, udata};
use super::dies::{self, Dies};
use super::ids::{DieOffset, IdxRange, UnitOff};
use super::{
    Annot, Cu, DW_AT_GNU_ANNOTATION, DW_TAG_GNU_ANNOTATION, DW_TAG_LLVM_ANNOTATION, DecodeError, DecodeErrorKind,
    Decoder, Enumerator, FParam, Func, Member, MemberBits, Param, R, Refs, Slot, UnitKind, Var, nm, unit,
};
use super::{Name, SlotFlags};

/// The DIE being visited. Its two offsets are derived where they are
/// needed: most DIEs are skipped without either.
#[derive(Clone, Copy)]
struct At {
    depth: isize,
    /// Its offset from the start of its unit.
    off: u64,
    abbrev: dies::Abbrev,
}

impl At {
    /// Its `.debug_info` offset (for messages and `--stats`), given the unit's.
    #[inline(always)]
    fn die(self, unit: u64) -> DieOffset {
        DieOffset::new(unit + self.off)
    }

    /// Its offset as references name it, given what they are relative to
    /// (see [`Refs`]).
    #[inline(always)]
    fn uoff(self, base: u64) -> UnitOff {
        // (below 4 GiB: the unit or section was checked)
        UnitOff::new((base + self.off) as u32).expect("offset below 4 GiB")
    }
}

/// One DW_TAG_GNU_annotation of a chain: its DW_AT_name (which tag),
/// DW_AT_const_value (the tag's text) and offset.
#[derive(Clone, Copy)]
struct GnuAnnotation<'a> {
    name: &'a [u8],
    value: &'a [u8],
    uoff: UnitOff,
}

/// Children of the frames still open, one column per kind.
struct Scratch<'a> {
    members: Vec<Member<'a>>,
    enums: Vec<Enumerator<'a>>,
    params: Vec<Param<'a>>,
    annots: Vec<Annot<'a>>,
    fparams: Vec<FParam<'a>>,
}

impl Scratch<'_> {
    fn new() -> Self {
        // Room for a kernel CU's deepest frames, so that the columns do not
        // grow from empty in every CU (their reallocations were most of the
        // decoder's allocator calls).
        Scratch {
            members: Vec::with_capacity(256),
            enums: Vec::with_capacity(256),
            params: Vec::with_capacity(32),
            annots: Vec::with_capacity(8),
            fparams: Vec::with_capacity(32),
        }
    }
}

/// What the root DIE says of the unit.
enum Root {
    /// Walk its children.
    Walk,
    /// A partial or skeleton unit outside the merged mode: nothing to read.
    Ignored,
    /// The caller's filter drops it.
    Dropped,
}

pub(super) struct Walker<'w, 'a, 'd> {
    dec: &'w Decoder<'a, 'd>,
    unit: gimli::Unit<R<'a>>,
    entries: Dies<'a>,
    cu: Cu<'a>,
    scratch: Scratch<'a>,
    stack: Vec<Frame<'a>>,
    attrs: Attrs<'a>,
    refs: Refs,
    /// What DIE offsets and references are relative to: 0, or the unit's
    /// `.debug_info` offset in the merged mode.
    base: u64,
    /// Where references must end.
    ref_end: u64,
    /// Whether a partial unit's DIEs are read (as a part of a merged unit,
    /// or as a unit another one imports), or the unit is passed over.
    partial: bool,
    /// With section-wide references, where the unit itself lies; the
    /// references that leave it are kept in `far` (dwz: each must land in
    /// a unit it is read with).
    own: std::ops::Range<u64>,
    far: Option<std::cell::RefCell<Vec<u64>>>,
    /// gimli's abbreviations of the unit, parsed on the first gcc
    /// annotation chain ([`Walker::gnu_chain`]).
    gnu_abbrevs: std::cell::OnceCell<gimli::Abbreviations>,
    /// The annotation DIEs placed as type tags from gcc's chains.
    gnu_tags_placed: hashbrown::HashSet<UnitOff>,
}

impl<'w, 'a, 'd> Walker<'w, 'a, 'd> {
    /// Reads the unit's header and sets up its DIE cursor.
    pub(super) fn new(
        dec: &'w Decoder<'a, 'd>,
        header: gimli::UnitHeader<R<'a>>,
        refs: Refs,
        partial: bool,
        track_far: bool,
    ) -> Result<Self, DecodeError> {
        let cu_off = header.offset().0 as u64;
        let abbrevs = header.debug_abbrev_offset().0;
        let abbrev_len = dec.dwarf.debug_abbrev.reader().len();
        if abbrevs > abbrev_len {
            return Err(dec.err(
                cu_off,
                None,
                format!(
                    "the unit's abbreviations offset {abbrevs:#x} is past the end of .debug_abbrev ({abbrev_len} bytes)"
                ),
            ));
        }
        let unit = unit(dec.dwarf, header).map_err(|e| dec.err(cu_off, None, format!("cannot read unit: {e}")))?;
        let unit_end = unit.header.length_including_self() as u64;
        let cu = Cu::new(cu_off, unit.encoding().address_size, unit_end as usize);
        let mut entries = Dies::new(&unit.header, *dec.dwarf.debug_abbrev.reader())
            .map_err(|e| dec.err(cu_off, None, format!("cannot read DIEs: {e}")))?;
        let (base, ref_end) = match refs {
            Refs::InUnit => (0, unit_end),
            Refs::Section => {
                entries.read_cross_unit_refs();
                let end = (dec.dwarf.debug_info.reader().len() as u64 + dec.space.own).max(dec.space.end);
                (cu_off + dec.space.own, end)
            }
        };
        // DIE offsets are kept in 32 bits (`UnitOff`), u32::MAX excluded.
        if ref_end >= u32::MAX as u64 {
            let what = match refs {
                Refs::InUnit => format!("a unit of {ref_end} bytes"),
                Refs::Section => format!("merged-unit mode: .debug_info of {ref_end} bytes"),
            };
            return Err(dec.err(
                cu_off,
                None,
                format!("{what} is past the 4 GiB that offsets are kept in"),
            ));
        }
        Ok(Walker {
            dec,
            unit,
            entries,
            cu,
            scratch: Scratch::new(),
            stack: Vec::with_capacity(32),
            attrs: Attrs::default(),
            refs,
            base,
            ref_end,
            partial,
            own: base..base + unit_end,
            far: track_far.then(|| std::cell::RefCell::new(Vec::new())),
            gnu_abbrevs: std::cell::OnceCell::new(),
            gnu_tags_placed: hashbrown::HashSet::new(),
        })
    }

    /// Walks every DIE; `None` if `keep(language, unit name)` drops the unit.
    pub(super) fn run(mut self, keep: &dyn Fn(u16, &[u8]) -> bool) -> Result<Option<Cu<'a>>, DecodeError> {
        let mut first = true;
        loop {
            let depth = self.entries.next_depth();
            let off = self.entries.next_offset();
            if self.entries.is_empty() {
                break;
            }
            let abbrev = self.entries.entry().map_err(|e| {
                let die = DieOffset::new(self.cu.offset + off);
                self.dec.err(self.cu.offset, Some(die), format!("cannot read DIE: {e}"))
            })?;
            if abbrev.is_null() {
                continue;
            }
            self.cu.dies += 1;
            while self.stack.last().is_some_and(|f| f.depth >= depth) {
                let f = self.stack.pop().unwrap();
                self.finish(f)?;
            }
            let at = At { depth, off, abbrev };
            if first {
                first = false;
                match self.root(at, keep)? {
                    Root::Walk => {}
                    Root::Ignored => {
                        self.cu.kind = UnitKind::Ignored;
                        return Ok(Some(self.cu));
                    }
                    Root::Dropped => return Ok(None),
                }
            } else {
                self.child(at)?;
            }
        }
        while let Some(f) = self.stack.pop() {
            self.finish(f)?;
        }
        self.cu.index.sort_unstable_by_key(|e| e.0);
        if let Some(far) = self.far.take() {
            self.cu.far_refs = far.into_inner();
        }
        if self.refs == Refs::InUnit {
            // (a merged unit's, once its parts are appended)
            self.cu.build_buckets();
        }
        Ok(Some(self.cu))
    }

    fn root(&mut self, at: At, keep: &dyn Fn(u16, &[u8]) -> bool) -> Result<Root, DecodeError> {
        self.read(at)?;
        self.cu.language = self.attrs.language.unwrap_or(0);
        self.cu.producer_clang = self.attrs.producer_clang;
        self.cu.name = nm(self.attrs.name);
        self.cu.partial = at.abbrev.tag == dw::DW_TAG_partial_unit;
        match at.abbrev.tag {
            dw::DW_TAG_compile_unit | dw::DW_TAG_type_unit => {}
            // The merged unit takes every unit's children.
            dw::DW_TAG_partial_unit | dw::DW_TAG_skeleton_unit if self.partial => {}
            dw::DW_TAG_partial_unit | dw::DW_TAG_skeleton_unit => return Ok(Root::Ignored),
            tag => {
                return Err(self.dec.err(
                    self.cu.offset,
                    Some(at.die(self.cu.offset)),
                    format!("unexpected unit DIE {tag}"),
                ));
            }
        }
        if !keep(self.cu.language, self.cu.name) {
            return Ok(Root::Dropped);
        }
        self.open(at, Ctx::Root);
        Ok(Root::Walk)
    }

    /// A DIE below the root, by the role its parent's context gives it.
    #[inline(always)]
    fn child(&mut self, at: At) -> Result<(), DecodeError> {
        let parent = self.stack.last().map(|f| f.ctx).unwrap_or(Ctx::Skip);
        // gcc's annotation DIEs where LLVM's would be are read as those
        let tag = match at.abbrev.tag {
            DW_TAG_GNU_ANNOTATION if self.dec.opts.gnu_annotations => DW_TAG_LLVM_ANNOTATION,
            t => t,
        };
        let ctx = match classify(parent, tag) {
            Role::Skip => {
                self.skip(at)?;
                Ctx::Skip
            }
            // dwz: the imported unit's DIEs become a part of this unit
            // (`Decoder::pull_imports`), found by the section-wide offset.
            Role::ImportedUnit if self.refs == Refs::Section => {
                self.read(at)?;
                match self.attrs.import.and_then(DieRef::offset) {
                    None => {
                        return Err(self.dec.err(
                            self.cu.offset,
                            Some(at.die(self.cu.offset)),
                            "DW_TAG_imported_unit without a DW_AT_import reference to a unit",
                        ));
                    }
                    Some(o) => self.cu.imports.push(o),
                }
                Ctx::Skip
            }
            Role::ImportedUnit => {
                let mut e = self
                    .dec
                    .err(self.cu.offset, Some(at.die(self.cu.offset)), "DW_TAG_imported_unit");
                e.kind = DecodeErrorKind::StopFile;
                return Err(e);
            }
            Role::Block => {
                self.skip(at)?;
                Ctx::Block
            }
            Role::Varargs => {
                self.skip(at)?;
                self.varargs();
                Ctx::Skip
            }
            role => {
                self.read(at)?;
                // Checked for every role read, whether it keeps a type or not.
                let ty = self.uref(self.attrs.ty, at)?;
                match role {
                    Role::Type if self.attrs.signature.is_some() => self.skeleton(at),
                    Role::Type => return self.type_die(at, parent, ty),
                    Role::Member => return self.member(at, ty),
                    Role::Enumerator => {
                        self.enumerator();
                        Ctx::Skip
                    }
                    Role::Subrange => {
                        self.subrange();
                        Ctx::Skip
                    }
                    Role::Param => {
                        self.scratch.params.push(Param {
                            name: Name::new(self.attrs.name),
                            ty,
                        });
                        Ctx::Skip
                    }
                    Role::FParam => return self.fparam(at, ty),
                    Role::Annotation => {
                        self.annotation(parent, at)?;
                        Ctx::Skip
                    }
                    Role::Func => return self.func(at, ty),
                    // Only CU-level DW_TAG_variable can become a VAR.
                    Role::Var if parent == Ctx::Root && at.abbrev.tag == dw::DW_TAG_variable => {
                        return self.var(at, ty);
                    }
                    Role::Namespace => Ctx::Namespace,
                    _ => Ctx::Skip,
                }
            }
        };
        self.open(at, ctx);
        Ok(())
    }

    /// Pushes a plain frame for the children of `at`, if it has any.
    #[inline(always)]
    fn open(&mut self, at: At, ctx: Ctx) {
        if at.abbrev.has_children {
            self.stack.push(frame(at.depth, ctx));
        }
    }

    /// Reads the attributes of `at` into `attrs`, counting its type-unit
    /// references.
    #[inline(always)]
    fn read(&mut self, at: At) -> Result<(), DecodeError> {
        let (cu_off, refs, base) = (self.cu.offset, self.refs, self.base);
        self.dec.read_attrs(
            &self.unit,
            &mut self.entries,
            at.abbrev,
            &mut self.attrs,
            cu_off,
            at.die(self.cu.offset),
            refs,
            base,
        )?;
        let attrs = &self.attrs;
        self.cu.dies_read += 1;
        self.cu.type_unit_refs += attrs.type_unit_refs as u64;
        if attrs.resolved != 0 {
            let fields = [
                attrs.ty,
                attrs.origin,
                attrs.spec,
                attrs.signature.map(|s| DieRef::at(Some(s))),
            ];
            let resolved = fields
                .iter()
                .enumerate()
                .filter(|(i, _)| attrs.resolved & (1 << i) != 0);
            self.cu
                .type_unit_pulls
                .extend(resolved.filter_map(|(_, at)| at.and_then(DieRef::offset)));
        }
        Ok(())
    }

    #[inline(always)]
    fn skip(&mut self, at: At) -> Result<(), DecodeError> {
        let cu_off = self.cu.offset;
        self.entries.skip(at.abbrev).map_err(|e| {
            self.dec.err(
                cu_off,
                Some(at.die(self.cu.offset)),
                format!("cannot read attributes: {e}"),
            )
        })
    }

    /// A reference attribute as a unit offset (`None` when absent or not a
    /// unit reference); one past the unit is damage.
    #[inline(always)]
    fn uref(&self, v: Option<DieRef>, at: At) -> Result<Option<UnitOff>, DecodeError> {
        match v.and_then(DieRef::offset) {
            None => Ok(None),
            Some(o) if o >= self.ref_end => Err(self.dec.err(
                self.cu.offset,
                Some(at.die(self.cu.offset)),
                format!("reference to unit offset {o:#x} outside its unit"),
            )),
            Some(o) => {
                if let Some(far) = &self.far
                    && !self.own.contains(&o)
                {
                    far.borrow_mut().push(o);
                }
                Ok(UnitOff::new(o as u32))
            }
        }
    }

    /// DW_TAG_unspecified_parameters: the function or subroutine type
    /// being read takes variable arguments.
    fn varargs(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            if let Some(s) = f.slot.as_mut() {
                s.flags.set(SlotFlags::VARARGS);
            }
            if let Some(func) = f.func.as_mut() {
                func.varargs = true;
            }
        }
    }

    /// A skeleton of a type-unit type: references to it are references to
    /// that type; its children (methods, nested types) are read as a
    /// namespace's.
    fn skeleton(&mut self, at: At) -> Ctx {
        if let Some(target) = self.attrs.signature.and_then(|t| UnitOff::new(t as u32)) {
            self.cu.aliases.push((at.uoff(self.base), target));
        }
        Ctx::Namespace
    }

    #[inline(always)]
    fn type_die(&mut self, at: At, parent: Ctx, ty: Option<UnitOff>) -> Result<(), DecodeError> {
        let a = &self.attrs;
        let s = Slot {
            tag: at.abbrev.tag,
            die: at.die(self.cu.offset),
            uoff: at.uoff(self.base),
            name: Name::new(a.name),
            spec: self.uref(a.spec, at)?,
            ty,
            size: a.byte_size.unwrap_or(0),
            encoding: a.encoding,
            flags: SlotFlags::when(a.declaration, SlotFlags::DECLARATION),
            nelems: 1,
            kids: IdxRange::EMPTY,
            annots: IdxRange::EMPTY,
        };
        let mut ctx = match at.abbrev.tag {
            dw::DW_TAG_structure_type | dw::DW_TAG_class_type | dw::DW_TAG_union_type | dw::DW_TAG_interface_type => {
                Ctx::Struct
            }
            dw::DW_TAG_pointer_type => Ctx::Pointer,
            dw::DW_TAG_array_type => Ctx::Array,
            dw::DW_TAG_enumeration_type => Ctx::Enum,
            dw::DW_TAG_subroutine_type => Ctx::SubrType,
            dw::DW_TAG_typedef | dw::DW_TAG_rvalue_reference_type => Ctx::Typedef,
            _ => Ctx::Leaf,
        };
        if at.abbrev.tag == dw::DW_TAG_unspecified_type {
            if parent == Ctx::Root {
                // Not placed: references to it are void.
                ctx = Ctx::Skip;
            } else {
                self.cu.has_nested_unspecified = true;
            }
        }
        let gnu = self.attrs.gnu_annotation;
        if ctx == Ctx::Skip {
            self.open(at, ctx);
        } else if !at.abbrev.has_children {
            self.leaf(s, ctx, gnu)?;
        } else {
            let f = self.type_frame(at.depth, ctx, s, gnu);
            self.stack.push(f);
        }
        Ok(())
    }

    /// The frame of a type DIE whose children (or gcc annotation chain)
    /// are still to come.
    fn type_frame(&self, depth: isize, ctx: Ctx, s: Slot<'a>, gnu: Option<DieRef>) -> Frame<'a> {
        let mut f = frame(depth, ctx);
        f.kids_start = match ctx {
            Ctx::Struct => self.scratch.members.len(),
            Ctx::Enum => self.scratch.enums.len(),
            Ctx::SubrType => self.scratch.params.len(),
            _ => 0,
        };
        f.annots_start = self.scratch.annots.len();
        f.last_tag = s.ty;
        f.gnu = gnu;
        f.slot = Some(s);
        f
    }

    /// What `finish` makes of a type's frame without children, without
    /// building one (most types are leaves, and a frame is large to move).
    #[inline(always)]
    fn leaf(&mut self, mut s: Slot<'a>, ctx: Ctx, gnu: Option<DieRef>) -> Result<(), DecodeError> {
        if gnu.is_some() && self.dec.opts.gnu_annotations {
            // (rare: gcc 16's tags) as a frame without children ends
            let f = self.type_frame(0, ctx, s, gnu);
            return self.finish(f);
        }
        let cu = &mut self.cu;
        match ctx {
            Ctx::Struct => s.kids = IdxRange::new(cu.members.len(), 0),
            Ctx::Enum => s.kids = IdxRange::new(cu.enumerators.len(), 0),
            Ctx::SubrType => s.kids = IdxRange::new(cu.params.len(), 0),
            _ => {}
        }
        if matches!(ctx, Ctx::Struct | Ctx::Typedef) {
            s.annots = IdxRange::new(cu.annots.len(), 0);
        }
        cu.place(s);
        Ok(())
    }

    /// DW_TAG_member or DW_TAG_inheritance of a struct; only members become
    /// BTF members, but both count as components for decl tags.
    #[inline(always)]
    fn member(&mut self, at: At, ty: Option<UnitOff>) -> Result<(), DecodeError> {
        let f = self.stack.last_mut().unwrap();
        let comp = f.counter;
        f.counter += 1;
        if at.abbrev.tag == dw::DW_TAG_member {
            let a = &self.attrs;
            // kept in the unit directly: members move between columns,
            // their index there does not
            let bits = MemberBits {
                data_bit_offset: a.data_bit_offset,
                bit_size: a.bit_size,
                byte_size: a.byte_size,
                bit_offset: a.bit_offset,
                far_loc: None,
            };
            let m = self.cu.new_member(a.name, ty, bits, a.member_loc);
            self.scratch.members.push(m);
        }
        self.open_component(at, Ctx::Member, comp)
    }

    /// A frame for the annotations of a member or parameter, which carry
    /// its component index.
    #[inline(always)]
    fn open_component(&mut self, at: At, ctx: Ctx, component: i32) -> Result<(), DecodeError> {
        let gnu = self.attrs.gnu_annotation;
        if !at.abbrev.has_children {
            // its decl tags from gcc's chain, if any, at once
            return self.gnu_decl_tags(gnu, component);
        }
        let mut f = frame(at.depth, ctx);
        f.component = component;
        f.gnu = gnu;
        self.stack.push(f);
        Ok(())
    }

    #[inline(always)]
    fn enumerator(&mut self) {
        let value = self.attrs.const_value.as_ref().and_then(udata).unwrap_or(0);
        self.scratch.enums.push(Enumerator {
            name: self.attrs.name,
            value,
        });
    }

    /// One dimension of an array: the element count multiplies.
    #[inline(always)]
    fn subrange(&mut self) {
        let a = &self.attrs;
        let s = self.stack.last_mut().unwrap().slot.as_mut().unwrap();
        if s.kids.len() < 64 {
            let dim = match a.upper_bound {
                Some(Some(ub)) => ub.wrapping_add(1),
                Some(None) => 0,
                None => match a.count {
                    Some(Some(c)) => c,
                    _ => 0,
                },
            };
            s.nelems = s.nelems.wrapping_mul(dim as u32);
            s.kids = IdxRange::new(0, s.kids.len() + 1);
        }
    }

    /// A formal parameter of a subprogram, with its location facts.
    #[inline(always)]
    fn fparam(&mut self, at: At, ty: Option<UnitOff>) -> Result<(), DecodeError> {
        let f = self.stack.last_mut().unwrap();
        let comp = f.counter;
        f.counter += 1;
        let facts = self.dec.param_facts(&self.unit, comp as usize, &self.attrs);
        let loc = match &self.attrs.location {
            Some(v) if self.dec.opts.param_locations => Some(self.dec.loc_facts(&self.unit, v)),
            _ => None,
        };
        let p = FParam {
            uoff: at.uoff(self.base),
            name: self.attrs.name,
            ty,
            has_type: self.attrs.ty.is_some(),
            origin: self.uref(self.attrs.origin, at)?,
            facts,
            loc,
            const_value: self.attrs.const_value.is_some(),
        };
        self.scratch.fparams.push(p);
        self.open_component(at, Ctx::FParam, comp)
    }

    fn func(&mut self, at: At, ty: Option<UnitOff>) -> Result<(), DecodeError> {
        let a = &self.attrs;
        let func = Func {
            uoff: at.uoff(self.base),
            die: at.die(self.cu.offset),
            name: a.name,
            ty,
            has_type: a.ty.is_some(),
            origin: self.uref(a.origin, at)?,
            spec: self.uref(a.spec, at)?,
            declaration: a.declaration,
            varargs: false,
            low_pc: a.low_pc,
            nocall: a.nocall,
            inlined: a.inline,
            params: IdxRange::EMPTY,
            annots: IdxRange::EMPTY,
        };
        let mut f = frame(at.depth, Ctx::Func);
        f.annots_start = self.scratch.annots.len();
        f.fparams_start = self.scratch.fparams.len();
        f.gnu = self.attrs.gnu_annotation;
        f.func = Some(func);
        self.open_or_finish(at, f)
    }

    fn var(&mut self, at: At, ty: Option<UnitOff>) -> Result<(), DecodeError> {
        let a = &self.attrs;
        let addr = match &a.location {
            Some(AttributeValue::Exprloc(e)) => self.dec.first_addr(&self.unit, e.0.slice()),
            Some(AttributeValue::Block(b)) => self.dec.first_addr(&self.unit, b.slice()),
            _ => None,
        };
        let var = Var {
            uoff: at.uoff(self.base),
            die: at.die(self.cu.offset),
            name: a.name,
            ty,
            spec: self.uref(a.spec, at)?,
            declaration: a.declaration,
            external: a.external,
            artificial: a.artificial,
            addr,
            annots: IdxRange::EMPTY,
        };
        let mut f = frame(at.depth, Ctx::Var);
        f.annots_start = self.scratch.annots.len();
        f.var = Some(var);
        self.open_or_finish(at, f)
    }

    /// A function's or variable's frame waits for its children; without
    /// any it is finished at once.
    #[inline(always)]
    fn open_or_finish(&mut self, at: At, f: Frame<'a>) -> Result<(), DecodeError> {
        if at.abbrev.has_children {
            self.stack.push(f);
            Ok(())
        } else {
            self.finish(f)
        }
    }

    /// The chain of DW_TAG_GNU_annotation DIEs from `first` (a
    /// DW_AT_GNU_annotation as references are kept; gcc 16's tags): each
    /// one's name, value and offset, until a reference leads to another
    /// kind of DIE, out of the unit, or around a cycle.
    #[cold]
    fn gnu_chain(&self, first: Option<DieRef>) -> Result<Vec<GnuAnnotation<'a>>, DecodeError> {
        let mut out = Vec::new();
        let mut next = first.and_then(DieRef::offset);
        let err = |msg: String| self.dec.err(self.cu.offset, None, msg);
        // (the walk reads DIEs through its own compiled abbreviations;
        // gimli's, for reading these by offset, are parsed once per unit)
        let abbrevs = match self.gnu_abbrevs.get() {
            Some(a) => a,
            None => {
                let a = self
                    .unit
                    .header
                    .abbreviations(&self.dec.dwarf.debug_abbrev)
                    .map_err(|e| err(format!("abbreviations: {e}")))?;
                self.gnu_abbrevs.get_or_init(|| a)
            }
        };
        while let Some(off) = next.filter(|&n| n >= self.base && n < self.ref_end) {
            let rel = gimli::UnitOffset((off - self.base) as usize);
            let Ok(die) = self.unit.header.entry(abbrevs, rel) else {
                break;
            };
            if die.tag() != DW_TAG_GNU_ANNOTATION || out.len() > self.unit.header.unit_length() {
                break;
            }
            let string = |at| -> Result<&'a [u8], DecodeError> {
                let v = die.attr_value(at);
                self.dec
                    .string(&self.unit, &v)
                    .map(super::nm)
                    .map_err(|m| err(format!("DW_TAG_GNU_annotation at unit offset {:#x}: {m}", rel.0)))
            };
            let Some(uoff) = UnitOff::new(off as u32) else { break };
            out.push(GnuAnnotation {
                name: string(dw::DW_AT_name)?,
                value: string(dw::DW_AT_const_value)?,
                uoff,
            });
            next = match die.attr_value(DW_AT_GNU_ANNOTATION) {
                Some(AttributeValue::UnitRef(o)) => Some(self.base + o.0 as u64),
                _ => None,
            };
        }
        Ok(out)
    }

    /// The `btf_decl_tag`s of gcc's chain from `first`, as component
    /// `component`'s annotations.
    fn gnu_decl_tags(&mut self, first: Option<DieRef>, component: i32) -> Result<(), DecodeError> {
        if first.is_none() || !self.dec.opts.gnu_annotations || !self.dec.opts.decl_tag {
            return Ok(());
        }
        for a in self.gnu_chain(first)? {
            if a.name == b"btf_decl_tag" {
                self.scratch.annots.push(Annot {
                    value: a.value,
                    component,
                });
            }
        }
        Ok(())
    }

    /// A pointer's `btf_type_tag`s from gcc's chain at `first` (those
    /// before the first other annotation), placed in chain order, the
    /// first nearest the pointer: what the pointer refers to.
    fn gnu_type_tags(
        &mut self,
        first: Option<DieRef>,
        pointee: Option<UnitOff>,
    ) -> Result<Option<UnitOff>, DecodeError> {
        if first.is_none() || !self.dec.opts.gnu_annotations || !self.dec.opts.type_tag {
            return Ok(pointee);
        }
        let chain = self.gnu_chain(first)?;
        let n = chain.iter().take_while(|a| a.name == b"btf_type_tag").count();
        for (k, &GnuAnnotation { value, uoff, .. }) in chain[..n].iter().enumerate() {
            // A tag is placed under its DIE's offset: a chain two pointers
            // share would give two types one offset.
            let die = DieOffset::new(self.cu.offset + u64::from(uoff.get()) - self.base);
            if !self.gnu_tags_placed.insert(uoff) {
                return Err(self.dec.err(
                    self.cu.offset,
                    Some(die),
                    "a DW_TAG_GNU_annotation type tag shared by two pointers is not supported".to_string(),
                ));
            }
            let to = chain[..n].get(k + 1).map(|a| a.uoff).or(pointee);
            self.cu.place(type_tag(die, uoff, value, to));
        }
        Ok(if n > 0 { Some(chain[0].uoff) } else { pointee })
    }

    /// A DW_TAG_LLVM_annotation: a type tag placed before its pointer, or a
    /// decl tag of the container, member or parameter it is in.
    fn annotation(&mut self, parent: Ctx, at: At) -> Result<(), DecodeError> {
        let name = nm(self.attrs.name);
        let (dec, unit, attrs) = (self.dec, &self.unit, &self.attrs);
        let (cu_off, die) = (self.cu.offset, at.die(self.cu.offset));
        let value = || {
            dec.string(unit, &attrs.const_value)
                .map_err(|msg| dec.err(cu_off, Some(die), format!("DW_AT_const_value: {msg}")))
        };
        match parent {
            Ctx::Pointer if dec.opts.type_tag && name == b"btf_type_tag" => {
                let f = self.stack.last_mut().unwrap();
                let s = type_tag(at.die(self.cu.offset), at.uoff(self.base), value()?, f.last_tag);
                f.last_tag = Some(at.uoff(self.base));
                f.child_tags = true;
                self.cu.place(s);
            }
            Ctx::Struct | Ctx::Typedef | Ctx::Func | Ctx::Var if dec.opts.decl_tag && name == b"btf_decl_tag" => {
                self.scratch.annots.push(Annot {
                    value: value()?,
                    component: -1,
                });
            }
            Ctx::Member | Ctx::FParam if dec.opts.decl_tag && name == b"btf_decl_tag" => {
                let comp = self.stack.last().unwrap().component;
                self.scratch.annots.push(Annot {
                    value: value()?,
                    component: comp,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// A frame ends: what it gathered moves into the unit's columns.
    #[inline(always)]
    fn finish(&mut self, mut f: Frame<'a>) -> Result<(), DecodeError> {
        if f.gnu.is_some() {
            self.finish_gnu(&mut f)?;
        }
        let (cu, sc) = (&mut self.cu, &mut self.scratch);
        if let Some(mut s) = f.slot.take() {
            match f.ctx {
                Ctx::Struct => s.kids = move_tail(&mut cu.members, &mut sc.members, f.kids_start).erased(),
                Ctx::Enum => s.kids = move_tail(&mut cu.enumerators, &mut sc.enums, f.kids_start).erased(),
                Ctx::SubrType => s.kids = move_tail(&mut cu.params, &mut sc.params, f.kids_start).erased(),
                // The pointer refers to its last type tag, if any.
                Ctx::Pointer => s.ty = f.last_tag,
                _ => {}
            }
            if matches!(f.ctx, Ctx::Struct | Ctx::Typedef) {
                s.annots = move_tail(&mut cu.annots, &mut sc.annots, f.annots_start);
            }
            cu.place(s);
        } else if let Some(mut func) = f.func.take() {
            func.params = move_tail(&mut cu.fparams, &mut sc.fparams, f.fparams_start);
            func.annots = move_tail(&mut cu.annots, &mut sc.annots, f.annots_start);
            cu.funcs.push(func);
        } else if let Some(mut var) = f.var.take() {
            var.annots = move_tail(&mut cu.annots, &mut sc.annots, f.annots_start);
            cu.vars.push(var);
        }
        Ok(())
    }

    /// gcc's chain of a frame's DIE, after its children: the decl tags of a
    /// function, struct, member or parameter (after those of its children),
    /// or a pointer's type tags if no child gave it any.
    #[cold]
    fn finish_gnu(&mut self, f: &mut Frame<'a>) -> Result<(), DecodeError> {
        let is_struct = f.slot.as_ref().is_some_and(|s| s.tag != dw::DW_TAG_union_type);
        match f.ctx {
            Ctx::Func => self.gnu_decl_tags(f.gnu, -1),
            Ctx::Struct if is_struct => self.gnu_decl_tags(f.gnu, -1),
            Ctx::Member | Ctx::FParam => self.gnu_decl_tags(f.gnu, f.component),
            Ctx::Pointer if !f.child_tags => {
                f.last_tag = self.gnu_type_tags(f.gnu, f.last_tag)?;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ctx {
    Root,
    /// A struct/union/class: pending slot index in `pend`, member counter.
    Struct,
    Member,
    Pointer,
    Array,
    Enum,
    SubrType,
    Typedef,
    /// A subprogram (own params/annotations) …
    Func,
    /// … or a lexical block / inlined subroutine inside one.
    Block,
    FParam,
    Namespace,
    Var,
    /// A leaf type whose children are ignored.
    Leaf,
    Skip,
}

struct Frame<'a> {
    depth: isize,
    ctx: Ctx,
    /// Pending type slot (for type contexts).
    slot: Option<Slot<'a>>,
    /// Scratch start indices.
    kids_start: usize,
    annots_start: usize,
    fparams_start: usize,
    /// Member / param counter (decl-tag component of the next one).
    counter: i32,
    /// Current member or param's component index.
    component: i32,
    /// Pending function / variable.
    func: Option<Func<'a>>,
    var: Option<Var<'a>>,
    /// Type tags of a pointer: last placed annotation's unit offset.
    last_tag: Option<UnitOff>,
    /// A pointer's type tags came as child DIEs.
    child_tags: bool,
    /// The DIE's DW_AT_GNU_annotation (gcc 16's decl and type tags: a
    /// chain read when the frame ends).
    gnu: Option<DieRef>,
}

/// A `btf_type_tag` as the slot of its annotation DIE (at `die`, `uoff`),
/// whose text is `value`, naming the type at `to`.
fn type_tag(die: DieOffset, uoff: UnitOff, value: &[u8], to: Option<UnitOff>) -> Slot<'_> {
    Slot {
        tag: DW_TAG_LLVM_ANNOTATION,
        die,
        uoff,
        name: Name::new(value),
        spec: None,
        ty: to,
        size: 0,
        encoding: 0,
        flags: SlotFlags::default(),
        nelems: 0,
        kids: IdxRange::EMPTY,
        annots: IdxRange::EMPTY,
    }
}

fn frame<'a>(depth: isize, ctx: Ctx) -> Frame<'a> {
    Frame {
        depth,
        ctx,
        slot: None,
        kids_start: 0,
        annots_start: 0,
        fparams_start: 0,
        counter: 0,
        component: -1,
        func: None,
        var: None,
        last_tag: None,
        child_tags: false,
        gnu: None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Skip,
    ImportedUnit,
    Block,
    Varargs,
    Type,
    Member,
    Enumerator,
    Subrange,
    Param,
    FParam,
    Annotation,
    Func,
    Var,
    Namespace,
}

/// The loader's `process()` for a DIE of tag `tag`, wherever it is called.
fn process_role(tag: DwTag) -> Role {
    match tag {
        dw::DW_TAG_base_type
        | dw::DW_TAG_const_type
        | dw::DW_TAG_volatile_type
        | dw::DW_TAG_restrict_type
        | dw::DW_TAG_atomic_type
        | dw::DW_TAG_reference_type
        | dw::DW_TAG_rvalue_reference_type
        | dw::DW_TAG_unspecified_type
        | dw::DW_TAG_ptr_to_member_type
        | dw::DW_TAG_string_type
        | dw::DW_TAG_pointer_type
        | dw::DW_TAG_array_type
        | dw::DW_TAG_enumeration_type
        | dw::DW_TAG_structure_type
        | dw::DW_TAG_class_type
        | dw::DW_TAG_interface_type
        | dw::DW_TAG_union_type
        | dw::DW_TAG_subroutine_type
        | dw::DW_TAG_typedef => Role::Type,
        dw::DW_TAG_namespace => Role::Namespace,
        dw::DW_TAG_subprogram => Role::Func,
        dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Var,
        dw::DW_TAG_imported_unit => Role::ImportedUnit,
        _ => Role::Skip,
    }
}

fn classify(parent: Ctx, tag: DwTag) -> Role {
    match parent {
        Ctx::Root | Ctx::Namespace => process_role(tag),
        Ctx::Struct => match tag {
            dw::DW_TAG_member | dw::DW_TAG_inheritance => Role::Member,
            DW_TAG_LLVM_ANNOTATION => Role::Annotation,
            dw::DW_TAG_template_type_parameter
            | dw::DW_TAG_template_value_parameter
            | dw::DW_TAG_GNU_template_parameter_pack
            | dw::DW_TAG_subrange_type
            | dw::DW_TAG_variant_part
            | dw::DW_TAG_GNU_formal_parameter_pack
            | dw::DW_TAG_GNU_template_template_param => Role::Skip,
            // Static members and methods are not types; nested types are.
            dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Member | Ctx::Typedef | Ctx::Pointer | Ctx::FParam | Ctx::Var => match tag {
            DW_TAG_LLVM_ANNOTATION => Role::Annotation,
            _ => Role::Skip,
        },
        Ctx::Array => match tag {
            dw::DW_TAG_subrange_type => Role::Subrange,
            _ => Role::Skip,
        },
        Ctx::Enum => match tag {
            dw::DW_TAG_enumerator => Role::Enumerator,
            _ => Role::Skip,
        },
        Ctx::SubrType => match tag {
            dw::DW_TAG_formal_parameter => Role::Param,
            dw::DW_TAG_unspecified_parameters => Role::Varargs,
            dw::DW_TAG_subrange_type => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Func | Ctx::Block => match tag {
            dw::DW_TAG_formal_parameter => {
                if parent == Ctx::Func {
                    Role::FParam
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_unspecified_parameters => {
                if parent == Ctx::Func {
                    Role::Varargs
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_variable | dw::DW_TAG_constant => Role::Skip,
            dw::DW_TAG_lexical_block | dw::DW_TAG_inlined_subroutine => Role::Block,
            DW_TAG_LLVM_ANNOTATION => {
                if parent == Ctx::Func {
                    Role::Annotation
                } else {
                    Role::Skip
                }
            }
            dw::DW_TAG_label
            | dw::DW_TAG_call_site
            | dw::DW_TAG_call_site_parameter
            | dw::DW_TAG_GNU_call_site
            | dw::DW_TAG_GNU_call_site_parameter
            | dw::DW_TAG_dwarf_procedure
            | dw::DW_TAG_template_type_parameter
            | dw::DW_TAG_template_value_parameter
            | dw::DW_TAG_GNU_template_parameter_pack
            | dw::DW_TAG_GNU_formal_parameter_pack => Role::Skip,
            _ => process_role(tag),
        },
        Ctx::Leaf | Ctx::Skip => Role::Skip,
    }
}

/// Moves `from[start..]` to the end of `to`; where it now is there. Most
/// calls move nothing (a struct or typedef without annotations): those
/// return before `drain`, whose set-up is not free.
#[inline]
fn move_tail<T>(to: &mut Vec<T>, from: &mut Vec<T>, start: usize) -> IdxRange<T> {
    let at = to.len();
    if from.len() > start {
        to.extend(from.drain(start..));
    }
    IdxRange::tail(to, at)
}
