//! summary.md's "Most common failure causes": how many students (never findings) each cause
//! stopped, with a clean short form of the message.
//!
//! - A cause is the milestones it stopped, the kind of check and the message's shape: its
//!   first line with numbers and quoted names blanked (`out[0] is 499712` and `out[0] is 12`
//!   are one cause, so are `identifier "x" is undefined` and `identifier "y" is undefined`).
//! - A student counts once per cause, and a submission that does not compile counts once among
//!   the compile causes, under its first error: the compiler's second and third errors are
//!   consequences more often than causes, and ten errors are still one student.
//! - A submission that could not be read (a broken archive, a bad manifest) or that holds no
//!   source file is neither a compile error nor the student's code: it is its own cause
//!   (`submission unreadable`, `empty submission`), from the check's `cause` key.
//! - The example shown is the message's first line, quoted names shortened and the whole
//!   cut at a word with `…`: a table cell, never a truncation marker.

use super::findings::{Shared, placed};
use super::markdown::inline;
use crate::result::{Check, CheckKind, GradeResult, Status};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// How many causes the summary lists.
const TOP_CAUSES: usize = 10;
/// The longest example shown, in characters.
const SHORT: usize = 110;
/// The longest quoted name kept whole in an example.
const NAME: usize = 28;

/// The `cause` key of a submission cugrade could not read, and of one with no source file.
pub const UNREADABLE: &str = "unreadable";
pub const EMPTY: &str = "empty";

/// One row: the check column's words and the message's shape.
fn cause_key(c: &Check) -> (String, String) {
    match c.cause.as_deref() {
        Some(UNREADABLE) if c.kind == CheckKind::Compile => {
            return ("submission unreadable".into(), String::new());
        }
        Some(EMPTY) if c.kind == CheckKind::Compile => {
            return ("empty submission".into(), String::new());
        }
        _ => {}
    }
    let first_line = c.message.lines().next().unwrap_or("");
    let head = match first_line.split_once(':') {
        Some((h, _)) if c.kind != CheckKind::Compile && h.len() <= 60 => h,
        _ => first_line,
    };
    let mut blanked = String::new();
    let (mut in_number, mut in_quote) = (false, false);
    for ch in head.chars().take(160) {
        if ch == '"' {
            if !in_quote {
                blanked.push_str("\"…");
            }
            in_quote = !in_quote;
            if !in_quote {
                blanked.push('"');
            }
            continue;
        }
        if in_quote {
            continue;
        }
        if ch.is_ascii_digit() || (in_number && (ch.is_ascii_hexdigit() || matches!(ch, '.' | 'x')))
        {
            if !in_number {
                blanked.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            blanked.push(ch);
        }
    }
    (c.kind.as_str().to_string(), blanked)
}

/// A message's first line as a table cell: `error: ` dropped, long quoted names shortened,
/// cut at a word (with `…`) past [`SHORT`] characters.
pub fn short_form(message: &str) -> String {
    let first = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let mut out = String::new();
    let mut quoted = String::new();
    let mut in_quote = false;
    for ch in first.chars() {
        match (ch, in_quote) {
            ('"', false) => in_quote = true,
            ('"', true) => {
                out.push('"');
                if quoted.chars().count() > NAME {
                    out.extend(quoted.chars().take(NAME - 1));
                    out.push('…');
                } else {
                    out.push_str(&quoted);
                }
                out.push('"');
                quoted.clear();
                in_quote = false;
            }
            (_, true) => quoted.push(ch),
            (_, false) => out.push(ch),
        }
    }
    if in_quote {
        out.push('"');
        out.extend(quoted.chars().take(NAME));
    }
    let out: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.chars().count() <= SHORT {
        return out;
    }
    let cut: String = out.chars().take(SHORT).collect();
    let at_word = match cut.rfind(' ') {
        Some(i) if i > SHORT / 2 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{}…", at_word.trim_end_matches([',', ';', ':', ' ']))
}

/// One cause: how many students, and the first one's message as the example.
struct Row {
    students: usize,
    example: String,
}

/// The "Most common failure causes" section, when any check failed or errored.
pub fn section(out: &mut String, results: &[GradeResult]) {
    // (milestones, check column, shape) -> students, example
    let mut causes: BTreeMap<(String, String, String), Row> = BTreeMap::new();
    for r in results {
        let mut seen = HashSet::new();
        // A milestone group whose compile causes already counted this student.
        let mut compiled = HashSet::new();
        // A finding several milestones share (one compile error stops them all) is one cause,
        // under the milestones it stopped.
        for p in placed(r).iter().flatten() {
            let milestones = match &p.shared {
                Shared::Repeat { .. } => continue,
                Shared::First { also } => {
                    let mut ids = vec![p.milestone.id.as_str()];
                    ids.extend(also);
                    ids.join(", ")
                }
                Shared::Alone => p.milestone.id.clone(),
            };
            for c in p
                .finding
                .all
                .iter()
                .filter(|c| matches!(c.status, Status::Fail | Status::Error))
            {
                let (check, shape) = cause_key(c);
                if check == CheckKind::Compile.as_str() && !compiled.insert(milestones.clone()) {
                    continue;
                }
                let key = (milestones.clone(), check, shape);
                if seen.insert(key.clone()) {
                    let example = match c.cause.as_deref() {
                        Some(EMPTY) => "no .cu, .ptx or .py file in the submission".into(),
                        _ => short_form(
                            c.message
                                .strip_prefix("the submission could not be read: ")
                                .unwrap_or(&c.message),
                        ),
                    };
                    causes
                        .entry(key)
                        .or_insert(Row {
                            students: 0,
                            example,
                        })
                        .students += 1;
                }
            }
        }
    }
    if causes.is_empty() {
        return;
    }
    let mut ranked: Vec<_> = causes.into_iter().collect();
    ranked.sort_by(|a, b| b.1.students.cmp(&a.1.students).then_with(|| a.0.cmp(&b.0)));
    let _ = writeln!(
        out,
        "\n## Most common failure causes\n\nStudents per cause: a student counts once per cause, \
         and once among the compile errors (under the first).\n\n\
         | Students | Milestone | Check | Example message |\n| ---: | --- | --- | --- |"
    );
    for ((milestones, check, _), row) in ranked.iter().take(TOP_CAUSES) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            row.students,
            inline(milestones),
            inline(check),
            inline(&row.example)
        );
    }
    if ranked.len() > TOP_CAUSES {
        let _ = writeln!(
            out,
            "\n{} more causes in the students' reports.",
            ranked.len() - TOP_CAUSES
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms_are_clean_and_short() {
        let long = format!(
            "error: identifier \"{}\" is undefined\nmore",
            "a_very_long_name".repeat(12)
        );
        let s = short_form(&long);
        assert_eq!(
            s,
            "identifier \"a_very_long_namea_very_long…\" is undefined"
        );
        let words = "word ".repeat(60);
        let s = short_form(&words);
        assert!(
            s.ends_with("word…") && s.chars().count() <= SHORT + 1,
            "{s}"
        );
        assert!(!s.contains("truncated"));
        assert_eq!(
            short_form("out[0] is 3, expected 4"),
            "out[0] is 3, expected 4"
        );
    }
}
