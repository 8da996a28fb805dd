//! The parent's half of the sandbox: what a worker starts with. A scrubbed environment (no
//! tokens, no paths to the instructor's files) and no descriptors beyond stdin, stdout and
//! stderr (no inherited handle to a results file, a socket, another worker's pipe).

use super::Policy;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Variables passed through from the parent when set: what the loader, the CUDA driver and
/// our own output need. Everything else is dropped.
const PASSED_THROUGH: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NO_COLOR",
];

/// The environment a worker gets, given the parent's.
pub(super) fn worker_env(
    policy: &Policy,
    get: impl Fn(&str) -> Option<OsString>,
) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> = PASSED_THROUGH
        .iter()
        .filter_map(|k| get(k).map(|v| (k.to_string(), v)))
        .collect();
    let temp = policy.temp_dir.as_os_str().to_owned();
    env.push(("HOME".into(), temp.clone()));
    env.push(("TMPDIR".into(), temp));
    env.push((
        "CUDA_CACHE_PATH".into(),
        policy.temp_dir.join("cuda-cache").into_os_string(),
    ));
    env.push(("LANG".into(), "C".into()));
    // NVLink multicast stays off in every process that may load NCCL (`backend::cuda::nccl`):
    // on shared hosts it can take the GPUs out of service.
    let (k, v) = crate::backend::cuda::NVLS_OFF;
    env.push((k.into(), v.into()));
    env
}

/// Prepare the worker's `Command` before spawning it: environment, working directory,
/// descriptors. Call it before adding the worker's own variables (it clears the rest).
///
/// The working directory becomes the temp dir, so that nothing in the worker (NVRTC's
/// quoted-include lookup included) resolves a relative path against the cohort. Arguments
/// that name files must therefore be absolute.
pub fn prepare_command(cmd: &mut Command, policy: &Policy) {
    cmd.env_clear();
    for (k, v) in worker_env(policy, |k| std::env::var_os(k)) {
        cmd.env(k, v);
    }
    if policy.temp_dir.is_dir() {
        cmd.current_dir(&policy.temp_dir);
    }
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
    // functions (close_range, getrlimit, fcntl); it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            mark_inherited_fds_cloexec();
            Ok(())
        });
    }
}

/// Mark every descriptor above 2 close-on-exec, so the worker starts with stdio only.
///
/// Close-on-exec rather than closed: std's spawn keeps a CLOEXEC pipe open until exec to
/// report an exec failure to the parent; closing it here would turn a failed exec into a
/// silent success.
fn mark_inherited_fds_cloexec() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range is a plain syscall; on success nothing else is needed.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if rc == 0 {
        return;
    }
    // Kernels before 5.11: walk the descriptor table up to the limit, capped so a huge
    // RLIMIT_NOFILE cannot make the spawn crawl.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a valid struct.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        1024
    };
    for fd in 3..max {
        // SAFETY: fcntl on a possibly-closed fd just returns EBADF.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keeps_only_what_workers_need() {
        let policy = Policy {
            temp_dir: "/tmp/w1".into(),
            ..Policy::default()
        };
        let parent = |k: &str| -> Option<OsString> {
            match k {
                "PATH" => Some("/usr/bin".into()),
                "CUDA_VISIBLE_DEVICES" => Some("1".into()),
                "AWS_SECRET_ACCESS_KEY" | "GITHUB_TOKEN" => Some("secret".into()),
                _ => None,
            }
        };
        let env = worker_env(&policy, parent);
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "PATH",
                "CUDA_VISIBLE_DEVICES",
                "HOME",
                "TMPDIR",
                "CUDA_CACHE_PATH",
                "LANG",
                "NCCL_NVLS_ENABLE"
            ]
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("HOME").unwrap(), "/tmp/w1");
        assert_eq!(get("CUDA_CACHE_PATH").unwrap(), "/tmp/w1/cuda-cache");
        assert_eq!(get("NCCL_NVLS_ENABLE").unwrap(), "0");
        assert!(env.iter().all(|(_, v)| v != "secret"));
    }
}
