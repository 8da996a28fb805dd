//! The process NVIDIA's tools run: launches of graded kernels under Nsight Compute
//! (`check --profile`, metric checks: one launch) or compute-sanitizer (every milestone's
//! kernel on its smallest cases, in one process per tool).
//!
//! Nsight Compute follows the process it starts (its injection library is loaded before `main`
//! and talks to `ncu` over a local socket), so the kernel runs in a process ncu starts itself,
//! not in a worker behind cugrade's parent, which would scrub the injection's environment and
//! descriptors. The job (the module, the launch and its input buffers) was prepared by the
//! grading parent, exactly as a correctness run sends it to a worker; this process reads it,
//! starts CUDA, confines itself as far as a process with the tool's threads can be
//! (`sandbox::apply_after_init`), then loads and launches. Only cugrade's host code runs here;
//! the student's code is the PTX.

use super::child::{make_backend, run};
use super::protocol::{RunSpec, read_frame_within, write_frame};
use crate::backend::BackendKind;
use crate::sandbox::{self, Policy};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What the profiled process runs: launches in order, each of one of the job's modules.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub device: usize,
    /// How many modules the job file holds (its first blobs).
    pub modules: usize,
    pub launches: Vec<Launch>,
    /// Directories the process may read besides the system's (NVRTC's, ncu's own).
    pub extra_read: Vec<std::path::PathBuf>,
    /// Where to note each launch as it ends (`<index> ok` or `<index> failed: <why>`, one
    /// line each), so that a tool that stops the process (a fault, a deadline) leaves a record
    /// of which launches ran; in the process's TMPDIR.
    #[serde(default)]
    pub progress: Option<std::path::PathBuf>,
}

/// One launch of a job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    /// Index of its module among the job's.
    pub module: usize,
    pub spec: RunSpec,
}

/// Write `job` with its modules and each launch's input buffers to `path`.
pub fn write_job(
    path: &Path,
    job: &Job,
    modules: &[&str],
    allocations: &[Vec<Vec<u8>>],
) -> std::io::Result<()> {
    let mut blobs: Vec<&[u8]> = modules.iter().map(|m| m.as_bytes()).collect();
    for a in allocations {
        blobs.extend(a.iter().map(Vec::as_slice));
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    write_frame(&mut f, job, &blobs)?;
    std::io::Write::flush(&mut f)
}

/// What [`read_job`] reads: the job, its modules, each launch's input buffers.
pub type ReadJob = (Job, Vec<String>, Vec<Vec<Vec<u8>>>);

/// Read what [`write_job`] wrote.
pub fn read_job(path: &Path) -> std::io::Result<ReadJob> {
    let bad = |why: String| std::io::Error::other(why);
    let f = std::fs::File::open(path)?;
    // Written by the parent: every launch of a batch of students (modules and buffers).
    let (job, blobs) = read_frame_within::<Job>(
        &mut std::io::BufReader::new(f),
        usize::MAX,
        64 << 20,
        1 << 20,
    )?
    .ok_or_else(|| bad("empty job file".into()))?;
    let wanted = job.modules
        + job
            .launches
            .iter()
            .map(|l| l.spec.buffers.len())
            .sum::<usize>();
    if job.modules == 0 || blobs.len() != wanted {
        return Err(bad(format!(
            "the profile job has {} blobs for {} modules and {} launches' buffers",
            blobs.len(),
            job.modules,
            job.launches.len()
        )));
    }
    if let Some(l) = job.launches.iter().find(|l| l.module >= job.modules) {
        return Err(bad(format!(
            "a launch of `{}` names no module",
            l.spec.kernel
        )));
    }
    let mut blobs = blobs.into_iter();
    let modules = (&mut blobs)
        .take(job.modules)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    let buffers = job
        .launches
        .iter()
        .map(|l| (&mut blobs).take(l.spec.buffers.len()).collect())
        .collect();
    Ok((job, modules, buffers))
}

/// `cugrade __profile-kernel JOB`: 0 when every launch ran, 3 otherwise (the reason on
/// stderr). The first launch that fails ends the process: a fault leaves the context unusable,
/// and the launches after it would only fail too (the caller runs them again in a fresh
/// process, from the progress file).
pub fn main(job_path: &str) -> i32 {
    let (job, modules, buffers) = match read_job(Path::new(job_path)) {
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
    let mut progress = job.progress.as_ref().and_then(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()
    });
    let mut note = |line: String| {
        if let Some(f) = progress.as_mut() {
            let _ = std::io::Write::write_all(f, format!("{line}\n").as_bytes());
        }
    };
    let mut loaded = None;
    for (i, (launch, blobs)) in job.launches.iter().zip(buffers).enumerate() {
        if loaded != Some(launch.module) {
            if let Err(e) = backend.load_module(&modules[launch.module]) {
                eprintln!("cugrade: the module does not load: {e}");
                note(format!("{i} failed: the module does not load: {e}"));
                return 3;
            }
            loaded = Some(launch.module);
        }
        match run(backend.as_mut(), &launch.spec, blobs) {
            Ok(_) => note(format!("{i} ok")),
            Err(boxed) => {
                eprintln!("cugrade: the profiled launch failed: {}", boxed.0);
                note(format!("{i} failed: {}", boxed.0));
                return 3;
            }
        }
    }
    0
}

/// The launches a progress file records as ended (`ok` or `failed`), by index.
pub fn ended(progress: &str) -> std::collections::BTreeMap<usize, Result<(), String>> {
    progress
        .lines()
        .filter_map(|l| {
            let (i, rest) = l.split_once(' ')?;
            let i = i.parse().ok()?;
            Some((
                i,
                match rest.strip_prefix("failed: ") {
                    Some(why) => Err(why.to_string()),
                    None => Ok(()),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rubric;

    #[test]
    fn a_job_reads_back_as_written() {
        let rubric = rubric::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/rubrics/reduction.yaml"
        )))
        .unwrap();
        let plan = rubric.plan(&|_, l| l.clone());
        let m = &plan.milestones[0];
        let case = &m.cases[1];
        let inv = crate::inputs::generate(case.args().unwrap(), 5).unwrap();
        let spec = RunSpec {
            kernel: m.kernel.clone(),
            dims: case.launch.clone().unwrap(),
            then: vec![],
            args: inv.args.clone(),
            buffers: inv.specs(),
            symbols: inv.symbols.clone(),
            deadline_ms: 1000,
        };
        let job = Job {
            device: 1,
            modules: 1,
            launches: vec![Launch {
                module: 0,
                spec: spec.clone(),
            }],
            extra_read: vec!["/opt/nvidia/nsight-compute".into()],
            progress: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.bin");
        write_job(&path, &job, &[".version 9.0"], &[inv.allocations()]).unwrap();
        let (back, modules, blobs) = read_job(&path).unwrap();
        assert_eq!(back.launches[0].spec, spec);
        assert_eq!((back.device, back.extra_read), (1, job.extra_read));
        assert_eq!(modules, vec![".version 9.0".to_string()]);
        assert_eq!(blobs, vec![inv.allocations()]);
        // A truncated job is refused with a reason, never run.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(read_job(&path).is_err());
        // A batch's job holds more blobs than a worker's frame may (several students).
        let many: Vec<Launch> = (0..40)
            .map(|_| Launch {
                module: 0,
                spec: spec.clone(),
            })
            .collect();
        let job = Job {
            launches: many,
            extra_read: vec![],
            ..job
        };
        let allocations = vec![inv.allocations(); 40];
        write_job(&path, &job, &[".version 9.0"], &allocations).unwrap();
        let (back, _, blobs) = read_job(&path).unwrap();
        assert_eq!((back.launches.len(), blobs.len()), (40, 40));
        // The progress file's lines, as the process writes them.
        let ended = ended("0 ok\n1 failed: an illegal address\n");
        assert_eq!(ended.get(&0), Some(&Ok(())));
        assert_eq!(ended.get(&1), Some(&Err("an illegal address".to_string())));
        assert_eq!(ended.get(&2), None);
    }
}
