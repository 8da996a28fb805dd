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

use super::starter::StarterLang;
use crate::labs::Lab;
use crate::rubric::LoadedRubric;
use std::fmt::Write as _;
use std::sync::LazyLock;

/// A path into cugrade's repository (or above the student's folder).
static REPO_PATH: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"\.\./|\b(?:submissions-example|reference-kernels|rubrics|src|tests|ci|docs|validation)/",
    )
    .expect("static regex")
});

/// A Markdown link: text, target.
static LINK: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\[([^\]]*)\]\(([^)\s]*)\)").expect("static regex"));

/// Whether `text` points into cugrade's repository: a path, or a relative link.
fn points_away(text: &str) -> bool {
    REPO_PATH.is_match(text)
        || LINK
            .captures_iter(text)
            .any(|c| !c[2].starts_with("http://") && !c[2].starts_with("https://"))
}

/// The lab's title without the rubric's path: "Lab: parallel reduction".
pub fn title(lab: &Lab) -> String {
    let h = lab.heading();
    match h.rfind(" (") {
        Some(i) if h.ends_with(')') && points_away(&h[i..]) => h[..i].to_string(),
        _ => h.to_string(),
    }
}

/// Leave out every parenthetical (balanced, any nesting) that points away; with `examples`,
/// also one that names an example submission right after a bold title
/// (`**Missing bounds** (`missing_bounds`):`).
fn drop_parentheticals(text: &str, examples: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '(' {
            let mut depth = 0;
            let mut end = None;
            for (j, c) in chars.iter().enumerate().skip(i) {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(j);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            if let Some(j) = end {
                let inner: String = chars[i + 1..j].iter().collect();
                let after_bold = out.trim_end().ends_with("**");
                let names_example = examples && after_bold && inner.starts_with('`');
                // A link's target is a parenthetical too: `[t](u)` stays for the link pass.
                let is_target = i > 0 && chars[i - 1] == ']';
                if !is_target && (points_away(&inner) || names_example) {
                    while out.ends_with(' ') {
                        out.pop();
                    }
                    i = j + 1;
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// CUDA C++ that has no Numba counterpart.
static C_ONLY: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r#"extern "C"|__global__"#).expect("static regex"));

/// Sentences of `text` that do not point away.
fn drop_sentences(text: &str) -> String {
    keep_sentences(text, |s| !points_away(s))
}

/// Sentences of `text` that `keep` (split after `.` or `:` and a space before a capital, a
/// backtick or `*`).
fn keep_sentences(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut sentences = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    for (i, _) in text.match_indices(". ").chain(text.match_indices(": ")) {
        let next = b.get(i + 2).copied().unwrap_or(b' ');
        if next.is_ascii_uppercase() || next == b'`' || next == b'*' {
            sentences.push(i + 2);
        }
    }
    sentences.sort_unstable();
    let mut out = String::new();
    for end in sentences.into_iter().chain([text.len()]) {
        if end <= start {
            continue;
        }
        let s = &text[start..end];
        if keep(s) {
            out.push_str(s);
        }
        start = end;
    }
    out.trim_end().to_string()
}

/// Links to cugrade's repository reduced to their text.
fn unlink(text: &str) -> String {
    LINK.replace_all(text, |c: &regex::Captures| {
        if c[2].starts_with("http://") || c[2].starts_with("https://") {
            c[0].to_string()
        } else {
            c[1].to_string()
        }
    })
    .into_owned()
}

/// Prose for the student: see the module's documentation.
pub fn clean(text: &str, examples: bool) -> String {
    let text = drop_parentheticals(text, examples);
    let text = unlink(&text);
    if points_away(&text) {
        drop_sentences(&text)
    } else {
        text
    }
}

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
            for (kernel, contract) in super::starter::kernels(r) {
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
