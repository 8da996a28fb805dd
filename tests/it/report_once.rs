//! Every report says each thing once and fully (issue 18): a compile error that stops every
//! milestone is rendered once in report.md, in Gradescope's output, in JUnit and in
//! summary.md's causes; each NVRTC error is a finding at its line and column; a correct kernel
//! whose speed was not measured reads "PASS, speed not measured" in every format; the terminal
//! wraps to its real width (COLUMNS, or the terminal's own) and never cuts a tolerance.
//! These grade real submissions on the emulator, as a user would.

use crate::support::{cugrade, nvrtc, root};
use std::process::{Command, Output, Stdio};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `cugrade check --backend emu --seed 4 --rubric RUBRIC SUBMISSION ARGS...`, without COLUMNS.
fn check(rubric: &str, submission: &str, args: &[&str]) -> Command {
    let mut c = cugrade();
    c.args(["check", "--backend", "emu", "--seed", "4", "--rubric"])
        .arg(root().join(rubric))
        .arg(root().join(submission))
        .args(args)
        .env_remove("COLUMNS");
    c
}

/// Every output file of one `check`: result.json, report.md, junit.xml, Gradescope's file.
struct Files {
    _dir: tempfile::TempDir,
    out: Output,
    json: serde_json::Value,
    md: String,
    junit: String,
    gradescope: serde_json::Value,
}

fn check_all(rubric: &str, submission: &str) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (j, m, x, g) = (p("r.json"), p("r.md"), p("j.xml"), p("g.json"));
    let out = check(
        rubric,
        submission,
        &[
            "--json",
            &j,
            "--markdown",
            &m,
            "--junit",
            &x,
            "--gradescope",
            &g,
        ],
    )
    .output()
    .unwrap();
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f}: {e}"));
    Files {
        json: serde_json::from_str(&read(&j)).unwrap(),
        md: read(&m),
        junit: read(&x),
        gradescope: serde_json::from_str(&read(&g)).unwrap(),
        out,
        _dir: dir,
    }
}

/// reduce.cu has two compile errors (line 12, `atomicAdd` with a pointer; line 19,
/// `__shfl_down_sync` without its mask) and every milestone stops on them.
const COMPILE_ERROR: &str = "submissions-example/reduction/compile_error";

#[test]
fn a_compile_error_every_milestone_shares_is_rendered_once() {
    if !nvrtc() {
        return;
    }
    let f = check_all("rubrics/reduction.yaml", COMPILE_ERROR);
    let first_error = "no instance of overloaded function \"atomicAdd\"";
    // result.json keeps each milestone's checks; each error is a check at NVRTC's column.
    for m in f.json["milestones"].as_array().unwrap() {
        let compile: Vec<&serde_json::Value> = m["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "compile" && c["status"] == "fail")
            .collect();
        let at: Vec<&str> = compile
            .iter()
            .map(|c| c["location"].as_str().unwrap())
            .collect();
        assert_eq!(at, ["reduce.cu:12:16", "reduce.cu:19:49"], "{}", m["id"]);
    }
    // report.md: the error's section once (its message, its underline), the others point to it.
    let md = &f.md;
    assert_eq!(md.matches(first_error).count(), 1, "{md}");
    assert_eq!(
        md.matches("### ❌ compile reduce.cu (error 2)").count(),
        1,
        "{md}"
    );
    assert_eq!(md.matches("--> reduce.cu:19:49").count(), 1, "{md}");
    assert!(
        md.contains("the same as in milestone reduce\\_naive above"),
        "{md}"
    );
    assert!(
        md.contains("**Also in:** milestones reduce\\_shared and reduce\\_shuffle"),
        "{md}"
    );
    // The errors are the whole log: no second copy of it under "Compiler output".
    assert!(!md.contains("<summary>Compile log"), "{md}");
    assert!(
        md.lines().count() < 150,
        "{} lines:\n{md}",
        md.lines().count()
    );
    // The underline sits under `atomicAdd`, at column 16.
    assert!(
        md.contains("12 |     if (i < n) atomicAdd(out, in + i);\n   |                ^^^^^^^^^\n"),
        "{md}"
    );
    // Gradescope: its whole-submission output is report.md; each milestone's test output names
    // the error once, in the first milestone's test.
    let gs = &f.gradescope;
    assert_eq!(
        gs["output"].as_str().unwrap().matches(first_error).count(),
        1
    );
    let tests = gs["tests"].as_array().unwrap();
    let outputs: Vec<&str> = tests
        .iter()
        .map(|t| t["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs[0].matches(first_error).count(), 1, "{}", outputs[0]);
    for o in &outputs[1..] {
        assert!(!o.contains(first_error), "{o}");
        assert!(
            o.contains("the same as in milestone reduce\\_naive above"),
            "{o}"
        );
    }
    assert!(tests.iter().all(|t| t["status"] == "failed"));
    // JUnit: every milestone's suite fails on it; the full text is in the first one only.
    let doc = roxmltree::Document::parse(&f.junit).unwrap();
    let failures: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(
        failures.len(),
        6,
        "two errors in three suites:\n{}",
        f.junit
    );
    let full = failures
        .iter()
        .filter(|n| n.text().unwrap_or("").contains("at: reduce.cu:12:16"))
        .count();
    assert_eq!(full, 1, "{}", f.junit);
    // The terminal already said it once.
    let out = text(&f.out.stdout);
    let joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(joined.matches(first_error).count(), 1, "{out}");
}

/// summary.md counts a compile error that stops three milestones as one cause, listing them;
/// and a submission with two compile errors once among the compile causes, under its first
/// (issue 32: it was a row per error, each student counted twice).
#[test]
fn summary_counts_a_shared_compile_error_as_one_cause() {
    if !nvrtc() {
        return;
    }
    let cohort = tempfile::tempdir().unwrap();
    for s in ["ann", "ben"] {
        std::fs::create_dir(cohort.path().join(s)).unwrap();
        std::fs::copy(
            root().join(COMPILE_ERROR).join("reduce.cu"),
            cohort.path().join(s).join("reduce.cu"),
        )
        .unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let o = cugrade()
        .args(["grade", "--backend", "emu", "--rubric"])
        .arg(root().join("rubrics/reduction.yaml"))
        .arg(cohort.path())
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let summary = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    let causes: Vec<&str> = summary
        .split("## Most common failure causes")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("| 2 |"))
        .collect();
    assert_eq!(causes.len(), 1, "one row for both students:\n{summary}");
    for c in &causes {
        assert!(
            c.contains("reduce\\_naive, reduce\\_shared, reduce\\_shuffle | compile"),
            "{c}"
        );
    }
}

/// A correct kernel graded without a GPU: "PASS, speed not measured" in every format, never
/// SKIP or skipped; result.json keeps SPEC's `skipped` with `provisional: true`.
#[test]
fn a_correct_kernel_without_a_gpu_passes_with_speed_not_measured_everywhere() {
    if !nvrtc() {
        return;
    }
    let f = check_all(
        "rubrics/reduction.yaml",
        "submissions-example/reduction/optimized",
    );
    assert_eq!(f.out.status.code(), Some(0));
    let out = text(&f.out.stdout);
    assert!(
        out.contains("Total: 60 / 100  PASS, speed not measured"),
        "{out}"
    );
    assert!(
        out.contains("  PASS  reduce_shared     20 / 35, speed not measured"),
        "{out}"
    );
    assert!(!out.contains("SKIP"), "{out}");
    // JSON: the contract's status, and the flag that says it is a pass whose speed is unknown.
    let m = &f.json["milestones"][1];
    assert_eq!(
        (&m["status"], &m["provisional"]),
        (&"skipped".into(), &true.into())
    );
    // Markdown.
    assert!(f.md.contains("✅ pass, speed not measured"), "{}", f.md);
    assert!(
        !f.md.contains("⏭️") && !f.md.contains("skipped"),
        "{}",
        f.md
    );
    // Gradescope: a passed test that says so.
    let t = &f.gradescope["tests"][1];
    assert_eq!(t["status"], "passed");
    assert!(
        t["output"]
            .as_str()
            .unwrap()
            .contains("pass, speed not measured")
    );
    // JUnit: no <skipped>; the speed check passes with a note.
    let doc = roxmltree::Document::parse(&f.junit).unwrap();
    assert!(
        !doc.descendants().any(|n| n.has_tag_name("skipped")),
        "{}",
        f.junit
    );
    assert!(
        f.junit.contains("PASS, speed not measured: ")
            && f.junit.contains("not measured on the PTX emulator"),
        "{}",
        f.junit
    );
    // Its verbose list calls the speed checks unmeasured, not skipped.
    let o = check(
        "rubrics/reduction.yaml",
        "submissions-example/reduction/optimized",
        &["-v"],
    )
    .output()
    .unwrap();
    let v = text(&o.stdout);
    assert!(
        v.contains("unmeasured reduce_shared › speedup_over_naive"),
        "{v}"
    );
    assert!(!v.contains("skipped"), "{v}");
}

/// Lines of the summary that are not quoted source (`12 |     code`), which the renderer fits.
fn prose(out: &str) -> impl Iterator<Item = &str> {
    out.lines().filter(|l| {
        let t = l
            .trim_start()
            .trim_start_matches(|c: char| c.is_ascii_digit());
        !t.trim_start().starts_with('|')
    })
}

/// The evidence under the bars, joined again: what a wrapped line said.
fn evidence(out: &str) -> String {
    out.lines()
        .filter_map(|l| l.split_once('│').map(|(_, r)| r.trim()))
        .collect::<Vec<_>>()
        .join(" ")
}

const MISSING_BOUNDS: &str = "submissions-example/reduction/missing_bounds";
const TOLERANCE: &str = "tolerance: |got - expected| <= 5.000e-1 + 0.000e0 * |expected|";

#[test]
fn the_terminal_wraps_to_its_width_and_cuts_nothing() {
    if !nvrtc() {
        return;
    }
    let run = |columns: Option<&str>, args: &[&str]| {
        let mut c = check("rubrics/reduction.yaml", MISSING_BOUNDS, args);
        if let Some(n) = columns {
            c.env("COLUMNS", n);
        }
        text(&c.output().unwrap().stdout)
    };
    // Piped, no COLUMNS: 80.
    for (columns, width) in [(None, 80), (Some("140"), 140), (Some("60"), 60)] {
        let out = run(columns, &[]);
        for l in prose(&out) {
            assert!(l.chars().count() <= width, "{width}: {l:?}\n{out}");
        }
        assert!(evidence(&out).contains(TOLERANCE), "{width}:\n{out}");
        assert!(!out.contains('…'), "{width}: something was cut:\n{out}");
        if width == 140 {
            assert!(prose(&out).any(|l| l.chars().count() > 80), "{out}");
            assert!(
                out.lines().any(|l| l.contains(TOLERANCE)),
                "one line at 140:\n{out}"
            );
        }
    }
    // -v shows every check's whole message.
    let out = run(Some("60"), &["-v"]);
    let list = out.split("Every check:").nth(1).unwrap();
    let joined = list.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains("which is 0 bytes past the end of a 4-byte allocation"),
        "{list}"
    );
    assert!(!list.contains('…'), "{list}");
}

/// A real terminal (a pseudo-terminal of 60 and of 140 columns, no COLUMNS): cugrade asks it
/// for its width.
#[test]
fn a_terminal_of_60_or_140_columns_is_asked_for_its_width() {
    if !nvrtc() {
        return;
    }
    for width in [60u16, 140] {
        let out = on_pty(width, check("rubrics/reduction.yaml", MISSING_BOUNDS, &[]));
        // Colour codes are for terminals; strip them before measuring.
        let plain = strip_ansi(&out);
        for l in prose(&plain) {
            assert!(
                l.chars().count() <= usize::from(width),
                "{width}: {l:?}\n{plain}"
            );
        }
        assert!(evidence(&plain).contains(TOLERANCE), "{plain}");
        if width == 140 {
            assert!(prose(&plain).any(|l| l.chars().count() > 80), "{plain}");
        }
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            esc = !c.is_ascii_alphabetic();
        } else if c == '\x1b' {
            esc = true;
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

/// Run `cmd` with its stdout on a new pseudo-terminal `cols` wide; returns what it printed.
fn on_pty(cols: u16, mut cmd: Command) -> String {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on descriptors this function owns.
    let (master, slave) = unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(s >= 0, "open the pty's slave");
        let ws = libc::winsize {
            ws_row: 50,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(libc::ioctl(s, libc::TIOCSWINSZ, &ws), 0);
        (
            std::fs::File::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(s),
        )
    };
    let mut child = cmd
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Drain while it runs (a pty holds little); the read ends with EIO once it has exited.
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    });
    child.wait().unwrap();
    // The child's copy of the slave closed with it, and the Command's with `cmd`.
    drop(cmd);
    let out = reader.join().unwrap();
    text(&out)
}
