//! The measurement stage without a GPU: cugrade's own timing kernels (input generation and
//! on-device comparison) run on the PTX emulator and are checked against the host's rules;
//! `cugrade calibrate` pins CPU baselines; the rubric's timing keys are checked. The timed
//! section itself runs on a GPU: tests/it/gpu.rs and ci/gpu-measure.sh.

use crate::support::{BIN, nvrtc as nvrtc_present};
use cugrade::backend::emu::EmuBackend;
use cugrade::backend::{Backend, LaunchDims, ParamValue};
use cugrade::compare::Resolved;
use cugrade::rubric::schema::ScalarType;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn harness() -> EmuBackend {
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90"),
        name: Some("cugrade-harness.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(cugrade::measure::session::HARNESS_SOURCE, opts)
        .expect("the harness compiles")
        .to_src();
    let mut emu = EmuBackend::new();
    emu.load_module(&ptx)
        .expect("the emulator runs the harness");
    emu
}

fn grid(n: usize) -> LaunchDims {
    LaunchDims {
        grid: [(n.div_ceil(256)).clamp(1, 64) as u32, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
    }
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn f64s(emu: &mut EmuBackend, v: &[f64]) -> u64 {
    let a = emu.alloc(8 * v.len().max(1)).unwrap();
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    emu.write(a, &bytes).unwrap();
    a
}

#[allow(clippy::too_many_arguments)]
fn generate(
    emu: &mut EmuBackend,
    n: usize,
    elem: ScalarType,
    seed: u64,
    kind: i32,
    a: f64,
    b: f64,
    values: &[f64],
    specials: (&[f64], f64),
) -> Vec<f64> {
    let out = emu.alloc(n * elem.size()).unwrap();
    let (vals, sp) = (f64s(emu, values), f64s(emu, specials.0));
    let code = cugrade::measure::session::elem_code(elem) as i32;
    let params = [
        ParamValue::Ptr(out),
        ParamValue::U64(n as u64),
        ParamValue::I32(code),
        ParamValue::U64(seed),
        ParamValue::I32(kind),
        ParamValue::F64(a),
        ParamValue::F64(b),
        ParamValue::Ptr(vals),
        ParamValue::I32(values.len() as i32),
        ParamValue::F64(specials.1),
        ParamValue::Ptr(sp),
        ParamValue::I32(specials.0.len() as i32),
    ];
    emu.launch("cugrade_generate", grid(n), &params, deadline())
        .expect("generate runs");
    let bytes = emu.read(out, n * elem.size()).unwrap();
    cugrade::inputs::decode(&bytes, elem)
}

#[test]
fn generated_inputs_follow_the_rubric_distributions_and_change_with_the_seed() {
    if !nvrtc_present() {
        return;
    }
    let mut emu = harness();
    let n = 4096;
    let ints = generate(
        &mut emu,
        n,
        ScalarType::F32,
        7,
        2,
        -8.0,
        9.0,
        &[],
        (&[], 0.0),
    );
    assert!(
        ints.iter()
            .all(|&x| x.fract() == 0.0 && (-8.0..9.0).contains(&x))
    );
    assert!(
        ints.contains(&-8.0) && ints.contains(&8.0),
        "the whole range is drawn"
    );
    let again = generate(
        &mut emu,
        n,
        ScalarType::F32,
        7,
        2,
        -8.0,
        9.0,
        &[],
        (&[], 0.0),
    );
    let other = generate(
        &mut emu,
        n,
        ScalarType::F32,
        8,
        2,
        -8.0,
        9.0,
        &[],
        (&[], 0.0),
    );
    assert_eq!(ints, again, "same seed, same inputs");
    let same = ints.iter().zip(&other).filter(|(a, b)| a == b).count();
    assert!(
        same < n / 8,
        "another seed draws other inputs ({same} equal)"
    );
    let uni = generate(
        &mut emu,
        n,
        ScalarType::F64,
        3,
        0,
        -1.0,
        1.0,
        &[],
        (&[], 0.0),
    );
    let mean = uni.iter().sum::<f64>() / n as f64;
    assert!(uni.iter().all(|x| (-1.0..1.0).contains(x)) && mean.abs() < 0.05);
    let normal = generate(
        &mut emu,
        n,
        ScalarType::F32,
        3,
        1,
        2.0,
        0.5,
        &[],
        (&[], 0.0),
    );
    let m = normal.iter().sum::<f64>() / n as f64;
    let sd = (normal.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt();
    assert!(
        (m - 2.0).abs() < 0.05 && (sd - 0.5).abs() < 0.05,
        "mean {m} sd {sd}"
    );
    let ids = generate(
        &mut emu,
        n,
        ScalarType::I32,
        5,
        2,
        0.0,
        7.0,
        &[],
        (&[], 0.0),
    );
    assert!(ids.iter().all(|&i| (0.0..7.0).contains(&i)) && ids.contains(&6.0));
    let cycled = generate(
        &mut emu,
        5,
        ScalarType::F32,
        5,
        4,
        0.0,
        0.0,
        &[1.5, -2.0],
        (&[], 0.0),
    );
    assert_eq!(cycled, vec![1.5, -2.0, 1.5, -2.0, 1.5]);
    let constant = generate(
        &mut emu,
        3,
        ScalarType::U64,
        5,
        3,
        42.0,
        0.0,
        &[],
        (&[], 0.0),
    );
    assert_eq!(constant, vec![42.0; 3]);
    let special = generate(
        &mut emu,
        n,
        ScalarType::F32,
        9,
        0,
        0.0,
        1.0,
        &[],
        (&[f64::INFINITY, f64::NAN], 0.1),
    );
    let odd = special.iter().filter(|x| !x.is_finite()).count();
    assert!(
        (n / 20..n / 6).contains(&odd),
        "about 10 % specials, got {odd}"
    );
}

fn compare(
    emu: &mut EmuBackend,
    got: &[f64],
    exp: &[f64],
    elem: ScalarType,
    tol: Resolved,
) -> (u64, u64) {
    let r = compare_full(emu, got, exp, None, None, elem, tol);
    (r[0], r[1])
}

/// `cugrade_compare` with each element's sums of absolute terms `sabs` and squared terms
/// `sq`, and the output's initial contents `initial`: the result words (mismatches, first,
/// guard, outside the coarse band, unwritten).
#[allow(clippy::too_many_arguments)]
fn compare_full(
    emu: &mut EmuBackend,
    got: &[f64],
    exp: &[f64],
    terms: Option<(&[f64], &[f64])>,
    initial: Option<&[f64]>,
    elem: ScalarType,
    tol: Resolved,
) -> [u64; 5] {
    let bytes = |v: &[f64]| cugrade::inputs::encode(v, elem);
    let mut put = |v: &[f64]| {
        let a = emu.alloc(v.len().max(1) * elem.size()).unwrap();
        emu.write(a, &bytes(v)).unwrap();
        a
    };
    let (g, e) = (put(got), put(exp));
    let (sabs, sq) = match terms {
        Some((s, q)) => (put(s), put(q)),
        None => (0, 0),
    };
    let init = initial.map_or(0, &mut put);
    let result = emu.alloc(48).unwrap();
    let mut words = vec![0u8; 48];
    words[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    emu.write(result, &words).unwrap();
    let c = cugrade::measure::session::ComparePlan::of(&tol);
    let params = [
        ParamValue::Ptr(g),
        ParamValue::Ptr(e),
        ParamValue::Ptr(sabs),
        ParamValue::Ptr(sq),
        ParamValue::Ptr(init),
        ParamValue::U64(got.len() as u64),
        ParamValue::I32(cugrade::measure::session::elem_code(elem) as i32),
        ParamValue::F64(c.abs),
        ParamValue::F64(c.rel),
        ParamValue::F64(c.sum),
        ParamValue::I64(c.ulp),
        ParamValue::I32(i32::from(c.exact)),
        ParamValue::F64(c.coarse_abs),
        ParamValue::F64(c.coarse_rel),
        ParamValue::F64(c.coarse_sum),
        ParamValue::Ptr(result),
    ];
    emu.launch("cugrade_compare", grid(got.len()), &params, deadline())
        .expect("compare runs");
    let r = emu.read(result, 48).unwrap();
    let w = |k: usize| u64::from_le_bytes(r[8 * k..8 * k + 8].try_into().unwrap());
    [w(0), w(1), w(2), w(3), w(4)]
}

#[test]
fn the_device_applies_the_error_model_as_the_host_does() {
    if !nvrtc_present() {
        return;
    }
    let mut emu = harness();
    // A matmul-like tolerance: 4 sqrt(K) (u + eps) per unit of partial-sum scale, K = 64.
    let t: cugrade::rubric::schema::Tolerance =
        serde_yaml::from_str("{sum: \"4 * sqrt(K) * (u + eps)\"}").unwrap();
    let vars: cugrade::rubric::expr::Vars = [("K", 64.0), ("eps", 2f64.powi(-24))]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let tol = Resolved::with_precision(
        Some(&t),
        ScalarType::F32,
        &vars,
        cugrade::compare::Precision::Fp32,
    )
    .unwrap();
    assert!(tol.coarse.is_some());
    let exp = vec![10.0, -3.0, 0.5, 100.0, 7.0, 1.0, 2.0, 3.0];
    // Sums of absolute terms (S) and of squared terms (R²): element 1 has cancelling terms
    // (S large, R small), so its scale is |e| + 4R, not S.
    let s = vec![20.0, 300.0, 0.5, 100.0, 7.0, 1.0, 1e30, 3.0];
    let q = vec![50.0, 4.0, 0.25, 1e4, 49.0, 1.0, f64::INFINITY, 0.0];
    let scale = cugrade::compare::sum_scale(&exp, &s, Some(&q));
    let allowed: Vec<f64> = (0..exp.len())
        .map(|i| tol.allowance(exp[i], scale[i]))
        .collect();
    let poison = f64::from(f32::from_bits(cugrade::inputs::POISON_F32));
    let initial = vec![poison; exp.len()];
    let mut got = exp.clone();
    got[0] += 0.5 * allowed[0]; // within
    got[1] += 2.0 * allowed[1]; // imprecise: outside, within the coarse band
    got[3] += 1e6 * allowed[3]; // wrong
    got[5] = poison; // unwritten
    got[6] += 0.9 * allowed[6]; // S overflowed in float: scale from S... within
    let host: Vec<usize> = (0..exp.len())
        .filter(|&i| {
            let round = |v: f64| v as f32 as f64;
            !tol.accepts_at(round(exp[i]), round(got[i]), scale[i], ScalarType::F32)
        })
        .collect();
    let r = compare_full(
        &mut emu,
        &got,
        &exp,
        Some((&s, &q)),
        Some(&initial),
        ScalarType::F32,
        tol,
    );
    assert_eq!(
        r[0] as usize,
        host.len(),
        "host rejects {host:?}, device {r:?}"
    );
    assert_eq!(host, vec![1, 3, 5]);
    assert_eq!(r[1], 1, "first mismatch");
    assert_eq!(
        r[3], 2,
        "outside the coarse band: the wrong one and the unwritten one"
    );
    assert_eq!(r[4], 1, "unwritten: still the poison");
}

#[test]
fn the_device_comparison_agrees_with_the_host_rules() {
    if !nvrtc_present() {
        return;
    }
    let mut emu = harness();
    let exp = [1.0, 2.0, f64::NAN, f64::INFINITY, 1e6, 0.0, -3.0, 100.0];
    let cases: Vec<(Vec<f64>, ScalarType, Resolved)> = vec![
        (
            exp.to_vec(),
            ScalarType::F32,
            Resolved::default_for(ScalarType::F32),
        ),
        (
            vec![
                1.0,
                2.0001,
                1.0,
                f64::NAN,
                1e6 + 1.0,
                1e-7,
                -3.0,
                f64::NEG_INFINITY,
            ],
            ScalarType::F32,
            Resolved::default_for(ScalarType::F32),
        ),
        (
            vec![
                1.0,
                2.0,
                f64::NAN,
                f64::INFINITY,
                1e6 + 0.5,
                0.0,
                -3.0,
                100.0,
            ],
            ScalarType::F64,
            Resolved {
                ulp: Some(4),
                ..Resolved::band(0.0, 0.0)
            },
        ),
        (
            vec![1.0, 2.0, 7.0, 4.0, 1e6, 0.0, -3.0, 101.0],
            ScalarType::I32,
            Resolved::default_for(ScalarType::I32),
        ),
    ];
    for (got, elem, tol) in cases {
        let exp: Vec<f64> = if elem.is_float() {
            exp.to_vec()
        } else {
            vec![1.0, 2.0, 3.0, 4.0, 1e6, 0.0, -3.0, 100.0]
        };
        // What the host's rule says, element by element, after the round trip through `elem`.
        let round = |v: &[f64]| cugrade::inputs::decode(&cugrade::inputs::encode(v, elem), elem);
        let (g, e) = (round(&got), round(&exp));
        let wrong: Vec<usize> = (0..g.len())
            .filter(|&i| !tol.accepts(e[i], g[i], elem))
            .collect();
        let (count, first) = compare(&mut emu, &got, &exp, elem, tol);
        assert_eq!(count as usize, wrong.len(), "{elem:?} {got:?}");
        if let Some(&w) = wrong.first() {
            assert_eq!(first as usize, w);
        } else {
            assert_eq!(first, u64::MAX);
        }
    }
}

fn bin() -> PathBuf {
    PathBuf::from(BIN)
}

/// A copy of the reduction lab's rubric and reference in a scratch folder, edited by `edit`.
fn scratch_rubric(edit: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let path = crate::support::course_copy(d.path(), "reduction");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(text)).unwrap();
    (d, path)
}

#[test]
fn calibrate_pins_the_cpu_baseline_beside_the_rubric() {
    let (_d, rubric) = scratch_rubric(|t| t);
    let o = Command::new(bin())
        .arg("calibrate")
        .arg(&rubric)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let pinned = rubric.with_file_name("reduction.calibration.json");
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(&pinned).unwrap()).unwrap();
    let b = &f["baselines"]["reduction/cpu/n2p24{n=16777216}"];
    let ms = b["ms"].as_f64().unwrap();
    let runs: Vec<f64> = b["runs_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(ms > 0.0 && runs.len() >= 5, "{b}");
    assert_eq!(
        ms,
        runs.iter().copied().fold(f64::INFINITY, f64::min),
        "the minimum is pinned"
    );
    assert!(!f["cpu"].as_str().unwrap().is_empty());
    assert!(out.contains("pinned for"), "{out}");
}

#[test]
fn timing_keys_are_checked() {
    let check = |edit: &dyn Fn(String) -> String| {
        let (_d, rubric) = scratch_rubric(edit);
        let o = Command::new(bin())
            .args(["validate", "--schema-only"])
            .arg(&rubric)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _) = check(&|t| {
        t.replace(
            "vars: {n: 16777216}}",
            "vars: {n: 16777216}, budget_s: 5, cache: warm, flops: \"n\"}",
        )
    });
    assert_eq!(code, Some(0));
    let (code, err) = check(&|t| {
        t.replace(
            "{name: n1, vars: {n: 1}}",
            "{name: n1, vars: {n: 1}, budget_s: 3}",
        )
    });
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("performance cases only"), "{err}");
    let (code, err) =
        check(&|t| t.replace("vars: {n: 16777216}}", "vars: {n: 16777216}, budget_s: 0}"));
    assert_eq!(code, Some(2));
    assert!(err.contains("between 0 and 600"), "{err}");
    let (code, err) =
        check(&|t| t.replace("vars: {n: 16777216}}", "vars: {n: 16777216}, cache: hot}"));
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = check(&|t| {
        t.replace(
            "vars: {n: 16777216}}",
            "vars: {n: 16777216}, flops: \"2 * m\"}",
        )
    });
    assert_eq!(code, Some(2), "{err}");
}

/// Narrow buffers in the timed section: the device draws them within their type (every byte
/// of `int: [0, 256]`), and its comparison agrees with the host's, half types by their own
/// units in the last place and 64-bit integers by their bits.
#[test]
fn the_device_draws_and_compares_narrow_types_as_the_host_does() {
    if !nvrtc_present() {
        return;
    }
    let mut emu = harness();
    let n = 4096;
    let bytes = generate(
        &mut emu,
        n,
        ScalarType::U8,
        3,
        2,
        0.0,
        256.0,
        &[],
        (&[], 0.0),
    );
    assert!(bytes.iter().all(|&b| (0.0..=255.0).contains(&b)));
    assert!(bytes.contains(&255.0) && bytes.contains(&0.0));
    let halves = generate(
        &mut emu,
        n,
        ScalarType::F16,
        3,
        0,
        -1.0,
        1.0,
        &[],
        (&[], 0.0),
    );
    assert!(halves.iter().all(|&x| (-1.0..=1.0).contains(&x)));
    assert!(halves.iter().any(|&x| x != halves[0]));
    let shorts = generate(
        &mut emu,
        n,
        ScalarType::I16,
        3,
        2,
        -300.0,
        300.0,
        &[],
        (&[], 0.0),
    );
    assert!(shorts.iter().all(|&x| (-300.0..300.0).contains(&x)) && shorts.contains(&-300.0));
    let bf = generate(
        &mut emu,
        3,
        ScalarType::BF16,
        3,
        3,
        3.0,
        0.0,
        &[],
        (&[], 0.0),
    );
    assert_eq!(bf, [3.0; 3]);

    let exp: [f64; 6] = [1.0, 2.0, 3.0, 100.0, 0.5, -7.0];
    let cases: Vec<(Vec<f64>, ScalarType, Resolved)> = vec![
        (
            vec![1.0, 2.0, 4.0, 100.0, 0.0, 0.0],
            ScalarType::U8,
            Resolved::default_for(ScalarType::U8),
        ),
        (
            vec![1.0, 2.0, 3.0, 101.0, 0.5, -7.0],
            ScalarType::I16,
            Resolved::default_for(ScalarType::I16),
        ),
        (
            vec![1.0, 2.001, 3.5, 100.0, 0.5, -7.01],
            ScalarType::F16,
            Resolved::default_for(ScalarType::F16),
        ),
        (
            vec![1.0, 2.0, 3.0625, 100.0, 0.5, -7.0],
            ScalarType::BF16,
            Resolved {
                ulp: Some(1),
                ..Resolved::band(0.0, 0.0)
            },
        ),
    ];
    for (got, elem, tol) in cases {
        let exp: Vec<f64> = if elem == ScalarType::U8 {
            exp.iter().map(|x| x.abs().floor()).collect()
        } else {
            exp.to_vec()
        };
        let round = |v: &[f64]| cugrade::inputs::decode(&cugrade::inputs::encode(v, elem), elem);
        let (g, e) = (round(&got), round(&exp));
        let wrong: Vec<usize> = (0..g.len())
            .filter(|&i| !tol.accepts(e[i], g[i], elem))
            .collect();
        assert!(
            !wrong.is_empty(),
            "{elem:?}: the case should have wrong elements"
        );
        let (count, first) = compare(&mut emu, &got, &exp, elem, tol);
        assert_eq!(count as usize, wrong.len(), "{elem:?} {got:?}");
        assert_eq!(first as usize, wrong[0], "{elem:?}");
    }
    // 2^53 + 1 and 2^53 share a double; the device compares the bits.
    let big = [(1i64 << 53) as f64];
    let r = compare_bits(
        &mut emu,
        &((1i64 << 53) + 1).to_le_bytes(),
        &(1i64 << 53).to_le_bytes(),
    );
    assert_eq!(r, 1, "{big:?}");
    let same = ((1i64 << 53) + 1).to_le_bytes();
    assert_eq!(compare_bits(&mut emu, &same, &same), 0);
}

/// `cugrade_compare` of one `i64` element given as bytes, exact: the mismatch count.
fn compare_bits(emu: &mut EmuBackend, got: &[u8], exp: &[u8]) -> u64 {
    let put = |emu: &mut EmuBackend, b: &[u8]| {
        let a = emu.alloc(8).unwrap();
        emu.write(a, b).unwrap();
        a
    };
    let (g, e) = (put(emu, got), put(emu, exp));
    let result = emu.alloc(48).unwrap();
    let mut words = vec![0u8; 48];
    words[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    emu.write(result, &words).unwrap();
    let c = cugrade::measure::session::ComparePlan::of(&Resolved::default_for(ScalarType::I64));
    let params = [
        ParamValue::Ptr(g),
        ParamValue::Ptr(e),
        ParamValue::Ptr(0),
        ParamValue::Ptr(0),
        ParamValue::Ptr(0),
        ParamValue::U64(1),
        ParamValue::I32(cugrade::measure::session::elem_code(ScalarType::I64) as i32),
        ParamValue::F64(c.abs),
        ParamValue::F64(c.rel),
        ParamValue::F64(c.sum),
        ParamValue::I64(c.ulp),
        ParamValue::I32(i32::from(c.exact)),
        ParamValue::F64(c.coarse_abs),
        ParamValue::F64(c.coarse_rel),
        ParamValue::F64(c.coarse_sum),
        ParamValue::Ptr(result),
    ];
    emu.launch("cugrade_compare", grid(1), &params, deadline())
        .expect("compare runs");
    let r = emu.read(result, 48).unwrap();
    u64::from_le_bytes(r[..8].try_into().unwrap())
}
