//! The CUDA C++ starter: a stub per kernel with its contract's signature (`extern "C"
//! __global__`), the `__constant__` and `__device__` symbols the contract sets, and the
//! headers its element types need. CuPy's starter wraps the same source in a RawModule.

use super::common::{comment, kernels};
use crate::labs::Lab;
use crate::rubric::schema::{Contract, Direction, Literal, ScalarType};
use crate::rubric::{LoadedRubric, ParamType};
use std::fmt::Write as _;

fn c_type(t: ScalarType) -> &'static str {
    t.cuda_name()
}

/// `extern "C" __global__ void NAME(const float* in, float* out, int n)`.
pub fn signature(kernel: &str, contract: &Contract) -> String {
    let params: Vec<String> = contract
        .params
        .iter()
        .filter(|p| !p.symbol)
        .map(|p| match p.param_type() {
            // A multi-GPU lab's table of every rank's buffer: `in[r]` is rank r's.
            Some(ParamType::Buffer(t)) if p.peers && p.dir == Direction::In => {
                format!("const {}* const* {}", c_type(t), p.name)
            }
            Some(ParamType::Buffer(t)) if p.peers => {
                format!("{}* const* {}", c_type(t), p.name)
            }
            Some(ParamType::Buffer(t)) if p.dir == Direction::In => {
                format!("const {}* {}", c_type(t), p.name)
            }
            Some(ParamType::Buffer(t)) => format!("{}* {}", c_type(t), p.name),
            Some(ParamType::Scalar(t)) => format!("{} {}", c_type(t), p.name),
            None => format!("/* {} */ {}", p.ty, p.name),
        })
        .collect();
    format!(
        "extern \"C\" __global__ void {kernel}({})",
        params.join(", ")
    )
}

/// `__constant__` globals the grader fills by name (`symbol: true` parameters).
fn symbols(r: &LoadedRubric, kernels: &[(&str, &str)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, contract) in kernels {
        for p in r.contract(contract).params.iter().filter(|p| p.symbol) {
            let elem = match p.param_type() {
                Some(ParamType::Buffer(t) | ParamType::Scalar(t)) => c_type(t),
                None => "float",
            };
            let len = match &p.len {
                Some(e) if matches!(e.literal(), Literal::Int(_)) => e.source(),
                Some(e) => format!("/* {} */ 1", e.source()),
                None => "1".into(),
            };
            let line = format!(
                "__constant__ {elem} {}[{len}];   // set by the grader before each launch",
                p.name
            );
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// A signature that fits 80 columns: on one line, or one parameter per line.
fn wrapped_signature(kernel: &str, contract: &Contract) -> String {
    let one = signature(kernel, contract);
    if one.len() <= 80 {
        return one;
    }
    let (head, params) = one.split_once('(').unwrap_or((&one, ""));
    let list: Vec<String> = params.split(", ").map(|p| format!("    {p}")).collect();
    format!("{head}(\n{}", list.join(",\n"))
}

pub(super) fn kernel_source(lab: &Lab, r: &LoadedRubric) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "// {}", super::text::title(lab).replace('`', ""));
    let _ = writeln!(s, "//");
    s.push_str(&comment(
        &super::text::clean(&lab.what_you_write(), false),
        "// ",
    ));
    let _ = writeln!(s, "//");
    let _ = writeln!(
        s,
        "// Grade it with `cugrade check` in this folder. A kernel whose body is still"
    );
    let _ = writeln!(s, "// empty is reported as not implemented yet.\n");
    let ks = kernels(r);
    // `__half` and `__nv_bfloat16` come from CUDA's headers.
    let mut headers: Vec<&str> = ks
        .iter()
        .flat_map(|(_, c)| r.contract(c).params.iter())
        .filter_map(|p| match p.param_type() {
            Some(ParamType::Buffer(t) | ParamType::Scalar(t)) => t.cuda_header(),
            None => None,
        })
        .collect();
    headers.sort_unstable();
    headers.dedup();
    for h in &headers {
        let _ = writeln!(s, "#include <{h}>");
    }
    if !headers.is_empty() {
        s.push('\n');
    }
    let syms = symbols(r, &ks);
    if !syms.is_empty() {
        for l in &syms {
            let _ = writeln!(s, "{l}");
        }
        s.push('\n');
    }
    for (kernel, contract) in &ks {
        for m in r.rubric.milestones.iter().filter(|m| m.kernel == *kernel) {
            let title = if m.title.is_empty() { &m.id } else { &m.title };
            let then = if m.then.is_empty() {
                String::new()
            } else {
                format!(
                    " (then {}, launched one after the other on the same arguments)",
                    m.then
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", then ")
                )
            };
            s.push_str(&comment(
                &format!("Milestone `{}`: {}{then}", m.id, title.replace('`', "")),
                "// ",
            ));
        }
        for m in r.rubric.milestones.iter() {
            if let Some(k) = m.then.iter().position(|t| t == kernel) {
                let before = if k == 0 { &m.kernel } else { &m.then[k - 1] };
                s.push_str(&comment(
                    &format!(
                        "Milestone `{}`, launch {} of {}: runs after `{before}` has finished.",
                        m.id,
                        k + 2,
                        m.then.len() + 1
                    ),
                    "// ",
                ));
            }
        }
        let _ = writeln!(s, "{}", wrapped_signature(kernel, r.contract(contract)));
        let _ = writeln!(s, "{{\n    // TODO: your code here.\n}}\n");
    }
    s
}
