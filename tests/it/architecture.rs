//! The layout's rules (docs/architecture.md), checked on the source: no import circles between
//! files, a data model that imports no stage, nothing outside `rubric/` that parses a type or an
//! expression, no pipeline module that speaks the worker protocol or imports from its parent,
//! no pipeline function much over 80 lines, no function over 150, no source file over 800
//! lines, and no file but the runner (`worker::process`) that starts a process itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/` by module path (`pipeline::load`), with its text minus
/// comments and `#[cfg(test)]` modules.
fn modules() -> BTreeMap<String, (PathBuf, String)> {
    let mut out = BTreeMap::new();
    for f in rust_files() {
        let rel = f.strip_prefix(src()).unwrap().with_extension("");
        let mut name = rel.to_string_lossy().replace('/', "::");
        if let Some(parent) = name.strip_suffix("::mod") {
            name = parent.to_string();
        }
        // `lib`, `main`, and modules compiled for tests only (`#[cfg(test)] mod x_tests;`).
        if name == "lib" || name == "main" || name.ends_with("tests") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        let code: String = text
            .lines()
            .map(|l| match l.find("//") {
                Some(i) if !l[..i].contains('"') => &l[..i],
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        out.insert(name, (f, code));
    }
    out
}

/// The module a `crate::a::b::c` path names: the longest prefix that is a module.
fn resolve(path: &str, known: &BTreeMap<String, (PathBuf, String)>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|k| parts[..k].join("::"))
        .find(|m| known.contains_key(m))
}

/// Every path a `use` declaration names, its groups expanded: `use crate::{a, b::{c, d}};` is
/// `crate::a`, `crate::b::c`, `crate::b::d`; `self` inside a group names the group's prefix.
fn use_paths(code: &str) -> Vec<String> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        // `a::b::{...}`: the prefix up to the group, then each item.
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim().trim_end_matches("::");
            let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            let joined = join(prefix, head);
            let (mut depth, mut start) = (0, 0);
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&joined, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&joined, &inner[start..], out);
            return;
        }
        let item = tree.split(" as ").next().unwrap_or("").trim();
        if item.is_empty() {
            return;
        }
        if item == "self" {
            out.push(prefix.to_string());
        } else {
            out.push(join(prefix, item.trim_end_matches("::*")));
        }
    }
    fn join(a: &str, b: &str) -> String {
        match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a}::{b}"),
        }
    }
    // A declaration starts its line (`use`, `pub use`, `pub(crate) use`): never a word of a
    // string.
    let decl =
        regex::Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([\w:{}*,\s]+?);").unwrap();
    let mut out = Vec::new();
    for c in decl.captures_iter(code) {
        expand("", &c[1].replace('\n', " "), &mut out);
    }
    out
}

/// File-level imports: every path a file names, wherever it is written (a `use` declaration
/// and its groups, or an expression such as `super::x::f()` or `crate::a::B`), resolved from
/// `crate::`, `super::` (as many as given), `self::` or a child module of the file's own.
fn imports(known: &BTreeMap<String, (PathBuf, String)>) -> BTreeMap<String, BTreeSet<String>> {
    let path =
        regex::Regex::new(r"(?:^|[^\w:])((?:crate|self|super|[a-z_]\w*)(?:::\w+)+)").unwrap();
    // `pub use child::Role` in `worker/mod.rs`: whoever imports `worker::Role` imports
    // `worker::child` (and a sibling that names `super::Role` imports it too).
    let pub_use = regex::Regex::new(r"(?m)^\s*pub(?:\([^)]*\))?\s+use\s+([\w:{}*,\s]+?);").unwrap();
    let mut reexports: BTreeMap<(String, String), String> = BTreeMap::new();
    for (m, (_, code)) in known {
        for c in pub_use.captures_iter(code) {
            let mut paths = Vec::new();
            for p in use_paths(&format!("use {};", &c[1])) {
                paths.push(p);
            }
            for p in paths {
                let name = p.rsplit("::").next().unwrap_or("").to_string();
                if let Some(t) = absolute(m, &p, known).and_then(|a| resolve(&a, known)) {
                    reexports.insert((m.clone(), name), t);
                }
            }
        }
    }
    let mut g = BTreeMap::new();
    for (m, (_, code)) in known {
        let mut to = BTreeSet::new();
        let mut paths: Vec<String> = use_paths(code);
        paths.extend(path.captures_iter(code).map(|c| c[1].to_string()));
        for p in paths {
            let Some(abs) = absolute(m, &p, known) else {
                continue;
            };
            let Some(mut t) = resolve(&abs, known) else {
                continue;
            };
            // An item the module re-exports: the module that defines it.
            if let Some(item) = abs
                .strip_prefix(&format!("{t}::"))
                .and_then(|r| r.split("::").next())
                && let Some(target) = reexports.get(&(t.clone(), item.to_string()))
            {
                t = target.clone();
            }
            if t != *m && !m.starts_with(&format!("{t}::")) {
                to.insert(t);
            }
        }
        g.insert(m.clone(), to);
    }
    g
}

/// `p` as written in module `m`, from the crate's root; `None` for a path outside the crate
/// (`std::`, another crate, a local type's `Self::`).
fn absolute(m: &str, p: &str, known: &BTreeMap<String, (PathBuf, String)>) -> Option<String> {
    let mut parts: Vec<&str> = p.split("::").collect();
    let mut base: Vec<&str> = m.split("::").collect();
    match parts[0] {
        "crate" => {
            parts.remove(0);
            return Some(parts.join("::"));
        }
        "self" => {
            parts.remove(0);
        }
        "super" => {
            while parts.first() == Some(&"super") {
                parts.remove(0);
                base.pop()?;
            }
        }
        first => {
            // A child module of this one (`use schema::*` in rubric/mod.rs), else not ours.
            let child = format!("{m}::{first}");
            if !known.contains_key(&child) {
                return None;
            }
        }
    }
    base.extend(parts);
    Some(base.join("::"))
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_file_imports_itself_back_through_others() {
    let known = modules();
    let found = circles(&imports(&known));
    assert!(found.is_empty(), "import circles: {found:#?}");
}

#[test]
fn the_data_model_imports_no_stage() {
    let known = modules();
    let g = imports(&known);
    let in_model = |t: &str| {
        [
            "result",
            "errors",
            "exit",
            "rubric::schema",
            "rubric::expr",
            "model",
        ]
        .contains(&t)
            || t.starts_with("model::")
    };
    let model: Vec<&String> = g.keys().filter(|m| in_model(m)).collect();
    assert!(model.len() >= 10, "the model's files: {model:?}");
    for m in model {
        let bad: Vec<&String> = g[m].iter().filter(|t| !in_model(t)).collect();
        assert!(bad.is_empty(), "{m} imports the stage(s) {bad:?}");
    }
}

#[test]
fn nothing_outside_the_rubric_parses_or_evaluates_expressions() {
    for (m, (file, code)) in modules() {
        if m == "rubric" || m.starts_with("rubric::") {
            continue;
        }
        for needle in [
            "Expression::parse",
            "ParamType::parse",
            ".eval_f64(",
            ".eval_int(",
            "eval_launch(",
            "eval_len(",
        ] {
            assert!(
                !code.contains(needle),
                "{} calls {needle}: the rubric's plan evaluates expressions (`rubric::args`)",
                file.display()
            );
        }
    }
}

#[test]
fn pipeline_modules_neither_speak_the_wire_nor_import_their_parent() {
    for (m, (file, code)) in modules() {
        if !m.starts_with("pipeline::") {
            continue;
        }
        for needle in ["protocol::{Request", "protocol::Request", "Response::"] {
            assert!(
                !code.contains(needle),
                "{} speaks the worker protocol ({needle}): use worker::client",
                file.display()
            );
        }
        for line in code
            .lines()
            .filter(|l| l.trim_start().starts_with("use super::"))
        {
            let item = line.trim_start().trim_start_matches("use super::");
            assert!(
                !item.starts_with('*') && !item.starts_with("{grade") && !item.starts_with("grade"),
                "{}: `{}` imports from pipeline/mod.rs",
                file.display(),
                line.trim()
            );
        }
    }
}

/// Functions of the modules `within` says yes to that are over `limit` lines, with where.
fn long_functions(within: impl Fn(&str) -> bool, limit: usize) -> Vec<String> {
    let mut long = Vec::new();
    for (m, (file, code)) in modules() {
        if within(&m) {
            for (line, name, n) in long_in(&code, limit) {
                long.push(format!("{}:{line} {name} ({n} lines)", file.display()));
            }
        }
    }
    long
}

/// The functions of `code` over `limit` lines: (line, name, lines).
fn long_in(code: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let fn_start =
        regex::Regex::new(r"^\s*(pub(\([^)]*\))? )?(const )?(unsafe )?fn (\w+)").unwrap();
    let mut long = Vec::new();
    let lines: Vec<&str> = code.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let Some(c) = fn_start.captures(l) else {
            continue;
        };
        // Braces outside string literals, from the signature to the matching close.
        let (mut depth, mut started, mut end) = (0i32, false, None);
        'scan: for (j, l) in lines.iter().enumerate().skip(i) {
            let mut in_str = false;
            let mut prev = ' ';
            for ch in l.chars() {
                match ch {
                    '"' if prev != '\\' => in_str = !in_str,
                    '{' if !in_str => {
                        depth += 1;
                        started = true;
                    }
                    '}' if !in_str => depth -= 1,
                    ';' if !in_str && !started => break 'scan,
                    _ => {}
                }
                prev = ch;
            }
            if started && depth == 0 {
                end = Some(j);
                break;
            }
        }
        if let Some(j) = end
            && j - i + 1 > limit
        {
            long.push((i + 1, c[5].to_string(), j - i + 1));
        }
    }
    long
}

#[test]
fn pipeline_functions_stay_short() {
    let long = long_functions(|m| m.starts_with("pipeline"), 90);
    assert!(
        long.is_empty(),
        "pipeline functions over 90 lines: {long:#?}"
    );
}

/// Every function in src/ fits on a few screens: a longer one is split along its own phases.
#[test]
fn no_function_in_src_is_over_150_lines() {
    let long = long_functions(|_| true, 150);
    assert!(long.is_empty(), "functions over 150 lines: {long:#?}");
    // The reader measures what it should: 151 lines are found, 150 are not, a `}` in a
    // string does not end the function, and a `pub(crate) unsafe fn` is a function.
    let f = |head: &str, n: usize| {
        let body = "    let x = \"}\";\n".repeat(n - 2);
        format!("{head} {{\n{body}}}\n")
    };
    assert_eq!(
        long_in(&f("pub(crate) unsafe fn g()", 151), 150),
        [(1, "g".to_string(), 151)]
    );
    assert!(long_in(&f("fn g()", 150), 150).is_empty());
}

/// The circle check reads every path form: `super::x::f()` in an expression, `use super::{a,
/// b}` and nested `use crate::{a::{b, c}}` groups, `self::`, `super::super::`, a child module
/// named from its parent, and an item a parent re-exports from one of its children.
#[test]
fn the_circle_check_sees_every_path_form() {
    let module = |code: &str| (PathBuf::new(), code.to_string());
    let circle = |mods: &[(&str, &str)]| {
        let known: BTreeMap<String, (PathBuf, String)> = mods
            .iter()
            .map(|(m, c)| (m.to_string(), module(c)))
            .collect();
        circles(&imports(&known))
    };
    let pair = |a: &str, b: &str| vec![vec![a.to_string(), b.to_string()]];
    // An expression's `super::` path against a grouped `use super::{...}`.
    assert_eq!(
        circle(&[
            ("p", ""),
            ("p::a", "fn f() { super::b::g(); }"),
            ("p::b", "use super::{a, c};\n"),
            ("p::c", ""),
        ]),
        pair("p::a", "p::b")
    );
    // Nested groups from the crate's root, and `self::` inside them.
    assert_eq!(
        circle(&[
            ("x", ""),
            ("x::y", "use crate::{x::{z::{self}, w}};\n"),
            ("x::z", "fn f() -> crate::x::y::T { todo!() }"),
            ("x::w", ""),
        ]),
        pair("x::y", "x::z")
    );
    // `super::super::` and a re-export: `q::r::s` names `q::T`, which `q` takes from `q::t`,
    // and `q::t` names `q::r::s`.
    assert_eq!(
        circle(&[
            ("q", "pub use t::T;\nmod t;\n"),
            ("q::r", ""),
            ("q::r::s", "fn f(_: super::super::T) {}"),
            ("q::t", "use crate::q::r::s;\n"),
        ]),
        pair("q::r::s", "q::t")
    );
    // No circle: a parent and its child name each other (the child reads `super::`).
    assert!(circle(&[("m", "use self::k::K;\n"), ("m::k", "use super::*;\n")]).is_empty());
}

#[test]
fn stages_ask_the_backend_what_it_can_do_not_which_it_is() {
    let compare = regex::Regex::new(r"(==|!=)\s*(crate::)?(backend::)?BackendKind::|BackendKind::\w+\s*(==|!=)|matches!\([^)]*BackendKind::").unwrap();
    for (m, (file, code)) in modules() {
        if m == "backend" || m.starts_with("backend::") {
            continue;
        }
        for (i, line) in code.lines().enumerate() {
            assert!(
                !compare.is_match(line),
                "{}:{}: compares the backend by name; ask `backend.caps()` instead: {line}",
                file.display(),
                i + 1
            );
        }
    }
}

/// Where `code` starts a process itself: each `Command::new` that is std's (`clap::Command::new`
/// builds a command line, not a process), under whatever name std's `Command` was imported as
/// (`use std::process::{Command as Cmd}`: `Cmd::new`). Comments are not code.
fn spawns(code: &str) -> Vec<String> {
    let code: String = code
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let alias = regex::Regex::new(r"\bCommand\s+as\s+(\w+)").unwrap();
    let mut names = vec!["Command".to_string()];
    names.extend(alias.captures_iter(&code).map(|c| c[1].to_string()));
    let mut found = Vec::new();
    for name in names {
        let call = regex::Regex::new(&format!(r"((?:\w+\s*::\s*)*)\b{name}\s*::\s*new\b")).unwrap();
        for c in call.captures_iter(&code) {
            let prefix: String = c[1].chars().filter(|ch| !ch.is_whitespace()).collect();
            if !prefix.ends_with("clap::") {
                found.push(c[0].split_whitespace().collect());
            }
        }
    }
    found
}

/// Every `.rs` file under `src/`, tests included.
fn rust_files() -> Vec<PathBuf> {
    rust_files_in(&src())
}

/// Every `.rs` file under `dir`, at any depth: found on disk, not through `mod` declarations,
/// so a file no module names (or one only a `#[path]` names) is still read.
fn rust_files_in(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

#[test]
fn only_the_runner_starts_processes() {
    let runner = src().join("worker/process.rs");
    let files = rust_files();
    assert!(
        files.contains(&runner),
        "the runner moved: {}",
        runner.display()
    );
    let mut sites = Vec::new();
    for f in files.iter().filter(|f| **f != runner) {
        for call in spawns(&std::fs::read_to_string(f).unwrap()) {
            sites.push(format!(
                "{}: {call}",
                f.strip_prefix(src()).unwrap().display()
            ));
        }
    }
    assert!(
        sites.is_empty(),
        "processes started outside worker/process.rs (use worker::process::Process): {sites:#?}"
    );
}

/// The process check sees each way std's `Command` can be named, lets clap's through, and
/// would catch a site that came back into a file of the tree.
#[test]
fn the_process_check_sees_every_form() {
    let one = |code: &str| spawns(code).len();
    assert_eq!(one("let o = Command::new(exe).output();"), 1);
    assert_eq!(
        one("let o = std::process::Command::new(\"sh\").status();"),
        1
    );
    assert_eq!(one("let o = process::Command :: new(x);"), 1);
    assert_eq!(
        one("use std::process::{Stdio, Command as Cmd};\nfn f() { Cmd::new(\"x\"); }"),
        1
    );
    assert_eq!(
        one("use std::process::Command as P;\nlet c = P::new(x);"),
        1
    );
    assert_eq!(one("let c = clap::Command::new(\"cugrade\");"), 0);
    assert_eq!(one("// Command::new(x) in a comment\nlet s = 1;"), 0);
    assert_eq!(
        one("let c = MyCommand::new(x); let d = Commander::new();"),
        0
    );
    // A site put back where one was: the check fails on it.
    let numba = std::fs::read_to_string(src().join("compile/numba.rs")).unwrap();
    assert_eq!(one(&numba), 0);
    let back = numba.replacen(
        "let mut child = scripts::driver(",
        "let _ = std::process::Command::new(&tool.python).spawn();\n    let mut child = scripts::driver(",
        1,
    );
    assert_ne!(back, numba);
    assert_eq!(one(&back), 1);
    // The runner itself is the one file that may.
    let runner = std::fs::read_to_string(src().join("worker/process.rs")).unwrap();
    assert!(one(&runner) >= 1);
}

/// The stages get their workers from `worker::pool::Workers`: `Client::spawn` is the worker
/// module's own.
#[test]
fn only_the_worker_pool_starts_workers() {
    for (m, (file, code)) in modules() {
        if m == "worker" || m.starts_with("worker::") {
            continue;
        }
        for (i, line) in code.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("Client::spawn("),
                "{}:{}: starts a worker itself; ask `worker::pool::Workers` for one",
                file.display(),
                i + 1
            );
        }
    }
}

/// The most lines a file under `src/` may have, every line counted (tests, comments and
/// blank lines too): a longer file is split into submodules by what its code does.
const MAX_FILE_LINES: usize = 800;

/// TEMPORARY allowlist: files over [`MAX_FILE_LINES`] that another change is splitting right
/// now (issue 34: the rubric's restructuring). Paths relative to `src/`. The guard fails on an
/// entry whose file is already short enough (or gone), so the list cannot outlive the split:
/// remove each entry as its file comes under the limit, then remove the list.
const BEING_SPLIT: [&str; 2] = ["rubric/mod.rs", "rubric/schema.rs"];

/// The `.rs` files under `root` over `limit` lines and not in `allowed`, and the entries of
/// `allowed` that are no longer over it (or no longer exist), as `path (lines)`.
fn long_files(root: &Path, limit: usize, allowed: &[&str]) -> (Vec<String>, Vec<String>) {
    let files = rust_files_in(root);
    let mut lines = BTreeMap::new();
    for f in &files {
        let rel = f
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read(f).unwrap();
        // Every line: the newlines, and a last line without one.
        let n = text.iter().filter(|&&b| b == b'\n').count()
            + usize::from(text.last().is_some_and(|&b| b != b'\n'));
        lines.insert(rel, n);
    }
    let over: Vec<String> = lines
        .iter()
        .filter(|(rel, n)| **n > limit && !allowed.contains(&rel.as_str()))
        .map(|(rel, n)| format!("{rel} ({n} lines)"))
        .collect();
    let stale: Vec<String> = allowed
        .iter()
        .filter_map(|a| match lines.get(*a) {
            Some(&n) if n > limit => None,
            Some(&n) => Some(format!("{a} ({n} lines)")),
            None => Some(format!("{a} (no such file)")),
        })
        .collect();
    (over, stale)
}

/// Every file fits a reader's head: no `.rs` file anywhere under `src/` is over 800 lines,
/// but for the temporary [`BEING_SPLIT`] allowlist, each of whose files must still be over.
#[test]
fn no_file_in_src_is_over_800_lines() {
    let (over, stale) = long_files(&src(), MAX_FILE_LINES, &BEING_SPLIT);
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by what their code does): {over:#?}"
    );
    assert!(
        stale.is_empty(),
        "allowlisted in BEING_SPLIT but not over {MAX_FILE_LINES} lines: remove them from the \
         list: {stale:#?}"
    );
}

/// The length guard reads every file at any depth (one no `mod` names too), counts every
/// line, lets 800 through and not 801, and fails on an allowlist entry that is short enough
/// or gone. Nothing escapes the walk: a `#[path]` module is a file under `src/`, and no Rust
/// code is pulled in with `include!`.
#[test]
fn the_file_length_guard_cannot_be_fooled() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, n: usize| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "// x\n".repeat(n)).unwrap();
    };
    write("lib.rs", 3);
    write("a/b/c/orphan.rs", 801); // named by no `mod`
    write("a/exact.rs", 800);
    write("a/long_tests.rs", 900); // tests count
    write("a/split.rs", 1000);
    write("a/done.rs", 10);
    std::fs::write(root.join("a/notes.txt"), "x\n".repeat(2000)).unwrap();
    std::fs::write(root.join("a/unterminated.rs"), "\n".repeat(800) + "}").unwrap();
    let (over, stale) = long_files(root, 800, &["a/split.rs", "a/done.rs", "a/gone.rs"]);
    assert_eq!(
        over,
        [
            "a/b/c/orphan.rs (801 lines)",
            "a/long_tests.rs (900 lines)",
            "a/unterminated.rs (801 lines)"
        ]
    );
    assert_eq!(stale, ["a/done.rs (10 lines)", "a/gone.rs (no such file)"]);

    let files = rust_files();
    let walked: BTreeSet<PathBuf> = files.iter().map(|f| f.canonicalize().unwrap()).collect();
    let path_attr = regex::Regex::new(r#"#\[path\s*=\s*"([^"]+)"\]"#).unwrap();
    let include = regex::Regex::new(r"\binclude\s*!\s*[(\[{]").unwrap();
    let mut named = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for c in path_attr.captures_iter(&text) {
            let target = f.parent().unwrap().join(&c[1]);
            let target = target.canonicalize().unwrap_or(target);
            assert!(
                walked.contains(&target),
                "{}: `#[path]` names {}, a file the length guard does not read",
                f.display(),
                target.display()
            );
            named += 1;
        }
        assert!(
            !include.is_match(&text),
            "{}: `include!` pulls in code the length guard does not read",
            f.display()
        );
    }
    // The two test files that only a `#[path]` names are in the walk.
    assert!(named >= 2, "`#[path]` modules found: {named}");
}
