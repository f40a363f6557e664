//! The two walks per root type: *ordering* queues the named definitions a
//! root needs, dependencies first; *emission* writes each queued type, with
//! forward declarations where a weak link allows them.

use super::{CDumpError, Dumper, Emit, MAX_DEPTH, Order, Result};
use crate::btf::{Kind, Type};

impl<'a> Dumper<'a> {
    // ---- ordering ----

    /// Queues the named definitions `id` needs; true when the link to `id`
    /// is strong (it must be fully defined before its user).
    pub(super) fn order(&mut self, id: u32, through_ptr: bool, depth: u32) -> Result<bool> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        let state = self.st[id as usize].order;
        if state == Order::Done {
            return Ok(true);
        }
        let t = self.ty(id);
        let kind = t.kind();
        let named = t.name_off().0 != 0;
        if state == Order::InProgress {
            // A loop is fine when it goes through a pointer to a named
            // struct/union: a forward declaration breaks it.
            if matches!(kind, Kind::Struct | Kind::Union) && through_ptr && named {
                return Ok(false);
            }
            return Err(CDumpError::Cycle { id });
        }
        let depth = depth + 1;
        match kind {
            Kind::Int | Kind::Float => {
                self.st[id as usize].order = Order::Done;
                Ok(false)
            }
            Kind::Ptr => {
                let r = self.order(t.type_id().0, true, depth);
                self.st[id as usize].order = Order::Done;
                r
            }
            Kind::Array => self.order(t.array().0.0, false, depth),
            Kind::Struct | Kind::Union => {
                if through_ptr && named {
                    return Ok(false);
                }
                self.st[id as usize].order = Order::InProgress;
                for [_, ty, _] in t.triples() {
                    self.order(ty, false, depth)?;
                }
                if named {
                    self.queue.push(id);
                }
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Enum | Kind::Enum64 | Kind::Fwd => {
                // Named ones, and anonymous enums nothing refers to (global
                // constants), are top-level declarations.
                if named || !self.st[id as usize].referenced {
                    self.queue.push(id);
                }
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Typedef => {
                let strong = self.order(t.type_id().0, through_ptr, depth)?;
                if through_ptr && !strong {
                    return Ok(false);
                }
                self.queue.push(id);
                self.st[id as usize].order = Order::Done;
                Ok(true)
            }
            Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
                self.order(t.type_id().0, through_ptr, depth)
            }
            Kind::FuncProto => {
                let mut strong = self.order(t.type_id().0, through_ptr, depth)?;
                for [_, ty] in t.pairs() {
                    strong |= self.order(ty, through_ptr, depth)?;
                }
                Ok(strong)
            }
            Kind::Func | Kind::Var | Kind::Datasec | Kind::DeclTag => {
                self.st[id as usize].order = Order::Done;
                Ok(false)
            }
            Kind::Unkn => Err(CDumpError::BadKind { id, kind: kind.name() }),
        }
    }

    // ---- emission ----

    /// Writes what `id` needs and, at top level (`cont == 0`), `id` itself.
    /// `cont` is the named struct/typedef being written, if any.
    pub(super) fn emit(&mut self, id: u32, cont: u32, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        let depth = depth + 1;
        let s = self.st[id as usize];
        if s.emit == Emit::Done {
            return Ok(());
        }
        let t = self.ty(id);
        let kind = t.kind();
        let named = t.name_off().0 != 0;
        if s.emit == Emit::InProgress {
            // Met again while being written: only a declaration can help.
            if s.fwd_emitted {
                return Ok(());
            }
            match kind {
                Kind::Struct | Kind::Union => {
                    // Referring to the struct being defined, or an anonymous
                    // loop (nothing can be done about that).
                    if id == cont || !named {
                        return Ok(());
                    }
                    self.struct_fwd(id, t);
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].fwd_emitted = true;
                }
                Kind::Typedef => {
                    if !self.is_builtin_va_list(t) {
                        self.typedef_def(id, t, 0, depth)?;
                        self.out.extend_from_slice(b";\n\n");
                    }
                    self.st[id as usize].fwd_emitted = true;
                }
                _ => {}
            }
            return Ok(());
        }
        let top_level = cont == 0;
        match kind {
            Kind::Int => {
                self.missing_alias(id);
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Enum | Kind::Enum64 => {
                if top_level {
                    self.enum_def(id, t, 0);
                    self.out.extend_from_slice(b";\n\n");
                }
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Ptr | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag => {
                self.emit(t.type_id().0, cont, depth)?
            }
            Kind::Array => self.emit(t.array().0.0, cont, depth)?,
            Kind::Fwd => {
                self.fwd_def(id, t);
                self.out.extend_from_slice(b";\n\n");
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Typedef => {
                self.st[id as usize].emit = Emit::InProgress;
                self.emit(t.type_id().0, id, depth)?;
                if !self.st[id as usize].fwd_emitted && !self.is_builtin_va_list(t) {
                    self.typedef_def(id, t, 0, depth)?;
                    self.out.extend_from_slice(b";\n\n");
                }
                self.st[id as usize].emit = Emit::Done;
            }
            Kind::Struct | Kind::Union => {
                self.st[id as usize].emit = Emit::InProgress;
                if top_level || !named {
                    // Its members are written out here: what they refer to
                    // must be declared first.
                    let inner = if named { id } else { cont };
                    for [_, ty, _] in t.triples() {
                        self.emit(ty, inner, depth)?;
                    }
                } else if !self.st[id as usize].fwd_emitted && id != cont {
                    self.struct_fwd(id, t);
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].fwd_emitted = true;
                }
                if top_level {
                    self.struct_def(id, t, 0, depth)?;
                    self.out.extend_from_slice(b";\n\n");
                    self.st[id as usize].emit = Emit::Done;
                } else {
                    self.st[id as usize].emit = Emit::Todo;
                }
            }
            Kind::FuncProto => {
                self.emit(t.type_id().0, cont, depth)?;
                for [_, ty] in t.pairs() {
                    self.emit(ty, cont, depth)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `__builtin_va_list` is the compiler's own; defining it breaks builds.
    fn is_builtin_va_list(&self, t: Type<'_>) -> bool {
        t.name_off().0 != 0 && self.str(t.name_off().0) == b"__builtin_va_list"
    }

    /// GCC's ARM SIMD polynomial types have no C definition: alias them.
    fn missing_alias(&mut self, id: u32) {
        const ALIASES: [(&[u8], &[u8]); 4] = [
            (b"__Poly8_t", b"unsigned char"),
            (b"__Poly16_t", b"unsigned short"),
            (b"__Poly64_t", b"unsigned long long"),
            (b"__Poly128_t", b"unsigned __int128"),
        ];
        let name = self.resolve_name(id, false);
        if let Some((n, base)) = ALIASES.iter().find(|(n, _)| *n == &name[..]) {
            self.out.extend_from_slice(b"typedef ");
            self.out.extend_from_slice(base);
            self.out.push(b' ');
            self.out.extend_from_slice(n);
            self.out.extend_from_slice(b";\n\n");
        }
    }
}
