//! Workers in cgroups of their own, where the host lets cugrade make cgroups (see
//! `sandbox::cgroup`): every process of a worker is in its `cugrade-w-*` cgroup while it runs,
//! and the cgroup is gone when grading is over. Where the host does not (no writable cgroup v2
//! hierarchy), the worker's report says why, and this test says it skipped.

use crate::support::{cugrade, nvrtc, root};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The cgroup of each live process whose command line names `needle`.
fn cgroups_of(needle: &str) -> Vec<(u32, String)> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(needle) {
            continue;
        }
        if let Ok(cg) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
            let v2 = cg.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("");
            out.push((pid, v2.to_string()));
        }
    }
    out
}

#[test]
fn every_process_of_a_worker_is_in_its_cgroup_which_ends_with_it() {
    if !nvrtc() {
        return;
    }
    if cugrade::compile::toolchain::numba().is_err() {
        eprintln!("SKIPPED: no Numba toolchain (ci/with-nvrtc installs it)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    let sub = d.path().join("sub");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    // The import forks a child that sleeps too: both must be in the worker's cgroup.
    std::fs::write(
        sub.join("k.py"),
        "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\ntime.sleep(4)\n\
         from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, c, n):\n    i = cuda.grid(1)\n    if i < n:\n        c[i] = a[i] + b[i]\n",
    )
    .unwrap();
    let json = d.path().join("r.json");
    let child = cugrade()
        .args(["check", "--backend", "emu", "--seed", "1", "--rubric"])
        .arg(root().join("rubrics/vector-add.yaml"))
        .arg(&sub)
        .arg("--json")
        .arg(&json)
        .env("TMPDIR", &tmp)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let grader = child.id();
    let needle = tmp.display().to_string();
    // The import's two sleepers (they run the interpreter, named with the worker's temp dir).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = vec![];
    while Instant::now() < deadline {
        seen = cgroups_of(&needle)
            .into_iter()
            .filter(|(pid, _)| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains("cugrade_numba_driver")
            })
            .collect();
        if seen.len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let result: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json)
            .unwrap_or_else(|_| panic!("no result: {}", String::from_utf8_lossy(&out.stderr))),
    )
    .unwrap();
    let line = result["run"]["sandbox"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .find(|l| l.starts_with("cgroup:"))
        .unwrap_or_else(|| panic!("no cgroup layer reported: {result}"))
        .to_string();
    // The line names no path (report lines must not vary between runs).
    assert!(
        !line.contains("cugrade-w-"),
        "a per-run path in a report line: {line}"
    );
    if !line.contains(cugrade::sandbox::cgroup::OWN) {
        eprintln!("SKIPPED: no worker cgroups on this host: {line}");
        return;
    }
    assert!(
        seen.len() >= 2,
        "the import's processes were not seen: {seen:?}"
    );
    for (pid, cg) in &seen {
        assert!(
            cg.contains(&format!("/cugrade-w-{grader}-")),
            "process {pid} is in {cg}, not a worker cgroup of grader {grader}"
        );
    }
    // The worker cgroups (the compile worker's and the run worker's) are gone.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mountinfo
        .lines()
        .find(|l| {
            l.split(" - ")
                .nth(1)
                .is_some_and(|r| r.starts_with("cgroup2 "))
        })
        .and_then(|l| l.split_whitespace().nth(4))
        .expect("a cgroup2 mount");
    let dir = PathBuf::from(mount).join(seen[0].1.trim_start_matches('/'));
    assert!(!dir.exists(), "{} is left", dir.display());
    let base = dir.parent().unwrap().to_path_buf();
    let left: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("cugrade-w-{grader}-")))
        .collect();
    assert!(left.is_empty(), "worker cgroups left: {left:?}");
    assert!(cgroups_of(&needle).is_empty(), "processes left");
}
