//! A launch's blocks' outputs merged into one report, in block order so that reports do not
//! depend on how blocks were scheduled: metrics summed, repeats of a diagnostic folded, device
//! printf concatenated (up to `PRINTF_CAP`), the first fault and deadline diagnostic kept. A
//! single-device launch merges every block; a rank set merges each rank's blocks on their own.

use super::decode::Program;
use super::exec::{self, BlockOut, DiagKey, PRINTF_CAP};
use crate::backend::{Diagnostic, Metrics};
use std::collections::HashMap;
use std::io::Write;

#[derive(Default)]
pub(super) struct Merge {
    pub metrics: Metrics,
    pub diags: Vec<Diagnostic>,
    index: HashMap<DiagKey, usize>,
    pub printf: Vec<u8>,
    pub fault: Option<String>,
    pub hung: Option<Diagnostic>,
    pub hot: HashMap<(u8, u32), u64>,
}

impl Merge {
    /// Add one block's output; true when the block faulted (the launch stops).
    pub fn add(&mut self, o: BlockOut) -> bool {
        if self.hung.is_none() {
            self.hung = o.hung.clone();
        }
        for (k, v) in &o.hot {
            *self.hot.entry(*k).or_default() += v;
        }
        let m = o.metrics;
        let metrics = &mut self.metrics;
        metrics.lane_instructions += m.lane_instructions;
        metrics.warp_instructions += m.warp_instructions;
        metrics.global_load_requests += m.global_load_requests;
        metrics.global_load_sectors += m.global_load_sectors;
        metrics.global_store_requests += m.global_store_requests;
        metrics.global_store_sectors += m.global_store_sectors;
        metrics.global_load_bytes_requested += m.global_load_bytes_requested;
        metrics.global_store_bytes_requested += m.global_store_bytes_requested;
        metrics.shared_requests += m.shared_requests;
        metrics.shared_bank_conflicts += m.shared_bank_conflicts;
        metrics.branches += m.branches;
        metrics.divergent_branches += m.divergent_branches;
        for (key, d) in o.diags {
            self.diag(key, d);
        }
        if self.printf.len() < PRINTF_CAP + 64 {
            self.printf.extend_from_slice(&o.printf);
        }
        let stop = o.fault.is_some();
        if self.fault.is_none() {
            self.fault = o.fault;
        }
        stop
    }

    /// Add one diagnostic, folded into an earlier one of the same key.
    pub fn diag(&mut self, key: DiagKey, d: Diagnostic) {
        match self.index.get(&key) {
            Some(&i) => self.diags[i].repeats += d.repeats + 1,
            None => {
                self.index.insert(key, self.diags.len());
                self.diags.push(d);
            }
        }
    }
}

/// Write a launch's device printf (cut at `PRINTF_CAP`) to `sink`, or to stdout without one.
pub(super) fn emit_printf(sink: &mut Option<Vec<u8>>, mut printf: Vec<u8>) {
    if printf.len() > PRINTF_CAP + 64 {
        printf.truncate(PRINTF_CAP);
        printf.extend_from_slice(b"\n[output truncated]\n");
    }
    if printf.is_empty() {
        return;
    }
    match sink {
        Some(s) => s.extend_from_slice(&printf),
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&printf);
            let _ = out.flush();
        }
    }
}

/// Per metric of `exec::HOT_METRICS`, the source line that costs it most (instructions of one
/// line summed), with its share of the metric's total; lines without `.loc` are left out.
pub(super) fn hot_lines(
    prog: &Program,
    hot: &HashMap<(u8, u32), u64>,
) -> Vec<crate::backend::HotLine> {
    let mut out = Vec::new();
    for (kind, metric) in exec::HOT_METRICS.iter().enumerate() {
        let mut by_line: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
        let mut total = 0u64;
        for (&(k, pc), &v) in hot {
            if usize::from(k) != kind {
                continue;
            }
            total += v;
            match prog.locs.get(pc as usize) {
                Some(&(file, line)) if line > 0 => *by_line.entry((file, line)).or_default() += v,
                _ => {}
            }
        }
        // The most, then the first line: the same answer on every run.
        let best = by_line
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
        if let (Some((&(file, line), &v)), true) = (best, total > 0) {
            out.push(crate::backend::HotLine {
                metric: (*metric).to_string(),
                file: prog.files.get(&file).cloned().unwrap_or_default(),
                line,
                share: v as f64 / total as f64,
            });
        }
    }
    out
}
