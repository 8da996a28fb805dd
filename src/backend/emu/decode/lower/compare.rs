//! Comparison and selection (the PTX ISA's "Comparison and Selection Instructions": setp, set,
//! selp, slct): the comparison, the optional boolean combine with a predicate, and the
//! destination pair.

use super::super::err;
use super::Cx;
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::Operand;

/// setp, set, selp and slct.
pub(super) fn lower(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    match cx.base {
        "setp" | "set" => {
            let cmp = cx
                .mods
                .iter()
                .find_map(|m| parse_cmp(m))
                .ok_or_else(|| err(cx.i, "missing comparison"))?;
            let bop = if cx.has("and") {
                BoolOp::And
            } else if cx.has("or") {
                BoolOp::Or
            } else if cx.has("xor") {
                BoolOp::Xor
            } else {
                BoolOp::None
            };
            // setp.cmp.T: compare type T; set.cmp.D.T: destination D, compare type T.
            if cx.base == "set" {
                inst.op = Op::Set(cmp, bop);
                inst.ty = cx.ty0;
                inst.ty2 = cx
                    .types
                    .get(1)
                    .copied()
                    .ok_or_else(|| err(cx.i, "set needs two types"))?;
            } else {
                inst.op = Op::Setp(cmp, bop);
                inst.ty2 = cx.ty0;
            }
            match cx.opn(0)? {
                Operand::Pair(p, q) => {
                    inst.d = cx.reg(p)?;
                    inst.d2 = cx.reg(q)?;
                }
                o => inst.d = cx.dst(o)?,
            }
            inst.a = cx.src(cx.opn(1)?, inst.ty2)?;
            inst.b = cx.src(cx.opn(2)?, inst.ty2)?;
            if bop != BoolOp::None {
                match cx.opn(3)? {
                    Operand::NotName(n) => {
                        inst.c = Src::R(cx.reg(n)?);
                        inst.c_neg = true;
                    }
                    o => inst.c = cx.src(o, Ty::Pred)?,
                }
            }
        }
        "selp" => {
            inst.op = Op::Selp;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, cx.ty0)?;
            inst.b = cx.src(cx.opn(2)?, cx.ty0)?;
            match cx.opn(3)? {
                Operand::NotName(n) => {
                    inst.c = Src::R(cx.reg(n)?);
                    inst.c_neg = true;
                }
                o => inst.c = cx.src(o, Ty::Pred)?,
            }
        }
        "slct" => {
            inst.op = Op::Slct;
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, cx.ty0)?;
            inst.b = cx.src(cx.opn(2)?, cx.ty0)?;
            inst.c = cx.src(cx.opn(3)?, inst.ty2)?;
        }
        _ => return cx.unsupported(),
    }
    Ok(())
}

fn parse_cmp(s: &str) -> Option<Cmp> {
    Some(match s {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" | "lo" => Cmp::Lt,
        "le" | "ls" => Cmp::Le,
        "gt" | "hi" => Cmp::Gt,
        "ge" | "hs" => Cmp::Ge,
        "equ" => Cmp::Equ,
        "neu" => Cmp::Neu,
        "ltu" => Cmp::Ltu,
        "leu" => Cmp::Leu,
        "gtu" => Cmp::Gtu,
        "geu" => Cmp::Geu,
        "num" => Cmp::Num,
        "nan" => Cmp::Nan,
        _ => return None,
    })
}
