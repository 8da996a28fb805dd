//! CUDA's own headers (`cooperative_groups.h`, `cuda_fp16.h`, `cuda_bf16.h`, CCCL's `cub/`
//! and `cuda/std/`): each kernel under tests/cuda-headers/ compiles with NVRTC and the include
//! directories cugrade passes its compile worker, then runs on the PTX emulator against a CPU
//! answer (or the emulator names the instruction it lacks).
//!
//! `ci/with-nvrtc` installs the header wheels; without NVRTC the tests skip with a message,
//! with NVRTC but without the headers they fail and say how to install them.

use crate::support::{nvrtc, root};
use cugrade::backend::emu::EmuBackend;
use cugrade::backend::{Backend, LaunchDims, ParamValue};
use cugrade::compile::{SourceFile, compile, options, toolchain};
use std::time::{Duration, Instant};

fn ptx_of(file: &str) -> Option<String> {
    if !nvrtc() {
        return None;
    }
    let dirs = toolchain::cuda_include_dirs();
    assert!(
        !dirs.is_empty(),
        "CUDA headers not found: run through ci/with-nvrtc, which installs {:?}",
        toolchain::HEADER_WHEELS
    );
    let path = root().join("tests/cuda-headers").join(file);
    let src = SourceFile {
        name: file.into(),
        text: std::fs::read_to_string(path).unwrap(),
    };
    let c = compile(&src, &[], &options("sm_90", &dirs));
    assert!(c.ok, "{file} does not compile:\n{}", c.log);
    Some(c.ptx)
}

fn up(b: &mut EmuBackend, v: &[f32]) -> u64 {
    let a = b.alloc(v.len() * 4).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b.write(a, &bytes).unwrap();
    a
}

fn down(b: &mut EmuBackend, a: u64, n: usize) -> Vec<f32> {
    b.read(a, n * 4)
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn input(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
        .collect()
}

/// Load and launch on the emulator; a module the emulator cannot run must say which
/// instruction it lacks.
fn run(ptx: &str, kernel: &str, grid: u32, block: u32, b: &mut EmuBackend, p: &[ParamValue]) {
    if let Err(e) = b.load_module(ptx) {
        panic!("the emulator cannot load {kernel}: {e}");
    }
    let dims = LaunchDims {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    };
    let r = b
        .launch(kernel, dims, p, Instant::now() + Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    assert!(r.diagnostics.is_empty(), "{kernel}: {:?}", r.diagnostics);
}

fn sum_kernel(file: &str, kernel: &str, block: u32) {
    let Some(ptx) = ptx_of(file) else { return };
    let mut b = EmuBackend::new();
    let n = 1000;
    let x = input(n);
    let xa = up(&mut b, &x);
    let out = up(&mut b, &[0.0]);
    let grid = (n as u32).div_ceil(block);
    use ParamValue::*;
    run(
        &ptx,
        kernel,
        grid,
        block,
        &mut b,
        &[Ptr(xa), Ptr(out), I32(n as i32)],
    );
    let want: f32 = x.iter().sum();
    let got = down(&mut b, out, 1)[0];
    assert!((got - want).abs() < 1e-3, "{kernel}: {got} != {want}");
}

#[test]
fn cooperative_groups_reduce() {
    sum_kernel("cooperative_groups.cu", "cg_sum", 256);
}

#[test]
fn cub_block_reduce() {
    sum_kernel("cub.cu", "cub_sum", 128);
}

#[test]
fn half_precision() {
    let Some(ptx) = ptx_of("fp16.cu") else { return };
    let mut b = EmuBackend::new();
    let n = 300;
    let x = input(n);
    let y: Vec<f32> = x.iter().map(|v| 1.5 - v).collect();
    let (xa, ya, oa) = (up(&mut b, &x), up(&mut b, &y), up(&mut b, &vec![0.0; n]));
    use ParamValue::*;
    run(
        &ptx,
        "fp16_axpy",
        3,
        128,
        &mut b,
        &[Ptr(xa), Ptr(ya), Ptr(oa), I32(n as i32)],
    );
    let got = down(&mut b, oa, n);
    for i in 0..n {
        // Every value here is exact in half precision (multiples of 1/16 below 16).
        let want = 0.5 * x[i] + y[i] + f32::max(2.0 * x[i], 2.0 * y[i]);
        assert!(
            (got[i] - want).abs() < 2e-2,
            "fp16_axpy[{i}]: {} != {want}",
            got[i]
        );
    }
}

#[test]
fn bfloat16() {
    let Some(ptx) = ptx_of("bf16.cu") else { return };
    let mut b = EmuBackend::new();
    let n = 300;
    let x = input(n);
    let (xa, oa) = (up(&mut b, &x), up(&mut b, &vec![0.0; n]));
    use ParamValue::*;
    run(
        &ptx,
        "bf16_scale",
        3,
        128,
        &mut b,
        &[Ptr(xa), Ptr(oa), I32(n as i32)],
    );
    let got = down(&mut b, oa, n);
    for i in 0..n {
        let want = 2.0 * x[i] + 1.0;
        assert!(
            (got[i] - want).abs() <= want.abs() / 64.0,
            "bf16_scale[{i}]: {} != {want}",
            got[i]
        );
    }
}

#[test]
fn libcudacxx_std() {
    let Some(ptx) = ptx_of("cuda_std.cu") else {
        return;
    };
    let mut b = EmuBackend::new();
    let n = 200;
    let x = input(n);
    let (xa, oa) = (up(&mut b, &x), up(&mut b, &vec![0.0; n]));
    let count = b.alloc(4).unwrap();
    b.write(count, &[0; 4]).unwrap();
    use ParamValue::*;
    run(
        &ptx,
        "std_max",
        2,
        128,
        &mut b,
        &[Ptr(xa), Ptr(oa), Ptr(count), I32(n as i32)],
    );
    let got = down(&mut b, oa, n);
    for i in 0..n {
        let want = x[i..(i + 4).min(n)]
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(got[i], want, "std_max[{i}]");
    }
    let c = b.read(count, 4).unwrap();
    assert_eq!(i32::from_le_bytes(c.try_into().unwrap()), n as i32);
}
