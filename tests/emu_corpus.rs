//! The emulator corpus: small CUDA kernels under tests/emu-corpus/, compiled with NVRTC,
//! run on the emulator and checked against answers computed here on the CPU.
//!
//! Each case is a function over `&mut dyn Backend`, so the same table can drive a GPU
//! differential test. PTX snapshots sit next to the sources; `CUGRADE_UPDATE_SNAPSHOTS=1`
//! rewrites them. Without libnvrtc the tests say so and pass vacuously (CI has NVRTC).

use cugrade::backend::emu::EmuBackend;
use cugrade::backend::{Backend, LaunchDims, LaunchReport, ParamValue};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/emu-corpus")
}

fn nvrtc_present() -> bool {
    // cudarc panics when the library is missing, so ask first.
    let ok = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !ok {
        eprintln!("SKIPPED: libnvrtc not found (set LD_LIBRARY_PATH to NVRTC 13's lib directory)");
    }
    ok
}

/// Compile a corpus file with the options cugrade uses; the program name is the bare file
/// name so snapshots do not depend on the checkout path.
fn compile(file: &str) -> String {
    let src = std::fs::read_to_string(corpus_dir().join(file)).expect("corpus file");
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90"),
        options: vec!["-lineinfo".into()],
        name: Some(file.to_string()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
        Ok(p) => p.to_src(),
        Err(e) => panic!("NVRTC failed on {file}: {e:?}"),
    }
}

fn snapshot_path(file: &str) -> PathBuf {
    corpus_dir().join(file.replace(".cu", ".ptx"))
}

/// PTX for a corpus file: freshly compiled, and checked against (or written to) its snapshot.
fn ptx_for(file: &str) -> String {
    let ptx = compile(file);
    let snap = snapshot_path(file);
    if std::env::var_os("CUGRADE_UPDATE_SNAPSHOTS").is_some() || !snap.exists() {
        std::fs::write(&snap, &ptx).expect("write snapshot");
    } else {
        let old = std::fs::read_to_string(&snap).expect("snapshot");
        assert_eq!(
            old, ptx,
            "PTX snapshot {} differs from what NVRTC emits now; rerun with CUGRADE_UPDATE_SNAPSHOTS=1",
            snap.display()
        );
    }
    ptx
}

// ---------- helpers usable with any backend ----------

pub struct Lcg(u64);
impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u32() as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

fn up_f32(b: &mut dyn Backend, v: &[f32]) -> u64 {
    let a = b.alloc(v.len() * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.write(a, &bytes).unwrap();
    a
}
fn up_i32(b: &mut dyn Backend, v: &[i32]) -> u64 {
    let a = b.alloc(v.len() * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.write(a, &bytes).unwrap();
    a
}
fn zeros(b: &mut dyn Backend, n: usize) -> u64 {
    let a = b.alloc(n * 4).unwrap();
    b.write(a, &vec![0u8; n * 4]).unwrap();
    a
}
fn down_f32(b: &mut dyn Backend, a: u64, n: usize) -> Vec<f32> {
    b.read(a, n * 4)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn down_u32(b: &mut dyn Backend, a: u64, n: usize) -> Vec<u32> {
    b.read(a, n * 4)
        .unwrap()
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn dims(grid: [u32; 3], block: [u32; 3], shared: u32) -> LaunchDims {
    LaunchDims {
        grid,
        block,
        shared_bytes: shared,
    }
}
fn d1(grid: u32, block: u32) -> LaunchDims {
    dims([grid, 1, 1], [block, 1, 1], 0)
}

fn launch(b: &mut dyn Backend, k: &str, d: LaunchDims, p: &[ParamValue]) -> LaunchReport {
    let r = b
        .launch(k, d, p, Instant::now() + Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("launch of {k} failed: {e}"));
    for diag in &r.diagnostics {
        eprintln!("diagnostic: {diag:?}");
    }
    r
}

fn close(got: &[f32], want: &[f32], rtol: f32, atol: f32) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("length {} != {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !((g - w).abs() <= atol + rtol * w.abs()) && !(g.is_nan() && w.is_nan()) {
            return Err(format!("element {i}: got {g}, want {w}"));
        }
    }
    Ok(())
}

fn clean(r: &LaunchReport) -> Result<(), String> {
    if r.diagnostics.is_empty() {
        Ok(())
    } else {
        Err(format!("unexpected diagnostics: {:?}", r.diagnostics))
    }
}

// ---------- the cases ----------

/// A corpus case: which file, and a check that runs it on a backend with the module loaded.
pub struct Case {
    pub name: &'static str,
    pub file: &'static str,
    pub run: fn(&mut dyn Backend) -> Result<(), String>,
}

use ParamValue::{I32, Ptr};

fn vector_add(b: &mut dyn Backend) -> Result<(), String> {
    let n = 100_003;
    let mut g = Lcg::new(1);
    let (x, y) = (g.vec(n), g.vec(n));
    let (da, db, dc) = (up_f32(b, &x), up_f32(b, &y), zeros(b, n));
    let r = launch(b, "vector_add", d1(n.div_ceil(256) as u32, 256), &[Ptr(da), Ptr(db), Ptr(dc), I32(n as i32)]);
    clean(&r)?;
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let got = down_f32(b, dc, n);
    if got != want {
        return Err("vector_add differs".into());
    }
    if let Some(m) = &r.metrics {
        // Fully coalesced: every fetched byte is used.
        let eff = m.global_load_efficiency().unwrap();
        if eff < 99.0 {
            return Err(format!("load efficiency {eff}"));
        }
    }
    Ok(())
}

fn reduce_case(b: &mut dyn Backend, kernel: &str) -> Result<(), String> {
    let n = 50_001;
    let mut g = Lcg::new(2);
    let x = g.vec(n);
    let (din, dout) = (up_f32(b, &x), zeros(b, 1));
    let r = launch(b, kernel, d1(n.div_ceil(256) as u32, 256), &[Ptr(din), Ptr(dout), I32(n as i32)]);
    clean(&r)?;
    let want: f64 = x.iter().map(|v| *v as f64).sum();
    let got = down_f32(b, dout, 1)[0];
    close(&[got], &[want as f32], 1e-3, 1e-2)
}
fn reduce_naive(b: &mut dyn Backend) -> Result<(), String> {
    reduce_case(b, "reduce_naive")
}
fn reduce_shared(b: &mut dyn Backend) -> Result<(), String> {
    reduce_case(b, "reduce_shared")
}
fn reduce_shuffle(b: &mut dyn Backend) -> Result<(), String> {
    reduce_case(b, "reduce_shuffle")
}

fn matmul_tiled(b: &mut dyn Backend) -> Result<(), String> {
    let (m, n, k) = (70, 45, 33);
    let mut g = Lcg::new(3);
    let (a, bb) = (g.vec(m * k), g.vec(k * n));
    let (da, db, dc) = (up_f32(b, &a), up_f32(b, &bb), zeros(b, m * n));
    let d = dims([n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1], [16, 16, 1], 0);
    let r = launch(b, "matmul_tiled", d, &[Ptr(da), Ptr(db), Ptr(dc), I32(m as i32), I32(n as i32), I32(k as i32)]);
    clean(&r)?;
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for t in 0..k {
                s += a[i * k + t] * bb[t * n + j];
            }
            want[i * n + j] = s;
        }
    }
    close(&down_f32(b, dc, m * n), &want, 1e-4, 1e-5)
}

fn transpose(b: &mut dyn Backend, kernel: &str, block: [u32; 3]) -> Result<LaunchReport, String> {
    let (rows, cols) = (67, 130);
    let x = Lcg::new(4).vec(rows * cols);
    let (din, dout) = (up_f32(b, &x), zeros(b, rows * cols));
    let d = dims([cols.div_ceil(32) as u32, rows.div_ceil(32) as u32, 1], block, 0);
    let r = launch(b, kernel, d, &[Ptr(din), Ptr(dout), I32(rows as i32), I32(cols as i32)]);
    clean(&r)?;
    let mut want = vec![0f32; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            want[j * rows + i] = x[i * cols + j];
        }
    }
    close(&down_f32(b, dout, rows * cols), &want, 0.0, 0.0)?;
    Ok(r)
}
fn transpose_naive(b: &mut dyn Backend) -> Result<(), String> {
    transpose(b, "transpose_naive", [32, 32, 1]).map(|_| ())
}
fn transpose_tiled(b: &mut dyn Backend) -> Result<(), String> {
    let r = transpose(b, "transpose_tiled", [32, 8, 1])?;
    if let Some(m) = r.metrics
        && m.shared_bank_conflicts != 0
    {
        return Err(format!("padded tile should be conflict-free, got {}", m.shared_bank_conflicts));
    }
    Ok(())
}

fn softmax(b: &mut dyn Backend) -> Result<(), String> {
    let (rows, cols) = (9, 300);
    let x: Vec<f32> = Lcg::new(5).vec(rows * cols).iter().map(|v| v * 8.0).collect();
    let (din, dout) = (up_f32(b, &x), zeros(b, rows * cols));
    let r = launch(b, "softmax_rows", dims([rows as u32, 1, 1], [128, 1, 1], 128 * 4), &[
        Ptr(din),
        Ptr(dout),
        I32(rows as i32),
        I32(cols as i32),
    ]);
    clean(&r)?;
    let mut want = vec![0f32; rows * cols];
    for i in 0..rows {
        let row = &x[i * cols..(i + 1) * cols];
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f64 = row.iter().map(|v| ((v - m) as f64).exp()).sum();
        for j in 0..cols {
            want[i * cols + j] = (((row[j] - m) as f64).exp() / s) as f32;
        }
    }
    close(&down_f32(b, dout, rows * cols), &want, 1e-5, 1e-7)
}

fn embedding(b: &mut dyn Backend) -> Result<(), String> {
    let (vocab, dim, n) = (50, 24, 37);
    let mut g = Lcg::new(6);
    let table = g.vec(vocab * dim);
    let ids: Vec<i32> = (0..n).map(|_| (g.next_u32() % vocab as u32) as i32).collect();
    let (dids, dt, dout) = (up_i32(b, &ids), up_f32(b, &table), zeros(b, n * dim));
    let r = launch(b, "embedding", d1((n * dim).div_ceil(128) as u32, 128), &[
        Ptr(dids),
        Ptr(dt),
        Ptr(dout),
        I32(n as i32),
        I32(dim as i32),
    ]);
    clean(&r)?;
    let want: Vec<f32> = (0..n * dim).map(|i| table[ids[i / dim] as usize * dim + i % dim]).collect();
    close(&down_f32(b, dout, n * dim), &want, 0.0, 0.0)
}

fn conv(b: &mut dyn Backend) -> Result<(), String> {
    let mut g = Lcg::new(7);
    let filt = g.vec(81);
    let fb: Vec<u8> = filt.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.set_global("filt", &fb).map_err(|e| e.to_string())?;
    // 1-D, k = 7.
    let n = 1000;
    let x = g.vec(n);
    let (din, dout) = (up_f32(b, &x), zeros(b, n));
    let r = launch(b, "conv1d", d1(n.div_ceil(128) as u32, 128), &[Ptr(din), Ptr(dout), I32(n as i32), I32(7)]);
    clean(&r)?;
    let mut want = vec![0f32; n];
    for (i, w) in want.iter_mut().enumerate() {
        let mut acc = 0f32;
        for j in 0..7 {
            let p = i as i64 + j - 3;
            if p >= 0 && p < n as i64 {
                acc += x[p as usize] * filt[j as usize];
            }
        }
        *w = acc;
    }
    close(&down_f32(b, dout, n), &want, 1e-5, 1e-6)?;
    // 2-D, k = 5.
    let (h, w) = (37, 29);
    let img = g.vec(h * w);
    let (din, dout) = (up_f32(b, &img), zeros(b, h * w));
    let d = dims([w.div_ceil(16) as u32, h.div_ceil(16) as u32, 1], [16, 16, 1], 0);
    let r = launch(b, "conv2d", d, &[Ptr(din), Ptr(dout), I32(h as i32), I32(w as i32), I32(5)]);
    clean(&r)?;
    let mut want = vec![0f32; h * w];
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            let mut acc = 0f32;
            for dy in 0..5 {
                for dx in 0..5 {
                    let (yy, xx) = (y + dy - 2, x + dx - 2);
                    if yy >= 0 && yy < h as i64 && xx >= 0 && xx < w as i64 {
                        acc += img[(yy * w as i64 + xx) as usize] * filt[(dy * 5 + dx) as usize];
                    }
                }
            }
            want[(y * w as i64 + x) as usize] = acc;
        }
    }
    close(&down_f32(b, dout, h * w), &want, 1e-5, 1e-6)
}

fn erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse; integrate the series instead.
    let mut sum = 0.0;
    let mut term = x;
    let mut k = 0;
    while k < 200 {
        sum += term / (2 * k + 1) as f64;
        k += 1;
        term *= -x * x / k as f64;
        if term.abs() < 1e-17 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn activations(b: &mut dyn Backend) -> Result<(), String> {
    let n = 257;
    let x: Vec<f32> = Lcg::new(8).vec(n).iter().map(|v| v * 4.0).collect();
    let (din, dout) = (up_f32(b, &x), zeros(b, 6 * n));
    let r = launch(b, "activations", d1(n.div_ceil(64) as u32, 64), &[Ptr(din), Ptr(dout), I32(n as i32)]);
    clean(&r)?;
    let mut want = Vec::new();
    for &v in &x {
        let v = v as f64;
        want.extend_from_slice(&[
            v.exp() as f32,
            v.tanh() as f32,
            erf(v) as f32,
            v.abs().ln_1p() as f32,
            (1.0 / (1.0 + (-v).exp())) as f32,
            (0.5 * v * (1.0 + erf(v * 0.70710678))) as f32,
        ]);
    }
    close(&down_f32(b, dout, 6 * n), &want, 2e-6, 1e-6)
}

fn attention(b: &mut dyn Backend) -> Result<(), String> {
    let (n, d) = (40, 16);
    let mut g = Lcg::new(9);
    let (q, k, v) = (g.vec(n * d), g.vec(n * d), g.vec(n * d));
    let (dq, dk, dv, dout) = (up_f32(b, &q), up_f32(b, &k), up_f32(b, &v), zeros(b, n * d));
    let r = launch(b, "attention", d1(2, 32), &[Ptr(dq), Ptr(dk), Ptr(dv), Ptr(dout), I32(n as i32), I32(d as i32)]);
    clean(&r)?;
    let mut want = vec![0f32; n * d];
    let scale = 1.0 / (d as f64).sqrt();
    for i in 0..n {
        let s: Vec<f64> = (0..n)
            .map(|j| (0..d).map(|t| q[i * d + t] as f64 * k[j * d + t] as f64).sum::<f64>() * scale)
            .collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = s.iter().map(|x| (x - m).exp()).sum();
        for t in 0..d {
            want[i * d + t] = ((0..n).map(|j| (s[j] - m).exp() * v[j * d + t] as f64).sum::<f64>() / den) as f32;
        }
    }
    close(&down_f32(b, dout, n * d), &want, 1e-4, 1e-5)
}

pub const CASES: &[Case] = &[
    Case { name: "vector_add", file: "vector_add.cu", run: vector_add },
    Case { name: "reduce_naive", file: "reduce_naive.cu", run: reduce_naive },
    Case { name: "reduce_shared", file: "reduce_shared.cu", run: reduce_shared },
    Case { name: "reduce_shuffle", file: "reduce_shuffle.cu", run: reduce_shuffle },
    Case { name: "matmul_tiled", file: "matmul_tiled.cu", run: matmul_tiled },
    Case { name: "transpose_naive", file: "transpose.cu", run: transpose_naive },
    Case { name: "transpose_tiled", file: "transpose.cu", run: transpose_tiled },
    Case { name: "softmax", file: "softmax.cu", run: softmax },
    Case { name: "embedding", file: "embedding.cu", run: embedding },
    Case { name: "conv", file: "conv.cu", run: conv },
    Case { name: "activations", file: "activations.cu", run: activations },
    Case { name: "attention", file: "attention.cu", run: attention },
];

#[test]
fn corpus_runs_correctly_on_the_emulator() {
    if !nvrtc_present() {
        return;
    }
    let filter = std::env::var("EMU_CASE").ok();
    let mut failures = Vec::new();
    for case in CASES {
        if filter.as_deref().is_some_and(|f| f != case.name) {
            continue;
        }
        let ptx = ptx_for(case.file);
        let mut emu = EmuBackend::new();
        if let Err(e) = emu.load_module(&ptx) {
            failures.push(format!("{}: load: {e}", case.name));
            continue;
        }
        if let Err(e) = (case.run)(&mut emu) {
            failures.push(format!("{}: {e}", case.name));
        }
    }
    assert!(failures.is_empty(), "failing corpus cases:\n{}", failures.join("\n"));
}
