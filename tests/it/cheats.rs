//! The cheats of issue 19 on the emulator: each folder of tests/cheats/ holds a submission
//! that games the grader (lower precision on the performance case, emulator detection through
//! %globaltimer for metrics and for sanitizers, detection through memory latency, output left
//! unwritten on repeated launches) and `expected.json`: what the emulator must say (`emu`) and
//! what a GPU must say (`cuda`, checked by ci/gpu-integrity.sh with the same rules). Where the
//! emulator cannot judge a cheat (no timed launches, no memory latency), `emu.why` says so and
//! the expectations are what it does say.

use crate::support::{course_copy, cugrade, nvrtc, root};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `rubrics/NAME.yaml` copied under `dir` with its reference kernel beside it (a rubric's files
/// must lie in its course tree) and `extra` correctness cases.
fn rubric(dir: &Path, name: &str, extra: &[Value]) -> PathBuf {
    let path = course_copy(dir, name);
    let mut y: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    if let Some(cases) = y["cases"]["correctness"].as_sequence_mut() {
        for c in extra {
            cases.push(serde_yaml::to_value(c).unwrap());
        }
    }
    std::fs::write(&path, serde_yaml::to_string(&y).unwrap()).unwrap();
    path
}

/// Does `check` match every field `want` gives (`kind`, `name` prefix, `status`, `cause`,
/// `points`, `message` substring)?
fn matches(check: &Value, want: &Value) -> bool {
    let eq = |k: &str| want.get(k).is_none_or(|w| check.get(k) == Some(w));
    let name_ok = want["name"]
        .as_str()
        .is_none_or(|n| check["name"].as_str().is_some_and(|c| c.starts_with(n)));
    let msg_ok = want["message"]
        .as_str()
        .is_none_or(|m| check["message"].as_str().is_some_and(|c| c.contains(m)));
    let points_ok = want["points"]
        .as_f64()
        .is_none_or(|p| check["points"].as_f64() == Some(p));
    eq("kind") && eq("status") && eq("cause") && name_ok && msg_ok && points_ok
}

/// Every expectation of `spec` (`expect`, `flags`, `flags_absent`) against result `r`; the
/// failures, one line each.
fn judge(r: &Value, spec: &Value) -> Vec<String> {
    let mut bad = vec![];
    for want in spec["expect"].as_array().into_iter().flatten() {
        let id = want["milestone"].as_str().unwrap();
        let Some(m) = r["milestones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
        else {
            bad.push(format!("no milestone {id}"));
            continue;
        };
        if want.get("kind").is_some()
            && !m["checks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| matches(c, want))
        {
            bad.push(format!("{id}: no check like {want} in {}", m["checks"]));
        }
        if let Some(s) = want["score"].as_f64()
            && m["score"].as_f64() != Some(s)
        {
            bad.push(format!("{id}: score {} (expected {s})", m["score"]));
        }
    }
    let flags: Vec<&str> = r["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    for f in spec["flags"].as_array().into_iter().flatten() {
        let f = f.as_str().unwrap();
        if !flags.contains(&f) {
            bad.push(format!("flag {f} missing (flags: {})", r["flags"]));
        }
    }
    for f in spec["flags_absent"].as_array().into_iter().flatten() {
        let f = f.as_str().unwrap();
        if flags.contains(&f) {
            bad.push(format!("flag {f} raised: {}", r["flags"]));
        }
    }
    bad
}

#[test]
fn cheats_get_their_expected_verdicts_on_the_emulator() {
    if !nvrtc() {
        return;
    }
    let dirs = std::fs::read_dir(root().join("tests/cheats")).unwrap();
    let mut names: Vec<PathBuf> = dirs
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    let mut failures = vec![];
    for dir in names {
        let spec: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap())
                .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let extra: Vec<Value> = spec["emu"]["extra_cases"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let r = rubric(tmp.path(), spec["rubric"].as_str().unwrap(), &extra);
        let json = tmp.path().join("result.json");
        let out = cugrade()
            .args(["check", "--backend", "emu", "--seed", "1", "--rubric"])
            .arg(&r)
            .arg(&dir)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(&json) else {
            failures.push(format!(
                "{name}: no result.json: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        };
        let result: Value = serde_json::from_str(&text).unwrap();
        for b in judge(&result, &spec["emu"]) {
            failures.push(format!("{name}: {b}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_expectation_rules_read_a_result() {
    let r: Value = serde_json::json!({
        "milestones": [{"id": "m", "score": 0.0, "checks": [
            {"kind": "metric", "name": "global_store_efficiency", "status": "fail", "points": 0.0,
             "message": "global_store_efficiency = 12.5 (needs at least 80) on the GPU (Nsight Compute)"}
        ]}],
        "flags": [{"kind": "reads-timer", "message": "x"}]
    });
    let ok: Value = serde_json::json!({
        "expect": [{"milestone": "m", "kind": "metric", "name": "global_store", "status": "fail",
                    "points": 0, "message": "on the GPU", "score": 0}],
        "flags": ["reads-timer"], "flags_absent": ["backends-disagree"]
    });
    assert!(judge(&r, &ok).is_empty(), "{:?}", judge(&r, &ok));
    let wrong: Value = serde_json::json!({
        "expect": [{"milestone": "m", "kind": "metric", "status": "pass"}],
        "flags": ["backends-disagree"], "flags_absent": ["reads-timer"]
    });
    assert_eq!(judge(&r, &wrong).len(), 3);
}
