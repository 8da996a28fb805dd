//! The student's `lab.md` (`cugrade init LAB DIR`), written from the lab's document
//! (docs/labs/LAB.md), which is the instructor's: it names the rubric, the reference kernels,
//! the example submissions, the tests and the validation logs of cugrade's repository, and
//! links to the rest of its documentation (issue 32). The student's folder has none of them.
//!
//! What the student gets: the title without the rubric's path; every section but the measured
//! thresholds and the examples; parentheticals and sentences that point into cugrade's
//! repository left out, and links to it reduced to their text (the only link is to the
//! folder's README.md); "What you write" in the starter's language (Numba `def` lines for a
//! Numba starter, the RawModule for a CuPy one), and for Numba CUDA C++'s names in prose in
//! Numba's (`cuda.syncthreads()`, `cuda.atomic.add`, `cuda.grid(1)`); for a Python function
//! lab, the NumPy reference the lab says the student is given.

use super::common::StarterLang;
use super::text::*;
use crate::labs::Lab;
use crate::rubric::LoadedRubric;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// Wrap `text` at 95 columns, each line after the first starting with `indent`.
fn wrap(text: &str, first: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > 95 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out
}

/// Blocks of a section: code fences whole, tables by row, list items and paragraphs joined.
fn blocks(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut fence = false;
    let flush = |cur: &mut Vec<&str>, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(cur.join("\n"));
            cur.clear();
        }
    };
    for line in body.lines() {
        let t = line.trim_start();
        if fence {
            cur.push(line);
            if t.starts_with("```") {
                fence = false;
                flush(&mut cur, &mut out);
            }
            continue;
        }
        if t.starts_with("```") {
            flush(&mut cur, &mut out);
            fence = true;
            cur.push(line);
        } else if t.is_empty() {
            flush(&mut cur, &mut out);
        } else if t.starts_with('|') {
            // A table starts a block; `|B|` continuing a paragraph's line is not one.
            cur.push(line);
        } else if t.starts_with("- ") || t.starts_with("* ") {
            flush(&mut cur, &mut out);
            cur.push(line);
        } else {
            cur.push(line);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// One block for the student; `None` when nothing of it is left.
fn clean_block(
    block: &str,
    examples: bool,
    numba: bool,
    points: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let speak = |t: String| if numba { numba_terms(&t) } else { t };
    let t = block.trim_start();
    if t.starts_with("```") {
        return Some(block.to_string());
    }
    let table = t.starts_with('|')
        && block.lines().nth(1).is_some_and(|l| {
            l.trim_start().starts_with("| ---") || l.trim_start().starts_with("|---")
        });
    if table {
        let rows: Vec<String> = block
            .lines()
            .filter_map(|row| {
                let raw: Vec<&str> = row.trim().trim_matches('|').split('|').collect();
                // A milestone's points given as "see the rubric": the rubric's number.
                let cells: Vec<String> = raw
                    .iter()
                    .enumerate()
                    .map(|(i, c)| match points(raw[0]) {
                        Some(p) if i == 1 && points_away(c) => p,
                        _ => speak(clean(c.trim(), false)),
                    })
                    .collect();
                let row = format!("| {} |", cells.join(" | "));
                (!points_away(&row)).then_some(row)
            })
            .collect();
        return (rows.len() > 1).then(|| rows.join("\n"));
    }
    let joined = block.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    let (first, indent, text) = match joined.strip_prefix("- ") {
        Some(rest) => ("- ", "  ", rest),
        None => ("", "", joined.as_str()),
    };
    let mut text = clean(text, examples);
    if numba {
        // A mistake only CUDA C++ can make (a missing `extern "C"`) is not a Numba student's.
        if C_ONLY.is_match(&text) {
            text = keep_sentences(&text, |s| !C_ONLY.is_match(s));
            // Only its title left: the whole item was CUDA C++'s.
            if text.trim_end().ends_with(':') {
                return None;
            }
        }
        text = numba_terms(&text);
    }
    (!text.trim().is_empty()).then(|| wrap(&text, first, indent))
}

/// CUDA C++'s names in prose, in Numba's.
fn numba_terms(text: &str) -> String {
    const PAIRS: &[(&str, &str)] = &[
        ("blockIdx.x * blockDim.x + threadIdx.x", "cuda.grid(1)"),
        ("__syncthreads()", "cuda.syncthreads()"),
        ("__syncthreads", "cuda.syncthreads"),
        ("atomicAdd", "cuda.atomic.add"),
        ("atomicMax", "cuda.atomic.max"),
        ("__shfl_down_sync", "cuda.shfl_down_sync"),
        ("__shfl_xor_sync", "cuda.shfl_xor_sync"),
        ("__shared__", "cuda.shared.array"),
    ];
    static DIM: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(cuda\.)?\b(threadIdx|blockIdx|blockDim|gridDim)\b").expect("static")
    });
    // `if (i < n)` is `if i < n:`.
    static IF: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\bif \(([^()`]*)\)").expect("static"));
    let mut s = IF.replace_all(text, "if $1:").into_owned();
    for (c, py) in PAIRS {
        s = s.replace(c, py);
    }
    DIM.replace_all(&s, |c: &regex::Captures| format!("cuda.{}", &c[2]))
        .into_owned()
}

/// "What you write" in the starter's language.
fn what_you_write(body: &str, r: &LoadedRubric, lang: StarterLang, source: &str) -> String {
    let prose: Vec<String> = blocks(body)
        .into_iter()
        .filter(|b| !b.trim_start().starts_with("```"))
        .collect();
    let mut out = String::new();
    match lang {
        StarterLang::Cuda => {
            let _ = writeln!(
                out,
                "Write the kernels in `{source}` (the starter has their signatures):\n"
            );
            for b in blocks(body) {
                out.push_str(&b);
                out.push_str("\n\n");
            }
            return out;
        }
        StarterLang::Numba => {
            let _ = writeln!(
                out,
                "Write each kernel as a Numba `@cuda.jit` function in `{source}`, with the name \
                 and the parameters in this order (the starter has them; arrays are 1-D unless \
                 noted):\n\n```python"
            );
            for (kernel, contract) in super::common::kernels(r) {
                let _ = writeln!(
                    out,
                    "@cuda.jit\n{}\n    ...\n",
                    super::numba::def_line(kernel, r.contract(contract))
                );
            }
            let trimmed = out.trim_end().to_string();
            out = trimmed + "\n```\n\n";
        }
        StarterLang::Cupy => {
            let _ = writeln!(
                out,
                "The kernels are CUDA C++ in the `cp.RawModule` source string of `{source}`, each \
                 fetched under its name (the starter has them). Each takes these parameters:\n"
            );
            for b in blocks(body)
                .into_iter()
                .filter(|b| b.trim_start().starts_with("```"))
            {
                out.push_str(&b);
                out.push_str("\n\n");
            }
        }
    }
    for p in prose {
        // What introduced the C signatures, now above, ends here.
        let p = p.trim_end();
        match p.strip_suffix(':') {
            Some(rest) => out.push_str(&format!("{rest}.")),
            None => out.push_str(p),
        }
        out.push_str("\n\n");
    }
    out
}

/// The student's lab.md for a starter in `lang` whose source file is `source`.
pub fn lab_md(lab: &Lab, r: &LoadedRubric, lang: StarterLang, source: &str) -> String {
    let function_lab = super::function::is_function_lab(r);
    let points = |cell: &str| -> Option<String> {
        let id = cell.trim().trim_matches('`');
        r.rubric
            .milestones
            .iter()
            .find(|m| m.id == id)
            .map(|m| crate::rubric::milestone_max(m).to_string())
    };
    let mut sections: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in lab.doc.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            sections.push((h.trim().to_string(), String::new()));
        } else if !line.starts_with("# ")
            && let Some(last) = sections.last_mut()
        {
            last.1.push_str(line);
            last.1.push('\n');
        }
    }
    let mut out = format!("# {}\n\n", title(lab).replace('`', ""));
    for (heading, body) in &sections {
        // The instructor's: thresholds measured on cugrade's GPUs, its example submissions.
        if heading.starts_with("Measured") || heading == "Examples" {
            continue;
        }
        let body = if heading == "What you write" && !function_lab {
            what_you_write(body, r, lang, source)
        } else {
            body.clone()
        };
        let examples = heading.starts_with("Common mistakes");
        let kept: Vec<String> = blocks(&body)
            .iter()
            .filter_map(|b| clean_block(b, examples, lang == StarterLang::Numba, &points))
            .collect();
        if kept.is_empty() {
            continue;
        }
        if !heading.is_empty() {
            let _ = writeln!(out, "## {heading}\n");
        }
        for (i, b) in kept.iter().enumerate() {
            out.push_str(b);
            // List items stay one list.
            let next_item = kept.get(i + 1).is_some_and(|n| n.starts_with("- "));
            out.push_str(if b.starts_with("- ") && next_item {
                "\n"
            } else {
                "\n\n"
            });
        }
    }
    if function_lab {
        let _ = writeln!(
            out,
            "## The NumPy reference\n\nThe pipeline to port, as the grader runs it (the \
             definition of every column):\n\n```python\n{}```\n",
            lab.reference
                .replace(&format!("docs/labs/{}.md", lab.name), "lab.md")
        );
    }
    let _ = writeln!(
        out,
        "## Grading your work\n\nRun `cugrade check` in this folder; [README.md](README.md) says \
         what it needs and what it reports."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_into_the_repository_are_left_out() {
        assert_eq!(
            clean(
                "The CPU implementation (`reduce_sum` in `src/baseline/reduction.rs`) sums in \
                 f64. Each has an example under `submissions-example/reduction/`. Cases \
                 ([rubric.md](../rubric.md#x)) are fixed; see [CUDA](https://docs.nvidia.com).",
                false
            ),
            "The CPU implementation sums in f64. Cases are fixed; see [CUDA](https://docs.nvidia.com)."
        );
        assert_eq!(
            clean(
                "**Missing bounds** (`missing_bounds`): load 0 (not `in[i]`).",
                true
            ),
            "**Missing bounds**: load 0 (not `in[i]`)."
        );
        assert_eq!(
            numba_terms(
                "use blockIdx.x * blockDim.x + threadIdx.x, then __syncthreads() and \
                 threadIdx.x; `if (i <= n)` is wrong"
            ),
            "use cuda.grid(1), then cuda.syncthreads() and cuda.threadIdx.x; `if i <= n:` is wrong"
        );
    }
}
