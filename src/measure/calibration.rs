//! CPU baselines: measured robustly once per machine and rubric, cached, or pinned for a course.
//!
//! A single-threaded CPU time for 2^24 floats moved between 12 and 15 ms within an hour on one
//! machine, enough to flip a "100x the CPU" verdict near its bar. So a CPU baseline is the
//! minimum of several runs (the least disturbed one), measured once and then reused: from a
//! calibration file an instructor pinned with `cugrade calibrate` (beside the rubric, named
//! `<rubric>.calibration.json`), else from a cache (beside `grade`'s outputs, or in the user's
//! cache directory), else measured now and written to the cache. Every result records which.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A file of CPU baselines (the cache and a pinned calibration have the same shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineFile {
    /// The CPU the values were measured on.
    pub cpu: String,
    pub cugrade_version: String,
    /// Seconds since the Unix epoch when the file was last written.
    pub written_unix: u64,
    /// `key` → baseline.
    pub baselines: BTreeMap<String, CpuBaseline>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuBaseline {
    /// The minimum over `runs_ms`.
    pub ms: f64,
    pub runs_ms: Vec<f64>,
}

/// Where a baseline came from, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub ms: f64,
    pub source: String,
    pub cpu: String,
}

/// The model name of this machine's CPU (from /proc/cpuinfo), e.g. `AMD EPYC 9654 96-Core`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The key of one baseline: assignment, what it is (`cpu`, `cpu_parallel`) and the case with
/// its variables, so that a changed case is measured again.
pub fn key(assignment: &str, what: &str, case: &str, vars: &BTreeMap<String, i64>) -> String {
    let v: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{assignment}/{what}/{case}{{{}}}", v.join(","))
}

/// The pinned calibration file of a rubric: `reduction.yaml` → `reduction.calibration.json`.
pub fn pinned_path(rubric: &Path) -> PathBuf {
    let stem = rubric
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rubric".into());
    rubric.with_file_name(format!("{stem}.calibration.json"))
}

/// The default cache: `$XDG_CACHE_HOME/cugrade/cpu-baselines.json` (or under `~/.cache`).
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("cugrade").join("cpu-baselines.json")
}

/// Measure `f` robustly: at least 5 runs, up to 15 or about 10 s, and keep the minimum.
pub fn measure(mut f: impl FnMut() -> Result<f64, String>) -> Result<CpuBaseline, String> {
    let started = Instant::now();
    let mut runs = Vec::new();
    while runs.len() < 15 {
        runs.push(f()?);
        if runs.len() >= 5 && started.elapsed() > Duration::from_secs(10) {
            break;
        }
        if runs.len() >= 3 && started.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let ms = runs.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(CpuBaseline { ms, runs_ms: runs })
}

fn read(path: &Path) -> Option<BaselineFile> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Write `file` atomically (a temporary file renamed over the old one).
pub fn write(path: &Path, file: &BaselineFile) -> Result<(), String> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let text = serde_json::to_string_pretty(file).map_err(|e| e.to_string())?;
    std::fs::write(&tmp, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A pinned baseline for `key`, if the rubric has a calibration file that holds it.
pub fn pinned(rubric: &Path, key: &str) -> Option<Found> {
    let path = pinned_path(rubric);
    let f = read(&path)?;
    let b = f.baselines.get(key)?;
    Some(Found {
        ms: b.ms,
        source: format!("pinned in {}", path.display()),
        cpu: f.cpu,
    })
}

/// The cached baseline for `key` on this CPU, or `measure` it now and cache it. Concurrent
/// graders on one machine take a lock on the cache, so one measures and the others read.
pub fn cached_or_measure(
    cache: &Path,
    key: &str,
    measure_now: impl FnOnce() -> Result<CpuBaseline, String>,
) -> Result<Found, String> {
    let cpu = cpu_model();
    if let Some(d) = cache.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let lock_path = cache.with_extension("lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .ok();
    if let Some(l) = &lock {
        let _ = l.lock();
    }
    let mut file = read(cache)
        .filter(|f| f.cpu == cpu)
        .unwrap_or_else(|| BaselineFile {
            cpu: cpu.clone(),
            ..Default::default()
        });
    if let Some(b) = file.baselines.get(key) {
        return Ok(Found {
            ms: b.ms,
            source: format!("cached in {}", cache.display()),
            cpu,
        });
    }
    let b = measure_now()?;
    let ms = b.ms;
    file.baselines.insert(key.to_string(), b);
    file.cugrade_version = env!("CARGO_PKG_VERSION").to_string();
    file.written_unix = now_unix();
    let source = match write(cache, &file) {
        Ok(()) => format!("measured now, cached in {}", cache.display()),
        Err(e) => format!("measured now (not cached: {e})"),
    };
    Ok(Found { ms, source, cpu })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_once_then_read_from_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cpu.json");
        let vars: BTreeMap<String, i64> = [("n".to_string(), 16)].into_iter().collect();
        let k = key("reduction", "cpu", "n2p24", &vars);
        assert_eq!(k, "reduction/cpu/n2p24{n=16}");
        let mut calls = 0;
        let mut times = vec![14.0, 12.0, 13.0, 12.5, 15.0].into_iter();
        let first = cached_or_measure(&cache, &k, || {
            measure(|| {
                calls += 1;
                Ok(times.next().unwrap_or(20.0))
            })
        })
        .unwrap();
        assert_eq!(first.ms, 12.0);
        assert!(first.source.starts_with("measured now"));
        assert!(calls >= 5);
        let again = cached_or_measure(&cache, &k, || Err("must not measure again".into())).unwrap();
        assert_eq!(again.ms, 12.0);
        assert!(again.source.starts_with("cached in"));
        // A rubric's pinned file wins where it exists.
        let rubric = d.path().join("reduction.yaml");
        assert!(pinned(&rubric, &k).is_none());
        let mut f = read(&cache).unwrap();
        f.baselines.get_mut(&k).unwrap().ms = 11.0;
        write(&pinned_path(&rubric), &f).unwrap();
        let p = pinned(&rubric, &k).unwrap();
        assert_eq!(p.ms, 11.0);
        assert!(p.source.contains("reduction.calibration.json"));
    }

    #[test]
    fn jobs_on_several_gpus_measure_a_baseline_once_per_machine() {
        // `grade --gpus 0,1 --jobs 4`: four jobs (two per GPU) ask for the same baseline at
        // once; one measures, the others wait on the cache's lock and read its value.
        use std::sync::atomic::{AtomicUsize, Ordering};
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cpu-baselines.json");
        let measured = AtomicUsize::new(0);
        let found: Vec<Found> = std::thread::scope(|s| {
            let jobs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        cached_or_measure(&cache, "lab/cpu/big{n=1}", || {
                            let n = measured.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(100));
                            Ok(CpuBaseline {
                                ms: 10.0 + n as f64,
                                runs_ms: vec![10.0 + n as f64],
                            })
                        })
                        .unwrap()
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().unwrap()).collect()
        });
        assert_eq!(measured.load(Ordering::SeqCst), 1);
        assert!(found.iter().all(|f| f.ms == 10.0));
        assert_eq!(
            found
                .iter()
                .filter(|f| f.source.starts_with("measured now"))
                .count(),
            1
        );
    }

    #[test]
    fn a_failing_implementation_is_an_error_not_a_cache_entry() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cpu.json");
        let r = cached_or_measure(&cache, "k", || measure(|| Err("boom".into())));
        assert_eq!(r.unwrap_err(), "boom");
        assert!(read(&cache).is_none());
    }
}
