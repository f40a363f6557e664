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

/// The scalar `u32` parameters and results of the functions in `text`
/// (test modules left out): `(fn, "param NAME")` or `(fn, "returns TYPE")`.
/// A `u32` inside a slice or a `Vec` (a record's words, a column) is not
/// scalar.
fn bare_u32s(text: &str) -> Vec<(String, String)> {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
    let bare = |ty: &str| {
        let ty = ty.replace("Vec<u32>", "").replace("[u32]", "").replace("[u32;", "");
        ty.split(|c: char| !c.is_alphanumeric() && c != '_').any(|t| t == "u32")
    };
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("fn ") {
        let preceded_ok = at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        rest = &rest[at + 3..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let Some(open) = rest.find('(') else { break };
        if !preceded_ok || name.is_empty() || rest[name.len()..open].contains(['{', ';']) {
            continue;
        }
        // the parameter list, to its matching parenthesis
        let (mut depth, mut close) = (0i32, open);
        for (i, c) in rest[open..].char_indices() {
            match c {
                '(' | '[' | '<' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if !rest[open..open + i].ends_with('-') => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                close = open + i;
                break;
            }
        }
        let params = &rest[open + 1..close];
        let (mut d, mut cur, mut parts) = (0i32, String::new(), Vec::new());
        for c in params.chars() {
            match c {
                '(' | '[' | '<' => d += 1,
                ')' | ']' | '>' => d -= 1,
                _ => {}
            }
            if c == ',' && d == 0 {
                parts.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        for p in parts {
            if let Some((n, t)) = p.split_once(':')
                && t.trim() == "u32"
            {
                out.push((name.clone(), format!("param {}", n.trim())));
            }
        }
        let after = &rest[close + 1..];
        let end = after.find(['{', ';']).unwrap_or(after.len());
        let sig_tail = &after[..end];
        if let Some(ret) = sig_tail.split("->").nth(1) {
            let ret = ret.split(" where").next().unwrap_or(ret).trim();
            if bare(ret) {
                out.push((name.clone(), format!("returns {ret}")));
            }
        }
    }
    out
}

/// Issue 49: dedup and the merge speak of type ids as `TypeId`. What may
/// still be a `u32` is named here: offsets into the record words, raw kind
/// numbers, counts and depths, words being hashed.
#[test]
fn dedup_and_merge_signatures_take_type_ids_as_type_id() {
    const NOT_IDS: &[&str] = &["off", "at", "shift", "kind", "n", "depth", "min", "window", "word"];
    // functions whose u32 result is a word offset, not an id
    const OFFSET_RESULTS: &[&str] = &["offsets.rs:get", "offsets.rs:try_get", "structs.rs:offset_of"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/dedup"), &mut files);
    files.retain(|f| !f.ends_with("tests.rs"));
    files.push(root.join("src/encode/merge.rs"));
    let mut bad = Vec::new();
    for f in &files {
        let file = f.file_name().unwrap().to_string_lossy();
        for (func, what) in bare_u32s(&fs::read_to_string(f).unwrap()) {
            let allowed = match what.strip_prefix("param ") {
                Some(name) => NOT_IDS.contains(&name),
                None => OFFSET_RESULTS.contains(&format!("{file}:{func}").as_str()),
            };
            if !allowed {
                bad.push(format!("{file}: fn {func}: {what}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "bare u32 in dedup/merge signatures (a type id is a TypeId; name an offset, kind or count as such):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_signature_check_sees_bare_u32s() {
    let found = bare_u32s(
        "fn resolve(&self, id: u32) -> u32 {}\nfn rec(words: &[u32], v: Vec<u32>, off: u32) -> &[u32] {}\n\
         pub(super) fn pair(&self, n: usize) -> Option<(u32, TypeId)> {}\nfn ok(id: TypeId) -> Vec<u32> {}\n\
         #[cfg(test)]\nmod tests { fn hidden(id: u32) {} }",
    );
    let want = [
        ("resolve", "param id"),
        ("resolve", "returns u32"),
        ("rec", "param off"),
        ("pair", "returns Option<(u32, TypeId)>"),
    ];
    assert_eq!(found, want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
}
