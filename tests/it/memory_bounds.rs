//! A student's Python that reaches for memory no rlimit counts (issue 31), through the binary
//! the way a course runs it, as root and (when the tests run as root) as nobody: at import in
//! Numba's compile worker, inside a cohort between two honest students, and at import in a
//! function lab's Python worker. Before this, a 9 GiB `MAP_SHARED|MAP_ANONYMOUS` mapping
//! touched in full and three SysV segments of 1 GiB (touched, then detached) went past the
//! 8 GiB `RLIMIT_DATA`; now each is refused, and the honest students' grades are the ones they
//! get alone. `sandbox_memory` checks the same calls one by one inside the sandbox.

use crate::hostile::{
    KERNEL, NOBODY, SERIAL, Scene, attack, legs, milestone, reported, scene, scene_of,
};
use crate::support::numba as ready;
use serde_json::Value;

/// Python that tries each way and records how it went in `out` (see `hostile::attack`).
const GRAB: &str = r#"
import ctypes, mmap
GIB = 1 << 30
try:
    m = mmap.mmap(-1, 2 * GIB)  # MAP_SHARED | MAP_ANONYMOUS
    chunk = b'\x01' * (1 << 20)
    for _ in range(2048):
        m.write(chunk)
    m.close()
    out['shared anonymous'] = 'ok touched'
except OSError as e:
    out['shared anonymous'] = 'denied ' + str(e.errno)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmdt.argtypes = [ctypes.c_void_p]
segments = []
for _ in range(3):
    sid = libc.shmget(0, GIB, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if sid < 0:
        segments.append('denied ' + str(ctypes.get_errno()))
        continue
    addr = libc.shmat(sid, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        segments.append('shmat denied ' + str(ctypes.get_errno()))
        continue
    ctypes.memset(addr, 1, GIB)
    libc.shmdt(addr)
    segments.append('ok touched')
out['sysv shm'] = segments
for name, path in (('dev shm', '/dev/shm/cugrade-grab'), ('dev zero', '/dev/zero')):
    try:
        with open(path, 'rb' if name == 'dev zero' else 'wb'):
            pass
        out[name] = 'ok'
    except OSError as e:
        out[name] = 'denied ' + str(e.errno)
try:
    os.memfd_create('grab')
    out['memfd'] = 'ok'
except OSError as e:
    out['memfd'] = 'denied ' + str(e.errno)
"#;

/// What the attack reported, as JSON.
fn outcome(r: &Value) -> Value {
    let got = reported(r);
    serde_json::from_str(got.trim_start_matches("RESULT ")).unwrap_or_else(|_| panic!("{got}"))
}

fn assert_refused(what: &str, scene: &Scene, v: &Value) {
    let leg = scene.leg;
    assert_eq!(v["shared anonymous"], "denied 1", "{what} {leg:?}: {v}");
    assert_eq!(
        v["sysv shm"],
        serde_json::json!(["denied 1", "denied 1", "denied 1"]),
        "{what} {leg:?}: {v}"
    );
    assert_eq!(v["memfd"], "denied 1", "{what} {leg:?}: {v}");
    for key in ["dev shm", "dev zero"] {
        assert!(
            v[key].as_str().is_some_and(|s| s.starts_with("denied")),
            "{what} {leg:?} {key}: {v}"
        );
    }
}

/// The checks that decide a grade: name, status and message of each.
fn verdicts(r: &Value) -> Vec<(Value, Value, Value)> {
    milestone(r)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].clone(), c["status"].clone(), c["message"].clone()))
        .collect()
}

#[test]
fn uncounted_memory_is_refused_at_import_and_honest_neighbours_are_graded_as_alone() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene(leg, "");
        let alone = s.check(&s.submission("solo", "k.py", KERNEL));
        s.submission("alice", "k.py", KERNEL);
        s.submission("mallory", "k.py", &attack(GRAB));
        s.submission("zoe", "k.py", KERNEL);
        std::fs::remove_dir_all(s.dir.join("subs/solo")).unwrap();
        let out = s.dir.join("out");
        std::fs::create_dir(&out).unwrap();
        if leg == crate::hostile::Leg::Nobody {
            std::os::unix::fs::chown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let o = s
            .command(&[
                "grade",
                "--backend",
                "emu",
                "--seed",
                "3",
                "--jobs",
                "1",
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
        assert_refused("compile worker", &s, &outcome(&read("mallory")));
        for honest in ["alice", "zoe"] {
            let r = read(honest);
            assert_eq!(r["score"], alone["score"], "{leg:?} {honest}: {r}");
            assert_eq!(verdicts(&r), verdicts(&alone), "{leg:?} {honest}");
        }
        s.assert_clean("uncounted memory in a cohort");
    }
}

#[test]
fn uncounted_memory_is_refused_in_a_function_labs_python_worker() {
    if !ready() {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for leg in legs() {
        let s = scene_of(leg, "preprocess", "py", "");
        let text = format!(
            "import os, json\nout = {{}}\n{GRAB}\nraise RuntimeError('RESULT ' + \
             json.dumps(out, sort_keys=True))\n\ndef preprocess(table):\n    return None\n"
        );
        let sub = s.submission("mallory", "preprocess.py", &text);
        let r = s.check(&sub);
        assert_refused("function lab", &s, &outcome(&r));
        s.assert_clean("uncounted memory in a function lab");
    }
}
