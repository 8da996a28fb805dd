//! Narrow element types, a case's own generators and index-aware tolerances, as `load`
//! checks them (issue 33).

use super::*;

const HIST: &str = "\
assignment: hist
reference: ref.cu
contracts:
  hist:
    params:
      - { name: data, type: u8*, len: n, gen: { int: [0, 256] } }
      - { name: bins, type: u32*, dir: out, len: 256, init: 0 }
      - { name: n, type: i32, value: n }
    launch: { block: [256], grid: [8] }
cases:
  correctness:
    - { name: small, vars: { n: 1000 } }
    - { name: contended, vars: { n: 1000 }, gen: { data: { constant: 7 } } }
milestones:
  - { id: hist, kernel: hist, contract: hist, correctness: { points: 10 } }
";

fn load_text(text: &str) -> Result<LoadedRubric, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ref.cu"),
        "extern \"C\" __global__ void hist(const unsigned char* data, unsigned* bins, int n) {}\n",
    )
    .unwrap();
    let p = dir.path().join("r.yaml");
    std::fs::write(&p, text).unwrap();
    load(&p).map_err(|e| e.to_string().replace(&format!("{}", p.display()), "r.yaml"))
}

#[test]
fn a_u8_buffer_draws_every_byte_and_its_case_can_draw_otherwise() {
    let r = load_text(HIST).unwrap();
    let c = r.contract("hist");
    let [small, contended] = [0, 1].map(|i| &r.rubric.cases.correctness[i]);
    let inv = crate::rubric::args::resolve(&small.contract(c), &case_vars(small))
        .and_then(|a| crate::inputs::generate(&a, 3))
        .unwrap();
    let data = &inv.buffers[0];
    assert_eq!((data.elem, data.data.len()), (ScalarType::U8, 1000));
    // [0, 256) reaches 255 (and 0).
    assert!(data.data.contains(&255) && data.data.contains(&0));
    let inv = crate::rubric::args::resolve(&contended.contract(c), &case_vars(contended))
        .and_then(|a| crate::inputs::generate(&a, 3))
        .unwrap();
    assert!(inv.buffers[0].data.iter().all(|&b| b == 7));
    // The contract itself is unchanged.
    assert!(matches!(c.params[0].generator, Some(Gen::Int(_))));
}

#[test]
fn an_int_range_may_end_one_past_the_types_top_value_and_no_further() {
    load_text(
        &HIST
            .replace("u8*", "u32*")
            .replace("[0, 256]", "[0, 4294967296]"),
    )
    .unwrap();
    let e = load_text(&HIST.replace("[0, 256]", "[0, 257]")).unwrap_err();
    assert!(
        e.contains("257 is outside what a `u8` element holds (0 to 255)"),
        "{e}"
    );
    assert!(e.contains("r.yaml:6:"), "{e}");
    // A uniform (real) range gets no such allowance.
    let e = load_text(&HIST.replace("{ int: [0, 256] }", "{ uniform: [0, 256] }")).unwrap_err();
    assert!(e.contains("256 is outside"), "{e}");
}

#[test]
fn a_cases_generator_names_an_input_and_fits_its_type() {
    let e = load_text(&HIST.replace("gen: { data:", "gen: { dta:")).unwrap_err();
    assert!(
        e.contains("no contract has a parameter `dta`; a case's `gen` replaces the generator of one of: data"),
        "{e}"
    );
    assert!(e.contains("r.yaml:13:"), "{e}");
    let e = load_text(&HIST.replace("gen: { data:", "gen: { bins:")).unwrap_err();
    assert!(e.contains("`bins` is not an input buffer"), "{e}");
    let e = load_text(&HIST.replace("{ constant: 7 }", "{ constant: 300 }")).unwrap_err();
    assert!(
        e.contains("300 is outside what a `u8` element holds"),
        "{e}"
    );
    let e = load_text(&HIST.replace("{ constant: 7 }", "{ constant: levels }")).unwrap_err();
    assert!(e.contains("levels"), "{e}");
}

#[test]
fn a_tolerance_may_read_the_elements_index_and_a_case_may_not_redefine_it() {
    let scan = HIST
        .replace(
            "init: 0 }",
            "init: 0, tolerance: { abs: \"(i + 1) * u\" } }",
        )
        .replace("type: u32*", "type: f32*");
    let r = load_text(&scan).unwrap();
    let t = r.contract("hist").params[1].tolerance.as_ref().unwrap();
    assert!(t.reads_index());
    let e =
        load_text(&scan.replace("vars: { n: 1000 } }", "vars: { n: 1000, i: 3 } }")).unwrap_err();
    assert!(e.contains("`i` is the element's index"), "{e}");
    // Without a tolerance that reads it, `i` is a case variable like any other.
    load_text(&HIST.replace("vars: { n: 1000 } }", "vars: { n: 1000, i: 3 } }")).unwrap();
}
