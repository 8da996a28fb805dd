//! Resource limits: a backstop under the parent's own deadlines and output caps.
//!
//! `RLIMIT_DATA`, not `RLIMIT_AS`: the CUDA driver reserves address ranges far larger than
//! any RAM (UVM), which `RLIMIT_AS` would refuse, while `RLIMIT_DATA` counts only private
//! writable memory, i.e. what a host-side allocation bomb would use. No `RLIMIT_NPROC`: it
//! counts every process of the (shared) uid, so it would fail workers for unrelated reasons.

use super::{Layer, Policy, layer};
use nix::sys::resource::{Resource, setrlimit};

pub(super) fn set(policy: &Policy) -> Layer {
    let cpu = policy.cpu_seconds;
    // Soft then hard a second later: SIGXCPU first, SIGKILL if it is ignored.
    let wanted: [(Resource, &str, u64, u64); 5] = [
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
    ];
    let mut set = Vec::new();
    let mut failed = Vec::new();
    for (res, name, soft, hard) in wanted {
        // 0 means "not requested", except for core dumps, which are always off.
        if soft == 0 && res != Resource::RLIMIT_CORE {
            continue;
        }
        match lower(res, soft, hard) {
            Ok(()) => set.push(format!("{name}={soft}")),
            Err(e) => failed.push(format!("{name}: {e}")),
        }
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
