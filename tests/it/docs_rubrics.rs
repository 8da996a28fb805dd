//! The rubric examples in the documentation are rubrics cugrade accepts. A fenced block whose
//! info string is `yaml rubric` is a whole rubric (GitHub still highlights it as YAML): it must
//! load and pass `cugrade validate` (its reference kernels run on the emulator and agree with
//! their CPU implementations), in a course tree beside a copy of `reference-kernels/`, where
//! the examples' `reference: ../reference-kernels/...` points. Other `yaml` blocks are
//! fragments (a contract, a manifest): they must still be YAML.

use crate::support::{cugrade, nvrtc, output_text, root};
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use std::path::{Path, PathBuf};

/// Every fenced code block of a Markdown file: its info string, its text, its first line.
fn fenced_blocks(path: &Path) -> Vec<(String, String, usize)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = text[..range.start].lines().count() + 1;
                open = Some((info.to_string(), String::new(), line));
            }
            Event::Text(t) => {
                if let Some((_, body, _)) = open.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(open.take()),
            _ => {}
        }
    }
    out
}

/// The documentation's Markdown files.
fn docs() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    for dir in ["docs", "docs/labs"] {
        let mut md: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        md.sort();
        files.extend(md);
    }
    files
}

/// A course tree in `dir` with a copy of the repository's reference kernels, and of the pmpp
/// course's (tests/courses/pmpp: scan, histogram, rgb), which the examples of the rubric
/// language's newer keys use.
fn course_with_references(dir: &Path) {
    let refs = dir.join("reference-kernels");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::create_dir_all(dir.join("rubrics")).unwrap();
    for from in ["reference-kernels", "tests/courses/pmpp/reference-kernels"] {
        for e in std::fs::read_dir(root().join(from)).unwrap().flatten() {
            if e.file_type().unwrap().is_file() {
                assert!(
                    !refs.join(e.file_name()).exists(),
                    "{from}: {:?} shadows a reference kernel",
                    e.file_name()
                );
                std::fs::copy(e.path(), refs.join(e.file_name())).unwrap();
            }
        }
    }
}

#[test]
fn the_docs_rubric_examples_validate() {
    let mut whole = Vec::new();
    for doc in docs() {
        let name = doc.strip_prefix(root()).unwrap().display().to_string();
        for (info, body, line) in fenced_blocks(&doc) {
            let mut words = info.split_whitespace();
            if words.next() != Some("yaml") {
                continue;
            }
            if words.any(|w| w == "rubric") {
                whole.push((format!("{name}:{line}"), body));
            } else if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(&body) {
                panic!("{name}:{line}: a yaml block that is not YAML: {e}");
            }
        }
    }
    assert!(
        whole
            .iter()
            .any(|(at, _)| at.starts_with("docs/rubric.md:")),
        "docs/rubric.md has no block marked ```yaml rubric: {whole:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    course_with_references(dir.path());
    let mut files = Vec::new();
    for (k, (at, body)) in whole.iter().enumerate() {
        let path = dir.path().join(format!("rubrics/example-{k}.yaml"));
        std::fs::write(&path, body).unwrap();
        if let Err(e) = cugrade::rubric::load(&path) {
            panic!("the example at {at} does not load:\n{e}");
        }
        files.push((at, path));
    }
    if !nvrtc() {
        return;
    }
    // Every kernel it names runs on the emulator and agrees with its CPU implementation.
    for (at, path) in files {
        let o = cugrade()
            .arg("validate")
            .arg(&path)
            .args(["--backend", "emu"])
            .output()
            .unwrap();
        let text = output_text(&o);
        assert_eq!(
            o.status.code(),
            Some(0),
            "the example at {at} does not validate:\n{text}"
        );
        assert!(!text.contains("warning"), "{at}:\n{text}");
    }
}
