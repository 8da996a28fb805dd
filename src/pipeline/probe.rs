//! `cugrade doctor`'s toolchain checks, run the way grading runs them: a test kernel compiled
//! in a sandboxed compile worker (the same uid, mount view, Landlock rules and seccomp filter
//! as a student's compile), so that doctor cannot say "ok" where grading fails.

use super::compiling::compile_all;
use super::context::Options;
use super::numba::{NumbaFailure, compile_in_worker};
use crate::backend::BackendKind;
use crate::compile::SourceFile;
use crate::compile::numba::NumbaKernel;
use crate::compile::toolchain;
use crate::rubric::convention::Signature;
use crate::worker::pool::Workers;
use std::time::Duration;

const PROBE_PY: &str = "from numba import cuda\n\n@cuda.jit\ndef probe(a):\n    a[0] = 1.0\n";

const PROBE_CU: &str = "#include <cooperative_groups.h>\n#include <cuda_fp16.h>\n\
namespace cg = cooperative_groups;\n\
extern \"C\" __global__ void probe(float* a) {\n\
    cg::thread_block b = cg::this_thread_block();\n\
    a[b.thread_rank()] = __half2float(__float2half(1.0f));\n}\n";

/// Doctor's line on Numba: installed, and a test kernel compiles in a compile worker.
pub fn numba() -> (bool, String) {
    let tool = match toolchain::numba() {
        Ok(t) => t,
        Err(e) => return (false, format!("Numba: {e}")),
    };
    let (site, python) = (tool.site.clone(), tool.python.clone());
    let file = SourceFile {
        name: "probe.py".into(),
        text: PROBE_PY.into(),
    };
    let kernel = NumbaKernel {
        name: "probe".into(),
        signatures: vec![Signature {
            text: "(float32[::1],)".into(),
            ndims: vec![1],
        }],
        params: vec![],
    };
    let wo = Workers::emulator(&[]);
    let reinstall = format!(
        "fix: remove {} and run `cugrade doctor --install` (or let cugrade install it again on the next `.py` submission)",
        site.display()
    );
    match compile_in_worker(
        tool,
        &[file],
        &[kernel],
        "sm_90",
        &wo,
        Duration::from_secs(30),
        Duration::from_secs(120),
    ) {
        Ok(o) if o.first().is_some_and(|o| o.ok) => (
            true,
            format!(
                "Numba: numba-cuda 0.30.4 with NVVM in {} (Python {}); a test kernel compiles \
                 in a sandboxed compile worker, as grading runs it",
                site.display(),
                python.display()
            ),
        ),
        Ok(o) => (
            false,
            format!(
                "Numba in {} does not compile a test kernel in a compile worker: {}; {reinstall}",
                site.display(),
                o.first().map_or("no answer", |o| o.message.as_str())
            ),
        ),
        Err(NumbaFailure::Machine(why)) => (false, format!("Numba: {}", why.replace('\n', " "))),
        Err(NumbaFailure::Toolchain(e)) => (
            false,
            format!(
                "Numba in {} does not compile a test kernel in a compile worker: {}; {reinstall}",
                site.display(),
                last_words(&e)
            ),
        ),
        Err(f) => (
            false,
            format!("Numba: the test kernel's compile worker failed: {f:?}"),
        ),
    }
}

/// Doctor's line on CUDA's headers: present, and a kernel that includes them compiles with
/// NVRTC in a compile worker.
pub fn headers() -> (bool, String) {
    let (ok, line) = toolchain::describe_headers();
    if !ok || !crate::backend::cuda::nvrtc_present() {
        return (ok, line);
    }
    let opts = Options {
        backend: BackendKind::Emu,
        device: 0,
        seed: 0,
        arch: "sm_90".into(),
        device_name: String::new(),
        gpu: None,
        baseline_cache: None,
        protected: vec![],
        keep_kernels: None,
        gpu_record: None,
        estimate_gpu: "none".into(),
        ranks: vec![],
        rank_locks: vec![],
    };
    let src = SourceFile {
        name: "probe.cu".into(),
        text: PROBE_CU.into(),
    };
    match compile_all(&[src], &[], &[], &opts, Duration::from_secs(120)) {
        Err(e) => (false, format!("CUDA headers: {}", e.0.replace('\n', " "))),
        Ok((modules, _, _)) if !modules.is_empty() => (
            true,
            format!(
                "{line}; a kernel including cooperative_groups.h and cuda_fp16.h compiles in a \
                 sandboxed compile worker"
            ),
        ),
        Ok((_, checks, summary)) => (
            false,
            format!(
                "CUDA headers: a kernel including cooperative_groups.h and cuda_fp16.h does not \
                 compile in a compile worker: {} {}",
                checks.first().map_or("", |c| c.message.as_str()),
                last_words(&summary.log)
            ),
        ),
    }
}

/// The last non-empty line of what a tool printed (Python's exception line).
fn last_words(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}
