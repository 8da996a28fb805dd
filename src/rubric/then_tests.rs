//! Multi-kernel milestones (`then`), as `load` checks them and the plan resolves them.

use super::*;

const SCAN3: &str = "\
assignment: scan
reference: ref.cu
contracts:
  scan3:
    params:
      - { name: x, type: f32*, len: n, gen: { uniform: [-1, 1] } }
      - { name: y, type: f32*, dir: out, len: n }
      - { name: sums, type: f32*, dir: scratch, len: \"ceil_div(n, 256)\" }
      - { name: n, type: i32, value: n }
    launch: { block: [256], grid: [\"ceil_div(n, 256)\"] }
    then:
      - { block: [1024], grid: [1] }
      - { block: [256], grid: [\"ceil_div(n, 256)\"] }
cases:
  correctness:
    - { name: small, vars: { n: 1000 } }
milestones:
  - id: three
    kernel: tiles
    then: [sums, add]
    contract: scan3
    correctness: { points: 10 }
";

fn load_text(text: &str) -> Result<LoadedRubric, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ref.cu"),
        "extern \"C\" __global__ void tiles() {}\nextern \"C\" __global__ void sums() {}\n\
         extern \"C\" __global__ void add() {}\n",
    )
    .unwrap();
    let p = dir.path().join("r.yaml");
    std::fs::write(&p, text).unwrap();
    load(&p).map_err(|e| e.to_string().replace(&format!("{}", p.display()), "r.yaml"))
}

#[test]
fn a_multi_kernel_milestone_resolves_every_launch_in_order() {
    let r = load_text(SCAN3).unwrap();
    let plan = r.plan(&|_, l| l.clone());
    let m = &plan.milestones[0];
    assert_eq!(m.kernels().collect::<Vec<_>>(), ["tiles", "sums", "add"]);
    let then = m.then(&m.cases[0]).unwrap();
    assert_eq!(then.len(), 2);
    assert_eq!(
        (then[0].kernel.as_str(), then[0].dims.grid),
        ("sums", [1, 1, 1])
    );
    assert_eq!(
        (then[1].kernel.as_str(), then[1].dims.grid),
        ("add", [4, 1, 1])
    );
    assert_eq!(m.reference_then(&m.cases[0]).unwrap(), then);
}

#[test]
fn a_milestone_names_one_kernel_per_launch() {
    let e = load_text(&SCAN3.replace("then: [sums, add]", "then: [sums]")).unwrap_err();
    assert!(
        e.contains("names 1 later kernels in `then`, and contract `scan3` has 2"),
        "{e}"
    );
    let e = load_text(&SCAN3.replace("    then: [sums, add]\n", "")).unwrap_err();
    assert!(e.contains("milestone `three` names one kernel"), "{e}");
    let e = load_text(&SCAN3.replace("then: [sums, add]", "then: [sums, tiles]")).unwrap_err();
    assert!(e.contains("kernel `tiles` is launched twice"), "{e}");
    let e = load_text(&SCAN3.replace(
        "then: [sums, add]",
        "then: [sums, add]\n    reference_then: [sums]",
    ))
    .unwrap_err();
    assert!(
        e.contains("`reference_then` names 1 kernels and `then` 2"),
        "{e}"
    );
    // The reference's later kernels must be in its file.
    let e = load_text(&SCAN3.replace(
        "then: [sums, add]",
        "then: [sums, add]\n    reference_then: [sums, propagate]",
    ))
    .unwrap_err();
    assert!(
        e.contains("kernel `propagate` is not in the reference file"),
        "{e}"
    );
    // A later launch is checked like the first.
    let e = load_text(&SCAN3.replace(
        "{ block: [1024], grid: [1] }",
        "{ block: [1024], grid: [m] }",
    ))
    .unwrap_err();
    assert!(
        e.contains("contracts.scan3.then[0]") || e.contains("`m`"),
        "{e}"
    );
    // Metric checks read one kernel's counters.
    let e = load_text(&SCAN3.replace(
        "    correctness: { points: 10 }\n",
        "    correctness: { points: 10 }\n    metrics:\n      - { metric: branches, case: small, max: 1 }\n",
    ))
    .unwrap_err();
    assert!(
        e.contains("a multi-kernel milestone (`then`) takes none"),
        "{e}"
    );
}
