//! The verdict data model: what grading produces and every report reads.
//!
//! These types serialize to `result.json` exactly as `SPEC.md` fixes it. A verdict is data:
//! compile errors, crashes, timeouts and wrong answers are all [`Check`]s, never Rust errors.

use serde::{Deserialize, Serialize};

/// Outcome of one check, and (aggregated) of a milestone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Error,
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::Skipped => "skipped",
        }
    }

    /// SPEC.md: `fail` if any check failed, else `error` if any errored, else `skipped` if any
    /// was skipped, else `pass`. No checks at all is `skipped`: nothing was shown to work.
    pub fn aggregate<I: IntoIterator<Item = Status>>(statuses: I) -> Status {
        let (mut any, mut fail, mut error, mut skipped) = (false, false, false, false);
        for s in statuses {
            any = true;
            match s {
                Status::Fail => fail = true,
                Status::Error => error = true,
                Status::Skipped => skipped = true,
                Status::Pass => {}
            }
        }
        if fail {
            Status::Fail
        } else if error {
            Status::Error
        } else if skipped || !any {
            Status::Skipped
        } else {
            Status::Pass
        }
    }
}

/// What a check looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// The submission compiled (NVRTC) or its PTX loaded.
    Compile,
    /// The milestone's kernel exists in the module with the contract's arity.
    Kernel,
    /// The launch configuration (default or the submission's override) is valid.
    Launch,
    /// Outputs match the reference within tolerance.
    Correctness,
    /// Guard regions and `const` inputs were left untouched.
    Memory,
    /// Diagnostics from the emulator (memcheck, racecheck, synccheck, initcheck).
    Sanitizer,
    /// Speed thresholds.
    Performance,
    /// Deterministic emulator metrics (coalescing, bank conflicts, divergence).
    Metric,
    /// Registers, shared memory, spills.
    Resources,
    /// The run itself broke: timeout, crash, fault.
    Runtime,
}

impl CheckKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::Compile => "compile",
            CheckKind::Kernel => "kernel",
            CheckKind::Launch => "launch",
            CheckKind::Correctness => "correctness",
            CheckKind::Memory => "memory",
            CheckKind::Sanitizer => "sanitizer",
            CheckKind::Performance => "performance",
            CheckKind::Metric => "metric",
            CheckKind::Resources => "resources",
            CheckKind::Runtime => "runtime",
        }
    }
}

/// One check: the unit of every report (a JUnit testcase, a Markdown row, a JSON object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub kind: CheckKind,
    /// Short stable name, unique within the milestone (e.g. `correctness n=1000003`).
    pub name: String,
    pub status: Status,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// `file:line` in the student's submission, where the evidence allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Points this check awarded (performance tiers, correctness); not in SPEC's stable set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<f64>,
    /// Long evidence: compile logs, captured output, mismatch tables. Reports show it folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// Wall time of the check in seconds, where it has one (JUnit `time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// What kind of problem this is, a stable key (`racecheck`, `nan`, `transposed`, ...):
    /// reports group checks of one milestone with the same kind, cause and location into one
    /// finding. docs/reports.md lists the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The student's source line at `location`, so that reports can show it without the
    /// submission at hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<SourceLine>,
    /// Performance checks: how the speed was measured (samples, noise, interval, clocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<Box<crate::model::timing::Measurement>>,
    /// Performance checks without a GPU: the speed estimate (docs/estimate.md). Never a grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Box<crate::model::estimate::Estimate>>,
}

/// One line of the student's source, as reports quote it under a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLine {
    /// 1-based line number in the file `location` names.
    pub line: u32,
    /// The line's text, without its newline.
    pub text: String,
}

impl Check {
    pub fn new(
        kind: CheckKind,
        name: impl Into<String>,
        status: Status,
        message: impl Into<String>,
    ) -> Self {
        Check {
            kind,
            name: name.into(),
            status,
            message: message.into(),
            hint: None,
            location: None,
            case: None,
            measured: None,
            threshold: None,
            unit: None,
            points: None,
            details: None,
            seconds: None,
            cause: None,
            snippet: None,
            timing: None,
            estimate: None,
        }
    }
    pub fn pass(kind: CheckKind, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(kind, name, Status::Pass, message)
    }
    pub fn fail(kind: CheckKind, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(kind, name, Status::Fail, message)
    }
    pub fn error(kind: CheckKind, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(kind, name, Status::Error, message)
    }
    pub fn skipped(kind: CheckKind, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(kind, name, Status::Skipped, message)
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_hint_opt(mut self, hint: Option<String>) -> Self {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }
    pub fn with_location(mut self, location: Option<String>) -> Self {
        self.location = location;
        self
    }
    pub fn with_case(mut self, case: impl Into<String>) -> Self {
        self.case = Some(case.into());
        self
    }
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        let d = details.into();
        if !d.is_empty() {
            self.details = Some(d);
        }
        self
    }
    pub fn with_cause(mut self, cause: impl Into<String>) -> Self {
        self.cause = Some(cause.into());
        self
    }
    pub fn with_measure(mut self, measured: f64, threshold: Option<f64>, unit: &str) -> Self {
        self.measured = Some(measured);
        self.threshold = threshold;
        self.unit = Some(unit.to_string());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MilestoneResult {
    pub id: String,
    pub title: String,
    pub status: Status,
    pub score: f64,
    pub max_score: f64,
    pub checks: Vec<Check>,
    /// Kernel name the milestone graded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel: String,
    /// The score counts correctness but a speed check that carries points was not measured
    /// (no GPU): the milestone's final score may be higher. Reports say "speed not measured".
    #[serde(default)]
    pub provisional: bool,
}

/// Facts about the environment a grade was produced in: what the report must say plainly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Device name (`NVIDIA H200`) or `PTX emulator`.
    pub device: String,
    /// The compute target the code was compiled for (`sm_90`).
    pub arch: String,
    /// True when performance was measured; false on the emulator.
    pub timed: bool,
    pub cugrade_version: String,
    /// Sandbox layers in force for the student's worker, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox: Vec<String>,
    /// Notices for the reader (e.g. "speed was not measured: no GPU").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Wall time of grading this submission, seconds (compilation to the last check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The GPU this submission was graded and timed on (cuda backend): every performance check
    /// of a student runs on this one GPU (`grade --gpus`), and records it in `timing.device`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::model::launch::GpuRecord>,
    /// Where `seconds` went, phase by phase (`grade`, `check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
}

/// A grading's wall time by phase, in seconds (result.json `run.phases`; `ci/cohort-bench.py`
/// sums them over a cohort). Time spent waiting for a GPU lock is counted in `gpu_wait_s`, not
/// in the phase that waited. Work that runs beside other work (compute-sanitizer's tools run
/// side by side) counts its own wall time, so the phases may add up to more than `seconds`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Every language to PTX (and, in `check`, the reference's compile).
    pub compile_s: f64,
    /// Starting the student's worker and loading each milestone's module.
    pub load_s: f64,
    /// The correctness cases and trials, the reference's runs included.
    pub correctness_s: f64,
    /// compute-sanitizer's tools on the GPU.
    pub gpu_sanitizer_s: f64,
    /// The PTX emulator's sanitizer pass after a GPU run, and the cross-check of its outputs.
    pub emulator_sanitizer_s: f64,
    /// Timed sections on a GPU (setup, samples, baseline).
    pub timed_s: f64,
    /// The speed estimate without a GPU.
    pub estimate_s: f64,
    /// Metric checks (Nsight Compute on a GPU, the emulator's counters without one).
    pub metrics_s: f64,
    /// Writing report.md, junit.xml and the other per-student files.
    pub reports_s: f64,
    /// Waiting for a GPU's lock (another job's timed section, or a timed section waiting for
    /// this job's correctness runs to finish).
    pub gpu_wait_s: f64,
}

/// The phases of [`Phases`], to name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Compile,
    Load,
    Correctness,
    GpuSanitizer,
    EmulatorSanitizer,
    Timed,
    Estimate,
    Metrics,
    Reports,
}

impl Phases {
    /// The seconds of `phase`.
    pub fn slot(&mut self, phase: Phase) -> &mut f64 {
        match phase {
            Phase::Compile => &mut self.compile_s,
            Phase::Load => &mut self.load_s,
            Phase::Correctness => &mut self.correctness_s,
            Phase::GpuSanitizer => &mut self.gpu_sanitizer_s,
            Phase::EmulatorSanitizer => &mut self.emulator_sanitizer_s,
            Phase::Timed => &mut self.timed_s,
            Phase::Estimate => &mut self.estimate_s,
            Phase::Metrics => &mut self.metrics_s,
            Phase::Reports => &mut self.reports_s,
        }
    }

    /// Add `seconds` of wall time to `phase`, of which `waited` were spent waiting for a GPU
    /// lock (counted in `gpu_wait_s` instead).
    pub fn add(&mut self, phase: Phase, seconds: f64, waited: f64) {
        let waited = waited.clamp(0.0, seconds.max(0.0));
        *self.slot(phase) += seconds - waited;
        self.gpu_wait_s += waited;
    }

    /// Two records together (a cohort's sum).
    pub fn sum(mut self, other: &Phases) -> Phases {
        let mut other = *other;
        for p in Phase::ALL {
            *self.slot(p) += *other.slot(p);
        }
        self.gpu_wait_s += other.gpu_wait_s;
        self
    }
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::Compile,
        Phase::Load,
        Phase::Correctness,
        Phase::GpuSanitizer,
        Phase::EmulatorSanitizer,
        Phase::Timed,
        Phase::Estimate,
        Phase::Metrics,
        Phase::Reports,
    ];
}

/// The whole verdict for one submission: `result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradeResult {
    pub assignment: String,
    pub student: String,
    /// A gradebook id other than `student`: results of cugrade before issue 32 took it from
    /// the student's own manifest; `grade` no longer sets it (the cohort entry names the row),
    /// and grades.csv still reads it from such older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub student_id: Option<String>,
    /// `grade` only: the row's unique, stable key in the cohort, derived from the cohort entry's
    /// name (`alice.zip`, `alice`), and the name of its folder in `<out>/students/`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// `grade` only: the cohort entry's name as found (`alice.tar.gz`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub entry: String,
    pub backend: String,
    pub seed: u64,
    pub score: f64,
    pub max_score: f64,
    pub milestones: Vec<MilestoneResult>,
    /// sha256 of the submission's files, for reproducibility and `--resume`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub submission_sha256: String,
    /// `grade` only: sha256 of the rubric and its reference kernel, for `--resume` (a result
    /// graded against another rubric is graded again).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rubric_sha256: String,
    /// The compile log and per-kernel resources, shown once per submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileSummary>,
    #[serde(default)]
    pub run: RunInfo,
    /// Submission-level problems that are not milestone checks (e.g. "manifest ignored").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Things in the submission an instructor should look at, never verdicts: device code
    /// that reads timers or SM ids, large `__device__` arrays, a kernel whose emulator and GPU
    /// runs disagree (docs/integrity.md). The cohort's integrity.csv lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
}

/// One flag for the instructor: no points depend on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// Stable key: `reads-timer`, `reads-placement`, `large-device-array`,
    /// `backends-disagree`.
    pub kind: String,
    /// The milestone it concerns, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milestone: Option<String>,
    /// `file:line` in the submission (or the file alone), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub message: String,
}

impl GradeResult {
    /// Status over all milestones.
    pub fn status(&self) -> Status {
        Status::aggregate(self.milestones.iter().map(|m| m.status))
    }

    /// How cohort files name this result: its [`id`](Self::id) in a cohort, else the student.
    pub fn key(&self) -> &str {
        if self.id.is_empty() {
            &self.student
        } else {
            &self.id
        }
    }

    /// Some milestone's score is provisional (its speed was not measured).
    pub fn provisional(&self) -> bool {
        self.milestones.iter().any(|m| m.provisional)
    }

    /// Every check passed or was skipped (SPEC exit code 0).
    pub fn all_passed(&self) -> bool {
        self.milestones
            .iter()
            .flat_map(|m| &m.checks)
            .all(|c| matches!(c.status, Status::Pass | Status::Skipped))
    }
}

/// What NVRTC said about the submission.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompileSummary {
    pub ok: bool,
    /// Compile log with paths relative to the submission.
    pub log: String,
    pub kernels: Vec<KernelResources>,
}

/// Per-kernel resource usage from `ptxas -v`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub shared_bytes: u64,
    pub spill_stores: u64,
    pub spill_loads: u64,
    pub stack_bytes: u64,
    pub const_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_follows_spec_precedence() {
        use Status::*;
        assert_eq!(Status::aggregate([Pass, Skipped, Error, Fail]), Fail);
        assert_eq!(Status::aggregate([Pass, Skipped, Error]), Error);
        assert_eq!(Status::aggregate([Pass, Skipped]), Skipped);
        assert_eq!(Status::aggregate([Pass, Pass]), Pass);
        assert_eq!(Status::aggregate([]), Skipped);
    }

    #[test]
    fn check_serializes_without_empty_optionals() {
        let c = Check::pass(CheckKind::Compile, "compile", "ok");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["kind"], "compile");
        assert_eq!(v["status"], "pass");
        assert!(v.get("hint").is_none());
    }
}
