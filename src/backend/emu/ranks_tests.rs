//! Rank sets on the emulator: peer memory, interleaving, the deadline, memcheck across ranks
//! and the cross-device race check, on kernels compiled with NVRTC (without it the tests say
//! so and pass vacuously; CI has NVRTC).

use super::EmuRanks;
use crate::backend::ranks::RankSet;
use crate::backend::{BackendError, Diagnostic, LaunchDims, LaunchReport, ParamValue as P};
use crate::compile::{SourceFile, compile, options};
use std::time::{Duration, Instant};

fn ptx(src: &str) -> Option<String> {
    if !crate::backend::cuda::nvrtc_present() {
        eprintln!("skipped: libnvrtc.so.13 not found (ci/with-nvrtc provides it)");
        return None;
    }
    let main = SourceFile {
        name: "k.cu".into(),
        text: src.into(),
    };
    let c = compile(&main, &[], &options("sm_90", &[]));
    assert!(c.ok, "{}", c.log);
    Some(c.ptx)
}

fn dims(grid: u32, block: u32) -> LaunchDims {
    LaunchDims {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn races(reports: &[LaunchReport]) -> Vec<&Diagnostic> {
    reports
        .iter()
        .flat_map(|r| &r.diagnostics)
        .filter(|d| d.tool == "racecheck")
        .collect()
}

const NAIVE: &str = r#"
extern "C" __global__ void allreduce(float* out, const float* const* ins, int nranks, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int r = 0; r < nranks; r++) s += ins[r][i];
        out[i] = s;
    }
}
"#;

/// The naive all-reduce on `n` ranks: every rank's output is the sum of every rank's input.
fn naive(ranks: usize) {
    let Some(ptx) = ptx(NAIVE) else { return };
    let mut set = EmuRanks::new(ranks).expect("ranks");
    set.load_module(&ptx).expect("load");
    let n = 1000usize;
    let mut ins = Vec::new();
    let mut outs = Vec::new();
    for r in 0..ranks {
        let a = set.alloc(r, n * 4).expect("alloc");
        let v: Vec<f32> = (0..n).map(|i| (i * (r + 1)) as f32).collect();
        set.write(r, a, &bytes(&v)).expect("write");
        ins.push(a);
        outs.push(set.alloc(r, n * 4).expect("alloc"));
    }
    let mut params = Vec::new();
    for (r, &out) in outs.iter().enumerate() {
        let table = set.alloc(r, ranks * 8).expect("alloc");
        let t: Vec<u8> = ins.iter().flat_map(|a| a.to_le_bytes()).collect();
        set.write(r, table, &t).expect("write");
        params.push(vec![
            P::Ptr(out),
            P::Ptr(table),
            P::I32(ranks as i32),
            P::I32(n as i32),
        ]);
    }
    let reports = set
        .launch_all("allreduce", dims(4, 256), &params, soon())
        .expect("launch");
    assert_eq!(reports.len(), ranks);
    let total: usize = (1..=ranks).sum();
    for (r, &out) in outs.iter().enumerate() {
        let got = f32s(&set.read(r, out, n * 4).expect("read"));
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, (i * total) as f32, "rank {r} element {i}");
        }
        assert!(reports[r].diagnostics.is_empty(), "{:?}", reports[r]);
    }
}

#[test]
fn naive_allreduce_on_2_4_and_8_ranks() {
    naive(2);
    naive(4);
    naive(8);
}

/// Each rank writes its data, sets its flag and (with `WAIT`) waits for its peer's before
/// reading the peer's data; `FENCE` is what stands between the data and the flag.
fn handoff(fence: &str, wait: bool) -> String {
    format!(
        r#"
#define FENCE {fence}
#define WAIT {}
extern "C" __global__ void handoff(float* mine, int* my_flag, const float* peer,
                                   const int* peer_flag, float* out, int n, float v) {{
    for (int i = threadIdx.x; i < n; i += blockDim.x) mine[i] = v + i;
    __syncthreads();
    if (threadIdx.x == 0) {{
        FENCE;
        *(volatile int*)my_flag = 1;
        if (WAIT) while (*(volatile const int*)peer_flag == 0) {{ }}
    }}
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = peer[i];
}}
"#,
        u8::from(wait)
    )
}

type Ran = (Result<Vec<LaunchReport>, BackendError>, EmuRanks, Vec<u64>);

/// Run `src`'s hand-off on two ranks: (reports, the set, each rank's output buffer).
fn run_handoff(src: &str, deadline: Instant) -> Ran {
    let ptx = ptx(src).expect("checked by the caller");
    let mut set = EmuRanks::new(2).expect("ranks");
    set.load_module(&ptx).expect("load");
    let n = 300usize;
    let mut mine = Vec::new();
    let mut flags = Vec::new();
    let mut outs = Vec::new();
    for r in 0..2 {
        mine.push(set.alloc(r, n * 4).expect("alloc"));
        flags.push(set.alloc(r, 4).expect("alloc"));
        outs.push(set.alloc(r, n * 4).expect("alloc"));
    }
    let params: Vec<Vec<P>> = (0..2)
        .map(|r| {
            vec![
                P::Ptr(mine[r]),
                P::Ptr(flags[r]),
                P::Ptr(mine[1 - r]),
                P::Ptr(flags[1 - r]),
                P::Ptr(outs[r]),
                P::I32(n as i32),
                P::F32(1000.0 * (r + 1) as f32),
            ]
        })
        .collect();
    let res = set.launch_all("handoff", dims(1, 128), &params, deadline);
    (res, set, outs)
}

#[test]
fn a_fenced_flag_handoff_is_right_and_clean() {
    if ptx(NAIVE).is_none() {
        return;
    }
    let (res, mut set, outs) = run_handoff(&handoff("__threadfence_system()", true), soon());
    let reports = res.expect("launch");
    assert!(races(&reports).is_empty(), "{reports:#?}");
    assert!(
        reports.iter().all(|r| r.diagnostics.is_empty()),
        "{reports:#?}"
    );
    // rank 0's output is rank 1's data, and the other way round.
    for (r, &out) in outs.iter().enumerate() {
        let got = f32s(&set.read(r, out, 300 * 4).expect("read"));
        let v = 1000.0 * (2 - r) as f32;
        assert_eq!(got[0], v);
        assert_eq!(got[299], v + 299.0);
    }
}

#[test]
fn a_flag_without_a_fence_is_a_missing_fence() {
    if ptx(NAIVE).is_none() {
        return;
    }
    let (res, _, _) = run_handoff(&handoff("", true), soon());
    let reports = res.expect("launch");
    let r = races(&reports);
    assert!(!r.is_empty(), "{reports:#?}");
    assert!(
        r.iter().any(|d| d.message.contains("missing fence")
            && d.message.contains("__threadfence_system()")
            && d.message.contains("rank 1 block 0")
            && d.message.contains("rank 0 block 0")
            && d.message.contains("allocation at 0x")),
        "{r:#?}"
    );
}

#[test]
fn a_gpu_scope_fence_is_not_enough_for_a_peer() {
    if ptx(NAIVE).is_none() {
        return;
    }
    let (res, _, _) = run_handoff(&handoff("__threadfence()", true), soon());
    let reports = res.expect("launch");
    let r = races(&reports);
    assert!(
        r.iter().any(|d| d.message.contains("__threadfence() only")
            && d.message.contains("__threadfence_system()")
            && d.message.contains("system scope")),
        "{r:#?}"
    );
}

#[test]
fn a_reader_that_does_not_wait_is_a_race() {
    if ptx(NAIVE).is_none() {
        return;
    }
    let (res, _, _) = run_handoff(&handoff("__threadfence_system()", false), soon());
    let reports = res.expect("launch");
    let r = races(&reports);
    assert!(!r.is_empty(), "{reports:#?}");
    assert!(r.iter().all(|d| d.message.contains("cross-device race")));
}

#[test]
fn a_flag_never_set_stops_every_rank_at_the_deadline() {
    let src = r#"
extern "C" __global__ void wait_forever(const int* peer_flag, int* out) {
    while (*(volatile const int*)peer_flag == 0) { }
    out[threadIdx.x] = 1;
}
"#;
    let Some(ptx) = ptx(src) else { return };
    let mut set = EmuRanks::new(2).expect("ranks");
    set.load_module(&ptx).expect("load");
    let flags: Vec<u64> = (0..2).map(|r| set.alloc(r, 4).expect("alloc")).collect();
    let outs: Vec<u64> = (0..2).map(|r| set.alloc(r, 256).expect("alloc")).collect();
    let params: Vec<Vec<P>> = (0..2)
        .map(|r| vec![P::Ptr(flags[1 - r]), P::Ptr(outs[r])])
        .collect();
    let start = Instant::now();
    let deadline = start + Duration::from_millis(300);
    let err = set
        .launch_all("wait_forever", dims(2, 64), &params, deadline)
        .expect_err("never ends");
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(&err, BackendError::Fault(m) if m.contains("deadline exceeded")),
        "{err:?}"
    );
    let failed = set.failed_launch_report();
    assert_eq!(failed.len(), 2);
    for (r, f) in failed.iter().enumerate() {
        let h = &f.diagnostics;
        assert_eq!(h.len(), 1, "rank {r}: {f:?}");
        assert_eq!(h[0].tool, crate::backend::HUNG);
        assert!(h[0].line.is_some() || !h[0].instruction.is_empty(), "{h:?}");
    }
}

#[test]
fn a_write_past_a_peers_buffer_is_memcheck() {
    let src = r#"
extern "C" __global__ void overrun(float* peer, int n) {
    peer[n + threadIdx.x] = 1.0f;
}
"#;
    let Some(ptx) = ptx(src) else { return };
    let mut set = EmuRanks::new(2).expect("ranks");
    set.load_module(&ptx).expect("load");
    let bufs: Vec<u64> = (0..2)
        .map(|r| set.alloc(r, 64 * 4).expect("alloc"))
        .collect();
    let params: Vec<Vec<P>> = (0..2)
        .map(|r| vec![P::Ptr(bufs[1 - r]), P::I32(64)])
        .collect();
    let reports = set
        .launch_all("overrun", dims(1, 32), &params, soon())
        .expect("launch");
    let d = &reports[0].diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].tool, "memcheck");
    assert!(
        d[0].message
            .contains("past the end of rank 1's 256-byte allocation"),
        "{}",
        d[0].message
    );
    assert!(reports[1].diagnostics[0].message.contains("rank 0's"));
}

#[test]
fn two_runs_give_identical_reports() {
    if ptx(NAIVE).is_none() {
        return;
    }
    let strip = |v: Vec<LaunchReport>| -> Vec<String> {
        v.into_iter()
            .map(|r| format!("{:?} {:?}", r.diagnostics, r.metrics))
            .collect()
    };
    let src = handoff("", true);
    let a = strip(run_handoff(&src, soon()).0.expect("launch"));
    let b = strip(run_handoff(&src, soon()).0.expect("launch"));
    assert_eq!(a, b);
    let src = handoff("__threadfence_system()", false);
    let a = strip(run_handoff(&src, soon()).0.expect("launch"));
    let b = strip(run_handoff(&src, soon()).0.expect("launch"));
    assert_eq!(a, b);
}

#[test]
fn ranks_are_bounded() {
    assert!(EmuRanks::new(0).is_err());
    assert!(EmuRanks::new(9).is_err());
    let mut set = EmuRanks::new(2).expect("ranks");
    assert!(set.alloc(2, 4).is_err());
    assert!(set.alloc(0, 9 << 30).is_err());
    let a = set.alloc(1, 16).expect("alloc");
    assert_eq!(a, 0x2_0000_0000 + super::RANK_WINDOW);
    // Every rank reads every rank's allocation; free_all frees all.
    set.write(0, a, &[1, 2, 3, 4]).expect("write");
    assert_eq!(set.read(1, a, 4).expect("read"), vec![1, 2, 3, 4]);
    set.free_all().expect("free");
    assert!(set.read(1, a, 4).is_err());
}
