//! Resource limits: a backstop under the parent's own deadlines and output caps.
//!
//! `RLIMIT_DATA`, not `RLIMIT_AS`: the CUDA driver reserves address ranges far larger than
//! any RAM (UVM), which `RLIMIT_AS` would refuse, while `RLIMIT_DATA` counts only private
//! writable memory, i.e. what a host-side allocation bomb would use. `RLIMIT_NPROC` (threads
//! and processes) only where the kernel counts it for this worker alone: when the worker runs
//! as a uid of its own, or in a user namespace of its own (the kernel counts per user
//! namespace); with the grader's shared uid it would fail workers for unrelated reasons.
//! `RLIMIT_RTPRIO` and `RLIMIT_NICE` at 0: no real-time scheduling, no priority above the
//! grader's.

use super::{Layer, Policy, layer};
use nix::sys::resource::{Resource, setrlimit};

pub(super) fn set(policy: &Policy, own_count: bool) -> Layer {
    let cpu = policy.cpu_seconds;
    let nproc = if own_count { policy.processes } else { 0 };
    // Soft then hard a second later: SIGXCPU first, SIGKILL if it is ignored.
    let wanted: [(Resource, &str, u64, u64); 8] = [
        (Resource::RLIMIT_CORE, "core", 0, 0),
        (
            Resource::RLIMIT_DATA,
            "data",
            policy.data_bytes,
            policy.data_bytes,
        ),
        (Resource::RLIMIT_CPU, "cpu", cpu, cpu.saturating_add(1)),
        (
            Resource::RLIMIT_FSIZE,
            "fsize",
            policy.file_bytes,
            policy.file_bytes,
        ),
        (
            Resource::RLIMIT_NOFILE,
            "nofile",
            policy.open_files,
            policy.open_files,
        ),
        (Resource::RLIMIT_NPROC, "nproc", nproc, nproc),
        (Resource::RLIMIT_RTPRIO, "rtprio", 0, 0),
        (Resource::RLIMIT_NICE, "nice", 0, 0),
    ];
    let mut set = Vec::new();
    let mut failed = Vec::new();
    for (res, name, soft, hard) in wanted {
        // 0 means "not requested", except for the limits that are always 0.
        let always = matches!(
            res,
            Resource::RLIMIT_CORE | Resource::RLIMIT_RTPRIO | Resource::RLIMIT_NICE
        );
        if soft == 0 && !always {
            continue;
        }
        match lower(res, soft, hard) {
            Ok(()) => set.push(format!("{name}={soft}")),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    if policy.processes > 0 && nproc == 0 {
        failed.push(
            "nproc: not set (the worker shares the grader's uid outside a user namespace, \
             where the kernel would count every process of that uid)"
                .into(),
        );
    }
    if failed.is_empty() {
        Layer::active(layer::RLIMITS, set.join(" "))
    } else {
        Layer::degraded(
            layer::RLIMITS,
            format!("set {}; failed {}", set.join(" "), failed.join(", ")),
        )
    }
}

/// Set a limit, never raising the hard limit we were given (that would fail anyway).
fn lower(res: Resource, soft: u64, hard: u64) -> nix::Result<()> {
    let (_, cur_hard) = nix::sys::resource::getrlimit(res)?;
    let hard = hard.min(cur_hard);
    setrlimit(res, soft.min(hard), hard)
}
