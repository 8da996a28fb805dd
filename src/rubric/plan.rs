//! The rubric resolved for one submission: what grading runs, typed and evaluated once.
//!
//! `rubric::load` checks a rubric; [`LoadedRubric::plan`] resolves it into a [`Plan`]: per
//! milestone, its contract (parameters with parsed types), every case with its variables, the
//! student's launch (the submission's override applied where the rubric allows one) and the
//! reference's, its buffer lengths and element count, the performance checks with their case,
//! bar, tier edges and points, the metric checks with their case, the precision, and the Numba
//! calling convention should the kernel be a Numba one. No stage looks the rubric up again.

use super::convention::{self, Signature};
use super::expr::Vars;
use super::schema::{
    CacheMode, Contract, Language, Launch, MetricSpec, Milestone, PerfSpec, Rubric, Timeouts,
    Tolerance,
};
use super::{
    LoadedRubric, case_elements, case_vars, eval_launch, milestone_max, perf_bar, perf_max,
};
use crate::model::args::ParamArg;
use crate::model::launch::{LaunchDims, Then};
use crate::model::precision::Precision;

/// What grading a submission against a rubric runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub assignment: String,
    pub milestones: Vec<MilestonePlan>,
    pub timeouts: Timeouts,
    pub trials: u32,
    pub max_score: f64,
    /// The languages the rubric accepts (`None`: every one).
    pub languages: Option<Vec<Language>>,
    /// The rubric file (pinned CPU baselines are looked up beside it).
    pub path: std::path::PathBuf,
    /// A multi-GPU lab's rank count (`None`: one device).
    pub ranks: Option<usize>,
}

impl Plan {
    /// Whether the rubric grades Python functions (`returns:`), not kernels.
    pub fn is_function_lab(&self) -> bool {
        !self.milestones.is_empty() && self.milestones.iter().all(|m| m.contract.is_function())
    }
}

/// One milestone, resolved.
#[derive(Debug, Clone)]
pub struct MilestonePlan {
    /// How the milestone's result is headed (id, title, hint, correctness points).
    pub milestone: Heading,
    pub kernel: String,
    /// The kernel of the reference module that computes the expected outputs.
    pub reference_kernel: String,
    /// A multi-kernel milestone's later kernels, the student's and the reference's (empty
    /// for one kernel); their launches are each case's `then`.
    pub then: Vec<String>,
    pub reference_then: Vec<String>,
    pub contract: Contract,
    pub precision: Precision,
    /// The milestone's own tolerance, else `None` (the contract's applies).
    pub tolerance: Option<Tolerance>,
    /// The correctness cases, in rubric order.
    pub cases: Vec<CasePlan>,
    pub performance: Vec<PerfPlan>,
    pub metrics: Vec<MetricPlan>,
    /// Points the milestone can award.
    pub max_points: f64,
    /// The signatures a Numba kernel is compiled with, in the order they are tried.
    pub numba_signatures: Vec<Signature>,
    /// The rubric's deadlines.
    pub timeouts: Timeouts,
}

/// A milestone as its result is headed: its id, its title as shown, its kernel, its hint, and
/// the points a correct kernel earns.
#[derive(Debug, Clone, PartialEq)]
pub struct Heading {
    pub id: String,
    pub title: String,
    pub kernel: String,
    pub hint: Option<String>,
    pub correctness_points: f64,
}

impl From<&Milestone> for Heading {
    fn from(m: &Milestone) -> Heading {
        Heading {
            id: m.id.clone(),
            title: m.display_title(),
            kernel: m.kernel.clone(),
            hint: m.hint.clone(),
            correctness_points: m.correctness.points,
        }
    }
}

/// One case of a milestone: its variables evaluated against the contract.
#[derive(Debug, Clone)]
pub struct CasePlan {
    pub name: String,
    pub vars: Vars,
    /// The student's launch (with the submission's override where allowed), or why it cannot
    /// be evaluated.
    pub launch: Result<LaunchDims, String>,
    /// The reference kernel's launch: always the contract's own.
    pub reference_launch: Result<LaunchDims, String>,
    /// The launches of a multi-kernel contract's later kernels (`then`), the same for the
    /// student and the reference.
    pub then: Result<Vec<LaunchDims>, String>,
    /// The launch's parameters on this case, evaluated (what `inputs` draws and passes), or
    /// why an expression fails on it.
    pub args: Result<Vec<ParamArg>, String>,
    /// Elements of every buffer with a `len`, summed (what "the largest case" means).
    pub elements: usize,
    /// The case's `flops`, evaluated (0 where it cannot be).
    pub flops: Option<f64>,
    /// The case's variables as the rubric gives them (integers): what a pinned CPU
    /// baseline's key names.
    pub ints: std::collections::BTreeMap<String, i64>,
    /// A performance case's time budget, seconds (the default where the rubric gives none).
    pub budget_s: f64,
    /// A performance case's cache mode for the timed launches.
    pub cache: CacheMode,
    /// A multi-GPU lab's parameters once a rank, in rank order (empty for other labs).
    pub rank_args: Vec<Result<Vec<ParamArg>, String>>,
}

/// One performance check, resolved.
#[derive(Debug, Clone)]
pub struct PerfPlan {
    pub spec: PerfSpec,
    /// `None`: the rubric names no such case (the check reports it).
    pub case: Option<CasePlan>,
    /// The ratio the check must reach to pass.
    pub bar: f64,
    /// Points the check can award.
    pub max_points: f64,
    /// For `against: {reference: K}`: K's launch on the case, that of K's own contract
    /// (`rubric::baseline::contract_of`), or why it cannot be evaluated; `None` otherwise.
    pub baseline_launch: Option<Result<LaunchDims, String>>,
    /// ... and K's later launches where K is a multi-kernel milestone's reference (its
    /// `reference_then` with its contract's `then`); empty otherwise.
    pub baseline_then: Result<Vec<Then>, String>,
    /// For `against: {copy_bandwidth: {bytes: B}}`: B on the check's case, or why it cannot be
    /// evaluated; `None` otherwise.
    pub copy_bytes: Option<Result<i64, String>>,
}

/// One metric check, resolved.
#[derive(Debug, Clone)]
pub struct MetricPlan {
    pub spec: MetricSpec,
    pub case: Option<CasePlan>,
}

impl LoadedRubric {
    /// Resolve the rubric for a submission whose launch of a kernel is `launch_for(kernel,
    /// contract's launch)` (the rubric's own launch unless it allows overrides).
    pub fn plan(&self, launch_for: &dyn Fn(&str, &Launch) -> Launch) -> Plan {
        self.plan_with(launch_for, None)
    }

    /// A multi-GPU lab's plan on `nranks` ranks: every case's `nranks` is that, and each case
    /// has its parameters once a rank (`CasePlan::rank_args`, `rank` from 0).
    pub fn plan_ranks(&self, launch_for: &dyn Fn(&str, &Launch) -> Launch, nranks: usize) -> Plan {
        self.plan_with(launch_for, Some(nranks))
    }

    fn plan_with(
        &self,
        launch_for: &dyn Fn(&str, &Launch) -> Launch,
        ranks: Option<usize>,
    ) -> Plan {
        let rb: &Rubric = &self.rubric;
        let ranks = ranks
            .or(rb.ranks.map(|n| n as usize))
            .filter(|_| rb.ranks.is_some());
        let milestones = rb
            .milestones
            .iter()
            .map(|m| self.milestone_plan(m, launch_for, ranks))
            .collect();
        Plan {
            assignment: rb.assignment.clone(),
            milestones,
            timeouts: rb.timeouts.clone(),
            trials: rb.trials,
            max_score: self.max_score(),
            languages: rb.languages.clone(),
            path: self.path.clone(),
            ranks,
        }
    }

    fn milestone_plan(
        &self,
        m: &Milestone,
        launch_for: &dyn Fn(&str, &Launch) -> Launch,
        ranks: Option<usize>,
    ) -> MilestonePlan {
        let contract = self.contract(&m.contract).clone();
        // A multi-kernel milestone runs the contract's launches as they are.
        let launch = if self.rubric.allow_launch_override && m.then.is_empty() {
            launch_for(&m.kernel, &contract.launch)
        } else {
            contract.launch.clone()
        };
        let case = |c: &super::schema::Case| case_plan(&contract, &launch, c, ranks);
        let performance = m
            .performance
            .iter()
            .map(|p| PerfPlan {
                spec: p.clone(),
                copy_bytes: match (&p.against, self.performance_case(&p.case)) {
                    (super::schema::Against::CopyBandwidth { bytes }, Some(c)) => {
                        Some(bytes.eval_int(&case_vars(c)))
                    }
                    _ => None,
                },
                case: self.performance_case(&p.case).map(case),
                bar: perf_bar(p),
                max_points: perf_max(p),
                baseline_launch: self.baseline_launch(p, &contract),
                baseline_then: self.baseline_then(p),
            })
            .collect();
        let metrics = m
            .metrics
            .iter()
            .map(|x| MetricPlan {
                spec: x.clone(),
                case: self.correctness_case(&x.case).map(case),
            })
            .collect();
        MilestonePlan {
            milestone: Heading::from(m),
            kernel: m.kernel.clone(),
            reference_kernel: m
                .reference_kernel
                .clone()
                .unwrap_or_else(|| m.kernel.clone()),
            then: m.then.clone(),
            reference_then: m.reference_then().to_vec(),
            precision: self.precision(m),
            tolerance: m.correctness.tolerance.clone(),
            cases: self.cases_for(m).into_iter().map(case).collect(),
            performance,
            metrics,
            max_points: milestone_max(m),
            numba_signatures: convention::signatures(&contract, self.rubric.numba_arrays),
            timeouts: self.rubric.timeouts.clone(),
            contract,
        }
    }
}

impl LoadedRubric {
    /// The launch a reference baseline runs with on its case: its own contract's, not the
    /// timed milestone's (a kernel written for another launch would do part of the work), or
    /// `ours` (the timed milestone's contract) where no milestone grades against the kernel.
    fn baseline_launch(
        &self,
        p: &super::schema::PerfSpec,
        ours: &Contract,
    ) -> Option<Result<LaunchDims, String>> {
        let super::schema::Against::Reference(k) = &p.against else {
            return None;
        };
        let case = self.performance_case(&p.case)?;
        let contract = super::baseline::contract_of(&self.rubric, k).map_or(ours, |(_, c)| c);
        Some(eval_launch(&contract.launch, &case_vars(case)))
    }
}

impl LoadedRubric {
    /// The later launches of a reference baseline that is a multi-kernel milestone's.
    fn baseline_then(&self, p: &super::schema::PerfSpec) -> Result<Vec<Then>, String> {
        let super::schema::Against::Reference(k) = &p.against else {
            return Ok(vec![]);
        };
        let (Some((m, contract)), Some(case)) = (
            super::baseline::contract_of(&self.rubric, k),
            self.performance_case(&p.case),
        ) else {
            return Ok(vec![]);
        };
        let vars = case_vars(case);
        m.reference_then()
            .iter()
            .zip(&contract.then)
            .map(|(kernel, l)| {
                Ok(Then {
                    kernel: kernel.clone(),
                    dims: eval_launch(l, &vars)?,
                })
            })
            .collect()
    }
}

fn case_plan(
    contract: &Contract,
    launch: &Launch,
    c: &super::schema::Case,
    ranks: Option<usize>,
) -> CasePlan {
    let mut vars = case_vars(c);
    if let Some(n) = ranks {
        vars.insert("nranks".into(), n as f64);
    }
    let rank_args = (0..ranks.unwrap_or(0))
        .map(|r| {
            let mut v = vars.clone();
            v.insert("rank".into(), r as f64);
            super::args::resolve(&c.contract(contract), &v)
        })
        .collect();
    CasePlan {
        rank_args,
        name: c.name.clone(),
        launch: eval_launch(launch, &vars),
        reference_launch: eval_launch(&contract.launch, &vars),
        then: contract
            .then
            .iter()
            .map(|l| eval_launch(l, &vars))
            .collect(),
        args: super::args::resolve(&c.contract(contract), &vars),
        elements: case_elements(contract, c),
        flops: c.flops.as_ref().map(|e| e.eval_f64(&vars).unwrap_or(0.0)),
        ints: c.vars.clone(),
        budget_s: c.budget_s.unwrap_or(super::schema::DEFAULT_BUDGET_S),
        cache: c.cache.unwrap_or_default(),
        vars,
    }
}

impl CasePlan {
    /// The launch's parameters on this case, or why they cannot be evaluated.
    pub fn args(&self) -> Result<&[ParamArg], String> {
        self.args.as_deref().map_err(Clone::clone)
    }
}

impl MilestonePlan {
    /// The student's later launches on `case` (empty for a one-kernel milestone).
    pub fn then(&self, case: &CasePlan) -> Result<Vec<Then>, String> {
        Self::zip(&self.then, case)
    }

    /// The reference's later launches on `case`.
    pub fn reference_then(&self, case: &CasePlan) -> Result<Vec<Then>, String> {
        Self::zip(&self.reference_then, case)
    }

    fn zip(names: &[String], case: &CasePlan) -> Result<Vec<Then>, String> {
        let dims = case.then.clone()?;
        Ok(names
            .iter()
            .zip(dims)
            .map(|(k, dims)| Then {
                kernel: k.clone(),
                dims,
            })
            .collect())
    }

    /// Every kernel the student writes for this milestone, in launch order.
    pub fn kernels(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.kernel.as_str()).chain(self.then.iter().map(String::as_str))
    }

    /// The case the kernel's resources are reported at: the first performance case (the launch
    /// its speed is measured with), else the first correctness case.
    pub fn resource_case(&self) -> Option<&CasePlan> {
        self.performance
            .first()
            .and_then(|p| p.case.as_ref())
            .or_else(|| self.cases.first())
    }

    /// A correctness case by name.
    pub fn case(&self, name: &str) -> Option<&CasePlan> {
        self.cases.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plan_resolves_launches_lengths_bars_and_the_override() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ref.cu"),
            "extern \"C\" __global__ void k(const float* x, float* y, int n) {}",
        )
        .unwrap();
        let path = dir.path().join("r.yaml");
        std::fs::write(
            &path,
            "assignment: a\nreference: ref.cu\nallow_launch_override: true\ncontracts:\n  c:\n    params:\n      - { name: x, type: f32*, len: n, gen: { uniform: [-1, 1] } }\n      - { name: y, type: f32*, dir: out, len: \"2 * n\" }\n      - { name: n, type: i32, value: n }\n    launch: { block: [256], grid: [\"ceil_div(n, 256)\"] }\ncases:\n  correctness:\n    - { name: small, vars: { n: 1000 } }\n  performance:\n    - { name: big, vars: { n: 4096 } }\nmilestones:\n  - id: m\n    kernel: k\n    contract: c\n    correctness: { points: 1 }\n    performance:\n      - { name: speed, case: big, against: { copy_bandwidth: { bytes: \"8 * n\" } }, tiers: [{ min: 2, points: 1 }, { min: 8, points: 3 }] }\n",
        )
        .unwrap();
        let r = crate::rubric::load(&path).unwrap();
        let plan = r.plan(&|_, l| {
            let mut l = l.clone();
            l.block = vec![crate::rubric::schema::Expr::int(128)];
            l
        });
        let m = &plan.milestones[0];
        assert_eq!(m.cases[0].elements, 3000);
        assert_eq!(m.cases[0].launch.as_ref().unwrap().block, [128, 1, 1]);
        assert_eq!(
            m.cases[0].reference_launch.as_ref().unwrap().block,
            [256, 1, 1]
        );
        assert_eq!(m.performance[0].bar, 8.0);
        assert_eq!(m.max_points, 4.0);
    }
}
