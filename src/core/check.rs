//! The answer per program: does it load on this kernel, as far as CO-RE
//! decides?
//!
//! - `ok`: every relocation resolved, or the only poisoned instructions are
//!   ones the verifier will prove dead (guarded code, [`super::reach`]);
//! - `poisoned`: a poisoned instruction is reachable, so the verifier
//!   rejects the program (`invalid func unknown#195896080`);
//! - `error`: libbpf stops relocating and refuses the whole object.

use hashbrown::HashMap;

use super::ReloKind;
use super::log::Log;
use super::object::BpfObject;
use super::reach::{self, Reach};
use super::relocate::{self, Failure, Outcome, PoisonCause, Relocated};
use super::target::Target;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Ok,
    Poisoned,
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Poisoned => "poisoned",
            Verdict::Error => "error",
        }
    }

    /// The verdict [`Verdict::as_str`] names.
    pub fn from_name(name: &str) -> Option<Verdict> {
        [Verdict::Ok, Verdict::Poisoned, Verdict::Error]
            .into_iter()
            .find(|v| v.as_str() == name)
    }
}

/// A poisoned instruction the verifier can reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoisonSite {
    /// The function holding it (a program, or a subprogram it calls).
    pub function: String,
    pub insn: u32,
    pub kind: ReloKind,
    /// The access path that found no target, e.g. `struct request.rq_disk`.
    pub path: String,
    pub cause: PoisonCause,
}

#[derive(Clone, Debug)]
pub struct ProgramVerdict {
    pub name: String,
    pub section: String,
    pub verdict: Verdict,
    pub poisons: Vec<PoisonSite>,
    /// Poisoned instructions in reach of the program's code that no path
    /// reaches (guarded by a relocated constant).
    pub guarded: usize,
    /// False when the reachability walk ran out of budget and counted
    /// every poison as reachable.
    pub exact: bool,
}

/// Why libbpf refuses the object on this kernel.
#[derive(Clone, Debug)]
pub struct ObjectError {
    pub section: String,
    pub relo: usize,
    pub program: Option<String>,
    pub insn: u32,
    pub path: String,
    pub failure: Failure,
}

#[derive(Debug)]
pub struct ObjectVerdict {
    pub verdict: Verdict,
    pub programs: Vec<ProgramVerdict>,
    pub error: Option<ObjectError>,
    pub relocated: Relocated,
}

/// Checks `obj` against `target`.
pub fn check(obj: &BpfObject, target: &Target, log: &mut Log) -> ObjectVerdict {
    let relocated = relocate::relocate(obj, target, log);
    let section_of_block = |b: usize| {
        let off = obj.ext.blocks[b].sec_name;
        String::from_utf8_lossy(obj.btf.str_at(off).unwrap_or(b"")).into_owned()
    };
    let entries: Vec<usize> = (0..obj.programs.len())
        .filter(|&p| obj.programs[p].autoload && !is_subprog(obj, p))
        .collect();
    if let Some(r) = relocated.failure() {
        let Outcome::Failed(failure) = &r.outcome else {
            unreachable!("failure() finds a Failed outcome")
        };
        let error = ObjectError {
            section: section_of_block(r.block),
            relo: r.index,
            program: r.program.map(|p| obj.programs[p].name.clone()),
            insn: r.insn,
            path: r.path.clone(),
            failure: failure.clone(),
        };
        let programs = entries
            .iter()
            .map(|&p| ProgramVerdict {
                name: obj.programs[p].name.clone(),
                section: obj.program_section(&obj.programs[p]).to_string(),
                verdict: Verdict::Error,
                poisons: Vec::new(),
                guarded: 0,
                exact: true,
            })
            .collect();
        return ObjectVerdict {
            verdict: Verdict::Error,
            programs,
            error: Some(error),
            relocated,
        };
    }

    // Poisoned relocations by (function, instruction).
    let mut poisoned: HashMap<(usize, u32), usize> = HashMap::new();
    for (k, r) in relocated.relocations.iter().enumerate() {
        if let (Outcome::Poisoned(_), Some(p)) = (&r.outcome, r.program) {
            poisoned.insert((p, r.insn), k);
        }
    }
    let calls = obj.calls.iter().map(|c| (c.from, c.to)).collect();
    let mut walks: HashMap<usize, Reach> = HashMap::new();
    let mut programs = Vec::new();
    for &p in &entries {
        // every function reachable from the program, the program first
        let mut order = vec![p];
        let mut k = 0;
        while k < order.len() {
            let f = order[k];
            let w = walks
                .entry(f)
                .or_insert_with(|| reach::walk(obj, f, &relocated.insns[f], &calls));
            for &c in &w.callees {
                if !order.contains(&c) {
                    order.push(c);
                }
            }
            k += 1;
        }
        let mut poisons = Vec::new();
        let mut guarded = 0;
        let mut exact = true;
        for &f in &order {
            let w = &walks[&f];
            exact &= w.exact;
            for (&(func, insn), &ri) in &poisoned {
                if func != f {
                    continue;
                }
                let r = &relocated.relocations[ri];
                if w.poisons.contains(&insn) {
                    let Outcome::Poisoned(cause) = r.outcome else {
                        unreachable!()
                    };
                    poisons.push(PoisonSite {
                        function: obj.programs[f].name.clone(),
                        insn,
                        kind: r.kind.expect("a poisoned relocation has a kind"),
                        path: r.path.clone(),
                        cause,
                    });
                } else {
                    guarded += 1;
                }
            }
        }
        poisons.sort_by(|a, b| (&a.function, a.insn).cmp(&(&b.function, b.insn)));
        programs.push(ProgramVerdict {
            name: obj.programs[p].name.clone(),
            section: obj.program_section(&obj.programs[p]).to_string(),
            verdict: if poisons.is_empty() {
                Verdict::Ok
            } else {
                Verdict::Poisoned
            },
            poisons,
            guarded,
            exact,
        });
    }
    let verdict = programs.iter().map(|p| p.verdict).max().unwrap_or(Verdict::Ok);
    ObjectVerdict {
        verdict,
        programs,
        error: None,
        relocated,
    }
}

/// libbpf's `prog_is_subprog`: a `.text` function, when the object has
/// more than one.
pub fn is_subprog(obj: &BpfObject, p: usize) -> bool {
    obj.section(obj.programs[p].section).name == ".text" && obj.programs.len() > 1
}
