//! A kernel as the CO-RE check sees it: the vmlinux BTF and its modules'
//! split BTF, each indexed once by essential type name, so that a
//! candidate search is a hash lookup instead of libbpf's scan of every
//! type, and one parse serves every object checked against the kernel.

use std::sync::Arc;

use hashbrown::HashMap;

use super::types;
use crate::btf::{Btf, Kind, TypeId};

/// One BTF of a kernel: the vmlinux's or a module's.
#[derive(Debug)]
pub struct TargetBtf {
    /// `vmlinux`, or the module's name, as libbpf's log names it.
    pub name: String,
    pub btf: Arc<Btf>,
    pub ptr_size: u32,
    /// Own named types by essential name, ids ascending.
    index: HashMap<Box<[u8]>, Vec<TypeId>>,
}

impl TargetBtf {
    pub fn new(name: impl Into<String>, btf: Arc<Btf>) -> TargetBtf {
        let mut index: HashMap<Box<[u8]>, Vec<TypeId>> = HashMap::new();
        for id in btf.own_ids() {
            let t = btf.ty(id);
            let n = types::name(&btf, &t);
            if n.is_empty() {
                continue;
            }
            let e = types::essential(n);
            match index.get_mut(e) {
                Some(v) => v.push(id),
                None => {
                    index.insert(e.into(), vec![id]);
                }
            }
        }
        let ptr_size = types::ptr_size(&btf);
        TargetBtf {
            name: name.into(),
            btf,
            ptr_size,
            index,
        }
    }

    /// Own types whose essential name is `essential`, ascending.
    pub fn named(&self, essential: &[u8]) -> &[TypeId] {
        self.index.get(essential).map_or(&[], |v| v.as_slice())
    }
}

/// A kernel: vmlinux first, then its modules in a fixed order.
#[derive(Debug)]
pub struct Target {
    /// How reports name this kernel (a path, a release).
    pub name: String,
    /// `btfs[0]` is the vmlinux; the rest are modules over it.
    pub btfs: Vec<TargetBtf>,
}

/// Which BTF of a target a candidate lives in (0 is the vmlinux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct BtfIdx(u16);

impl BtfIdx {
    pub const VMLINUX: BtfIdx = BtfIdx(0);
    #[inline]
    pub fn new(index: u16) -> BtfIdx {
        BtfIdx(index)
    }
    /// The position in the target's list of BTFs.
    #[inline]
    pub fn get(self) -> u16 {
        self.0
    }
}

/// A candidate target type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cand {
    pub btf: BtfIdx,
    pub id: TypeId,
}

impl Target {
    /// A kernel of one standalone BTF (no modules).
    pub fn single(name: impl Into<String>, btf: Arc<Btf>) -> Target {
        Target {
            name: name.into(),
            btfs: vec![TargetBtf::new("vmlinux", btf)],
        }
    }

    /// A kernel with modules: `modules` are split BTF over `vmlinux`.
    pub fn with_modules(name: impl Into<String>, vmlinux: Arc<Btf>, modules: Vec<(String, Arc<Btf>)>) -> Target {
        let mut btfs = vec![TargetBtf::new("vmlinux", vmlinux)];
        btfs.extend(modules.into_iter().map(|(n, b)| TargetBtf::new(n, b)));
        Target {
            name: name.into(),
            btfs,
        }
    }

    pub fn vmlinux(&self) -> &TargetBtf {
        &self.btfs[0]
    }

    pub fn btf(&self, i: BtfIdx) -> &TargetBtf {
        &self.btfs[i.0 as usize]
    }

    /// libbpf's candidate search for a local type of kind `kind` named
    /// `name` (non-empty): matching types of the vmlinux, or, only if it
    /// has none, of every module in order.
    pub fn candidates(&self, kind: Kind, name: &[u8]) -> Vec<Cand> {
        let ess = types::essential(name);
        let mut out = Vec::new();
        for (i, tb) in self.btfs.iter().enumerate() {
            if i == 1 && !out.is_empty() {
                break;
            }
            for &id in tb.named(ess) {
                let k = tb.btf.ty(id).kind();
                let compat =
                    k == kind || (matches!(k, Kind::Enum | Kind::Enum64) && matches!(kind, Kind::Enum | Kind::Enum64));
                if compat {
                    out.push(Cand {
                        btf: BtfIdx::new(i as u16),
                        id,
                    });
                }
            }
        }
        out
    }
}
