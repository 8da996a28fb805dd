//! Starters of Python function labs (`cugrade init preprocess`): the function's stub with the
//! table it takes and what it returns, and "not implemented yet" for a stub left as it was.

use crate::labs::Lab;
use crate::rubric::LoadedRubric;
use crate::rubric::schema::{Contract, Direction, ParamType};
use std::fmt::Write as _;

/// Whether the lab grades Python functions (`returns:`) rather than kernels.
pub fn is_function_lab(r: &LoadedRubric) -> bool {
    let function = |m: &crate::rubric::schema::Milestone| {
        r.rubric
            .contracts
            .get(&m.contract)
            .is_some_and(Contract::is_function)
    };
    !r.rubric.milestones.is_empty() && r.rubric.milestones.iter().all(function)
}

/// The starter's Python source: one stub per milestone's function.
pub fn source(lab: &Lab, r: &LoadedRubric) -> String {
    let mut s = format!(
        "# {}\n#\n\
         # Port the NumPy reference (lab.md, \"What it computes\") to CuPy. `cugrade check` in\n\
         # this folder grades it: on a GPU with CuPy; without one, NumPy stands in for CuPy\n\
         # (correctness only). Keep test code under `if __name__ == \"__main__\":`.\n\n\
         import cupy as cp\n",
        super::text::title(lab).replace('`', "")
    );
    let mut done: Vec<&str> = vec![];
    for m in &r.rubric.milestones {
        if done.contains(&m.kernel.as_str()) {
            continue;
        }
        done.push(&m.kernel);
        let Some(c) = r.rubric.contracts.get(&m.contract) else {
            continue;
        };
        let _ = write!(s, "\n\ndef {}(table):\n    \"\"\"", m.kernel);
        let _ = writeln!(s, "{}\n", m.display_title().replace("\"\"\"", "'''"));
        let _ = writeln!(s, "    table: a dict of NumPy host arrays and ints:");
        let mut ret = String::new();
        for p in &c.params {
            let ty = match p.param_type() {
                Some(ParamType::Buffer(t)) => format!("{}[...] array", t.name()),
                Some(ParamType::Scalar(t)) => format!("{} (int or float: {})", t.name(), p.name),
                None => p.ty.clone(),
            };
            if p.dir == Direction::In {
                let _ = writeln!(s, "        table[\"{}\"]: {ty}", p.name);
            } else {
                let shape = p.shape.as_ref().map_or_else(
                    || {
                        p.len
                            .as_ref()
                            .map_or(String::new(), |l| l.source().to_string())
                    },
                    |sh| {
                        sh.iter()
                            .map(|e| e.source().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                );
                ret = format!(
                    "    Returns `{}`: a {} array of shape ({shape}), CuPy or NumPy.",
                    p.name,
                    ty.split('[').next().unwrap_or("")
                );
            }
        }
        let _ = writeln!(s, "{ret}\n    \"\"\"");
        let _ = writeln!(
            s,
            "    raise NotImplementedError(\"{}: not implemented yet\")",
            m.kernel
        );
    }
    s
}

/// Where `def NAME(` is still the starter's stub (its body only a docstring, comments,
/// `pass` or `raise NotImplementedError`): its 1-based line.
pub fn stub_line(text: &str, name: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let head = format!("def {name}(");
    let start = lines.iter().position(|l| l.starts_with(&head))?;
    let mut in_doc = false;
    for l in &lines[start + 1..] {
        let t = l.trim();
        if !l.starts_with([' ', '\t']) && !t.is_empty() {
            break;
        }
        if in_doc {
            in_doc = !(t.ends_with("\"\"\"") || t.ends_with("'''"));
            continue;
        }
        if t.starts_with("\"\"\"") || t.starts_with("'''") {
            let q = &t[..3];
            in_doc = !(t.len() >= 6 && t[3..].contains(q));
            continue;
        }
        if t.is_empty()
            || t.starts_with('#')
            || t == "pass"
            || t.starts_with("raise NotImplementedError")
        {
            continue;
        }
        return None;
    }
    Some(start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stub_is_found_and_a_body_is_not_a_stub() {
        let stub = "import cupy as cp\n\n\ndef preprocess(table):\n    \"\"\"Doc\n\n    more\n    \"\"\"\n    raise NotImplementedError(\"x\")\n";
        assert_eq!(stub_line(stub, "preprocess"), Some(4));
        let done = stub.replace(
            "    raise NotImplementedError(\"x\")\n",
            "    return cp.zeros(3)\n",
        );
        assert_eq!(stub_line(&done, "preprocess"), None);
        assert_eq!(stub_line(stub, "other"), None);
        let one_line_doc = "def f(t):\n    \"\"\"Doc.\"\"\"\n    pass\n\nx = 1\n";
        assert_eq!(stub_line(one_line_doc, "f"), Some(1));
    }

    #[test]
    fn the_preprocess_starter_is_a_stub_with_the_table() {
        let lab = crate::labs::find("preprocess").unwrap();
        let m = lab.materialize().unwrap();
        let r = crate::rubric::load(&m.rubric_path).unwrap();
        assert!(is_function_lab(&r));
        let s = source(lab, &r);
        assert!(s.contains("def preprocess(table):"), "{s}");
        assert!(s.contains("table[\"amount\"]"), "{s}");
        assert!(s.contains("shape (rows, 4 + categories)"), "{s}");
        assert_eq!(
            stub_line(&s, "preprocess").map(|l| s.lines().nth(l - 1).unwrap()),
            Some("def preprocess(table):")
        );
    }
}
