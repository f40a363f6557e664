//! libbpf's prep pass (split BTF: base types into the candidate table) and
//! primitive pass (INT, FLOAT, FWD, ENUM, ENUM64: first equal candidate,
//! with the enum forward-declaration rules).

use super::*;

impl<L: Links> Dedup<'_, L> {
    #[inline(never)]
    pub(super) fn prep(&mut self) -> Result<(), DedupError> {
        if self.base_index.is_some() {
            // the index's table is this pass's result, cloned in `run`
            return Ok(());
        }
        for id in (1..self.st.start).map(TypeId::new) {
            if let Some(h) = prep_hash(rec!(self, id), id)? {
                self.st.table.insert(h, id);
            }
        }
        Ok(())
    }

    pub(super) fn add_canonical(&mut self, h: u64, id: TypeId) {
        self.st.table.insert(h, id);
    }

    pub(super) fn prim_types(&mut self) -> Result<(), DedupError> {
        self.prim_types_in(TypeId::new(self.st.start), TypeId::new(self.st.end))
    }

    #[inline(never)]
    pub(super) fn prim_types_in(&mut self, from: TypeId, to: TypeId) -> Result<(), DedupError> {
        for id in (from.get()..to.get()).map(TypeId::new) {
            let (h, new) = match self.kind_of(id) {
                Kind::Const
                | Kind::Volatile
                | Kind::Restrict
                | Kind::Ptr
                | Kind::Typedef
                | Kind::Array
                | Kind::Struct
                | Kind::Union
                | Kind::Func
                | Kind::FuncProto
                | Kind::Var
                | Kind::Datasec
                | Kind::DeclTag
                | Kind::TypeTag => continue,
                Kind::Int => {
                    let w = rec!(self, id);
                    let h = hash_int_tag(w);
                    (h, self.first_match(h, |c| equal_int_tag(w, c)))
                }
                Kind::Fwd | Kind::Float => {
                    let w = rec!(self, id);
                    let h = hash_common(w);
                    (h, self.first_match(h, |c| equal_common(w, c)))
                }
                Kind::Enum | Kind::Enum64
                    if self.st.start == 1
                        && rec!(self, id).vlen() > 0
                        && !self.st.enum_fwds.contains(&rec!(self, id)[0]) =>
                {
                    // Fast path, same result: no enum fwd shares the name, so
                    // the walk could only stop at an equal candidate, and
                    // without a base canonical enums are pairwise unequal —
                    // there is at most one, found here by content.
                    let w = rec!(self, id);
                    let h = hash_enum(w);
                    let ch = content_hash(w);
                    let (words, nodes) = (&self.words, &self.st.nodes);
                    let found = self
                        .st
                        .enums
                        .find(ch, |&e| rec_of(words, nodes, TypeId::new(e)) == w)
                        .map(|&e| TypeId::new(e));
                    if found.is_none() {
                        self.st
                            .enums
                            .insert_unique(ch, id.get(), |&e| content_hash(rec_of(words, nodes, TypeId::new(e))));
                    }
                    (h, found)
                }
                Kind::Enum | Kind::Enum64 => {
                    let w = rec!(self, id);
                    let h = hash_enum(w);
                    if w.vlen() == 0 {
                        self.st.enum_fwds.insert(w[0]);
                    }
                    let mut found = None;
                    let mut cur = self.st.table.first(h);
                    while let Some((cand, c)) = cur {
                        let cw = rec!(self, cand);
                        if equal_enum(w, cw) {
                            found = Some(cand);
                            break;
                        }
                        if compat_enum(w, cw) {
                            if is_enum_fwd(w) {
                                found = Some(cand);
                                break;
                            }
                            // a full enum re-points a canonical enum fwd and keeps looking
                            if self.st.overlap && cand.get() < self.st.struct_done && self.st.link.touched_through(cand)
                            {
                                // A walk since the fwd's CU compared a type by
                                // its link through it; the whole-BTF struct
                                // pass saw this re-pointing done.
                                self.st.give_up =
                                    Some("an enum forward declaration compared in a walk was re-pointed later");
                                return Ok(());
                            }
                            self.set_map(cand, id);
                        }
                        cur = self.st.table.next(c);
                    }
                    if found.is_none() && w.vlen() > 0 && self.st.start == 1 {
                        let ch = content_hash(w);
                        let (words, nodes) = (&self.words, &self.st.nodes);
                        self.st
                            .enums
                            .insert_unique(ch, id.get(), |&e| content_hash(rec_of(words, nodes, TypeId::new(e))));
                    }
                    (h, found)
                }
                Kind::Unkn => {
                    return Err(DedupError::Invalid {
                        id,
                        what: "unknown kind",
                    });
                }
            };
            let target = new.unwrap_or(id);
            self.set_map(id, target);
            if target == id {
                self.add_canonical(h, id);
            }
        }
        Ok(())
    }

    /// First candidate under `h`, in table order, that `eq` accepts.
    #[inline]
    pub(super) fn first_match(&self, h: u64, eq: impl Fn(&[u32]) -> bool) -> Option<TypeId> {
        let mut cur = self.st.table.first(h);
        while let Some((cand, c)) = cur {
            if eq(rec!(self, cand)) {
                return Some(cand);
            }
            cur = self.st.table.next(c);
        }
        None
    }
}
