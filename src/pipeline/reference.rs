//! The trusted side: the reference module in its own worker, its cached outputs and
//! baselines, and `validate`'s self-check of a rubric's reference kernels.

use super::compiling::compile_all;
use super::context::{Infrastructure, Options, worker_options};
use super::run::{describe_run_error, run_on};
use crate::backend::{BackendKind, LaunchDims};
use crate::compare;
use crate::compile::SourceFile;
use crate::inputs::{self, Invocation};
use crate::result::CompileSummary;
use crate::rubric::LoadedRubric;
use crate::worker::{Client, Role};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Expected allocations by (kernel, case, trial), with the reference run's seconds.
type ExpectedOutputs = HashMap<(String, String, u32), Expected>;

/// What the reference kernel produced on one trial.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    /// Whole allocations (guards included), in buffer order.
    pub(super) allocations: Vec<Vec<u8>>,
    /// The reference launch's time as its worker saw it (start to the kernel's end): what a
    /// student's launch on the same case may take is a multiple of it
    /// (`Timeouts::correctness_deadline`).
    pub(super) seconds: f64,
}

/// The trusted side: the reference module in its own worker, with caches.
pub struct Reference {
    pub(super) ptx: String,
    /// A function lab's reference file (NumPy), run in a Python worker of its own.
    pub(super) python: Option<SourceFile>,
    pub(super) worker: Option<Client>,
    /// Expected allocations by (kernel, case, trial), shared by every [`Reference::share`]d
    /// handle: a cohort computes each once, whatever its `--jobs`.
    pub(super) outputs: Arc<Mutex<ExpectedOutputs>>,
    /// CPU baselines by `calibration::key`, found or measured once per run.
    pub(super) baselines: HashMap<String, Result<crate::measure::calibration::Found, String>>,
    /// The harness kernels' PTX, compiled on first use.
    pub(super) harness: Option<Result<String, String>>,
    /// The GPU's timing-lock key (cuda backend).
    pub(super) gpu: Option<String>,
    pub(super) backend: BackendKind,
    pub(super) device: usize,
    pub(super) protected: Vec<std::path::PathBuf>,
    /// ptxas's facts of the reference kernels (registers, for the speed estimate).
    pub(super) resources: Vec<crate::result::KernelResources>,
    /// Speed-estimate profiles of reference kernels (`estimated::reference_profile`), shared
    /// like `outputs`.
    pub(super) estimates: Arc<Mutex<super::estimated::ProfileCache>>,
}

impl Reference {
    /// Compile the rubric's reference kernel file.
    pub fn compile(rubric: &LoadedRubric, opts: &Options) -> Result<Reference, Infrastructure> {
        let text = std::fs::read_to_string(&rubric.reference_path).map_err(|e| {
            Infrastructure(format!(
                "cannot read {}: {e}",
                rubric.reference_path.display()
            ))
        })?;
        let name = rubric
            .reference_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let src = SourceFile { name, text };
        if rubric.reference_path.extension().is_some_and(|e| e == "py") {
            // A function lab's NumPy reference: run by `function`, never compiled.
            return Ok(Reference::new(String::new(), Some(src), vec![], opts));
        }
        let ptx_file = rubric
            .reference_path
            .extension()
            .is_some_and(|e| e == "ptx");
        let (modules, checks, summary) = if ptx_file {
            (
                vec![(src.name.clone(), src.text.clone())],
                vec![],
                CompileSummary::default(),
            )
        } else {
            compile_all(
                std::slice::from_ref(&src),
                &[],
                &[],
                opts,
                Duration::from_secs_f64(rubric.rubric.timeouts.compile_s * 2.0),
            )?
        };
        let Some((_, ptx)) = modules.into_iter().next() else {
            let why = checks
                .iter()
                .map(|c| format!("{}\n{}", c.message, c.details.clone().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(Infrastructure(format!(
                "the reference kernel {} does not compile:\n{why}\n{}",
                rubric.reference_path.display(),
                summary.log
            )));
        };
        Ok(Reference::new(ptx, None, summary.kernels.clone(), opts))
    }

    fn new(
        ptx: String,
        python: Option<SourceFile>,
        resources: Vec<crate::result::KernelResources>,
        opts: &Options,
    ) -> Reference {
        Reference {
            ptx,
            python,
            worker: None,
            outputs: Arc::default(),
            baselines: HashMap::new(),
            harness: None,
            gpu: opts.gpu.clone(),
            backend: opts.backend,
            device: opts.device,
            protected: opts.protected.clone(),
            resources,
            estimates: Arc::default(),
        }
    }

    /// Another handle on the same compiled module and expected-output cache, with a worker of
    /// its own (started when first needed) on `device`, whose timing-lock key is `gpu`:
    /// `grade --jobs N` compiles the reference once. CPU baselines are found per handle (the
    /// cohort's baseline cache file keeps them equal).
    pub fn share(&self, device: usize, gpu: Option<String>) -> Reference {
        Reference {
            ptx: self.ptx.clone(),
            python: self.python.clone(),
            worker: None,
            outputs: Arc::clone(&self.outputs),
            baselines: HashMap::new(),
            harness: self.harness.clone(),
            gpu,
            backend: self.backend,
            device,
            protected: self.protected.clone(),
            resources: self.resources.clone(),
            estimates: Arc::clone(&self.estimates),
        }
    }

    pub(super) fn worker(&mut self) -> Result<&mut Client, Infrastructure> {
        if self.worker.is_none() {
            let mut o = worker_options(&self.protected, Role::Run, self.backend, self.device);
            o.gpu_lock = self.gpu.clone();
            let mut w = Client::spawn(&o)
                .map_err(|e| Infrastructure(format!("cannot start the reference worker: {e}")))?;
            match w.load(&self.ptx, Duration::from_secs(120)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(Infrastructure(format!(
                        "the reference module does not load: {e}"
                    )));
                }
                Err(f) => {
                    return Err(Infrastructure(format!(
                        "the reference worker failed to load: {:?}",
                        Some(f)
                    )));
                }
            }
            self.worker = Some(w);
        }
        self.worker
            .as_mut()
            .ok_or_else(|| Infrastructure("no reference worker".into()))
    }

    /// Expected allocations for one trial (computed once per run). `gpu_lock`: the GPU's
    /// lock key to take for the run, `None` when the caller holds it already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn expected(
        &mut self,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        self.cached(
            kernel.to_string(),
            kernel,
            case,
            trial,
            inv,
            dims,
            limit,
            gpu_lock,
        )
    }

    /// Each output element's partial-sum scale for one trial (`compare::sum_scale`), per
    /// buffer (empty for inputs), from the reference kernel run on the absolute values and on
    /// the squares of the trial's inputs (each once per run), and its `expected` outputs.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn magnitude(
        &mut self,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        expected: &[Vec<u8>],
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Vec<Vec<f64>>, Infrastructure> {
        let abs = self.cached(
            format!("{kernel} on |inputs|"),
            kernel,
            case,
            trial,
            &inv.absolute(),
            dims,
            limit,
            gpu_lock,
        )?;
        let sq = self.cached(
            format!("{kernel} on inputs^2"),
            kernel,
            case,
            trial,
            &inv.squared(),
            dims,
            limit,
            gpu_lock,
        )?;
        Ok(inv
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if !b.is_output() {
                    return vec![];
                }
                let s = b.spec();
                let payload = |a: &[Vec<u8>]| {
                    a.get(i)
                        .and_then(|x| x.get(s.guard..s.guard + s.bytes))
                        .map(|x| inputs::decode(x, b.elem))
                        .unwrap_or_default()
                };
                let q = payload(&sq.allocations);
                compare::sum_scale(&payload(expected), &payload(&abs.allocations), Some(&q))
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn cached(
        &mut self,
        label: String,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        let key = (label, case.to_string(), trial);
        let cached = self
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(v) = cached {
            return Ok(v);
        }
        let w = self.worker()?;
        match run_on(w, kernel, inv, dims, limit * 4, gpu_lock) {
            Ok(r) => {
                let e = Expected {
                    allocations: r.allocations,
                    seconds: r.seconds,
                };
                self.outputs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, e.clone());
                Ok(e)
            }
            Err(e) => {
                self.worker = None;
                Err(Infrastructure(format!(
                    "the reference kernel `{kernel}` failed on case {case}: {}",
                    describe_run_error(&e)
                )))
            }
        }
    }

    /// cugrade's harness kernels (`measure/harness.cu`) compiled for this run's device, once.
    pub(super) fn harness(&mut self, opts: &Options) -> Result<String, String> {
        if let Some(h) = &self.harness {
            return h.clone();
        }
        let src = SourceFile {
            name: "cugrade-harness.cu".into(),
            text: crate::measure::session::HARNESS_SOURCE.into(),
        };
        let (modules, checks, summary) = compile_all(
            std::slice::from_ref(&src),
            &[],
            &[],
            opts,
            Duration::from_secs(120),
        )
        .map_err(|e| e.0)?;
        let h = modules.into_iter().next().map(|(_, p)| p).ok_or_else(|| {
            let why: Vec<String> = checks.iter().map(|c| c.message.clone()).collect();
            format!(
                "cugrade's timing kernels do not compile: {}\n{}",
                why.join("; "),
                summary.log
            )
        });
        self.harness = Some(h.clone());
        h
    }
}
