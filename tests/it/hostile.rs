//! Hostile Numba submissions against the whole grader, through the binary, the way a course
//! runs it: as root (Gradescope, CI, Docker; CI runs these tests as root) and as an
//! unprivileged user (when the tests run as root, a second leg runs `cugrade` as `nobody`, with
//! the toolchain made reachable in a private mount namespace, as a normal user's machine has
//! it). A Numba submission is Python that runs at import inside the compile worker, so each
//! attack is host code in the worker.
//!
//! Each attack reports what it achieved by raising at import: the submission gets a compile
//! error whose message starts `RuntimeError: RESULT` and carries the outcome; the test
//! asserts on it and on the host (the listener heard nothing, the file is unchanged). After
//! every run, no process of the run is alive (none whose command line names the run's private
//! TMPDIR) and no temp folder remains (that TMPDIR is empty).
//!
//! Verdicts (docs/security.md lists them too):
//! - UNIX socket to a pathname socket outside: the socket does not exist in the worker's view
//!   and `socket(AF_UNIX)` is refused (EAFNOSUPPORT); the listener hears nothing.
//! - chmod u+s / utime / setxattr on a file outside: not in the view (ENOENT); the
//!   same calls on a file of its own are refused by seccomp (EPERM); the file is unchanged.
//! - double fork + setsid daemon: `setsid` is refused; the daemon dies with the worker.
//! - memfd: refused (EPERM). tmpfs: the scratch fills at its size (ENOSPC); no `/dev/shm`.
//! - a fork bomb beside an honest student under `--jobs 2`: the bomb stops at `RLIMIT_NPROC`
//!   and is a compile timeout; the honest student's grade is the one it gets alone.
//! - SIGINT mid-cohort: exit 130, every worker ended, the temp folder removed, no result
//!   written for a student whose worker the interrupt ended. SIGKILL: the
//!   workers end with the grader; the next run removes the folder.

use crate::support::{BIN, is_root, numba as ready, root};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The attacks are heavy (a fork bomb, a 1 GiB tmpfs): one at a time. (Other modules' tests
/// run beside them in this process; the bomb is bounded by its worker's RLIMIT_NPROC.)
pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

pub(crate) const NOBODY: u32 = 65534;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Leg {
    /// As the tests run (root in CI).
    AsIs,
    /// As `nobody`, when the tests run as root.
    Nobody,
}

pub(crate) fn legs() -> Vec<Leg> {
    if is_root() {
        vec![Leg::AsIs, Leg::Nobody]
    } else {
        vec![Leg::AsIs]
    }
}

/// A world-readable scratch tree for one run: the binary, the rubric, the submissions, a
/// private TMPDIR and HOME (owned by the user who grades), and paths outside the sandbox.
pub(crate) struct Scene {
    _dir: tempfile::TempDir,
    pub(crate) dir: PathBuf,
    pub(crate) leg: Leg,
    bin: PathBuf,
    pub(crate) rubric: PathBuf,
    pub(crate) tmp: PathBuf,
    pub(crate) home: PathBuf,
    outside: PathBuf,
}

pub(crate) fn scene(leg: Leg, rubric_extra: &str) -> Scene {
    scene_of(leg, "vector-add", "cu", rubric_extra)
}

/// A scene grading against lab `lab`, whose reference is `lab.EXT`.
pub(crate) fn scene_of(leg: Leg, lab: &str, ext: &str, rubric_extra: &str) -> Scene {
    let d = tempfile::Builder::new()
        .prefix("cugrade-hostile-")
        .tempdir()
        .unwrap();
    let dir = d.path().canonicalize().unwrap();
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    open(&dir).unwrap();
    let bin = dir.join("cugrade");
    std::fs::copy(BIN, &bin).unwrap();
    let reference = dir.join(format!("{lab}.{ext}"));
    std::fs::copy(
        root().join(format!("reference-kernels/{lab}.{ext}")),
        &reference,
    )
    .unwrap();
    let text = std::fs::read_to_string(root().join(format!("rubrics/{lab}.yaml"))).unwrap();
    let text = text.replace(
        &format!("../reference-kernels/{lab}.{ext}"),
        &reference.to_string_lossy(),
    );
    let rubric = dir.join(format!("{lab}.yaml"));
    std::fs::write(&rubric, format!("{text}\n{rubric_extra}\n")).unwrap();
    let (tmp, home, outside) = (dir.join("tmp"), dir.join("home"), dir.join("outside"));
    for p in [&tmp, &home, &outside] {
        std::fs::create_dir(p).unwrap();
        open(p).unwrap();
    }
    if leg == Leg::Nobody {
        for p in [&tmp, &home] {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }
    Scene {
        _dir: d,
        dir,
        leg,
        bin,
        rubric,
        tmp,
        home,
        outside,
    }
}

impl Scene {
    /// A submission folder with one file.
    pub(crate) fn submission(&self, name: &str, file: &str, text: &str) -> PathBuf {
        let sub = self.dir.join("subs").join(name);
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(file), text).unwrap();
        for p in [self.dir.join("subs"), sub.clone()] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        sub
    }

    /// `cugrade ARGS` as this leg's user, with the run's own TMPDIR and HOME.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let cache = cugrade::compile::toolchain::cache_root();
        let tool = cugrade::compile::toolchain::numba().unwrap();
        let ld = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let env: Vec<(String, String)> = vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("LD_LIBRARY_PATH".into(), ld.clone()),
            ("HOME".into(), self.home.display().to_string()),
            ("TMPDIR".into(), self.tmp.display().to_string()),
            ("CUGRADE_NVRTC_CACHE".into(), cache.display().to_string()),
            ("CUGRADE_PYTHON".into(), tool.python.display().to_string()),
            ("NO_COLOR".into(), "1".into()),
        ];
        let mut cmd = match self.leg {
            Leg::AsIs => {
                let mut c = Command::new(&self.bin);
                c.args(args);
                c
            }
            Leg::Nobody => {
                // Paths nobody must reach (the cache, the interpreter, NVRTC's dir) may sit
                // under a directory only root may enter (/root): in a private mount namespace,
                // that directory is replaced by an empty tmpfs holding only them.
                let mut needed = vec![cache.clone(), tool.python.clone()];
                needed.extend(tool.read_dirs.iter().cloned());
                needed.extend(std::env::split_paths(&ld).filter(|p| p.is_absolute()));
                let mut c = Command::new("unshare");
                c.args(["-m", "--propagation", "private", "sh", "-c"])
                    .arg(expose_script(&needed, &self.dir.join("stage")))
                    .arg("sh")
                    .arg(&self.bin)
                    .args(args);
                c
            }
        };
        cmd.env_clear().envs(env).current_dir(&self.dir);
        cmd
    }

    /// Processes of this run still alive: any whose command line names its TMPDIR (every
    /// worker's does, and so does every process a worker starts there).
    fn survivors(&self) -> Vec<String> {
        let needle = self.tmp.display().to_string();
        let mut out = vec![];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
            if cmdline.contains(&needle) && !zombie {
                out.push(format!("{pid}: {cmdline}"));
            }
        }
        out
    }

    /// After a run: nothing of it alive (a moment's grace for the kernel to reap a PID
    /// namespace), and nothing left in its TMPDIR.
    pub(crate) fn assert_clean(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left = self.survivors();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            left = self.survivors();
        }
        assert!(
            left.is_empty(),
            "{what} ({:?}): still running:\n{}",
            self.leg,
            left.join("\n")
        );
        let temp: Vec<_> = std::fs::read_dir(&self.tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            temp.is_empty(),
            "{what} ({:?}): temp files left: {temp:?}",
            self.leg
        );
    }

    /// `cugrade check --backend emu` of one submission: its result.json.
    pub(crate) fn check(&self, sub: &Path) -> Value {
        let json = self.home.join(format!(
            "{}.json",
            sub.file_name().unwrap().to_string_lossy()
        ));
        let out = self
            .command(&[
                "check",
                "--backend",
                "emu",
                "--seed",
                "3",
                "--rubric",
                &self.rubric.to_string_lossy(),
                &sub.to_string_lossy(),
                "--json",
                &json.to_string_lossy(),
            ])
            .output()
            .unwrap();
        let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
            panic!(
                "{:?}: no result.json: {}\n{}",
                self.leg,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        serde_json::from_str(&text).unwrap()
    }
}

/// A shell script that bind-mounts every path in `needed` that lies under a directory others
/// may not enter back at its own path, over a tmpfs that hides the rest of that directory,
/// then runs `"$@"` as nobody.
fn expose_script(needed: &[PathBuf], stage: &Path) -> String {
    let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let mut hidden: Vec<(PathBuf, Vec<PathBuf>)> = vec![];
    for p in needed {
        let Ok(real) = p.canonicalize() else { continue };
        let closed = real
            .ancestors()
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .find(|a| {
                a.parent().is_some()
                    && std::fs::metadata(a)
                        .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 == 0)
            });
        if let Some(a) = closed {
            let a = a.to_path_buf();
            match hidden.iter_mut().find(|(h, _)| *h == a) {
                Some((_, v)) => v.push(real),
                None => hidden.push((a, vec![real])),
            }
        }
    }
    let mut s = String::from("set -e\n");
    let mut n = 0;
    for (dir, paths) in &hidden {
        let mut staged = vec![];
        for p in paths {
            let st = stage.join(n.to_string());
            n += 1;
            s += &format!("mkdir -p {0}; touch {0}.f 2>/dev/null || true\n", q(&st));
            let target = if p.is_dir() {
                st.clone()
            } else {
                st.with_extension("f")
            };
            s += &format!("mount --bind {} {}\n", q(p), q(&target));
            staged.push((target, p.clone()));
        }
        s += &format!("mount -t tmpfs -o mode=0755 tmpfs {}\n", q(dir));
        for (from, to) in staged {
            if to.is_dir() {
                s += &format!("mkdir -p {}\n", q(&to));
            } else {
                s += &format!("mkdir -p {}; touch {}\n", q(to.parent().unwrap()), q(&to));
            }
            s += &format!("mount --bind {} {}\n", q(&from), q(&to));
        }
    }
    s += &format!(
        "exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups --inh-caps=-all \"$@\"\n"
    );
    s
}

pub(crate) fn milestone(r: &Value) -> &Value {
    &r["milestones"][0]
}

/// The outcome an attack raised at import, from its compile check's message.
pub(crate) fn reported(r: &Value) -> String {
    let checks = milestone(r)["checks"].as_array().unwrap();
    let c = checks
        .iter()
        .find(|c| c["status"] != "pass")
        .unwrap_or_else(|| panic!("no failing check: {r}"));
    // The message is cut short; the traceback in the details ends with the whole line.
    let text = c["details"].as_str().unwrap_or("");
    let at = text
        .rfind("RuntimeError: RESULT ")
        .unwrap_or_else(|| panic!("the attack reported nothing: {c}"));
    text[at + "RuntimeError: ".len()..]
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

pub(crate) const KERNEL: &str = "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n";

/// A submission whose import runs `attack`, which sets `out` (a dict) and then raises it.
pub(crate) fn attack(body: &str) -> String {
    let mut s = String::from("import os, sys, json\nout = {}\n");
    s += body;
    s += "\nraise RuntimeError('RESULT ' + json.dumps(out, sort_keys=True))\n";
    s
}

#[test]
fn unix_socket_outside_the_sandbox_is_unreachable() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "");
        let path = s.outside.join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let body = format!(
            "import socket\np = {:?}\ntry:\n    k = socket.socket(socket.AF_UNIX)\n    \
             k.connect(p)\n    k.sendall(b'pwned')\n    out['connect'] = 'ok'\nexcept OSError as e:\n    \
             out['connect'] = 'denied ' + str(e)\nout['visible'] = os.path.exists(p)\n",
            path.display().to_string()
        );
        let sub = s.submission("mallory", "k.py", &attack(&body));
        let r = s.check(&sub);
        let got = reported(&r);
        assert!(got.contains("\"connect\": \"denied"), "{leg:?}: {got}");
        assert!(got.contains("\"visible\": false"), "{leg:?}: {got}");
        assert!(
            listener.accept().is_err(),
            "{leg:?}: the host listener got a connection"
        );
        s.assert_clean("unix socket");
    }
}

#[test]
fn a_python_function_is_confined_while_the_grader_calls_it() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene_of(leg, "preprocess", "py", "");
        let path = s.outside.join("agent.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let secret = s.outside.join("secret");
        std::fs::write(&secret, "answers").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
        // At call time (the function runs in the Python worker the grader talks to), every
        // way out: a host socket, the rubric and a host file, a write outside, the network.
        let body = format!(
            "def preprocess(table):\n    import socket\n    out = {{}}\n    \
             for name, f in (('connect', lambda: socket.socket(socket.AF_UNIX).connect({sock:?})),\n\
             \x20                   ('rubric', lambda: open({rubric:?}).read()),\n\
             \x20                   ('secret', lambda: open({secret:?}).read()),\n\
             \x20                   ('write', lambda: open({write:?}, 'w').write('x')),\n\
             \x20                   ('tcp', lambda: socket.create_connection(('127.0.0.1', 22), timeout=2))):\n\
             \x20       try:\n\
             \x20           f()\n\
             \x20           out[name] = 'ok'\n\
             \x20       except OSError as e:\n\
             \x20           out[name] = 'denied'\n\
             \x20   raise RuntimeError('RESULT ' + json.dumps(out, sort_keys=True))\n",
            sock = path.display().to_string(),
            rubric = s.rubric.display().to_string(),
            secret = secret.display().to_string(),
            write = s.outside.join("pwned").display().to_string(),
        );
        let sub = s.submission(
            "mallory",
            "preprocess.py",
            &format!("import json\nimport cupy as cp\n\n{body}"),
        );
        let r = s.check(&sub);
        let got = reported(&r);
        for what in ["connect", "rubric", "secret", "write", "tcp"] {
            assert!(
                got.contains(&format!("\"{what}\": \"denied\"")),
                "{leg:?} {what}: {got}"
            );
        }
        assert!(
            listener.accept().is_err(),
            "{leg:?}: the host listener got a connection"
        );
        assert!(!s.outside.join("pwned").exists(), "{leg:?}");
        s.assert_clean("python function");
    }
}

#[test]
fn metadata_writes_outside_and_inside_are_refused() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "");
        let target = s.outside.join("true");
        std::fs::copy("/bin/true", &target).unwrap();
        if leg == Leg::Nobody {
            // The worst case: a file the grading user owns, as the worker's uid is that user.
            std::os::unix::fs::chown(&target, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let before = std::fs::metadata(&target).unwrap();
        let body = format!(
            "t = {:?}\nmine = os.path.join(os.environ['TMPDIR'], 'mine')\nopen(mine, 'w').close()\n\
             for name, path in (('outside', t), ('own', mine)):\n\
             \x20   for op, f in (('chmod', lambda: os.chmod(path, 0o4755)), ('utime', lambda: os.utime(path, (0, 0))),\n\
             \x20                 ('setxattr', lambda: os.setxattr(path, 'user.pwned', b'1')), ('chown', lambda: os.chown(path, 0, 0))):\n\
             \x20       try:\n\
             \x20           f()\n\
             \x20           out[name + ' ' + op] = 'ok'\n\
             \x20       except OSError as e:\n\
             \x20           out[name + ' ' + op] = 'denied ' + e.__class__.__name__ + ' ' + str(e.errno)\n",
            target.display().to_string()
        );
        let sub = s.submission("mallory", "k.py", &attack(&body));
        let r = s.check(&sub);
        let got = reported(&r);
        for op in ["chmod", "utime", "setxattr", "chown"] {
            assert!(
                got.contains(&format!("\"outside {op}\": \"denied")),
                "{leg:?} {op}: {got}"
            );
            assert!(
                got.contains(&format!("\"own {op}\": \"denied PermissionError 1\"")),
                "{leg:?} {op} on its own file: {got}"
            );
        }
        let after = std::fs::metadata(&target).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(before.mode(), after.mode(), "{leg:?}");
        assert_eq!(before.mtime(), after.mtime(), "{leg:?}");
        assert_eq!(before.uid(), after.uid(), "{leg:?}");
        s.assert_clean("metadata");
    }
}

#[test]
fn a_double_forked_setsid_daemon_dies_with_its_worker() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "");
        // The daemon's argv names the run's TMPDIR, so `survivors` finds it if it lives.
        let body = format!(
            "import os, sys, time\nif os.fork() == 0:\n\
             \x20   try:\n\
             \x20       os.setsid()\n\
             \x20   except OSError:\n\
             \x20       pass\n\
             \x20   if os.fork() == 0:\n\
             \x20       os.execv(sys.executable, [sys.executable, '-c', 'while True: pass', {:?}])\n\
             \x20   os._exit(0)\n\
             time.sleep(1)\n{KERNEL}",
            s.tmp.join("daemon").display().to_string()
        );
        let sub = s.submission("mallory", "k.py", &body);
        let r = s.check(&sub);
        // The import went on after forking: the kernel is graded as usual.
        assert_eq!(milestone(&r)["checks"][0]["status"], "pass", "{leg:?}: {r}");
        s.assert_clean("daemon");
    }
}

#[test]
fn memfd_and_tmpfs_filling_are_bounded() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "");
        let fill = "mib = 0\nchunk = b'x' * (16 << 20)\n\
                    try:\n    for i in range(1000):\n        with open(os.path.join(os.environ['TMPDIR'], 'f%d' % i), 'wb') as f:\n            for _ in range(8):\n                f.write(chunk)\n                mib += 16\nexcept OSError as e:\n    out['fill'] = e.__class__.__name__ + ' ' + str(e.errno)\nout['mib'] = mib\n";
        // Fill, then free the space again so that the outcome can be reported.
        let body = format!(
            "try:\n    fd = os.memfd_create('x')\n    out['memfd'] = 'ok'\nexcept OSError as e:\n    out['memfd'] = 'denied ' + str(e.errno)\n\
             out['dev shm'] = os.path.exists('/dev/shm')\n{fill}\
             for n in os.listdir(os.environ['TMPDIR']):\n    if n.startswith('f'):\n        os.remove(os.path.join(os.environ['TMPDIR'], n))\n"
        );
        let sub = s.submission("mallory", "k.py", &attack(&body));
        let r = s.check(&sub);
        let got = reported(&r);
        assert!(got.contains("\"memfd\": \"denied 1\""), "{leg:?}: {got}");
        assert!(got.contains("\"dev shm\": false"), "{leg:?}: {got}");
        assert!(
            got.contains("\"fill\": \"OSError 28\""),
            "{leg:?}: no ENOSPC: {got}"
        );
        let v: Value = serde_json::from_str(got.trim_start_matches("RESULT ")).unwrap();
        let mib = v["mib"].as_u64().unwrap();
        assert!((512..=1024).contains(&mib), "{leg:?}: wrote {mib} MiB");
        // Left full, the scratch has no room for the compiler's answer: the student's fault,
        // said so, never the grading machine's.
        let sub = s.submission(
            "filler",
            "k.py",
            &format!("import os\nout = {{}}\n{fill}{KERNEL}"),
        );
        let r = s.check(&sub);
        let c = &milestone(&r)["checks"][0];
        assert_eq!(c["status"], "fail", "{leg:?}: {c}");
        assert!(
            c["message"].as_str().unwrap().contains("filled"),
            "{leg:?}: {c}"
        );
        s.assert_clean("memfd/tmpfs");
    }
}

/// A cohort of one fork bomb and one honest student under `--jobs 2`: the honest student's
/// result is the one it gets alone.
#[test]
fn a_fork_bomb_does_not_change_another_students_grade() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "timeouts: {compile_s: 10}");
        let honest = s.submission("honest", "k.py", KERNEL);
        let alone = s.check(&honest);
        s.submission(
            "bomb",
            "k.py",
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        );
        let out = s.dir.join("out");
        std::fs::create_dir(&out).unwrap();
        if leg == Leg::Nobody {
            std::os::unix::fs::chown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let started = Instant::now();
        let o = s
            .command(&[
                "grade",
                "--backend",
                "emu",
                "--seed",
                "3",
                "--jobs",
                "2",
                "--rubric",
                &s.rubric.to_string_lossy(),
                &s.dir.join("subs").to_string_lossy(),
                "--out",
                &out.to_string_lossy(),
            ])
            .output()
            .unwrap();
        let read = |name: &str| -> Value {
            let p = out.join("students").join(name).join("result.json");
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|_| {
                panic!(
                    "{leg:?}: no {}: {}\n{}",
                    p.display(),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            }))
            .unwrap()
        };
        let graded = read("honest");
        assert_eq!(graded["score"], alone["score"], "{leg:?}: {graded}");
        // Every check the same but for the seconds it took.
        let verdicts = |r: &Value| -> Vec<(Value, Value, Value)> {
            milestone(r)["checks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c["name"].clone(), c["status"].clone(), c["message"].clone()))
                .collect()
        };
        assert_eq!(verdicts(&graded), verdicts(&alone), "{leg:?}");
        // The bomb's own verdict: it never finished importing.
        let bomb_check = &read("bomb")["milestones"][0]["checks"][0];
        assert!(
            bomb_check["message"]
                .as_str()
                .is_some_and(|m| m.contains("did not finish")),
            "{leg:?}: {bomb_check}"
        );
        let bomb = read("bomb");
        assert_eq!(bomb["score"], 0.0, "{leg:?}");
        eprintln!("{leg:?}: the cohort took {:?}", started.elapsed());
        s.assert_clean("fork bomb");
    }
}

/// Ctrl-C in the middle of a cohort: exit 130, every worker ended, the temp folder gone; a
/// grader killed with SIGKILL leaves no worker running, and the next run removes its folder.
#[test]
fn interrupting_a_cohort_leaves_nothing_behind() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        for signal in [libc::SIGINT, libc::SIGKILL] {
            let s = scene(leg, "timeouts: {compile_s: 120}");
            for name in ["a", "b", "c"] {
                s.submission(
                    name,
                    "k.py",
                    &format!("import time\ntime.sleep(600)\n{KERNEL}"),
                );
            }
            let out = s.dir.join("out");
            std::fs::create_dir(&out).unwrap();
            if leg == Leg::Nobody {
                std::os::unix::fs::chown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
            }
            let mut child = s
                .command(&[
                    "grade",
                    "--backend",
                    "emu",
                    "--jobs",
                    "2",
                    "--rubric",
                    &s.rubric.to_string_lossy(),
                    &s.dir.join("subs").to_string_lossy(),
                    "--out",
                    &out.to_string_lossy(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Wait until both students' compile workers run.
            let deadline = Instant::now() + Duration::from_secs(60);
            while s
                .survivors()
                .iter()
                .filter(|l| l.contains("__worker"))
                .count()
                < 2
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                s.survivors().iter().any(|l| l.contains("__worker")),
                "{leg:?}: no worker started"
            );
            // The grader itself: as nobody, the shell of `unshare` has exec'd it by now.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
            let status = child.wait().unwrap();
            use std::os::unix::process::ExitStatusExt;
            if signal == libc::SIGINT {
                assert_eq!(status.code(), Some(130), "{leg:?}: {status:?}");
                s.assert_clean("SIGINT");
                // No student was graded (each sleeps at import): a worker ended by the
                // interrupt is no failing submission, and `--resume` must grade them all.
                let graded: Vec<_> = ["a", "b", "c"]
                    .iter()
                    .filter(|n| out.join("students").join(n).join("result.json").exists())
                    .collect();
                assert!(
                    graded.is_empty(),
                    "{leg:?}: results after SIGINT: {graded:?}"
                );
            } else {
                assert_eq!(status.signal(), Some(libc::SIGKILL), "{leg:?}");
                // The workers end with the grader (their supervisors see it gone) ...
                let deadline = Instant::now() + Duration::from_secs(5);
                while !s.survivors().is_empty() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
                assert!(s.survivors().is_empty(), "{leg:?}: {:?}", s.survivors());
                // ... and the next run removes the folder the killed one left.
                let o = s.command(&["doctor"]).output().unwrap();
                assert!(o.status.success(), "{leg:?}");
                s.assert_clean("SIGKILL then doctor");
            }
        }
    }
}
