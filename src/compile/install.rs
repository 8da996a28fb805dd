//! First use: NVIDIA's wheels (NVRTC, CUDA's headers) and Numba's, installed from PyPI with
//! Python's pip into cugrade's cache, so that a student needs `cargo install` and
//! `cugrade init`, nothing else. NVIDIA's licence allows downloading them, not shipping them.
//!
//! Each install goes to a staging folder of its own and is renamed into place when complete,
//! so an interrupted install leaves nothing half-made and concurrent cugrades (a cohort's
//! jobs, two terminals) do not trip over each other: the first to finish wins. On a terminal
//! pip shows its download progress bars; in logs and pipes a line before and one after. pip
//! writes to stderr, never to stdout (`--format json` keeps stdout for JSON).

use super::toolchain::{self, HEADER_WHEELS, NVRTC_WHEEL};
use crate::worker::process::{Output, Process};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The interpreter that runs pip: `$CUGRADE_PYTHON`, else `python3`.
pub fn python_exe() -> std::ffi::OsString {
    std::env::var_os("CUGRADE_PYTHON")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Whether `exe -m pip` works; `Err` says what to install.
fn pip_available(exe: &std::ffi::OsStr, what: &str) -> Result<(), String> {
    let shown = Path::new(&exe).display().to_string();
    let out = Process::new(exe)
        .args(["-m", "pip", "--version"])
        .capture()
        .run()
        .map_err(|e| {
            format!(
                "cannot install {what}: `{shown}` was not found ({e}); cugrade downloads it \
                 from PyPI with Python's pip the first time it is needed.\n\
                 fix: install Python 3 with pip (Debian/Ubuntu: `sudo apt-get install \
                 python3-pip`; macOS: `brew install python`), then run cugrade again"
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "cannot install {what}: `{shown} -m pip` does not work ({}).\n\
             fix: install pip for it (Debian/Ubuntu: `sudo apt-get install python3-pip`, \
             elsewhere `{shown} -m ensurepip --user`), then run cugrade again",
            String::from_utf8_lossy(&out.stderr.bytes)
                .lines()
                .last()
                .unwrap_or("")
                .trim()
        ));
    }
    Ok(())
}

/// `pip install --target staging pins`, with progress on a terminal. `what` and `size` are
/// for the messages ("NVRTC 13.0.88", "~220 MB").
fn pip_into(
    staging: &Path,
    pins: &[&str],
    what: &str,
    size: &str,
    dest: &Path,
) -> Result<(), String> {
    pip_available(&python_exe(), what)?;
    let _ = std::fs::remove_dir_all(staging);
    let tty = std::io::stderr().is_terminal();
    eprintln!(
        "cugrade: installing {what} from PyPI into {} (one time, {size})",
        dest.display()
    );
    let started = Instant::now();
    let progress: &[&str] = if tty {
        &["--progress-bar", "on"]
    } else {
        &["--quiet", "--progress-bar", "off"]
    };
    // pip's progress bars are on the user's terminal: it stays in cugrade's process group
    // (where Ctrl-C reaches it), with no deadline (a download takes what it takes).
    let status = Process::new(python_exe())
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--no-input",
        ])
        .args(progress)
        .arg("--target")
        .arg(staging)
        .args(pins)
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .stdout(Output::Stderr)
        .grader_group()
        .run()
        .map_err(|e| format!("cannot run pip: {e}"))?
        .status;
    if !status.success() {
        let _ = std::fs::remove_dir_all(staging);
        return Err(format!(
            "installing {what} from PyPI failed ({status}; pip said why above).\n\
             fix: check the network (PyPI must be reachable), or install it by hand: \
             python3 -m pip install --target {} {}",
            dest.display(),
            pins.iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    open_to_all(staging);
    eprintln!(
        "cugrade: {what} installed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A staging folder beside `dest`, unique to this process. The cache folder is made readable
/// by everyone (see `open_to_all`).
fn staging_for(dest: &Path, tag: &str) -> Result<PathBuf, String> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    add_mode(parent, 0o055);
    Ok(parent.join(format!(".{tag}.partial-{}", std::process::id())))
}

/// Add `bits` to `path`'s mode (best effort: a file of another owner is left as it is).
fn add_mode(path: &Path, bits: u32) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::symlink_metadata(path)
        && !m.file_type().is_symlink()
        && m.permissions().mode() & bits != bits
    {
        let mode = (m.permissions().mode() | bits) & 0o7777;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    }
}

/// Make an install readable by every user: folders `a+rx`, files `a+r` (and `a+x` where the
/// owner may run them), whatever the umask. A grader started as root runs its workers under
/// uids of their own, and they load NVRTC, read the headers and import Numba from this cache.
/// Nothing in it is secret (public wheels); nothing is made writable.
fn open_to_all(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(m) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if m.is_dir() {
        add_mode(dir, 0o555);
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                open_to_all(&e.path());
            }
        }
    } else if m.is_file() {
        let exec = m.permissions().mode() & 0o100 != 0;
        add_mode(dir, if exec { 0o555 } else { 0o444 });
    }
}

/// Move `staging/rel` to `root/rel`, renaming the first ancestor of it that `root` lacks (so a
/// folder shared with other installs, like `nvidia/`, is not replaced). Another install that
/// finished first wins.
fn move_into(staging: &Path, root: &Path, rel: &Path) -> Result<(), String> {
    let mut prefix = PathBuf::new();
    for part in rel.components() {
        prefix.push(part);
        let dst = root.join(&prefix);
        if !dst.exists() {
            return match std::fs::rename(staging.join(&prefix), &dst) {
                Ok(()) => Ok(()),
                Err(_) if dst.exists() => Ok(()),
                Err(e) => Err(format!(
                    "cannot move the install into {}: {e}",
                    dst.display()
                )),
            };
        }
    }
    Ok(())
}

/// Rename `staging` to `dest`, moving aside what `dest` held (an install with other pins, or
/// a partial one). Another install that finished first in between wins.
fn replace_dir(staging: &Path, dest: &Path) -> Result<(), String> {
    if dest.exists() {
        let old = staging.with_extension("old");
        if std::fs::rename(dest, &old).is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    match std::fs::rename(staging, dest) {
        Ok(()) => Ok(()),
        Err(_) if dest.exists() => Ok(()),
        Err(e) => Err(format!(
            "cannot move the install into {}: {e}",
            dest.display()
        )),
    }
}

/// NVRTC for CUDA C++ submissions: the system's, else cugrade's cache, installed there first
/// if need be. `Err` says why it cannot be had and what to do.
pub fn ensure_nvrtc() -> Result<(), String> {
    if super::nvrtc_lib::present() {
        return Ok(());
    }
    let root = toolchain::cache_root();
    let lib = toolchain::nvrtc_cache_lib_dir();
    if !lib.join("libnvrtc.so.13").is_file() {
        let what = "NVRTC 13.0.88 (NVIDIA's CUDA C++ compiler)";
        let staging = staging_for(&root.join("nvidia"), "nvrtc")?;
        let r = pip_into(&staging, &[NVRTC_WHEEL], what, "~90 MB download", &root)
            .map_err(|e| format!("{e}\nor install the CUDA 13.0 toolkit, which has NVRTC"))
            .and_then(|()| move_into(&staging, &root, Path::new("nvidia/cu13/lib")));
        let _ = std::fs::remove_dir_all(&staging);
        r?;
    }
    if super::nvrtc_lib::present() {
        Ok(())
    } else {
        Err(format!(
            "NVRTC in {} does not load (a broken download?).\n\
             fix: remove {} and run cugrade again to download it anew",
            lib.display(),
            root.join("nvidia").display()
        ))
    }
}

/// CUDA's own headers (`cooperative_groups.h`, `cuda_fp16.h`, CCCL) for NVRTC: a CUDA
/// toolkit's, else cugrade's cache, installed there first if need be.
pub fn ensure_headers() -> Result<(), String> {
    // `$CUGRADE_CUDA_INCLUDE` names the directories: nothing is installed beside them.
    if !toolchain::cuda_include_dirs().is_empty()
        || std::env::var_os("CUGRADE_CUDA_INCLUDE").is_some_and(|v| !v.is_empty())
    {
        return Ok(());
    }
    let dest = toolchain::headers_dir();
    let staging = staging_for(&dest, "headers")?;
    let r = pip_into(
        &staging,
        HEADER_WHEELS,
        "CUDA 13.0's headers (cooperative_groups.h, cuda_fp16.h, CCCL)",
        "~25 MB",
        &dest,
    )
    .and_then(|()| replace_dir(&staging, &dest));
    let _ = std::fs::remove_dir_all(&staging);
    r?;
    if toolchain::cuda_include_dirs().is_empty() {
        return Err(format!(
            "CUDA's headers were installed into {} but cooperative_groups.h is not there",
            dest.display()
        ));
    }
    Ok(())
}

/// nvJitLink, whose ptxas gives the registers of PTX and Numba kernels without a GPU
/// (`super::jitlink`): one already found (`$CUGRADE_NVJITLINK`, a CUDA toolkit's,
/// `LD_LIBRARY_PATH`'s, cugrade's cache), else installed into cugrade's cache from PyPI.
pub fn ensure_nvjitlink() -> Result<(), String> {
    use super::jitlink;
    if jitlink::library().is_some() {
        return Ok(());
    }
    if let Some(p) = std::env::var_os("CUGRADE_NVJITLINK").filter(|p| !p.is_empty()) {
        // The variable wins over the cache: installing there would change nothing.
        return Err(format!(
            "CUGRADE_NVJITLINK names `{}`, which is not a file; nothing was installed.\n\
             fix: point it at a libnvJitLink.so.13, or unset it so that cugrade installs one",
            Path::new(&p).display()
        ));
    }
    let dest = jitlink::install_dir();
    let staging = staging_for(&dest, "nvjitlink")?;
    let r = pip_into(
        &staging,
        &[jitlink::WHEEL],
        "nvJitLink 13.0.88 (ptxas's register counts for PTX and Numba kernels without a GPU)",
        "~95 MB",
        &dest,
    )
    .and_then(|()| replace_dir(&staging, &dest));
    let _ = std::fs::remove_dir_all(&staging);
    r?;
    if jitlink::library().is_none() {
        return Err(format!(
            "nvJitLink was installed into {} but libnvJitLink.so.13 is not there",
            dest.display()
        ));
    }
    Ok(())
}

/// The Numba wheels into `dest` (stamped with the pins), replacing an install with other pins.
pub fn numba_into(dest: &Path) -> Result<(), String> {
    pins_into(
        dest,
        toolchain::NUMBA_WHEELS,
        "numba-cuda 0.30.4 with NVVM 13.0 (for Numba submissions)",
        "~250 MB download, ~700 MB on disk",
    )
}

/// Install `pins` into `dest` (staged, then renamed into place) with a stamp naming them
/// ([`toolchain::PINS_STAMP`]), so that a cache made with other pins is installed anew.
pub fn pins_into(dest: &Path, pins: &[&str], what: &str, size: &str) -> Result<(), String> {
    let tag = dest
        .file_name()
        .map_or_else(|| "pins".into(), |n| n.to_string_lossy().into_owned());
    let staging = staging_for(dest, &tag)?;
    let r = pip_into(&staging, pins, what, size, dest)
        .and_then(|()| {
            let stamp = staging.join(toolchain::PINS_STAMP);
            std::fs::write(&stamp, pins.join(" ") + "\n")
                .map_err(|e| format!("cannot write the pins' stamp: {e}"))?;
            add_mode(&stamp, 0o444);
            Ok(())
        })
        .and_then(|()| replace_dir(&staging, dest));
    let _ = std::fs::remove_dir_all(&staging);
    r
}

/// The Numba toolchain, installed from PyPI into the cache first if it is missing (one time,
/// ~700 MB, mostly NVRTC, NVVM and LLVM). Concurrent installs each use their own staging dir; the
/// first to finish is renamed into place. A failed install is not retried for every
/// submission of a cohort: the first answer stands for the whole run.
pub fn ensure_numba() -> Result<super::toolchain::NumbaToolchain, String> {
    static ONCE: std::sync::Mutex<Option<Result<super::toolchain::NumbaToolchain, String>>> =
        std::sync::Mutex::new(None);
    let mut once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(r) = once.as_ref() {
        return r.clone();
    }
    let r = install_numba();
    *once = Some(r.clone());
    r
}

fn install_numba() -> Result<super::toolchain::NumbaToolchain, String> {
    let dir = super::toolchain::numba_dir();
    if !super::toolchain::numba_installed(&dir) {
        super::toolchain::python()?;
        numba_into(&dir)?;
        // With it, the registers of Numba's kernels are ptxas's without a GPU; without it,
        // they are said to be unknown and grading goes on.
        if let Err(e) = ensure_nvjitlink() {
            eprintln!(
                "cugrade: {e}\n(without nvJitLink the registers of Numba kernels are reported \
                 as unknown; `cugrade doctor --install` tries again)"
            );
        }
    }
    super::toolchain::numba()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_into_keeps_what_is_there_and_adds_what_is_not() {
        let d = tempfile::tempdir().unwrap();
        let staging = d.path().join("staging");
        let root = d.path().join("root");
        std::fs::create_dir_all(staging.join("nvidia/cu13/lib")).unwrap();
        std::fs::write(staging.join("nvidia/cu13/lib/libnvrtc.so.13"), "new").unwrap();
        // The cache already has `nvidia/` (from another wheel) but no cu13.
        std::fs::create_dir_all(root.join("nvidia/other")).unwrap();
        move_into(&staging, &root, Path::new("nvidia/cu13/lib")).unwrap();
        assert!(root.join("nvidia/other").is_dir());
        assert_eq!(
            std::fs::read_to_string(root.join("nvidia/cu13/lib/libnvrtc.so.13")).unwrap(),
            "new"
        );
        // Already complete: nothing moves, nothing fails.
        std::fs::create_dir_all(staging.join("nvidia/cu13/lib")).unwrap();
        move_into(&staging, &root, Path::new("nvidia/cu13/lib")).unwrap();
    }

    #[test]
    fn an_install_is_readable_by_everyone_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("staging");
        std::fs::create_dir_all(root.join("nvidia/cu13/lib")).unwrap();
        let lib = root.join("nvidia/cu13/lib/libnvrtc.so.13");
        let header = root.join("nvidia/cu13/header.h");
        std::fs::write(&lib, "elf").unwrap();
        std::fs::write(&header, "//").unwrap();
        // What pip writes under `umask 077`.
        set(&lib, 0o700);
        set(&header, 0o600);
        for p in ["nvidia/cu13/lib", "nvidia/cu13", "nvidia", ""] {
            set(&root.join(p), 0o700);
        }
        open_to_all(&root);
        assert_eq!(mode(&lib), 0o755);
        assert_eq!(mode(&header), 0o644);
        for p in ["nvidia/cu13/lib", "nvidia/cu13", "nvidia", ""] {
            assert_eq!(mode(&root.join(p)), 0o755, "{p}");
        }
        // The cache folder that holds the installs too.
        let cache = d.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        set(&cache, 0o700);
        staging_for(&cache.join("headers"), "headers").unwrap();
        assert_eq!(mode(&cache), 0o755);
    }

    #[test]
    fn a_missing_python_or_pip_is_a_clear_message() {
        let e = pip_available("/nonexistent/python3".as_ref(), "NVRTC").unwrap_err();
        assert!(
            e.contains("was not found") && e.contains("python3-pip"),
            "{e}"
        );
        // `false` runs and fails: as a Python without pip would.
        let e = pip_available("false".as_ref(), "NVRTC").unwrap_err();
        assert!(
            e.contains("does not work") && e.contains("ensurepip"),
            "{e}"
        );
    }
}
