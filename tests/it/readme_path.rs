//! README's student path, walked literally on a fresh `HOME` with no environment variable set
//! by hand: the commands are read from README.md's student block, `cugrade` is found on
//! `PATH`, the environment holds only `HOME` and `PATH` (no `LD_LIBRARY_PATH`, no
//! `CUGRADE_*`), and NVRTC, CUDA's headers and (for the Numba starter) Numba are installed
//! from PyPI into that HOME's cache by cugrade itself, on first use, for real.
//!
//! The binary on `PATH` is this build's (`CARGO_BIN_EXE_cugrade`): the block's first command,
//! `cargo install --git ... --tag ...`, is a release build of minutes, and `.ci/run` runs it
//! for real (ci/check-templates.sh installs from a local clone at the tag and walks this same
//! path with the installed binary).

use crate::support::{BIN, output_text as text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The commands of README's student block, comments dropped.
fn readme_commands() -> Vec<String> {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("## For students")
        .expect("README.md has a student section");
    let block = &readme[start..];
    let open = block.find("```sh\n").expect("a sh block") + 6;
    let close = open + block[open..].find("```").unwrap();
    block[open..close]
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A fresh HOME with `cugrade` on PATH, and nothing else set.
struct Student {
    home: tempfile::TempDir,
    path: String,
}

impl Student {
    fn new() -> Student {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join(".cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(BIN, bin.join("cugrade")).unwrap();
        // The machine's PATH (python3 and pip are found there), behind ~/.cargo/bin as rustup
        // sets it up.
        let system = std::env::var("PATH").unwrap_or_default();
        let path = format!("{}:{system}", bin.display());
        Student { home, path }
    }

    /// Run one shell line of the README in `cwd` (relative to HOME), under the strictest
    /// common umask (077, as on many shared machines): what cugrade installs and what its
    /// sandbox builds must still be readable by workers that a root grader (this test, as
    /// root) runs under uids of their own.
    fn sh(&self, line: &str, cwd: &str) -> Output {
        Command::new("sh")
            .arg("-c")
            .arg(format!("umask 077; {line}"))
            .env_clear()
            .env("HOME", self.home.path())
            .env("PATH", &self.path)
            .current_dir(self.home.path().join(cwd))
            .output()
            .unwrap()
    }

    fn file(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }
}

fn edit(path: &Path, stub: &str, body: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(stub), "{s}");
    std::fs::write(path, s.replace(stub, body)).unwrap();
}

/// The README block: install, init, cd, check. Returns the init and check lines with `lang`.
fn walk(lang: Option<&str>) -> (Student, String, String) {
    let cmds = readme_commands();
    assert_eq!(cmds.len(), 4, "{cmds:?}");
    assert!(
        cmds[0].starts_with("cargo install --locked --git ") && cmds[0].contains(" --tag v"),
        "{cmds:?}"
    );
    assert_eq!(cmds[1], "cugrade init reduction my-reduction", "{cmds:?}");
    assert_eq!(cmds[2], "cd my-reduction", "{cmds:?}");
    assert_eq!(cmds[3], "cugrade check", "{cmds:?}");
    let init = match lang {
        Some(l) => format!("{} --lang {l}", cmds[1]),
        None => cmds[1].clone(),
    };
    (Student::new(), init, cmds[3].clone())
}

#[test]
fn readme_student_path_cuda_on_a_fresh_home() {
    let (s, init, check) = walk(None);
    let o = s.sh(&init, ".");
    assert!(o.status.success(), "{}", text(&o));
    // The untouched starter: three "not implemented yet", nothing compiled or installed.
    let o = s.sh(&check, "my-reduction");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(out.matches("not implemented yet").count(), 3, "{out}");
    assert!(!s.file(".cache/cugrade-nvrtc").exists(), "{out}");
    // Write reduce_naive, check again: NVRTC and the headers come from PyPI into this HOME.
    edit(
        &s.file("my-reduction/reduction.cu"),
        "void reduce_naive(const float* in, float* out, int n)\n{\n    // TODO: your code here.\n}",
        "void reduce_naive(const float* in, float* out, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(out, in[i]);\n}",
    );
    let o = s.sh(&check, "my-reduction");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("installing NVRTC 13.0.88"), "{out}");
    assert!(out.contains("PASS  reduce_naive"), "{out}");
    assert_eq!(out.matches("not implemented yet").count(), 2, "{out}");
    for f in [
        "nvidia/cu13/lib/libnvrtc.so.13",
        "headers/nvidia/cu13/include/cooperative_groups.h",
    ] {
        assert!(
            s.file(&format!(".cache/cugrade-nvrtc/{f}")).is_file(),
            "{f}"
        );
    }
    // And again: nothing is installed twice.
    let o = s.sh(&check, "my-reduction");
    let out = text(&o);
    assert!(
        out.contains("PASS  reduce_naive") && !out.contains("installing"),
        "{out}"
    );
}

#[test]
fn readme_student_path_numba_on_a_fresh_home() {
    let (s, init, check) = walk(Some("numba"));
    let o = s.sh(&init, ".");
    assert!(o.status.success(), "{}", text(&o));
    assert!(s.file("my-reduction/reduction.py").is_file());
    let o = s.sh(&check, "my-reduction");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(out.matches("not implemented yet").count(), 3, "{out}");
    assert!(out.contains("reduction.py:"), "{out}");
    edit(
        &s.file("my-reduction/reduction.py"),
        "def reduce_naive(in_, out, n):\n    # TODO: your code here.\n    pass\n",
        "def reduce_naive(in_, out, n):\n    i = cuda.grid(1)\n    if i < n:\n        cuda.atomic.add(out, 0, in_[i])\n",
    );
    let o = s.sh(&check, "my-reduction");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("installing numba-cuda 0.30.4"), "{out}");
    assert!(out.contains("PASS  reduce_naive"), "{out}");
    assert_eq!(out.matches("not implemented yet").count(), 2, "{out}");
    assert!(s.file(".cache/cugrade-nvrtc/numba/.cugrade-pins").is_file());
}
