//! The speed estimate's calibration benchmark (docs/estimate.md, "Calibration"): grade the
//! labs' reference kernels, the example submissions and the validation ladders on the
//! emulator (each performance check carries an estimate), pair every estimated kernel with
//! its median measured on a GPU by `ci/gpu-estimate-bench.sh`, and print estimated vs
//! measured with the ratio. `--fit` fits the model's free parameters on the labs' reference
//! kernels and examples only (never on the ladders) and prints them for `gpus.yaml`.
//!
//! Run: `ci/with-nvrtc cargo run --release --example estimate_bench -- [OPTIONS]`
//!   --measured DIR   the GPU run (unpacked estimate-bench-grade.tgz: DIR/grade/LAB/ENTRY/
//!                    result.json), or a folder of LAB-ENTRY.json (ci/gpu-run.sh's layout), or
//!                    a CSV of medians (docs/validation/estimate-h100-measured.csv)
//!   --gpu ID         the modelled GPU (default h100)
//!   --reuse          keep emulator results already in target/estimate-bench
//!   --only TEXT      only entries whose LAB/ENTRY contains TEXT
//!   --fit            fit the free parameters, print them and the table again with them
//!   --markdown FILE  write the table (Markdown) there too
//! Needs the release binary (`cargo build --release`; or CUGRADE_BIN).

use cugrade::estimate::gpu::{self, Gpu};
use cugrade::estimate::model::{self, KernelProfile};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

struct Args {
    measured: Option<PathBuf>,
    gpu: String,
    reuse: bool,
    only: Option<String>,
    fit: bool,
    markdown: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        measured: None,
        gpu: gpu::DEFAULT.into(),
        reuse: false,
        only: None,
        fit: false,
        markdown: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--measured" => a.measured = it.next().map(PathBuf::from),
            "--gpu" => a.gpu = it.next().unwrap_or_default(),
            "--reuse" => a.reuse = true,
            "--only" => a.only = it.next(),
            "--fit" => a.fit = true,
            "--markdown" => a.markdown = it.next().map(PathBuf::from),
            other => {
                eprintln!("unknown argument {other}; see the header of examples/estimate_bench.rs");
                std::process::exit(2);
            }
        }
    }
    a
}

/// The entries ci/gpu-estimate-bench.sh grades: (lab, entry, path).
fn entries() -> Vec<(String, String, PathBuf)> {
    let mut out = Vec::new();
    let mut labs: Vec<String> = std::fs::read_dir("rubrics")
        .expect("run from the repository root")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".yaml")
                .map(String::from)
        })
        .collect();
    labs.sort();
    for lab in labs {
        out.push((
            lab.clone(),
            "reference".into(),
            PathBuf::from(format!("reference-kernels/{lab}.cu")),
        ));
        let mut subs: Vec<PathBuf> = std::fs::read_dir(format!("submissions-example/{lab}"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        subs.sort();
        for s in subs {
            let name = s.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("numba_") && s.is_dir() {
                out.push((lab.clone(), name, s));
            }
        }
        let ladder = match lab.as_str() {
            "matmul" => Some("sgemm"),
            "transpose" => Some("transpose"),
            "softmax" => Some("softmax"),
            "reduction" => Some("reduction"),
            _ => None,
        };
        let mut round2: Vec<PathBuf> = std::fs::read_dir("ci/estimate/ladders/round2")
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        round2.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{lab}-")))
        });
        round2.sort();
        for s in round2 {
            let name = format!("round2-{}", s.file_name().unwrap().to_string_lossy());
            out.push((lab.clone(), name, s));
        }
        if let Some(l) = ladder {
            let mut steps: Vec<PathBuf> = std::fs::read_dir(format!("ci/estimate/ladders/{l}"))
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            steps.sort();
            for s in steps {
                let name = format!("{l}-{}", s.file_name().unwrap().to_string_lossy());
                out.push((lab.clone(), name, s));
            }
        }
    }
    out
}

fn is_validation(entry: &str) -> bool {
    ["sgemm-", "transpose-", "softmax-", "reduction-", "round2-"]
        .iter()
        .any(|l| entry.starts_with(l))
}

/// One kernel: its estimate's inputs and what the GPU measured.
struct Row {
    name: String,
    validation: bool,
    profile: Option<KernelProfile>,
    /// A fixed estimate (cuBLAS, a copy) when there is no profile.
    fixed_ms: Option<f64>,
    measured: Option<f64>,
    /// Seconds the estimate took on this machine.
    seconds: f64,
}

fn read(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Measured medians of a GPU run: (lab, entry, milestone) -> kernel ms, and (lab, baseline
/// kind) -> baseline ms.
/// Measured kernel medians by (lab, entry, milestone), and GPU-baseline medians by (lab, kind).
type Medians = (
    HashMap<(String, String, String), f64>,
    HashMap<(String, String), f64>,
);

fn measured(dir: &Path) -> Medians {
    let mut kernels = HashMap::new();
    let mut baselines = HashMap::new();
    // docs/validation/estimate-h100-measured.csv: lab,submission,milestone,check,status,
    // kernel_ms,baseline,baseline_ms (the first check of a milestone gives its kernel's time).
    if dir.extension().is_some_and(|e| e == "csv") {
        let text = std::fs::read_to_string(dir).unwrap_or_else(|e| {
            eprintln!("{}: {e}", dir.display());
            std::process::exit(2)
        });
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() < 8 {
                continue;
            }
            if let Ok(ms) = f[5].parse::<f64>() {
                kernels
                    .entry((f[0].to_string(), f[1].to_string(), f[2].to_string()))
                    .or_insert(ms);
            }
            if let Ok(ms) = f[7].parse::<f64>()
                && !f[6].starts_with("cpu")
            {
                baselines
                    .entry((f[0].to_string(), f[6].to_string()))
                    .or_insert(ms);
            }
        }
        return (kernels, baselines);
    }
    let mut files: Vec<(String, String, PathBuf)> = Vec::new();
    let grade = dir.join("grade");
    if grade.is_dir() {
        for lab in std::fs::read_dir(&grade).into_iter().flatten().flatten() {
            // A cohort's `--out` keeps each student under `students/` (older runs: at the top).
            let students = lab.path().join("students");
            let entries = if students.is_dir() {
                students
            } else {
                lab.path()
            };
            for e in std::fs::read_dir(entries).into_iter().flatten().flatten() {
                let f = e.path().join("result.json");
                if f.is_file() {
                    files.push((
                        lab.file_name().to_string_lossy().into(),
                        e.file_name().to_string_lossy().into(),
                        f,
                    ));
                }
            }
        }
    } else {
        let labs: Vec<String> = entries().into_iter().map(|e| e.0).collect();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            let Some(stem) = n.strip_suffix(".json") else {
                continue;
            };
            if let Some(lab) = labs
                .iter()
                .filter(|l| stem.starts_with(&format!("{l}-")))
                .max_by_key(|l| l.len())
            {
                files.push((lab.clone(), stem[lab.len() + 1..].to_string(), e.path()));
            }
        }
    }
    let num = |re: &regex::Regex, s: &str| re.captures(s).and_then(|c| c[1].parse::<f64>().ok());
    let kernel_re = regex::Regex::new(r"kernel median ([0-9.]+) ms").unwrap();
    let base_re = regex::Regex::new(r"\(([0-9.]+) ms\)").unwrap();
    for (lab, entry, f) in files {
        let Some(r) = read(&f) else { continue };
        for m in r["milestones"].as_array().into_iter().flatten() {
            let id = m["id"].as_str().unwrap_or_default().to_string();
            for c in m["checks"].as_array().into_iter().flatten() {
                if c["kind"] != "performance" {
                    continue;
                }
                let msg = c["message"].as_str().unwrap_or_default();
                let t = &c["timing"];
                let med = t["median_ms"].as_f64().or_else(|| num(&kernel_re, msg));
                if let Some(ms) = med {
                    kernels
                        .entry((lab.clone(), entry.clone(), id.clone()))
                        .or_insert(ms);
                }
                let b = &t["baseline"];
                let kind = b["kind"].as_str().map(String::from).or_else(|| {
                    if msg.contains("of cuBLAS") {
                        Some("cublas".into())
                    } else if msg.contains("copy bandwidth") {
                        Some("copy".into())
                    } else {
                        msg.split("reference `")
                            .nth(1)
                            .and_then(|s| s.split('`').next())
                            .map(|k| format!("reference:{k}"))
                    }
                });
                let bms = if b["paired"].as_bool() == Some(true) {
                    b["median_ms"].as_f64()
                } else if t.is_null() && !msg.contains("CPU") {
                    num(&base_re, msg)
                } else {
                    None
                };
                if let (Some(k), Some(ms)) = (kind, bms)
                    && !k.starts_with("cpu")
                {
                    baselines.entry((lab.clone(), k)).or_insert(ms);
                }
            }
        }
    }
    (kernels, baselines)
}

fn estimate(r: &Row, g: &Gpu) -> Option<f64> {
    match &r.profile {
        Some(p) => Some(model::time(p, g).ms),
        None => r.fixed_ms,
    }
}

/// Mean squared log error of the fitting rows, plus the prior's pull.
fn loss(rows: &[&Row], g: &Gpu, prior: &[(f64, f64)]) -> f64 {
    let mut s = 0.0;
    let mut n = 0.0f64;
    for r in rows {
        if let (Some(e), Some(m)) = (estimate(r, g), r.measured) {
            s += (e / m).ln().powi(2);
            n += 1.0;
        }
    }
    let pull: f64 = prior
        .iter()
        .map(|(v, v0)| 0.02 * (v / v0).ln().powi(2))
        .sum();
    s / n.max(1.0) + pull
}

/// The parameters the fit may move.
fn free(g: &mut Gpu) -> Vec<(&'static str, &mut f64)> {
    vec![
        (
            "l2_load_sectors_per_ns",
            &mut g.l2_load_sectors_per_ns.value,
        ),
        (
            "l2_store_sectors_per_ns",
            &mut g.l2_store_sectors_per_ns.value,
        ),
        ("l2_atomic_ops_per_ns", &mut g.l2_atomic_ops_per_ns.value),
        ("dram_gbs", &mut g.dram_gbs.value),
        (
            "same_address_atomic_ns",
            &mut g.same_address_atomic_ns.value,
        ),
        ("launch_us", &mut g.launch_us.value),
        ("latency_scale", &mut g.latency_scale.value),
        ("combine_p", &mut g.combine_p.value),
        ("l1_wavefront_rate", &mut g.l1_wavefront_rate.value),
        ("issue_rate", &mut g.issue_rate.value),
        ("alu_rate", &mut g.alu_rate.value),
    ]
}

fn values(g: &Gpu) -> Vec<f64> {
    let mut c = g.clone();
    free(&mut c).into_iter().map(|(_, v)| *v).collect()
}

fn set(g: &mut Gpu, vals: &[f64]) {
    for ((_, v), x) in free(g).into_iter().zip(vals) {
        *v = *x;
    }
}

fn fit(rows: &[&Row], g0: &Gpu) -> Gpu {
    let start = values(g0);
    let mut g = g0.clone();
    let mut cur = start.clone();
    let prior =
        |v: &[f64]| -> Vec<(f64, f64)> { v.iter().copied().zip(start.iter().copied()).collect() };
    for _sweep in 0..12 {
        for i in 0..cur.len() {
            // Golden-section search on log(value) within a factor of 4 either way.
            let (mut a, mut b) = ((start[i] / 4.0).ln(), (start[i] * 4.0).ln());
            let phi = 0.618_033_988_75;
            let f = |x: f64, cur: &mut Vec<f64>, g: &mut Gpu| {
                cur[i] = x.exp();
                set(g, cur);
                loss(rows, g, &prior(cur))
            };
            for _ in 0..40 {
                let c = b - phi * (b - a);
                let d = a + phi * (b - a);
                if f(c, &mut cur, &mut g) < f(d, &mut cur, &mut g) {
                    b = d;
                } else {
                    a = c;
                }
            }
            cur[i] = ((a + b) / 2.0).exp();
            set(&mut g, &cur);
        }
    }
    g
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn table(rows: &[Row], g: &Gpu) -> String {
    let mut out = String::new();
    out.push_str("| kernel | set | estimate (ms) | measured (ms) | estimate / measured | limited by |\n| --- | --- | --- | --- | --- | --- |\n");
    for r in rows {
        let e = estimate(r, g);
        let lim = r
            .profile
            .as_ref()
            .map(|p| model::time(p, g).limiter)
            .unwrap_or_else(|| "-".into());
        let f = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.4}"));
        let ratio = match (e, r.measured) {
            (Some(e), Some(m)) => format!("{:.2}", e / m),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {ratio} | {lim} |\n",
            r.name,
            if r.validation { "validation" } else { "fit" },
            f(e),
            f(r.measured)
        ));
    }
    for (set, val) in [("fit", false), ("validation", true)] {
        let pairs: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.validation == val)
            .filter_map(|r| Some((estimate(r, g)?, r.measured?)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let within = pairs
            .iter()
            .filter(|(e, m)| (e / m - 1.0).abs() <= 0.30)
            .count();
        let mut kept = 0;
        let mut compared = 0;
        for (i, a) in pairs.iter().enumerate() {
            for b in &pairs[i + 1..] {
                if (a.1 / b.1).max(b.1 / a.1) > 1.25 {
                    compared += 1;
                    if (a.0 < b.0) == (a.1 < b.1) {
                        kept += 1;
                    }
                }
            }
        }
        let logs: Vec<f64> = pairs.iter().map(|(e, m)| (e / m).ln()).collect();
        let gm = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
        out.push_str(&format!(
            "\n{set}: {} kernels, {within} within ±30 % of the measured median, order kept in {kept} of {compared} pairs that differ by more than 25 %, geometric mean estimate/measured {gm:.2}\n",
            pairs.len()
        ));
    }
    out
}

fn main() {
    let a = args();
    let bin = std::env::var_os("CUGRADE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/release/cugrade"));
    if !bin.is_file() {
        eprintln!(
            "{} not found: build it with `cargo build --release` (or set CUGRADE_BIN)",
            bin.display()
        );
        std::process::exit(2);
    }
    let mut g = gpu::named(&a.gpu).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let out = PathBuf::from("target/estimate-bench").join(&g.id);
    let (kernels, baselines) = a.measured.as_deref().map(measured).unwrap_or_default();
    let mut rows: Vec<Row> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut slowest: Vec<(f64, String)> = Vec::new();
    for (lab, entry, path) in entries() {
        let tag = format!("{lab}/{entry}");
        if a.only.as_deref().is_some_and(|o| !tag.contains(o)) {
            continue;
        }
        let json = out.join(&lab).join(format!("{entry}.json"));
        if !(a.reuse && json.is_file()) {
            std::fs::create_dir_all(json.parent().unwrap()).unwrap();
            let t = Instant::now();
            let st = Command::new(&bin)
                .args([
                    "check",
                    "--backend",
                    "emu",
                    "--seed",
                    "7",
                    "--quiet",
                    "--estimate-gpu",
                    &g.id,
                    "--rubric",
                ])
                .arg(format!("rubrics/{lab}.yaml"))
                .arg(&path)
                .arg("--json")
                .arg(&json)
                .status();
            eprintln!(
                "{tag}: {:.1} s ({})",
                t.elapsed().as_secs_f64(),
                st.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())
            );
        }
        let Some(r) = read(&json) else { continue };
        for m in r["milestones"].as_array().into_iter().flatten() {
            let id = m["id"].as_str().unwrap_or_default().to_string();
            for c in m["checks"].as_array().into_iter().flatten() {
                let e = &c["estimate"];
                if e.is_null() {
                    continue;
                }
                let secs = e["seconds"].as_f64().unwrap_or(0.0);
                slowest.push((
                    secs,
                    format!("{tag}/{id}/{}", c["name"].as_str().unwrap_or("")),
                ));
                let name = format!("{lab}/{entry}/{id}");
                if !seen.contains_key(&name) {
                    seen.insert(name.clone(), rows.len());
                    rows.push(Row {
                        name: name.clone(),
                        validation: is_validation(&entry),
                        profile: serde_json::from_value(e["profile"].clone()).ok(),
                        fixed_ms: None,
                        measured: kernels
                            .get(&(lab.clone(), entry.clone(), id.clone()))
                            .copied(),
                        seconds: secs,
                    });
                }
                let b = &e["baseline"];
                let kind = b["kind"].as_str().unwrap_or_default().to_string();
                if kind.is_empty() || kind.starts_with("cpu") {
                    continue;
                }
                let bname = format!("{lab}/baseline/{kind}");
                if !seen.contains_key(&bname) {
                    seen.insert(bname.clone(), rows.len());
                    rows.push(Row {
                        name: bname,
                        validation: false,
                        profile: serde_json::from_value(b["profile"].clone()).ok(),
                        // A copy is priced again with this GPU's `copy_gbs` where its bytes
                        // are known (results from before `bytes` keep their stored time).
                        fixed_ms: match b["bytes"].as_f64() {
                            Some(bytes) if kind == "copy" => Some(model::copy_ms(bytes, &g)),
                            _ => b["ms"].as_f64(),
                        },
                        measured: baselines.get(&(lab.clone(), kind.clone())).copied(),
                        seconds: 0.0,
                    });
                }
            }
        }
    }
    slowest.sort_by(|x, y| y.0.total_cmp(&x.0));
    println!(
        "Estimates on the {} ({}), parameters calibrated: {}\n",
        g.long_name, g.id, g.calibrated
    );
    println!("{}", table(&rows, &g));
    println!("slowest estimates on this machine (s, emulation included):");
    for (s, n) in slowest.iter().take(8) {
        println!("  {s:.2}  {n}");
    }
    if a.fit {
        let fitting: Vec<&Row> = rows
            .iter()
            .filter(|r| !r.validation && r.profile.is_some())
            .collect();
        let before = loss(&fitting, &g, &[]);
        let fitted = fit(&fitting, &g);
        let after = loss(&fitting, &fitted, &[]);
        let ratios: Vec<f64> = fitting
            .iter()
            .filter_map(|r| Some(r.measured? / estimate(r, &fitted)?))
            .collect();
        println!(
            "\nfit on {} kernels: mean squared log error {before:.4} -> {after:.4}",
            fitting.len()
        );
        let mut fg = fitted.clone();
        for ((name, v), v0) in free(&mut fg).into_iter().zip(values(&g)) {
            println!(
                "    {name}: {{value: {:.4}, source: \"fitted (was {v0:.4})\"}}",
                *v
            );
        }
        println!(
            "    range_low: {{value: {:.3}, source: \"fitted: 10th percentile of measured/estimated\"}}",
            quantile(ratios.clone(), 0.1)
        );
        println!(
            "    range_high: {{value: {:.3}, source: \"fitted: 90th percentile of measured/estimated\"}}",
            quantile(ratios, 0.9)
        );
        g = fitted;
        println!("\nwith the fitted parameters:\n\n{}", table(&rows, &g));
    }
    if let Some(md) = &a.markdown {
        std::fs::write(md, table(&rows, &g)).expect("write the table");
    }
    let _ = rows.iter().map(|r| r.seconds).sum::<f64>();
}
