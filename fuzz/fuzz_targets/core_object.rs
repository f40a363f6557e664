//! The CO-RE check on arbitrary bytes: a BPF object that parses is
//! relocated against its own BTF (a target with every local name, so
//! candidates, specs and patches all run) with libbpf's log kept, and
//! must not panic or hang.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use btfkit::core::{BpfObject, Log, Target, check};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(obj) = BpfObject::parse(Path::new("fuzz.bpf.o"), data) {
        let mut target = (*obj.btf).clone();
        target.set_endian(btfkit::btf::Endian::native());
        let target = Target::single("self", Arc::new(target));
        let _ = check(&obj, &target, &mut Log::on());
    }
});
