//! Arithmetic, logic and shift instructions (the PTX ISA's integer, extended-precision,
//! floating-point and half-precision arithmetic, and "Logic and Shift"): the `d, a[, b[, c]]`
//! shapes, their modifiers (`.hi`, `.wide`, `.cc`, `.shiftamt`, ...) and their operand types.

use super::super::err;
use super::Cx;
use crate::backend::emu::decode::*;

/// Arithmetic with two or three sources: add, sub (with carry), mad (with carry), and, or,
/// xor, min, max, div, rem, shl, shr, copysign, mul, mul24, fma, mad24, sad, dp4a, dp2a.
pub(super) fn arithmetic(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    match cx.base {
        "add" | "sub" | "addc" | "subc" if cx.has("cc") || cx.base.ends_with('c') => {
            inst.op = Op::Carry {
                sub: cx.base.starts_with("sub"),
                mul: None,
                cin: cx.base.ends_with('c'),
                cout: cx.has("cc"),
            };
            cx.alu(inst, 2)?;
        }
        "mad" | "madc" if cx.has("cc") || cx.base == "madc" => {
            inst.op = Op::Carry {
                sub: false,
                mul: Some(if cx.has("hi") {
                    MulMode::Hi
                } else {
                    MulMode::Lo
                }),
                cin: cx.base == "madc",
                cout: cx.has("cc"),
            };
            cx.alu(inst, 3)?;
        }
        "add" | "sub" | "and" | "or" | "xor" | "min" | "max" | "div" | "rem" | "shl" | "shr"
        | "copysign" => {
            inst.op = match cx.base {
                "add" => Op::Add,
                "sub" => Op::Sub,
                "and" => Op::And,
                "or" => Op::Or,
                "xor" => Op::Xor,
                "min" => Op::Min,
                "max" => Op::Max,
                "div" => Op::Div,
                "rem" => Op::Rem,
                "shl" => Op::Shl,
                "shr" => Op::Shr,
                _ => Op::Copysign,
            };
            if (inst.ty == Ty::F16x2 || inst.ty == Ty::BF16x2)
                && !matches!(cx.base, "add" | "sub" | "min" | "max")
            {
                return cx.unsupported();
            }
            cx.alu(inst, 2)?;
        }
        "mul" => {
            inst.op = Op::Mul(cx.mul_mode());
            cx.alu(inst, 2)?;
        }
        "mul24" => {
            inst.op = Op::Mul24(cx.mul_mode());
            cx.alu(inst, 2)?;
        }
        "mad" | "fma" => {
            inst.op = if inst.ty.float() {
                Op::Fma
            } else {
                Op::Mad(cx.mul_mode())
            };
            if cx.has("cc") {
                return cx.unsupported();
            }
            cx.alu(inst, 3)?;
        }
        "mad24" => {
            inst.op = Op::Mad24(cx.mul_mode());
            cx.alu(inst, 3)?;
        }
        "sad" => {
            inst.op = Op::Sad;
            cx.alu(inst, 3)?;
        }
        "dp4a" | "dp2a" => {
            let a_signed = cx.ty0 == Ty::S32;
            let b_signed = inst.ty2 == Ty::S32;
            inst.op = if cx.base == "dp4a" {
                Op::Dp4a { a_signed, b_signed }
            } else {
                Op::Dp2a {
                    hi: cx.has("hi"),
                    a_signed,
                    b_signed,
                }
            };
            // d and c are s32 unless both parts are unsigned; the sum wraps at 32 bits.
            inst.ty = Ty::U32;
            cx.alu(inst, 3)?;
        }
        _ => return cx.unsupported(),
    }
    Ok(())
}

/// One-source instructions (bfind, abs, neg, not, cnot, popc, clz, brev, rcp, sqrt, rsqrt, sin,
/// cos, ex2, lg2, tanh, testp) and the bit-field ones (bfe, bfi, shf, lop3).
pub(super) fn unary_and_bits(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    match cx.base {
        "bfind" => {
            inst.op = Op::Bfind {
                shiftamt: cx.has("shiftamt"),
            };
            cx.alu(inst, 1)?;
        }
        "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "rcp" | "sqrt" | "rsqrt"
        | "sin" | "cos" | "ex2" | "lg2" | "tanh" => {
            inst.op = match cx.base {
                "abs" => Op::Abs,
                "neg" => Op::Neg,
                "not" => Op::Not,
                "cnot" => Op::CNot,
                "popc" => Op::Popc,
                "clz" => Op::Clz,
                "brev" => Op::Brev,
                "rcp" => Op::Rcp,
                "sqrt" => Op::Sqrt,
                "rsqrt" => Op::Rsqrt,
                "sin" => Op::Sin,
                "cos" => Op::Cos,
                "ex2" => Op::Ex2,
                "lg2" => Op::Lg2,
                _ => Op::Tanh,
            };
            cx.alu(inst, 1)?;
        }
        "bfe" => {
            inst.op = Op::Bfe;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, cx.ty0)?;
            inst.b = cx.src(cx.opn(2)?, Ty::U32)?;
            inst.c = cx.src(cx.opn(3)?, Ty::U32)?;
        }
        "bfi" => {
            inst.op = Op::Bfi;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, cx.ty0)?;
            inst.b = cx.src(cx.opn(2)?, cx.ty0)?;
            inst.c = cx.src(cx.opn(3)?, Ty::U32)?;
            inst.e = cx.src(cx.opn(4)?, Ty::U32)?;
        }
        "shf" => {
            inst.op = Op::Shf {
                left: cx.has("l"),
                clamp: cx.has("clamp"),
            };
            inst.ty = Ty::B32;
            cx.alu(inst, 3)?;
        }
        "lop3" => {
            inst.op = Op::Lop3;
            cx.alu(inst, 4)?;
        }
        "testp" => {
            let k = [
                "finite",
                "infinite",
                "number",
                "notanumber",
                "normal",
                "subnormal",
            ]
            .iter()
            .position(|x| cx.has(x))
            .ok_or_else(|| err(cx.i, "testp without a test"))?;
            inst.op = Op::Testp(k as u8);
            cx.alu(inst, 1)?;
        }
        _ => return cx.unsupported(),
    }
    Ok(())
}
