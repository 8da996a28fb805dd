//! Tests of `translate` (in a file of their own to keep the module short).
use super::*;

fn contract(yaml: &str) -> Contract {
    serde_yaml::from_str(yaml).unwrap()
}

const VADD: &str = "params:
  - {name: a, type: \"f32*\", dir: in, len: n}
  - {name: b, type: \"f32*\", dir: in, len: n}
  - {name: c, type: \"f32*\", dir: out, len: n}
  - {name: n, type: i32, value: n}
launch: {block: [256], grid: [\"ceil_div(n, 256)\"]}
";

fn def(kind: &str, ins: &str, outs: &str) -> Definition {
    Definition {
        kind: kind.into(),
        file: Some("k.py".into()),
        line: Some(3),
        in_params: Some(ins.into()),
        out_params: Some(outs.into()),
        operation: Some("z = x + y".into()),
        operation_at: Some(super::super::At {
            file: Some("k.py".into()),
            line: Some(4),
            exact: true,
            col: None,
        }),
        ..Default::default()
    }
}

#[test]
fn elementwise_binds_in_order_and_sizes_by_len() {
    let c = contract(VADD);
    let code = elementwise(&def("elementwise", "T x, T y", "T z"), "vector_add", &c).unwrap();
    assert!(code.contains("typedef float T;"), "{code}");
    assert!(code.contains("extern \"C\" __global__ void vector_add(float* __restrict__ _cg_p0, float* __restrict__ _cg_p1, float* __restrict__ _cg_p2, int _cg_p3)"), "{code}");
    assert!(code.contains("_ind._n = (((long long)_cg_p3));"), "{code}");
    assert!(
        code.contains("const T &x = _cg_p0[i];") || code.contains("const float &x = _cg_p0[i];"),
        "{code}"
    );
    assert!(code.contains("float &z = _cg_p2[i];"), "{code}");
    assert!(code.contains("#line 4 \"k.py\"\nz = x + y\n"), "{code}");
    // Where the driver knows the string's column, the operation starts in it: NVRTC's columns
    // are then the `.py` line's (issue 32).
    let mut at_col = def("elementwise", "T x, T y", "T z");
    at_col.operation_at.as_mut().unwrap().col = Some(6);
    let code = elementwise(&at_col, "vector_add", &c).unwrap();
    assert!(
        code.contains("#line 4 \"k.py\"\n     z = x + y\n"),
        "{code}"
    );
    // Explicit dtypes: an output of another type than the assignment's is refused.
    let e = elementwise(
        &def("elementwise", "float32 x, float32 y", "float64 z"),
        "vector_add",
        &c,
    )
    .unwrap_err();
    assert!(
        e.message.contains("output `float64 z` is double"),
        "{}",
        e.message
    );
    // Names bind first, whatever the order.
    let code = elementwise(
        &def("elementwise", "float32 b, float32 a", "float32 c"),
        "k",
        &c,
    )
    .unwrap();
    assert!(code.contains("const float &b = _cg_p1[i];"), "{code}");
}

#[test]
fn raw_params_and_broadcast_rows() {
    let c = contract(
        "params:
  - {name: x, type: \"f32*\", dir: in, len: \"rows * cols\", shape: [rows, cols]}
  - {name: bias, type: \"f32*\", dir: in, len: cols}
  - {name: y, type: \"f32*\", dir: out, len: \"rows * cols\", shape: [rows, cols]}
  - {name: rows, type: i32, value: rows}
  - {name: cols, type: i32, value: cols}
launch: {block: [256], grid: [\"ceil_div(rows * cols, 256)\"]}
",
    );
    let mut d = def(
        "elementwise",
        "float32 x, raw float32 bias, int32 cols",
        "float32 y",
    );
    d.operation = Some("y = x + bias[i % cols]".into());
    let code = elementwise(&d, "bias_add", &c).unwrap();
    assert!(
        code.contains("_cg_raw<float> bias = {_cg_p1, (((long long)_cg_p4))};"),
        "{code}"
    );
    assert!(code.contains("const int cols = (int)_cg_p4;"), "{code}");
    let d = def("elementwise", "float32 x, float32 bias", "float32 y");
    let code = elementwise(&d, "bias_add", &c).unwrap();
    assert!(
        code.contains("const float &bias = _cg_p1[i % (((long long)_cg_p4))];"),
        "{code}"
    );
}

#[test]
fn reductions_need_one_output_value() {
    let c = contract(
        "params:
  - {name: in, type: \"f32*\", dir: in, len: n}
  - {name: out, type: \"f32*\", dir: out, len: 1, init: 0}
  - {name: n, type: i32, value: n}
launch: {block: [256], grid: [\"ceil_div(n, 256)\"]}
",
    );
    let mut d = def("reduction", "T x", "T y");
    d.map_expr = Some("x".into());
    d.reduce_expr = Some("a + b".into());
    d.post_map_expr = Some("y = a".into());
    d.identity = Some("0".into());
    let code = reduction(&d, "reduce_naive", &c).unwrap();
    assert!(code.contains("typedef float _type_reduce;"), "{code}");
    assert!(code.contains("float &y = _cg_p1[0];"), "{code}");
    assert!(code.contains("#define REDUCE(a, b) (a + b)"), "{code}");
    let e = reduction(&d, "vector_add", &contract(VADD)).unwrap_err();
    assert!(e.message.contains("one value per output"), "{}", e.message);
}

#[test]
fn translations_compile_with_nvrtc_for_4_and_8_byte_types() {
    if !crate::backend::cuda::nvrtc_present() {
        eprintln!("skipped: no NVRTC");
        return;
    }
    for t in ["f32", "f64", "i64"] {
        let c = contract(&format!(
            "params:
  - {{name: in, type: \"{t}*\", dir: in, len: n}}
  - {{name: out, type: \"{t}*\", dir: out, len: 1}}
  - {{name: n, type: i32, value: n}}
launch: {{block: [256], grid: [\"ceil_div(n, 256)\"]}}
"
        ));
        let mut d = def("reduction", "T x", "T y");
        d.map_expr = Some("x * x".into());
        d.reduce_expr = Some("max(a, b)".into());
        d.post_map_expr = Some("y = a".into());
        d.identity = None;
        let code = reduction(&d, "k", &c).unwrap();
        let src = crate::compile::SourceFile {
            name: "k.py (k)".into(),
            text: code.clone(),
        };
        let out = crate::compile::compile(&src, &[], &crate::compile::options("sm_90", &[]));
        assert!(out.ok, "{t}: {}\n{code}", out.log);
        assert_eq!(crate::compile::ptx_entries(&out.ptx), vec!["k"]);
    }
    let mut d = def("elementwise", "T x, T y", "T z");
    d.preamble = Some("__device__ float twice(float v) { return 2 * v; }".into());
    d.loop_prep = Some("float s = 1".into());
    d.operation = Some("z = twice(x) + y * s".into());
    let code = elementwise(&d, "vector_add", &contract(VADD)).unwrap();
    let src = crate::compile::SourceFile {
        name: "k.py (vector_add)".into(),
        text: code.clone(),
    };
    let out = crate::compile::compile(&src, &[], &crate::compile::options("sm_90", &[]));
    assert!(out.ok, "{}\n{code}", out.log);
}
