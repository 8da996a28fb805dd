//! What a command prints, in the format asked for (the files it writes are `outputs`).

use crate::report;
use crate::result::GradeResult;
use clap::ValueEnum;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    /// Human summary plus `::error file=…,line=…::` annotations for GitHub Actions.
    Github,
    /// result.json on standard output.
    Json,
}

/// How much `check` prints in the human format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// The total line only.
    Quiet,
    Normal,
    /// The summary plus every check, passing ones too.
    Verbose,
}

/// Width when cugrade cannot tell (not a terminal, no `COLUMNS`).
pub const COLUMNS: usize = 80;
/// Narrowest layout: below this, wrapping makes text harder to read, not easier.
const MIN_COLUMNS: usize = 30;

/// The width to lay the human summary out for: `COLUMNS` when it is set to a number (as a
/// shell exports it, or a user to override), else the width of the terminal stdout (or stderr)
/// is, else [`COLUMNS`].
pub fn columns() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    let from_tty = || {
        terminal_size::terminal_size_of(std::io::stdout())
            .or_else(|| terminal_size::terminal_size_of(std::io::stderr()))
            .map(|(w, _)| usize::from(w.0))
            .filter(|&c| c > 0)
    };
    from_env
        .or_else(from_tty)
        .unwrap_or(COLUMNS)
        .max(MIN_COLUMNS)
}

/// Columns a string takes on a terminal: characters, less ANSI colour sequences.
fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        if in_escape {
            in_escape = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            in_escape = true;
        } else {
            n += 1;
        }
    }
    n
}

/// A line of a quoted source snippet (`12 |     code`, `   |     ^^^`, `  --> file:12:5`): the
/// renderer already fitted it to the width, and wrapping would break the underline.
fn is_snippet_line(line: &str) -> bool {
    let plain = strip_ansi(line);
    let t = plain.trim_start();
    let after_number = t.trim_start_matches(|c: char| c.is_ascii_digit());
    t.starts_with("--> ") || t.starts_with("::: ") || after_number.trim_start().starts_with('|')
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_escape = false;
    for c in s.chars() {
        if in_escape {
            in_escape = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            in_escape = true;
        } else {
            out.push(c);
        }
    }
    out
}

/// [`fit_to`] the width of the terminal ([`columns`]).
pub fn fit(text: &str) -> String {
    fit_to(text, columns())
}

/// Fit the human summary to `width` columns: prose lines wrap at spaces, continuing under their
/// own indentation plus two; evidence lines (compiler logs, mismatch tables, behind `│`) wrap
/// the same way behind their bar, so nothing is cut (a tolerance stays whole); a word longer
/// than a line is broken. Quoted source lines are left to the diagnostic renderer.
pub fn fit_to(text: &str, width: usize) -> String {
    let width = width.max(MIN_COLUMNS);
    let mut out = String::new();
    for line in text.lines() {
        if visible_width(line) <= width || is_snippet_line(line) {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // The part every wrapped piece repeats: the indentation, or an evidence line's bar.
        let (lead, body) = match line.find('│') {
            Some(i) => {
                // The bar, the colour codes that close it, and the space after it.
                let mut end = i + '│'.len_utf8();
                while line[end..].starts_with('\x1b') {
                    end += line[end..]
                        .find(|c: char| c.is_ascii_alphabetic())
                        .map_or(0, |j| j + 1);
                    if end >= line.len() {
                        break;
                    }
                }
                if line[end..].starts_with(' ') {
                    end += 1;
                }
                (&line[..end], &line[end..])
            }
            None => {
                let indent = line.len() - line.trim_start().len();
                (&line[..indent], &line[indent..])
            }
        };
        let lead_width = visible_width(lead);
        let cont = if line.contains('│') {
            format!("{lead}  ")
        } else {
            " ".repeat((lead_width + 2).min(width / 2))
        };
        let cont_width = visible_width(&cont);
        let mut current = lead.to_string();
        let mut used = lead_width;
        let mut first = true;
        for word in body.split(' ') {
            let mut word = word.to_string();
            let ww = visible_width(&word);
            // GitHub reads a workflow command at the start of any output line, leading spaces
            // trimmed: never start a continuation line with student text that could be one.
            let safe_start = !word.starts_with(':') && !word.starts_with('#');
            if !first && used + 1 + ww > width && safe_start {
                out.push_str(&current);
                out.push('\n');
                current = cont.clone();
                used = cont_width;
                first = true;
            }
            if !first {
                current.push(' ');
                used += 1;
            }
            // A word wider than the room left is broken (a long path, a hash).
            while visible_width(&word) > width.saturating_sub(used) && !word.contains('\x1b') {
                let mut room = width.saturating_sub(used).max(1);
                // The piece that starts the next line must not start a workflow command.
                while room > 1 && word.chars().nth(room).is_some_and(|c| c == ':' || c == '#') {
                    room -= 1;
                }
                let cut: String = word.chars().take(room).collect();
                word = word.chars().skip(room).collect();
                current.push_str(&cut);
                out.push_str(&current);
                out.push('\n');
                current = cont.clone();
                used = cont_width;
            }
            used += visible_width(&word);
            current.push_str(&word);
            first = false;
        }
        out.push_str(&current);
        out.push('\n');
    }
    out
}

/// `text` after `tag` (`"MISS "`), fitted to `width` columns ([`fit_to`]) with every
/// continuation line under the text, not under the tag: `cugrade doctor`'s lines.
pub fn hang(tag: &str, text: &str, width: usize) -> String {
    let pad = " ".repeat(visible_width(tag));
    let room = width.max(MIN_COLUMNS).saturating_sub(pad.len());
    let mut out = String::new();
    for (i, line) in fit_to(text, room).lines().enumerate() {
        if i == 0 {
            out.push_str(tag);
            out.push_str(line);
        } else {
            // `fit_to` continues a line two columns in; here the tag's width holds the place.
            out.push_str(&pad);
            out.push_str(line.strip_prefix("  ").unwrap_or(line));
        }
        out.push('\n');
    }
    out
}

fn color_for(format: Format) -> bool {
    format == Format::Human && report::terminal::stdout_wants_color()
}

/// [`print_result`] at a verbosity: quiet keeps only the summary's last line (the total);
/// verbose adds every check with its status and whole message. Only the human format changes.
pub fn print_result_at(r: &GradeResult, format: Format, dir: Option<&Path>, v: Verbosity) {
    if format != Format::Human || v == Verbosity::Normal {
        return print_result(r, format, dir);
    }
    let color = color_for(format);
    let width = columns();
    let text = fit_to(
        &report::terminal::render_at(r, color, v == Verbosity::Verbose, width),
        width,
    );
    match v {
        Verbosity::Quiet => {
            if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                println!("{last}");
            }
        }
        _ => {
            print!("{text}");
            print!("{}", fit_to(&every_check(r), width));
        }
    }
}

/// `--verbose`'s list: every check of every milestone with its status and its whole message
/// (continuation lines indented under it; the terminal width wraps, nothing is cut).
pub fn every_check(r: &GradeResult) -> String {
    let mut out = String::from("\nEvery check:\n");
    for m in &r.milestones {
        for c in &m.checks {
            // A speed check of a correct kernel that no GPU could time was not measured.
            let status = if report::describe::unmeasured(m, c) {
                "unmeasured"
            } else {
                c.status.as_str()
            };
            let text = report::sanitize::plain_text(&c.message);
            let mut lines = text.lines();
            let first = format!(
                "  {status:<10} {} › {}: {}",
                report::sanitize::one_line(&m.id),
                report::sanitize::one_line(&c.name),
                lines.next().unwrap_or("").trim_end()
            );
            out.push_str(&first);
            out.push('\n');
            for l in lines {
                // Never at the start of a line: GitHub reads workflow commands there.
                out.push_str(&format!(
                    "             {}\n",
                    l.replace('\t', "    ").trim_end()
                ));
            }
        }
    }
    out
}

/// Print a result as `format` asks. `dir` is the submission's folder as the user named it,
/// so GitHub annotations point at files from where the job runs.
pub fn print_result(r: &GradeResult, format: Format, dir: Option<&Path>) {
    match format {
        Format::Human => {
            let width = columns();
            print!(
                "{}",
                fit_to(
                    &report::terminal::render_at(r, color_for(format), false, width),
                    width
                )
            )
        }
        Format::Github => {
            let prefix = repo_relative(dir.unwrap_or(Path::new(".")));
            print!("{}", report::terminal::github_in(r, &prefix))
        }
        Format::Json => println!("{}", report::terminal::json(r)),
    }
}

/// A folder as GitHub names files in annotations: relative to the root of the repository
/// (`$GITHUB_WORKSPACE` in Actions, else the nearest folder above the current one that holds
/// `.git`), so that `cugrade check` run in a subfolder (or on `submissions/alice`) still points
/// at `lab1/reduce.cu`. A folder outside the repository stays as given; the root is `""`.
pub fn repo_relative(dir: &Path) -> String {
    let given = || {
        let d = dir.to_string_lossy();
        let d = d.trim_end_matches('/');
        if d == "." {
            String::new()
        } else {
            d.trim_start_matches("./").to_string()
        }
    };
    let Ok(cwd) = std::env::current_dir() else {
        return given();
    };
    let Ok(abs) = std::fs::canonicalize(cwd.join(dir)) else {
        return given();
    };
    let root = std::env::var_os("GITHUB_WORKSPACE")
        .filter(|w| !w.is_empty())
        .and_then(|w| std::fs::canonicalize(w).ok())
        .or_else(|| {
            let cwd = std::fs::canonicalize(&cwd).ok()?;
            cwd.ancestors()
                .find(|a| a.join(".git").exists())
                .map(Path::to_path_buf)
        });
    match root.as_deref().and_then(|r| abs.strip_prefix(r).ok()) {
        Some(rel) => rel.to_string_lossy().into_owned(),
        None => given(),
    }
}

/// `grade --format json`: one line of JSON per student, each exactly that student's
/// result.json (JSON Lines: `jq` reads it as a stream; a line is never split).
pub fn json_line(r: &GradeResult) -> String {
    serde_json::to_string(r)
        .unwrap_or_else(|e| format!("{{\"error\": \"could not serialize result: {e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_wraps_prose_and_evidence_to_the_width() {
        let long = format!("note: {}", "word ".repeat(40));
        let tolerance = format!(
            "    │ `out`: 1 of 1 elements wrong; tolerance: |got - expected| <= 5.000e-1 + 0.000e0 * |expected| {}",
            "x".repeat(120)
        );
        let coloured = format!("\x1b[1mTotal:\x1b[0m {}", "y ".repeat(30));
        let snippet = format!("12 |     {}", "code ".repeat(30));
        for width in [60, 80, 140] {
            let text = fit_to(
                &format!("short\n{long}\n{tolerance}\n{coloured}\n{snippet}\n"),
                width,
            );
            for l in text.lines().filter(|l| !l.starts_with("12 |")) {
                assert!(visible_width(l) <= width, "{width}: {l}");
            }
            assert!(text.starts_with("short\nnote: word"));
            assert!(text.contains("\n  word"), "continuation indented: {text}");
            assert_eq!(text.matches("word").count(), 40);
            // Evidence wraps behind its bar: nothing is cut, not even the tolerance.
            let joined: String = text
                .lines()
                .filter(|l| l.contains('│'))
                .map(|l| l.split_once('│').unwrap().1.trim())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                joined.contains("|got - expected| <= 5.000e-1 + 0.000e0 * |expected|"),
                "{joined}"
            );
            assert!(
                joined.replace(' ', "").contains(&"x".repeat(120)),
                "{joined}"
            );
            assert!(!text.contains('…'), "{text}");
            // A quoted source line is the renderer's to shorten.
            assert!(text.contains(&snippet), "{text}");
        }
        assert_eq!(visible_width("\x1b[31mred\x1b[0m"), 3);
        // No wrapped line starts with what GitHub would read as a workflow command.
        // 39 one-letter words fill 77 columns: `::error` is the word that would wrap.
        let forged = format!("{}::error file=x::owned ##[set-env]", "a ".repeat(39));
        let glued = format!("{}::error", "b".repeat(78));
        for l in fit_to(&forged, 80)
            .lines()
            .chain(fit_to(&glued, 80).lines())
        {
            let t = l.trim_start();
            assert!(!t.starts_with("::") && !t.starts_with("##"), "{l}");
        }
    }
}
