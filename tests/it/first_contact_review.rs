//! The findings of issue 32's first-contact review, as a new user meets them: `check` of an
//! archive, `doctor` fitted to the terminal, a built-in lab named by its name (never by the
//! temporary file it is written to), a hung kernel's timeout pointing at its line in the
//! student's words, and `doctor --install` installing nvJitLink.

use crate::support::{self, nvrtc, output_text as text, root};
use std::path::{Path, PathBuf};
use std::process::Output;

fn cugrade(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = support::cugrade();
    c.args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("COLUMNS");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

const VADD: &str = "extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) c[i] = a[i] + b[i];\n}\n";

fn zip(path: &Path, files: &[(&str, &str)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    for (name, data) in files {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut z, data.as_bytes()).unwrap();
    }
    z.finish().unwrap();
}

fn tar_gz(path: &Path, files: &[(&str, &str)]) {
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut t = tar::Builder::new(gz);
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, name, data.as_bytes()).unwrap();
    }
    t.into_inner().unwrap().finish().unwrap();
}

/// `cugrade check bob.zip` grades the archive as `grade` would (issue 32: "no file found in
/// it"); one without a source file says what it held and what was expected, never a
/// temporary path.
#[test]
fn check_grades_an_archive_and_says_what_an_empty_one_held() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let bob = d.path().join("bob.zip");
    zip(
        &bob,
        &[
            ("bob/vector_add.cu", VADD),
            ("bob/cugrade.yaml", "rubric: vector-add\n"),
        ],
    );
    let json = d.path().join("bob.json");
    let o = cugrade(
        &["check", "bob.zip", "--json", json.to_str().unwrap()],
        d.path(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["student"], "bob", "{r}");
    support::correct(&r, "vector_add").unwrap();
    // A .tar.gz without a folder in it, the rubric given.
    let alice = d.path().join("alice.tar.gz");
    tar_gz(&alice, &[("add.cu", VADD)]);
    let o = cugrade(
        &[
            "check",
            "--rubric",
            "vector-add",
            "alice.tar.gz",
            "--json",
            json.to_str().unwrap(),
        ],
        d.path(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["student"], "alice", "{r}");
    // Nothing to grade in it: what it held, what cugrade grades, the fix.
    zip(
        &d.path().join("carol.zip"),
        &[("carol/report.pdf", "%PDF"), ("carol/kernel.cu.txt", VADD)],
    );
    let o = cugrade(
        &["check", "--rubric", "vector-add", "carol.zip"],
        d.path(),
        &[],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("carol.zip holds no file cugrade grades: it holds `carol/report.pdf` and `carol/kernel.cu.txt` (2 files)"),
        "{out}"
    );
    assert!(
        out.contains("`.cu`, `.ptx` and `.py`") && out.contains("fix:"),
        "{out}"
    );
    assert!(
        !out.contains("cugrade-archive") && !out.contains("/tmp"),
        "{out}"
    );
}

/// `doctor` fits the terminal as `check` does: `COLUMNS`, else 80 columns when not a terminal;
/// a long line continues under its text, never under the tag (issue 32: 282 columns).
#[test]
fn doctor_fits_the_terminal_width() {
    let d = tempfile::tempdir().unwrap();
    for (env, width) in [(vec![], 80), (vec![("COLUMNS", "60")], 60)] {
        let o = cugrade(&["doctor"], d.path(), &env);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        for l in out.lines() {
            assert!(l.chars().count() <= width, "{width}: {l}\n{out}");
        }
        // Every line is a tagged one, its continuation (under the text), or the verdict's.
        let mut continued = 0;
        for l in out.lines() {
            let tagged = ["ok   ", "MISS ", "--   "].iter().any(|t| l.starts_with(t));
            let verdict = l.starts_with("ready:") || l.starts_with("not ready");
            if !tagged && !verdict {
                continued += 1;
                assert!(
                    l.starts_with("     ") || l.starts_with("  "),
                    "a continuation under its text: {l}\n{out}"
                );
            }
        }
        assert!(continued > 0, "nothing wrapped at {width}:\n{out}");
    }
    // A wide terminal gets the lines whole.
    let o = cugrade(&["doctor"], d.path(), &[("COLUMNS", "1000")]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.lines().any(|l| l.chars().count() > 80), "{out}");
}

/// A built-in lab given as the rubric is named by its name, never by the temporary file it is
/// written to (issue 32): `check -v`, `validate`, through a manifest too.
#[test]
fn a_built_in_lab_is_named_by_its_name() {
    let d = tempfile::tempdir().unwrap();
    let o = cugrade(&["init", "vector-add", "sub"], d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let sub = d.path().join("sub");
    for args in [
        &["check", "-v", "--rubric", "vector-add", "."][..],
        &["check", "-v", "."],
    ] {
        let o = cugrade(args, &sub, &[]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let line = err.lines().find(|l| l.starts_with("rubric:")).unwrap_or("");
        assert!(
            line.starts_with("rubric: the built-in lab `vector-add`; submission:"),
            "{args:?}: {err}"
        );
        assert!(!text(&o).contains("cugrade-lab-"), "{args:?}: {}", text(&o));
    }
    let o = cugrade(&["validate", "--schema-only", "vector-add"], d.path(), &[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.starts_with("the built-in lab `vector-add`: schema ok (1 milestone, 100 points)"),
        "{out}"
    );
    assert!(!out.contains("cugrade-lab-"), "{out}");
    // A rubric file is still named by its path.
    let file = root().join("rubrics/vector-add.yaml");
    let o = cugrade(
        &["validate", "--schema-only", file.to_str().unwrap()],
        d.path(),
        &[],
    );
    assert!(
        text(&o).starts_with(&format!("{}: schema ok", file.display())),
        "{}",
        text(&o)
    );
}

/// A kernel that never ends: the timeout names the kernel, the case and the limit in words
/// (no rubric key), points at the loop's line, and says what to change (issue 32).
#[test]
fn a_hung_kernels_timeout_points_at_its_loop() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("cugrade.yaml"), "rubric: vector-add\n").unwrap();
    std::fs::write(
        sub.join("vadd.cu"),
        "__device__ volatile int ready;\n\n\
         extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n)\n{\n\
         \x20   int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20   while (ready == 0) {\n    }\n\
         \x20   if (i < n) c[i] = a[i] + b[i];\n}\n",
    )
    .unwrap();
    let json = d.path().join("r.json");
    let o = cugrade(
        &[
            "check",
            "--backend",
            "emu",
            "--json",
            json.to_str().unwrap(),
        ],
        &sub,
        &[],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let c = support::first_failure(&r, "vector_add");
    assert_eq!(c["kind"], "runtime", "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.starts_with("timeout: `vector_add` did not finish case n1 within 1.0 s (the least any launch is given"),
        "{c}"
    );
    assert_eq!(c["location"], "vadd.cu:6", "{c}");
    assert!(
        message.ends_with("its threads were still running at vadd.cu:6"),
        "{c}"
    );
    let hint = c["hint"].as_str().unwrap();
    assert!(hint.contains("a spin on a flag"), "{c}");
    for said in [message, hint, out.as_str()] {
        assert!(
            !said.contains("timeouts.") && !said.contains("launch_min_s"),
            "{said}"
        );
    }
    // The terminal shows the line.
    assert!(out.contains("6 |     while (ready == 0) {"), "{out}");
}

/// `doctor --install` installs nvJitLink (pinned to NVRTC's CUDA) where Numba or PTX kernels
/// are graded without a GPU, and reports it (issue 32: a fresh Numba user saw "registers
/// unknown"). pip reads a local wheel of the pinned version here, not PyPI.
#[test]
fn doctor_install_installs_nvjitlink_for_ptx_and_numba() {
    if !nvrtc() {
        return;
    }
    for system in ["/usr/local/cuda/lib64", "/usr/local/cuda-13.0/lib64"] {
        if Path::new(system).join("libnvJitLink.so.13").exists() {
            eprintln!("SKIPPED: a CUDA toolkit's nvJitLink is installed");
            return;
        }
    }
    let headers = cugrade::compile::toolchain::cuda_include_dirs();
    assert!(!headers.is_empty(), "run through ci/with-nvrtc");
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("cache");
    let wheels = d.path().join("wheels");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&wheels).unwrap();
    // The pinned version only: another pin would find nothing to install.
    let (name, version) = cugrade::compile::jitlink::WHEEL.split_once("==").unwrap();
    let dist = format!("{}-{version}", name.replace('-', "_"));
    zip(
        &wheels.join(format!("{dist}-py3-none-any.whl")),
        &[
            ("nvidia/cu13/lib/libnvJitLink.so.13", "a stand-in"),
            (
                &format!("{dist}.dist-info/METADATA"),
                &format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
            ),
            (
                &format!("{dist}.dist-info/WHEEL"),
                "Wheel-Version: 1.0\nGenerator: cugrade-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            ),
            (&format!("{dist}.dist-info/RECORD"), ""),
        ],
    );
    let sub = d.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(root().join("tests/emu-corpus/warp.ptx"), sub.join("k.ptx")).unwrap();
    let include = std::env::join_paths(&headers).unwrap();
    let include = include.to_str().unwrap();
    let env = [
        ("CUGRADE_NVRTC_CACHE", cache.to_str().unwrap()),
        ("CUGRADE_CUDA_INCLUDE", include),
        ("CUGRADE_NVJITLINK", ""),
        ("PIP_NO_INDEX", "1"),
        ("PIP_FIND_LINKS", wheels.to_str().unwrap()),
        ("COLUMNS", "1000"),
    ];
    let line = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find(|l| l[5..].starts_with("nvJitLink"))
            .unwrap_or_default()
            .to_string()
    };
    let o = cugrade(&["doctor", "sub"], d.path(), &env);
    assert!(
        line(&o).starts_with("--   nvJitLink: not found")
            && line(&o).contains("fix: `cugrade doctor --install`"),
        "{}",
        text(&o)
    );
    let o = cugrade(&["doctor", "sub", "--install"], d.path(), &env);
    let lib: PathBuf = cache.join("nvjitlink/nvidia/cu13/lib/libnvJitLink.so.13");
    assert!(lib.is_file(), "{}", text(&o));
    assert!(
        line(&o).starts_with(&format!("ok   nvJitLink: {}", lib.display())),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("installing nvJitLink 13.0.88"),
        "{}",
        text(&o)
    );
}

/// A failing metric check says what the rubric says for it and points at the line that costs
/// it, as a compile error does (issue 32: "use shared memory" for an unpadded tile).
#[test]
fn a_failing_metric_check_gives_the_rubrics_hint_and_the_line() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("cugrade.yaml"), "rubric: transpose\n").unwrap();
    std::fs::write(
        sub.join("transpose.cu"),
        "extern \"C\" __global__ void transpose_naive(const float* in, float* out, int rows, int cols)\n{\n\
         \x20   int c = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20   int r = blockIdx.y * blockDim.y + threadIdx.y;\n\
         \x20   if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];\n}\n\n\
         extern \"C\" __global__ void transpose_coalesced(const float* in, float* out, int rows, int cols)\n{\n\
         \x20   __shared__ float tile[32][32];\n\
         \x20   int c = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 32 + threadIdx.y;\n\
         \x20   if (r < rows && c < cols) tile[threadIdx.y][threadIdx.x] = in[r * cols + c];\n\
         \x20   __syncthreads();\n\
         \x20   int oc = blockIdx.y * 32 + threadIdx.x, orow = blockIdx.x * 32 + threadIdx.y;\n\
         \x20   float v = tile[threadIdx.x][threadIdx.y];\n\
         \x20   if (orow < cols && oc < rows) out[orow * rows + oc] = v;\n}\n",
    )
    .unwrap();
    let json = d.path().join("r.json");
    let o = cugrade(
        &[
            "check",
            "--backend",
            "emu",
            "--json",
            json.to_str().unwrap(),
        ],
        &sub,
        &[],
    );
    let out = text(&o);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let m = support::milestone(&r, "transpose_coalesced");
    let c = m["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "shared_bank_conflicts")
        .unwrap_or_else(|| panic!("{m}"));
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["location"], "transpose.cu:15", "{c}");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .ends_with("100% of the bank conflicts are at transpose.cu:15"),
        "{c}"
    );
    let hint = c["hint"].as_str().unwrap();
    assert!(
        hint.contains("tile[32][33]") && !hint.contains("Correct but slow"),
        "{c}"
    );
    assert!(
        out.contains("15 |     float v = tile[threadIdx.x][threadIdx.y];"),
        "{out}"
    );
}

/// Without a GPU, an estimate prints its likely range, words ratio and bar in one direction,
/// says when the kernel is likely to fail the bar (with what to change), and a bar against the
/// CPU with no ratio is explained once, with what the student can do; speed still reads as
/// not measured and nothing is graded on the estimate (issue 32).
#[test]
fn an_estimate_far_below_its_bar_says_so_and_what_to_change() {
    if !nvrtc() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sub = d.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("cugrade.yaml"), "rubric: reduction\n").unwrap();
    let atomics = |name: &str| {
        format!(
            "extern \"C\" __global__ void {name}(const float* in, float* out, int n)\n{{\n\
             \x20   int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
             \x20   if (i < n) atomicAdd(out, in[i]);\n}}\n"
        )
    };
    let naive = "extern \"C\" __global__ void reduce_naive(const float* in, float* out, int n)\n{\n\
                 \x20   int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                 \x20   if (i < n) atomicAdd(out, in[i]);\n}\n";
    std::fs::write(
        sub.join("reduction.cu"),
        format!(
            "{naive}\n{}\n{}",
            atomics("reduce_shared"),
            atomics("reduce_shuffle")
        ),
    )
    .unwrap();
    let json = d.path().join("r.json");
    let o = cugrade(
        &[
            "check",
            "--backend",
            "emu",
            "--json",
            json.to_str().unwrap(),
        ],
        &sub,
        // Wide: each sentence on one line.
        &[("CUGRADE_ESTIMATE_GPU", "h100"), ("COLUMNS", "1000")],
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let m = support::milestone(&r, "reduce_shared");
    let c = m["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "speedup_over_naive")
        .unwrap_or_else(|| panic!("{m}"));
    assert_eq!(c["status"], "skipped", "{c}");
    let message = c["message"].as_str().unwrap();
    for said in [
        "(likely between",
        "needs 10x faster): likely to fail this bar on a GPU",
        "an estimate, not a grade",
        "Speed is not measured on the PTX emulator",
    ] {
        assert!(message.contains(said), "{said}: {c}");
    }
    assert!(
        !message.contains("faster (needs") && !message.contains("(needs 10x)"),
        "{c}"
    );
    let hint = c["hint"].as_str().unwrap_or_else(|| panic!("no hint: {c}"));
    assert!(
        hint.contains("atomics on one address") && hint.contains("The lab's hint:"),
        "{c}"
    );
    assert!(
        out.contains("likely to fail this bar") && out.contains("help: Most of the estimated time"),
        "{out}"
    );
    // The bar against the CPU: short per check, explained once, with a command that works for
    // a built-in lab.
    let notes: Vec<&str> = r["run"]["notes"]
        .as_array()
        .map(|n| n.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let cpu: Vec<&&str> = notes
        .iter()
        .filter(|n| n.contains("against the CPU"))
        .collect();
    assert_eq!(cpu.len(), 1, "{notes:?}");
    assert!(
        cpu[0].contains("reduce_shuffle › speedup_over_cpu")
            && cpu[0].contains("`cugrade calibrate reduction`"),
        "{notes:?}"
    );
    assert_eq!(
        out.matches("cugrade calibrate reduction").count(),
        1,
        "{out}"
    );
    assert!(out.contains("speed not measured"), "{out}");
}
