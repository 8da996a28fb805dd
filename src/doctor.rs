//! `cugrade doctor`: what this machine offers for grading, and what is missing with the fix.

use crate::backend::cuda;

/// Print the report; always exit 0 (doctor describes, it does not grade).
pub fn run() -> i32 {
    let mut lines: Vec<(bool, String)> = Vec::new();
    // Driver and GPUs.
    match cuda::device_count() {
        Ok(0) => lines.push((false, "GPU: the NVIDIA driver is installed but reports no device; grading uses the PTX emulator (no speed checks)".into())),
        Ok(n) => {
            for i in 0..n {
                match cuda::device_arch(i) {
                    Ok((name, arch)) => lines.push((true, format!("GPU {i}: {name} ({arch})"))),
                    Err(e) => lines.push((false, format!("GPU {i}: {e}"))),
                }
            }
        }
        Err(e) => lines.push((false, format!("GPU: {e}; fix: install the NVIDIA driver on a machine with a GPU. Without one, cugrade grades correctness with its PTX emulator and skips speed checks"))),
    }
    // NVRTC.
    if cuda::nvrtc_present() {
        let mut v = (0, 0);
        // SAFETY: the library is present; nvrtcVersion only writes two ints.
        let ok = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut v.0, &mut v.1) }
            == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS;
        lines.push((
            true,
            if ok {
                format!("NVRTC {}.{}", v.0, v.1)
            } else {
                "NVRTC present".into()
            },
        ));
    } else {
        lines.push((false, "NVRTC: libnvrtc.so.13 not found; fix: `python3 -m pip install --target ~/.cache/cugrade-nvrtc nvidia-cuda-nvrtc==13.0.88` and set LD_LIBRARY_PATH=~/.cache/cugrade-nvrtc/nvidia/cu13/lib".into()));
    }
    // CUDA's own headers for NVRTC, and the Numba toolchain for `.py` submissions.
    lines.push(crate::compile::toolchain::describe_headers());
    lines.push(crate::compile::toolchain::describe_numba());
    // cuBLAS (only for matmul thresholds against cuBLAS).
    // SAFETY: only tries to dlopen libcublas.
    if unsafe { cudarc::cublas::sys::is_culib_present() } {
        lines.push((
            true,
            "cuBLAS present (matmul thresholds against cuBLAS can be measured)".into(),
        ));
    } else {
        lines.push((false, "cuBLAS: libcublas not found; thresholds `against: cublas` will error. fix: install the CUDA toolkit's cuBLAS".into()));
    }
    // The GPU's own counters and sanitizers (metric checks and the sanitizer pass on
    // `--backend cuda`; `check --profile`).
    match crate::profile::find_tool("ncu") {
        Some(p) => lines.push((
            true,
            format!(
                "Nsight Compute: {} (metric checks on --backend cuda read the GPU's counters)",
                p.display()
            ),
        )),
        None => lines.push((false, "Nsight Compute (ncu) not found: on --backend cuda, metric checks are skipped and their points withheld (provisional). fix: install the CUDA toolkit's Nsight Compute and put `ncu` on PATH".into())),
    }
    match crate::profile::find_tool("compute-sanitizer") {
        Some(p) => lines.push((
            true,
            format!(
                "compute-sanitizer: {} (the sanitizer pass on --backend cuda runs it on the GPU, besides the PTX emulator's)",
                p.display()
            ),
        )),
        None => lines.push((false, "compute-sanitizer not found: on --backend cuda only the PTX emulator's sanitizers run. fix: install the CUDA toolkit's compute-sanitizer and put it on PATH".into())),
    }
    // Sandbox.
    for l in crate::sandbox::probe().layers {
        match l.state {
            crate::sandbox::LayerState::Active => {
                lines.push((true, format!("sandbox {}: available", l.name)))
            }
            crate::sandbox::LayerState::Degraded(why) => {
                lines.push((false, format!("sandbox {}: {why}", l.name)))
            }
        }
    }
    for (ok, line) in &lines {
        println!("{} {line}", if *ok { "ok  " } else { "MISS" });
    }
    crate::exit::OK
}
