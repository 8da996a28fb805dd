//! The multi-GPU lab's rubric language and command line (issue 35): `ranks:`, `peers:` and
//! `against: nccl` belong to a multi-GPU lab and say so at their line when misused; `--ranks`
//! takes 2 to 8; the starter hands the kernel tables of every rank's buffers; a rank lab's
//! rubric validates. Grading on emulated ranks is `labs_examples` (every allreduce example)
//! and the emulator's own tests; on GPUs, docs/validation/2026-11-28-allreduce.

use crate::support::{cugrade, nvrtc, root};
use std::path::{Path, PathBuf};

/// The mini rubric (tests/fixtures/mini) with `from` replaced by `to`, in a course of its own.
fn mini_with(dir: &Path, from: &str, to: &str) -> PathBuf {
    let mini = root().join("tests/fixtures/mini");
    std::fs::copy(mini.join("ref.cu"), dir.join("ref.cu")).unwrap();
    let text = std::fs::read_to_string(mini.join("rubric.yaml")).unwrap();
    assert!(text.contains(from), "the mini rubric changed: no `{from}`");
    let path = dir.join("rubric.yaml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

fn validate(rubric: &Path) -> (Option<i32>, String) {
    let o = cugrade()
        .args(["validate", "--schema-only"])
        .arg(rubric)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let t = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), t)
}

fn line_of(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn rank_only_words_in_a_one_device_rubric_are_errors_at_their_line() {
    let d = tempfile::tempdir().unwrap();
    for (from, to, needle, says) in [
        (
            "{ name: a, type: f32*, len: n,",
            "{ name: a, type: f32*, peers: true, len: n,",
            "peers: true",
            "only a multi-GPU lab (`ranks:`) has ranks",
        ),
        (
            "reference: ref.cu",
            "reference: ref.cu\nranks: 9",
            "ranks: 9",
            "a multi-GPU lab runs on 2 to 8 ranks",
        ),
        (
            "    correctness: { points: 10 }",
            "    correctness: { points: 10 }\n    performance:\n      - { name: bw, case: \"n=1000\", against: nccl, min: 0.5 }",
            "against: nccl",
            "the rubric needs `ranks:`",
        ),
    ] {
        let rubric = mini_with(d.path(), from, to);
        let text = std::fs::read_to_string(&rubric).unwrap();
        // A performance check needs a performance case.
        let text = text.replace(
            "milestones:",
            "  performance:\n    - { name: \"n=1000\", vars: { n: 1000 } }\nmilestones:",
        );
        let text = text.replacen("    - { name: \"n=1000\", vars: { n: 1000 } }\n", "", 1);
        std::fs::write(&rubric, text).unwrap();
        let (code, t) = validate(&rubric);
        assert_eq!(code, Some(2), "{to}: {t}");
        let at = format!("rubric.yaml:{}:", line_of(&rubric, needle));
        assert!(t.contains(&at), "{to}: no `{at}` in {t}");
        assert!(t.contains(says), "{to}: no `{says}` in {t}");
    }
}

#[test]
fn a_rank_rubric_reads_nranks_and_rank_and_validates() {
    let (code, t) = validate(&root().join("rubrics/allreduce.yaml"));
    assert_eq!(code, Some(0), "{t}");
    // The same words in a rank lab of its own: `rank` and `nranks` are its variables.
    let d = tempfile::tempdir().unwrap();
    let rubric = mini_with(
        d.path(),
        "      - { name: n, type: i32, value: n }",
        "      - { name: n, type: i32, value: n }\n      - { name: r, type: i32, value: rank }\n      - { name: k, type: i32, value: \"nranks * 2\" }",
    );
    let text = std::fs::read_to_string(&rubric).unwrap();
    std::fs::write(
        &rubric,
        text.replace("reference: ref.cu", "reference: ref.cu\nranks: 4"),
    )
    .unwrap();
    let (code, t) = validate(&rubric);
    assert_eq!(code, Some(0), "{t}");
    // Without `ranks:` the same rubric names the unknown variable.
    std::fs::write(&rubric, text).unwrap();
    let (code, t) = validate(&rubric);
    assert_eq!(code, Some(2), "{t}");
    assert!(t.contains("unknown variable `rank`"), "{t}");
}

#[test]
fn ranks_takes_two_to_eight() {
    for bad in ["1", "9", "two"] {
        let o = cugrade()
            .args(["check", "--backend", "emu", "--ranks", bad, "."])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--ranks {bad}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--ranks"), "--ranks {bad}: {e}");
    }
}

#[test]
fn the_starter_hands_the_kernel_every_ranks_buffers() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let o = cugrade()
        .args(["init", "allreduce"])
        .current_dir(d.path())
        .env("HOME", d.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut found = String::new();
    for e in walkdir(d.path()) {
        if e.extension().is_some_and(|x| x == "cu") {
            found.push_str(&std::fs::read_to_string(&e).unwrap());
        }
    }
    for want in [
        "const float* const* in",
        "float* const* out",
        "unsigned int* const* flags",
        "int rank",
        "int nranks",
    ] {
        assert!(found.contains(want), "no `{want}` in the starter:\n{found}");
    }
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walkdir(&p));
        } else {
            out.push(p);
        }
    }
    out
}
