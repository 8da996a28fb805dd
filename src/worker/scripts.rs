//! cugrade's own Python, and the one way it starts next to a submission's: inside a sandboxed
//! worker, where importing the student's modules runs the student's code.
//!
//! The scripts (`scripts/*.py`): `cupy_driver.py` finds a CuPy submission's kernels,
//! `numba_driver.py` compiles a Numba submission's (both in the compile worker, their answer in
//! a file), `python_harness.py` becomes a function lab's Python worker. Each is written into the
//! worker's temp dir with `prelude.py` at its top (the request, the submission's folder, and
//! the helpers that place an error at the student's line), and run there as one file. The CuPy
//! stand-in (`cupy_stand_in.py`, with `cupyx_stand_in.py`) is one package for both of its uses:
//! the drivers' (find the kernels) and the harness's (NumPy standing in for CuPy without a GPU).

use super::process::{Output, Process};
use std::path::Path;

/// The shared prelude (first in every script below).
pub const PRELUDE: &str = include_str!("scripts/prelude.py");
/// Imports a CuPy submission's modules with the stand-in and reports its kernel definitions.
pub const CUPY_DRIVER: &str = concat!(
    include_str!("scripts/prelude.py"),
    include_str!("scripts/cupy_driver.py")
);
/// Imports a Numba submission's modules and compiles its kernels to PTX.
pub const NUMBA_DRIVER: &str = concat!(
    include_str!("scripts/prelude.py"),
    include_str!("scripts/numba_driver.py")
);
/// A function lab's Python worker (`worker::python`).
pub const PYTHON_HARNESS: &str = concat!(
    include_str!("scripts/prelude.py"),
    include_str!("scripts/python_harness.py")
);
/// The stand-in for `cupy`: its use is the running script's `CUPY_STAND_IN` ("record" in the
/// drivers, NumPy's otherwise).
pub const CUPY_STAND_IN: &str = include_str!("scripts/cupy_stand_in.py");
/// `cupyx` beside it, in the same use.
pub const CUPYX_STAND_IN: &str = include_str!("scripts/cupyx_stand_in.py");

/// Write the stand-in into `dir` as the package `cupy` and, with `cupyx`, the package `cupyx`.
pub fn write_stand_in(dir: &Path, cupyx: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("cupy"))?;
    std::fs::write(dir.join("cupy/__init__.py"), CUPY_STAND_IN)?;
    if cupyx {
        std::fs::create_dir_all(dir.join("cupyx"))?;
        std::fs::write(dir.join("cupyx/__init__.py"), CUPYX_STAND_IN)?;
    }
    Ok(())
}

/// Write `source` into the worker's `temp` dir as `name`, and the process that runs it:
/// `python FLAGS temp/name ARGS`, in `temp`, writing no bytecode.
pub fn script(
    python: &Path,
    flags: &[&str],
    temp: &Path,
    name: &str,
    source: &str,
    args: &[&Path],
) -> std::io::Result<Process> {
    let file = temp.join(name);
    std::fs::write(&file, source)?;
    Ok(Process::new(python)
        .args(flags)
        .arg(file)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(temp))
}

/// A driver in the compile worker ([`script`]): none of the worker's environment but HOME and
/// TMPDIR (its temp dir) and a plain PATH, no stdin, and everything it prints (stdout and
/// stderr in one stream, in order) in the file `log`, whose start the caller reads. A file,
/// not a pipe: whatever the student's code leaves running cannot hold the driver's end open,
/// and what it prints counts against the worker's scratch, as what it writes does.
pub fn driver(
    python: &Path,
    flags: &[&str],
    temp: &Path,
    name: &str,
    source: &str,
    args: &[&Path],
    log: &Path,
) -> std::io::Result<Process> {
    let log = std::fs::File::create(log)?;
    Ok(script(python, flags, temp, name, source, args)?
        .env_clear()
        .env("HOME", temp)
        .env("TMPDIR", temp)
        .env("PATH", "/usr/bin:/bin")
        .stdout(Output::File(log.try_clone()?))
        .stderr(Output::File(log)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_starts_with_the_prelude() {
        for s in [CUPY_DRIVER, NUMBA_DRIVER, PYTHON_HARNESS] {
            assert!(s.starts_with(PRELUDE));
            // The helpers are the prelude's alone.
            let own = &s[PRELUDE.len()..];
            for helper in ["def rel(", "def scrub(", "def student_frame(", "REQUEST = "] {
                assert!(!own.contains(helper), "{helper}");
            }
        }
        assert!(CUPY_DRIVER.contains("CUPY_STAND_IN = \"record\""));
        assert!(NUMBA_DRIVER.contains("CUPY_STAND_IN = \"record\""));
        assert!(!PYTHON_HARNESS.contains("CUPY_STAND_IN ="));
    }
}
