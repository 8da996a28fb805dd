//! Bounds on the YAML cugrade reads before any parser builds anything from it.
//!
//! A manifest (`cugrade.yaml`) is a student's file and a rubric may come from anywhere: both
//! are read by serde_yaml (libyaml), whose scanner walks its stack of possible simple keys for
//! every token, so a file of deeply nested flow collections (`[[[[...`) costs time quadratic in
//! its depth: 100 KB took 7 s, 2 MiB over 15 minutes. cugrade's own position index
//! ([`super::locate`]) keeps one path per node, quadratic in memory for the same file. So the
//! text is first checked here: its size, then its nesting depth and node count, by a pass of
//! yaml-rust2's event parser that stops at the first level over the bound (its flow level is
//! capped at 255 by construction, so this pass is linear).

use crate::errors::{ConfigError, Pos};
use std::path::Path;
use yaml_rust2::parser::{Event, Parser};

/// The bounds for one kind of file.
#[derive(Debug, Clone, Copy)]
pub struct YamlLimits {
    /// What the file is, for messages: `a rubric`, `a cugrade.yaml`.
    pub what: &'static str,
    pub max_bytes: usize,
    /// Mappings and sequences inside each other.
    pub max_depth: usize,
    /// Scalars, aliases, mappings and sequences.
    pub max_nodes: usize,
}

/// A rubric: the shipped ones are under 20 KB and 8 levels deep.
pub const RUBRIC: YamlLimits = YamlLimits {
    what: "a rubric",
    max_bytes: 1 << 20,
    max_depth: 32,
    max_nodes: 200_000,
};

/// A submission's `cugrade.yaml`: a name, a rubric and a few launch overrides.
pub const MANIFEST: YamlLimits = YamlLimits {
    what: "a cugrade.yaml",
    max_bytes: 64 << 10,
    max_depth: 16,
    max_nodes: 4096,
};

/// When yaml-rust2 cannot parse the file, serde_yaml reports the syntax error in its own words;
/// but only if libyaml's scan stays cheap, which it does while the file has few flow
/// collections to nest (libyaml's cost grows with their depth, bounded by their count).
const FLOW_OPENERS_FOR_LIBYAML: usize = 256;

/// Check `source` (the text of `path`) against `limits`.
pub fn check(path: &Path, source: &str, limits: &YamlLimits) -> Result<(), ConfigError> {
    if source.len() > limits.max_bytes {
        return Err(ConfigError::whole_file(
            path,
            format!(
                "the file is {} bytes; {} may have at most {} bytes",
                source.len(),
                limits.what,
                limits.max_bytes
            ),
        ));
    }
    let mut parser = Parser::new_from_str(source);
    let (mut depth, mut nodes) = (0usize, 0usize);
    loop {
        let too_deep = |at: Option<Pos>| {
            ConfigError::new(
                path,
                at,
                format!(
                    "lists and mappings nest more than {} levels deep here; {} may nest at most \
                     {} levels",
                    limits.max_depth, limits.what, limits.max_depth
                ),
                source,
            )
        };
        let (event, mark) = match parser.next_token() {
            Ok(e) => e,
            Err(e) => {
                let m = e.marker();
                let at = Some(Pos {
                    line: m.line(),
                    col: m.col() + 1,
                });
                // The scanner reads ahead of the events: past 255 flow levels it stops.
                if e.info().contains("recursion limit") {
                    return Err(too_deep(at));
                }
                let openers = source.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
                if openers <= FLOW_OPENERS_FOR_LIBYAML {
                    return Ok(());
                }
                return Err(ConfigError::new(
                    path,
                    at,
                    format!("invalid YAML: {}", e.info()),
                    source,
                ));
            }
        };
        let at = Some(Pos {
            line: mark.line(),
            col: mark.col() + 1,
        });
        match event {
            Event::StreamEnd => return Ok(()),
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                nodes += 1;
                if depth > limits.max_depth {
                    return Err(too_deep(at));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            Event::Scalar(..) | Event::Alias(..) => nodes += 1,
            _ => {}
        }
        if nodes > limits.max_nodes {
            return Err(ConfigError::new(
                path,
                at,
                format!(
                    "more than {} values; {} may hold at most {}",
                    limits.max_nodes, limits.what, limits.max_nodes
                ),
                source,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_text(text: &str, limits: &YamlLimits) -> Result<(), String> {
        check(Path::new("m.yaml"), text, limits).map_err(|e| e.to_string())
    }

    #[test]
    fn deep_flow_nesting_is_refused_at_its_position() {
        let text = format!(
            "launch:\n  k:\n    grid: {}{}\n",
            "[".repeat(400_000),
            "]".repeat(400_000)
        );
        let started = std::time::Instant::now();
        let e = check_text(&text, &RUBRIC).unwrap_err();
        assert!(e.contains("nest more than"), "{e}");
        assert!(e.contains("--> m.yaml:3:"), "{e}");
        // Long lines are shown as a window, not whole.
        assert!(e.len() < 1000, "{}", e.len());
        // Linear: a fraction of a second, where libyaml would take hours.
        assert!(started.elapsed().as_secs() < 30);
    }

    #[test]
    fn deep_block_nesting_and_size_are_refused() {
        let text = format!("student:\n{}x\n", "- ".repeat(100));
        let e = check_text(&text, &MANIFEST).unwrap_err();
        assert!(e.contains("at most 16 levels"), "{e}");
        let big = format!("student: x\n# {}\n", "a".repeat(70 << 10));
        let e = check_text(&big, &MANIFEST).unwrap_err();
        assert!(
            e.contains("a cugrade.yaml may have at most 65536 bytes"),
            "{e}"
        );
        let many = format!("launch: {{ k: {{ grid: [{}1] }} }}\n", "1, ".repeat(5000));
        let e = check_text(&many, &MANIFEST).unwrap_err();
        assert!(e.contains("more than 4096 values"), "{e}");
    }

    #[test]
    fn ordinary_files_and_syntax_errors_pass_through() {
        for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/rubrics")).unwrap() {
            let p = f.unwrap().path();
            let text = std::fs::read_to_string(&p).unwrap();
            check(&p, &text, &RUBRIC).unwrap_or_else(|e| panic!("{e}"));
        }
        // A syntax error in a small file is left to serde_yaml's message.
        assert!(check_text("student: [unclosed\n", &MANIFEST).is_ok());
        // In a file with many flow collections, it is reported here.
        let text = format!("a: {}\n  b: [\n", "[1] ".repeat(300));
        let e = check_text(&text, &RUBRIC).unwrap_err();
        assert!(e.starts_with("error: invalid YAML"), "{e}");
    }
}
