//! What scripts and CI read from cugrade, read the way they read it: stdout closed early (a
//! pipe into `head`), `grade --format json` parsed line by line, `--format github` paths
//! resolved from the repository root, `validate` on several broken rubrics at once.
//! (issue 18, "machine-clean outputs")

use crate::support::{cugrade, nvrtc, root};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn run(args: &[&str], dir: Option<&Path>) -> Output {
    let mut c = cugrade();
    c.args(args);
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.output().expect("cugrade runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `cugrade man | head`: the reader goes away before cugrade has written everything. cugrade
/// ends as `cat` would, killed by SIGPIPE, with nothing on stderr (no "Broken pipe", no
/// panic, not exit 3).
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    for args in [&["man"][..], &["init", "--list"], &["completions", "bash"]] {
        // A pipe whose read end is closed before cugrade starts: every write fails with EPIPE.
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fresh descriptors, each owned once below.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (read, write) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(read);
        let out = cugrade()
            .args(args)
            .stdout(Stdio::from(write))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(err.is_empty(), "{args:?}: stderr {err:?}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

/// A copy of the mini rubric in `dir` (with its reference kernel), edited by `edit`.
fn mini_rubric(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let fixtures = root().join("tests/fixtures/mini");
    std::fs::copy(fixtures.join("ref.cu"), dir.join("ref.cu")).unwrap();
    let text = std::fs::read_to_string(fixtures.join("rubric.yaml")).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, edit(text)).unwrap();
    p
}

/// `validate a.yaml b.yaml c.yaml` checks every file and reports every mistake, each at its
/// `file:line:column`; one good file among them is still checked (and said to be fine).
#[test]
fn validate_reports_every_mistake_of_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = mini_rubric(dir.path(), "good.yaml", |t| t);
    // The milestone's kernel is not in ref.cu: a mistake at the `kernel:` line.
    let a = mini_rubric(dir.path(), "a.yaml", |t| {
        t.replace("    kernel: vector_add", "    kernel: vector_sum")
    });
    // Two mistakes in one file: trials, and an unknown case.
    let b = mini_rubric(dir.path(), "b.yaml", |t| {
        t.replace("assignment: mini", "assignment: mini\ntrials: 1")
            .replace(
                "correctness: { points: 10 }",
                "correctness: { points: 10, cases: [\"n=7\"] }",
            )
    });
    let c = mini_rubric(dir.path(), "c.yaml", |t| {
        t.replace("contract: add", "contract: plus")
    });
    let paths: Vec<&str> = [&a, &good, &b, &c]
        .iter()
        .map(|p| p.to_str().unwrap())
        .collect();
    let mut args = vec!["validate", "--schema-only"];
    args.extend(&paths);
    let o = run(&args, None);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(out.contains("good.yaml: schema ok"), "{out}");
    for (file, line, what) in [
        (
            "a.yaml",
            19,
            "kernel `vector_sum` is not in the reference file `ref.cu`",
        ),
        ("b.yaml", 3, "trials must be at least 2"),
        ("b.yaml", 22, "unknown case `n=7`"),
        ("c.yaml", 20, "unknown contract `plus`"),
    ] {
        let at = format!("{file}:{line}:");
        assert!(
            err.lines().any(|l| l.contains(&at)),
            "no mistake at {at}: {err}"
        );
        assert!(err.contains(what), "{what}: {err}");
    }
    assert!(err.contains("4 mistakes in 3 of 4 rubric files"), "{err}");
    // The same kernel mistake stops `check` before anything runs: exit 2 at the line.
    let sub = root().join("tests/fixtures/mini/correct");
    let o = run(
        &["check", "--rubric", paths[0], sub.to_str().unwrap()],
        None,
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a.yaml:19:13"), "{err}");
}

/// A repository with a cohort in `subs/`: `bob/` (a folder whose reduce.cu has two compile
/// errors that stop all three milestones), `eve.cu` (the same file alone) and `niaj.py` (a
/// Python file that does not parse).
fn cohort_repo() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    let subs = repo.path().join("subs");
    std::fs::create_dir_all(subs.join("bob")).unwrap();
    let src = root().join("submissions-example/reduction/compile_error/reduce.cu");
    std::fs::copy(&src, subs.join("bob/reduce.cu")).unwrap();
    std::fs::copy(&src, subs.join("eve.cu")).unwrap();
    std::fs::write(
        subs.join("niaj.py"),
        "from numba import cuda\ndef reduce_naive(:\n",
    )
    .unwrap();
    std::fs::create_dir(repo.path().join("ci")).unwrap();
    repo
}

/// `grade --format json | jq`: stdout is JSON Lines (one result.json per student, nothing
/// else), the human summary is on stderr; `--resume` says how many results it reused; a
/// single-file entry is named without its extension and gets no note about a manifest.
#[test]
fn grade_json_is_json_lines_and_resume_counts_reused_results() {
    if !nvrtc() {
        return;
    }
    let repo = cohort_repo();
    let rubric = root().join("rubrics/reduction.yaml");
    let args = |extra: &[&'static str]| {
        let mut a: Vec<String> = [
            "grade",
            "--rubric",
            rubric.to_str().unwrap(),
            "subs",
            "--out",
            "out",
            "--backend",
            "emu",
            "--seed",
            "3",
            "--format",
            "json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let call = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&a, Some(repo.path()))
    };
    let o = call(args(&[]));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{err}");
    let mut students = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{e}: a line of stdout is not JSON: {line:?}"));
        assert_eq!(v["assignment"], "reduction");
        students.push(v["student"].as_str().unwrap().to_string());
        if v["student"] == "niaj" {
            let notes = v["notes"].as_array().cloned().unwrap_or_default();
            assert!(
                notes.is_empty(),
                "no manifest, no note about one: {notes:?}"
            );
        }
    }
    assert_eq!(students, ["bob", "eve", "niaj"], "{out}");
    assert!(err.contains("graded 3 submissions into out"), "{err}");
    assert!(
        repo.path()
            .join("out/students/niaj.py/result.json")
            .is_file()
    );
    let o = call(args(&["--resume"]));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        err.contains("(3 reused from the previous run, 0 graded)"),
        "{err}"
    );
    // One student changes: graded anew, the others reused.
    std::fs::write(repo.path().join("subs/eve.cu"), "// empty\n").unwrap();
    let o = call(args(&["--resume"]));
    let err = text(&o.stderr);
    assert!(
        err.contains("(2 reused from the previous run, 1 graded)"),
        "{err}"
    );
}

/// `--format github` from a subfolder of the repository: annotation paths are the repository's
/// (`subs/bob/reduce.cu`, `subs/eve.cu`), and an error that stops three milestones is one
/// annotation naming them, not three.
#[test]
fn github_annotations_are_repository_paths_one_per_finding() {
    if !nvrtc() {
        return;
    }
    let repo = cohort_repo();
    std::fs::remove_file(repo.path().join("subs/niaj.py")).unwrap();
    let rubric = root().join("rubrics/reduction.yaml");
    let o = cugrade()
        .args([
            "grade",
            "--rubric",
            rubric.to_str().unwrap(),
            "../subs",
            "--out",
            "../out",
            "--backend",
            "emu",
            "--format",
            "github",
        ])
        .current_dir(repo.path().join("ci"))
        .env_remove("GITHUB_WORKSPACE")
        .output()
        .unwrap();
    let out = text(&o.stdout);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("::error ")).collect();
    // reduce.cu has two errors (lines 12 and 19); each student gets one annotation per error.
    assert_eq!(errors.len(), 4, "{out}");
    for (file, line) in [
        ("subs/bob/reduce.cu", 12),
        ("subs/bob/reduce.cu", 19),
        ("subs/eve.cu", 12),
        ("subs/eve.cu", 19),
    ] {
        let prefix = format!("::error file={file},line={line},col=");
        let a = errors
            .iter()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no annotation at {file}:{line}:\n{out}"));
        assert!(
            a.contains("title=reduce_naive%2C reduce_shared%2C reduce_shuffle › compile"),
            "{a}"
        );
    }
    // `check` in the submission's own folder: still the repository's path.
    let o = cugrade()
        .args([
            "check",
            "--rubric",
            rubric.to_str().unwrap(),
            "--backend",
            "emu",
            "--format",
            "github",
        ])
        .current_dir(repo.path().join("subs/bob"))
        .env_remove("GITHUB_WORKSPACE")
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error file=subs/bob/reduce.cu,line=12,col=16,")),
        "{out}"
    );
}

/// Issue 32: the GitLab template had no inline findings. `check --codequality FILE` writes
/// GitLab's Code Quality report, read here as GitLab reads it: valid against GitLab's
/// documented format (tests/data/gitlab-code-quality.schema.json), fingerprints unique and the
/// same from one run (and seed) to the next, every path a file of the repository from its
/// root and every line one of that file, each finding at the student's line.
#[test]
fn codequality_report_is_gitlabs_format_at_the_students_lines() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let o = run(&["init", "reduction", "lab1"], Some(&repo));
    assert!(o.status.success(), "{}", text(&o.stderr));
    // reduce_naive written, reduce_shared with a compile error in its own line's name, the
    // third left as it was.
    let cu = repo.join("lab1/reduction.cu");
    let src = std::fs::read_to_string(&cu).unwrap();
    let stub =
        "void reduce_naive(const float* in, float* out, int n)\n{\n    // TODO: your code here.\n}";
    assert!(src.contains(stub), "{src}");
    std::fs::write(
        &cu,
        src.replace(
            stub,
            "void reduce_naive(const float* in, float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(out, in[i] + undefined_offset);\n}",
        ),
    )
    .unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../data/gitlab-code-quality.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let report = |seed: &str| -> Vec<serde_json::Value> {
        let out = d.path().join(format!("cq-{seed}.json"));
        let o = run(
            &[
                "check",
                "lab1",
                "--backend",
                "emu",
                "--seed",
                seed,
                "--codequality",
                out.to_str().unwrap(),
            ],
            Some(&repo),
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&v)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{v:#}");
        v.as_array().unwrap().clone()
    };
    let issues = report("1");
    assert!(!issues.is_empty());
    let prints: std::collections::BTreeSet<&str> = issues
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(
        prints.len(),
        issues.len(),
        "fingerprints repeat: {issues:#?}"
    );
    for i in &issues {
        let path = i["location"]["path"].as_str().unwrap();
        let line = i["location"]["lines"]["begin"].as_u64().unwrap() as usize;
        let file = std::fs::read_to_string(repo.join(path))
            .unwrap_or_else(|e| panic!("{path}: {e}\n{issues:#?}"));
        assert!(line <= file.lines().count(), "{path}:{line}");
    }
    let at = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let find = |what: &str| {
        issues
            .iter()
            .find(|i| i["description"].as_str().unwrap().contains(what))
            .unwrap_or_else(|| panic!("no `{what}`: {issues:#?}"))
    };
    let compile = find("undefined_offset");
    assert_eq!(compile["location"]["path"], "lab1/reduction.cu");
    assert_eq!(
        compile["location"]["lines"]["begin"],
        at("void reduce_naive(") + 3
    );
    assert_eq!(compile["check_name"], "cugrade/compile");
    assert_eq!(compile["severity"], "major");
    // A run with another seed says the same findings with the same fingerprints.
    let again: std::collections::BTreeSet<String> = report("2")
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        again,
        prints.iter().map(|s| s.to_string()).collect(),
        "fingerprints moved between runs"
    );

    // The untouched stubs: "not implemented yet" at each kernel's line.
    std::fs::write(&cu, &src).unwrap();
    let issues = report("1");
    for k in ["reduce_naive", "reduce_shared", "reduce_shuffle"] {
        let i = find_in(&issues, &format!("`{k}` has an empty body"));
        assert_eq!(i["location"]["path"], "lab1/reduction.cu");
        assert_eq!(
            i["location"]["lines"]["begin"],
            at(&format!("void {k}(")),
            "{i:#}"
        );
    }
}

fn find_in<'a>(issues: &'a [serde_json::Value], what: &str) -> &'a serde_json::Value {
    issues
        .iter()
        .find(|i| i["description"].as_str().unwrap().contains(what))
        .unwrap_or_else(|| panic!("no `{what}`: {issues:#?}"))
}
