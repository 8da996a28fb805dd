//! The calling conventions a milestone's kernel may be called with: CUDA C++ and PTX take the
//! contract's parameters as they are; a Numba kernel takes each array as a descriptor, under
//! one of the [`Signature`]s derived here from the contract (part of the rubric's plan).

use super::ParamType;
use super::schema::{ArrayStyle, Contract, ScalarType};
use serde::{Deserialize, Serialize};

/// A Numba signature (`(float32[::1], int32)`) and each array parameter's dimensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    pub text: String,
    /// Per contract parameter: 0 for a scalar, the array's dimensions otherwise.
    pub ndims: Vec<usize>,
}

pub fn numba_type(t: ScalarType) -> &'static str {
    t.numpy_name()
}

/// The signatures to try for a contract. Flat 1-D arrays first (what a CUDA C++ port looks
/// like), then, where buffers declare a `shape`, N-D arrays (`A[row, k]`), unless the rubric
/// fixes the style.
pub fn signatures(contract: &Contract, style: ArrayStyle) -> Vec<Signature> {
    let build = |shaped: bool| {
        let mut parts = vec![];
        let mut ndims = vec![];
        for p in &contract.params {
            match p.param_type() {
                Some(ParamType::Buffer(t)) => {
                    let n = match &p.shape {
                        Some(s) if shaped && (2..=3).contains(&s.len()) => s.len(),
                        _ => 1,
                    };
                    let dims = std::iter::repeat_n(":", n - 1)
                        .chain(["::1"])
                        .collect::<Vec<_>>()
                        .join(", ");
                    parts.push(format!("{}[{dims}]", numba_type(t)));
                    ndims.push(n);
                }
                Some(ParamType::Scalar(t)) => {
                    parts.push(numba_type(t).to_string());
                    ndims.push(0);
                }
                None => {}
            }
        }
        let trailing = if parts.len() == 1 { "," } else { "" };
        Signature {
            text: format!("({}{trailing})", parts.join(", ")),
            ndims,
        }
    };
    let has_shape = contract
        .params
        .iter()
        .any(|p| p.shape.as_ref().is_some_and(|s| (2..=3).contains(&s.len())));
    match style {
        ArrayStyle::Flat => vec![build(false)],
        ArrayStyle::Shaped if has_shape => vec![build(true)],
        ArrayStyle::Auto if has_shape => vec![build(false), build(true)],
        _ => vec![build(false)],
    }
}

/// Parameter sizes Numba's entry takes for a signature: 8 bytes per descriptor field.
pub fn param_sizes(sig: &Signature, contract: &Contract) -> Vec<usize> {
    let mut out = vec![];
    for (p, &n) in contract.params.iter().zip(&sig.ndims) {
        match p.param_type() {
            Some(ParamType::Buffer(_)) => out.extend(std::iter::repeat_n(8, 5 + 2 * n)),
            Some(ParamType::Scalar(t)) => out.push(t.size()),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract(yaml: &str) -> Contract {
        serde_yaml::from_str(yaml).unwrap()
    }

    const MATMUL: &str = "params:
  - {name: A, type: \"f32*\", dir: in, len: \"M * K\", shape: [M, K]}
  - {name: C, type: \"f32*\", dir: out, len: \"M * K\"}
  - {name: M, type: i32, value: M}
  - {name: K, type: u64, value: K}
launch: {block: [16], grid: [1]}
";

    #[test]
    fn signatures_follow_the_contract() {
        let c = contract(MATMUL);
        let s = signatures(&c, ArrayStyle::Auto);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].text, "(float32[::1], float32[::1], int32, uint64)");
        assert_eq!(s[1].text, "(float32[:, ::1], float32[::1], int32, uint64)");
        assert_eq!(s[1].ndims, vec![2, 1, 0, 0]);
        assert_eq!(signatures(&c, ArrayStyle::Flat).len(), 1);
        assert_eq!(
            signatures(&c, ArrayStyle::Shaped)[0].ndims,
            vec![2, 1, 0, 0]
        );
        assert_eq!(
            param_sizes(&s[1], &c),
            [vec![8; 9], vec![8; 7], vec![4, 8]].concat()
        );
    }
}
