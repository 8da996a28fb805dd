//! The toolchain as the workers of a root grader see it: they run as uids of their own, which
//! own no file, so every toolchain file must be readable by all. What the first GPU run of the
//! sandbox found: a Numba cache unpacked from a tar whose top directory was `0700` made every
//! Numba compile fail ("the Numba toolchain failed") while `cugrade doctor` said "a test
//! kernel compiles" (it compiled outside the sandbox).
//!
//! Here, as root (CI runs as root), with a private copy of cugrade's cache:
//! - cugrade's own cache at `0700` (and a grader with umask 077): grading opens the cache to
//!   the workers and compiles; doctor says the same;
//! - a toolchain that is not cugrade's own and that workers may not read (CUDA's headers in a
//!   `0700` folder, a Python executable only root may run): exit 3 with the path and the fix,
//!   and doctor says the same thing (MISS, same path).

use crate::support::{BIN, is_root, nvrtc, root};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A private copy of cugrade's cache (hard links for files, fresh directories, so that
/// changing a directory's mode here leaves the real cache alone), next to the real one (one
/// file system). `None` (with a note) where this cannot run.
fn private_cache() -> Option<(tempfile::TempDir, PathBuf)> {
    if !is_root() {
        eprintln!("SKIPPED: the root leg needs root (CI runs as root)");
        return None;
    }
    if !nvrtc() {
        return None;
    }
    let real = cugrade::compile::toolchain::cache_root();
    cugrade::compile::toolchain::numba()
        .unwrap_or_else(|e| panic!("{e}\n(ci/with-nvrtc installs Numba into cugrade's cache)"));
    let d = tempfile::Builder::new()
        .prefix("cugrade-access-test-")
        .tempdir_in(real.parent().unwrap())
        .unwrap();
    let cache = d.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    for part in ["numba", "headers"] {
        let ok = Command::new("cp")
            .arg("-al")
            .arg(real.join(part))
            .arg(cache.join(part))
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -al {}", real.join(part).display());
    }
    Some((d, cache))
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// `cugrade ARGS` with this cache, a umask of 077 and extra variables.
fn cugrade(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("umask 077; exec \"$@\"")
        .arg("sh")
        .arg(BIN)
        .args(args)
        .env("CUGRADE_NVRTC_CACHE", cache)
        .env_remove("CUGRADE_CUDA_INCLUDE")
        .env("NO_COLOR", "1")
        .current_dir(root());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn doctor_line(cache: &Path, env: &[(&str, &str)], what: &str) -> String {
    // Wide enough that no line wraps: the line is read whole.
    let mut env = env.to_vec();
    env.push(("COLUMNS", "1000"));
    let o = cugrade(cache, &["doctor"], &env);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines()
        .find(|l| l[4..].trim_start().starts_with(what))
        .unwrap_or_else(|| panic!("no {what} line in doctor's report:\n{text}"))
        .to_string()
}

/// `check` of one submission: the exit code, the first compile check (if a result was
/// written) and stderr.
fn check(
    cache: &Path,
    rubric: &str,
    sub: &Path,
    json: &Path,
    env: &[(&str, &str)],
) -> (i32, Option<serde_json::Value>, String) {
    let _ = std::fs::remove_file(json);
    let o = cugrade(
        cache,
        &[
            "check",
            "--backend",
            "emu",
            "--seed",
            "1",
            "--rubric",
            rubric,
            &sub.to_string_lossy(),
            "--json",
            &json.to_string_lossy(),
        ],
        env,
    );
    let result = std::fs::read_to_string(json)
        .ok()
        .map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap());
    let first = result.map(|r| r["milestones"][0]["checks"][0].clone());
    (
        o.status.code().unwrap_or(-1),
        first,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_closed_cache_of_cugrades_own_is_opened_and_doctor_agrees_with_grading() {
    let Some((d, cache)) = private_cache() else {
        return;
    };
    let numba = cache.join("numba");
    let json = d.path().join("r.json");
    let sub = root().join("submissions-example/vector-add/numba_naive");
    // What ci/gpu-numba.sh's tar left on the GPU machine.
    chmod(&numba, 0o700);
    let (code, c, err) = check(&cache, "rubrics/vector-add.yaml", &sub, &json, &[]);
    let c = c.unwrap_or_else(|| panic!("no result (exit {code}): {err}"));
    assert_eq!(c["status"], "pass", "{c}\n{err}");
    assert!(err.contains("readable to the workers' own uids"), "{err}");
    assert_eq!(mode(&numba), 0o755);
    // Doctor, on the same closed cache, says what grading does.
    chmod(&numba, 0o700);
    let line = doctor_line(&cache, &[], "Numba");
    assert!(line.starts_with("ok"), "{line}");
    assert!(line.contains("sandboxed compile worker"), "{line}");
}

#[test]
fn a_toolchain_the_workers_cannot_read_is_the_machines_fault_and_doctor_says_so() {
    let Some((d, cache)) = private_cache() else {
        return;
    };
    let json = d.path().join("r.json");
    // CUDA's headers where the grader put them itself, in a folder only root may read.
    let include = d.path().join("include");
    let copied = Command::new("cp")
        .arg("-al")
        .arg(cache.join("headers/nvidia/cu13/include"))
        .arg(&include)
        .status()
        .unwrap();
    assert!(copied.success());
    chmod(&include, 0o700);
    let dirs = format!("{}:{}", include.display(), include.join("cccl").display());
    let env = [("CUGRADE_CUDA_INCLUDE", dirs.as_str())];
    let sub = d.path().join("cg");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
        sub.join("vector_add.cu"),
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n\
         extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) {\n\
         int i = cg::this_grid().thread_rank();\n if (i < n) c[i] = a[i] + b[i];\n}\n",
    )
    .unwrap();
    chmod(d.path(), 0o755);
    chmod(&sub, 0o755);
    let (code, c, err) = check(&cache, "rubrics/vector-add.yaml", &sub, &json, &env);
    assert_eq!(code, 3, "{c:?}\n{err}");
    let want = format!(
        "{} (drwx------ root:root) is not readable",
        include.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(
        err.contains(&format!("fix: `chmod -R a+rX {}`", include.display())),
        "{err}"
    );
    assert_eq!(mode(&include), 0o700, "not cugrade's own: left alone");
    let line = doctor_line(&cache, &env, "CUDA headers");
    assert!(line.starts_with("MISS") && line.contains(&want), "{line}");

    // A Python only root may run, for a Numba submission.
    let tool = cugrade::compile::toolchain::numba().unwrap();
    let python = d.path().join(tool.python.file_name().unwrap());
    std::fs::copy(&tool.python, &python).unwrap();
    chmod(&python, 0o700);
    let env = [("CUGRADE_PYTHON", python.to_str().unwrap())];
    let sub = root().join("submissions-example/vector-add/numba_naive");
    let (code, c, err) = check(&cache, "rubrics/vector-add.yaml", &sub, &json, &env);
    assert_eq!(code, 3, "{c:?}\n{err}");
    let want = format!(
        "{} (-rwx------ root:root) is not readable",
        python.display()
    );
    assert!(err.contains(&want), "{err}");
    // Without a rubric that takes Python, Numba is optional to doctor (`--`), and still says why.
    let line = doctor_line(&cache, &env, "Numba");
    assert!(
        (line.starts_with("MISS") || line.starts_with("--")) && line.contains(&want),
        "{line}"
    );
}
