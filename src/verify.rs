//! `verify`: ask the running kernel's BTF verifier (`bpf(BPF_BTF_LOAD)`).
//!
//! We load without a log first: a verbose log can overflow its buffer and
//! make the kernel refuse a valid blob with ENOSPC. Only on refusal do we
//! load again with a large log to show why.

use std::path::Path;
use std::sync::Arc;

use crate::btf::{self, Btf, KERNEL_MAX_BTF_SIZE};
use crate::error::Result;

const BPF_BTF_LOAD: libc::c_long = 18;
/// Large enough for the kernel's log of any blob within the 16 MiB limit.
const LOG_SIZE: usize = 256 << 20;

#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    btf_log_true_size: u32,
}

/// The kernel's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Refused, with the tail of the verifier log and the errno.
    Refused {
        errno: i32,
        log: String,
    },
    /// The kernel could not be asked.
    CannotAsk(String),
}

fn load(bytes: &[u8], log: Option<&mut Vec<u8>>) -> Result<(), i32> {
    let mut attr = BtfLoadAttr {
        btf: bytes.as_ptr() as u64,
        btf_size: bytes.len() as u32,
        ..Default::default()
    };
    if let Some(buf) = log {
        attr.btf_log_buf = buf.as_mut_ptr() as u64;
        attr.btf_log_size = buf.len() as u32;
        attr.btf_log_level = 1;
    }
    // SAFETY: attr points at live buffers of the sizes given for the whole call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_BTF_LOAD,
            &mut attr as *mut BtfLoadAttr,
            std::mem::size_of::<BtfLoadAttr>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: fd was just returned to us by the kernel.
    unsafe { libc::close(fd as i32) };
    Ok(())
}

/// Asks the kernel about a standalone, native-byte-order BTF blob.
pub fn verify_bytes(bytes: &[u8]) -> Verdict {
    if bytes.len() > KERNEL_MAX_BTF_SIZE {
        return Verdict::CannotAsk(format!(
            "{} bytes is above the kernel's {} byte limit for BPF_BTF_LOAD",
            bytes.len(),
            KERNEL_MAX_BTF_SIZE
        ));
    }
    match load(bytes, None) {
        Ok(()) => Verdict::Accepted,
        Err(e) if e == libc::EPERM || e == libc::EACCES => {
            Verdict::CannotAsk("permission denied: BPF_BTF_LOAD needs root or CAP_BPF".into())
        }
        Err(e) if e == libc::ENOSYS => Verdict::CannotAsk("this kernel has no bpf() system call".into()),
        Err(errno) => {
            let mut buf = vec![0u8; LOG_SIZE];
            let _ = load(bytes, Some(&mut buf));
            let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let text = String::from_utf8_lossy(&buf[..n]);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(5)..].join("\n");
            Verdict::Refused { errno, log: tail }
        }
    }
}

/// The last non-empty line of a refusal log (what `kernel-rejects.tsv` records).
pub fn last_line(log: &str) -> &str {
    log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// What the kernel is asked about for a file ([`payload`]).
pub struct Payload {
    /// Native byte order and standalone: split BTF merged onto its base,
    /// ids and offsets unchanged.
    pub bytes: Vec<u8>,
    /// The size of the file's own BTF (the raw file, or its `.BTF`
    /// section), which `bytes` exceeds when a base was merged in.
    pub own_len: usize,
    /// Why btfkit's own reader refuses the BTF, where the bytes could be
    /// passed to the kernel as they are all the same.
    pub reader_refused: Option<crate::error::Error>,
}

/// The bytes the kernel is asked about for `file`. Standalone BTF in the
/// native byte order (a raw file, or an ELF file's `.BTF` without a
/// `.BTF.base`) is passed untouched, even when btfkit's reader refuses it:
/// the point is the kernel's judgement, not our reader's, and the reader's
/// objection is reported beside it. Other BTF has to be read to be
/// merged or byte-swapped; a reader's refusal is then an error.
pub fn payload(file: &Path, base: Option<Arc<Btf>>) -> Result<Payload> {
    let input = crate::elf::Input::open(file)?;
    let raw = crate::elf::raw_btf(file, input.bytes())?;
    let has_base_section = !input.is_btf()
        && input
            .object()
            .is_ok_and(|o| object::Object::section_by_name(&o, ".BTF.base").is_some());
    if base.is_none() && !has_base_section && raw.get(..2) == Some(&btf::BTF_MAGIC.to_ne_bytes()[..]) {
        let reader_refused = crate::elf::load_btf_bytes(file, input.bytes(), None).err();
        return Ok(Payload {
            own_len: raw.len(),
            bytes: raw.into_owned(),
            reader_refused,
        });
    }
    let own_len = raw.len();
    let mut b = crate::elf::load_btf_bytes(file, input.bytes(), base)?;
    b.set_endian(btf::Endian::native());
    let bytes = if b.base().is_some() {
        btf::write::merged_bytes(&b)
    } else {
        btf::write::to_bytes(&b)
    };
    Ok(Payload {
        bytes,
        own_len,
        reader_refused: None,
    })
}
