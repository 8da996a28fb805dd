//! Loads, stores and atomics (ld, ldu, st; atom, red): the state space, the address (a
//! register, a symbol, a parameter's slot) and offset, and the data registers.

use super::super::{SymKind, err, sym_addr};
use super::Cx;
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::{Operand, Space};

/// ld, ldu and st: a kernel parameter's `ld.param` becomes `LdKParam`.
pub(super) fn ld_st(cx: &Cx, inst: &mut Inst) -> Result<(), String> {
    let is_ld = cx.base != "st";
    inst.op = if is_ld { Op::Ld } else { Op::St };
    inst.sem = cx.sem();
    inst.vec = if cx.has("v2") {
        2
    } else if cx.has("v4") {
        4
    } else {
        1
    };
    let sp = cx.space_of();
    let (data, addr) = if is_ld {
        (cx.opn(0)?, cx.opn(1)?)
    } else {
        (cx.opn(1)?, cx.opn(0)?)
    };
    let Operand::Addr { base: abase, off } = addr else {
        return Err(err(cx.i, "expected a [address] operand"));
    };
    inst.off = *off;
    match abase {
        Some(n) => {
            if let Some(r) = cx.sc.regs.get(n) {
                inst.a = Src::R(*r);
            } else if let Some(k) = cx.sc.syms.get(n) {
                match (k, sp) {
                    (SymKind::KParam(o), Some(Space::Param)) if is_ld => {
                        inst.op = Op::LdKParam;
                        inst.off += *o as i64;
                    }
                    (SymKind::FParam(o, _), Some(Space::Param)) => {
                        inst.a = Src::I(0);
                        inst.off += *o as i64;
                    }
                    (SymKind::KParam(_), _) | (SymKind::FParam(..), _) => {
                        return Err(err(
                            cx.i,
                            "taking the address of a parameter is not supported",
                        ));
                    }
                    (k, _) => inst.a = Src::I(sym_addr(*k)),
                }
            } else {
                return Err(err(cx.i, format!("unknown address base `{n}`")));
            }
        }
        None => inst.a = Src::I(0),
    }
    inst.space = match sp {
        Some(s) => s,
        None => {
            inst.aux = 1; // generic
            Space::Global
        }
    };
    if inst.space == Space::Param && inst.op != Op::LdKParam && matches!(inst.a, Src::R(_)) {
        return Err(err(
            cx.i,
            "param-space access through a register is not supported",
        ));
    }
    let mut regs = Vec::new();
    match data {
        Operand::Vec(v) => {
            for o in v {
                regs.push(match o {
                    Operand::Name(n) if n == "_" => NOREG,
                    Operand::Name(n) => cx.reg(n)?,
                    o if !is_ld => match cx.src(o, cx.ty0)? {
                        Src::R(r) => r,
                        Src::I(_) => {
                            return Err(err(
                                cx.i,
                                "immediate vector store operands are not supported",
                            ));
                        }
                    },
                    _ => return Err(err(cx.i, "bad vector operand")),
                });
            }
        }
        Operand::Name(n) => regs.push(cx.reg(n)?),
        o if !is_ld => {
            inst.b = cx.src(o, cx.ty0)?;
            regs.push(NOREG);
        }
        _ => return Err(err(cx.i, "bad load destination")),
    }
    if regs.len() != inst.vec as usize {
        return Err(err(cx.i, "vector width does not match the operand"));
    }
    inst.vregs[..regs.len()].copy_from_slice(&regs);
    if let Some(r) = regs.first()
        && *r != NOREG
        && !is_ld
    {
        inst.b = Src::R(*r);
    }
    if cx.ty0 == Ty::B128 {
        return cx.unsupported();
    }
    Ok(())
}

/// atom and red (red: no destination); a global one marks the kernel's launch as order-sensitive.
pub(super) fn atom(cx: &Cx, inst: &mut Inst, global_atomics: &mut bool) -> Result<(), String> {
    let aop = [
        ("add", AtomOp::Add),
        ("min", AtomOp::Min),
        ("max", AtomOp::Max),
        ("inc", AtomOp::Inc),
        ("dec", AtomOp::Dec),
        ("exch", AtomOp::Exch),
        ("cas", AtomOp::Cas),
        ("and", AtomOp::And),
        ("or", AtomOp::Or),
        ("xor", AtomOp::Xor),
    ]
    .iter()
    .find(|(n, _)| cx.has(n))
    .map(|x| x.1)
    .ok_or_else(|| err(cx.i, "atomic without an operation"))?;
    if cx.has("v2")
        || cx.has("v4")
        || cx.has("v8")
        || cx.ty0 == Ty::F16x2
        || cx.ty0 == Ty::BF16x2
        || cx.ty0 == Ty::B128
    {
        return cx.unsupported();
    }
    inst.op = Op::Atom(aop);
    inst.sem = cx.sem();
    let sp = cx.space_of();
    inst.space = sp.unwrap_or(Space::Global);
    if sp.is_none() {
        inst.aux = 1;
    }
    if matches!(inst.space, Space::Global) {
        *global_atomics = true;
    }
    let mut k = 0;
    if cx.base == "atom" {
        inst.d = cx.dst(cx.opn(0)?)?;
        k = 1;
    }
    let Operand::Addr { base: abase, off } = cx.opn(k)? else {
        return Err(err(cx.i, "expected a [address] operand"));
    };
    inst.off = *off;
    inst.a = match abase {
        Some(n) => match cx.sc.regs.get(n) {
            Some(r) => Src::R(*r),
            None => match cx.sc.syms.get(n) {
                Some(s) => Src::I(sym_addr(*s)),
                None => return Err(err(cx.i, format!("unknown address base `{n}`"))),
            },
        },
        None => Src::I(0),
    };
    inst.b = cx.src(cx.opn(k + 1)?, cx.ty0)?;
    if aop == AtomOp::Cas {
        inst.c = cx.src(cx.opn(k + 2)?, cx.ty0)?;
    }
    Ok(())
}
