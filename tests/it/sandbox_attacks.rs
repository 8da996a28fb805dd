//! The sandbox against real attacks, on the real kernel.
//!
//! Each test re-executes this test binary as a child (`--exact sandbox_attacks::sandboxed_child`) with the
//! attack named in `CUGRADE_SANDBOX_CHILD`, spawned the way the grader spawns workers
//! (`sandbox::prepare_command`). The child forks once so that the sandboxed code runs in a
//! single-threaded process, as the real worker does (libtest runs every test on a thread of
//! its own), applies the sandbox, tries the attack and prints one `key=value` line per
//! attempt. The parent asserts on those lines.
//!
//! A layer that this machine's kernel does not offer (as `sandbox::probe` finds) has its
//! assertions skipped with a printed notice; every layer that it offers is asserted.

use crate::support;
use cugrade::sandbox::{self, LayerState, Policy, Report};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use wait_timeout::ChildExt;

const CHILD_ENV: &str = "CUGRADE_SANDBOX_CHILD";
const POLICY_ENV: &str = "CUGRADE_SANDBOX_POLICY";
const ARG_ENV: &str = "CUGRADE_SANDBOX_ARG";
const DATA_LIMIT: u64 = 2 << 30;
const FILE_LIMIT: u64 = 1 << 20;
const OPEN_FILES: u64 = 64;
const PROCESSES: u64 = 48;

// ---------------------------------------------------------------------------------------
// Parent side
// ---------------------------------------------------------------------------------------

/// A scratch tree: the worker's temp dir, a sibling "student" with a secret, a dir outside.
pub(crate) struct Scene {
    _root: tempfile::TempDir,
    root: PathBuf,
    pub(crate) policy: Policy,
    bob: PathBuf,
}

const BOB_SECRET: &str = "BOB_SECRET_7f3a";

pub(crate) fn scene() -> Scene {
    let root_dir = tempfile::Builder::new()
        .prefix("cugrade-sbx-")
        .tempdir()
        .unwrap();
    let root = root_dir.path().canonicalize().unwrap();
    let work = root.join("alice-work");
    let bob = root.join("bob");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&bob).unwrap();
    std::fs::write(
        bob.join("solution.cu"),
        format!(
            "// {BOB_SECRET}\nextern \"C\" __global__ void vector_add(const float* a, const \
             float* b, float* c, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; \
             if (i < n) c[i] = a[i] + b[i]; }}\n"
        ),
    )
    .unwrap();
    let policy = Policy {
        temp_dir: work,
        gpu: false,
        data_bytes: DATA_LIMIT,
        cpu_seconds: 60,
        file_bytes: FILE_LIMIT,
        open_files: OPEN_FILES,
        extra_read: Vec::new(),
        protected: vec![bob.clone()],
        keep_ipc: false,
        processes: PROCESSES,
        scratch: 64 << 20,
        compat: None,
    };
    Scene {
        _root: root_dir,
        root,
        policy,
        bob,
    }
}

/// The layers this machine offers, found once.
fn offered() -> &'static Report {
    static OFFERED: OnceLock<Report> = OnceLock::new();
    OFFERED.get_or_init(sandbox::probe)
}

/// Whether to assert on `layer`: yes when the machine offers it; otherwise say why not.
pub(crate) fn expect_layer(layer: &str) -> bool {
    let r = offered();
    match r.layer(layer).map(|l| &l.state) {
        Some(LayerState::Active) => true,
        Some(LayerState::Degraded(why)) => {
            eprintln!("SKIP assertions on layer {layer}: this machine lacks it: {why}");
            false
        }
        None => panic!("probe reported no layer {layer}: {:?}", r.lines()),
    }
}

pub(crate) struct ChildOutput {
    kv: BTreeMap<String, String>,
    pub(crate) raw: String,
}

impl ChildOutput {
    pub(crate) fn get(&self, key: &str) -> &str {
        self.kv
            .get(key)
            .unwrap_or_else(|| panic!("child printed no `{key}=`; output:\n{}", self.raw))
    }

    /// Assert the attempt was refused: `denied` or `failed`, never `ok`.
    pub(crate) fn assert_denied(&self, key: &str) {
        let v = self.get(key);
        assert!(
            v.starts_with("denied") || v.starts_with("failed"),
            "`{key}` should have been refused but was `{v}`; output:\n{}",
            self.raw
        );
    }

    pub(crate) fn assert_ok(&self, key: &str) {
        let v = self.get(key);
        assert!(
            v.starts_with("ok"),
            "`{key}` should have worked but was `{v}`; output:\n{}",
            self.raw
        );
    }

    /// Every layer the machine offers must be active in the child too.
    pub(crate) fn assert_layers_as_offered(&self) {
        for l in &offered().layers {
            if l.state == LayerState::Active {
                let got = self.get(&format!("layer.{}", l.name));
                assert_eq!(
                    got, "active",
                    "layer {} in the child; output:\n{}",
                    l.name, self.raw
                );
            }
        }
    }
}

/// Spawn this binary as a sandboxed child running `attack`.
pub(crate) fn run_child(
    attack: &str,
    policy: &Policy,
    arg: &str,
    prepare: impl FnOnce(&mut Command),
) -> ChildOutput {
    spawn_child(attack, policy, arg, prepare, true)
}

/// `run_child`, optionally without `prepare_command` (for control runs).
fn spawn_child(
    attack: &str,
    policy: &Policy,
    arg: &str,
    prepare: impl FnOnce(&mut Command),
    prepared: bool,
) -> ChildOutput {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    prepare(&mut cmd);
    if prepared {
        sandbox::prepare_command(&mut cmd, policy);
    }
    cmd.args([
        "--exact",
        "sandbox_attacks::sandboxed_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, attack)
    .env(POLICY_ENV, serde_json::to_string(policy).unwrap())
    .env(ARG_ENV, arg)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let status = match child.wait_timeout(Duration::from_secs(120)).unwrap() {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child `{attack}` did not finish in 120 s");
        }
    };
    let stdout = t_out.join().unwrap();
    let stderr = t_err.join().unwrap();
    let raw = format!("--- stdout\n{stdout}--- stderr\n{stderr}--- status {status}");
    assert!(status.success(), "child `{attack}` failed:\n{raw}");
    let kv = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    ChildOutput { kv, raw }
}

#[test]
fn files_outside_the_rules_are_unreadable_and_only_the_temp_dir_is_writable() {
    let s = scene();
    let outside = s.root.join("outside.txt");
    let out = run_child(
        "files",
        &s.policy,
        &format!("{}|{}", s.bob.display(), outside.display()),
        |_| {},
    );
    out.assert_layers_as_offered();
    if expect_layer("landlock") {
        out.assert_denied("read /etc/passwd");
        out.assert_denied("read /proc/self/root/etc/passwd");
        out.assert_denied("read sibling student");
        out.assert_denied("list /tmp");
        out.assert_denied("list sibling student");
        out.assert_denied("write outside temp");
        out.assert_denied("read parent environ");
        out.assert_denied("write parent's comm");
        assert!(!outside.exists(), "the child created {}", outside.display());
    }
    // What the worker needs still works.
    out.assert_ok("write inside temp");
    out.assert_ok("read /etc/ld.so.cache");
    out.assert_ok("read /proc/self/maps");
    out.assert_ok("read own executable");
    out.assert_ok("name a thread via /proc/self/task");
}

#[test]
fn network_is_unreachable_even_on_loopback() {
    let s = scene();
    // A listener in the parent's namespace: only the sandbox can stop the child reaching it.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let netns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let out = run_child(
        "network",
        &s.policy,
        &format!("{port}|{}", netns.display()),
        |_| {},
    );
    out.assert_layers_as_offered();
    // TCP is refused by either layer; it must be refused as long as one is here.
    if expect_layer("namespaces") || expect_layer("landlock") {
        out.assert_denied("tcp connect 127.0.0.1");
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the parent's listener got a connection"
        );
    }
    if expect_layer("namespaces") {
        // UDP is beyond Landlock: only the namespace stops it (loopback is down).
        out.assert_denied("udp send 127.0.0.1");
        assert_eq!(out.get("interfaces"), "lo", "{}", out.raw);
        assert_eq!(out.get("same netns as parent"), "no", "{}", out.raw);
    }
}

#[test]
fn dangerous_system_calls_are_denied() {
    let s = scene();
    let out = run_child("syscalls", &s.policy, "", |_| {});
    out.assert_layers_as_offered();
    if expect_layer("seccomp") {
        for key in [
            "ptrace attach parent",
            "process_vm_readv parent",
            "unshare user",
            "unshare net",
            "setns",
            "bpf",
            "io_uring_setup",
            "userfaultfd",
            "perf_event_open",
            "keyctl",
            "clone with CLONE_NEWUSER",
            "mount",
        ] {
            let v = out.get(key);
            assert_eq!(v, "denied EPERM", "`{key}`; output:\n{}", out.raw);
        }
        assert_eq!(out.get("clone3"), "denied ENOSYS", "{}", out.raw);
        // The clone3 refusal must not break threads: glibc falls back to clone.
        out.assert_ok("spawn thread");
        assert_eq!(out.get("seccomp mode"), "2", "{}", out.raw);
    }
    if expect_layer("capabilities") {
        assert_eq!(out.get("CapEff"), "0000000000000000", "{}", out.raw);
        assert_eq!(out.get("CapBnd"), "0000000000000000", "{}", out.raw);
    }
}

#[test]
fn resource_limits_hold() {
    let s = scene();
    let out = run_child("limits", &s.policy, "", |_| {});
    out.assert_layers_as_offered();
    if expect_layer("rlimits") {
        assert_eq!(out.get("core"), "0/0", "{}", out.raw);
        assert_eq!(
            out.get("data"),
            format!("{DATA_LIMIT}/{DATA_LIMIT}"),
            "{}",
            out.raw
        );
        assert_eq!(
            out.get("nofile"),
            format!("{OPEN_FILES}/{OPEN_FILES}"),
            "{}",
            out.raw
        );
        assert_eq!(out.get("cpu"), "60/61", "{}", out.raw);
        // Counted per worker: a uid of its own (root) or a user namespace of its own.
        assert_eq!(
            out.get("nproc"),
            format!("{PROCESSES}/{PROCESSES}"),
            "{}",
            out.raw
        );
        out.assert_denied("allocate twice the data limit");
        out.assert_ok("allocate 64 MiB");
        out.assert_denied("write past the file size limit");
        out.assert_denied("open more files than allowed");
    }
}

#[test]
fn workers_get_a_scrubbed_environment_and_no_inherited_descriptors() {
    let s = scene();
    // A descriptor without close-on-exec, as a careless parent might leave lying around. Other
    // tests of this process that spawn meanwhile inherit it too; it names a file of this
    // test's scratch folder only, and prepared (sandboxed) children close it.
    let leak_path = s.root.join("leaked.txt");
    std::fs::write(&leak_path, "secret").unwrap();
    let file = std::fs::File::open(&leak_path).unwrap();
    // SAFETY: dup of a valid fd; the copy has no FD_CLOEXEC.
    let leaked = unsafe { libc::dup(file.as_raw_fd()) };
    assert!(leaked > 2);
    let arg = leak_path.display().to_string();
    let set_token = |cmd: &mut Command| {
        // Set before prepare_command, which must drop it.
        cmd.env("GITHUB_TOKEN", "ghp_secret");
    };
    // Control: a plain spawn inherits both, so the assertions below can fail.
    let control = spawn_child("descriptors", &s.policy, &arg, set_token, false);
    let out = run_child("descriptors", &s.policy, &arg, set_token);
    // SAFETY: we own `leaked`.
    drop(unsafe { std::fs::File::from_raw_fd(leaked) });
    assert!(
        control.get("open fds above 2").contains(&arg),
        "control: the leaked fd should reach an unprepared child: {}",
        control.raw
    );
    assert!(
        control.get("env").contains("GITHUB_TOKEN"),
        "{}",
        control.raw
    );
    assert_eq!(out.get("open fds above 2"), "none", "{}", out.raw);
    let env = out.get("env");
    let keys: Vec<&str> = env.split(',').collect();
    for k in &keys {
        assert!(
            [
                "PATH",
                "LD_LIBRARY_PATH",
                "CUDA_VISIBLE_DEVICES",
                "NO_COLOR",
                "HOME",
                "TMPDIR",
                "CUDA_CACHE_PATH",
                "LANG",
                // NVLink multicast off for any NCCL a worker loads (`backend::cuda::nccl`).
                "NCCL_NVLS_ENABLE",
                CHILD_ENV,
                POLICY_ENV,
                ARG_ENV,
            ]
            .contains(k),
            "unexpected variable {k} in the worker's environment: {env}"
        );
    }
    assert!(
        !env.contains("GITHUB_TOKEN") && !env.contains("CARGO"),
        "{env}"
    );
    let home = out.get("HOME");
    assert_eq!(Path::new(home), s.policy.temp_dir, "{}", out.raw);
    assert_eq!(Path::new(out.get("cwd")), s.policy.temp_dir, "{}", out.raw);
}

#[test]
fn nvrtc_inside_the_sandbox_cannot_include_files_outside_it() {
    if !support::nvrtc() {
        return;
    }
    let s = scene();
    // Control: outside the sandbox the include attack works, so the test means something.
    let bob_src = s.bob.join("solution.cu");
    let attack = format!("#include \"{}\"\n", bob_src.display());
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90"),
        ..Default::default()
    };
    assert!(
        cudarc::nvrtc::compile_ptx_with_opts(&attack, opts).is_ok(),
        "control: unsandboxed NVRTC should be able to include {}",
        bob_src.display()
    );

    let out = run_child("nvrtc", &s.policy, &bob_src.display().to_string(), |_| {});
    out.assert_layers_as_offered();
    out.assert_ok("compile vector_add");
    if expect_layer("landlock") {
        out.assert_denied("include /etc/passwd");
        assert_eq!(out.get("/etc/passwd log leaks root:"), "no", "{}", out.raw);
        out.assert_denied("include sibling student");
        assert_eq!(out.get("sibling log leaks secret"), "no", "{}", out.raw);
    }
}

#[test]
fn cuda_works_inside_the_sandbox() {
    if !(support::driver() && support::nvrtc()) {
        eprintln!("SKIP cuda_works_inside_the_sandbox: no libcuda or libnvrtc on this machine");
        return;
    }
    let mut s = scene();
    s.policy.gpu = true;
    // The driver maps more than NVRTC; this is the backstop the worker would get too.
    s.policy.data_bytes = 16 << 30;
    s.policy.open_files = 1024;
    let out = run_child("cuda", &s.policy, "", |_| {});
    out.assert_layers_as_offered();
    let v = out.get("cuda vector_add");
    if v.starts_with("skip") {
        eprintln!("SKIP cuda_works_inside_the_sandbox: {v}");
        return;
    }
    assert_eq!(v, "ok", "{}", out.raw);
    if expect_layer("landlock") {
        out.assert_denied("read /etc/passwd after CUDA init");
    }
}

#[test]
fn a_late_apply_degrades_with_reasons_instead_of_failing() {
    let s = scene();
    let out = run_child("threads_first", &s.policy, "", |_| {});
    let ns = out.get("layer.namespaces");
    assert!(
        ns.starts_with("degraded") && ns.contains("2 threads"),
        "namespaces should degrade, naming the threads: {}",
        out.raw
    );
    assert!(
        out.get("layer.capabilities").starts_with("degraded"),
        "{}",
        out.raw
    );
    if expect_layer("landlock") {
        let ll = out.get("layer.landlock");
        assert!(
            ll.starts_with("degraded") && ll.contains("unconfined"),
            "landlock should warn that the earlier thread escapes it: {}",
            out.raw
        );
        // This thread is confined; the one started before apply is not (Landlock ABI < 8
        // has no TSYNC): exactly what the warning says.
        out.assert_denied("read /etc/passwd on the applying thread");
    }
    if expect_layer("seccomp") {
        // Seccomp is installed with TSYNC, so it reaches the earlier thread as well.
        assert_eq!(
            out.get("unshare on the earlier thread"),
            "denied EPERM",
            "{}",
            out.raw
        );
    }
}

/// What the worker sees and may do: a private root with only what it needs, no host socket,
/// PID 1 of its own namespace, a uid of its own when root, no metadata calls even on its own
/// files, no sockets, no memfd, no setsid.
#[test]
fn the_worker_sees_a_private_view_and_may_not_change_metadata() {
    let s = scene();
    let sock = s.root.join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    // Host paths that exist here but must not in the worker's view (stat, which Landlock does
    // not govern, says whether they are there at all).
    let absent = [
        s.bob.clone(),
        s.root.join("outside.txt"),
        "/etc/passwd".into(),
        "/etc/hostname".into(),
        "/var".into(),
        "/home".into(),
        "/run".into(),
        "/dev/shm".into(),
        "/dev/pts".into(),
    ]
    .iter()
    .filter(|p| p.exists())
    .map(|p| p.display().to_string())
    .collect::<Vec<_>>()
    .join("|");
    std::fs::write(s.root.join("outside.txt"), "x").unwrap();
    let out = run_child(
        "view",
        &s.policy,
        &format!(
            "{}|{absent}|{}",
            sock.display(),
            s.root.join("outside.txt").display()
        ),
        |_| {},
    );
    out.assert_layers_as_offered();
    if expect_layer("namespaces") {
        assert_eq!(out.get("pid"), "1", "{}", out.raw);
    }
    if expect_layer("identity") && sandbox::identity::is_root() {
        let uid: u32 = out.get("uid").parse().unwrap();
        assert!(uid >= sandbox::identity::UID_BASE, "{}", out.raw);
    }
    if expect_layer("mounts") {
        assert_eq!(out.get("/etc/passwd exists"), "false", "{}", out.raw);
        assert_eq!(out.get("host socket visible"), "false", "{}", out.raw);
        out.assert_denied("connect host socket");
        assert_eq!(out.get("scratch is tmpfs"), "true", "{}", out.raw);
        // Nothing beyond what the worker needs exists in its view.
        assert_eq!(out.get("absent"), "all", "{}", out.raw);
        assert_eq!(out.get("/dev/shm exists"), "false", "{}", out.raw);
    }
    if expect_layer("seccomp") {
        for key in [
            "chmod own file",
            "fchmod own file",
            "utime own file",
            "setxattr own file",
            "chown own file",
            "memfd_create",
            "setsid",
        ] {
            assert!(
                out.get(key).starts_with("denied EPERM"),
                "`{key}`: {}",
                out.raw
            );
        }
        assert_eq!(out.get("socket AF_UNIX"), "failed (97)", "{}", out.raw);
        assert_eq!(out.get("socket AF_INET"), "failed (97)", "{}", out.raw);
        out.assert_ok("socketpair");
    }
    out.assert_ok("write in temp");
}

/// A double-forked daemon (setsid attempted) does not outlive the worker.
#[test]
fn a_daemon_started_in_the_sandbox_ends_with_it() {
    let s = scene();
    let marker = format!(
        "daemon-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let out = run_child("daemon", &s.policy, &marker, |_| {});
    assert_eq!(out.get("daemon"), "started", "{}", out.raw);
    let alive = || -> Vec<String> {
        let mut v = vec![];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.parse::<u32>().is_err() {
                continue;
            }
            let env = std::fs::read(format!("/proc/{name}/environ")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{name}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if !zombie && String::from_utf8_lossy(&env).contains(&marker) {
                v.push(name);
            }
        }
        v
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !alive().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        alive().is_empty(),
        "the daemon outlived its worker: {:?}",
        alive()
    );
}

#[test]
fn probe_leaves_the_caller_unconfined_and_reports_all_layers_here() {
    let r = offered();
    assert_eq!(r.layers.len(), 7, "{:?}", r.lines());
    // We are still free: the probe confined its own child only.
    assert!(std::fs::read_dir("/tmp").is_ok());
    for line in r.lines() {
        eprintln!("probe: {line}");
    }
}

// ---------------------------------------------------------------------------------------
// Child side
// ---------------------------------------------------------------------------------------

/// The entry the parent re-executes; a no-op in a normal test run.
#[test]
fn sandboxed_child() {
    let Ok(attack) = std::env::var(CHILD_ENV) else {
        return;
    };
    let policy: Policy = serde_json::from_str(&std::env::var(POLICY_ENV).unwrap()).unwrap();
    let arg = std::env::var(ARG_ENV).unwrap_or_default();
    if attack == "descriptors" {
        // Checks what the spawn gave us; no sandbox needed, no fork (fds are per process).
        print!("{}", descriptors());
        return;
    }
    // SAFETY: the child runs `child_body`, prints through a raw write and `_exit`s; it never
    // returns into libtest.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let text = std::panic::catch_unwind(|| child_body(&attack, &policy, &arg))
            .unwrap_or_else(|_| "panic=yes\n".into());
        // SAFETY: writing a valid buffer to fd 1, then leaving without unwinding.
        unsafe {
            libc::write(1, text.as_ptr().cast(), text.len());
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "sandboxed child ended with wait status {status:#x}"
    );
}

fn child_body(attack: &str, policy: &Policy, arg: &str) -> String {
    if attack == "threads_first" {
        return threads_first(policy);
    }
    let report = sandbox::apply(policy);
    // libtest has printed "test sandboxed_child ... " without a newline.
    let mut out = String::from("\n");
    for l in &report.layers {
        let state = match &l.state {
            LayerState::Active => "active".to_string(),
            LayerState::Degraded(why) => format!("degraded: {why}"),
        };
        out.push_str(&format!("layer.{}={state}\n", l.name));
    }
    let lines = match attack {
        "files" => files(policy, arg),
        "network" => network(arg),
        "syscalls" => syscalls(),
        "limits" => limits(policy),
        "nvrtc" => nvrtc(arg),
        "view" => view(policy, arg),
        "daemon" => daemon(),
        "cuda" => cuda(),
        "memory" => crate::sandbox_memory::attack(policy),
        other => vec![("unknown attack".into(), other.into())],
    };
    for (k, v) in lines {
        out.push_str(&format!("{k}={v}\n"));
    }
    out
}

pub(crate) type Lines = Vec<(String, String)>;

fn outcome<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("denied ({e})"),
    }
}

fn files(policy: &Policy, arg: &str) -> Lines {
    let (bob, outside) = arg.split_once('|').unwrap();
    let ppid = std::os::unix::process::parent_id();
    let inside = policy.temp_dir.join("scratch.txt");
    // What cuInit does: name a thread through /proc/self/task/<tid>/comm.
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid cannot fail.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = done_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let comm = outcome(std::fs::write(
        format!("/proc/self/task/{tid}/comm"),
        "cuda-evthandlr",
    ));
    done_tx.send(()).unwrap();
    t.join().unwrap();
    vec![
        ("name a thread via /proc/self/task".into(), comm),
        (
            "write parent's comm".into(),
            outcome(std::fs::write(format!("/proc/{ppid}/comm"), "pwned")),
        ),
        (
            "read /etc/passwd".into(),
            outcome(std::fs::read("/etc/passwd")),
        ),
        (
            "read /proc/self/root/etc/passwd".into(),
            outcome(std::fs::read("/proc/self/root/etc/passwd")),
        ),
        (
            "read sibling student".into(),
            outcome(std::fs::read(Path::new(bob).join("solution.cu"))),
        ),
        ("list /tmp".into(), outcome(std::fs::read_dir("/tmp"))),
        (
            "list sibling student".into(),
            outcome(std::fs::read_dir(bob)),
        ),
        (
            "write outside temp".into(),
            outcome(std::fs::write(outside, "x")),
        ),
        (
            "read parent environ".into(),
            outcome(std::fs::read(format!("/proc/{ppid}/environ"))),
        ),
        (
            "write inside temp".into(),
            outcome(std::fs::write(&inside, "x").and_then(|()| std::fs::read(&inside))),
        ),
        (
            "read /etc/ld.so.cache".into(),
            outcome(std::fs::read("/etc/ld.so.cache")),
        ),
        (
            "read /proc/self/maps".into(),
            outcome(std::fs::read("/proc/self/maps")),
        ),
        (
            "read own executable".into(),
            outcome(std::env::current_exe().and_then(std::fs::File::open)),
        ),
    ]
}

fn network(arg: &str) -> Lines {
    let (port, parent_ns) = arg.split_once('|').unwrap();
    let port: u16 = port.parse().unwrap();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"x", addr));
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    let ns = std::fs::read_link("/proc/self/ns/net").map(|p| p.display().to_string());
    vec![
        ("tcp connect 127.0.0.1".into(), outcome(tcp)),
        ("udp send 127.0.0.1".into(), outcome(udp)),
        ("interfaces".into(), ifaces.join(",")),
        (
            "same netns as parent".into(),
            if ns.as_deref().ok() == Some(parent_ns) {
                "yes"
            } else {
                "no"
            }
            .into(),
        ),
    ]
}

/// Run a raw syscall and describe the result by errno.
fn sys(r: libc::c_long) -> String {
    if r >= 0 {
        return format!("ok ({r})");
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) => "denied EPERM".into(),
        Some(libc::ENOSYS) => "denied ENOSYS".into(),
        _ => format!("failed ({e})"),
    }
}

fn syscalls() -> Lines {
    let ppid = std::os::unix::process::parent_id() as libc::c_long;
    let mut buf = [0u8; 16];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Any address: seccomp refuses before the kernel looks at it.
    let remote = libc::iovec {
        iov_base: 0x1000 as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut uring_params = [0u8; 120];
    let mut clone3_args = [0u64; 11];
    clone3_args[0] = libc::CLONE_NEWUSER as u64;
    // SAFETY: each call either fails (the point of the test) or, for clone, is handled below.
    let lines = unsafe {
        let clone_newuser = libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        );
        if clone_newuser == 0 {
            // We are a child that should never have been created.
            libc::_exit(0);
        }
        vec![
            (
                "ptrace attach parent",
                sys(libc::syscall(
                    libc::SYS_ptrace,
                    libc::PTRACE_ATTACH,
                    ppid,
                    0,
                    0,
                )),
            ),
            (
                "process_vm_readv parent",
                sys(libc::syscall(
                    libc::SYS_process_vm_readv,
                    ppid,
                    &local,
                    1,
                    &remote,
                    1,
                    0,
                )),
            ),
            (
                "unshare user",
                sys(libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER)),
            ),
            (
                "unshare net",
                sys(libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNET)),
            ),
            ("setns", sys(libc::syscall(libc::SYS_setns, 0, 0))),
            ("bpf", sys(libc::syscall(libc::SYS_bpf, 0, 0, 0))),
            (
                "io_uring_setup",
                sys(libc::syscall(
                    libc::SYS_io_uring_setup,
                    1,
                    uring_params.as_mut_ptr(),
                )),
            ),
            ("userfaultfd", sys(libc::syscall(libc::SYS_userfaultfd, 0))),
            (
                "perf_event_open",
                sys(libc::syscall(libc::SYS_perf_event_open, 0, 0, -1, -1, 0)),
            ),
            (
                "keyctl",
                sys(libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0)),
            ),
            ("mount", sys(libc::syscall(libc::SYS_mount, 0, 0, 0, 0, 0))),
            ("clone with CLONE_NEWUSER", sys(clone_newuser)),
            (
                "clone3",
                sys(libc::syscall(
                    libc::SYS_clone3,
                    clone3_args.as_mut_ptr(),
                    88usize,
                )),
            ),
        ]
    };
    let mut v: Lines = lines.into_iter().map(|(k, r)| (k.to_string(), r)).collect();
    v.push((
        "spawn thread".into(),
        match std::thread::spawn(|| 42).join() {
            Ok(42) => "ok".into(),
            _ => "failed".into(),
        },
    ));
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for key in ["Seccomp", "CapEff", "CapBnd"] {
        let val = status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .unwrap_or("?")
            .trim()
            .to_string();
        let name = if key == "Seccomp" {
            "seccomp mode".into()
        } else {
            key.to_string()
        };
        v.push((name, val));
    }
    v
}

fn limits(policy: &Policy) -> Lines {
    use nix::sys::resource::{Resource, getrlimit};
    let lim = |r| {
        getrlimit(r)
            .map(|(s, h)| format!("{s}/{h}"))
            .unwrap_or_else(|e| format!("? {e}"))
    };
    let mut v: Lines = vec![
        ("core".into(), lim(Resource::RLIMIT_CORE)),
        ("data".into(), lim(Resource::RLIMIT_DATA)),
        ("nofile".into(), lim(Resource::RLIMIT_NOFILE)),
        ("cpu".into(), lim(Resource::RLIMIT_CPU)),
        ("nproc".into(), lim(Resource::RLIMIT_NPROC)),
    ];
    let big = (policy.data_bytes * 2) as usize;
    let mut a: Vec<u8> = Vec::new();
    v.push((
        "allocate twice the data limit".into(),
        match a.try_reserve_exact(big) {
            Ok(()) => "ok".into(),
            Err(e) => format!("denied ({e})"),
        },
    ));
    drop(a);
    let mut small: Vec<u8> = Vec::new();
    v.push((
        "allocate 64 MiB".into(),
        match small.try_reserve_exact(64 << 20) {
            Ok(()) => {
                small.resize(64 << 20, 1);
                "ok".into()
            }
            Err(e) => format!("denied ({e})"),
        },
    ));
    // SIGXFSZ would kill us; the grader reads the kill, here we want the errno.
    // SAFETY: ignoring a signal.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let big_file = vec![0u8; (policy.file_bytes * 2) as usize];
    v.push((
        "write past the file size limit".into(),
        outcome(std::fs::write(policy.temp_dir.join("big.bin"), &big_file)),
    ));
    let mut files = Vec::new();
    let mut opened = Ok(());
    for _ in 0..=policy.open_files {
        match std::fs::File::open("/dev/null") {
            Ok(f) => files.push(f.into_raw_fd()),
            Err(e) => {
                opened = Err(e);
                break;
            }
        }
    }
    v.push(("open more files than allowed".into(), outcome(opened)));
    for fd in files {
        // SAFETY: closing the fds opened just above.
        unsafe { libc::close(fd) };
    }
    v
}

fn descriptors() -> String {
    let mut extra = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let fd: i32 = e.file_name().to_string_lossy().parse().unwrap_or(-1);
        let target = std::fs::read_link(e.path())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        // The directory handle read_dir itself holds shows up too.
        if fd > 2 && !target.starts_with("/proc/") {
            extra.push(format!("{fd}->{target}"));
        }
    }
    let mut keys: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    keys.sort();
    format!(
        "\nopen fds above 2={}\nenv={}\nHOME={}\ncwd={}\n",
        if extra.is_empty() {
            "none".into()
        } else {
            extra.join(",")
        },
        keys.join(","),
        std::env::var("HOME").unwrap_or_default(),
        std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    )
}

fn nvrtc(bob_src: &str) -> Lines {
    use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};
    let compile = |src: &str| {
        compile_ptx_with_opts(
            src,
            CompileOptions {
                arch: Some("sm_90"),
                ..Default::default()
            },
        )
    };
    let describe = |r: Result<_, CompileError>| -> (String, String) {
        match r {
            Ok(_) => ("ok".into(), String::new()),
            Err(CompileError::CompileError { log, .. }) => {
                let log = log.to_string_lossy().into_owned();
                let first = log
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("")
                    .to_string();
                (format!("denied (compile error: {first})"), log)
            }
            Err(e) => (format!("failed ({e:?})"), String::new()),
        }
    };
    // SAFETY: cudarc's presence check; libnvrtc must load from the sandbox's library rules.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return vec![(
            "compile vector_add".into(),
            "failed (libnvrtc not loadable in the sandbox)".into(),
        )];
    }
    let good = "extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, \
                int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }";
    let (good_r, good_log) = describe(compile(good));
    let (passwd_r, passwd_log) = describe(compile("#include \"/etc/passwd\"\n"));
    let (bob_r, bob_log) = describe(compile(&format!("#include \"{bob_src}\"\n")));
    vec![
        (
            "compile vector_add".into(),
            if good_r == "ok" {
                good_r
            } else {
                format!("{good_r} {}", good_log.replace('\n', " | "))
            },
        ),
        ("include /etc/passwd".into(), passwd_r),
        (
            "/etc/passwd log leaks root:".into(),
            if passwd_log.contains("root:") {
                "yes"
            } else {
                "no"
            }
            .into(),
        ),
        ("include sibling student".into(), bob_r),
        (
            "sibling log leaks secret".into(),
            if bob_log.contains(BOB_SECRET) {
                "yes"
            } else {
                "no"
            }
            .into(),
        ),
    ]
}

pub(crate) fn errno_of(r: libc::c_long) -> String {
    if r >= 0 {
        return "ok".into();
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM) => "denied EPERM".into(),
        Some(e) => format!("failed ({e})"),
        None => "failed".into(),
    }
}

fn view(policy: &Policy, arg: &str) -> Lines {
    use std::os::unix::ffi::OsStrExt;
    let own = policy.temp_dir.join("own.txt");
    let wrote = std::fs::write(&own, "x");
    let c = std::ffi::CString::new(own.as_os_str().as_bytes()).unwrap();
    let f = std::fs::File::open(&own);
    let fd = f.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
    let name = c"user.x";
    let (sock, absent) = arg.split_once('|').unwrap_or((arg, ""));
    let mut statfs: libc::statfs = unsafe { std::mem::zeroed() };
    let tmpc = std::ffi::CString::new(policy.temp_dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: each call either fails (the point) or acts on our own scratch file.
    let calls = unsafe {
        vec![
            (
                "chmod own file",
                errno_of(libc::chmod(c.as_ptr(), 0o4755) as _),
            ),
            ("fchmod own file", errno_of(libc::fchmod(fd, 0o755) as _)),
            (
                "utime own file",
                errno_of(libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0) as _),
            ),
            (
                "setxattr own file",
                errno_of(
                    libc::setxattr(c.as_ptr(), name.as_ptr(), c"1".as_ptr().cast(), 1, 0) as _,
                ),
            ),
            (
                "chown own file",
                errno_of(libc::chown(c.as_ptr(), 0, 0) as _),
            ),
            (
                "memfd_create",
                errno_of(libc::memfd_create(c"x".as_ptr(), 0) as _),
            ),
            ("setsid", errno_of(libc::setsid() as _)),
            (
                "socket AF_UNIX",
                errno_of(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) as _),
            ),
            (
                "socket AF_INET",
                errno_of(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) as _),
            ),
            ("socketpair", {
                let mut sv = [0; 2];
                errno_of(
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) as _,
                )
            }),
            (
                "scratch statfs",
                errno_of(libc::statfs(tmpc.as_ptr(), &mut statfs) as _),
            ),
        ]
    };
    let mut v: Lines = calls.into_iter().map(|(k, r)| (k.to_string(), r)).collect();
    v.extend([
        ("pid".into(), std::process::id().to_string()),
        // SAFETY: getuid cannot fail.
        ("uid".into(), unsafe { libc::getuid() }.to_string()),
        (
            "/etc/passwd exists".into(),
            Path::new("/etc/passwd").exists().to_string(),
        ),
        (
            "host socket visible".into(),
            Path::new(sock).exists().to_string(),
        ),
        (
            "connect host socket".into(),
            outcome(std::os::unix::net::UnixStream::connect(sock)),
        ),
        (
            "scratch is tmpfs".into(),
            (statfs.f_type == 0x0102_1994).to_string(),
        ),
        (
            "/dev/shm exists".into(),
            Path::new("/dev/shm").exists().to_string(),
        ),
        ("absent".into(), {
            let present: Vec<&str> = absent
                .split('|')
                .filter(|p| !p.is_empty() && Path::new(p).exists())
                .collect();
            if present.is_empty() {
                "all".into()
            } else {
                format!("present: {present:?}")
            }
        }),
        ("write in temp".into(), outcome(wrote)),
    ]);
    v
}

/// Fork a daemon the way a hostile import would: fork, setsid (refused or not), fork again,
/// the grandchild sleeps; the middle one exits at once.
fn daemon() -> Lines {
    // SAFETY: the forked processes only sleep or `_exit`.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::setsid();
            if libc::fork() == 0 {
                loop {
                    libc::sleep(1);
                }
            }
            libc::_exit(0);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    vec![("daemon".into(), "started".into())]
}

/// Compile, load and launch vector_add on GPU 0 from inside the sandbox, and check it.
fn cuda() -> Lines {
    use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
    let run = || -> Result<String, String> {
        let src = "extern \"C\" __global__ void vector_add(const float* a, const float* b, \
                   float* c, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; \
                   if (i < n) c[i] = a[i] + b[i]; }";
        // No arch: PTX for the default virtual arch, JIT-compiled by the driver into
        // CUDA_CACHE_PATH, which exercises the cache inside the temp dir.
        let ptx = cudarc::nvrtc::compile_ptx(src).map_err(|e| format!("failed (nvrtc: {e:?})"))?;
        let ctx = match CudaContext::new(0) {
            Ok(c) => c,
            Err(e) => return Ok(format!("skip (no usable GPU: {e:?})")),
        };
        let stream = ctx.default_stream();
        let module = ctx
            .load_module(ptx)
            .map_err(|e| format!("failed (load: {e:?})"))?;
        let f = module
            .load_function("vector_add")
            .map_err(|e| format!("failed (function: {e:?})"))?;
        let n: i32 = 1 << 20;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
        let da = stream
            .clone_htod(&a)
            .map_err(|e| format!("failed (copy: {e:?})"))?;
        let db = stream
            .clone_htod(&b)
            .map_err(|e| format!("failed (copy: {e:?})"))?;
        let mut dc = stream
            .alloc_zeros::<f32>(n as usize)
            .map_err(|e| format!("failed (alloc: {e:?})"))?;
        let mut launch = stream.launch_builder(&f);
        launch.arg(&da).arg(&db).arg(&mut dc).arg(&n);
        // SAFETY: the argument list matches the kernel's signature.
        unsafe { launch.launch(LaunchConfig::for_num_elems(n as u32)) }
            .map_err(|e| format!("failed (launch: {e:?})"))?;
        let c = stream
            .clone_dtoh(&dc)
            .map_err(|e| format!("failed (copy back: {e:?})"))?;
        match (0..n as usize).find(|&i| c[i] != a[i] + b[i]) {
            None => Ok("ok".into()),
            Some(i) => Err(format!(
                "failed (c[{i}] = {}, expected {})",
                c[i],
                a[i] + b[i]
            )),
        }
    };
    let result = run().unwrap_or_else(|e| e);
    vec![
        ("cuda vector_add".into(), result.replace('\n', " | ")),
        (
            "read /etc/passwd after CUDA init".into(),
            outcome(std::fs::read("/etc/passwd")),
        ),
    ]
}

/// Start a thread before applying the sandbox: what `apply`'s doc tells the worker not to do.
fn threads_first(policy: &Policy) -> String {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (res_tx, res_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        // SAFETY: unshare with a flag argument; expected to fail.
        let r = sys(unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNET) });
        res_tx.send(r).unwrap();
    });
    let report = sandbox::apply(policy);
    let mut out = String::from("\n");
    for l in &report.layers {
        let state = match &l.state {
            LayerState::Active => "active".to_string(),
            LayerState::Degraded(why) => format!("degraded: {why}"),
        };
        out.push_str(&format!("layer.{}={state}\n", l.name));
    }
    go_tx.send(()).unwrap();
    let r = res_rx.recv().unwrap();
    t.join().unwrap();
    out.push_str(&format!("unshare on the earlier thread={r}\n"));
    out.push_str(&format!(
        "read /etc/passwd on the applying thread={}\n",
        outcome(std::fs::read("/etc/passwd"))
    ));
    out
}
