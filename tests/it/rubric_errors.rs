//! Mistakes in a rubric or in the paths a command is given are the instructor's, reported as
//! such (exit 2, the rubric's `file:line:col` where there is a line), never a student's failing
//! check and never a stall (issue 31): a tolerance YAML reads as infinity, a negative case
//! size, a `--rubric` that is a FIFO, and a `grade --out` inside the cohort.

use crate::support::{cugrade, nvrtc, root};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// The mini rubric (tests/fixtures/mini) with `from` replaced by `to`, in a course tree of its
/// own: the rubric's path.
fn mini_with(dir: &Path, from: &str, to: &str) -> PathBuf {
    let mini = root().join("tests/fixtures/mini");
    let course = dir.join("course");
    std::fs::create_dir_all(&course).unwrap();
    std::fs::copy(mini.join("ref.cu"), course.join("ref.cu")).unwrap();
    let text = std::fs::read_to_string(mini.join("rubric.yaml")).unwrap();
    assert!(text.contains(from), "the mini rubric changed: no `{from}`");
    let path = course.join("rubric.yaml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

/// The 1-based line of the first line of `path` holding `needle`.
fn line_of(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` in {}", path.display()))
        + 1
}

/// `cugrade ARGS`, killed (and the test failed) after 60 s.
fn run(args: &[&std::ffi::OsStr]) -> Output {
    use wait_timeout::ChildExt;
    let mut child = cugrade()
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if child
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
        .is_none()
    {
        let _ = child.kill();
        panic!("cugrade {args:?} still ran after 60 s");
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `validate` and `check` both refuse `rubric` with exit 2, naming `rubric:line:col` and
/// saying `says`.
fn assert_rubric_error(rubric: &Path, line: usize, says: &str) {
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/mini/correct/add.cu"),
        sub.join("add.cu"),
    )
    .unwrap();
    let at = format!("{}:{line}:", rubric.display());
    for args in [
        vec!["validate".as_ref(), rubric.as_os_str()],
        vec![
            "check".as_ref(),
            "--backend".as_ref(),
            "emu".as_ref(),
            "--rubric".as_ref(),
            rubric.as_os_str(),
            sub.as_os_str(),
        ],
    ] {
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(&at), "{args:?}: no `{at}` in:\n{t}");
        assert!(t.contains(says), "{args:?}: no `{says}` in:\n{t}");
        assert!(t.contains('^'), "{args:?}: no caret in:\n{t}");
    }
}

#[test]
fn a_tolerance_yaml_reads_as_infinity_is_a_rubric_error() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // YAML has no float for 1e400: it stays text, which the expression evaluates to infinity;
    // an infinite tolerance would pass every wrong kernel.
    let rubric = mini_with(
        d.path(),
        "    launch: { block: [256]",
        "    tolerance: { abs: 1e400 }\n    launch: { block: [256]",
    );
    assert_rubric_error(&rubric, line_of(&rubric, "1e400"), "evaluates to inf");
    let rubric = mini_with(
        d.path(),
        "    launch: { block: [256]",
        "    tolerance: { rel: \"1e300 * 1e300\" }\n    launch: { block: [256]",
    );
    assert_rubric_error(&rubric, line_of(&rubric, "1e300"), "evaluates to inf");
}

#[test]
fn a_negative_case_size_is_a_rubric_error_not_the_students() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = mini_with(d.path(), "vars: { n: 1000 }", "vars: { n: -5 }");
    assert_rubric_error(&rubric, line_of(&rubric, "n: -5"), "at least 0");
    // A shape that cannot hold the buffer's length, in a case of its own.
    let rubric = mini_with(
        d.path(),
        "{ name: c, type: f32*, dir: out, len: n }",
        "{ name: c, type: f32*, dir: out, len: n, shape: [n, 2] }",
    );
    assert_rubric_error(&rubric, line_of(&rubric, "name: \"n=1\""), "multiplies to");
}

#[test]
fn a_rubric_that_is_a_fifo_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("rubric.yaml");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let sub = d.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("add.cu"), "// nothing\n").unwrap();
    for args in [
        vec!["validate".as_ref(), fifo.as_os_str()],
        vec![
            "check".as_ref(),
            "--backend".as_ref(),
            "emu".as_ref(),
            "--rubric".as_ref(),
            fifo.as_os_str(),
            sub.as_os_str(),
        ],
    ] {
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains("FIFO"), "{args:?}: {t}");
        assert!(t.contains(&fifo.display().to_string()), "{args:?}: {t}");
    }
}

#[test]
fn grade_refuses_an_output_folder_inside_the_cohort() {
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir_all(cohort.join("alice")).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/mini/correct/add.cu"),
        cohort.join("alice/add.cu"),
    )
    .unwrap();
    let rubric = root().join("tests/fixtures/mini/rubric.yaml");
    // Inside it (not yet there, and through `..`), and the cohort itself.
    for out in [
        cohort.join("results"),
        cohort.join("alice/../graded"),
        cohort.clone(),
    ] {
        let o = run(&[
            "grade".as_ref(),
            "--backend".as_ref(),
            "emu".as_ref(),
            "--rubric".as_ref(),
            rubric.as_os_str(),
            cohort.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {t}", out.display());
        assert!(t.contains("inside the cohort folder"), "{t}");
        assert!(!cohort.join("results").exists(), "{t}");
        assert!(!cohort.join("students").exists(), "{t}");
    }
}

/// Issue 32: one misspelled key hid every other mistake of the file. `validate` reports each
/// unknown key (with a did-you-mean) and the other mistakes after it, each at its own
/// `file:line:col`.
#[test]
fn validate_reports_every_misspelled_key_and_the_mistakes_after_them() {
    let d = tempfile::tempdir().unwrap();
    let rubric = crate::support::course_copy(d.path(), "vector-add");
    let original = std::fs::read_to_string(&rubric).unwrap();
    let edits = [
        ("    cpu: vector_add", "    cpuu: vector_add"),
        ("trials: 2", "trials: 1"),
        (
            "    kernel: vector_add",
            "    kernell: vector_add\n    kernel: vector_add",
        ),
        ("        min: 70\n", "        minn: 70\n"),
    ];
    let mut edited = original.clone();
    for (from, to) in edits {
        assert!(
            edited.contains(from),
            "rubrics/vector-add.yaml changed: no `{from}`"
        );
        edited = edited.replacen(from, to, 1);
    }
    std::fs::write(&rubric, &edited).unwrap();
    let o = run(&[
        "validate".as_ref(),
        "--schema-only".as_ref(),
        rubric.as_os_str(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    for (needle, says) in [
        ("cpuu:", "unknown field `cpuu`"),
        ("trials: 1", "trials must be at least 2"),
        ("kernell:", "unknown field `kernell`"),
        ("minn:", "unknown field `minn`"),
    ] {
        let at = format!("{}:{}:", rubric.display(), line_of(&rubric, needle));
        let block = t
            .split("\n\n")
            .find(|b| b.contains(says))
            .unwrap_or_else(|| panic!("no `{says}` in:\n{t}"));
        assert!(block.contains(&at), "`{says}` not at {at}:\n{t}");
    }
    assert!(t.contains("did you mean `cpu`?"), "{t}");
    assert!(t.contains("did you mean `kernel`?"), "{t}");
    assert!(t.contains("did you mean `min`?"), "{t}");
    assert!(t.contains("error: 4 mistakes in 1 of 1 rubric file"), "{t}");
}

/// Issue 32: a contract whose parameters are not its reference kernel's made `validate` fail
/// (exit 1, or 3 from the CPU cross-check) with no line to fix. It is a rubric mistake: exit
/// 2, at the contract's `params:` line, with a note at the reference kernel's line.
#[test]
fn validate_points_a_signature_mismatch_at_the_rubric_and_the_reference() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let rubric = crate::support::course_copy(d.path(), "vector-add");
    let original = std::fs::read_to_string(&rubric).unwrap();
    let from = "      - {name: n, type: i32, value: n}";
    assert!(original.contains(from), "rubrics/vector-add.yaml changed");
    std::fs::write(
        &rubric,
        original.replace(from, "      - {name: n, type: i64, value: n}"),
    )
    .unwrap();
    let o = run(&[
        "validate".as_ref(),
        "--backend".as_ref(),
        "emu".as_ref(),
        rubric.as_os_str(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    let params = format!("{}:{}:", rubric.display(), line_of(&rubric, "    params:"));
    assert!(t.contains(&params), "no `{params}` in:\n{t}");
    assert!(
        t.contains("does not take the parameters of contract `vector_add`"),
        "{t}"
    );
    assert!(t.contains("i64 n"), "{t}");
    let reference = d.path().join("reference-kernels/vector-add.cu");
    let note = t
        .split("note: the reference kernel `vector_add` is defined here\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no note in:\n{t}"));
    let def = format!(
        "--> {}:{}:",
        reference.display(),
        line_of(&reference, "void vector_add(")
    );
    assert!(
        note.lines().next().unwrap().trim_start().starts_with(&def),
        "no `{def}` in:\n{t}"
    );
    assert!(!t.contains("launch failed"), "{t}");
}
