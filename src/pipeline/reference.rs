//! The trusted side: the reference module in its own worker, its cached outputs and
//! baselines, and `validate`'s self-check of a rubric's reference kernels.

use super::compiling::compile_all;
use super::context::{Infrastructure, Options};
use super::run::{describe_run_error, run_on};
use crate::backend::{BackendKind, LaunchDims};
use crate::compare;
use crate::compile::SourceFile;
use crate::inputs::{self, Invocation};
use crate::result::CompileSummary;
use crate::rubric::LoadedRubric;
use crate::worker::Client;
use crate::worker::pool::Workers;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Expected allocations by what was run ([`Variant`] of the trial's inputs, [`RunKey`]), with
/// the reference run's seconds.
type ExpectedOutputs = HashMap<(Variant, RunKey), Expected>;

/// Kernel profiles by module, kernel, what it ran on (`RunKey`) and GPU (see
/// `Reference::estimates`).
pub(super) type ProfileCache =
    HashMap<String, Result<crate::estimate::model::KernelProfile, String>>;

/// Which run of the reference a cached result is: on the trial's inputs, or on their absolute
/// values or squares (`Reference::magnitude`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Variant {
    Inputs,
    Absolute,
    Squared,
}

/// Everything that determines a reference run's outputs, hashed: the kernel's name, the launch
/// and the invocation itself (every buffer's bytes or generator, every argument). Keyed by
/// kernel, case and trial instead, two milestones that run one reference kernel under two
/// contracts (other generators, `init`, lengths, launch) got each other's expected outputs
/// (issue 33). The inputs are a function of the run's seed, the case and the contract, so
/// every student of a cohort draws the same bytes and hits the same entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct RunKey([u8; 32]);

impl RunKey {
    #[cfg(test)]
    pub(super) fn of(kernel: &str, inv: &Invocation, dims: LaunchDims) -> RunKey {
        RunKey::of_sent(kernel, inv, dims, &[], &[])
    }

    /// [`RunKey::of`] for a run whose buffers marked in `zeroed` start zeroed in the worker
    /// instead of as sent (the estimate's outputs without `init`): their bytes (poison, a
    /// function of their length and type, which are hashed) are left out of the hash.
    pub(super) fn of_sent(
        kernel: &str,
        inv: &Invocation,
        dims: LaunchDims,
        then: &[crate::backend::Then],
        zeroed: &[bool],
    ) -> RunKey {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        // Every variable-length part is length-prefixed, so that no two runs hash alike by
        // moving bytes from one part into the next.
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(b"cugrade reference run 1");
        part(kernel.as_bytes());
        part(format!("{dims:?}").as_bytes());
        // A multi-kernel milestone's later launches (nothing for one kernel: keys unchanged).
        for t in then {
            part(t.kernel.as_bytes());
            part(format!("{:?}", t.dims).as_bytes());
        }
        for (i, b) in inv.buffers.iter().enumerate() {
            let zero = zeroed.get(i).copied().unwrap_or(false);
            // Debug of floats round-trips exactly: a generator's bounds are told apart.
            let shape = format!(
                "{}|{:?}|{:?}|{}|{:?}|{}|{:?}|{zero}",
                b.name, b.elem, b.dir, b.len, b.shape, b.symbol, b.fill
            );
            part(shape.as_bytes());
            part(if zero { &[] } else { &b.data });
        }
        part(format!("{:?}|{:?}", inv.args, inv.symbols).as_bytes());
        RunKey(h.finalize().into())
    }

    /// The key as text, for caches keyed by strings (the estimate's profiles).
    pub(super) fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// One run of a reference kernel: what it runs on and its cache key.
pub(super) struct RefRun<'a> {
    kernel: &'a str,
    /// A multi-kernel milestone's later reference launches.
    then: Vec<crate::backend::Then>,
    /// The case's name, for messages only (the key holds what the case determines).
    case: &'a str,
    inv: &'a Invocation,
    dims: LaunchDims,
    key: RunKey,
}

impl<'a> RefRun<'a> {
    pub(super) fn new(
        kernel: &'a str,
        case: &'a str,
        inv: &'a Invocation,
        dims: LaunchDims,
        then: Vec<crate::backend::Then>,
    ) -> RefRun<'a> {
        RefRun {
            kernel,
            case,
            inv,
            dims,
            key: RunKey::of_sent(kernel, inv, dims, &then, &[]),
            then,
        }
    }
}

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
    /// Expected allocations by what was run ([`RunKey`]), shared by every [`Reference::share`]d
    /// handle: a cohort computes each once, whatever its `--jobs`.
    outputs: Arc<Mutex<ExpectedOutputs>>,
    /// CPU baselines by `calibration::key`, found or measured once per run.
    pub(super) baselines: HashMap<String, Result<crate::measure::calibration::Found, String>>,
    /// The harness kernels' PTX, compiled on first use.
    pub(super) harness: Option<Result<String, String>>,
    /// The GPU's timing-lock key (cuda backend).
    pub(super) gpu: Option<String>,
    pub(super) backend: BackendKind,
    pub(super) device: usize,
    /// A multi-GPU lab's rank set: the reference runs on every rank as the student's kernel.
    pub(super) ranks: Vec<usize>,
    pub(super) protected: Vec<std::path::PathBuf>,
    /// ptxas's facts of the reference kernels (registers, for the speed estimate).
    pub(super) resources: Vec<crate::result::KernelResources>,
    /// Speed-estimate profiles of reference kernels (`estimated::reference_profile`), shared
    /// like `outputs`.
    pub(super) estimates: Arc<Mutex<ProfileCache>>,
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
            ranks: opts.ranks.clone(),
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
            ranks: self.ranks.clone(),
            protected: self.protected.clone(),
            resources: self.resources.clone(),
            estimates: Arc::clone(&self.estimates),
        }
    }

    pub(super) fn worker(&mut self) -> Result<&mut Client, Infrastructure> {
        if self.worker.is_none() {
            let mut w = Workers::new(&self.protected, self.backend, self.device)
                .with_gpu_lock(self.gpu.clone())
                .with_ranks(self.ranks.clone())
                .run(None)
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
    pub(super) fn expected(
        &mut self,
        run: &RefRun,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        self.cached(Variant::Inputs, run, || None, limit, gpu_lock)
    }

    /// Each output element's partial-sum scale for one trial (`compare::sum_scale`), per
    /// buffer (empty for inputs), from the reference kernel run on the absolute values and on
    /// the squares of the trial's inputs (each once per run), and its `expected` outputs.
    pub(super) fn magnitude(
        &mut self,
        run: &RefRun,
        expected: &[Vec<u8>],
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Vec<Vec<f64>>, Infrastructure> {
        let inv = run.inv;
        // Keyed by the trial's own inputs and the variant: the transformed inputs are a
        // function of them, built only when not cached.
        let abs = self.cached(
            Variant::Absolute,
            run,
            || Some(inv.absolute()),
            limit,
            gpu_lock,
        )?;
        let sq = self.cached(
            Variant::Squared,
            run,
            || Some(inv.squared()),
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

    /// The reference's run `variant` of `run` (on `transformed()`'s invocation, else on the
    /// run's own), from the cache or run now.
    fn cached(
        &mut self,
        variant: Variant,
        run: &RefRun,
        transformed: impl FnOnce() -> Option<Invocation>,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        let key = (variant, run.key);
        let cached = self
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(v) = cached {
            return Ok(v);
        }
        let owned = transformed();
        let inv = owned.as_ref().unwrap_or(run.inv);
        let kernel = run.kernel;
        let w = self.worker()?;
        match run_on(w, kernel, inv, run.dims, &run.then, limit * 4, gpu_lock) {
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
                    "the reference kernel `{kernel}` failed on case {}: {}",
                    run.case,
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

/// The reference's outputs of a trial, and the elements' sums of absolute terms.
type TrialExpected = (Expected, Option<Vec<Vec<f64>>>);

/// The reference's outputs of a trial, and each element's sum of absolute terms where a
/// tolerance scales with it. The caller holds the GPU for the whole correctness phase.
pub(super) fn expected_outputs(
    ctx: &super::context::Ctx,
    case: &crate::rubric::plan::CasePlan,
    inv: &Invocation,
    reference: &mut Reference,
) -> Result<TrialExpected, Infrastructure> {
    let limit = Duration::from_secs_f64(ctx.rubric.timeouts.launch_s);
    let ref_dims = super::context::reference_launch(case)?;
    let then = ctx.plan.reference_then(case).map_err(Infrastructure)?;
    let run = RefRun::new(&ctx.plan.reference_kernel, &case.name, inv, ref_dims, then);
    let expected = reference.expected(&run, limit, None)?;
    let magnitude = if needs_magnitude(ctx) {
        Some(reference.magnitude(&run, &expected.allocations, limit, None)?)
    } else {
        None
    };
    Ok((expected, magnitude))
}

/// Whether an output's tolerance scales with its elements' partial sums (`sum`).
pub(super) fn needs_magnitude(ctx: &super::context::Ctx) -> bool {
    let contract = &ctx.plan.contract;
    contract.params.iter().any(|p| {
        p.dir.is_output()
            && p.tolerance
                .as_ref()
                .or(ctx.plan.tolerance.as_ref())
                .unwrap_or(&contract.tolerance)
                .sum
                .is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rubric::schema::Contract;

    fn contract(generator: &str) -> Contract {
        serde_yaml::from_str(&format!(
            "params:\n  - {{ name: data, type: i32*, len: n, gen: {generator} }}\n  - {{ name: bins, type: u32*, dir: out, len: 256, init: 0 }}\n  - {{ name: n, type: i32, value: n }}\nlaunch: {{ block: [256], grid: [\"ceil_div(n, 256)\"] }}\n"
        ))
        .unwrap()
    }

    fn key(c: &Contract, n: f64, seed: u64, dims: LaunchDims) -> RunKey {
        let vars = [("n".to_string(), n)].into_iter().collect();
        let inv = crate::rubric::args::resolve(c, &vars)
            .and_then(|a| inputs::generate(&a, seed))
            .unwrap();
        RunKey::of("hist", &inv, dims)
    }

    /// The expected-output cache's key follows what the reference runs on: the same
    /// milestone, case and trial (every student of a cohort) hit one entry; another
    /// contract's generator, another size, another seed or another launch do not.
    #[test]
    fn a_reference_run_is_keyed_by_what_it_runs_on() {
        let dims = LaunchDims {
            grid: [4, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        };
        let uniform = contract("{ int: [0, 256] }");
        let constant = contract("{ constant: 7 }");
        let base = key(&uniform, 1000.0, 1, dims);
        assert_eq!(base, key(&uniform, 1000.0, 1, dims));
        assert_ne!(base, key(&constant, 1000.0, 1, dims));
        assert_ne!(base, key(&uniform, 1001.0, 1, dims));
        assert_ne!(base, key(&uniform, 1000.0, 2, dims));
        let wider = LaunchDims {
            block: [128, 1, 1],
            ..dims
        };
        assert_ne!(base, key(&uniform, 1000.0, 1, wider));
        assert_eq!(base.hex().len(), 64);
        // Buffers the worker zeroes are keyed by their shape, not their poison.
        let vars = [("n".to_string(), 1000.0)].into_iter().collect();
        let inv = crate::rubric::args::resolve(&uniform, &vars)
            .and_then(|a| inputs::generate(&a, 1))
            .unwrap();
        let zeroed = [false, true, false];
        assert_ne!(RunKey::of_sent("hist", &inv, dims, &[], &zeroed), base);
        let mut other = inv.clone();
        other.buffers[1].data.fill(0);
        assert_eq!(
            RunKey::of_sent("hist", &inv, dims, &[], &zeroed),
            RunKey::of_sent("hist", &other, dims, &[], &zeroed)
        );
    }
}
