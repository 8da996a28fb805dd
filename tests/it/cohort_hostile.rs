//! `cugrade grade` against cohorts built to break it (issue 17): entries that share a name or
//! take a report's name, links, hostile manifests and archives, two runs into one folder,
//! `--resume` after a rubric change, a disk that fills up. Each test runs the real binary on the
//! emulator with the mini rubric (tests/fixtures/mini), under a generous wall-clock bound (a
//! stall fails the test with what the run printed).

use crate::support::{cugrade, nvrtc, root, tree};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn mini() -> PathBuf {
    root().join("tests/fixtures/mini")
}

/// What a run left: exit code, stdout, stderr.
struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

/// `cugrade grade --rubric RUBRIC COHORT --out OUT --backend emu EXTRA...`, killed (and the
/// test failed) after `secs`. `limits` runs in the child before exec (rlimits, signals).
fn grade_with(
    rubric: &Path,
    cohort: &Path,
    out: &Path,
    extra: &[&str],
    secs: u64,
    limits: Option<fn() -> std::io::Result<()>>,
) -> Run {
    use wait_timeout::ChildExt;
    let logs = tempfile::tempdir().unwrap();
    let (o, e) = (logs.path().join("o"), logs.path().join("e"));
    let mut cmd = cugrade();
    cmd.arg("grade")
        .arg("--rubric")
        .arg(rubric)
        .arg(cohort)
        .arg("--out")
        .arg(out)
        .args(["--backend", "emu", "--seed", "5"])
        .args(extra)
        .env("CI", "1")
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap());
    if let Some(f) = limits {
        // SAFETY: the closure only calls setrlimit/signal, both async-signal-safe.
        unsafe {
            cmd.pre_exec(f);
        }
    }
    let mut child = cmd.spawn().unwrap();
    let status = child.wait_timeout(Duration::from_secs(secs)).unwrap();
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    assert!(
        status.is_some(),
        "grade still ran after {secs} s\n{}",
        read(&e)
    );
    Run {
        code: status.and_then(|s| s.code()),
        out: read(&o),
        err: read(&e),
    }
}

fn grade(rubric: &Path, cohort: &Path, out: &Path, extra: &[&str]) -> Run {
    grade_with(rubric, cohort, out, extra, 300, None)
}

/// grades.csv as rows of (column -> value).
fn grades(out: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(out.join("grades.csv")).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    r.records()
        .map(|row| {
            header
                .iter()
                .cloned()
                .zip(row.unwrap().iter().map(String::from))
                .collect()
        })
        .collect()
}

fn row<'a>(rows: &'a [BTreeMap<String, String>], id: &str) -> &'a BTreeMap<String, String> {
    rows.iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no row {id} in {rows:?}"))
}

fn correct() -> String {
    std::fs::read_to_string(mini().join("correct/add.cu")).unwrap()
}

/// The correct kernel, made wrong (every element off by one) and marked with `tag`.
fn wrong(tag: &str) -> String {
    correct().replace("a[i] + b[i]", "a[i] + b[i] + 1.0f") + &format!("// {tag}\n")
}

fn zip_with(path: &Path, files: &[(&str, &str)]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, text) in files {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(text.as_bytes()).unwrap();
    }
    z.finish().unwrap();
}

fn targz_with(path: &Path, files: &[(&str, &str)]) {
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    let mut t = tar::Builder::new(gz);
    for (name, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, name, text.as_bytes()).unwrap();
    }
    t.into_inner().unwrap().finish().unwrap();
}

#[test]
fn same_named_entries_and_entries_named_like_reports_each_get_their_own_row_and_folder() {
    assert!(
        correct().contains("a[i] + b[i]"),
        "the fixture's kernel changed"
    );
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    // alice four times over; carol twice with different work; folders named like reports.
    std::fs::write(cohort.join("alice.cu"), correct()).unwrap();
    std::fs::create_dir(cohort.join("alice")).unwrap();
    std::fs::write(cohort.join("alice/add.cu"), wrong("ALICE-DIR")).unwrap();
    zip_with(&cohort.join("alice.zip"), &[("add.cu", &correct())]);
    targz_with(
        &cohort.join("alice.tar.gz"),
        &[("add.cu", &wrong("ALICE-TGZ"))],
    );
    zip_with(
        &cohort.join("carol.zip"),
        &[("add.cu", &(correct() + "// CAROL-ZIP\n"))],
    );
    targz_with(
        &cohort.join("carol.tgz"),
        &[("add.cu", &wrong("CAROL-TGZ"))],
    );
    for report in [
        "summary.md",
        "junit.xml",
        "grades.csv",
        "integrity.csv",
        "charts",
    ] {
        std::fs::create_dir(cohort.join(report)).unwrap();
        std::fs::write(cohort.join(report).join("add.cu"), correct()).unwrap();
    }
    let out = d.path().join("out");
    let run = grade(&mini().join("rubric.yaml"), &cohort, &out, &[]);
    assert_eq!(run.code, Some(1), "{}", run.err);

    let rows = grades(&out);
    assert_eq!(rows.len(), 11, "{rows:?}");
    for (id, student, total) in [
        ("alice.cu", "alice", "10"),
        ("alice", "alice", "0"),
        ("alice.zip", "alice", "10"),
        ("alice.tar.gz", "alice", "0"),
        ("carol.zip", "carol", "10"),
        ("carol.tgz", "carol", "0"),
        ("summary.md", "summary.md", "10"),
        ("charts", "charts", "10"),
    ] {
        let r = row(&rows, id);
        assert_eq!(
            (r["student"].as_str(), r["total"].as_str()),
            (student, total),
            "{r:?}"
        );
        assert_eq!(r["entry"], id);
        assert!(out.join("students").join(id).join("result.json").is_file());
    }
    // Each carol was graded with her own files only.
    let report = |id: &str| {
        std::fs::read_to_string(out.join("students").join(id).join("report.md")).unwrap()
    };
    assert!(!report("carol.zip").contains("CAROL-TGZ"));
    assert!(!report("carol.tgz").contains("CAROL-ZIP"));
    // The class reports are files, whatever the entries were called.
    for f in ["summary.md", "junit.xml", "grades.csv", "integrity.csv"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    assert!(out.join("charts/scores.svg").is_file());
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for label in [
        "alice (alice.zip)",
        "alice (alice.tar.gz)",
        "carol (carol.tgz)",
    ] {
        assert!(summary.contains(label), "{label} not in\n{summary}");
    }
    // The ids stay the ids in the combined JUnit file.
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains("name=\"alice.tar.gz/vector_add\""),
        "{junit}"
    );
}

#[test]
fn linked_entries_are_refused_and_their_targets_never_read() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let secret_dir = d.path().join("elsewhere");
    std::fs::create_dir(&secret_dir).unwrap();
    let secret = secret_dir.join("secret.cu");
    std::fs::write(&secret, "root:x:0:0:SECRET-TOKEN\n").unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    std::fs::write(cohort.join("honest.cu"), correct()).unwrap();
    std::os::unix::fs::symlink(&secret, cohort.join("eve.cu")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", cohort.join("eve2.cu")).unwrap();
    std::os::unix::fs::symlink(&secret_dir, cohort.join("mallory")).unwrap();
    // Inside a student's folder: a link to a file out of it is skipped, the rest graded.
    std::fs::create_dir(cohort.join("trudy")).unwrap();
    std::fs::write(cohort.join("trudy/add.cu"), correct()).unwrap();
    std::os::unix::fs::symlink(&secret, cohort.join("trudy/extra.cu")).unwrap();
    let out = d.path().join("out");
    let run = grade(&mini().join("rubric.yaml"), &cohort, &out, &[]);
    assert_eq!(run.code, Some(1), "{}", run.err);
    let rows = grades(&out);
    for id in ["eve.cu", "eve2.cu", "mallory"] {
        let r = row(&rows, id);
        assert_eq!(r["status"], "error", "{r:?}");
        let report =
            std::fs::read_to_string(out.join("students").join(id).join("report.md")).unwrap();
        assert!(report.contains("symbolic link"), "{report}");
    }
    assert_eq!(row(&rows, "honest.cu")["total"], "10");
    assert_eq!(row(&rows, "trudy")["total"], "10");
    for (name, bytes) in tree(&out) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("SECRET-TOKEN") && !text.contains("root:x:0"),
            "{name} holds a byte of a link's target"
        );
    }
}

/// A GNU long-name (`L`) or PAX (`x`) header that claims 3 GiB, followed by that much data, as
/// a 3 MB multi-member .tar.gz (what `cat a.gz b.gz` makes; `tar xzf` reads it whole).
fn giant_header_archive(path: &Path, kind: u8) {
    let mut h = tar::Header::new_gnu();
    let name: &[u8] = if kind == b'L' {
        b"././@LongLink"
    } else {
        b"PaxHeaders/add.cu"
    };
    h.as_mut_bytes()[..name.len()].copy_from_slice(name);
    h.set_mode(0o644);
    h.set_size(3 << 30);
    h.set_entry_type(tar::EntryType::new(kind));
    h.set_cksum();
    let member = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&member(h.as_bytes())).unwrap();
    let fill = member(&vec![b'a'; 16 << 20]);
    for _ in 0..192 {
        f.write_all(&fill).unwrap();
    }
}

/// The address-space limit the grader runs under in the hostile-input test: an unbounded read
/// of a 3 GiB header (the grader grew to 12 GiB on one) cannot fit, an honest run does.
fn four_gib_address_space() -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: 4 << 30,
        rlim_max: 4 << 30,
    };
    // SAFETY: setrlimit with a valid struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[test]
fn hostile_manifests_and_archives_are_errors_of_their_student_only_and_resume_survives_them() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    std::fs::write(cohort.join("honest.cu"), correct()).unwrap();
    let manifest = |name: &str, text: String| {
        std::fs::create_dir(cohort.join(name)).unwrap();
        std::fs::write(cohort.join(name).join("add.cu"), correct()).unwrap();
        std::fs::write(cohort.join(name).join("cugrade.yaml"), text).unwrap();
    };
    manifest(
        "parens",
        format!(
            "launch:\n  vector_add:\n    grid: [\"{}n{}\"]\n",
            "(".repeat(10_000),
            ")".repeat(10_000)
        ),
    );
    manifest(
        "brackets",
        format!(
            "launch:\n  vector_add:\n    grid: {}{}\n",
            "[".repeat(30_000),
            "]".repeat(30_000)
        ),
    );
    manifest(
        "brackets-2mib",
        format!(
            "student: {}{}\n",
            "[".repeat(1 << 20),
            "]".repeat((1 << 20) - 20)
        ),
    );
    giant_header_archive(&cohort.join("longname.tar.gz"), b'L');
    giant_header_archive(&cohort.join("pax.tar.gz"), b'x');
    assert!(
        std::fs::metadata(cohort.join("longname.tar.gz"))
            .unwrap()
            .len()
            < 8 << 20
    );
    let out = d.path().join("out");
    let rubric = mini().join("rubric.yaml");
    let run = grade_with(
        &rubric,
        &cohort,
        &out,
        &[],
        300,
        Some(four_gib_address_space),
    );
    assert_eq!(run.code, Some(1), "{}", run.err);
    let rows = grades(&out);
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert_eq!(row(&rows, "honest.cu")["total"], "10");
    for (id, why) in [
        ("parens", "at most 1024"),
        ("brackets", "nest more than"),
        ("brackets-2mib", "a cugrade.yaml may have at most"),
        ("longname.tar.gz", "GNU long name of 3221225472 bytes"),
        ("pax.tar.gz", "PAX header of 3221225472 bytes"),
    ] {
        assert_eq!(row(&rows, id)["status"], "error", "{id}");
        let report =
            std::fs::read_to_string(out.join("students").join(id).join("report.md")).unwrap();
        assert!(report.contains(why), "{id}: {report}");
        assert!(
            report.len() < 20_000,
            "{id}: the report quotes a window, not the file"
        );
    }
    // `--resume` over the same cohort finishes too, reusing the graded student.
    let again = grade_with(
        &rubric,
        &cohort,
        &out,
        &["--resume"],
        300,
        Some(four_gib_address_space),
    );
    assert_eq!(again.code, Some(1), "{}", again.err);
    assert!(
        again
            .out
            .contains("(1 reused from the previous run, 5 graded)"),
        "{}",
        again.out
    );
}

#[test]
fn a_second_grade_into_the_same_folder_fails_fast_while_the_first_runs() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    std::fs::write(cohort.join("honest.cu"), correct()).unwrap();
    // A kernel that never ends keeps the first run busy until its deadline.
    std::fs::create_dir(cohort.join("hang")).unwrap();
    for f in std::fs::read_dir(mini().join("hang")).unwrap().flatten() {
        std::fs::copy(f.path(), cohort.join("hang").join(f.file_name())).unwrap();
    }
    let out = d.path().join("out");
    let rubric = mini().join("rubric.yaml");
    let first = cugrade()
        .arg("grade")
        .arg("--rubric")
        .arg(&rubric)
        .arg(&cohort)
        .arg("--out")
        .arg(&out)
        .args(["--backend", "emu", "--jobs", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = Guard(first);
    // The first run holds the lock once it made students/.
    let started = std::time::Instant::now();
    while !out.join("students").is_dir() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = grade_with(&rubric, &cohort, &out, &[], 60, None);
    assert_eq!(second.code, Some(2), "{}", second.err);
    assert!(
        second.err.contains("another cugrade run is writing into"),
        "{}",
        second.err
    );
    let status = first.0.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    // The first run's gradebook agrees with its result.json files.
    let rows = grades(&out);
    for r in &rows {
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("students").join(&r["id"]).join("result.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            v["score"].as_f64().unwrap().to_string(),
            r["total"],
            "{r:?}"
        );
    }
}

/// A child killed if the test fails before waiting for it.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn resume_reuses_results_of_the_same_rubric_and_regrades_after_a_change() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    std::fs::write(cohort.join("ann.cu"), correct()).unwrap();
    std::fs::write(cohort.join("bob.cu"), wrong("BOB")).unwrap();
    let course = d.path().join("course");
    std::fs::create_dir(&course).unwrap();
    std::fs::copy(mini().join("ref.cu"), course.join("ref.cu")).unwrap();
    let rubric = course.join("rubric.yaml");
    let text = std::fs::read_to_string(mini().join("rubric.yaml")).unwrap();
    std::fs::write(&rubric, &text).unwrap();
    let out = d.path().join("out");
    let first = grade(&rubric, &cohort, &out, &[]);
    assert_eq!(first.code, Some(1), "{}", first.err);
    let same = grade(&rubric, &cohort, &out, &["--resume"]);
    assert!(
        same.out
            .contains("(2 reused from the previous run, 0 graded)"),
        "{}",
        same.out
    );
    // Same assignment id, other points: every result is graded again.
    std::fs::write(&rubric, text.replace("points: 10", "points: 20")).unwrap();
    let changed = grade(&rubric, &cohort, &out, &["--resume"]);
    assert!(
        changed
            .out
            .contains("(0 reused from the previous run, 2 graded, 2 of them again because"),
        "{}",
        changed.out
    );
    let rows = grades(&out);
    assert_eq!(row(&rows, "ann.cu")["total"], "20");
    assert_eq!(row(&rows, "ann.cu")["max_score"], "20");
    // And so is a change of the reference kernel alone.
    let reference = std::fs::read_to_string(course.join("ref.cu")).unwrap();
    std::fs::write(course.join("ref.cu"), reference + "\n// edited\n").unwrap();
    let edited = grade(&rubric, &cohort, &out, &["--resume"]);
    assert!(edited.out.contains("(0 reused"), "{}", edited.out);
}

/// The grader's files may not grow past 512 bytes, and writing past that fails (EFBIG) rather
/// than killing the process: a disk that fills up mid-run.
fn tiny_files() -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: 512,
        rlim_max: 512,
    };
    // SAFETY: plain libc calls with valid arguments.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[test]
fn a_run_that_cannot_write_leaves_the_previous_complete_reports() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cohort = d.path().join("cohort");
    std::fs::create_dir(&cohort).unwrap();
    std::fs::write(cohort.join("ann.cu"), correct()).unwrap();
    std::fs::write(cohort.join("bob.cu"), wrong("BOB")).unwrap();
    let out = d.path().join("out");
    let rubric = mini().join("rubric.yaml");
    let first = grade(&rubric, &cohort, &out, &[]);
    assert_eq!(first.code, Some(1), "{}", first.err);
    let before = tree(&out);
    assert!(before["summary.md"].len() > 512 && before["grades.csv"].len() > 100);
    let full = grade_with(&rubric, &cohort, &out, &["--resume"], 300, Some(tiny_files));
    assert_eq!(full.code, Some(3), "{}", full.err);
    assert!(full.err.contains("File too large"), "{}", full.err);
    // Every file is the previous run's, whole; no temporary file is left.
    assert_eq!(tree(&out), before);
}
