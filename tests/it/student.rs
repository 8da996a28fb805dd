//! The student's side through the binary: `cugrade init`, `cugrade check` on a starter from
//! any directory (the lab built into the binary), "not implemented yet", `--watch`, `--quiet`,
//! completions, the man page, help that fits 80 columns, and the GitHub annotation format for
//! compile errors and sanitizer findings.

use crate::support::{cugrade, nvrtc};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = cugrade();
    c.env("NO_COLOR", "1");
    c
}

fn run(args: &[&str], cwd: &Path) -> Output {
    bin()
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("cugrade runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn starter(lab: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["init", lab, "starter"], d.path());
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("cd starter && cugrade check"), "{out}");
    let dir = d.path().join("starter");
    (d, dir)
}

fn implement_reduce_naive(dir: &Path) {
    let p = dir.join("reduction.cu");
    let s = std::fs::read_to_string(&p).unwrap();
    let stub =
        "void reduce_naive(const float* in, float* out, int n)\n{\n    // TODO: your code here.\n}";
    assert!(s.contains(stub), "{s}");
    let body = "void reduce_naive(const float* in, float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(out, in[i]);\n}";
    std::fs::write(&p, s.replace(stub, body)).unwrap();
}

#[test]
fn untouched_starter_says_nothing_is_implemented_from_any_directory() {
    let (d, dir) = starter("reduction");
    for f in ["reduction.cu", "cugrade.yaml", "README.md", "lab.md"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    // From outside the starter, and outside any checkout: the rubric is built in.
    let o = run(
        &["check", dir.to_str().unwrap(), "--backend", "emu"],
        Path::new("/"),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    // Lines wrap at 80 columns: compare words.
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for k in ["reduce_naive", "reduce_shared", "reduce_shuffle"] {
        assert!(
            words.contains(&format!("not implemented yet (`{k}` has an empty body)")),
            "{out}"
        );
    }
    assert!(!out.contains("elements wrong"), "{out}");
    assert!(out.lines().count() < 24, "short: {out}");
    assert!(out.contains("Total: 0 / 100"), "{out}");
    // Inside it, with no argument at all.
    let o = run(&["check", "--backend", "emu", "--quiet"], &dir);
    let (out, _) = text(&o);
    assert_eq!(out.trim(), "Total: 0 / 100  FAIL");
    // --verbose: what was chosen on stderr, every check on stdout, each line within 80 columns.
    let o = run(&["check", "--backend", "emu", "-v", "--seed", "5"], &dir);
    let (out, err) = text(&o);
    assert!(
        err.contains("backend: emu") && err.contains("seed: 5"),
        "{err}"
    );
    assert!(out.contains("Every check:"), "{out}");
    let every = out.split("Every check:").nth(1).unwrap();
    assert_eq!(
        every.lines().filter(|l| l.contains("implemented")).count(),
        3,
        "{out}"
    );
    assert!(every.lines().all(|l| l.chars().count() <= 80), "{out}");
    let o = run(&["check", "--backend", "emu", "--format", "json"], &dir);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["run"]["device"], "PTX emulator");
    assert!(!v["run"]["cugrade_version"].as_str().unwrap().is_empty());
    // A second init into the same folder is refused.
    let o = run(&["init", "reduction", "starter"], d.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("already exists"), "{:?}", text(&o));
    // A fresh clone (a folder with other files) takes a starter.
    let clone = d.path().join("clone");
    std::fs::create_dir_all(clone.join(".git")).unwrap();
    std::fs::write(clone.join("README.md"), "course repo").unwrap();
    let o = run(&["init", "vector-add", "."], &clone);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert_eq!(
        std::fs::read_to_string(clone.join("README.md")).unwrap(),
        "course repo"
    );
}

#[test]
fn a_started_starter_is_graded_and_the_rest_stays_not_implemented() {
    if !nvrtc() {
        return;
    }
    let (_d, dir) = starter("reduction");
    implement_reduce_naive(&dir);
    let junit = dir.join("junit.xml");
    let o = run(
        &[
            "check",
            "--backend",
            "emu",
            "--seed",
            "3",
            "--junit",
            junit.to_str().unwrap(),
            "--format",
            "json",
        ],
        &dir,
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let status: Vec<&str> = v["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["pass", "fail", "fail"], "{out}");
    assert_eq!(v["student"], "starter");
    assert_eq!(v["milestones"][1]["checks"][0]["name"], "implemented");
    assert_eq!(v["milestones"][1]["checks"].as_array().unwrap().len(), 1);
    assert!(junit.is_file());
}

#[test]
fn manifest_without_a_known_rubric_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("k.cu"),
        "extern \"C\" __global__ void k() {}\n",
    )
    .unwrap();
    let o = run(&["check"], d.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no --rubric given"), "{err}");
    std::fs::write(d.path().join("cugrade.yaml"), "student: x\nrubric: nope\n").unwrap();
    let o = run(&["check"], d.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cugrade.yaml:2:9"), "{err}");
    assert!(err.contains("vector-add, reduction"), "{err}");
}

/// `--watch` grades, waits, and grades again when a source changes; the test stops it.
#[test]
fn watch_grades_again_when_a_source_changes() {
    let (_d, dir) = starter("vector-add");
    let mut child = bin()
        .args(["check", "--watch", "--backend", "emu"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx2.send(l);
        }
    });
    // stdout (the grading) and stderr (the watcher's lines) are separate pipes, read by two
    // threads: only the order within each stream is known, so wait for what `seen` holds.
    let totals = |seen: &[String]| seen.iter().filter(|l| l.starts_with("Total:")).count();
    let again = |seen: &[String]| seen.iter().filter(|l| l.contains("grading again")).count();
    let wait_until =
        |done: &dyn Fn(&[String]) -> bool, seen: &mut Vec<String>, within: Duration| {
            let deadline = Instant::now() + within;
            while !done(seen) && Instant::now() < deadline {
                if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
                    seen.push(l);
                }
            }
            done(seen)
        };
    let minute = Duration::from_secs(60);
    let mut seen = Vec::new();
    let first = wait_until(
        &|s| totals(s) == 1 && s.iter().any(|l| l.contains("watching")),
        &mut seen,
        minute,
    );
    // A non-source file must not count: nothing is graded again within two seconds.
    std::fs::write(dir.join("notes.txt"), "x").unwrap();
    let regraded = wait_until(
        &|s| totals(s) > 1 || again(s) > 0,
        &mut seen,
        Duration::from_secs(2),
    );
    // An edit that is still a stub (so no NVRTC is needed).
    let p = dir.join("vector-add.cu");
    let s = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, s.replace("// TODO: your code here.", "// soon")).unwrap();
    let second = wait_until(&|s| totals(s) == 2 && again(s) == 1, &mut seen, minute);
    // And nothing more after it.
    let more = wait_until(
        &|s| totals(s) > 2 || again(s) > 1,
        &mut seen,
        Duration::from_secs(2),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(first && !regraded && second && !more, "{seen:#?}");
}

#[test]
fn completions_and_man_page_come_from_the_command_line() {
    let here = Path::new(".");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = run(&["completions", shell], here);
        let (out, _) = text(&o);
        assert_eq!(o.status.code(), Some(0));
        assert!(out.contains("cugrade") && out.contains("watch"), "{shell}");
        // Numba is a language of its own: `init --lang numba` completes.
        assert!(out.contains("lang") && out.contains("numba"), "{shell}");
        // Every subcommand a user may type completes; the internal ones never do (issue 32).
        for sub in [
            "check",
            "grade",
            "merge",
            "validate",
            "calibrate",
            "doctor",
            "init",
            "man",
        ] {
            assert!(out.contains(sub), "{shell}: no `{sub}`");
        }
        assert!(
            !out.contains("__worker") && !out.contains("__profile"),
            "{shell} completes an internal subcommand:\n{out}"
        );
    }
    let o = run(&["man"], here);
    let (out, _) = text(&o);
    assert!(
        out.starts_with(".ie") || out.contains(".TH cugrade"),
        "{out}"
    );
    assert!(out.contains("check"), "{out}");
    assert!(out.contains(".py") && out.contains("Numba"), "{out}");
    // The help names .py where it names .cu.
    for args in [
        vec!["--help"],
        vec!["check", "--help"],
        vec!["grade", "--help"],
    ] {
        let (out, _) = text(&run(&args, here));
        assert!(out.contains(".py"), "{args:?}: {out}");
    }
    let d = tempfile::tempdir().unwrap();
    let o = run(&["man", "--out", d.path().to_str().unwrap()], here);
    assert_eq!(o.status.code(), Some(0));
    assert!(d.path().join("cugrade.1").is_file());
    assert!(d.path().join("cugrade-check.1").is_file());
}

#[test]
fn help_fits_80_columns() {
    let here = Path::new(".");
    for sub in [
        vec!["--help"],
        vec!["check", "--help"],
        vec!["grade", "--help"],
        vec!["validate", "--help"],
        vec!["init", "--help"],
        vec!["completions", "--help"],
        vec!["man", "--help"],
    ] {
        let o = run(&sub, here);
        let (out, _) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{sub:?}");
        for l in out.lines() {
            assert!(l.chars().count() <= 80, "{sub:?}: {l}");
        }
    }
    let o = run(&["init", "--list"], here);
    let (out, _) = text(&o);
    assert!(out.lines().count() >= 10 && out.lines().all(|l| l.chars().count() <= 80));
}

/// The annotation GitHub shows on the student's line: path from where the job runs (the
/// repository root), the line, and a title naming milestone and check.
#[test]
fn github_annotations_point_at_the_students_source_line() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let fixtures = crate::support::root().join("tests/fixtures/mini");
    let rubric = fixtures.join("rubric.yaml");
    for (name, pinned) in [
        // NVRTC's error, on the line of the student's file.
        (
            "compile_error",
            regex::Regex::new(
                r#"^::error file=sub/compile_error/add\.cu,line=4,col=7,title=vector_add › compile[^:]*::.*identifier "i" is undefined"#,
            )
            .unwrap(),
        ),
        // The emulator's memcheck finding, on the line that writes out of bounds.
        (
            "no_bounds",
            regex::Regex::new(
                r"^::error file=sub/no_bounds/add\.cu,line=4,title=vector_add › memcheck(?: add\.cu%3A4)?::memcheck: out-of-bounds global (read|write)",
            )
            .unwrap(),
        ),
    ] {
        let to = d.path().join("sub").join(name);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(fixtures.join(name)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
        let o = run(
            &[
                "check",
                "--rubric",
                rubric.to_str().unwrap(),
                &format!("sub/{name}"),
                "--backend",
                "emu",
                "--seed",
                "1",
                "--format",
                "github",
            ],
            d.path(),
        );
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}{err}");
        assert!(
            out.lines().any(|l| pinned.is_match(l)),
            "{name}: no line matches {pinned}:\n{out}"
        );
        // The same result for a person: every line within 80 columns.
        let o = run(
            &[
                "check",
                "--rubric",
                rubric.to_str().unwrap(),
                &format!("sub/{name}"),
                "--backend",
                "emu",
                "--seed",
                "1",
            ],
            d.path(),
        );
        let (out, _) = text(&o);
        assert!(out.contains("Total:"), "{out}");
        for l in out.lines() {
            assert!(l.chars().count() <= 80, "{name}: {l}");
        }
    }
}

/// Issue 32: the starter's lab.md was the instructor's document: a link to `../rubric.md`
/// and to validation logs, `submissions-example/`, the rubric's and the reference's paths,
/// and CUDA C++ signatures for a Numba or CuPy starter. Every lab's starter in every language
/// it has: each relative link resolves in the student's folder, nothing names a path of
/// cugrade's repository, and "What you write" speaks the starter's language.
#[test]
fn every_starters_lab_md_is_the_students_in_its_language() {
    use pulldown_cmark::{Event, Parser, Tag};
    let repo_path = regex::Regex::new(
        r"\.\./|\b(?:submissions-example|reference-kernels|rubrics|src|tests|ci|docs|validation)/",
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    let (list, _) = text(&run(&["init", "--list"], d.path()));
    let mut seen = 0;
    for line in list.lines().skip(1) {
        let lab = line.split_whitespace().next().unwrap();
        // The `--lang` column: 12 characters of lab name, a space, 18 of languages.
        let langs = line.get(13..31).unwrap_or("");
        for lang in ["cuda", "numba", "cupy"] {
            if !langs.contains(lang) {
                continue;
            }
            let dir = d.path().join(format!("{lab}-{lang}"));
            let o = run(
                &["init", lab, dir.to_str().unwrap(), "--lang", lang],
                d.path(),
            );
            let (out, err) = text(&o);
            if o.status.code() != Some(0) {
                // A function lab has its one language (`--list` names it); nothing else fails.
                assert!(err.contains("not kernels"), "{lab} {lang}: {out}{err}");
                continue;
            }
            seen += 1;
            let md = std::fs::read_to_string(dir.join("lab.md")).unwrap();
            let at = |what: &str| format!("{lab} --lang {lang}: {what}\n{md}");
            assert!(
                !repo_path.is_match(&md),
                "{}",
                at("names a path the student lacks")
            );
            assert!(
                !md.contains("## Measured") && !md.contains("## Examples"),
                "{}",
                at("the instructor's sections")
            );
            for e in Parser::new(&md) {
                if let Event::Start(Tag::Link { dest_url, .. }) = e {
                    if dest_url.starts_with("https://") || dest_url.starts_with("http://") {
                        continue;
                    }
                    let file = dest_url.split('#').next().unwrap();
                    assert!(
                        dir.join(file).is_file(),
                        "{}",
                        at(&format!("the link `{dest_url}` does not resolve"))
                    );
                }
            }
            // The source file lab.md names is the one the starter wrote.
            let source = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|f| f.ends_with(".cu") || (f.ends_with(".py")))
                .unwrap();
            let is_function_lab = md.contains("## The NumPy reference");
            if !is_function_lab {
                assert!(md.contains(&format!("`{source}`")), "{}", at(&source));
            }
            match lang {
                "cuda" => assert!(md.contains("extern \"C\" __global__"), "{}", at("no C")),
                "numba" => {
                    assert!(md.contains("@cuda.jit\ndef "), "{}", at("no Numba def"));
                    for c in ["__global__", "__syncthreads", "atomicAdd", "extern \"C\""] {
                        assert!(!md.contains(c), "{}", at(&format!("CUDA C++'s `{c}`")));
                    }
                }
                _ if is_function_lab => {
                    assert!(
                        md.contains("def preprocess(table)"),
                        "{}",
                        at("no reference")
                    );
                }
                _ => assert!(md.contains("cp.RawModule"), "{}", at("no RawModule")),
            }
        }
    }
    assert!(seen >= 20, "only {seen} starters:\n{list}");
}
