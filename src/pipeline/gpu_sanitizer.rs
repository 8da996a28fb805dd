//! NVIDIA's compute-sanitizer on the GPU (issue 19; one process per tool, issue 29): on
//! `--backend cuda`, where `compute-sanitizer` is installed, every milestone's kernel runs once
//! more per tool (memcheck, racecheck, synccheck, initcheck) on its smallest correctness
//! cases. All of a student's launches go into one `cugrade __profile-kernel` process per tool
//! (`worker::profiled`), the four tools side by side, while the student's grading goes on:
//! a compute-sanitizer process costs most of a second to start whatever it runs, so one per
//! case, tool and milestone made a student's check 24 processes and 17 s.
//!
//! Each launch's copy of its module names the kernel `cugrade_m<milestone>_c<case>`, so a
//! finding says which milestone and case it came from. A launch that fails ends its process
//! (the context is unusable after a fault): the launches after it run again in a fresh one.
//! The tools hold the GPU's shared lock throughout: they never run beside another student's
//! timed section. Each tool's report goes to a log file in the run's own folder, never
//! through the kernel's stdout, so nothing the kernel prints can pass for a finding or hide
//! one. The PTX emulator's pass (`sanitizer::on_emulator`) runs as well: each finding says
//! which one saw it. docs/sanitizers.md has the table.

use super::context::{Infrastructure, Options};
use super::sanitizer::{self, sanitizer_check};
use crate::backend::Diagnostic;
use crate::result::{Check, CheckKind};
use crate::rubric::convention::Signature;
use crate::rubric::plan::MilestonePlan;
use crate::worker::nsight::{case_launch, run_tool, tool_root};
use crate::worker::profiled::{self, Job, Launch};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tools run, in order.
pub const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];
/// How long one launch may take under a tool (racecheck is the slowest, about 100x).
const LAUNCH_DEADLINE: Duration = Duration::from_secs(30);
/// How long one tool's process may take: its start, and each launch's deadline.
fn process_timeout(launches: usize) -> Duration {
    Duration::from_secs(30) + LAUNCH_DEADLINE * launches.max(1) as u32
}
/// What the report names as the tool that ran.
pub const TOOL: &str =
    "compute-sanitizer's memcheck, racecheck, synccheck and initcheck on the GPU";

/// Lines of a compute-sanitizer report that are not findings.
fn is_meta(text: &str) -> bool {
    const META: &[&str] = &[
        "COMPUTE-SANITIZER",
        "ERROR SUMMARY",
        "RACECHECK SUMMARY",
        "LEAK SUMMARY",
        "Program hit",
        "Saved host backtrace",
        "Target application returned",
        "Host Frame",
        "Error: process didn't terminate",
        "Warning: Device not supported",
        "Note:",
    ];
    META.iter().any(|m| text.starts_with(m))
}

/// The patterns of a compute-sanitizer report.
struct Patterns {
    place: regex::Regex,
    who: regex::Regex,
    at: regex::Regex,
    hazards: regex::Regex,
    /// `at kernel(float const*, int)+0x1a0 in /tmp/x/reduce.cu:20` -> `at reduce.cu:20`.
    tidy: regex::Regex,
    summary: regex::Regex,
}

static PATTERNS: std::sync::LazyLock<Patterns> = std::sync::LazyLock::new(|| {
    let re = |p: &str| regex::Regex::new(p).expect("static regex");
    Patterns {
        place: re(r"in ([^\s:]+):(\d+)"),
        who: re(r"thread \((\d+),\s*(\d+),\s*(\d+)\)\s+in block \((\d+),\s*(\d+),\s*(\d+)\)"),
        at: re(r"\bat (.+?) in "),
        hazards: re(r"\[(\d+) hazards?\]"),
        tidy: re(r"at \S.*? in (?:\S*/)?([^/\s:]+:\d+)(?::\S+)?"),
        summary: re(r"ERROR SUMMARY: (\d+) errors?"),
    }
});

/// The findings of one tool's log (`compute-sanitizer --log-file`). A finding is a line of
/// its own after `=========`; the indented lines after it say where (`at ... in file:line`),
/// who (`by thread (x,y,z) in block (x,y,z)`) and, for races, how often (`[N hazards]`).
/// Source paths keep their file name only, as the emulator's findings do.
pub fn parse(tool: &str, log: &str) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    let mut cur: Option<Diagnostic> = None;
    // initcheck's "Host API memory access error" is a host-side copy (cugrade's own download
    // of a buffer, or of a module global such as Numba's environment symbol) reading memory no
    // kernel wrote: not the student's code. An output the kernel left unwritten is caught by
    // the correctness and unwritten-output checks; a kernel's own uninitialized read is an
    // "Uninitialized __global__ memory read", which stays a finding.
    let mut harness = 0usize;
    for line in log.lines() {
        let Some(rest) = line.strip_prefix("=========") else {
            continue;
        };
        let text = rest.trim();
        let continuation = rest.starts_with("  ") || rest.starts_with('\t');
        if continuation {
            if let Some(d) = cur.as_mut() {
                absorb(d, text);
            }
            continue;
        }
        out.extend(cur.take());
        if text.is_empty() || is_meta(text) {
            continue;
        }
        if tool == "initcheck" && text.starts_with("Host API memory access error") {
            harness += 1;
            continue;
        }
        cur = Some(finding(tool, text));
    }
    out.extend(cur.take());
    if out.is_empty() && harness == 0 {
        out.extend(unlocated(tool, log));
    }
    out
}

/// A finding's first line.
fn finding(tool: &str, text: &str) -> Diagnostic {
    let message = PATTERNS.tidy.replace_all(text, "at $1").trim().to_string();
    let message = message
        .trim_start_matches("Error: ")
        .trim_start_matches("Warning: ")
        .to_string();
    let mut d = Diagnostic {
        tool: tool.to_string(),
        message,
        thread: [0; 3],
        block: [0; 3],
        instruction: String::new(),
        file: None,
        line: None,
        repeats: 0,
    };
    absorb(&mut d, text);
    d
}

/// What one line of a finding says: where, who, how often.
fn absorb(d: &mut Diagnostic, text: &str) {
    let p = &*PATTERNS;
    if d.file.is_none()
        && let Some(c) = p.place.captures(text)
    {
        let path = &c[1];
        d.file = Some(path.rsplit(['/', '\\']).next().unwrap_or(path).to_string());
        d.line = c[2].parse().ok();
    }
    if d.instruction.is_empty()
        && let Some(c) = p.at.captures(text)
    {
        d.instruction = c[1].trim().to_string();
    }
    if let Some(c) = p.who.captures(text) {
        let n = |k: usize| c[k].parse().unwrap_or(0);
        d.thread = [n(1), n(2), n(3)];
        d.block = [n(4), n(5), n(6)];
    }
    if let Some(c) = p.hazards.captures(text) {
        d.repeats = c[1].parse::<u64>().unwrap_or(1).saturating_sub(1);
    }
    if text.starts_with("and ") && d.tool == "racecheck" {
        let more = p.tidy.replace_all(text, "at $1");
        let more = p.hazards.replace_all(&more, "");
        d.message = format!("{} {}", d.message, more.trim());
    }
}

/// The tool's own summary says errors without saying which: one finding then.
fn unlocated(tool: &str, log: &str) -> Option<Diagnostic> {
    let n = PATTERNS
        .summary
        .captures(log)
        .and_then(|c| c[1].parse::<u64>().ok())
        .filter(|&n| n > 0)?;
    Some(Diagnostic {
        tool: tool.to_string(),
        message: format!("{tool} reported {n} error(s) without a location"),
        thread: [0; 3],
        block: [0; 3],
        instruction: String::new(),
        file: None,
        line: None,
        repeats: n.saturating_sub(1),
    })
}

/// A milestone's kernel to check: its position among the plan's milestones, its plan, its
/// module and, for Numba, its signature.
pub(super) struct Target<'a> {
    pub(super) milestone: usize,
    pub(super) plan: &'a MilestonePlan,
    pub(super) ptx: &'a str,
    pub(super) numba: Option<&'a Signature>,
}

/// The name a launch's copy of the module gives the kernel: the student's tag in its batch,
/// the milestone, the case.
fn entry(tag: usize, milestone: usize, case: usize) -> String {
    format!("cugrade_s{tag}_m{milestone}_c{case}")
}

/// `ptx` with the entry `from` declared as `to`. Only the declaration changes: a kernel's name
/// can be a file's too (`attention` in `.file 1 "attention.cu"`), and nothing else in a module
/// names an entry. `None` when the module declares no such entry.
pub fn rename_kernel(ptx: &str, from: &str, to: &str) -> Option<String> {
    let declared =
        regex::Regex::new(&format!(r"(\.entry\s+){}(\s*\()", regex::escape(from))).ok()?;
    declared.is_match(ptx).then(|| {
        declared
            .replace(ptx, format!("${{1}}{to}${{2}}"))
            .into_owned()
    })
}

/// One launch of a batch: whose it is, and what it sends.
struct Planned {
    /// The student's part in the batch.
    part: usize,
    milestone: usize,
    /// The kernel's own name (the launch's is `spec.kernel`).
    kernel: String,
    case: String,
    spec: crate::worker::protocol::RunSpec,
    buffers: Vec<Vec<u8>>,
}

/// One launch of a part: its milestone, kernel, case, module (renamed when the batch runs),
/// spec and buffers.
type PartLaunch = (
    usize,
    String,
    String,
    String,
    crate::worker::protocol::RunSpec,
    Vec<Vec<u8>>,
);

/// The launches a tool's process ended (`profiled::ended`), by index in the batch.
type Ended = BTreeMap<usize, Result<(), String>>;

/// One student's launches for compute-sanitizer, planned and owned: a batch runs one or more
/// students' parts in one process per tool (`grade` batches a job's students: a CUDA context
/// per tool per student made context creation, which the driver serialises, a cohort's
/// bottleneck).
#[derive(Default)]
pub struct Part {
    launches: Vec<PartLaunch>,
    /// Why a milestone's cases could not be planned.
    problems: BTreeMap<usize, Vec<String>>,
    /// The milestones checked.
    milestones: BTreeSet<usize>,
}

impl Part {
    /// The milestones whose kernels the part checks.
    pub fn milestones(&self) -> &BTreeSet<usize> {
        &self.milestones
    }
}

/// Plan `targets`' launches: each target's smallest correctness cases.
pub(super) fn plan(targets: &[Target], seed: u64) -> Part {
    let mut part = Part {
        launches: Vec::new(),
        problems: BTreeMap::new(),
        milestones: targets.iter().map(|t| t.milestone).collect(),
    };
    for t in targets {
        let cases = sanitizer::smallest_cases(t.plan);
        if cases.is_empty() {
            part.problems
                .entry(t.milestone)
                .or_default()
                .push("no correctness case is small enough for compute-sanitizer".into());
        }
        for case in cases {
            match case_launch(t.plan, case, &t.plan.kernel, t.numba, seed, LAUNCH_DEADLINE) {
                Ok((spec, buffers)) => part.launches.push((
                    t.milestone,
                    t.plan.kernel.clone(),
                    case.name.clone(),
                    t.ptx.to_string(),
                    spec,
                    buffers,
                )),
                Err(e) => part
                    .problems
                    .entry(t.milestone)
                    .or_default()
                    .push(format!("{}: {e}", case.name)),
            }
        }
    }
    part
}

/// compute-sanitizer's findings for one student, by milestone, once its tools have run (see
/// [`start`]).
pub(super) struct Pending {
    thread: Option<std::thread::JoinHandle<Outcome>>,
    done: Option<Outcome>,
    /// Milestones whose kernel is checked.
    targets: BTreeSet<usize>,
}

/// What the tools found: per part, per milestone, its checks; and the seconds the batch took
/// and waited for the GPU's lock.
pub struct Outcome {
    pub checks: Vec<BTreeMap<usize, Vec<Check>>>,
    pub seconds: f64,
    pub waited: f64,
}

impl Pending {
    /// The milestone's compute-sanitizer checks (waiting for the tools the first time, whose
    /// wall time and lock wait then go to `phases`), or `None` when its kernel was not in the
    /// batch.
    pub(super) fn take(
        &mut self,
        milestone: usize,
        phases: &mut crate::result::Phases,
    ) -> Option<Vec<Check>> {
        if let Some(t) = self.thread.take() {
            let o = t.join().unwrap_or_else(|_| Outcome {
                checks: Vec::new(),
                seconds: 0.0,
                waited: 0.0,
            });
            phases.add(crate::result::Phase::GpuSanitizer, o.seconds, o.waited);
            self.done = Some(o);
        }
        if !self.targets.contains(&milestone) {
            return None;
        }
        let found = self
            .done
            .as_mut()
            .and_then(|o| o.checks.first_mut())
            .and_then(|c| c.remove(&milestone))
            .unwrap_or_else(|| vec![missing()]);
        Some(found)
    }
}

/// The check of a kernel the batch has no result for (its thread ended early).
pub fn missing() -> Check {
    Check::skipped(
        CheckKind::Sanitizer,
        NAME,
        "compute-sanitizer's pass ended without a result for this kernel; the PTX emulator's pass still ran",
    )
}

/// Start compute-sanitizer `cs`'s tools on every target's smallest correctness cases, beside
/// the caller: one process per tool, all launches in it, under the GPU's shared lock.
pub(super) fn start(
    cs: &Path,
    targets: &[Target],
    opts: &Options,
) -> Result<Pending, Infrastructure> {
    let part = plan(targets, opts.seed);
    let milestones = part.milestones.clone();
    let batch = Batch::new(cs, opts.device, opts.gpu.clone(), vec![part]);
    let thread = std::thread::Builder::new()
        .name("compute-sanitizer".into())
        .spawn(move || batch.run())
        .map_err(|e| Infrastructure(format!("cannot start compute-sanitizer's thread: {e}")))?;
    Ok(Pending {
        thread: Some(thread),
        done: None,
        targets: milestones,
    })
}

/// Run compute-sanitizer `cs`'s tools over several students' parts at once, on GPU `device`
/// (lock key `gpu`): one process per tool for all of them.
pub fn run_parts(cs: &Path, device: usize, gpu: Option<String>, parts: Vec<Part>) -> Outcome {
    Batch::new(cs, device, gpu, parts).run()
}

/// A part's problems by milestone, and its milestones.
type PartState = (BTreeMap<usize, Vec<String>>, BTreeSet<usize>);

/// Everything the tools' threads own.
struct Batch {
    cs: PathBuf,
    extra_read: Vec<PathBuf>,
    device: usize,
    gpu: Option<String>,
    modules: Vec<String>,
    /// Per launch, the index of its module.
    module_of: Vec<usize>,
    planned: Vec<Planned>,
    /// Per part: problems by milestone, and its milestones.
    parts: Vec<PartState>,
}

/// What one tool's rounds found: findings by launch, launches that ran, and why others did not.
#[derive(Default)]
struct ToolRun {
    findings: Vec<(usize, Diagnostic)>,
    ran: BTreeSet<usize>,
    problems: Vec<(usize, String)>,
}

impl Batch {
    fn new(cs: &Path, device: usize, gpu: Option<String>, parts: Vec<Part>) -> Batch {
        let mut b = Batch {
            cs: cs.to_path_buf(),
            extra_read: tool_root(cs),
            device,
            gpu,
            modules: Vec::new(),
            module_of: Vec::new(),
            planned: Vec::new(),
            parts: Vec::new(),
        };
        for (p, part) in parts.into_iter().enumerate() {
            let mut cases: BTreeMap<usize, usize> = BTreeMap::new();
            let mut problems = part.problems;
            for (milestone, kernel, case, ptx, mut spec, buffers) in part.launches {
                let c = cases.entry(milestone).or_default();
                let name = entry(p, milestone, *c);
                *c += 1;
                let Some(module) = rename_kernel(&ptx, &kernel, &name) else {
                    problems
                        .entry(milestone)
                        .or_default()
                        .push(format!("{case}: the module declares no kernel `{kernel}`"));
                    continue;
                };
                spec.kernel = name;
                b.modules.push(module);
                b.module_of.push(b.modules.len() - 1);
                b.planned.push(Planned {
                    part: p,
                    milestone,
                    kernel,
                    case,
                    spec,
                    buffers,
                });
            }
            b.parts.push((problems, part.milestones));
        }
        b
    }

    fn run(self) -> Outcome {
        let started = std::time::Instant::now();
        let mut waited = 0.0;
        let runs: Vec<(&str, ToolRun)> = if self.planned.is_empty() {
            Vec::new()
        } else {
            let before = crate::measure::lock::waited_here();
            // The GPU, shared with other correctness runs, never with a timed section.
            let lock = self
                .gpu
                .as_deref()
                .and_then(|k| crate::measure::lock::shared(k, "compute-sanitizer").ok());
            waited = crate::measure::lock::waited_here() - before;
            let this = &self;
            let runs = std::thread::scope(|s| {
                let handles: Vec<_> = TOOLS
                    .iter()
                    .map(|&tool| (tool, s.spawn(move || this.tool(tool))))
                    .collect();
                handles
                    .into_iter()
                    .map(|(tool, h)| (tool, h.join().unwrap_or_default()))
                    .collect()
            });
            drop(lock);
            runs
        };
        let checks = self
            .parts
            .iter()
            .enumerate()
            .map(|(p, (problems, milestones))| {
                self.part_checks(p, problems.clone(), milestones, &runs)
            })
            .collect();
        Outcome {
            checks,
            seconds: started.elapsed().as_secs_f64(),
            waited,
        }
    }

    /// One part's checks, by milestone: its findings, else a pass naming the cases every tool
    /// ran (or a skip saying why none could).
    fn part_checks(
        &self,
        p: usize,
        mut problems: BTreeMap<usize, Vec<String>>,
        milestones: &BTreeSet<usize>,
        runs: &[(&str, ToolRun)],
    ) -> BTreeMap<usize, Vec<Check>> {
        let mine = |i: &usize| self.planned[*i].part == p;
        let mut checks: BTreeMap<usize, Vec<Check>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        // Per milestone: the cases every tool ran.
        let mut ran_all: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        for (i, l) in self.planned.iter().enumerate().filter(|(i, _)| mine(i)) {
            if runs.iter().all(|(_, r)| r.ran.contains(&i)) {
                ran_all
                    .entry(l.milestone)
                    .or_default()
                    .insert(l.case.clone());
            }
        }
        for (tool, r) in runs {
            for (i, d) in r.findings.iter().filter(|(i, _)| mine(i)) {
                let l = &self.planned[*i];
                let key = (
                    l.milestone,
                    d.tool.clone(),
                    d.file.clone(),
                    d.line,
                    d.message.clone(),
                );
                if seen.insert(key) {
                    let mut c = sanitizer_check(d, &l.case);
                    c.message = format!("{} (compute-sanitizer on the GPU)", c.message);
                    c.details =
                        (!d.instruction.is_empty()).then(|| format!("at {}", d.instruction));
                    checks.entry(l.milestone).or_default().push(c);
                }
            }
            for (i, why) in r.problems.iter().filter(|(i, _)| mine(i)) {
                let l = &self.planned[*i];
                problems
                    .entry(l.milestone)
                    .or_default()
                    .push(format!("{} ({tool}): {why}", l.case));
            }
        }
        for &m in milestones {
            if checks.contains_key(&m) {
                continue;
            }
            let ran: Vec<String> = ran_all.remove(&m).unwrap_or_default().into_iter().collect();
            let why = problems.remove(&m).unwrap_or_default();
            checks.insert(m, summary(&ran, &why));
        }
        checks
    }

    /// One tool over every launch: rounds of processes until each launch ran or could not.
    fn tool(&self, tool: &str) -> ToolRun {
        let mut out = ToolRun::default();
        let mut remaining: Vec<usize> = (0..self.planned.len()).collect();
        // Launches whose findings could not be told apart: each runs alone.
        let mut alone: Vec<usize> = Vec::new();
        while !remaining.is_empty() || !alone.is_empty() {
            let round: Vec<usize> = if remaining.is_empty() {
                vec![alone.remove(0)]
            } else {
                std::mem::take(&mut remaining)
            };
            let (log, ended, err) = match self.process(tool, &round) {
                Ok(x) => x,
                Err(e) => {
                    out.problems.extend(round.iter().map(|&i| (i, e.clone())));
                    continue;
                }
            };
            let ran: Vec<usize> = round
                .iter()
                .copied()
                .filter(|i| ended.contains_key(i))
                .collect();
            if ran.is_empty() {
                let why = format!("{tool} ran none of its launches ({})", tail(&err));
                out.problems.extend(round.iter().map(|&i| (i, why.clone())));
                continue;
            }
            let mut unplaced = Vec::new();
            for d in parse(tool, &log) {
                match self.launch_of(&d, &round) {
                    Some(i) => out.findings.push((i, self.tidy(d, i))),
                    None => unplaced.push(d),
                }
            }
            if !unplaced.is_empty() {
                if ran.len() == 1 {
                    out.findings
                        .extend(unplaced.into_iter().map(|d| (ran[0], d)));
                } else {
                    // Said without naming a kernel: run each launch of the round alone.
                    out.findings.retain(|(i, _)| !ran.contains(i));
                    alone.extend(ran.iter().copied());
                    continue;
                }
            }
            out.ran.extend(ran.iter().copied());
            // Those after a launch that ended the process: again, in a fresh one.
            remaining.extend(round.iter().copied().filter(|i| !ended.contains_key(i)));
        }
        out
    }

    /// The launch a finding names by its kernel's name (`cugrade_m<m>_c<c>`).
    fn launch_of(&self, d: &Diagnostic, round: &[usize]) -> Option<usize> {
        let text = format!("{} {}", d.instruction, d.message);
        round.iter().copied().find(|&i| {
            let name = &self.planned[i].spec.kernel;
            regex::Regex::new(&format!(r"\b{}\b", regex::escape(name)))
                .is_ok_and(|r| r.is_match(&text))
        })
    }

    /// A finding as the student reads it: the kernel's own name, not the launch's.
    fn tidy(&self, mut d: Diagnostic, i: usize) -> Diagnostic {
        let p = &self.planned[i];
        d.instruction = d.instruction.replace(&p.spec.kernel, &p.kernel);
        d.message = d.message.replace(&p.spec.kernel, &p.kernel);
        d
    }

    /// compute-sanitizer's arguments: `tool` into `log`, on cugrade itself running `job`.
    fn args(&self, tool: &str, log: &Path, job: &Path) -> Result<Vec<OsString>, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut args: Vec<OsString> = vec![
            "--tool".into(),
            tool.into(),
            "--log-file".into(),
            log.into(),
            // Every launch of the batch shares the process: room for all their findings.
            "--print-limit".into(),
            "1000".into(),
        ];
        if tool == "racecheck" {
            // Hazards between lanes of one warp (warp-synchronous code without __syncwarp)
            // are races since Volta: report warnings too.
            args.extend(["--racecheck-report".into(), "analysis".into()]);
        }
        args.extend([exe.into(), "__profile-kernel".into(), job.into()]);
        Ok(args)
    }

    /// One process of `tool` over launches `round`: its log, the launches its progress file
    /// records as ended, and what it printed.
    fn process(&self, tool: &str, round: &[usize]) -> Result<(String, Ended, String), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let job_path = dir.path().join("job.bin");
        let progress = dir.path().join("progress");
        // The round's modules, renumbered.
        let mut used: Vec<usize> = round.iter().map(|&i| self.module_of[i]).collect();
        used.sort_unstable();
        used.dedup();
        let job = Job {
            device: self.device,
            modules: used.len(),
            launches: round
                .iter()
                .map(|&i| Launch {
                    module: used.binary_search(&self.module_of[i]).unwrap_or(0),
                    spec: self.planned[i].spec.clone(),
                })
                .collect(),
            extra_read: self.extra_read.clone(),
            progress: Some(progress.clone()),
        };
        let modules: Vec<&str> = used.iter().map(|&m| self.modules[m].as_str()).collect();
        let buffers: Vec<Vec<Vec<u8>>> = round
            .iter()
            .map(|&i| self.planned[i].buffers.clone())
            .collect();
        profiled::write_job(&job_path, &job, &modules, &buffers)
            .map_err(|e| format!("cannot write the sanitizer's job: {e}"))?;
        let log = dir.path().join(format!("{tool}.log"));
        let limit = process_timeout(round.len());
        let args = self.args(tool, &log, &job_path)?;
        let run = run_tool(&self.cs, args, dir.path(), &log, limit)?;
        let (finished, err, text) = (!run.timed_out, run.stderr, run.log);
        let ended: Ended = profiled::ended(&std::fs::read_to_string(&progress).unwrap_or_default())
            .into_iter()
            .filter_map(|(k, v)| round.get(k).map(|&i| (i, v)))
            .collect();
        if !finished && ended.is_empty() {
            return Err(format!(
                "{tool} did not finish within {} s",
                limit.as_secs()
            ));
        }
        if !text.contains("=========") {
            return Err(format!("{tool} wrote no report ({})", tail(&err)));
        }
        Ok((text, ended, err))
    }
}

const NAME: &str = "sanitizer (GPU)";

/// The end of what a process printed, for a reason.
fn tail(text: &str) -> String {
    let t: Vec<char> = text.trim().chars().rev().take(400).collect();
    t.into_iter().rev().collect()
}

/// No finding: a passing check naming the cases, or a skipped one when no case could run.
fn summary(ran: &[String], problems: &[String]) -> Vec<Check> {
    if ran.is_empty() {
        return vec![Check::skipped(
            CheckKind::Sanitizer,
            NAME,
            format!(
                "compute-sanitizer could not check the kernel ({}); the PTX emulator's pass still ran",
                problems.join("; ")
            ),
        )];
    }
    let mut c = Check::pass(
        CheckKind::Sanitizer,
        NAME,
        format!(
            "{TOOL} found nothing on case{} {}",
            if ran.len() > 1 { "s" } else { "" },
            ran.join(", ")
        ),
    );
    if !problems.is_empty() {
        c = c.with_details(format!("not run: {}", problems.join("; ")));
    }
    vec![c]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_s_copy_renames_the_entry_alone() {
        let ptx = ".version 8.0\n.file 1 \"attention.cu\"\n.visible .entry attention(\n.param .u64 attention_param_0\n)\n{\nld.param.u64 %rd1, [attention_param_0];\n}\n";
        let out = rename_kernel(ptx, "attention", "cugrade_m0_c1").unwrap();
        assert!(out.contains(".entry cugrade_m0_c1(\n"), "{out}");
        // The file keeps its name; the parameters keep theirs.
        assert!(out.contains(".file 1 \"attention.cu\""), "{out}");
        assert!(out.contains("[attention_param_0]"), "{out}");
        assert_eq!(rename_kernel(ptx, "attn", "x"), None);
        assert_eq!(rename_kernel(ptx, "attention_param_0", "x"), None);
    }

    /// Reports in the shapes compute-sanitizer 2023-2025 prints (and the older `at 0x.. in
    /// file:line:function` form).
    #[test]
    fn findings_are_read_from_each_tool_s_report() {
        let memcheck = "========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vector_add(const float *, const float *, float *, int)+0x1b0 in /tmp/cugrade-worker-1/src/add.cu:9
=========     by thread (40,0,0) in block (3,0,0)
=========     Address 0x7f1c00000a00 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c00000000 of size 2560 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f4d5b] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuCtxSynchronize.
=========
========= ERROR SUMMARY: 2 errors
";
        let d = parse("memcheck", memcheck);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].message, "Invalid __global__ write of size 4 bytes");
        assert_eq!((d[0].file.as_deref(), d[0].line), (Some("add.cu"), Some(9)));
        assert_eq!((d[0].thread, d[0].block), ([40, 0, 0], [3, 0, 0]));
        assert!(
            d[0].instruction.starts_with("vector_add("),
            "{}",
            d[0].instruction
        );

        let racecheck = "========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at reduce_shared(const float *, float *, int)+0x2a0 in /tmp/w/reduce.cu:31
=========     and Read access at reduce_shared(const float *, float *, int)+0x2c0 in /tmp/w/reduce.cu:30 [240 hazards]
=========
========= Warning: Race reported between Write access at 0x00000150 in /tmp/w/reduce.cu:44:reduce_shared(const float *, float *, int)
=========     and Read access at 0x00000170 in /tmp/w/reduce.cu:44:reduce_shared(const float *, float *, int) [31 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
";
        let d = parse("racecheck", racecheck);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            d[0].message,
            "Race reported between Write access at reduce.cu:31 and Read access at reduce.cu:30"
        );
        assert_eq!(
            (d[0].file.as_deref(), d[0].line, d[0].repeats),
            (Some("reduce.cu"), Some(31), 239)
        );
        assert_eq!((d[1].line, d[1].repeats), (Some(44), 30));

        let synccheck = "========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at reduce(const float *, float *, int)+0x150 in reduce.cu:18
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";
        let d = parse("synccheck", synccheck);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.starts_with("Barrier error detected"));
        assert_eq!(d[0].line, Some(18));

        // The harness's own download of memory no kernel wrote (as for every Numba kernel on
        // an H100, 2026-11-24) is no finding; a kernel's uninitialized read is.
        let host = "========= COMPUTE-SANITIZER
========= Host API memory access error at host access to 0x7f5082a00000 of size 8 bytes
=========     Uninitialized access at 0x7f5082a00000 on access by cudaMemcopy source.
=========     Host Frame: cuMemcpyDtoH_v2 [0x2c0f4] in libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
";
        assert!(parse("initcheck", host).is_empty());
        let read = "========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at k(float *)+0x90 in k.cu:3
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";
        assert_eq!(parse("initcheck", read).len(), 1);
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert!(parse("initcheck", clean).is_empty());
        // A summary that counts errors it did not list still fails.
        let terse = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 3 errors\n";
        assert_eq!(parse("initcheck", terse)[0].repeats, 2);
        // What the kernel prints never reaches the log file; a line without the prefix is
        // ignored anyway.
        assert!(
            parse(
                "memcheck",
                "Invalid __global__ write\nERROR SUMMARY: 0 errors\n"
            )
            .is_empty()
        );
    }
}
