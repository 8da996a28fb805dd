//! Emulator throughput: lane-instructions per second on the reference reduction and matmul
//! kernels, parallel blocks (rayon) against one block at a time, measured side by side.
//!
//! Run: `cargo run --release --example emu_bench [-- --quick]`. Uses the committed PTX
//! snapshots, so NVRTC is not needed.

use cugrade::backend::emu::EmuBackend;
use cugrade::backend::{Backend, LaunchDims, ParamValue};
use std::time::{Duration, Instant};

struct Bench {
    name: &'static str,
    ptx: &'static str,
    kernel: &'static str,
    setup: fn(&mut EmuBackend, usize) -> (LaunchDims, Vec<ParamValue>),
}

fn upload(b: &mut EmuBackend, n: usize, f: impl Fn(usize) -> f32) -> u64 {
    let a = b.alloc(n * 4).unwrap();
    let bytes: Vec<u8> = (0..n).flat_map(|i| f(i).to_le_bytes()).collect();
    b.write(a, &bytes).unwrap();
    a
}

fn reduce_setup(b: &mut EmuBackend, scale: usize) -> (LaunchDims, Vec<ParamValue>) {
    let n = 1 << (20 + scale);
    let din = upload(b, n, |i| (i % 7) as f32 * 0.25);
    let dout = upload(b, 1, |_| 0.0);
    (
        LaunchDims {
            grid: [(n / 256) as u32, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        },
        vec![
            ParamValue::Ptr(din),
            ParamValue::Ptr(dout),
            ParamValue::I32(n as i32),
        ],
    )
}

fn matmul_setup(b: &mut EmuBackend, scale: usize) -> (LaunchDims, Vec<ParamValue>) {
    let n = 256 << scale;
    let a = upload(b, n * n, |i| (i % 13) as f32 * 0.1);
    let bb = upload(b, n * n, |i| (i % 5) as f32 * 0.2);
    let c = upload(b, n * n, |_| 0.0);
    let t = (n / 16) as u32;
    (
        LaunchDims {
            grid: [t, t, 1],
            block: [16, 16, 1],
            shared_bytes: 0,
        },
        vec![
            ParamValue::Ptr(a),
            ParamValue::Ptr(bb),
            ParamValue::Ptr(c),
            ParamValue::I32(n as i32),
            ParamValue::I32(n as i32),
            ParamValue::I32(n as i32),
        ],
    )
}

const BENCHES: &[Bench] = &[
    Bench {
        name: "reduce_shared (2^21 floats)",
        ptx: include_str!("../tests/emu-corpus/reduce_shared.ptx"),
        kernel: "reduce_shared",
        setup: reduce_setup,
    },
    Bench {
        name: "reduce_shuffle (2^21 floats)",
        ptx: include_str!("../tests/emu-corpus/reduce_shuffle.ptx"),
        kernel: "reduce_shuffle",
        setup: reduce_setup,
    },
    Bench {
        name: "matmul_tiled (512^3)",
        ptx: include_str!("../tests/emu-corpus/matmul_tiled.ptx"),
        kernel: "matmul_tiled",
        setup: matmul_setup,
    },
];

/// Best of `reps` launches: (seconds, lane-instructions).
fn measure(
    b: &mut EmuBackend,
    bench: &Bench,
    dims: LaunchDims,
    params: &[ParamValue],
    reps: usize,
) -> (f64, u64) {
    let mut best = f64::INFINITY;
    let mut lanes = 0;
    for _ in 0..reps {
        let t0 = Instant::now();
        let r = b
            .launch(
                bench.kernel,
                dims,
                params,
                Instant::now() + Duration::from_secs(600),
            )
            .expect("launch");
        best = best.min(t0.elapsed().as_secs_f64());
        lanes = r.metrics.map(|m| m.lane_instructions).unwrap_or(0);
    }
    (best, lanes)
}

fn main() {
    // `emu_bench [--quick] [NAME]`: NAME keeps only the kernels whose name contains it.
    let quick = std::env::args().any(|a| a == "--quick");
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let scale = if quick { 0 } else { 1 };
    let reps = if quick { 1 } else { 3 };
    let threads = rayon::current_num_threads();
    println!("emulator benchmark ({threads} rayon threads; best of {reps})");
    println!(
        "{:<30} {:>14} {:>14} {:>14} {:>8}",
        "kernel", "lane-insts", "serial Ml/s", "parallel Ml/s", "ratio"
    );
    for bench in BENCHES {
        if only
            .as_ref()
            .is_some_and(|o| !bench.name.contains(o.as_str()))
        {
            continue;
        }
        let mut emu = EmuBackend::new();
        emu.load_module(bench.ptx).expect("load");
        let (dims, params) = (bench.setup)(&mut emu, scale);
        emu.parallel = false;
        let (ts, lanes) = measure(&mut emu, bench, dims, &params, reps);
        emu.parallel = true;
        let (tp, _) = measure(&mut emu, bench, dims, &params, reps);
        let ms = lanes as f64 / ts / 1e6;
        let mp = lanes as f64 / tp / 1e6;
        println!(
            "{:<30} {:>14} {:>14.1} {:>14.1} {:>7.2}x",
            bench.name,
            lanes,
            ms,
            mp,
            ts / tp
        );
    }
    println!(
        "serial = one block at a time on one core (the baseline); parallel = blocks on rayon."
    );
    println!("kernels with global atomics always run serially, so their ratio is ~1.");
}
