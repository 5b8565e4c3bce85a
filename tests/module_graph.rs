//! The layering of `src/vcenter/`, checked on the source text (DESIGN.md "Module maps"):
//!
//! 1. the modules of `src/vcenter/` (one per file) depend on each other without a cycle;
//! 2. `vcenter::model` refers to nothing in the crate but other `model` modules;
//! 3. the planners (`src/plan/`) see vCenter only through `vcenter::model`.
//!
//! A module depends on another when its code (comments and string literals aside) names it:
//! `use super::{a, b::c}`, `use crate::vcenter::x`, or a path such as `super::x::Y` in an
//! expression. A name imported or re-exported by a module (`pub use model::error::Error` in
//! `vcenter/mod.rs`) resolves to where it comes from, so `crate::vcenter::Error` is an edge to
//! `model::error`, not to the facade. `mod x;` declarations are containment, not dependencies.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// One reference found in a file: the absolute path it names (starting at the crate root, e.g.
/// `vcenter::model::moref::MoRef`) and how it was written.
#[derive(Clone, Debug)]
struct Reference {
    path: ModPath,
    written: String,
}

/// What one file says: its references, and the names its own `use` declarations bring in
/// (name → absolute path), which other modules may reach through it.
#[derive(Debug, Default)]
struct FileFacts {
    references: Vec<Reference>,
    imports: BTreeMap<String, ModPath>,
}

// ---------------------------------------------------------------------------------------------
// Lexing: code without comments and literals, as tokens.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

/// Tokens of `src`, dropping comments, string, raw string and char literals.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Tok::Other);
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}'), else a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            out.push(Tok::Other);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            if let ("r" | "br", Some(end)) = (word.as_str(), raw_string_end(&c, i)) {
                i = end;
                out.push(Tok::Other);
            } else {
                out.push(Tok::Ident(word));
            }
        } else {
            i += 1;
            out.push(match ch {
                ':' if next == Some(':') => {
                    i += 1;
                    Tok::PathSep
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '*' => Tok::Star,
                _ => Tok::Other,
            });
        }
    }
    out
}

/// Where a raw string whose `r` ends before `i` (`r"…"`, `r#"…"#`) ends, if one starts there.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

// ---------------------------------------------------------------------------------------------
// References of one file.

/// Reads the references of one file, whose module is `module` (`["vcenter", "client"]`);
/// `is_module(path)` says whether an absolute path names a module (for `use x::…` relative to
/// the current module).
fn facts(src: &str, module: &ModPath, is_module: &dyn Fn(&[String]) -> bool) -> FileFacts {
    let toks = tokens(src);
    let mut out = FileFacts::default();
    // Inline modules (`mod tests { … }`) by the brace depth they close at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let here: ModPath = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match &toks[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(k) if k == "use" => {
                let mut trees = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut trees);
                for (segments, alias) in trees {
                    let written = segments.join("::");
                    let Some(path) = absolute(&segments, &here, true, is_module) else {
                        continue;
                    };
                    if inline.is_empty()
                        && let Some(alias) = alias
                    {
                        out.imports.insert(alias, path.clone());
                    }
                    out.references.push(Reference { path, written });
                }
                i = end;
                continue;
            }
            Tok::Ident(first) if matches!(first.as_str(), "crate" | "super" | "self") => {
                let preceded_by_sep = i > 0 && toks[i - 1] == Tok::PathSep;
                let mut segments = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Tok::PathSep), Some(Tok::Ident(s))) = (toks.get(j), toks.get(j + 1))
                {
                    segments.push(s.clone());
                    j += 2;
                }
                if !preceded_by_sep
                    && segments.len() > 1
                    && let Some(path) = absolute(&segments, &here, false, is_module)
                {
                    out.references.push(Reference {
                        written: segments.join("::"),
                        path,
                    });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Parses a use tree from `i` (after `use`, or inside braces); pushes every leaf as its
/// segments and the name it binds (None for globs). Returns the index after the tree (after `;`
/// at the top level).
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut segments = prefix;
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) if s == "as" => {
                if let Some(Tok::Ident(alias)) = toks.get(i + 1) {
                    out.push((segments.clone(), Some(alias.clone())));
                    segments.clear();
                }
                i += 2;
            }
            Some(Tok::Ident(s)) => {
                segments.push(s.clone());
                i += 1;
            }
            Some(Tok::PathSep) => i += 1,
            Some(Tok::Star) => {
                segments.push("*".into());
                out.push((segments.clone(), None));
                segments.clear();
                i += 1;
            }
            Some(Tok::Open) => {
                let base = segments.clone();
                i += 1;
                loop {
                    i = use_tree(toks, i, base.clone(), out);
                    match toks.get(i) {
                        Some(Tok::Comma) => i += 1,
                        _ => break,
                    }
                    if toks.get(i) == Some(&Tok::Close) {
                        break;
                    }
                }
                i += 1; // the closing brace
                segments.clear();
            }
            Some(Tok::Comma | Tok::Close) | None => break,
            Some(Tok::Semi) => {
                i += 1;
                break;
            }
            Some(_) => i += 1,
        }
    }
    if !segments.is_empty() {
        let name = segments.last().cloned().filter(|s| s != "self");
        let name = match name {
            Some(n) => Some(n),
            // `use a::b::{self}` binds `b`.
            None => segments.iter().rev().nth(1).cloned(),
        };
        out.push((segments, name));
    }
    i
}

/// The absolute path (from the crate root, without `crate`) a written path names, or None for
/// another crate. In a `use`, a first segment naming a child of the current module is relative.
fn absolute(
    segments: &[String],
    here: &ModPath,
    in_use: bool,
    is_module: &dyn Fn(&[String]) -> bool,
) -> Option<ModPath> {
    let mut base: ModPath;
    let mut rest = segments;
    match segments.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &segments[1..];
        }
        Some("self") => {
            base = here.clone();
            rest = &segments[1..];
        }
        Some("super") => {
            base = here.clone();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) if in_use => {
            let mut child = here.clone();
            child.push(first.to_string());
            if !is_module(&child) {
                return None;
            }
            base = here.clone();
        }
        _ => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

// ---------------------------------------------------------------------------------------------
// The graph.

/// Module path of a file below `src/` (`vcenter/model/mod.rs` → `vcenter::model`).
fn module_of(relative: &Path) -> ModPath {
    let mut parts: ModPath = relative
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn show(m: &[String]) -> String {
    match m {
        [root] => format!("{root} (mod.rs)"),
        [_, rest @ ..] => rest.join("::"),
        [] => "crate".into(),
    }
}

/// The module a reference depends on: the longest module prefix of its path, followed through
/// the names that module imports (re-exports and `use`s).
fn target(path: &[String], modules: &BTreeMap<ModPath, FileFacts>, hops: usize) -> Option<ModPath> {
    let k = (1..=path.len())
        .rev()
        .find(|k| modules.contains_key(&path[..*k]))?;
    let module = path[..k].to_vec();
    if let Some(name) = path.get(k)
        && hops < 16
        && let Some(imported) = modules[&module].imports.get(name)
    {
        let mut followed = imported.clone();
        followed.extend(path[k + 1..].iter().cloned());
        if followed != path {
            return target(&followed, modules, hops + 1).or(Some(module));
        }
    }
    Some(module)
}

/// Files (path relative to `src/` → source) read into their facts.
fn read_tree(files: &BTreeMap<PathBuf, String>) -> BTreeMap<ModPath, FileFacts> {
    let known: BTreeSet<ModPath> = files.keys().map(|p| module_of(p)).collect();
    let is_module = |p: &[String]| known.contains(p);
    files
        .iter()
        .map(|(p, src)| {
            let m = module_of(p);
            let f = facts(src, &m, &is_module);
            (m, f)
        })
        .collect()
}

/// Problems in the layering of the modules under `root` (`vcenter`): a cycle, or `model`
/// reaching outside itself. Empty when all is well.
fn layering_problems(files: &BTreeMap<PathBuf, String>, root: &str) -> Vec<String> {
    let modules = read_tree(files);
    let inside = |m: &ModPath| m.first().map(String::as_str) == Some(root);
    let is_model = |m: &[String]| m.len() >= 2 && m[0] == root && m[1] == "model";
    let mut problems = Vec::new();
    // Edges with the first reference that makes each one.
    let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
    for (m, f) in modules.iter().filter(|(m, _)| inside(m)) {
        for r in &f.references {
            if is_model(m) && !is_model(&r.path) && r.path.first().is_some_and(|s| s != "std") {
                problems.push(format!(
                    "{}: model refers to `{}` outside model (only std, serde and other model modules)",
                    show(m),
                    r.written
                ));
            }
            let Some(t) = target(&r.path, &modules, 0) else {
                continue;
            };
            if t != *m && inside(&t) {
                edges
                    .entry(m.clone())
                    .or_default()
                    .entry(t)
                    .or_insert_with(|| r.written.clone());
            }
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                format!(
                    "{} -> {} (`{}`)",
                    show(&w[0]),
                    show(&w[1]),
                    edges[&w[0]][&w[1]]
                )
            })
            .collect();
        problems.push(format!(
            "import cycle in src/{root}/: {}\n  {}",
            cycle
                .iter()
                .map(|m| show(m))
                .collect::<Vec<_>>()
                .join(" -> "),
            steps.join("\n  ")
        ));
    }
    problems
}

/// One cycle (first module repeated at the end), if any.
fn find_cycle(edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        m: &ModPath,
        edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        match marks.get(m) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|s| s == m)?;
                let mut cycle = stack[from..].to_vec();
                cycle.push(m.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(m.clone(), Mark::Open);
        stack.push(m.clone());
        for next in edges.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(next, edges, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(m.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut marks, &mut Vec::new()))
}

/// The crate's top-level modules (`src/<m>.rs` or `src/<m>/`).
const TOP_MODULES: [&str; 8] = [
    "api",
    "cli",
    "controllers",
    "local",
    "plan",
    "reconcile",
    "vcenter",
    "webhook",
];

/// Test code of the planners (`tests.rs`, `props.rs`) drives the planners through the shells'
/// real appliers, so it may reach further than the planners themselves.
fn is_test_file(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|f| f == "tests.rs" || f == "props.rs")
}

/// References from files under `plan/` to anything of the crate but `api`, `plan` and
/// `vcenter::model`: the planners decide, they do no I/O and know no shell.
fn plan_problems(files: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .filter(|(p, _)| !is_test_file(p))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect();
    let modules = read_tree(&files);
    let mut problems = Vec::new();
    for (m, f) in modules
        .iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("plan"))
    {
        for r in &f.references {
            let first = r.path.first().map(String::as_str).unwrap_or_default();
            let allowed = match first {
                "api" | "plan" => true,
                "vcenter" => r.path.get(1).map(String::as_str) == Some("model"),
                other => !TOP_MODULES.contains(&other),
            };
            if !allowed {
                problems.push(format!(
                    "src/{}: `{}` — the planners see only api, plan and vcenter::model",
                    m.join("/"),
                    r.written
                ));
            }
        }
    }
    problems
}

fn sources(dir: &str) -> BTreeMap<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut pending = vec![src.join(dir)];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                pending.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.insert(p.strip_prefix(&src).unwrap().to_path_buf(), text);
            }
        }
    }
    out
}

fn tree(files: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
    files
        .iter()
        .map(|(p, s)| (PathBuf::from(p), s.to_string()))
        .collect()
}

#[test]
fn vcenter_modules_form_no_cycle_and_model_stands_alone() {
    let files = sources("vcenter");
    assert!(files.len() > 20, "read src/vcenter: {} files", files.len());
    let modules = read_tree(&files);
    // The graph is not empty: the checker sees the edges it is meant to see.
    let client = &modules[&vec!["vcenter".to_string(), "client".to_string()]];
    assert!(
        client
            .references
            .iter()
            .any(|r| r.path.starts_with(&["vcenter".into(), "model".into()])),
        "client uses model: {:?}",
        client.references
    );
    let problems = layering_problems(&files, "vcenter");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_controllers_form_no_import_cycle() {
    let files = sources("controllers");
    let problems = layering_problems(&files, "controllers");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn planners_see_vcenter_only_through_the_model() {
    let files = sources("plan");
    assert!(files.len() > 10);
    let problems = plan_problems(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_back_edge_is_reported_as_the_cycle_it_closes() {
    let files = tree(&[
        (
            "vcenter/mod.rs",
            "pub mod client; pub mod model; pub mod rest; pub use model::error::Error;",
        ),
        ("vcenter/model/mod.rs", "pub mod error;"),
        ("vcenter/model/error.rs", "pub enum Error {}"),
        (
            "vcenter/client.rs",
            "use super::rest::{RestSession, tagging::Tag};\nuse crate::vcenter::Error;",
        ),
        (
            "vcenter/rest.rs",
            "// super::model is only mentioned here\nconst S: &str = \"super::client\";\nfn f() -> super::super::vcenter::client::Client { todo!() }",
        ),
    ]);
    let problems = layering_problems(&files, "vcenter");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("client -> rest -> client"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("`super::rest::RestSession`"),
        "{}",
        problems[0]
    );
    // The facade re-export is followed to model::error, which closes no cycle.
    assert!(!problems[0].contains("mod.rs"), "{}", problems[0]);
}

#[test]
fn model_reaching_the_transport_is_reported() {
    let files = tree(&[
        ("vcenter/mod.rs", "pub mod client; pub mod model;"),
        ("vcenter/model/mod.rs", "pub mod task;\npub mod moref;"),
        ("vcenter/model/moref.rs", "pub struct MoRef;"),
        (
            "vcenter/model/task.rs",
            "use super::moref::MoRef;\nuse serde::Serialize;\nmod tests { use super::*; use crate::vcenter::client::Client; }",
        ),
        ("vcenter/client.rs", "use super::model::task;"),
    ]);
    let problems = layering_problems(&files, "vcenter");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("model::task: model refers to `crate::vcenter::client::Client`"));
    assert!(
        problems[1].contains("client -> model::task -> client"),
        "{}",
        problems[1]
    );
}

#[test]
fn planners_naming_the_client_are_reported() {
    let files = tree(&[
        (
            "plan/zone.rs",
            "use crate::vcenter::model::moref::MoRef;\nuse crate::vcenter::{Client, model::inventory::Inventory};\n/// [`crate::vcenter::Client`] in a comment is fine\nfn f(e: crate::vcenter::Error) {}",
        ),
        ("plan/mod.rs", "pub mod zone;"),
    ]);
    let problems = plan_problems(&files);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("`crate::vcenter::Client`"),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].contains("`crate::vcenter::Error`"),
        "{}",
        problems[1]
    );
}

#[test]
fn planners_naming_a_shell_are_reported_but_their_test_files_may() {
    let files = tree(&[
        (
            "plan/cpms/spec.rs",
            "fn f(v: &mut serde_json::Value) { crate::webhook::provider_spec::default(v, \"\"); }\nuse k8s_openapi::api::core::v1::Node;",
        ),
        (
            "plan/cpms/tests.rs",
            "use crate::local::cluster::LocalCluster;",
        ),
        ("plan/cpms/mod.rs", "pub mod spec;\n#[cfg(test)] mod tests;"),
        ("plan/mod.rs", "pub mod cpms;"),
    ]);
    let problems = plan_problems(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("crate::webhook::provider_spec::default"),
        "{}",
        problems[0]
    );
}

/// The modules of local mode, of the shells' shared reconcile core, of the webhooks and of the
/// CLI depend on each other without a cycle (the planners and the API types are the actuator
/// refactor's, issue #38, and get the same test with it).
#[test]
fn local_reconcile_webhook_and_cli_form_no_import_cycle() {
    for root in ["local", "reconcile", "webhook", "cli"] {
        let files = sources(root);
        assert!(files.len() > 3, "read src/{root}: {} files", files.len());
        let problems = layering_problems(&files, root);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
