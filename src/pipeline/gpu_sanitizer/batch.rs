//! One batch of launches under the tools: the launches planned into modules, one process per
//! tool (a fresh one after a launch that ends it), and the findings placed back on each
//! student's milestones.

use super::report::parse;
use super::{
    Ended, NAME, Outcome, Part, Planned, TOOL, TOOLS, entry, process_timeout, rename_kernel,
};
use crate::backend::Diagnostic;
use crate::pipeline::sanitizer::sanitizer_check;
use crate::result::{Check, CheckKind};
use crate::worker::nsight::{run_tool, tool_root};
use crate::worker::profiled::{self, Job, Launch};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A part's problems by milestone, and its milestones.
type PartState = (BTreeMap<usize, Vec<String>>, BTreeSet<usize>);

/// Everything the tools' threads own.
pub(super) struct Batch {
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
    pub(super) fn new(cs: &Path, device: usize, gpu: Option<String>, parts: Vec<Part>) -> Batch {
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

    pub(super) fn run(self) -> Outcome {
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
