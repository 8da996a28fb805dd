//! Numba starters (`cugrade init LAB --lang numba`): a `.py` file with one `@cuda.jit` stub per
//! kernel, taking the contract's parameters in Numba's order (every buffer, `__constant__`
//! symbols included, as an array argument), and the Python side of "not implemented yet": a
//! kernel whose body is only `pass`, `...`, a docstring or comments.

use crate::labs::Lab;
use crate::rubric::schema::{Contract, Direction, Language, ScalarType};
use crate::rubric::{LoadedRubric, ParamType};
use std::fmt::Write as _;

/// Whether the Numba backend can grade this rubric: it accepts `.py` kernels and every
/// parameter of its contracts has a Numba type.
pub fn can_grade(r: &LoadedRubric) -> bool {
    let accepts = r
        .rubric
        .languages
        .as_ref()
        .is_none_or(|v| v.contains(&Language::Numba));
    accepts
        && r.rubric.milestones.iter().all(|m| {
            r.contract(&m.contract)
                .params
                .iter()
                .all(|p| p.param_type().is_some())
        })
}

/// The starter's file name: the lab's name as a Python module name (`vector_add.py`).
pub fn file_name(lab: &Lab) -> String {
    format!("{}.py", lab.name.replace('-', "_"))
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "cuda", "float32", "int32",
];

/// A contract parameter's name as a Python identifier (`in` becomes `in_`).
pub fn py_name(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

fn numba_type(t: ScalarType) -> &'static str {
    t.numpy_name()
}

/// `def NAME(a, b, c, n):`, wrapped to 80 columns.
pub(super) fn def_line(kernel: &str, contract: &Contract) -> String {
    let names: Vec<String> = contract.params.iter().map(|p| py_name(&p.name)).collect();
    let one = format!("def {kernel}({}):", names.join(", "));
    if one.len() <= 80 {
        return one;
    }
    format!("def {kernel}(\n    {},\n):", names.join(",\n    "))
}

/// One comment line per parameter: what it is and how large.
fn param_notes(contract: &Contract) -> Vec<String> {
    contract
        .params
        .iter()
        .map(|p| {
            let name = py_name(&p.name);
            match p.param_type() {
                Some(ParamType::Buffer(t)) => {
                    let len = p.len.as_ref().map_or("?".into(), |e| e.source());
                    let role = match p.dir {
                        Direction::In => "read",
                        Direction::Out => "written",
                        Direction::InOut => "read and written",
                        Direction::Scratch => "workspace (zeroed before each launch, not graded)",
                    };
                    let mut s = format!("#   {name}: {}[{len}], {role}", numba_type(t));
                    if let Some(shape) = p.shape.as_ref().filter(|s| (2..=3).contains(&s.len())) {
                        let dims: Vec<String> = shape.iter().map(|e| e.source()).collect();
                        let _ = write!(s, " (or {}-D: [{}])", dims.len(), dims.join(", "));
                    }
                    if p.symbol {
                        s.push_str(" (__constant__ in CUDA C++)");
                    }
                    s
                }
                Some(ParamType::Scalar(t)) => format!("#   {name}: {}", numba_type(t)),
                None => format!("#   {name}: {}", p.ty),
            }
        })
        .collect()
}

/// The starter's Python source.
pub fn kernel_source(lab: &Lab, r: &LoadedRubric) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}", super::text::title(lab).replace('`', ""));
    let _ = writeln!(s, "#");
    s.push_str(&super::common::comment(
        &super::text::clean(&lab.what_you_write(), false),
        "# ",
    ));
    let _ = writeln!(s, "#");
    s.push_str(&super::common::comment(
        "Numba: each kernel is a `@cuda.jit` function with the name below, taking the \
         parameters in this order (arrays are 1-D unless noted). The launch (block and grid) \
         is the one lab.md gives. Grade it with `cugrade check` in this folder; a kernel whose \
         body is still only `pass` is reported as not implemented yet.",
        "# ",
    ));
    let _ = writeln!(s);
    let _ = writeln!(s, "from numba import cuda, float32, int32  # noqa: F401");
    for (kernel, contract) in super::common::kernels(r) {
        let _ = writeln!(s, "\n");
        for m in r.rubric.milestones.iter().filter(|m| m.kernel == kernel) {
            let title = if m.title.is_empty() { &m.id } else { &m.title };
            s.push_str(&super::common::comment(
                &format!("Milestone `{}`: {}", m.id, title.replace('`', "")),
                "# ",
            ));
        }
        let c = r.contract(contract);
        let _ = writeln!(s, "# Parameters:");
        for l in param_notes(c) {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(s, "@cuda.jit");
        let _ = writeln!(s, "{}", def_line(kernel, c));
        let _ = writeln!(s, "    # TODO: your code here.");
        let _ = writeln!(s, "    pass");
    }
    s
}

/// Indentation of a line, in columns (a tab counts as 8, as Python's tokenizer does).
fn indent(line: &str) -> usize {
    let mut n = 0;
    for c in line.chars() {
        match c {
            ' ' => n += 1,
            '\t' => n = (n / 8 + 1) * 8,
            _ => break,
        }
    }
    n
}

/// Where `kernel` is defined (`def kernel(` at any indentation) in Python `src`, 1-based, and
/// whether its body is empty: only `pass`, `...`, docstrings and comments.
pub fn definitions(src: &str, kernel: &str) -> Vec<(usize, bool)> {
    let lines: Vec<&str> = src.lines().collect();
    let head = regex::Regex::new(&format!(r"^\s*def\s+{}\s*\(", regex::escape(kernel)))
        .expect("escaped regex");
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !head.is_match(line) {
            continue;
        }
        let def_indent = indent(line);
        // The header may span lines: it ends at the `:` after the closing parenthesis.
        let mut depth = 0i32;
        let mut j = i;
        let mut body_start = None;
        'header: while j < lines.len() {
            let text = lines[j].split('#').next().unwrap_or("");
            let start = if j == i {
                text.find('(').unwrap_or(0)
            } else {
                0
            };
            for (k, c) in text[start..].char_indices() {
                match c {
                    '(' | '[' => depth += 1,
                    ')' | ']' => depth -= 1,
                    ':' if depth == 0 => {
                        let rest = text[start + k + 1..].trim();
                        body_start = Some((j, rest.to_string()));
                        break 'header;
                    }
                    _ => {}
                }
            }
            j += 1;
        }
        let Some((end, inline)) = body_start else {
            continue;
        };
        let mut statements: Vec<String> = Vec::new();
        if !inline.is_empty() {
            statements.push(inline);
        }
        let mut in_doc: Option<&str> = None;
        for l in lines.iter().skip(end + 1) {
            let t = l.trim();
            if let Some(q) = in_doc {
                if t.contains(q) {
                    in_doc = None;
                }
                continue;
            }
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if indent(l) <= def_indent {
                break;
            }
            for q in ["\"\"\"", "'''"] {
                if let Some(rest) = t.strip_prefix(q) {
                    if !rest.contains(q) {
                        in_doc = Some(q);
                    }
                    break;
                }
            }
            if in_doc.is_some() || t.starts_with("\"\"\"") || t.starts_with("'''") {
                continue;
            }
            statements.push(t.to_string());
        }
        let empty = statements.iter().all(|st| {
            let st = st.split('#').next().unwrap_or("").trim();
            st == "pass"
                || st == "..."
                || (st.len() >= 2
                    && (st.starts_with('"') && st.ends_with('"')
                        || st.starts_with('\'') && st.ends_with('\'')))
        });
        out.push((i + 1, empty));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_bodies_of_pass_docstrings_and_comments_are_stubs() {
        let src = "from numba import cuda\n\n\
                   @cuda.jit\ndef reduce_naive(in_, out, n):\n    # TODO\n    pass\n\n\
                   @cuda.jit\ndef reduce_shared(\n    in_,\n    out,\n    n,\n):\n    \"\"\"Sum.\n\n    More.\n    \"\"\"\n    ...\n\n\
                   @cuda.jit\ndef reduce_shuffle(in_, out, n):\n    i = cuda.grid(1)  # pass\n\
                   def reduce_shuffle_helper(x): pass\n\
                   @cuda.jit\ndef one_liner(a): pass\n";
        assert_eq!(definitions(src, "reduce_naive"), vec![(4, true)]);
        assert_eq!(definitions(src, "reduce_shared"), vec![(9, true)]);
        assert_eq!(definitions(src, "reduce_shuffle"), vec![(21, false)]);
        assert_eq!(definitions(src, "one_liner"), vec![(25, true)]);
        assert_eq!(definitions(src, "naive"), vec![]);
    }

    #[test]
    fn every_lab_has_a_numba_starter_whose_stubs_take_the_contracts_parameters() {
        for lab in crate::labs::LABS {
            let m = lab.materialize().unwrap();
            let r = crate::rubric::load(&m.rubric_path).unwrap();
            if crate::commands::init::is_function_lab(&r) {
                continue; // a Python function's starter: init::function's tests
            }
            assert!(can_grade(&r), "{}", lab.name);
            let src = kernel_source(lab, &r);
            for line in src.lines() {
                assert!(line.chars().count() <= 80, "{}: {line}", lab.name);
            }
            for (kernel, contract) in super::super::common::kernels(&r) {
                let defs = definitions(&src, kernel);
                assert_eq!(defs.len(), 1, "{}: {kernel}\n{src}", lab.name);
                assert!(defs[0].1, "{}: {kernel} is not a stub", lab.name);
                // As many parameters as Numba's signature for the contract has entries.
                let sig = &crate::rubric::convention::signatures(
                    r.contract(contract),
                    Default::default(),
                )[0];
                let head = src
                    .lines()
                    .skip(defs[0].0 - 1)
                    .take_while(|l| !l.ends_with(':'))
                    .collect::<String>()
                    + src
                        .lines()
                        .skip(defs[0].0 - 1)
                        .find(|l| l.ends_with(':'))
                        .unwrap();
                let params = head[head.find('(').unwrap() + 1..head.rfind(')').unwrap()]
                    .split(',')
                    .filter(|p| !p.trim().is_empty())
                    .count();
                assert_eq!(params, sig.ndims.len(), "{}: {kernel}: {head}", lab.name);
            }
        }
    }
}
