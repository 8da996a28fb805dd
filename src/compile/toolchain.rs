//! Where the compilers and their side files live: NVRTC, CUDA's own headers for it, and the
//! Numba toolchain for `.py` submissions. All are NVIDIA's (and Numba's) wheels from PyPI,
//! installed into cugrade's cache (`$CUGRADE_NVRTC_CACHE`, else `$XDG_CACHE_HOME/cugrade-nvrtc`,
//! else `~/.cache/cugrade-nvrtc`) on first use ([`super::install`]), in the layout
//! `ci/with-nvrtc` uses: NVIDIA's licence allows downloading them, not committing them.
//! Workers get these directories read-only; host system headers (`/usr/include`) are never on
//! NVRTC's search path.

use crate::worker::process::Process;
use std::path::{Path, PathBuf};

/// NVRTC itself, when the system has none (the same pin as `ci/with-nvrtc`).
pub const NVRTC_WHEEL: &str = "nvidia-cuda-nvrtc==13.0.88";

/// CUDA's headers: `cuda_fp16.h`, `cuda_bf16.h`, `cooperative_groups.h`, ... The versions
/// match NVRTC 13.0.88 (CCCL has no 13.0.88 wheel; 13.0.85 is the one CUDA 13.0 shipped).
pub const HEADER_WHEELS: &[&str] = &["nvidia-cuda-runtime==13.0.88", "nvidia-cuda-cccl==13.0.85"];

/// Numba's CUDA target and NVVM, pinned to CUDA 13.0 so that the PTX it emits (ISA 9.0) loads
/// on a driver-580 machine; newer NVVM wheels emit PTX such a driver rejects. NVVM comes from
/// its own wheel (what `nvidia-cuda-nvcc` would pull in, without nvcc's 37 MB); numba-cuda
/// also loads the CUDA runtime and NVRTC while it compiles. NumPy stays below 2.5: numba-cuda
/// 0.30.4 registers `np.row_stack`, which NumPy 2.5 removed, so with 2.5 (what pip picks for
/// Python 3.12+) every kernel fails to compile.
pub const NUMBA_WHEELS: &[&str] = &[
    "numba-cuda==0.30.4",
    "numpy>=1.22,<2.5",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.88",
    "nvidia-cuda-nvrtc==13.0.88",
];

/// cugrade's cache directory.
pub fn cache_root() -> PathBuf {
    if let Some(c) = std::env::var_os("CUGRADE_NVRTC_CACHE").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| Path::new(x).is_absolute()) {
        return PathBuf::from(x).join("cugrade-nvrtc");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache/cugrade-nvrtc")
}

/// Where the NVRTC wheel puts `libnvrtc.so.13` (and its builtins) in the cache.
pub fn nvrtc_cache_lib_dir() -> PathBuf {
    cache_root().join("nvidia/cu13/lib")
}

/// Where `ci/with-nvrtc` (or `pip install --target`) puts the header wheels.
pub fn headers_dir() -> PathBuf {
    cache_root().join("headers")
}

/// Where the Numba wheels go.
pub fn numba_dir() -> PathBuf {
    cache_root().join("numba")
}

/// NVRTC's include directories for CUDA's own headers, best first: `$CUGRADE_CUDA_INCLUDE`
/// (a `:`-separated list), the cache's wheels, then a CUDA 13 toolkit's `include` (NVIDIA's
/// headers only: `include/cccl` holds CCCL since CUDA 13). Empty when none is installed.
pub fn cuda_include_dirs() -> Vec<PathBuf> {
    if let Some(list) = std::env::var_os("CUGRADE_CUDA_INCLUDE").filter(|l| !l.is_empty()) {
        return std::env::split_paths(&list)
            .filter(|p| p.is_dir())
            .collect();
    }
    let roots = [
        headers_dir().join("nvidia/cu13/include"),
        PathBuf::from("/usr/local/cuda/include"),
    ];
    for root in roots {
        if root.join("cooperative_groups.h").is_file() {
            let mut dirs = vec![root.clone()];
            if root.join("cccl/cub").is_dir() {
                dirs.push(root.join("cccl"));
            }
            return dirs;
        }
    }
    Vec::new()
}

/// CUDA's own headers as a submission names them: the top-level files of the
/// `nvidia-cuda-runtime` wheel's `include/` and CCCL's folders. A failed `#include` of one of
/// them on a machine that lacks it is the machine's fault, not the student's.
const CUDA_HEADER_DIRS: &[&str] = &["cooperative_groups", "cub", "thrust", "cuda", "nv", "crt"];
#[rustfmt::skip]
const CUDA_HEADER_FILES: &[&str] = &[
    "builtin_types.h", "channel_descriptor.h", "common_functions.h", "cooperative_groups.h",
    "cuComplex.h", "cuda.h", "cudaEGL.h", "cudaEGLTypedefs.h", "cudaGL.h", "cudaGLTypedefs.h",
    "cudaProfilerTypedefs.h", "cudaTypedefs.h", "cudaVDPAU.h", "cudaVDPAUTypedefs.h",
    "cuda_awbarrier.h", "cuda_awbarrier_helpers.h", "cuda_awbarrier_primitives.h",
    "cuda_bf16.h", "cuda_bf16.hpp", "cuda_device_runtime_api.h", "cuda_egl_interop.h",
    "cuda_fp16.h", "cuda_fp16.hpp", "cuda_fp4.h", "cuda_fp4.hpp", "cuda_fp6.h", "cuda_fp6.hpp",
    "cuda_fp8.h", "cuda_fp8.hpp", "cuda_gl_interop.h", "cuda_occupancy.h", "cuda_pipeline.h",
    "cuda_pipeline_helpers.h", "cuda_pipeline_primitives.h", "cuda_runtime.h",
    "cuda_runtime_api.h", "cuda_vdpau_interop.h", "cudart_platform.h",
    "device_atomic_functions.h", "device_atomic_functions.hpp", "device_double_functions.h",
    "device_functions.h", "device_launch_parameters.h", "device_types.h", "driver_functions.h",
    "driver_types.h", "host_config.h", "host_defines.h", "library_types.h", "math_constants.h",
    "math_functions.h", "mma.h", "sm_20_atomic_functions.h", "sm_20_atomic_functions.hpp",
    "sm_20_intrinsics.h", "sm_20_intrinsics.hpp", "sm_30_intrinsics.h", "sm_30_intrinsics.hpp",
    "sm_32_atomic_functions.h", "sm_32_atomic_functions.hpp", "sm_32_intrinsics.h",
    "sm_32_intrinsics.hpp", "sm_35_atomic_functions.h", "sm_35_intrinsics.h",
    "sm_60_atomic_functions.h", "sm_60_atomic_functions.hpp", "sm_61_intrinsics.h",
    "sm_61_intrinsics.hpp", "surface_indirect_functions.h", "surface_types.h",
    "texture_indirect_functions.h", "texture_types.h", "vector_functions.h",
    "vector_functions.hpp", "vector_types.h",
];

/// Whether `name` (as written in `#include <name>`) is one of CUDA's own headers.
pub fn is_cuda_header(name: &str) -> bool {
    let name = name.trim_start_matches("./");
    match name.split_once('/') {
        Some((dir, _)) => CUDA_HEADER_DIRS.contains(&dir),
        None => CUDA_HEADER_FILES.contains(&name),
    }
}

/// A CUDA header an NVRTC log could not open while `dirs` (the include directories the compile
/// had) lack it: the grading machine's fault. `None` when every header the log names is there,
/// or is not CUDA's (a student's typo is the student's).
pub fn missing_cuda_header(log: &str, dirs: &[PathBuf]) -> Option<String> {
    // NVRTC says "could not open" without include directories, "cannot open" with them.
    let re = regex::Regex::new(r#"(?:could not|cannot) open source file "([^"\n]+)""#)
        .expect("static regex");
    re.captures_iter(log)
        .map(|c| c[1].to_string())
        .find(|h| is_cuda_header(h) && !dirs.iter().any(|d| d.join(h).exists()))
}

/// What `cugrade doctor` says about the headers.
pub fn describe_headers() -> (bool, String) {
    let dirs = cuda_include_dirs();
    let has = |f: &str| dirs.iter().any(|d| d.join(f).exists());
    let wanted = [
        "cooperative_groups.h",
        "cuda_fp16.h",
        "cuda_bf16.h",
        "cub/cub.cuh",
        "cuda/std/cstdint",
    ];
    let missing: Vec<&str> = wanted.iter().copied().filter(|f| !has(f)).collect();
    let fix = format!(
        "fix: `cugrade doctor --install` (or `python3 -m pip install --target {} {}`)",
        headers_dir().display(),
        HEADER_WHEELS.join(" ")
    );
    if dirs.is_empty() {
        (
            false,
            format!("CUDA headers (cooperative_groups.h, cuda_fp16.h, CCCL): not found; {fix}"),
        )
    } else if missing.is_empty() {
        (
            true,
            format!(
                "CUDA headers: {} (cooperative_groups, fp16, bf16, CCCL)",
                dirs[0].display()
            ),
        )
    } else {
        (
            false,
            format!(
                "CUDA headers in {}, but without {}; {fix}",
                dirs[0].display(),
                missing.join(", ")
            ),
        )
    }
}

/// A Python with Numba's CUDA target: what the compile worker runs, and what it may read.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NumbaToolchain {
    /// The interpreter (resolved, no links).
    pub python: PathBuf,
    /// The wheels' directory (a site dir: its `.pth` files matter).
    pub site: PathBuf,
    /// `libnvvm.so.4` and the CUDA runtime the wheels brought.
    pub lib_dir: PathBuf,
    /// Everything the worker must read: the interpreter, its standard library, and the wheels.
    pub read_dirs: Vec<PathBuf>,
}

/// The file in the Numba directory that names the pins it was installed with: a cache left
/// by an older cugrade (other pins) is installed anew rather than trusted.
pub const PINS_STAMP: &str = ".cugrade-pins";

/// The stamp's content for the current pins.
pub fn pins_stamp() -> String {
    NUMBA_WHEELS.join(" ") + "\n"
}

fn numba_present(dir: &Path) -> bool {
    dir.join("numba_cuda").is_dir() && dir.join("nvidia/cu13/lib/libnvvm.so.4").is_file()
}

pub(super) fn numba_installed(dir: &Path) -> bool {
    numba_present(dir)
        && std::fs::read_to_string(dir.join(PINS_STAMP)).is_ok_and(|s| s == pins_stamp())
}

/// The interpreter and what the worker must read to run it (CuPy submissions need no wheels).
pub fn python_interpreter() -> Result<(PathBuf, Vec<PathBuf>), String> {
    python()
}

/// The interpreter and its prefixes: `python3` from `$CUGRADE_PYTHON` or `PATH`. The one
/// found on `PATH` is remembered in cugrade's cache (`python.json`) while it exists: asking a
/// pyenv shim took half a second of every Python check, and the wheels in the cache were
/// installed for that interpreter anyway.
pub(super) fn python() -> Result<(PathBuf, Vec<PathBuf>), String> {
    if let Some(exe) = std::env::var_os("CUGRADE_PYTHON").filter(|p| !p.is_empty()) {
        return ask_python(&exe);
    }
    let remembered = cache_root().join(PYTHON_FILE);
    let known: Option<(PathBuf, Vec<PathBuf>)> = std::fs::read(&remembered)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some((python, read)) = known
        && python.is_file()
        && read.iter().all(|p| p.exists())
    {
        return Ok((python, read));
    }
    let found = ask_python(std::ffi::OsStr::new("python3"))?;
    if let Ok(text) = serde_json::to_vec(&found) {
        let _ = std::fs::create_dir_all(cache_root());
        let _ = std::fs::write(&remembered, text);
    }
    Ok(found)
}

/// Where [`python`] remembers the interpreter `python3` was.
const PYTHON_FILE: &str = "python.json";

/// Run `exe` to learn its real path, its version and its library folders.
fn ask_python(exe: &std::ffi::OsStr) -> Result<(PathBuf, Vec<PathBuf>), String> {
    let out = Process::new(exe)
        .args([
            "-I",
            "-c",
            "import os,sys,sysconfig as c;p=c.get_paths();print(os.path.realpath(sys.executable));print(sys.version_info>=(3,10));print(p['stdlib']);print(p['platstdlib']);print(c.get_config_var('LIBDIR') or '')",
        ])
        .capture()
        .run()
        .map_err(|e| {
            format!(
                "Python submissions (Numba, CuPy) need Python 3.10+ (`{}`: {e}); fix: install python3",
                Path::new(exe).display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    if !out.status.success() || lines.len() < 4 {
        return Err(format!(
            "`{}` did not run: {}",
            Path::new(exe).display(),
            String::from_utf8_lossy(&out.stderr.bytes).trim()
        ));
    }
    if lines[1] != "True" {
        return Err("Python submissions (Numba, CuPy) need Python 3.10 or newer".into());
    }
    // The interpreter, its standard library and `libpython`'s dir: not the whole prefix,
    // which for a system Python is all of /usr.
    let python = PathBuf::from(lines[0]);
    let mut read = vec![python.clone()];
    read.extend(
        lines[2..]
            .iter()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from),
    );
    read.sort();
    read.dedup();
    Ok((python, read))
}

/// The Numba toolchain if it is installed (nothing is downloaded).
pub fn numba() -> Result<NumbaToolchain, String> {
    numba_in(numba_dir())
}

fn numba_in(dir: PathBuf) -> Result<NumbaToolchain, String> {
    if !numba_installed(&dir) {
        let what = if numba_present(&dir) {
            format!(
                "Numba in {} was installed with other pins than this cugrade's",
                dir.display()
            )
        } else {
            format!(
                "Numba (numba-cuda 0.30.4 with NVVM) is not installed in {}",
                dir.display()
            )
        };
        return Err(format!(
            "{what}; cugrade installs it from PyPI (~700 MB) the first time it grades a Numba \
             kernel; to install it now: `cugrade doctor --install` in a folder with Numba \
             kernels (or with `--rubric` naming a rubric that accepts them)"
        ));
    }
    let (python, mut read_dirs) = python()?;
    read_dirs.push(dir.clone());
    Ok(NumbaToolchain {
        python,
        lib_dir: dir.join("nvidia/cu13/lib"),
        site: dir,
        read_dirs,
    })
}

/// Make a tree of cugrade's cache readable to every user: directories `a+rx`, files `a+r`
/// (and `a+x` where someone may execute them), symlinks left alone and never followed. The
/// cache holds public wheels only, and a grader started as root runs its workers as uids of
/// their own, which must read it (docs/security.md). Returns how many entries it changed.
pub fn share_tree(root: &Path) -> std::io::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    let mut changed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p)?;
        let mode = meta.permissions().mode() & 0o7777;
        let want = if meta.is_dir() {
            for e in std::fs::read_dir(&p)?.flatten() {
                stack.push(e.path());
            }
            mode | 0o555
        } else if meta.is_file() {
            mode | 0o444 | if mode & 0o111 != 0 { 0o111 } else { 0 }
        } else {
            continue;
        };
        if want != mode {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(want))?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// The parts of cugrade's cache that workers read, where present: the Numba wheels (with the
/// pins stamp cugrade writes), CUDA's header wheels and the NVRTC wheel. Only these: a cache
/// path set to a folder that also holds other files is not opened up beyond them.
fn cache_parts() -> Vec<PathBuf> {
    let root = cache_root();
    let mut parts = vec![];
    if numba_present(&numba_dir()) && numba_dir().join(PINS_STAMP).is_file() {
        parts.push(numba_dir());
    }
    if headers_dir().join("nvidia/cu13/include").is_dir() {
        parts.push(headers_dir());
    }
    if root.join("nvidia/cu13/lib").is_dir() {
        parts.push(root.join("nvidia"));
    }
    parts
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

/// The file in a part of the cache that says [`share_tree`] went over it.
const SHARED_STAMP: &str = ".cugrade-shared";

/// When cugrade is root, open the parts of its own cache that workers read to every user (see
/// [`share_tree`]): a cache unpacked or installed with a restrictive umask (`pip` as root with
/// umask 077, a tar whose top directory was `0700`) would otherwise be unreadable to every
/// worker, and every Numba submission would fail. Once per process; returns a note for each
/// part it changed (for stderr and `doctor`), or why it could not.
pub fn share_with_workers() -> Vec<String> {
    static ONCE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return vec![];
        }
        let mut notes = vec![];
        for part in cache_parts() {
            // Walking a part (CCCL's and Numba's thousands of files) took about a second of
            // every check: once done, a stamp says so until the part changes (an install
            // replaces the whole folder, stamp and all).
            let stamp = part.join(SHARED_STAMP);
            let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
            let open = std::fs::metadata(&part).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o555 == 0o555
            });
            if open && matches!((mtime(&stamp), mtime(&part)), (Some(s), Some(d)) if s >= d) {
                continue;
            }
            let shared = share_tree(&part);
            if shared.is_ok() {
                let _ =
                    std::fs::write(&stamp, "cugrade made this folder readable to its workers\n");
            }
            match shared {
                Ok(0) => {}
                Ok(n) => notes.push(format!(
                    "made {n} entries of cugrade's cache {} readable to the workers' own uids \
                     (it holds public wheels only)",
                    part.display()
                )),
                Err(e) => notes.push(format!(
                    "could not make cugrade's cache {} readable to the workers' own uids: {e}",
                    part.display()
                )),
            }
        }
        notes
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_tree_opens_dirs_and_files_and_leaves_links_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("numba");
        std::fs::create_dir_all(top.join("pkg")).unwrap();
        std::fs::write(top.join("pkg/mod.py"), "").unwrap();
        std::fs::write(top.join("pkg/tool"), "").unwrap();
        let outside = d.path().join("secret");
        std::fs::write(&outside, "").unwrap();
        std::os::unix::fs::symlink(&outside, top.join("pkg/link")).unwrap();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        mode(&top.join("pkg/mod.py"), 0o600);
        mode(&top.join("pkg/tool"), 0o700);
        mode(&top.join("pkg"), 0o700);
        mode(&top, 0o700);
        mode(&outside, 0o600);
        assert_eq!(share_tree(&top).unwrap(), 4);
        let got = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(got(&top), 0o755);
        assert_eq!(got(&top.join("pkg")), 0o755);
        assert_eq!(got(&top.join("pkg/mod.py")), 0o644);
        assert_eq!(got(&top.join("pkg/tool")), 0o755);
        // The link's target is not the cache's: untouched.
        assert_eq!(got(&outside), 0o600);
        assert_eq!(share_tree(&top).unwrap(), 0);
    }

    #[test]
    fn a_numba_install_with_other_pins_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let numba = dir.path().join("numba");
        std::fs::create_dir_all(numba.join("numba_cuda")).unwrap();
        std::fs::create_dir_all(numba.join("nvidia/cu13/lib")).unwrap();
        std::fs::write(numba.join("nvidia/cu13/lib/libnvvm.so.4"), b"").unwrap();
        let err = numba_in(numba.clone()).unwrap_err();
        assert!(err.contains("other pins"), "{err}");
        assert!(err.contains("doctor --install"), "{err}");
        std::fs::write(numba.join(PINS_STAMP), "numba-cuda==0.30.4\n").unwrap();
        assert!(numba_in(numba.clone()).unwrap_err().contains("other pins"));
        std::fs::write(numba.join(PINS_STAMP), pins_stamp()).unwrap();
        // Installed with these pins: what remains is finding a Python.
        if let Err(e) = numba_in(numba) {
            assert!(!e.contains("pins"), "{e}");
        }
        let empty = numba_in(dir.path().join("none")).unwrap_err();
        assert!(empty.contains("is not installed"), "{empty}");
    }

    #[test]
    fn ci_stamps_numba_with_the_same_pins_in_the_same_order() {
        let script = include_str!("../../ci/with-nvrtc");
        let start = script
            .find("numba_pins=(")
            .expect("ci/with-nvrtc has numba_pins");
        let body = &script[start..start + script[start..].find(')').unwrap()];
        let pins: Vec<&str> = body.split('"').skip(1).step_by(2).collect();
        assert_eq!(pins, NUMBA_WHEELS);
    }

    #[test]
    fn nvjitlink_is_pinned_to_the_cuda_of_nvrtc_and_ci_installs_the_same() {
        let version = |wheel: &str| wheel.split("==").nth(1).unwrap_or_default().to_string();
        let nvjitlink = super::super::jitlink::WHEEL;
        assert!(
            nvjitlink.starts_with("nvidia-nvjitlink==13.0."),
            "{nvjitlink}"
        );
        assert_eq!(version(nvjitlink), version(NVRTC_WHEEL));
        let script = include_str!("../../ci/with-nvrtc");
        assert!(
            script.contains(&format!("\"{nvjitlink}\"")),
            "ci/with-nvrtc installs another nvJitLink than {nvjitlink}"
        );
    }

    #[test]
    fn the_gpu_script_stamps_the_same_pins() {
        let script = include_str!("../../ci/gpu-numba.sh");
        let stamp = format!("pins=\"{}\"", pins_stamp().trim_end());
        assert!(script.contains(&stamp), "ci/gpu-numba.sh lacks {stamp}");
    }

    #[test]
    fn cuda_headers_are_known_by_name() {
        for h in [
            "cooperative_groups.h",
            "cub/cub.cuh",
            "cuda/std/cstdint",
            "cuda_fp16.h",
        ] {
            assert!(is_cuda_header(h), "{h}");
        }
        for h in ["stdio.h", "mine.cuh", "common.h", "../cuda_fp16.h"] {
            assert!(!is_cuda_header(h), "{h}");
        }
        let log = "k.cu(1): catastrophic error: could not open source file \"cooperative_groups.h\" (no directories in search list)\n";
        assert_eq!(
            missing_cuda_header(log, &[]).as_deref(),
            Some("cooperative_groups.h")
        );
        let with_dirs = "k.cu(1): catastrophic error: cannot open source file \"cuda_fp16.h\"\n";
        assert_eq!(
            missing_cuda_header(with_dirs, &[]).as_deref(),
            Some("cuda_fp16.h")
        );
        let typo = "k.cu(1): catastrophic error: could not open source file \"mine.cuh\"\n";
        assert_eq!(missing_cuda_header(typo, &[]), None);
        // With the headers there, a failed include is not the machine's.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("cooperative_groups.h"), "").unwrap();
        assert_eq!(missing_cuda_header(log, &[d.path().to_path_buf()]), None);
        // The list covers the wheel's top level, where the wheel is installed.
        let include = headers_dir().join("nvidia/cu13/include");
        if let Ok(entries) = std::fs::read_dir(&include) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name == "cccl" {
                    continue;
                }
                let probe = if e.path().is_dir() {
                    format!("{name}/x.h")
                } else {
                    name.clone()
                };
                assert!(is_cuda_header(&probe), "{name} is not in CUDA_HEADER_*");
            }
        }
    }

    #[test]
    fn ci_installs_the_same_pins() {
        let script = include_str!("../../ci/with-nvrtc");
        for pin in HEADER_WHEELS
            .iter()
            .chain(NUMBA_WHEELS)
            .chain([&NVRTC_WHEEL])
        {
            assert!(script.contains(pin), "ci/with-nvrtc lacks {pin}");
        }
    }
}
