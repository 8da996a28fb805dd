//! `cp.ElementwiseKernel` and `cp.ReductionKernel` to CUDA C++, following CuPy's semantics
//! (CuPy's documentation of both classes, and the code CuPy generates for them):
//!
//! - `in_params` / `out_params` are `TYPE NAME` lists; `TYPE` is a NumPy dtype name
//!   (`float32`, `int32`, `float64`, `float`, `f4`...) or a placeholder (`T`) bound by the
//!   arguments' types, `typedef`'d in the code. `raw` params are whole arrays (`x[j]`,
//!   `x.size()`); the others are the element at index `i` (inputs `const T&`, outputs `T&`),
//!   or the value itself when the argument is a scalar.
//! - The operation runs once per element, `i` being the element index and `_ind.size()` the
//!   element count (the size of the non-raw array arguments); `preamble`, `loop_prep` and
//!   `after_loop` go where CuPy puts them.
//! - A reduction starts every thread at `_type_reduce(identity)` (`_type_reduce()` without
//!   one), folds `map_expr` of each element in with `REDUCE(a, b)`, and applies
//!   `POST_MAP(a)` (which assigns the outputs) to the total. `reduce_type` defaults to the
//!   first output's type.
//!
//! The kernel takes the contract's parameters in the contract's order. CuPy's parameters are
//! bound to the contract's by name, else in order (inputs to the contract's inputs and
//! scalars, outputs to its outputs); contract scalars left over (`n`) only size the loop. A
//! buffer's element count is its `len` expression over the contract's scalars.

use super::{Definition, Refused, line_directive, located};
use crate::rubric::ParamType;
use crate::rubric::schema::{Contract, Direction, Param, ScalarType};
use std::collections::BTreeMap;

/// One CuPy parameter.
#[derive(Debug, Clone, PartialEq)]
struct CupyParam {
    raw: bool,
    ty: String,
    name: String,
    out: bool,
}

fn parse_params(list: &str, out: bool) -> Result<Vec<CupyParam>, String> {
    let mut v = vec![];
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let words: Vec<&str> = part.split_whitespace().collect();
        let (raw, rest) = match words.first() {
            Some(&"raw") => (true, &words[1..]),
            _ => (false, &words[..]),
        };
        let [ty, name] = rest else {
            return Err(format!(
                "`{part}` is not a CuPy parameter (`TYPE NAME` or `raw TYPE NAME`)"
            ));
        };
        let ident = |s: &str| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        };
        if !ident(ty) || !ident(name) {
            return Err(format!("`{part}` is not a CuPy parameter"));
        }
        v.push(CupyParam {
            raw,
            ty: ty.to_string(),
            name: name.to_string(),
            out,
        });
    }
    Ok(v)
}

/// A NumPy dtype name as CuPy spells its C type; `None` for a placeholder.
fn dtype_c(name: &str) -> Option<&'static str> {
    Some(match name {
        "bool" | "bool_" | "?" => "bool",
        "int8" | "i1" | "b" => "signed char",
        "uint8" | "u1" | "B" => "unsigned char",
        "int16" | "i2" | "h" => "short",
        "uint16" | "u2" | "H" => "unsigned short",
        "int32" | "i4" | "i" | "intc" => "int",
        "uint32" | "u4" | "I" | "uintc" => "unsigned int",
        "int64" | "i8" | "l" | "q" | "int" | "intp" | "int_" | "long" | "longlong" => "long long",
        "uint64" | "u8" | "L" | "Q" | "uint" | "uintp" | "ulonglong" => "unsigned long long",
        "float16" | "f2" | "e" | "half" => "__half",
        "float32" | "f4" | "f" | "single" => "float",
        "float64" | "f8" | "d" | "float" | "double" | "float_" => "double",
        _ => return None,
    })
}

fn scalar_c(t: ScalarType) -> &'static str {
    t.cuda_name()
}

/// A contract parameter bound to a CuPy one.
struct Bound<'a> {
    cupy: CupyParam,
    index: usize,
    param: &'a Param,
    buffer: bool,
    c_type: &'static str,
}

/// Bind CuPy params to contract params (see the module documentation).
fn bind<'a>(params: &[CupyParam], contract: &'a Contract) -> Result<Vec<Bound<'a>>, String> {
    let cparams: Vec<(usize, &Param)> = contract
        .params
        .iter()
        .filter(|p| !p.symbol)
        .enumerate()
        .collect();
    let kind = |p: &Param| match p.param_type() {
        Some(ParamType::Buffer(t)) => Some((true, t)),
        Some(ParamType::Scalar(t)) => Some((false, t)),
        None => None,
    };
    let mut used = vec![false; cparams.len()];
    let mut slot: Vec<Option<usize>> = vec![None; params.len()];
    for (k, cp) in params.iter().enumerate() {
        if let Some(j) = cparams.iter().position(|(_, p)| p.name == cp.name) {
            used[j] = true;
            slot[k] = Some(j);
        }
    }
    for (k, cp) in params.iter().enumerate() {
        if slot[k].is_some() {
            continue;
        }
        let fits = |p: &Param| match (kind(p), cp.out) {
            (Some((true, _)), true) => p.dir != Direction::In,
            (Some((true, _)), false) => p.dir == Direction::In,
            (Some((false, _)), false) => true,
            _ => false,
        };
        let Some(j) = (0..cparams.len()).find(|&j| !used[j] && fits(cparams[j].1)) else {
            let names: Vec<String> = cparams
                .iter()
                .map(|(_, p)| format!("{} {}", p.ty, p.name))
                .collect();
            return Err(format!(
                "parameter `{}` has no counterpart in the assignment's kernel ({})",
                cp.name,
                names.join(", ")
            ));
        };
        used[j] = true;
        slot[k] = Some(j);
    }
    let mut out = vec![];
    for (cp, j) in params.iter().zip(slot) {
        let Some(j) = j else { continue };
        let (index, param) = cparams[j];
        let Some((buffer, t)) = kind(param) else {
            return Err(format!(
                "the contract's `{}` has an unknown type",
                param.name
            ));
        };
        if cp.out && !buffer {
            return Err(format!(
                "output `{}` is bound to the assignment's scalar `{}`",
                cp.name, param.name
            ));
        }
        if cp.raw && !buffer {
            return Err(format!(
                "`raw {} {}` is bound to the assignment's scalar `{}`: only arrays are raw",
                cp.ty, cp.name, param.name
            ));
        }
        out.push(Bound {
            cupy: cp.clone(),
            index,
            param,
            buffer,
            c_type: scalar_c(t),
        });
    }
    Ok(out)
}

/// Placeholders bound by the arguments' types: arrays first, then scalars (as CuPy does).
fn placeholders(bound: &[Bound]) -> Result<BTreeMap<String, &'static str>, String> {
    let mut map = BTreeMap::new();
    for pass in [true, false] {
        for b in bound.iter().filter(|b| b.buffer == pass) {
            if dtype_c(&b.cupy.ty).is_some() {
                continue;
            }
            match map.get(&b.cupy.ty) {
                None => {
                    map.insert(b.cupy.ty.clone(), b.c_type);
                }
                Some(t) if *t != b.c_type && pass => {
                    return Err(format!(
                        "type `{}` would be both {t} and {} (`{}` is {})",
                        b.cupy.ty, b.c_type, b.cupy.name, b.param.ty
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(map)
}

fn declared(b: &Bound, map: &BTreeMap<String, &'static str>) -> &'static str {
    dtype_c(&b.cupy.ty)
        .or_else(|| map.get(&b.cupy.ty).copied())
        .unwrap_or(b.c_type)
}

/// A contract expression over case variables as C over the kernel's scalar parameters.
fn c_expr(src: &str, contract: &Contract) -> Result<String, String> {
    let ident = regex::Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").expect("static regex");
    let mut err = None;
    let out = ident.replace_all(src, |c: &regex::Captures| {
        let word = &c[0];
        if matches!(word, "min" | "max" | "ceil_div") {
            return format!("_cg_{word}");
        }
        let found = contract
            .params
            .iter()
            .filter(|p| !p.symbol)
            .enumerate()
            .find(|(_, p)| {
                matches!(p.param_type(), Some(ParamType::Scalar(_)))
                    && p.value.as_ref().map(|v| v.source()).as_deref() == Some(word)
            });
        match found {
            Some((i, _)) => format!("((long long)_cg_p{i})"),
            None => {
                err = Some(format!(
                    "the size `{src}` uses `{word}`, which the kernel is not passed"
                ));
                word.to_string()
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(format!("({out})")),
    }
}

fn len_src(p: &Param) -> String {
    p.len
        .as_ref()
        .map(|e| e.source())
        .unwrap_or_else(|| "1".into())
}

const HELPERS: &str = r#"struct _cg_index {
  long long _n, _i;
  __device__ long long size() const { return _n; }
  __device__ void set(long long i) { _i = i; }
  __device__ const long long* get() const { return &_i; }
};
template <typename T> struct _cg_raw {
  T* _p; long long _n;
  __device__ T& operator[](long long j) const { return _p[j]; }
  __device__ long long size() const { return _n; }
};
__device__ inline long long _cg_min(long long a, long long b) { return a < b ? a : b; }
__device__ inline long long _cg_max(long long a, long long b) { return a > b ? a : b; }
__device__ inline long long _cg_ceil_div(long long a, long long b) { return (a + b - 1) / b; }
#define _CG_THREAD (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))
#define _CG_BLOCK_SIZE (blockDim.x * blockDim.y * blockDim.z)
#define _CG_BLOCK (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))
#define _CG_BLOCKS (gridDim.x * gridDim.y * gridDim.z)
"#;

/// What both kinds share: the parameter list, typedefs and per-element/per-kernel bindings.
struct Frame {
    head: String,
    signature: String,
    size: String,
    per_kernel: String,
    per_element: String,
}

fn frame(
    def: &Definition,
    kernel: &str,
    contract: &Contract,
    params: &[CupyParam],
    size_from_inputs: bool,
) -> Result<Frame, String> {
    let bound = bind(params, contract)?;
    let map = placeholders(&bound)?;
    let mut head = String::from(HELPERS);
    for (ph, t) in &map {
        head.push_str(&format!("typedef {t} {ph};\n"));
    }
    let sig: Vec<String> = contract
        .params
        .iter()
        .filter(|p| !p.symbol)
        .enumerate()
        .map(|(i, p)| match p.param_type() {
            Some(ParamType::Buffer(t)) => format!("{}* __restrict__ _cg_p{i}", scalar_c(t)),
            Some(ParamType::Scalar(t)) => format!("{} _cg_p{i}", scalar_c(t)),
            None => format!("void* _cg_p{i}"),
        })
        .collect();
    // The loop's size: the first non-raw array (outputs first for an elementwise kernel).
    let arrays: Vec<&Bound> = bound.iter().filter(|b| b.buffer && !b.cupy.raw).collect();
    let sizer = if size_from_inputs {
        arrays.iter().find(|b| !b.cupy.out).copied()
    } else {
        arrays
            .iter()
            .find(|b| b.cupy.out)
            .or(arrays.first())
            .copied()
    }
    .or_else(|| bound.iter().find(|b| b.buffer && b.cupy.out))
    .ok_or_else(|| format!("`{kernel}` has no array parameter to size its loop"))?;
    let size_src = len_src(sizer.param);
    let size = c_expr(&size_src, contract)?;
    let mut per_kernel = String::new();
    let mut per_element = String::new();
    for b in &bound {
        let t = declared(b, &map);
        let name = &b.cupy.name;
        let p = format!("_cg_p{}", b.index);
        if !b.buffer {
            per_kernel.push_str(&format!("  const {t} {name} = ({t}){p}; (void){name};\n"));
        } else if b.cupy.raw {
            if t != b.c_type {
                return Err(format!(
                    "`raw {} {name}` is {t} but the assignment passes {} ({})",
                    b.cupy.ty, b.c_type, b.param.ty
                ));
            }
            let n = c_expr(&len_src(b.param), contract)?;
            per_kernel.push_str(&format!(
                "  _cg_raw<{t}> {name} = {{{p}, {n}}}; (void){name};\n"
            ));
        } else if b.cupy.out && size_from_inputs {
            // A reduction's outputs are its one value, bound where the total is written.
            continue;
        } else {
            let own = len_src(b.param);
            let index = if own == size_src {
                "i".to_string()
            } else if broadcasts(&own, sizer.param) {
                format!("i % {}", c_expr(&own, contract)?)
            } else {
                return Err(format!(
                    "`{name}` has {own} elements and cannot broadcast to the {size_src} of `{}`",
                    sizer.cupy.name
                ));
            };
            if b.cupy.out {
                if t != b.c_type {
                    return Err(format!(
                        "output `{} {name}` is {t} but the assignment's `{}` is {}",
                        b.cupy.ty, b.param.name, b.param.ty
                    ));
                }
                per_element.push_str(&format!("    {t} &{name} = {p}[{index}]; (void){name};\n"));
            } else if t == b.c_type {
                per_element.push_str(&format!(
                    "    const {t} &{name} = {p}[{index}]; (void){name};\n"
                ));
            } else {
                per_element.push_str(&format!(
                    "    const {t} {name} = ({t}){p}[{index}]; (void){name};\n"
                ));
            }
        }
    }
    if let Some(pre) = def.preamble.as_deref().filter(|p| !p.trim().is_empty()) {
        head.push_str(&located(def.preamble_at.as_ref(), (&def.file, def.line)));
        head.push_str(pre);
        head.push('\n');
    }
    Ok(Frame {
        head,
        signature: sig.join(", "),
        size,
        per_kernel,
        per_element,
    })
}

/// Whether an array of `own` elements broadcasts against `sizer` (a trailing part of its
/// shape, as NumPy broadcasting reads a row vector against a matrix).
fn broadcasts(own: &str, sizer: &Param) -> bool {
    let Some(shape) = &sizer.shape else {
        return false;
    };
    let dims: Vec<String> = shape.iter().map(|e| e.source()).collect();
    let squash = |s: &str| s.replace(' ', "");
    (1..dims.len()).any(|k| squash(&dims[k..].join("*")) == squash(own))
}

fn refuse(def: &Definition, message: String) -> Refused {
    Refused {
        file: def.file.clone(),
        line: def.line,
        message,
    }
}

fn params_of(def: &Definition) -> Result<Vec<CupyParam>, Refused> {
    let mut p =
        parse_params(def.in_params.as_deref().unwrap_or(""), false).map_err(|m| refuse(def, m))?;
    p.extend(
        parse_params(def.out_params.as_deref().unwrap_or(""), true).map_err(|m| refuse(def, m))?,
    );
    Ok(p)
}

fn block(def: &Definition, at: Option<&super::At>, code: Option<&str>) -> String {
    match code.filter(|c| !c.trim().is_empty()) {
        Some(c) => format!("{}{c}\n", located(at, (&def.file, def.line))),
        None => String::new(),
    }
}

/// An ElementwiseKernel as the contract's kernel.
pub fn elementwise(def: &Definition, kernel: &str, contract: &Contract) -> Result<String, Refused> {
    let params = params_of(def)?;
    let f = frame(def, kernel, contract, &params, false).map_err(|m| refuse(def, m))?;
    let op = block(def, def.operation_at.as_ref(), def.operation.as_deref());
    let prep = block(def, def.loop_prep_at.as_ref(), def.loop_prep.as_deref());
    let after = block(def, def.after_loop_at.as_ref(), def.after_loop.as_deref());
    Ok(format!(
        "{head}\n#line 1 \"<cugrade: ElementwiseKernel {kernel}>\"\n\
extern \"C\" __global__ void {kernel}({sig}) {{\n\
  _cg_index _ind; _ind._n = {size}; _ind._i = 0;\n{pk}\
{prep};\n\
  for (long long i = (long long)_CG_BLOCK * _CG_BLOCK_SIZE + _CG_THREAD; i < _ind.size(); i += (long long)_CG_BLOCKS * _CG_BLOCK_SIZE) {{\n\
    _ind.set(i);\n{pe}\
{op};\n\
  }}\n\
{after};\n\
}}\n",
        head = f.head,
        sig = f.signature,
        size = f.size,
        pk = f.per_kernel,
        pe = f.per_element,
    ))
}

/// A ReductionKernel as the contract's kernel: the contract's output must be one value.
pub fn reduction(def: &Definition, kernel: &str, contract: &Contract) -> Result<String, Refused> {
    let params = params_of(def)?;
    let f = frame(def, kernel, contract, &params, true).map_err(|m| refuse(def, m))?;
    for p in contract
        .params
        .iter()
        .filter(|p| p.dir.is_output() && matches!(p.param_type(), Some(ParamType::Buffer(_))))
    {
        if len_src(p) != "1" {
            return Err(refuse(
                def,
                format!(
                    "a ReductionKernel computes one value per output, but `{kernel}` writes {} values to `{}`: write it as a RawKernel or an ElementwiseKernel",
                    len_src(p),
                    p.name
                ),
            ));
        }
    }
    let bound = bind(&params, contract).map_err(|m| refuse(def, m))?;
    let map = placeholders(&bound).map_err(|m| refuse(def, m))?;
    // CuPy pastes `reduce_type` into the kernel as C (`typedef float _type_reduce;`): a NumPy
    // name such as `float32` does not compile there, and must not here (H100, CuPy 14,
    // 2026-11-24). A type placeholder (`T`) is one of the kernel's typedefs.
    let reduce_type = match def.reduce_type.as_deref() {
        Some(t) => map
            .get(t)
            .copied()
            .map(str::to_string)
            .unwrap_or_else(|| t.to_string()),
        None => bound
            .iter()
            .find(|b| b.cupy.out)
            .map(|b| declared(b, &map).to_string())
            .unwrap_or_else(|| "float".into()),
    };
    // Outputs are the one element: `y = a` assigns out[0].
    let outs: String = bound
        .iter()
        .filter(|b| b.cupy.out)
        .map(|b| {
            format!(
                "      {} &{} = _cg_p{}[0];\n",
                declared(b, &map),
                b.cupy.name,
                b.index
            )
        })
        .collect();
    let per_element = f.per_element.clone();
    let identity = def.identity.clone().unwrap_or_default();
    let dir = |at: Option<&super::At>| line_directive(at, (&def.file, def.line));
    let map_expr = def.map_expr.clone().unwrap_or_default();
    Ok(REDUCTION
        .replace("@HEAD@", &f.head)
        .replace("@RT@", &reduce_type)
        .replace("@DR@", &dir(def.reduce_expr_at.as_ref()))
        .replace("@REDUCE@", def.reduce_expr.as_deref().unwrap_or_default())
        .replace("@DP@", &dir(def.post_map_expr_at.as_ref()))
        .replace("@POST@", def.post_map_expr.as_deref().unwrap_or_default())
        .replace(
            "@DM@",
            &located(def.map_expr_at.as_ref(), (&def.file, def.line)),
        )
        .replace("@MAP@", &map_expr)
        .replace("@ID@", &identity)
        .replace("@SIG@", &f.signature)
        .replace("@SIZE@", &f.size)
        .replace("@PK@", &f.per_kernel)
        .replace("@PE@", &per_element)
        .replace("@OUTS@", &outs)
        .replace("@KERNEL@", kernel))
}

/// A reduction: each thread folds its elements (grid-stride), each block folds its threads in
/// shared memory, each block's value goes into one of `_CG_SLOTS` slots (a has-value bit with
/// the bits, updated by compare-and-swap, or a slot lock for types that are not 4 bytes), and
/// the last block to finish folds the slots, empties them for the next launch and applies
/// `POST_MAP` once. `@...@` are filled in by [`reduction`]; the student's pieces come last
/// so that nothing they define changes cugrade's own code.
const REDUCTION: &str = include_str!("reduction.cu.in");

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
