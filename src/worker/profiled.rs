//! The process `check --profile` runs under Nsight Compute: one launch of a graded kernel.
//!
//! Nsight Compute follows the process it starts (its injection library is loaded before `main`
//! and talks to `ncu` over a local socket), so the kernel runs in a process ncu starts itself,
//! not in a worker behind cugrade's parent, which would scrub the injection's environment and
//! descriptors. The job (the module, the launch and its input buffers) was prepared by the
//! grading parent, exactly as a correctness run sends it to a worker; this process reads it,
//! starts CUDA, confines itself as far as a process with ncu's threads can be
//! (`sandbox::apply_after_init`), then loads and launches. Only cugrade's host code runs here;
//! the student's code is the PTX.

use super::child::{make_backend, run};
use super::protocol::{RunSpec, read_frame, write_frame};
use crate::backend::BackendKind;
use crate::sandbox::{self, Policy};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What the profiled process runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub device: usize,
    pub spec: RunSpec,
    /// Directories the process may read besides the system's (NVRTC's, ncu's own).
    pub extra_read: Vec<std::path::PathBuf>,
}

/// Write `job` with its module and input buffers to `path`.
pub fn write_job(
    path: &Path,
    job: &Job,
    ptx: &str,
    allocations: &[Vec<u8>],
) -> std::io::Result<()> {
    let mut blobs: Vec<&[u8]> = vec![ptx.as_bytes()];
    blobs.extend(allocations.iter().map(Vec::as_slice));
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    write_frame(&mut f, job, &blobs)?;
    std::io::Write::flush(&mut f)
}

/// Read what [`write_job`] wrote: the job, the module, the input buffers.
pub fn read_job(path: &Path) -> std::io::Result<(Job, String, Vec<Vec<u8>>)> {
    let f = std::fs::File::open(path)?;
    let (job, mut blobs) = read_frame::<Job>(&mut std::io::BufReader::new(f), usize::MAX)?
        .ok_or_else(|| std::io::Error::other("empty job file"))?;
    if blobs.is_empty() {
        return Err(std::io::Error::other("the profile job has no module"));
    }
    let ptx = String::from_utf8_lossy(&blobs.remove(0)).into_owned();
    if blobs.len() != job.spec.buffers.len() {
        return Err(std::io::Error::other(format!(
            "the profile job has {} buffers for {} buffer specs",
            blobs.len(),
            job.spec.buffers.len()
        )));
    }
    Ok((job, ptx, blobs))
}

/// `cugrade __profile-kernel JOB`: 0 when the kernel ran, 3 otherwise (the reason on stderr).
pub fn main(job_path: &str) -> i32 {
    let (job, ptx, blobs) = match read_job(Path::new(job_path)) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("cugrade: cannot read the profile job {job_path}: {e}");
            return 3;
        }
    };
    // CUDA first: ncu's injection attaches when the driver starts.
    let (mut backend, _) = match make_backend(BackendKind::Cuda, job.device) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cugrade: no GPU for the profile run: {e}");
            return 3;
        }
    };
    let temp = std::env::temp_dir();
    let mut policy = Policy::worker(&temp, true);
    policy.extra_read = job.extra_read.clone();
    policy.keep_ipc = true;
    let report = sandbox::apply_after_init(&policy);
    for w in report.warnings() {
        eprintln!("cugrade: profile run: {w}");
    }
    if let Err(e) = backend.load_module(&ptx) {
        eprintln!("cugrade: the module does not load: {e}");
        return 3;
    }
    match run(backend.as_mut(), &job.spec, blobs) {
        Ok(_) => 0,
        Err(boxed) => {
            eprintln!("cugrade: the profiled launch failed: {}", boxed.0);
            3
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rubric::{self, case_vars};

    #[test]
    fn a_job_reads_back_as_written() {
        let rubric = rubric::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/rubrics/reduction.yaml"
        )))
        .unwrap();
        let m = &rubric.rubric.milestones[0];
        let contract = rubric.contract(&m.contract);
        let case = rubric.cases_for(m)[1];
        let vars = case_vars(case);
        let inv = crate::inputs::generate(contract, &vars, 5).unwrap();
        let spec = RunSpec {
            kernel: m.kernel.clone(),
            dims: rubric::eval_launch(&contract.launch, &vars).unwrap(),
            args: inv.args.clone(),
            buffers: inv.specs(),
            symbols: inv.symbols.clone(),
            deadline_ms: 1000,
        };
        let job = Job {
            device: 1,
            spec: spec.clone(),
            extra_read: vec!["/opt/nvidia/nsight-compute".into()],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.bin");
        write_job(&path, &job, ".version 9.0", &inv.allocations()).unwrap();
        let (back, ptx, blobs) = read_job(&path).unwrap();
        assert_eq!(back.spec, spec);
        assert_eq!((back.device, back.extra_read), (1, job.extra_read));
        assert_eq!(ptx, ".version 9.0");
        assert_eq!(blobs, inv.allocations());
        // A truncated job is refused with a reason, never run.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_job(&path).is_err());
    }
}
