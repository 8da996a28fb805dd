//! The emulator corpus: small CUDA kernels under tests/emu-corpus/, compiled with NVRTC,
//! run on the emulator and checked against answers computed here on the CPU.
//!
//! Each case is a function over `&mut dyn Backend`, so the same table can drive a GPU
//! differential test. PTX snapshots sit next to the sources; `UPDATE_SNAPSHOTS=1`
//! rewrites them. Without libnvrtc the tests say so and pass vacuously (CI has NVRTC).

use crate::support::{nvrtc as nvrtc_present, root};
use cugrade::backend::emu::EmuBackend;
use cugrade::backend::{Backend, LaunchDims, LaunchReport, ParamValue};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn corpus_dir() -> PathBuf {
    root().join("tests/emu-corpus")
}

/// Compile a corpus file with the options cugrade uses; the program name is the bare file
/// name so snapshots do not depend on the checkout path.
fn compile(file: &str) -> String {
    let src = std::fs::read_to_string(corpus_dir().join(file)).expect("corpus file");
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(arch()),
        options: vec!["-lineinfo".into()],
        name: Some(file.to_string()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(&src, opts) {
        Ok(p) => p.to_src(),
        Err(e) => panic!("NVRTC failed on {file}: {e:?}"),
    }
}

/// `EMU_ARCH=sm_75` (or sm_80, sm_86, sm_89) runs the corpus as compiled for another target;
/// snapshots are kept for sm_90 only.
fn arch() -> &'static str {
    match std::env::var("EMU_ARCH").as_deref() {
        Ok("sm_75") => "sm_75",
        Ok("sm_80") => "sm_80",
        Ok("sm_86") => "sm_86",
        Ok("sm_89") => "sm_89",
        _ => "sm_90",
    }
}

fn snapshot_path(file: &str) -> PathBuf {
    corpus_dir().join(file.replace(".cu", ".ptx"))
}

/// PTX for a corpus file: freshly compiled, and checked against (or written to) its snapshot.
fn ptx_for(file: &str) -> String {
    // NVRTC writes the working directory into `.file`; keep snapshots machine-independent.
    let ptx: String = compile(file)
        .lines()
        .map(|l| match l.trim_start().strip_prefix(".file") {
            Some(rest) if rest.contains(file) => format!("\t.file\t1 \"{file}\"\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let snap = snapshot_path(file);
    if arch() != "sm_90" {
        return ptx;
    }
    crate::support::assert_snapshot(&snap, &ptx);
    ptx
}

// ---------- helpers usable with any backend ----------

pub struct Lcg(u64);
impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
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
        let within = (g - w).abs() <= atol + rtol * w.abs();
        if !within && (!g.is_nan() || !w.is_nan()) {
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
    /// Oldest architecture the kernel compiles for (e.g. 80 for `__reduce_add_sync`).
    pub min_sm: u32,
}

use ParamValue::{I32, Ptr};

fn vector_add(b: &mut dyn Backend) -> Result<(), String> {
    let n = 100_003;
    let mut g = Lcg::new(1);
    let (x, y) = (g.vec(n), g.vec(n));
    let (da, db, dc) = (up_f32(b, &x), up_f32(b, &y), zeros(b, n));
    let r = launch(
        b,
        "vector_add",
        d1(n.div_ceil(256) as u32, 256),
        &[Ptr(da), Ptr(db), Ptr(dc), I32(n as i32)],
    );
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
    let r = launch(
        b,
        kernel,
        d1(n.div_ceil(256) as u32, 256),
        &[Ptr(din), Ptr(dout), I32(n as i32)],
    );
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
    let d = dims(
        [n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1],
        [16, 16, 1],
        0,
    );
    let r = launch(
        b,
        "matmul_tiled",
        d,
        &[
            Ptr(da),
            Ptr(db),
            Ptr(dc),
            I32(m as i32),
            I32(n as i32),
            I32(k as i32),
        ],
    );
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
    let d = dims(
        [cols.div_ceil(32) as u32, rows.div_ceil(32) as u32, 1],
        block,
        0,
    );
    let r = launch(
        b,
        kernel,
        d,
        &[Ptr(din), Ptr(dout), I32(rows as i32), I32(cols as i32)],
    );
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
        return Err(format!(
            "padded tile should be conflict-free, got {}",
            m.shared_bank_conflicts
        ));
    }
    Ok(())
}

fn softmax(b: &mut dyn Backend) -> Result<(), String> {
    let (rows, cols) = (9, 300);
    let x: Vec<f32> = Lcg::new(5)
        .vec(rows * cols)
        .iter()
        .map(|v| v * 8.0)
        .collect();
    let (din, dout) = (up_f32(b, &x), zeros(b, rows * cols));
    let r = launch(
        b,
        "softmax_rows",
        dims([rows as u32, 1, 1], [128, 1, 1], 128 * 4),
        &[Ptr(din), Ptr(dout), I32(rows as i32), I32(cols as i32)],
    );
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
    let ids: Vec<i32> = (0..n)
        .map(|_| (g.next_u32() % vocab as u32) as i32)
        .collect();
    let (dids, dt, dout) = (up_i32(b, &ids), up_f32(b, &table), zeros(b, n * dim));
    let r = launch(
        b,
        "embedding",
        d1((n * dim).div_ceil(128) as u32, 128),
        &[
            Ptr(dids),
            Ptr(dt),
            Ptr(dout),
            I32(n as i32),
            I32(dim as i32),
        ],
    );
    clean(&r)?;
    let want: Vec<f32> = (0..n * dim)
        .map(|i| table[ids[i / dim] as usize * dim + i % dim])
        .collect();
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
    let r = launch(
        b,
        "conv1d",
        d1(n.div_ceil(128) as u32, 128),
        &[Ptr(din), Ptr(dout), I32(n as i32), I32(7)],
    );
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
    let d = dims(
        [w.div_ceil(16) as u32, h.div_ceil(16) as u32, 1],
        [16, 16, 1],
        0,
    );
    let r = launch(
        b,
        "conv2d",
        d,
        &[Ptr(din), Ptr(dout), I32(h as i32), I32(w as i32), I32(5)],
    );
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
    let r = launch(
        b,
        "activations",
        d1(n.div_ceil(64) as u32, 64),
        &[Ptr(din), Ptr(dout), I32(n as i32)],
    );
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
            (0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2 as f64))) as f32,
        ]);
    }
    close(&down_f32(b, dout, 6 * n), &want, 2e-6, 1e-6)
}

fn attention(b: &mut dyn Backend) -> Result<(), String> {
    let (n, d) = (40, 16);
    let mut g = Lcg::new(9);
    let (q, k, v) = (g.vec(n * d), g.vec(n * d), g.vec(n * d));
    let (dq, dk, dv, dout) = (up_f32(b, &q), up_f32(b, &k), up_f32(b, &v), zeros(b, n * d));
    let r = launch(
        b,
        "attention",
        d1(2, 32),
        &[
            Ptr(dq),
            Ptr(dk),
            Ptr(dv),
            Ptr(dout),
            I32(n as i32),
            I32(d as i32),
        ],
    );
    clean(&r)?;
    let mut want = vec![0f32; n * d];
    let scale = 1.0 / (d as f64).sqrt();
    for i in 0..n {
        let s: Vec<f64> = (0..n)
            .map(|j| {
                (0..d)
                    .map(|t| q[i * d + t] as f64 * k[j * d + t] as f64)
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let den: f64 = s.iter().map(|x| (x - m).exp()).sum();
        for t in 0..d {
            want[i * d + t] = ((0..n)
                .map(|j| (s[j] - m).exp() * v[j * d + t] as f64)
                .sum::<f64>()
                / den) as f32;
        }
    }
    close(&down_f32(b, dout, n * d), &want, 1e-4, 1e-5)
}

fn mixed_shared(b: &mut dyn Backend) -> Result<(), String> {
    let n = 300;
    let x = Lcg::new(21).vec(n);
    let (din, dout, dwhere) = (up_f32(b, &x), zeros(b, n), zeros(b, 2));
    let r = launch(
        b,
        "mixed_shared",
        dims([2, 1, 1], [96, 1, 1], n as u32 * 4),
        &[Ptr(din), Ptr(dout), Ptr(dwhere), I32(n as i32)],
    );
    clean(&r)?;
    let want: Vec<f32> = (0..n).map(|i| x[i] + (1000.0 + (i % 65) as f32)).collect();
    close(&down_f32(b, dout, n), &want, 0.0, 0.0)?;
    // A GPU may reserve shared memory before the static variables, so check relative layout.
    let w = down_u32(b, dwhere, 2);
    if w[1] < w[0] + 260 || !w[1].is_multiple_of(256) {
        return Err(format!(
            "static tile at shared offset {:#x}, dynamic array at {:#x}: the dynamic array must follow the 260-byte tile at a 256-byte boundary",
            w[0], w[1]
        ));
    }
    Ok(())
}

fn atomics(b: &mut dyn Backend) -> Result<(), String> {
    let (grid, block) = (3u32, 64u32);
    let n = (grid * block) as i32;
    let gi = up_i32(b, &[0, 0, 1000, -1000, 0, 0]);
    let gu = up_i32(b, &[0, 0, -1, 0, 0, 0]);
    let gf = zeros(b, 2);
    let gd = b.alloc(8).unwrap();
    b.write(gd, &0f64.to_le_bytes()).unwrap();
    let gl = b.alloc(8).unwrap();
    b.write(gl, &5u64.to_le_bytes()).unwrap();
    let out = zeros(b, 3);
    let r = launch(
        b,
        "atomics",
        d1(grid, block),
        &[Ptr(gi), Ptr(gu), Ptr(gf), Ptr(gd), Ptr(gl), Ptr(out)],
    );
    clean(&r)?;
    let i = down_u32(b, gi, 6);
    let u = down_u32(b, gu, 6);
    let want_i = [
        (0..n).sum::<i32>() as u32,
        (-n) as u32,
        (-100i32) as u32,
        (n - 1) as u32,
    ];
    if i[..4] != want_i {
        return Err(format!("int atomics {:?} want {want_i:?}", &i[..4]));
    }
    // CAS chains 0 -> n only in thread order; whatever the order, successes == final value.
    if i[5] != i[4] {
        return Err(format!("cas: {} successes but value {}", i[5], i[4]));
    }
    // inc wraps at 16 (17 states); dec from 0 wraps to 1000 then counts down.
    let inc = (0..n as u32).fold(0u32, |v, _| if v >= 16 { 0 } else { v + 1 });
    let dec = (0..n as u32).fold(0u32, |v, _| if v == 0 || v > 1000 { 1000 } else { v - 1 });
    let xor = (0..n as u32).fold(0u32, |v, t| v ^ t);
    let want_u = [inc, dec, 0, u32::MAX, xor, 7];
    if u != want_u {
        return Err(format!("unsigned atomics {u:?} want {want_u:?}"));
    }
    let f = down_f32(b, gf, 1)[0];
    let d = f64::from_le_bytes(b.read(gd, 8).unwrap().try_into().unwrap());
    let l = u64::from_le_bytes(b.read(gl, 8).unwrap().try_into().unwrap());
    if f != 0.5 * n as f32 || d != 0.25 * n as f64 || l != 5 + (n as u64) * (1 << 33) {
        return Err(format!("float/double/u64 atomics: {f} {d} {l}"));
    }
    let o = down_u32(b, out, 3);
    let want_o = [grid * block * 3 / 4, grid * (block - 1), grid * block];
    if o != want_o {
        return Err(format!("shared atomics {o:?} want {want_o:?}"));
    }
    Ok(())
}

fn warp_ops(b: &mut dyn Backend) -> Result<(), String> {
    let n = 64;
    let mut g = Lcg::new(10);
    let v: Vec<i32> = (0..n)
        .map(|_| (g.next_u32() % 2000) as i32 - 1000)
        .collect();
    let (din, dout) = (up_i32(b, &v), zeros(b, n * 10));
    let r = launch(b, "warp_ops", d1(2, 32), &[Ptr(din), Ptr(dout)]);
    clean(&r)?;
    let got = down_u32(b, dout, n * 10);
    for w in 0..2 {
        let vv = &v[w * 32..w * 32 + 32];
        let ballot =
            |f: &dyn Fn(i32) -> bool| (0..32).filter(|&l| f(vv[l])).fold(0u32, |m, l| m | 1 << l);
        for lane in 0..32usize {
            let seg = |wd: usize| lane / wd * wd;
            let up = if lane % 8 < 2 { vv[lane] } else { vv[lane - 2] };
            let down = if lane % 16 + 5 >= 16 {
                vv[lane]
            } else {
                vv[lane + 5]
            };
            let active = (0..32).filter(|l| l % 3 == 0).fold(0u32, |m, l| m | 1 << l);
            let odd = (0..32)
                .filter(|l| l % 3 == 0 && vv[*l] & 1 != 0)
                .fold(0u32, |m, l| m | 1 << l);
            let want: [u32; 10] = [
                vv[3] as u32,
                up as u32,
                down as u32,
                vv[lane ^ 6] as u32,
                vv[seg(4) + (lane + 1) % 4] as u32,
                ballot(&|x| x > 0),
                (vv.iter().all(|&x| x > -1000) as u32) + 2 * (vv.iter().any(|&x| x > 900) as u32),
                if lane % 3 == 0 { active } else { u32::MAX },
                if lane % 3 == 0 { odd } else { u32::MAX },
                7 + (lane as u32 + 1).leading_zeros(),
            ];
            let t = w * 32 + lane;
            if got[t * 10..t * 10 + 10] != want {
                return Err(format!(
                    "thread {t}: got {:?} want {want:?}",
                    &got[t * 10..t * 10 + 10]
                ));
            }
        }
    }
    Ok(())
}

fn warp_reduce(b: &mut dyn Backend) -> Result<(), String> {
    let mut g = Lcg::new(16);
    let v: Vec<i32> = (0..32)
        .map(|_| (g.next_u32() % 2000) as i32 - 1000)
        .collect();
    let (din, dout) = (up_i32(b, &v), zeros(b, 32 * 4));
    let r = launch(b, "warp_reduce", d1(1, 32), &[Ptr(din), Ptr(dout)]);
    clean(&r)?;
    let want = [
        v.iter().fold(0i32, |a, x| a.wrapping_add(*x)) as u32,
        *v.iter().min().unwrap() as u32,
        v.iter().map(|x| *x as u32).max().unwrap(),
        v.iter().fold(0u32, |a, x| a ^ *x as u32),
    ];
    let got = down_u32(b, dout, 32 * 4);
    for t in 0..32 {
        if got[t * 4..t * 4 + 4] != want {
            return Err(format!(
                "thread {t}: got {:?} want {want:?}",
                &got[t * 4..t * 4 + 4]
            ));
        }
    }
    Ok(())
}

fn warp_lock(b: &mut dyn Backend) -> Result<(), String> {
    let (counter, order) = (zeros(b, 1), zeros(b, 64));
    let r = launch(b, "warp_lock", d1(1, 64), &[Ptr(counter), Ptr(order)]);
    clean(&r)?;
    let c = down_u32(b, counter, 1)[0];
    let mut o = down_u32(b, order, 64);
    o.sort();
    if c != 64 || o != (0..64).collect::<Vec<u32>>() {
        return Err(format!("counter {c}, order {o:?}"));
    }
    Ok(())
}

fn named_barrier(b: &mut dyn Backend) -> Result<(), String> {
    let out = zeros(b, 32);
    let r = launch(b, "named_barrier", d1(1, 64), &[Ptr(out), I32(64)]);
    clean(&r)?;
    let want: Vec<u32> = (0..32).map(|l| l * 3).collect();
    let got = down_u32(b, out, 32);
    if got != want {
        return Err(format!("got {got:?}"));
    }
    Ok(())
}

fn dotprod(b: &mut dyn Backend) -> Result<(), String> {
    let n = 64;
    let mut g = Lcg::new(23);
    let mut v = |_| g.next_u32() as i32;
    let (mut a, mut c, z): (Vec<i32>, Vec<i32>, Vec<i32>) = (
        (0..n).map(&mut v).collect(),
        (0..n).map(&mut v).collect(),
        (0..n).map(&mut v).collect(),
    );
    // Extremes: every byte 0x80 / 0xff, and zero.
    a[0] = i32::MIN;
    c[0] = -1;
    a[1] = 0x8080_8080u32 as i32;
    c[1] = 0x8080_8080u32 as i32;
    a[2] = -1;
    c[2] = -1;
    let (da, db, dc) = (up_i32(b, &a), up_i32(b, &c), up_i32(b, &z));
    let dout = zeros(b, n * 6);
    let r = launch(
        b,
        "dotprod",
        d1(1, n as u32),
        &[Ptr(da), Ptr(db), Ptr(dc), Ptr(dout)],
    );
    clean(&r)?;
    let got = down_u32(b, dout, n * 6);
    let byte = |v: i32, k: u32, signed: bool| -> i64 {
        let x = (v as u32 >> (8 * k)) & 0xff;
        if signed {
            x as u8 as i8 as i64
        } else {
            x as i64
        }
    };
    let half = |v: i32, k: u32, signed: bool| -> i64 {
        let x = (v as u32 >> (16 * k)) & 0xffff;
        if signed {
            x as u16 as i16 as i64
        } else {
            x as i64
        }
    };
    for t in 0..n {
        let (x, y, w) = (a[t], c[t], z[t]);
        let dp4 = |s: bool| (0..4).fold(w as i64, |acc, k| acc + byte(x, k, s) * byte(y, k, s));
        let dp2 = |s: bool, hi: u32| {
            (0..2).fold(w as i64, |acc, k| acc + half(x, k, s) * byte(y, k + hi, s))
        };
        let want = [
            dp4(true),
            dp4(false),
            dp2(true, 0),
            dp2(true, 2),
            dp2(false, 0),
            dp2(false, 2),
        ]
        .map(|v| v as u32);
        for (k, &e) in want.iter().enumerate() {
            if got[t * 6 + k] != e {
                return Err(format!(
                    "thread {t} out[{k}]: expected {e:#x}, got {:#x} (a {x:#x}, b {y:#x}, c {w:#x})",
                    got[t * 6 + k]
                ));
            }
        }
    }
    Ok(())
}

fn intops(b: &mut dyn Backend) -> Result<(), String> {
    let n = 96;
    let mut g = Lcg::new(11);
    let mut a: Vec<i32> = (0..n).map(|_| g.next_u32() as i32).collect();
    let mut c: Vec<i32> = (0..n)
        .map(|_| g.next_u32() as i32 >> (g.next_u32() % 31))
        .collect();
    a[0] = i32::MIN;
    c[0] = -1;
    a[1] = 0;
    c[1] = 0;
    a[2] = -7;
    c[2] = 3;
    let (da, db) = (up_i32(b, &a), up_i32(b, &c));
    let (dout, d64) = (zeros(b, n * 16), zeros(b, n * 2));
    let r = launch(
        b,
        "intops",
        d1(1, n as u32),
        &[Ptr(da), Ptr(db), Ptr(dout), Ptr(d64)],
    );
    clean(&r)?;
    let got = down_u32(b, dout, n * 16);
    let got64 = b.read(d64, n * 8).unwrap();
    for t in 0..n {
        let (x, y) = (a[t], c[t]);
        let (ux, uy) = (x as u32, y as u32);
        let bp = {
            let bytes = ((uy as u64) << 32) | ux as u64;
            (0..4).fold(0u32, |r, k| {
                r | ((((bytes >> (((0x5140u32 >> (4 * k)) & 7) * 8)) & 0xff) as u32) << (8 * k))
            })
        };
        let fl = ((((uy as u64) << 32 | ux as u64) << (y & 31)) >> 32) as u32;
        let fr = (((uy as u64) << 32 | ux as u64) >> (uy & 31)) as u32;
        let want: [u32; 16] = [
            ux.count_ones(),
            ux.leading_zeros(),
            ux.reverse_bits(),
            bp,
            fl,
            fr,
            ((ux as u64 * uy as u64) >> 32) as u32,
            ((x as i64 * y as i64) >> 32) as u32,
            if y != 0 { x.wrapping_div(y) as u32 } else { 0 },
            if y != 0 { x.wrapping_rem(y) as u32 } else { 0 },
            ux.checked_div(uy).unwrap_or(0),
            ((x >> (y & 31)) ^ (ux >> (uy & 31)) as i32) as u32,
            (ux >> 5) & 0x3ff,
            (x.min(y)
                .wrapping_add(x.max(y).wrapping_mul(3))
                .wrapping_add(x.wrapping_abs())) as u32,
            (x.abs_diff(y)).wrapping_add(7),
            (if x == 0 { 0 } else { ux.trailing_zeros() + 1 }) + (x as i64 as u64).leading_zeros(),
        ];
        if got[t * 16..t * 16 + 16] != want {
            return Err(format!(
                "thread {t} (x={x}, y={y}): got {:?} want {want:?}",
                &got[t * 16..t * 16 + 16]
            ));
        }
        let w64 = (x as i64)
            .wrapping_mul(y as i64)
            .wrapping_add(((x as i64) << 20) / ((y | 1) as i64));
        let g64 = i64::from_le_bytes(got64[t * 8..t * 8 + 8].try_into().unwrap());
        if g64 != w64 {
            return Err(format!("thread {t}: 64-bit got {g64} want {w64}"));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Z,
    Down,
    Up,
}
/// Round an exactly known f64 to f32 in a direction (reference for the rounded intrinsics).
fn round_dir(s: f64, d: Dir) -> f32 {
    let r = s as f32;
    match d {
        Dir::Down if (r as f64) > s => r.next_down(),
        Dir::Up if (r as f64) < s => r.next_up(),
        Dir::Z if (r as f64).abs() > s.abs() => {
            if r > 0.0 {
                r.next_down()
            } else {
                r.next_up()
            }
        }
        _ => r,
    }
}
fn round_i_dir(v: i128, d: Dir) -> f32 {
    let r = v as f32;
    let back = r as i128;
    match d {
        Dir::Down if back > v => r.next_down(),
        Dir::Up if back < v => r.next_up(),
        Dir::Z if back.abs() > v.abs() => {
            if r > 0.0 {
                r.next_down()
            } else {
                r.next_up()
            }
        }
        _ => r,
    }
}

fn convert(b: &mut dyn Backend) -> Result<(), String> {
    let n = 64usize;
    let mut g = Lcg::new(12);
    let mut x: Vec<f32> = (0..n).map(|_| g.f32() * 300.0).collect();
    x[0] = 2.5;
    x[1] = -2.5;
    x[2] = 3e9;
    x[3] = -0.5;
    x[4] = 1e-3;
    x[5] = 0.75;
    let d: Vec<f64> = (0..n).map(|_| g.f32() as f64 * 1e6 + 0.1).collect();
    let dx = up_f32(b, &x);
    let dd = b.alloc(n * 8).unwrap();
    b.write(
        dd,
        &d.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    let (oi, of) = (zeros(b, n * 8), zeros(b, n * 12));
    let od = zeros(b, n * 6);
    let r = launch(
        b,
        "convert",
        d1(1, n as u32),
        &[Ptr(dx), Ptr(dd), Ptr(oi), Ptr(of), Ptr(od)],
    );
    clean(&r)?;
    let gi = down_u32(b, oi, n * 8);
    let gf = down_f32(b, of, n * 12);
    let gd: Vec<f64> = b
        .read(od, n * 24)
        .unwrap()
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let sat_i = |v: f64| -> i32 {
        if v.is_nan() {
            0
        } else {
            v.clamp(i32::MIN as f64, i32::MAX as f64) as i32
        }
    };
    for t in 0..n {
        let v = x[t];
        let vf = v as f64;
        let wi: [i32; 8] = [
            sat_i(vf.round_ties_even()),
            sat_i(vf.trunc()),
            sat_i(vf.floor()),
            sat_i(vf.ceil()),
            vf.round_ties_even().clamp(0.0, u32::MAX as f64) as u32 as i32,
            (sat_i(vf.trunc()) as i8) as i32,
            sat_i(d[t].round_ties_even()),
            ((v * 1e10f32) as f64)
                .trunc()
                .clamp(i64::MIN as f64, i64::MAX as f64) as i64 as i32,
        ];
        let got_i: Vec<i32> = gi[t * 8..t * 8 + 8].iter().map(|u| *u as i32).collect();
        if got_i != wi {
            return Err(format!("int conversions of {v}: got {got_i:?} want {wi:?}"));
        }
        let sqrt_rd = {
            let a = v.abs();
            let mut r = (a as f64).sqrt() as f32;
            while (r as f64) * (r as f64) > a as f64 {
                r = r.next_down();
            }
            while (r.next_up() as f64) * (r.next_up() as f64) <= a as f64 {
                r = r.next_up();
            }
            r
        };
        let wf: [f32; 12] = [
            round_dir(vf + 1e-8f32 as f64, Dir::Z),
            round_dir(vf * 1.1f32 as f64, Dir::Up),
            round_dir(vf * 3.3f32 as f64 + 0.7f32 as f64, Dir::Down),
            v / 3.0,
            1.0 / v,
            sqrt_rd,
            v.round_ties_even() + v.floor() * 10.0 + v.ceil() * 100.0 + v.trunc() * 1000.0,
            if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) },
            round_i_dir((t as i32).wrapping_mul(16777217) as i128, Dir::Z),
            round_dir(d[t], Dir::Down),
            round_i_dir((0xffff_ffffu32 - t as u32) as i128, Dir::Down),
            round_i_dir((i64::MAX - t as i64) as i128, Dir::Up),
        ];
        let got_f = &gf[t * 12..t * 12 + 12];
        for k in 0..12 {
            if got_f[k].to_bits() != wf[k].to_bits() {
                return Err(format!(
                    "float conversion {k} of {v} (d={}): got {} want {}",
                    d[t], got_f[k], wf[k]
                ));
            }
        }
        let dv = d[t];
        let wd = [
            dv.mul_add(dv, 1.0 / (dv + 3.0)),
            dv - dv.next_up(),
            vf + dv.abs().sqrt(),
        ];
        for k in 0..3 {
            let e = (gd[t * 3 + k] - wd[k]).abs();
            if e > 1e-15 * wd[k].abs().max(1e-300) && !(k == 0 && e <= 2e-16 * wd[0].abs()) {
                return Err(format!(
                    "double op {k} of {dv}: got {} want {}",
                    gd[t * 3 + k],
                    wd[k]
                ));
            }
        }
    }
    Ok(())
}

fn mathfn(b: &mut dyn Backend) -> Result<(), String> {
    let n = 200;
    let mut g = Lcg::new(13);
    let mut x: Vec<f32> = (0..n).map(|_| g.f32() * 20.0).collect();
    x[0] = 1e5; // sinf/cosf slow path (Payne-Hanek reduction with local memory)
    x[1] = -3e4;
    x[2] = 0.0;
    let (din, dout) = (up_f32(b, &x), zeros(b, n * 10));
    let dd = zeros(b, n * 4);
    let r = launch(
        b,
        "mathfn",
        d1(n.div_ceil(64) as u32, 64),
        &[Ptr(din), Ptr(dout), Ptr(dd), I32(n as i32)],
    );
    clean(&r)?;
    let got = down_f32(b, dout, n * 10);
    let gd: Vec<f64> = b
        .read(dd, n * 16)
        .unwrap()
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for t in 0..n {
        let v = x[t] as f64;
        let want = [
            v.sin(),
            v.cos(),
            (v.abs() + 0.5).ln(),
            v.abs().powf(1.7f32 as f64),
            v.abs().sqrt(),
            1.0 / (v.abs() + 1.0).sqrt(),
            v.exp(),
            v.atan2(0.75),
            (x[t] % 0.3f32) as f64,
            v.sin() + (v.abs() + 1.0).ln(),
        ];
        for k in 0..10 {
            let gv = got[t * 10 + k] as f64;
            // Fast intrinsics (__expf, __sinf, __logf) have looser, absolute-ish bounds.
            let tol = if k >= 6 && k != 7 && k != 8 {
                1e-5 * want[k].abs().max(1.0) * 4.0
            } else {
                4e-7 * want[k].abs() + 1e-7
            };
            // `sin.approx` (__sinf) has a documented bound only for |x| <= 100*pi.
            if k == 9 && v.abs() > 100.0 * std::f64::consts::PI {
                continue;
            }
            if (gv - want[k]).abs() > tol {
                return Err(format!("math {k} of {v}: got {gv} want {}", want[k]));
            }
        }
        let wd = [v.exp(), (v * 3.0).sin()];
        for k in 0..2 {
            if (gd[t * 2 + k] - wd[k]).abs()
                > 1e-15 * wd[k].abs() + 1e-300 + if k == 1 { 1e-16 } else { 0.0 }
            {
                return Err(format!(
                    "double math {k} of {v}: got {} want {}",
                    gd[t * 2 + k],
                    wd[k]
                ));
            }
        }
    }
    Ok(())
}

fn devfunc(b: &mut dyn Backend) -> Result<(), String> {
    let n = 50;
    let mut g = Lcg::new(14);
    let c = g.vec(8);
    let xs = g.vec(n);
    let (dc, dx, dout) = (up_f32(b, &c), up_f32(b, &xs), zeros(b, n));
    let r = launch(
        b,
        "devfunc",
        d1(2, 32),
        &[Ptr(dc), Ptr(dx), Ptr(dout), I32(n as i32), I32(5)],
    );
    clean(&r)?;
    let want: Vec<f32> = xs
        .iter()
        .map(|&x| {
            (0..8).rev().fold(0f32, |acc, j| {
                acc.mul_add(x, if j < 5 { c[j] } else { 0.0 })
            })
        })
        .collect();
    close(&down_f32(b, dout, n), &want, 1e-6, 1e-7)
}

fn blocks3d(b: &mut dyn Backend) -> Result<(), String> {
    let (block, grid) = ([8u32, 4, 3], [2u32, 2, 1]);
    let nt = 96usize;
    let nb = 4usize;
    let mut g = Lcg::new(15);
    let v: Vec<i32> = (0..nt * nb)
        .map(|_| (g.next_u32() % 200) as i32 - 100)
        .collect();
    let (din, dout) = (up_i32(b, &v), zeros(b, nt * nb));
    let r = launch(
        b,
        "blocks3d",
        dims(grid, block, (nt * 4) as u32),
        &[Ptr(din), Ptr(dout)],
    );
    clean(&r)?;
    let got = down_u32(b, dout, nt * nb);
    for blk in 0..nb {
        let vv = &v[blk * nt..(blk + 1) * nt];
        let cnt = vv.iter().filter(|&&x| x > 0).count() as i32;
        let all = vv.iter().all(|&x| x > -50) as i32;
        let any = vv.iter().any(|&x| x > 90) as i32;
        for t in 0..nt {
            let want = vv[nt - 1 - t] * 1000 + cnt * 4 + all * 2 + any;
            if got[blk * nt + t] as i32 != want {
                return Err(format!(
                    "block {blk} thread {t}: got {} want {want}",
                    got[blk * nt + t] as i32
                ));
            }
        }
    }
    Ok(())
}

/// The time and placement special registers look like an H100's (and read the same on one).
fn specials(b: &mut dyn Backend) -> Result<(), String> {
    let blocks = 264;
    let out = b.alloc(8 * 8 * blocks).unwrap();
    let sink = zeros(b, 128);
    launch(
        b,
        "specials",
        d1(blocks as u32, 128),
        &[Ptr(out), Ptr(sink), I32(20_000)],
    );
    let words: Vec<u64> = b
        .read(out, 8 * 8 * blocks)
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let at = |blk: usize, k: usize| words[8 * blk + k];
    // Nanoseconds since the Unix epoch (2020 to 2100), not an instruction count.
    let (t0, t1) = (at(0, 0), at(0, 6));
    if !(1_577_836_800_000_000_000..4_102_444_800_000_000_000).contains(&t0) {
        return Err(format!("%globaltimer = {t0} is not ns since the epoch"));
    }
    let (c0, c1) = (at(0, 1), at(0, 7));
    if t1 < t0 || c1 < c0 {
        return Err(format!(
            "time went back over a barrier: {t0} -> {t1}, {c0} -> {c1}"
        ));
    }
    // 20,000 dependent multiply-adds: tens of microseconds at an SM's clock.
    let dt = t1 - t0;
    if !(5_000..5_000_000).contains(&dt) {
        return Err(format!("the spin took {dt} ns of %globaltimer"));
    }
    let rate = (c1 - c0) as f64 / dt as f64;
    if !(1.0..2.5).contains(&rate) {
        return Err(format!(
            "%clock64 advances {rate} cycles per ns of %globaltimer"
        ));
    }
    let sms: std::collections::BTreeSet<u64> = (0..blocks).map(|k| at(k, 2)).collect();
    let nsmid = at(0, 3);
    if !(100..=200).contains(&nsmid) || sms.len() < 100 || sms.iter().any(|&s| s >= nsmid) {
        return Err(format!(
            "%smid over {blocks} blocks takes {} values, %nsmid = {nsmid}",
            sms.len()
        ));
    }
    if at(0, 4) != 64 {
        return Err(format!(
            "%nwarpid = {} (an sm_90 SM has 64 warp slots)",
            at(0, 4)
        ));
    }
    if at(0, 5) == 0 {
        return Err("%gridid is 0".into());
    }
    Ok(())
}

pub const CASES: &[Case] = &[
    Case {
        name: "vector_add",
        file: "vector_add.cu",
        run: vector_add,
        min_sm: 75,
    },
    Case {
        name: "reduce_naive",
        file: "reduce_naive.cu",
        run: reduce_naive,
        min_sm: 75,
    },
    Case {
        name: "reduce_shared",
        file: "reduce_shared.cu",
        run: reduce_shared,
        min_sm: 75,
    },
    Case {
        name: "reduce_shuffle",
        file: "reduce_shuffle.cu",
        run: reduce_shuffle,
        min_sm: 75,
    },
    Case {
        name: "matmul_tiled",
        file: "matmul_tiled.cu",
        run: matmul_tiled,
        min_sm: 75,
    },
    Case {
        name: "transpose_naive",
        file: "transpose.cu",
        run: transpose_naive,
        min_sm: 75,
    },
    Case {
        name: "transpose_tiled",
        file: "transpose.cu",
        run: transpose_tiled,
        min_sm: 75,
    },
    Case {
        name: "softmax",
        file: "softmax.cu",
        run: softmax,
        min_sm: 75,
    },
    Case {
        name: "embedding",
        file: "embedding.cu",
        run: embedding,
        min_sm: 75,
    },
    Case {
        name: "conv",
        file: "conv.cu",
        run: conv,
        min_sm: 75,
    },
    Case {
        name: "activations",
        file: "activations.cu",
        run: activations,
        min_sm: 75,
    },
    Case {
        name: "attention",
        file: "attention.cu",
        run: attention,
        min_sm: 75,
    },
    Case {
        name: "mixed_shared",
        file: "mixed_shared.cu",
        run: mixed_shared,
        min_sm: 75,
    },
    Case {
        name: "atomics",
        file: "atomics.cu",
        run: atomics,
        min_sm: 75,
    },
    Case {
        name: "warp_ops",
        file: "warp.cu",
        run: warp_ops,
        min_sm: 75,
    },
    Case {
        name: "warp_reduce",
        file: "warp_reduce.cu",
        run: warp_reduce,
        min_sm: 80,
    },
    Case {
        name: "warp_lock",
        file: "warp_lock.cu",
        run: warp_lock,
        min_sm: 75,
    },
    Case {
        name: "named_barrier",
        file: "named_barrier.cu",
        run: named_barrier,
        min_sm: 75,
    },
    Case {
        name: "intops",
        file: "intops.cu",
        run: intops,
        min_sm: 75,
    },
    Case {
        name: "dotprod",
        file: "dotprod.cu",
        run: dotprod,
        min_sm: 75,
    },
    Case {
        name: "convert",
        file: "convert.cu",
        run: convert,
        min_sm: 75,
    },
    Case {
        name: "mathfn",
        file: "mathfn.cu",
        run: mathfn,
        min_sm: 75,
    },
    Case {
        name: "devfunc",
        file: "devfunc.cu",
        run: devfunc,
        min_sm: 75,
    },
    Case {
        name: "blocks3d",
        file: "blocks3d.cu",
        run: blocks3d,
        min_sm: 75,
    },
    Case {
        name: "specials",
        file: "specials.cu",
        run: specials,
        min_sm: 75,
    },
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
        if arch()[3..].parse::<u32>().unwrap_or(90) < case.min_sm {
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
    assert!(
        failures.is_empty(),
        "failing corpus cases:\n{}",
        failures.join("\n")
    );
}

fn load(file: &str) -> Option<EmuBackend> {
    if !nvrtc_present() {
        return None;
    }
    let mut emu = EmuBackend::new();
    emu.load_module(&ptx_for(file)).expect("load");
    Some(emu)
}

#[test]
fn device_function_printf_and_device_globals() {
    let Some(mut emu) = load("devfunc.cu") else {
        return;
    };
    emu.capture_printf();
    devfunc(&mut emu).unwrap();
    let out = String::from_utf8(emu.take_printf()).unwrap();
    let xs = {
        let mut g = Lcg::new(14);
        g.vec(8);
        g.vec(50)
    };
    assert_eq!(out, format!("thread 3 x={:.3} k=5 ok\n", xs[3]));
    let addr = emu.symbol_address("counter").expect("counter symbol");
    let v = u32::from_le_bytes(emu.read(addr, 4).unwrap().try_into().unwrap());
    assert_eq!(v, 50, "every in-range thread called poly once");
}

#[test]
fn hand_written_half_precision_ptx() {
    let ptx = std::fs::read_to_string(corpus_dir().join("half_handwritten.ptx")).unwrap();
    let mut emu = EmuBackend::new();
    emu.load_module(&ptx).unwrap();
    // (a, b) pairs as f16 bits: 1.5 and 2.25, -0.5 and 3.0, 1000 and 0.001.
    let pairs: [(u16, u16); 3] = [(0x3E00, 0x4080), (0xB800, 0x4200), (0x63D0, 0x1419)];
    let a = emu.alloc(12).unwrap();
    let bytes: Vec<u8> = pairs
        .iter()
        .flat_map(|(x, y)| [x.to_le_bytes(), y.to_le_bytes()].concat())
        .collect();
    emu.write(a, &bytes).unwrap();
    let out = emu.alloc(60).unwrap();
    launch(&mut emu, "half_ops", d1(1, 3), &[Ptr(a), Ptr(out)]);
    let got = down_f32(&mut emu, out, 15);
    // Expected values rounded to f16 by hand (f16 has an 11-bit significand).
    let want: [f32; 15] = [
        3.75, 3.375, 7.125, 3.0, 6.75, //
        2.5, -1.5, 1.0, -1.0, 1.5, //
        1000.0, 1.0, 1001.0, 2000.0, 3008.0,
    ];
    assert_eq!(got, want);
}

fn diag_run(
    file: &str,
    kernel: &str,
    d: LaunchDims,
    setup: impl FnOnce(&mut EmuBackend) -> Vec<ParamValue>,
) -> Option<LaunchReport> {
    let mut emu = load(file)?;
    let p = setup(&mut emu);
    Some(
        emu.launch(kernel, d, &p, Instant::now() + Duration::from_secs(30))
            .expect("launch"),
    )
}

fn only(r: &LaunchReport, tool: &str) -> Vec<cugrade::backend::Diagnostic> {
    r.diagnostics
        .iter()
        .filter(|d| d.tool == tool)
        .cloned()
        .collect()
}

#[test]
fn memcheck_reports_out_of_bounds_exactly_and_keeps_running() {
    let Some(r) = diag_run("diag_oob.cu", "diag_oob", d1(1, 64), |e| {
        let a = up_f32(e, &[1.0; 40]);
        let o = zeros(e, 40);
        vec![Ptr(a), Ptr(o), I32(40)]
    }) else {
        return;
    };
    let m = only(&r, "memcheck");
    assert_eq!(m.len(), 2, "{m:?}");
    let g = m.iter().find(|d| d.message.contains("global")).unwrap();
    assert_eq!(g.thread, [40, 0, 0]);
    assert_eq!(g.line, Some(5));
    assert_eq!(g.file.as_deref(), Some("diag_oob.cu"));
    assert!(
        g.message
            .contains("0 bytes past the end of a 160-byte allocation"),
        "{}",
        g.message
    );
    assert!(g.instruction.starts_with("ld.global"), "{}", g.instruction);
    assert_eq!(g.repeats, 0);
    let s = m.iter().find(|d| d.message.contains("shared")).unwrap();
    assert_eq!(s.line, Some(6));
    assert_eq!(s.thread, [32, 0, 0]);
    assert_eq!(
        s.repeats, 31,
        "threads 32..63 overflow, reported once with a count"
    );
}

#[test]
fn memcheck_reports_misaligned_access() {
    let Some(r) = diag_run("diag_misaligned.cu", "diag_misaligned", d1(1, 32), |e| {
        let a = e.alloc(256).unwrap();
        e.write(a, &[0u8; 256]).unwrap();
        let o = zeros(e, 32);
        vec![Ptr(a), Ptr(o)]
    }) else {
        return;
    };
    let m = only(&r, "memcheck");
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].message.contains("misaligned"), "{}", m[0].message);
    assert_eq!(m[0].repeats, 31);
}

#[test]
fn racecheck_finds_missing_syncthreads() {
    let Some(r) = diag_run("diag_race.cu", "diag_race", d1(1, 128), |e| {
        let a = up_f32(e, &vec![1.0; 128]);
        let o = zeros(e, 1);
        vec![Ptr(a), Ptr(o)]
    }) else {
        return;
    };
    let m = only(&r, "racecheck");
    assert!(!m.is_empty(), "{:?}", r.diagnostics);
    assert!(m.iter().all(|d| d.line == Some(8)), "{m:?}");
    assert!(m[0].message.contains("hazard"));
}

#[test]
fn racecheck_finds_lanes_of_one_warp_without_syncwarp() {
    let input: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let Some(r) = diag_run("diag_warp_race.cu", "diag_warp_race", d1(1, 32), |e| {
        let a = up_f32(e, &input);
        vec![Ptr(a), Ptr(zeros(e, 1))]
    }) else {
        return;
    };
    let m = only(&r, "racecheck");
    assert!(!m.is_empty(), "{:?}", r.diagnostics);
    assert!(
        m[0].message.contains("a lane of the same warp") && m[0].message.contains("__syncwarp()"),
        "{}",
        m[0].message
    );
    // Ordered by __syncwarp() (and a shuffle): nothing to report.
    let Some(r) = diag_run("diag_warp_race.cu", "diag_warp_synced", d1(1, 32), |e| {
        let a = up_f32(e, &input);
        vec![Ptr(a), Ptr(zeros(e, 1))]
    }) else {
        return;
    };
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn racecheck_is_quiet_on_correct_reduction() {
    let Some(mut emu) = load("reduce_shared.cu") else {
        return;
    };
    reduce_shared(&mut emu).unwrap();
}

#[test]
fn initcheck_finds_unwritten_shared_reads() {
    let Some(r) = diag_run("diag_uninit.cu", "diag_uninit", d1(1, 64), |e| {
        vec![Ptr(zeros(e, 64))]
    }) else {
        return;
    };
    let m = only(&r, "initcheck");
    assert_eq!(m.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(m[0].line, Some(6));
    assert_eq!(m[0].thread, [0, 0, 0]);
    assert_eq!(m[0].repeats, 31);
}

#[test]
fn synccheck_reports_divergent_barriers() {
    let Some(r) = diag_run("diag_barrier.cu", "diag_barrier", d1(1, 64), |e| {
        vec![Ptr(zeros(e, 64))]
    }) else {
        return;
    };
    let m = only(&r, "synccheck");
    assert_eq!(m.len(), 1, "{:?}", r.diagnostics);
    assert!(
        m[0].message.contains("diag_barrier.cu:6") && m[0].message.contains("diag_barrier.cu:9"),
        "{}",
        m[0].message
    );
}

#[test]
fn synccheck_reports_a_barrier_skipped_inside_a_loop_but_not_a_guard_clause() {
    let Some(r) = diag_run(
        "diag_exit_barrier.cu",
        "barrier_in_branch",
        d1(1, 64),
        |e| vec![Ptr(up_f32(e, &[1.0; 64])), Ptr(zeros(e, 1))],
    ) else {
        return;
    };
    let m = only(&r, "synccheck");
    assert_eq!(m.len(), 1, "{:?}", r.diagnostics);
    assert!(
        m[0].message.contains("__syncthreads()") && m[0].message.contains("went round the loop"),
        "{}",
        m[0].message
    );
    assert_eq!(m[0].line, Some(12), "{:?}", m[0]);
    // Threads that return before the first barrier have exited: the idiom is fine.
    for n in [64, 40, 7] {
        let Some(r) = diag_run("diag_exit_barrier.cu", "guard_clause", d1(1, 64), |e| {
            vec![Ptr(up_f32(e, &[1.0; 64])), Ptr(zeros(e, 64)), I32(n)]
        }) else {
            return;
        };
        assert!(r.diagnostics.is_empty(), "n={n}: {:?}", r.diagnostics);
    }
}

#[test]
fn dynamic_shared_memory_follows_static_and_counts_toward_the_limit() {
    let Some(mut emu) = load("mixed_shared.cu") else {
        return;
    };
    mixed_shared(&mut emu).unwrap();
    let (din, dout, dwhere) = (zeros(&mut emu, 4), zeros(&mut emu, 4), zeros(&mut emu, 2));
    let params = [Ptr(din), Ptr(dout), Ptr(dwhere), I32(4)];
    let dl = Instant::now() + Duration::from_secs(30);
    launch(&mut emu, "mixed_shared", d1(1, 32), &params);
    assert_eq!(
        down_u32(&mut emu, dwhere, 2),
        vec![0, 512],
        "static first, then align 256"
    );
    // 260 static bytes padded to 512, plus the dynamic bytes: exactly 227 KiB fits.
    let limit = 227 * 1024;
    let fits = dims([1, 1, 1], [32, 1, 1], limit - 512);
    assert!(emu.launch("mixed_shared", fits, &params, dl).is_ok());
    let over = dims([1, 1, 1], [32, 1, 1], limit - 511);
    match emu.launch("mixed_shared", over, &params, dl) {
        Err(cugrade::backend::BackendError::Launch(m)) => {
            assert!(m.contains("shared memory") && m.contains("232449"), "{m}")
        }
        other => panic!(
            "{} bytes of shared memory must be refused: {other:?}",
            limit + 1
        ),
    }
}

#[test]
fn shfl_mask_mismatch_is_reported() {
    let Some(r) = diag_run("diag_shfl.cu", "diag_shfl", d1(1, 32), |e| {
        let a = up_f32(e, &[1.0; 32]);
        vec![Ptr(a), Ptr(zeros(e, 32))]
    }) else {
        return;
    };
    let m = only(&r, "shfl");
    assert_eq!(m.len(), 1, "{:?}", r.diagnostics);
    assert!(m[0].message.contains("0xffff0000"), "{}", m[0].message);
    assert_eq!(m[0].line, Some(4));
}

#[test]
fn trap_faults_the_launch() {
    let Some(mut emu) = load("diag_trap.cu") else {
        return;
    };
    let mut v = vec![1i32; 64];
    v[5] = -1;
    let a = up_i32(&mut emu, &v);
    let o = zeros(&mut emu, 64);
    let e = emu.launch(
        "diag_trap",
        d1(2, 32),
        &[Ptr(a), Ptr(o)],
        Instant::now() + Duration::from_secs(30),
    );
    match e {
        Err(cugrade::backend::BackendError::Fault(m)) => {
            assert!(m.contains("trap") && m.contains("[5, 0, 0]"), "{m}")
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn infinite_loop_stops_at_the_deadline() {
    let Some(mut emu) = load("diag_loop.cu") else {
        return;
    };
    let f = zeros(&mut emu, 1);
    let o = zeros(&mut emu, 1);
    let t0 = Instant::now();
    let e = emu.launch(
        "diag_loop",
        d1(1, 32),
        &[Ptr(f), Ptr(o)],
        Instant::now() + Duration::from_millis(300),
    );
    assert!(
        matches!(&e, Err(cugrade::backend::BackendError::Fault(m)) if m.contains("deadline")),
        "{e:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn unsupported_instruction_is_a_load_error_naming_it() {
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\ttex.1d.v4.f32.s32 {%f1,%f2,%f3,%f4}, [t, {%r1}];\n\tret;\n}\n";
    let e = EmuBackend::new().load_module(ptx).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("tex.1d.v4.f32.s32") && m.contains("line 6"),
        "{m}"
    );
}

#[test]
fn parallel_and_serial_blocks_agree() {
    let Some(mut par) = load("matmul_tiled.cu") else {
        return;
    };
    let mut ser = load("matmul_tiled.cu").unwrap();
    ser.parallel = false;
    let run = |b: &mut EmuBackend| {
        let (m, n, k) = (64, 64, 64);
        let mut g = Lcg::new(3);
        let (a, bb) = (g.vec(m * k), g.vec(k * n));
        let (da, db, dc) = (up_f32(b, &a), up_f32(b, &bb), zeros(b, m * n));
        let r = launch(
            b,
            "matmul_tiled",
            dims([4, 4, 1], [16, 16, 1], 0),
            &[Ptr(da), Ptr(db), Ptr(dc), I32(64), I32(64), I32(64)],
        );
        (down_f32(b, dc, m * n), r)
    };
    let (x, rx) = run(&mut par);
    let (y, ry) = run(&mut ser);
    assert_eq!(x, y);
    // Everything but the wall time.
    assert_eq!(
        (rx.diagnostics, rx.metrics),
        (ry.diagnostics, ry.metrics),
        "metrics and diagnostics are deterministic"
    );
}

#[test]
fn hostile_modules_are_refused_cleanly() {
    let cases = [
        (
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<2000000000>;\n\tret;\n}\n",
            "registers",
        ),
        (
            ".version 8.0\n.target sm_90\n.address_size 64\n.global .align 4 .b8 big[4000000000000];\n",
            "too large",
        ),
        (
            ".version 8.0\n.target sm_90\n.address_size 32\n",
            "address_size",
        ),
        (
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tbra $nowhere;\n}\n",
            "unknown label",
        ),
        (
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tadd.s32 %r1, %r2, 1;\n}\n",
            "unknown register",
        ),
    ];
    for (ptx, want) in cases {
        match EmuBackend::new().load_module(ptx) {
            Err(cugrade::backend::BackendError::Load(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("expected a load error about {want}, got {other:?}"),
        }
    }
}

#[test]
fn launch_configuration_is_validated() {
    let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n\tret;\n}\n";
    let mut emu = EmuBackend::new();
    emu.load_module(ptx).unwrap();
    let dl = Instant::now() + Duration::from_secs(5);
    assert!(emu.launch("k", d1(1, 2048), &[Ptr(0)], dl).is_err());
    assert!(emu.launch("k", d1(0, 32), &[Ptr(0)], dl).is_err());
    assert!(emu.launch("k", d1(1, 32), &[], dl).is_err());
    assert!(
        emu.launch("k", d1(1, 32), &[I32(1)], dl).is_err(),
        "a 4-byte value for a u64 parameter"
    );
    assert!(matches!(
        emu.launch("nope", d1(1, 32), &[], dl),
        Err(cugrade::backend::BackendError::NoKernel(_))
    ));
    let info = emu.kernel_info("k").unwrap();
    assert_eq!((info.param_count, info.param_sizes), (1, vec![8]));
    assert!(emu.launch("k", d1(3, 32), &[Ptr(0)], dl).is_ok());
}

#[test]
fn mangled_ptx_never_panics_the_loader() {
    // Truncations and token swaps of every snapshot: each must load or fail with an error.
    let mut g = Lcg::new(99);
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ptx") {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        for _ in 0..40 {
            let mut s = src.clone();
            let cut = (g.next_u32() as usize) % s.len();
            match g.next_u32() % 3 {
                0 => s.truncate(cut),
                1 => {
                    let junk = [
                        "}",
                        "{",
                        ";",
                        "[",
                        "%r999",
                        ".v4",
                        "0f",
                        "@",
                        "-",
                        "bra",
                        ".reg .b32 %q<3>;",
                    ];
                    let j = junk[(g.next_u32() as usize) % junk.len()];
                    if s.is_char_boundary(cut) {
                        s.insert_str(cut, j);
                    }
                }
                _ => {
                    if let Some(line_start) = s[..cut].rfind('\n') {
                        s.replace_range(line_start..cut, "\n");
                    }
                }
            }
            let r = std::panic::catch_unwind(|| EmuBackend::new().load_module(&s).map(|_| ()));
            assert!(r.is_ok(), "loader panicked on a mangled {}", path.display());
        }
    }
}

#[test]
fn kernels_with_mangled_constants_never_panic_the_interpreter() {
    // Change integer constants in instructions (offsets, shift counts, sizes, lane numbers)
    // and run every kernel with small buffers: out-of-range behaviour must be diagnostics,
    // faults or plain results, never a panic or a hang.
    let mut g = Lcg::new(
        std::env::var("EMU_FUZZ_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(7),
    );
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ptx") {
            continue;
        }
        let src = std::fs::read_to_string(&path).unwrap();
        let spots: Vec<usize> = src
            .match_indices(", ")
            .map(|(i, _)| i + 2)
            .filter(|&i| src[i..].starts_with(|c: char| c.is_ascii_digit() || c == '-'))
            .collect();
        if spots.is_empty() {
            continue;
        }
        for _ in 0..8 {
            let at = spots[(g.next_u32() as usize) % spots.len()];
            let end = at + src[at..].find([';', ',', ']']).unwrap_or(0);
            let vals = [
                "0",
                "-1",
                "31",
                "32",
                "4096",
                "2147483647",
                "-2147483648",
                "1099511627776",
            ];
            let v = vals[(g.next_u32() as usize) % vals.len()];
            let mutated = format!("{}{v}{}", &src[..at], &src[end..]);
            let run = std::panic::catch_unwind(|| {
                let mut emu = EmuBackend::new();
                emu.capture_printf();
                if emu.load_module(&mutated).is_err() {
                    return;
                }
                let m = cugrade::backend::emu::EmuBackend::kernels(&emu);
                for k in m {
                    let info = emu.kernel_info(&k).unwrap();
                    let params: Vec<ParamValue> = info
                        .param_sizes
                        .iter()
                        .map(|s| {
                            if *s == 8 {
                                Ptr(emu.alloc(4096).unwrap())
                            } else {
                                I32(33)
                            }
                        })
                        .collect();
                    let _ = emu.launch(
                        &k,
                        d1(2, 64),
                        &params,
                        Instant::now() + Duration::from_millis(300),
                    );
                }
            });
            assert!(
                run.is_ok(),
                "interpreter panicked on {} with `{v}` at byte {at}",
                path.display()
            );
        }
    }
}

/// Records every buffer a case reads back, so two backends' results can be compared.
struct Recording<'a> {
    inner: &'a mut dyn Backend,
    reads: Vec<Vec<u8>>,
}

impl Backend for Recording<'_> {
    fn kind(&self) -> cugrade::backend::BackendKind {
        self.inner.kind()
    }
    fn device_name(&self) -> String {
        self.inner.device_name()
    }
    fn load_module(&mut self, ptx: &str) -> Result<(), cugrade::backend::BackendError> {
        self.inner.load_module(ptx)
    }
    fn kernel_info(
        &mut self,
        name: &str,
    ) -> Result<cugrade::backend::KernelInfo, cugrade::backend::BackendError> {
        self.inner.kernel_info(name)
    }
    fn alloc(&mut self, bytes: usize) -> Result<u64, cugrade::backend::BackendError> {
        self.inner.alloc(bytes)
    }
    fn free_all(&mut self) -> Result<(), cugrade::backend::BackendError> {
        self.inner.free_all()
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), cugrade::backend::BackendError> {
        self.inner.write(addr, data)
    }
    fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, cugrade::backend::BackendError> {
        let v = self.inner.read(addr, len)?;
        self.reads.push(v.clone());
        Ok(v)
    }
    fn set_global(
        &mut self,
        name: &str,
        data: &[u8],
    ) -> Result<(), cugrade::backend::BackendError> {
        self.inner.set_global(name, data)
    }
    fn launch(
        &mut self,
        k: &str,
        d: LaunchDims,
        p: &[cugrade::backend::ParamValue],
        dl: std::time::Instant,
    ) -> Result<LaunchReport, cugrade::backend::BackendError> {
        self.inner.launch(k, d, p, dl)
    }
}

/// Differential test on a real GPU (`CUGRADE_GPU_TESTS=1`): every corpus case runs on the CUDA
/// backend with its own assertions (exact operations exactly, approximate ones within the
/// documented PTX bounds against the CPU), and every buffer read back is compared bit for bit
/// with the emulator's. Cases whose results legitimately differ in the last bits (float
/// atomics in hardware order, approximate transcendentals) are listed with their differences;
/// the log goes to docs/validation/.
#[test]
fn corpus_differential_against_the_gpu() {
    if std::env::var("CUGRADE_GPU_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set CUGRADE_GPU_TESTS=1 on a GPU machine");
        return;
    }
    assert!(nvrtc_present(), "the GPU test needs NVRTC");
    let mut failures = Vec::new();
    let (mut identical, mut differing) = (0, Vec::new());
    for case in CASES {
        let ptx = ptx_for(case.file);
        let mut gpu = cugrade::backend::cuda::CudaBackend::new(0).expect("a CUDA device");
        let mut emu = EmuBackend::new();
        let mut on_gpu = Recording {
            inner: &mut gpu,
            reads: vec![],
        };
        let gpu_result = on_gpu
            .load_module(&ptx)
            .map_err(|e| e.to_string())
            .and_then(|_| (case.run)(&mut on_gpu));
        let mut on_emu = Recording {
            inner: &mut emu,
            reads: vec![],
        };
        let emu_result = on_emu
            .load_module(&ptx)
            .map_err(|e| e.to_string())
            .and_then(|_| (case.run)(&mut on_emu));
        if let Err(e) = &gpu_result {
            failures.push(format!("{} on the GPU: {e}", case.name));
        }
        if let Err(e) = &emu_result {
            failures.push(format!("{} on the emulator: {e}", case.name));
        }
        let (g, e) = (&on_gpu.reads, &on_emu.reads);
        let same = g.len() == e.len() && g.iter().zip(e).all(|(a, b)| a == b);
        if same {
            identical += 1;
        } else {
            let bytes: usize = g
                .iter()
                .zip(e)
                .map(|(a, b)| a.iter().zip(b).filter(|(x, y)| x != y).count())
                .sum();
            differing.push(format!("{} ({bytes} bytes differ)", case.name));
        }
        eprintln!(
            "{:<28} gpu {:<4} emu {:<4} {}",
            case.name,
            if gpu_result.is_ok() { "ok" } else { "FAIL" },
            if emu_result.is_ok() { "ok" } else { "FAIL" },
            if same { "bit-identical" } else { "differs" }
        );
        for e in [&gpu_result, &emu_result]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            eprintln!("    {e}");
        }
    }
    eprintln!(
        "{identical} of {} cases bit-identical; differing: {}",
        CASES.len(),
        differing.join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn synccheck_reports_a_named_barrier_that_would_hang() {
    // Only 32 + 32 threads arrive at a barrier told to expect 96.
    let Some(r) = diag_run("named_barrier.cu", "named_barrier", d1(1, 64), |e| {
        vec![Ptr(zeros(e, 32)), I32(96)]
    }) else {
        return;
    };
    let m = only(&r, "synccheck");
    assert_eq!(m.len(), 1, "{:?}", r.diagnostics);
    assert!(
        m[0].message.contains("expects 96") && m[0].message.contains("only 64"),
        "{}",
        m[0].message
    );
}
