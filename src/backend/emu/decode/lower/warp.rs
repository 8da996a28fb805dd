//! Warp-level instructions (shfl.sync; vote.sync, redux.sync, activemask from the PTX ISA's
//! "Parallel Synchronization and Communication"): the mode, the member mask and the optional
//! predicate destination.

use super::super::err;
use super::Cx;
use crate::backend::emu::decode::*;

use crate::backend::emu::parse::Operand;

/// shfl, vote, redux and activemask.
pub(super) fn lower(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    match cx.base {
        "shfl" => {
            if !cx.has("sync") {
                return Err(err(cx.i, "shfl without .sync (pre-Volta) is not supported"));
            }
            let mode = if cx.has("up") {
                ShflMode::Up
            } else if cx.has("down") {
                ShflMode::Down
            } else if cx.has("bfly") {
                ShflMode::Bfly
            } else {
                ShflMode::Idx
            };
            inst.op = Op::Shfl(mode);
            match cx.opn(0)? {
                Operand::Pair(d, p) => {
                    inst.d = cx.reg(d)?;
                    inst.d2 = cx.reg(p)?;
                }
                o => inst.d = cx.dst(o)?,
            }
            inst.a = cx.src(cx.opn(1)?, Ty::B32)?;
            inst.b = cx.src(cx.opn(2)?, Ty::U32)?;
            inst.c = cx.src(cx.opn(3)?, Ty::U32)?;
            inst.e = cx.src(cx.opn(4)?, Ty::U32)?;
        }
        "vote" => {
            let mode = if cx.has("all") {
                VoteMode::All
            } else if cx.has("any") {
                VoteMode::Any
            } else if cx.has("uni") {
                VoteMode::Uni
            } else if cx.has("ballot") {
                VoteMode::Ballot
            } else {
                return cx.unsupported();
            };
            if !cx.has("sync") {
                return Err(err(cx.i, "vote without .sync (pre-Volta) is not supported"));
            }
            inst.op = Op::Vote(mode);
            inst.d = cx.dst(cx.opn(0)?)?;
            match cx.opn(1)? {
                Operand::NotName(n) => {
                    inst.a = Src::R(cx.reg(n)?);
                    inst.c_neg = true;
                }
                o => inst.a = cx.src(o, Ty::Pred)?,
            }
            inst.e = cx.src(cx.opn(2)?, Ty::U32)?;
        }
        "redux" => {
            let op = [
                ("add", AtomOp::Add),
                ("min", AtomOp::Min),
                ("max", AtomOp::Max),
                ("and", AtomOp::And),
                ("or", AtomOp::Or),
                ("xor", AtomOp::Xor),
            ]
            .iter()
            .find(|(n, _)| cx.has(n))
            .map(|x| x.1);
            match op {
                Some(op) if cx.has("sync") && !inst.ty.float() => inst.op = Op::Redux(op),
                _ => return cx.unsupported(),
            }
            inst.d = cx.dst(cx.opn(0)?)?;
            inst.a = cx.src(cx.opn(1)?, cx.ty0)?;
            inst.e = cx.src(cx.opn(2)?, Ty::U32)?;
        }
        "activemask" => {
            inst.op = Op::Activemask;
            inst.d = cx.dst(cx.opn(0)?)?;
        }
        _ => return cx.unsupported(),
    }
    Ok(())
}
