//! C names (with `___N` suffixes for repeats within a namespace) and
//! declarators: the type chain around a name (`int (*fname)[4]`).

use std::borrow::Cow;
use std::io::Write as _;

use hashbrown::HashMap;

use super::{CDumpError, Dumper, MAX_DEPTH, Result};
use crate::btf::Kind;

impl<'a> Dumper<'a> {
    // ---- names ----

    /// One more occurrence of `name` in a namespace; returns the count so far.
    pub(super) fn bump(map: &mut HashMap<&'a [u8], u32>, name: &'a [u8]) -> u32 {
        let c = map.entry(name).or_insert(0);
        *c += 1;
        *c
    }

    /// The C name of type `id` in the tag (`ident == false`) or ordinary
    /// identifier namespace, fixed on first use: the N-th distinct type
    /// using a name gets `name___N`.
    pub(super) fn resolve_name(&mut self, id: u32, ident: bool) -> Cow<'a, [u8]> {
        let t = self.ty(id);
        if t.name_off().0 == 0 {
            return Cow::Borrowed(b"");
        }
        let name = self.str(t.name_off().0);
        if self.st[id as usize].name_resolved {
            return match self.renamed.get(&id) {
                Some(n) => Cow::Owned(n.clone()),
                None => Cow::Borrowed(name),
            };
        }
        self.st[id as usize].name_resolved = true;
        // Declarations without a body never clash with their definition.
        let k = t.kind();
        if k == Kind::Fwd || (k == Kind::Enum && t.vlen() == 0) {
            return Cow::Borrowed(name);
        }
        let map = if ident {
            &mut self.ident_names
        } else {
            &mut self.tag_names
        };
        let n = Self::bump(map, name);
        if n > 1 {
            let mut s = name.to_vec();
            write!(s, "___{n}").unwrap();
            // The reference formats into a 256-byte buffer.
            s.truncate(255);
            self.renamed.insert(id, s.clone());
            return Cow::Owned(s);
        }
        Cow::Borrowed(name)
    }

    pub(super) fn put_tag_name(&mut self, id: u32) {
        let n = self.resolve_name(id, false);
        self.out.extend_from_slice(&n);
    }

    // ---- declarators ----

    /// Writes a declaration of `fname` with type `id` (`int (*fname)[4]`...).
    pub(super) fn decl(&mut self, id: u32, fname: &[u8], lvl: usize, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id });
        }
        // The chain from the declared name down to the base type, pushed on
        // the shared stack; it is written from the base type outwards.
        let start = self.stack.len();
        let mut cur = id;
        loop {
            if self.stack.len() - start > MAX_DEPTH as usize {
                self.stack.truncate(start);
                return Err(CDumpError::TooDeep { id });
            }
            self.stack.push(cur);
            if cur == 0 {
                break;
            }
            let t = self.ty(cur);
            match t.kind() {
                Kind::Ptr | Kind::Volatile | Kind::Const | Kind::Restrict | Kind::FuncProto | Kind::TypeTag => {
                    cur = t.type_id().0
                }
                Kind::Array => cur = t.array().0.0,
                // Base types end the chain; kinds that cannot appear in a
                // declarator end it too and are skipped when written.
                _ => break,
            }
        }
        let mut cnt = self.stack.len() - start;
        let r = self.chain(start, &mut cnt, fname, lvl, depth + 1);
        self.stack.truncate(start);
        r
    }

    /// Writes the const/volatile/restrict on top of the frame (they precede a
    /// base type in C).
    fn leading_mods(&mut self, start: usize, cnt: &mut usize) {
        while *cnt > 0 {
            let id = self.stack[start + *cnt - 1];
            let word: &[u8] = match self.kind(id) {
                Kind::Volatile => b"volatile ",
                Kind::Const => b"const ",
                Kind::Restrict => b"restrict ",
                _ => return,
            };
            self.out.extend_from_slice(word);
            *cnt -= 1;
        }
    }

    /// Drops qualifiers (and type tags) on top of the frame: GCC puts
    /// qualifiers of the elements on arrays and `volatile` on noreturn
    /// function pointers; C has no place for them there.
    fn drop_mods(&mut self, start: usize, cnt: &mut usize) {
        while *cnt > 0 {
            let id = self.stack[start + *cnt - 1];
            if !matches!(
                self.kind(id),
                Kind::Volatile | Kind::Const | Kind::Restrict | Kind::TypeTag
            ) {
                return;
            }
            *cnt -= 1;
        }
    }

    fn put_name(&mut self, fname: &[u8], last_was_ptr: bool) {
        if !fname.is_empty() && !last_was_ptr {
            self.out.push(b' ');
        }
        self.out.extend_from_slice(fname);
    }

    fn chain(&mut self, start: usize, cnt: &mut usize, fname: &[u8], lvl: usize, depth: u32) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(CDumpError::TooDeep { id: self.stack[start] });
        }
        // `int ***p`, not `int * * *p`; true at first so that a lone pointer
        // in a function-pointer frame is written `(*name)`.
        let mut last_was_ptr = true;
        while *cnt > 0 {
            *cnt -= 1;
            let id = self.stack[start + *cnt];
            if id == 0 {
                self.leading_mods(start, cnt);
                self.out.extend_from_slice(b"void");
                last_was_ptr = false;
                continue;
            }
            let t = self.ty(id);
            let kind = t.kind();
            match kind {
                Kind::Int | Kind::Float => {
                    self.leading_mods(start, cnt);
                    self.out.extend_from_slice(self.str(t.name_off().0));
                }
                Kind::Struct | Kind::Union => {
                    self.leading_mods(start, cnt);
                    if t.name_off().0 == 0 {
                        self.struct_def(id, t, lvl, depth)?;
                    } else {
                        self.struct_fwd(id, t);
                    }
                }
                Kind::Enum | Kind::Enum64 => {
                    self.leading_mods(start, cnt);
                    if t.name_off().0 == 0 {
                        self.enum_def(id, t, lvl);
                    } else {
                        self.enum_fwd(id);
                    }
                }
                Kind::Fwd => {
                    self.leading_mods(start, cnt);
                    self.fwd_def(id, t);
                }
                Kind::Typedef => {
                    self.leading_mods(start, cnt);
                    let n = self.resolve_name(id, true);
                    self.out.extend_from_slice(&n);
                }
                Kind::Ptr => self.out.extend_from_slice(if last_was_ptr { b"*" } else { b" *" }),
                Kind::Volatile => self.out.extend_from_slice(b" volatile"),
                Kind::Const => self.out.extend_from_slice(b" const"),
                Kind::Restrict => self.out.extend_from_slice(b" restrict"),
                Kind::TypeTag => {
                    self.leading_mods(start, cnt);
                    // An attribute tag (kind flag, `attributes` feature):
                    // libbpf 1.8 writes the attribute itself.
                    if t.kflag() && matches!(self.opts.style, super::Style::Bpftool78 { .. }) {
                        self.out.extend_from_slice(b" __attribute__((");
                        self.out.extend_from_slice(self.str(t.name_off().0));
                        self.out.extend_from_slice(b"))");
                    } else {
                        self.out.extend_from_slice(b" __attribute__((btf_type_tag(\"");
                        self.out.extend_from_slice(self.str(t.name_off().0));
                        self.out.extend_from_slice(b"\")))");
                    }
                }
                Kind::Array => {
                    let nelems = t.array().2;
                    self.drop_mods(start, cnt);
                    if *cnt == 0 {
                        self.put_name(fname, last_was_ptr);
                        write!(self.out, "[{nelems}]").unwrap();
                        return Ok(());
                    }
                    let next = self.stack[start + *cnt - 1];
                    // `int a[2][3]`, but `int (*a)[3]`.
                    let multidim = self.kind(next) == Kind::Array;
                    if !fname.is_empty() && !last_was_ptr {
                        self.out.push(b' ');
                    }
                    if !multidim {
                        self.out.push(b'(');
                    }
                    self.chain(start, cnt, fname, lvl, depth + 1)?;
                    if !multidim {
                        self.out.push(b')');
                    }
                    write!(self.out, "[{nelems}]").unwrap();
                    return Ok(());
                }
                Kind::FuncProto => {
                    self.drop_mods(start, cnt);
                    if *cnt > 0 {
                        self.out.extend_from_slice(b" (");
                        self.chain(start, cnt, fname, lvl, depth + 1)?;
                        self.out.push(b')');
                    } else {
                        self.put_name(fname, last_was_ptr);
                    }
                    self.out.push(b'(');
                    let vlen = t.vlen() as usize;
                    // No parameters (or clang's single void one): `(void)`,
                    // as this version (with the 2024 stable fix) writes it.
                    if vlen == 0 || (vlen == 1 && t.pairs().next().is_some_and(|p| p[1] == 0)) {
                        self.out.extend_from_slice(b"void)");
                        return Ok(());
                    }
                    for (i, [pname, pty]) in t.pairs().enumerate() {
                        if i > 0 {
                            self.out.extend_from_slice(b", ");
                        }
                        // A trailing void parameter means varargs.
                        if i == vlen - 1 && pty == 0 {
                            self.out.extend_from_slice(b"...");
                            break;
                        }
                        self.decl(pty, self.str(pname), lvl, depth + 1)?;
                    }
                    self.out.push(b')');
                    return Ok(());
                }
                // Func, var, datasec, decl tag: no declarator form; the
                // reference stops the declaration here.
                _ => return Ok(()),
            }
            last_was_ptr = kind == Kind::Ptr;
        }
        self.put_name(fname, last_was_ptr);
        Ok(())
    }
}
