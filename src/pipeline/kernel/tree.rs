//! A kernel found in a directory tree.

use super::*;

/// A kernel tree: a build directory (`vmlinux` at the top, `*.ko` below
/// it), or an unpacked debug package (`usr/lib/debug/boot/vmlinux-<ver>`
/// with modules under `usr/lib/debug/lib/modules/<ver>/`, Debian and
/// Ubuntu; or `usr/lib/debug/lib/modules/<ver>/vmlinux` with `*.ko.debug`
/// beside it, Fedora). Modules are sorted by path.
pub fn open_tree(root: &Path, name: Option<String>) -> Result<Item, KernelError> {
    let (vmlinux, modules_root) = find_kernel(root)?;
    let rel = |p: &Path| -> String { p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned() };
    let vm = Input::file(vmlinux.clone(), rel(&vmlinux), InputKind::Vmlinux, "vmlinux.btf".into())?;
    let mut found = Vec::new();
    if let Some(mr) = &modules_root {
        walk_modules(mr, &mut found)?;
    }
    found.sort();
    let mut modules = Vec::with_capacity(found.len());
    for p in found {
        let under = p
            .strip_prefix(modules_root.as_deref().unwrap_or(root))
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        let out = format!("modules/{}", module_output_name(&under));
        modules.push(Input::file(p.clone(), rel(&p), InputKind::Module, out));
    }
    Ok(Item {
        name,
        source: root.to_path_buf(),
        vmlinux: vm,
        module_count: Some(modules.len()),
        modules: Box::new(modules.into_iter()),
        package: None,
    })
}

/// `kernel/net/fou.ko` → `kernel/net/fou.btf` (`.ko.debug` likewise).
pub fn module_output_name(path: &str) -> String {
    let stem = path
        .strip_suffix(".ko.debug")
        .or_else(|| path.strip_suffix(".ko"))
        .unwrap_or(path);
    format!("{stem}.btf")
}

fn is_module(p: &Path) -> bool {
    let n = p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    n.ends_with(".ko") || n.ends_with(".ko.debug")
}

/// The vmlinux of the tree at `root` and the root of its modules.
fn find_kernel(root: &Path) -> Result<(PathBuf, Option<PathBuf>), KernelError> {
    let top = root.join("vmlinux");
    if top.is_file() {
        return Ok((top, Some(root.to_path_buf())));
    }
    let debug = root.join("usr/lib/debug");
    let mods_dirs = [debug.join("lib/modules"), debug.join("usr/lib/modules")];
    // Debian/Ubuntu: boot/vmlinux-<ver>
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(debug.join("boot")) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(ver) = n.strip_prefix("vmlinux-")
                && e.path().is_file()
            {
                found.push((e.path(), ver.to_string()));
            }
        }
    }
    // Fedora: lib/modules/<ver>/vmlinux
    for md in &mods_dirs {
        if let Ok(rd) = std::fs::read_dir(md) {
            for e in rd.flatten() {
                let v = e.path().join("vmlinux");
                if v.is_file() {
                    found.push((v, e.file_name().to_string_lossy().into_owned()));
                }
            }
        }
    }
    found.sort();
    // Debian's lib/modules/<ver>/vmlinux is a symlink to boot/vmlinux-<ver>:
    // one kernel, found twice (the boot/ path, found first, is kept).
    let mut seen = Vec::new();
    found.retain(|(p, _)| {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        let new = !seen.contains(&real);
        seen.push(real);
        new
    });
    match found.as_slice() {
        [] => Err(KernelError::NoVmlinux {
            root: root.to_path_buf(),
        }),
        [(vm, ver)] => {
            let mods = mods_dirs.iter().map(|d| d.join(ver)).find(|d| d.is_dir());
            Ok((vm.clone(), mods))
        }
        [(a, _), (b, _), ..] => Err(KernelError::SeveralKernels {
            root: root.to_path_buf(),
            a: a.clone(),
            b: b.clone(),
        }),
    }
}

fn walk_modules(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), KernelError> {
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let p = e.path();
        let ft = e.file_type().map_err(io(&p))?;
        if ft.is_dir() {
            walk_modules(&p, out)?;
        } else if (ft.is_file() || (ft.is_symlink() && p.is_file())) && is_module(&p) {
            out.push(p);
        }
    }
    Ok(())
}
