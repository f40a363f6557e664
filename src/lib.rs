//! btfkit: DWARF → BTF encoding, deduplication and inspection.
//!
//! Phases (see ARCHITECTURE.md): `elf` → `dwarf` → `encode` → `dedup` →
//! `btf` (model, reader, writer). [`pipeline`] runs them in order, as the
//! command line does; `cli` sits on top and is the only place that knows
//! about command lines and exit codes.
//!
//! A program embedding btfkit gets the command line's pipeline by building
//! a [`pipeline::Plan`] and running it:
//!
//! ```no_run
//! use btfkit::encode::{Features, Options};
//! use btfkit::pipeline::{self, Plan};
//!
//! // The kernel build's features, as `pahole --btf_features=...` takes them.
//! let mut features = Features::default();
//! let unknown = features.apply_list("encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func");
//! assert!(unknown.is_empty());
//! let opts = Options {
//!     features,
//!     no_funcs: false,
//!     jobs: 2,
//!     ..Options::default()
//! };
//! let mut plan = Plan::new("vmlinux", opts);
//! plan.output = Some("vmlinux.btf".into());
//! let done = pipeline::execute(&plan)?;
//! println!(
//!     "{} types before dedup, {} after",
//!     done.pre_dedup_types,
//!     done.btf.own_type_count()
//! );
//! # Ok::<(), pipeline::Error>(())
//! ```

pub mod btf;
pub mod core;
pub mod dedup;
pub mod diff;
pub mod elf;
pub mod error;
pub mod funcs;
pub mod heap;
pub mod metrics;
pub mod output;
pub mod package;
pub mod pipeline;
pub mod report;
#[doc(hidden)]
pub mod testing;
pub mod verify;

pub use error::Error;
pub mod dwarf;
pub mod encode;
