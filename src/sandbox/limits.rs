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
//!
//! `RLIMIT_DATA` alone leaves ways around it: a stack (the main thread's grows without it, and
//! a piece of it split off by `mprotect` grows again, as far as the address space allows), and
//! shared mappings. Seccomp refuses the easy ones (`MAP_SHARED|MAP_ANONYMOUS`,
//! `MAP_GROWSDOWN`); for the rest, a worker without a GPU also gets `RLIMIT_AS`: its data limit
//! plus room for what is mapped but not data (the libraries, malloc's reserved arenas, thread
//! stacks' guard pages). A GPU worker cannot have it: the driver reserves address ranges larger
//! than the machine's memory.

use super::{Layer, Policy, layer};
use nix::sys::resource::{Resource, setrlimit};

/// The address space a worker without a GPU may map beyond its data limit: 4 GiB for the
/// libraries (NVRTC, LLVM, NumPy) and what they reserve, and 128 MiB per CPU for malloc's
/// arenas (one per thread under contention, each reserving 64 MiB that only counts as data once
/// used) and thread stacks.
fn address_margin() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(8, |n| n.get()) as u64;
    (4u64 << 30).saturating_add(cpus.saturating_mul(128 << 20))
}

/// `RLIMIT_AS` for `policy`: 0 (unset) for a GPU worker or without a data limit.
pub(super) fn address_space(policy: &Policy) -> u64 {
    if policy.gpu || policy.data_bytes == 0 {
        0
    } else {
        policy.data_bytes.saturating_add(address_margin())
    }
}

pub(super) fn set(policy: &Policy, own_count: bool) -> Layer {
    let cpu = policy.cpu_seconds;
    let nproc = if own_count { policy.processes } else { 0 };
    let space = address_space(policy);
    // Soft then hard a second later: SIGXCPU first, SIGKILL if it is ignored.
    let wanted: [(Resource, &str, u64, u64); 9] = [
        (Resource::RLIMIT_CORE, "core", 0, 0),
        (
            Resource::RLIMIT_DATA,
            "data",
            policy.data_bytes,
            policy.data_bytes,
        ),
        (Resource::RLIMIT_AS, "as", space, space),
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
