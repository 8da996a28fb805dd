//! Data movement and conversion (the PTX ISA's "Data Movement and Conversion Instructions"):
//! mov (vector packing and unpacking, the clock and timer special registers), prmt, cvt
//! (cvt.pack's f16x2/bf16x2 too) and cvta.

use super::super::err;
use super::Cx;
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::Operand;

/// mov, prmt, cvt and cvta.
pub(super) fn lower(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    match cx.base {
        "mov" => {
            if cx.types.is_empty() {
                return cx.unsupported();
            }
            match (cx.opn(0)?, cx.opn(1)?) {
                (Operand::Vec(v), a) => {
                    inst.op = Op::Unpack;
                    for (k, r) in v.iter().enumerate().take(4) {
                        inst.vregs[k] = match r {
                            Operand::Name(n) if n == "_" => NOREG,
                            o => cx.dst(o)?,
                        };
                    }
                    inst.vec = v.len() as u8;
                    inst.a = cx.src(a, cx.ty0)?;
                }
                (d, Operand::Vec(v)) => {
                    inst.op = Op::Pack;
                    inst.d = cx.dst(d)?;
                    for (k, r) in v.iter().enumerate().take(4) {
                        inst.vregs[k] = cx.dst(r)?;
                    }
                    inst.vec = v.len() as u8;
                }
                (d, Operand::Name(n)) if Special::parse(n).is_some() => {
                    inst.op = Op::ReadSpecial(Special::parse(n).unwrap_or(Special::Clock64));
                    inst.d = cx.dst(d)?;
                }
                _ => {
                    inst.op = Op::Mov;
                    cx.alu(inst, 1)?;
                }
            }
        }
        "prmt" => {
            if cx
                .mods
                .iter()
                .any(|m| matches!(*m, "f4e" | "b4e" | "rc8" | "ecl" | "ecr" | "rc16"))
            {
                return cx.unsupported();
            }
            inst.op = Op::Prmt;
            cx.alu(inst, 3)?;
        }
        "cvt" => {
            if cx.types.len() != 2 {
                return cx.unsupported();
            }
            inst.op = Op::Cvt;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, inst.ty2)?;
            if inst.ty == Ty::F16x2 || inst.ty == Ty::BF16x2 {
                // cvt.rn.f16x2.f32 d, a, b packs a into the upper half, b into the lower.
                if inst.ty2 != Ty::F32 || cx.has("relu") || cx.has("satfinite") {
                    return cx.unsupported();
                }
                inst.b = cx.src(cx.opn(2)?, Ty::F32)?;
            }
        }
        "cvta" => {
            inst.op = Op::Cvta { to: cx.has("to") };
            inst.space = cx
                .space_of()
                .ok_or_else(|| err(cx.i, "cvta without a state space"))?;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, Ty::U64)?;
        }
        _ => return cx.unsupported(),
    }
    Ok(())
}
