//! What the modules of the integration-test crate share: the repository root, the binary
//! under test, the NVRTC gate and its one skip message, the one snapshot helper
//! (`UPDATE_SNAPSHOTS=1` rewrites snapshots), scratch course trees and "grade, then read
//! result.json".
//!
//! Every test of the crate runs in one process, on threads: nothing here (or in a test) may
//! change the process's environment, working directory, umask or signal dispositions while
//! other tests run. Pass environment to the child `Command` instead; the one exception is
//! [`worker_exe`], set once before any worker is spawned.

#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (fixtures, rubrics, examples).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `cugrade` binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_cugrade");

/// `cugrade` with no arguments yet.
pub fn cugrade() -> Command {
    Command::new(BIN)
}

/// Whether NVRTC can be loaded; says the test skipped when it cannot. cudarc panics on first
/// use when the library is missing, so every test that compiles asks here first.
pub fn nvrtc() -> bool {
    // SAFETY: cudarc's documented presence check; it only tries to dlopen the library.
    let ok = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !ok {
        eprintln!("SKIPPED: libnvrtc.so.13 not found; run through ci/with-nvrtc");
    }
    ok
}

/// Whether the CUDA driver library can be loaded (a GPU machine).
pub fn driver() -> bool {
    // SAFETY: cudarc's documented presence check; it only tries to dlopen the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// [`nvrtc`], and Numba must be installed when it is (ci/with-nvrtc installs both).
pub fn numba() -> bool {
    if !nvrtc() {
        return false;
    }
    if let Err(e) = cugrade::compile::toolchain::numba() {
        panic!("{e}\n(ci/with-nvrtc installs Numba into cugrade's cache)");
    }
    true
}

/// Library calls that spawn workers re-execute `CUGRADE_WORKER_EXE` (the test binary is not
/// cugrade). Set once, to the same value, before the first such call: call this first.
pub fn worker_exe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, to one value, through std (which locks the environment against
    // std's other readers); no test changes the environment otherwise.
    ONCE.call_once(|| unsafe { std::env::set_var("CUGRADE_WORKER_EXE", BIN) });
}

/// Compare `got` with the snapshot at `path`: `None` when they agree (or when
/// `UPDATE_SNAPSHOTS=1` wrote it), otherwise what differs. A differing output is left beside
/// the snapshot as `NAME.new` to review.
pub fn snapshot(path: &Path, got: &str) -> Option<String> {
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, got).unwrap();
        return None;
    }
    let Ok(want) = std::fs::read_to_string(path) else {
        return Some(format!(
            "no snapshot {}; run with UPDATE_SNAPSHOTS=1 and review it",
            path.display()
        ));
    };
    if want == got {
        return None;
    }
    let new = path.with_extension(match path.extension() {
        Some(e) => format!("{}.new", e.to_string_lossy()),
        None => "new".into(),
    });
    std::fs::write(&new, got).unwrap();
    let diff: Vec<String> = want
        .lines()
        .zip(got.lines())
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .take(8)
        .map(|(i, (a, b))| format!("line {}:\n- {a}\n+ {b}", i + 1))
        .collect();
    Some(format!(
        "snapshot {} differs from this run ({} vs {} lines):\n{}\nthe new output is in {} \
         (UPDATE_SNAPSHOTS=1 rewrites the snapshot after review)",
        path.display(),
        want.lines().count(),
        got.lines().count(),
        diff.join("\n"),
        new.display()
    ))
}

/// [`snapshot`], panicking on a difference.
#[track_caller]
pub fn assert_snapshot(path: &Path, got: &str) {
    if let Some(e) = snapshot(path, got) {
        panic!("{e}");
    }
}

/// A copy of the repository's course layout in `dir`: `rubrics/NAME.yaml` and the reference
/// kernel it names (`../reference-kernels/...`), unchanged; the rubric's path. Edit it there.
pub fn course_copy(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join(format!("rubrics/{name}.yaml"))).unwrap();
    let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let reference = y["reference"]
        .as_str()
        .expect("the rubric names its reference");
    let file = Path::new(reference).file_name().unwrap();
    std::fs::create_dir_all(dir.join("reference-kernels")).unwrap();
    std::fs::create_dir_all(dir.join("rubrics")).unwrap();
    std::fs::copy(
        root().join("reference-kernels").join(file),
        dir.join("reference-kernels").join(file),
    )
    .unwrap();
    let path = dir.join("rubrics").join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A scratch course tree in `dir`: a rubric like `rubrics/NAME.yaml`, its reference copied
/// beside it (a rubric reads files of its own course tree only) and `extra` appended.
pub fn lab_rubric(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join(format!("rubrics/{name}.yaml"))).unwrap();
    // `NAME.cu`, or `NAME.py` for a Python function lab.
    let file = ["cu", "py"]
        .iter()
        .map(|e| format!("{name}.{e}"))
        .find(|f| text.contains(&format!("../reference-kernels/{f}")))
        .unwrap_or_else(|| format!("{name}.cu"));
    std::fs::copy(
        root().join("reference-kernels").join(&file),
        dir.join(format!("reference-{file}")),
    )
    .unwrap();
    let text = text.replace(
        &format!("../reference-kernels/{file}"),
        &format!("reference-{file}"),
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, format!("{text}\n{extra}\n")).unwrap();
    path
}

/// Grade `files` (name, text) as one submission with `cugrade check --backend emu --seed 3`;
/// its result.json.
pub fn grade_files(rubric: &Path, files: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("student");
    for (name, text) in files {
        let p = sub.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let json = dir.path().join("result.json");
    let out = cugrade()
        .args(["check", "--backend", "emu", "--seed", "3", "--rubric"])
        .arg(rubric)
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no result.json: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(&text).unwrap()
}

/// Milestone `id` of a result.json.
pub fn milestone<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no milestone {id}: {r}"))
}

/// Every correctness check of the milestone passed (the milestone itself is `skipped` on the
/// emulator when it also has speed checks).
pub fn correct(r: &Value, id: &str) -> Result<(), String> {
    let bad: Vec<String> = milestone(r, id)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] != "performance" && c["status"] != "pass")
        .map(|c| format!("{}: {} {}", c["name"], c["message"], c["details"]))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n"))
    }
}

/// The milestone's first failing (or erroring) check.
pub fn first_failure(r: &Value, id: &str) -> Value {
    milestone(r, id)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["status"] == "fail" || c["status"] == "error")
        .cloned()
        .unwrap_or_else(|| panic!("no failing check in {id}: {r}"))
}

/// Every file below `dir` (links not followed), by relative path.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A command's stdout, then its stderr.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether the tests run as root (CI does).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
