//! Text of lab documents as a student reads it: a lab's title without the rubric's path,
//! prose without the parentheticals, sentences and links that point into cugrade's own
//! repository. A leaf of `commands::init`: every starter language and `lab.md` use it.

use crate::labs::Lab;
use std::sync::LazyLock;

/// A path into cugrade's repository (or above the student's folder).
pub(super) static REPO_PATH: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"\.\./|\b(?:submissions-example|reference-kernels|rubrics|src|tests|ci|docs|validation)/",
    )
    .expect("static regex")
});

/// A Markdown link: text, target.
pub(super) static LINK: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\[([^\]]*)\]\(([^)\s]*)\)").expect("static regex"));

/// CUDA C++ that has no Numba counterpart.
pub(super) static C_ONLY: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r#"extern "C"|__global__"#).expect("static regex"));

/// Whether `text` points into cugrade's repository: a path, or a relative link.
pub(super) fn points_away(text: &str) -> bool {
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
pub(super) fn drop_parentheticals(text: &str, examples: bool) -> String {
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

/// Sentences of `text` that do not point away.
pub(super) fn drop_sentences(text: &str) -> String {
    keep_sentences(text, |s| !points_away(s))
}

/// Sentences of `text` that `keep` (split after `.` or `:` and a space before a capital, a
/// backtick or `*`).
pub(super) fn keep_sentences(text: &str, keep: impl Fn(&str) -> bool) -> String {
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
pub(super) fn unlink(text: &str) -> String {
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
