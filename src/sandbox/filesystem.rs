//! Landlock: what the worker may open. Read-only access to what the loader, NVRTC and the
//! driver need; read-write to the worker's temp dir; nothing else. Also no TCP at all and no
//! signals or abstract sockets outside the sandbox, where the kernel's ABI has them.

use super::{Layer, Policy, layer};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus,
    Scope,
};
use std::path::{Path, PathBuf};

/// The newest ABI this code was written and tested against (Linux 6.12+).
const TARGET_ABI: ABI = ABI::V7;

/// A path and what may be done beneath it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Grant {
    pub path: PathBuf,
    pub access: BitFlags<AccessFs>,
}

fn read_exec() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
}

fn read_only() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Library dirs the dynamic loader, NVRTC and the CUDA driver may load from.
fn library_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = [
        "/lib",
        "/lib32",
        "/lib64",
        "/usr/lib",
        "/usr/lib32",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/local/lib64",
        "/usr/local/nvidia",
        "/opt",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    // /usr/local/cuda, /usr/local/cuda-13.0, ...
    if let Ok(entries) = std::fs::read_dir("/usr/local") {
        let mut cuda: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("cuda"))
            .map(|e| e.path())
            .collect();
        cuda.sort();
        roots.extend(cuda);
    }
    if let Some(llp) = std::env::var_os("LD_LIBRARY_PATH") {
        roots.extend(std::env::split_paths(&llp));
    }
    roots
}

/// What the worker may read (and run, where Landlock says so) besides `/proc`, `/sys`, `/dev`
/// and its temp dir: the library dirs, the policy's extra paths, the executable and the loader
/// cache. These are what the mount view shows; a path refused for Landlock (it would expose a
/// protected path) is left out of it too, with the warning.
pub(super) fn read_roots(policy: &Policy, warnings: &mut Vec<String>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = library_roots();
    roots.extend(policy.extra_read.iter().cloned());
    if let Ok(exe) = std::env::current_exe() {
        roots.push(exe);
    }
    roots.push("/etc/ld.so.cache".into());
    roots
        .into_iter()
        .filter(|p| {
            let grant = Grant {
                path: p.clone(),
                access: read_only(),
            };
            match refusal(&grant, &policy.protected) {
                Some(why) => {
                    warnings.push(format!("not shown: {why}"));
                    false
                }
                None => true,
            }
        })
        .collect()
}

/// Every rule the policy asks for, before existence and protection checks.
pub(super) fn grants(policy: &Policy) -> Vec<Grant> {
    let mut g: Vec<Grant> = library_roots()
        .into_iter()
        .chain(policy.extra_read.iter().cloned())
        .map(|path| Grant {
            path,
            access: read_exec(),
        })
        .collect();
    // The executable itself: the loader and backtraces reopen it.
    if let Ok(exe) = std::env::current_exe() {
        g.push(Grant {
            path: exe,
            access: AccessFs::ReadFile | AccessFs::Execute,
        });
    }
    // Only the loader cache from /etc: the rest (passwd, shadow, ssh keys, ...) stays closed,
    // which is what makes `#include "/etc/passwd"` fail in NVRTC.
    g.push(Grant {
        path: "/etc/ld.so.cache".into(),
        access: AccessFs::ReadFile.into(),
    });
    // The driver and NVRTC read /proc (self/maps, driver/nvidia, cpuinfo) and /sys (PCI,
    // NUMA topology). Other processes' private entries stay closed: Landlock forbids ptrace
    // access outside the domain, which is what /proc/PID/{mem,environ,root} check.
    for p in ["/proc", "/sys"] {
        g.push(Grant {
            path: p.into(),
            access: read_only(),
        });
    }
    // cuInit names its threads by writing /proc/self/task/<tid>/comm and fails with error 304
    // (cudaErrorOperatingSystem) if it cannot. Only our own task dir: writing there changes
    // nothing outside this process.
    if let Ok(task) = std::fs::canonicalize("/proc/self/task") {
        g.push(Grant {
            path: task,
            // Truncate too: fopen(path, "w") opens with O_TRUNC.
            access: AccessFs::ReadFile
                | AccessFs::ReadDir
                | AccessFs::WriteFile
                | AccessFs::Truncate,
        });
    }
    g.push(Grant {
        path: "/dev/null".into(),
        access: AccessFs::ReadFile | AccessFs::WriteFile,
    });
    // /dev/zero only for a GPU worker (the closed driver's needs are not known): mapped shared,
    // it is shared memory (shmem) that no rlimit counts, and NVRTC, Numba, CPython and NumPy
    // never open it (it is not in the view either, see `mounts`).
    let zero = policy.gpu.then_some("/dev/zero");
    for p in ["/dev/urandom", "/dev/random"].into_iter().chain(zero) {
        g.push(Grant {
            path: p.into(),
            access: AccessFs::ReadFile.into(),
        });
    }
    if policy.gpu {
        for dev in nvidia_devices() {
            g.push(Grant {
                path: dev,
                access: AccessFs::ReadFile
                    | AccessFs::WriteFile
                    | AccessFs::IoctlDev
                    | AccessFs::ReadDir,
            });
        }
    }
    // Everything except Execute: the worker writes logs, the CUDA JIT cache, scratch files,
    // but has no reason to run what it wrote.
    g.push(Grant {
        path: policy.temp_dir.clone(),
        access: AccessFs::from_all(TARGET_ABI) & !(AccessFs::Execute | AccessFs::IoctlDev),
    });
    g
}

/// `/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/nvidia-caps/`, ...
fn nvidia_devices() -> Vec<PathBuf> {
    let mut devs: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("nvidia"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    devs.sort();
    devs
}

/// Why a grant is refused, if it is: it would expose a protected path, or it is not an
/// absolute path (a relative `LD_LIBRARY_PATH` entry would mean "wherever the cwd is").
pub(super) fn refusal(grant: &Grant, protected: &[PathBuf]) -> Option<String> {
    if !grant.path.is_absolute() {
        return Some(format!("{} is not an absolute path", grant.path.display()));
    }
    let root = canonical(&grant.path);
    if root == Path::new("/") {
        return Some("granting / would expose everything".into());
    }
    protected
        .iter()
        .map(|p| canonical(p))
        .find(|p| p.starts_with(&root))
        .map(|p| {
            format!(
                "{} contains the protected path {}",
                root.display(),
                p.display()
            )
        })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Apply the ruleset to the calling thread (and the threads it starts later).
pub(super) fn restrict(policy: &Policy, threads: usize) -> Layer {
    let mut warnings = Vec::new();
    if policy.temp_dir.as_os_str().is_empty() || !policy.temp_dir.is_dir() {
        warnings.push(format!(
            "temp dir {:?} does not exist: the worker can write nowhere",
            policy.temp_dir
        ));
    }
    let mut rules = Vec::new();
    for grant in grants(policy) {
        if let Some(why) = refusal(&grant, &policy.protected) {
            warnings.push(format!("not granted: {why}"));
            continue;
        }
        // Missing paths (no /lib32, no GPU) are simply not granted.
        if let Ok(fd) = PathFd::new(&grant.path) {
            rules.push((grant, fd));
        }
    }

    pin_task_dir();
    let status = match build_and_restrict(rules, policy.keep_ipc) {
        Ok(s) => s,
        Err(e) => {
            return Layer::degraded(
                layer::LANDLOCK,
                format!("could not build the ruleset: {e}; file access is unconfined"),
            );
        }
    };
    let abi = kernel_abi();
    let mut missing = Vec::new();
    if abi < 4 {
        missing.push("TCP rules (ABI 4)");
    }
    if abi < 5 {
        missing.push("device ioctl rules (ABI 5)");
    }
    if abi < 6 {
        missing.push("signal and abstract-socket scoping (ABI 6)");
    }
    if threads > 1 {
        warnings.push(format!(
            "{} already running stay unconfined",
            super::threads_phrase(threads - 1)
        ));
    }
    let what = format!("ABI {abi}: system libraries read-only, writes only to the temp dir");
    match status.ruleset {
        RulesetStatus::NotEnforced => Layer::degraded(
            layer::LANDLOCK,
            format!(
                "the kernel does not enforce Landlock (ABI {abi}); file access is unconfined. \
                 Linux 5.13+ with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= list"
            ),
        ),
        RulesetStatus::FullyEnforced if warnings.is_empty() => Layer::active(
            layer::LANDLOCK,
            if policy.keep_ipc {
                format!("{what}; sockets and signals left to Nsight Compute")
            } else {
                format!("{what}; no TCP, no signals out")
            },
        ),
        _ => {
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!("kernel lacks {}", missing.join(", ")));
            }
            why.extend(warnings);
            Layer::degraded(layer::LANDLOCK, format!("{what}; but {}", why.join("; ")))
        }
    }
}

/// Keep `/proc/self/task` open for the life of the process.
///
/// Landlock attaches rules to inodes, and procfs makes a fresh inode whenever it looks up a
/// dentry that the cache has dropped; an open descriptor keeps the dentry, and so the inode
/// the rule is on, alive.
fn pin_task_dir() {
    static PINNED: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    PINNED.get_or_init(|| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open("/proc/self/task")
            .ok()
    });
}

fn build_and_restrict(
    rules: Vec<(Grant, PathFd)>,
    keep_ipc: bool,
) -> Result<RestrictionStatus, RulesetError> {
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))?;
    let ruleset = if keep_ipc {
        ruleset
    } else {
        ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))?
            .scope(Scope::from_all(TARGET_ABI))?
    };
    let mut created = ruleset.create()?;
    for (grant, fd) in rules {
        let access = if std::fs::metadata(&grant.path).is_ok_and(|m| !m.is_dir()) {
            // Directory rights on a file are an error; keep the ones that apply to files.
            grant.access & !(from_dir_only() | AccessFs::ReadDir)
        } else {
            grant.access
        };
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
    created.restrict_self()
}

/// Rights that only make sense on directories.
fn from_dir_only() -> BitFlags<AccessFs> {
    AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeChar
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeBlock
        | AccessFs::MakeSym
        | AccessFs::Refer
}

/// The kernel's Landlock ABI version: 0 when Landlock is absent or disabled.
pub(super) fn kernel_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: null attr, size 0, VERSION flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(p: &str) -> Grant {
        Grant {
            path: p.into(),
            access: read_exec(),
        }
    }

    #[test]
    fn a_library_root_above_a_protected_path_is_refused() {
        let why = refusal(&grant("/opt"), &["/opt/course/rubrics".into()]).unwrap();
        assert!(why.contains("protected path /opt/course/rubrics"), "{why}");
        assert!(refusal(&grant("/opt/cuda"), &["/opt/course".into()]).is_none());
    }

    #[test]
    fn relative_and_root_grants_are_refused() {
        assert!(
            refusal(&grant("lib"), &[])
                .unwrap()
                .contains("not an absolute path")
        );
        assert!(
            refusal(&grant("/"), &[])
                .unwrap()
                .contains("expose everything")
        );
    }

    #[test]
    fn etc_is_not_granted_beyond_the_loader_cache() {
        let p = Policy {
            temp_dir: "/tmp/w".into(),
            ..Policy::default()
        };
        let g = grants(&p);
        let etc: Vec<_> = g.iter().filter(|g| g.path.starts_with("/etc")).collect();
        assert_eq!(etc.len(), 1);
        assert_eq!(etc[0].path, Path::new("/etc/ld.so.cache"));
        // Only the temp dir is writable.
        let writable: Vec<_> = g
            .iter()
            .filter(|g| g.access.contains(AccessFs::MakeReg))
            .collect();
        assert_eq!(writable.len(), 1);
        assert_eq!(writable[0].path, Path::new("/tmp/w"));
        assert!(!writable[0].access.contains(AccessFs::Execute));
    }

    #[test]
    fn gpu_devices_are_granted_only_when_asked() {
        let p = Policy {
            temp_dir: "/tmp/w".into(),
            gpu: false,
            ..Policy::default()
        };
        assert!(
            grants(&p)
                .iter()
                .all(|g| !g.access.contains(AccessFs::IoctlDev))
        );
    }

    /// Landlock on one thread (it confines only the calling thread): files stay confined
    /// either way; TCP is cut unless the policy keeps IPC for Nsight Compute.
    #[test]
    fn keep_ipc_leaves_tcp_but_not_files() {
        if kernel_abi() < 4 {
            eprintln!("SKIPPED: Landlock ABI {} has no TCP rules", kernel_abi());
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let try_in_confined_thread = |keep_ipc: bool| {
            std::thread::spawn(move || {
                let temp = tempfile::tempdir().unwrap();
                let policy = Policy {
                    temp_dir: temp.path().to_path_buf(),
                    keep_ipc,
                    ..Policy::default()
                };
                let _layer = restrict(&policy, 1);
                let file = std::fs::read(env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml");
                let tcp = std::net::TcpStream::connect(addr);
                (file.is_ok(), tcp.is_ok())
            })
            .join()
            .unwrap()
        };
        assert_eq!(try_in_confined_thread(true), (false, true));
        assert_eq!(try_in_confined_thread(false), (false, false));
    }
}
