//! The layout's rules (docs/architecture.md), checked on the source: no import circles between
//! files, a data model that imports no stage, nothing outside `rubric/` that parses a type or an
//! expression, no pipeline module that speaks the worker protocol or imports from its parent,
//! and no pipeline function much over 80 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/` by module path (`pipeline::load`), with its text minus
/// comments and `#[cfg(test)]` modules.
fn modules() -> BTreeMap<String, (PathBuf, String)> {
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
    let mut files = Vec::new();
    walk(&src(), &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap().with_extension("");
        let mut name = rel.to_string_lossy().replace('/', "::");
        if let Some(parent) = name.strip_suffix("::mod") {
            name = parent.to_string();
        }
        if name == "lib" || name == "main" {
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

/// File-level imports: `crate::` paths (also inside `use crate::{a, b::c}`) and `use super::x`.
fn imports(known: &BTreeMap<String, (PathBuf, String)>) -> BTreeMap<String, BTreeSet<String>> {
    let path = regex::Regex::new(r"crate::((?:\w+::)*\w+)").unwrap();
    let group = regex::Regex::new(r"use crate::\{([^}]*)\}").unwrap();
    let sup = regex::Regex::new(r"\buse super::(\w+)").unwrap();
    // `pub use child::Role` in `worker/mod.rs`: whoever imports `worker::Role` imports
    // `worker::child`.
    let reexport = regex::Regex::new(r"\bpub use (\w+)::").unwrap();
    let mut g = BTreeMap::new();
    for (m, (_, code)) in known {
        let mut to = BTreeSet::new();
        let mut add = |t: Option<String>| {
            if let Some(t) = t.filter(|t| t != m && !m.starts_with(&format!("{t}::"))) {
                to.insert(t);
            }
        };
        for c in path.captures_iter(code) {
            add(resolve(&c[1], known));
        }
        for c in group.captures_iter(code) {
            for item in c[1].split(',') {
                let item = item.trim().split("::{").next().unwrap_or("").trim();
                if !item.is_empty() {
                    add(resolve(item, known));
                }
            }
        }
        for c in reexport.captures_iter(code) {
            add(resolve(&format!("{m}::{}", &c[1]), known));
        }
        let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
        for c in sup.captures_iter(code) {
            let p = if parent.is_empty() {
                c[1].to_string()
            } else {
                format!("{parent}::{}", &c[1])
            };
            add(resolve(&p, known));
        }
        g.insert(m.clone(), to);
    }
    g
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
    let model = ["result", "errors", "exit", "rubric::schema", "rubric::expr"];
    let allowed = |t: &str| {
        model.contains(&t)
            || t.starts_with("backend") && !t.starts_with("backend::")
            || ["compare::precision", "measure", "estimate", "labs"].contains(&t)
    };
    for m in model {
        let bad: Vec<&String> = g[m].iter().filter(|t| !allowed(t)).collect();
        assert!(bad.is_empty(), "{m} imports the stage(s) {bad:?}");
    }
}

#[test]
fn nothing_outside_the_rubric_parses_types_or_expressions() {
    for (m, (file, code)) in modules() {
        if m == "rubric" || m.starts_with("rubric::") {
            continue;
        }
        for needle in ["Expression::parse", "ParamType::parse"] {
            assert!(
                !code.contains(needle),
                "{} calls {needle}: use the rubric's plan",
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

#[test]
fn pipeline_functions_stay_short() {
    let fn_start = regex::Regex::new(r"^\s*(pub(\([^)]*\))? )?fn (\w+)").unwrap();
    let mut long = Vec::new();
    for (m, (file, code)) in modules() {
        if !m.starts_with("pipeline") {
            continue;
        }
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
                && j - i + 1 > 90
            {
                long.push(format!(
                    "{}:{} {} ({} lines)",
                    file.display(),
                    i + 1,
                    &c[3],
                    j - i + 1
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "pipeline functions over 90 lines: {long:#?}"
    );
}
