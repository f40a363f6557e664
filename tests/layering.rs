//! The layering ARCHITECTURE.md promises, checked against the code: each
//! library module may name only the modules its row of the code map lists
//! under "may use" (`crate::x` anywhere in its files, `use crate::{x, …}`
//! included), and the modules it does name form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// module → the modules it may use, from ARCHITECTURE.md's code map.
fn allowed() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut rows = doc.lines().skip_while(|l| !l.starts_with("## Code map"));
    let header = rows.find(|l| l.starts_with('|')).expect("the code map table");
    let cols: Vec<&str> = header.split('|').map(str::trim).collect();
    let may = cols.iter().position(|c| *c == "may use").expect("a \"may use\" column");
    let mut map = BTreeMap::new();
    for row in rows
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("|--") && !l.starts_with("| --"))
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(name) = backticked(cells[1]).into_iter().next() else {
            continue;
        };
        map.insert(name, backticked(cells[may]).into_iter().collect());
    }
    map
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The crate modules `text` names: `crate::x` paths and `use crate::{x, y::…}`
/// (the crate root's re-export `Error` counts as its module, `error`).
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| {
        let id: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if id == "Error" { "error".to_string() } else { id }
    };
    for (i, _) in text.match_indices("crate::") {
        // `$crate::` is a macro's own crate path, not a module use
        if text[..i].ends_with('$') {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(body.split(',').map(|p| ident(p.trim())).filter(|s| !s.is_empty()));
        } else {
            out.insert(ident(rest));
        }
    }
    out
}

/// module → the modules its files name (lines that are comments skipped).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let code: String = fs::read_to_string(&f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .map(|l| format!("{l}\n"))
            .collect();
        let named = named_modules(&code);
        map.entry(module.clone())
            .or_default()
            .extend(named.into_iter().filter(|m| *m != module));
    }
    map
}

#[test]
fn every_module_uses_only_what_the_code_map_allows() {
    let allowed = allowed();
    let mut wrong = Vec::new();
    for (module, uses) in imports() {
        let Some(may) = allowed.get(&module) else {
            wrong.push(format!("`{module}` has no row in ARCHITECTURE.md's code map"));
            continue;
        };
        for u in uses.difference(may) {
            wrong.push(format!(
                "`{module}` uses `{u}`, which its row of the code map does not allow"
            ));
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn modules_import_no_cycle() {
    let graph = imports();
    // Depth-first search for a back edge, reporting the cycle found.
    fn visit<'g>(
        m: &'g str,
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'g str>,
        done: &mut BTreeSet<&'g str>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            return Some(format!("{} -> {m}", path[i..].join(" -> ")));
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for n in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        if let Some(cycle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle: {cycle}");
        }
    }
}

#[test]
fn the_checker_sees_grouped_and_inline_paths() {
    let named =
        named_modules("use crate::{btf::TypeId, elf};\nlet x = crate::dwarf::loc::f();\n$crate::cli::x crate::Error");
    assert_eq!(
        named,
        ["btf", "dwarf", "elf", "error"].into_iter().map(String::from).collect()
    );
}
