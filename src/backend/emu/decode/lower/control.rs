//! Control flow and synchronization (the PTX ISA's "Control Flow Instructions": bra, call, ret,
//! exit; "Parallel Synchronization and Communication": bar, barrier, bar.red, membar, fence;
//! "Miscellaneous": trap and the no-ops): branch targets, call sites (`vprintf` and
//! `__assertfail` become their own operations) and barrier operands.

use super::super::{CALLS, SymKind, err};
use super::Cx;
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::Operand;

/// Control-flow and synchronization instructions; for a call of a function of the module, its
/// name (the call site's target is resolved once every body has a program counter).
pub(super) fn lower(
    cx: &Cx,
    inst: &mut Inst,
    global_atomics: &mut bool,
) -> Result<Option<String>, String> {
    match cx.base {
        "bra" | "brx" => {
            if cx.base == "brx" {
                return cx.unsupported();
            }
            inst.op = Op::Bra;
            let Operand::Name(l) = cx.opn(0)? else {
                return Err(err(cx.i, "branch target must be a label"));
            };
            inst.aux = *cx
                .sc
                .labels
                .get(l)
                .ok_or_else(|| err(cx.i, format!("unknown label `{l}`")))?;
        }
        "call" => return call(cx, inst, global_atomics),
        "ret" => inst.op = Op::Ret,
        "exit" => inst.op = Op::Exit,
        "bar" | "barrier" => bar(cx, inst)?,
        "membar" | "fence" if !cx.mods.iter().any(|m| m.starts_with("proxy")) => {
            // membar.{cta,gl,sys}; fence.{sc,acq_rel}.{cta,cluster,gpu,sys}. fence.proxy.*
            // orders between memory proxies only, which the emulator does not have.
            inst.sem = cx.sem();
            inst.op = if inst.sem & sem::SCOPE == 0 {
                Op::Nop
            } else {
                inst.sem |= sem::FENCE;
                Op::Fence
            };
        }
        "membar" | "fence" | "prefetch" | "prefetchu" | "nanosleep" | "pmevent" | "brkpt"
        | "griddepcontrol" => {
            inst.op = Op::Nop;
        }
        "trap" => inst.op = Op::Trap,
        _ => return cx.unsupported(),
    }
    Ok(None)
}

/// `call`: vprintf and `__assertfail` become their own operations; any other function of the
/// module gets a call site (arguments and results copied between parameter slots).
fn call(cx: &Cx, inst: &mut Inst, global_atomics: &mut bool) -> Result<Option<String>, String> {
    let mut call = None;
    // call[.uni] (rets), func, (args);  /  call func, (args);  /  call func;
    let mut k = 0;
    let mut rets = Vec::new();
    if let Some(Operand::List(r)) = cx.ops.first() {
        rets = r.clone();
        k = 1;
    }
    let Some(Operand::Name(fname)) = cx.ops.get(k) else {
        return Err(err(cx.i, "indirect calls are not supported"));
    };
    let args = match cx.ops.get(k + 1) {
        Some(Operand::List(a)) => a.clone(),
        None => vec![],
        _ => return Err(err(cx.i, "bad call arguments")),
    };
    let slot = |n: &String| -> Result<(u32, u32), String> {
        match cx.sc.syms.get(n) {
            Some(SymKind::FParam(o, s)) => Ok((*o, *s)),
            _ => Err(err(cx.i, format!("call argument `{n}` is not a .param"))),
        }
    };
    let arg_slots: Vec<(u32, u32)> = args.iter().map(slot).collect::<Result<_, _>>()?;
    let ret_slots: Vec<(u32, u32)> = rets.iter().map(slot).collect::<Result<_, _>>()?;
    match fname.as_str() {
        "vprintf" => {
            // Output order must not depend on block scheduling.
            *global_atomics = true;
            inst.op = Op::Vprintf;
            inst.off = arg_slots.first().map(|x| x.0 as i64).unwrap_or(0);
            inst.aux = arg_slots.get(1).map(|x| x.0).unwrap_or(0);
            inst.d = ret_slots.first().map(|x| x.0).unwrap_or(NOREG);
        }
        "__assertfail" => {
            inst.op = Op::AssertFail;
            inst.off = arg_slots.first().map(|x| x.0 as i64).unwrap_or(0);
            inst.aux = arg_slots.get(2).map(|x| x.0).unwrap_or(0);
            inst.d = arg_slots.get(1).map(|x| x.0).unwrap_or(0);
        }
        f => {
            let Some((ps, rs)) = cx.funcs.get(f) else {
                return Err(err(cx.i, format!("call to unknown function `{f}`")));
            };
            inst.op = Op::Call;
            let site = CallSite {
                target_pc: 0,
                args: arg_slots
                    .iter()
                    .zip(ps)
                    .map(|(a, p)| (a.0, p.0, p.1.min(a.1)))
                    .collect(),
                rets: rs
                    .iter()
                    .zip(&ret_slots)
                    .map(|(r, c)| (r.0, c.0, r.1.min(c.1)))
                    .collect(),
            };
            CALLS.with(|c| {
                let mut c = c.borrow_mut();
                inst.aux = c.len() as u32;
                c.push(site);
            });
            call = Some(f.to_string());
        }
    }
    Ok(call)
}

/// bar, barrier: bar.warp.sync, bar.red (popc, and, or) and the block barriers, counted or not.
fn bar(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    if cx.has("warp") {
        inst.op = Op::BarWarp;
        inst.a = cx.src(cx.opn(0)?, Ty::U32)?;
    } else if cx.has("red") {
        let bop = if cx.has("popc") {
            BoolOp::None
        } else if cx.has("and") {
            BoolOp::And
        } else if cx.has("or") {
            BoolOp::Or
        } else {
            return cx.unsupported();
        };
        inst.op = Op::BarRed(bop);
        inst.d = cx.dst(cx.opn(0)?)?;
        inst.a = cx.src(cx.opn(1)?, Ty::U32)?;
        let last = cx
            .ops
            .last()
            .ok_or_else(|| err(cx.i, "bar.red needs a predicate"))?;
        match last {
            Operand::NotName(n) => {
                inst.c = Src::R(cx.reg(n)?);
                inst.c_neg = true;
            }
            o => inst.c = cx.src(o, Ty::Pred)?,
        }
        if cx.ops.len() == 4 {
            inst.b = cx.src(cx.opn(2)?, Ty::U32)?;
            inst.aux = 1;
        }
    } else if cx.has("sync") || cx.has("arrive") || cx.mods.is_empty() || cx.has("aligned") {
        inst.op = Op::Bar {
            arrive: cx.has("arrive"),
        };
        inst.a = cx.src(cx.opn(0)?, Ty::U32)?;
        if let Some(o) = cx.ops.get(1) {
            inst.b = cx.src(o, Ty::U32)?;
            inst.aux = 1;
        }
    } else {
        return cx.unsupported();
    }
    Ok(())
}
