//! One PTX instruction into an `Inst`: the opcode split into its base and modifiers, the
//! guard, the modifiers every family shares (rounding, ftz, sat, approx) and the types; then
//! the instruction family's own operands (a file per family, as the interpreter's `exec/` has
//! them); then whether the interpreter has a rule for the operation on that type.

mod arith;
mod compare;
mod control;
mod convert;
mod memory;
mod warp;

use super::{FuncScope, FuncSlots, SymKind, err, sym_addr};
use crate::backend::emu::decode::*;
use crate::backend::emu::float::Rnd;
use crate::backend::emu::parse::{InstAst, Operand, Space};

/// One instruction being lowered: its text split into the opcode's base, modifiers and types,
/// and the scope that resolves its names.
struct Cx<'a> {
    i: &'a InstAst,
    sc: &'a FuncScope,
    funcs: &'a FuncSlots,
    base: &'a str,
    mods: Vec<&'a str>,
    types: Vec<Ty>,
    ty0: Ty,
    ops: &'a [Operand],
}

impl<'a> Cx<'a> {
    fn has(&self, m: &str) -> bool {
        self.mods.contains(&m)
    }

    fn unsupported<T>(&self) -> Result<T, String> {
        Err(err(
            self.i,
            format!("unsupported instruction `{}`", self.i.opcode),
        ))
    }

    fn reg(&self, name: &str) -> Result<u32, String> {
        let (i, sc) = (self.i, self.sc);
        if let Some(r) = sc.regs.get(name) {
            return Ok(*r);
        }
        if let Some(s) = special_index(name) {
            return Ok(s);
        }
        Err(err(i, format!("unknown register `{name}`")))
    }

    fn src(&self, o: &Operand, ty: Ty) -> Result<Src, String> {
        let (i, sc) = (self.i, self.sc);
        Ok(match o {
            Operand::Name(n) => {
                if let Some(r) = sc.regs.get(n) {
                    Src::R(*r)
                } else if let Some(s) = special_index(n) {
                    Src::R(s)
                } else if let Some(k) = sc.syms.get(n) {
                    if matches!(k, SymKind::KParam(_) | SymKind::FParam(..)) {
                        return Err(err(i, "taking the address of a parameter is not supported"));
                    }
                    Src::I(sym_addr(*k))
                } else {
                    return Err(err(i, format!("unknown operand `{n}`")));
                }
            }
            Operand::SymOff(n, off) => match sc.syms.get(n) {
                Some(k) => Src::I(sym_addr(*k).wrapping_add(*off as u64)),
                None => return Err(err(i, format!("unknown symbol `{n}`"))),
            },
            Operand::Int(v) => Src::I(match ty {
                Ty::F32 => (*v as f32).to_bits() as u64,
                Ty::F64 => (*v as f64).to_bits(),
                _ => *v as u64,
            }),
            Operand::F32(b) => Src::I(match ty {
                Ty::F64 => (f32::from_bits(*b) as f64).to_bits(),
                _ => *b as u64,
            }),
            Operand::F64(b) => Src::I(match ty {
                Ty::F32 => (f64::from_bits(*b) as f32).to_bits() as u64,
                _ => *b,
            }),
            _ => return Err(err(i, "unexpected operand form")),
        })
    }

    fn dst(&self, o: &Operand) -> Result<u32, String> {
        let i = self.i;
        match o {
            Operand::Name(n) => self.reg(n),
            _ => Err(err(i, "destination must be a register")),
        }
    }

    fn opn(&self, k: usize) -> Result<&'a Operand, String> {
        let (i, ops) = (self.i, self.ops);
        ops.get(k)
            .ok_or_else(|| err(i, format!("missing operand {}", k + 1)))
    }

    /// The generic 1/2/3-source ALU shape: d, a[, b[, c]].
    fn alu(&self, inst: &mut Inst, n: usize) -> Result<(), String> {
        inst.d = self.dst(self.opn(0)?)?;
        let t = inst.ty;
        inst.a = self.src(self.opn(1)?, t)?;
        if n >= 2 {
            inst.b = self.src(
                self.opn(2)?,
                if matches!(inst.op, Op::Shl | Op::Shr) {
                    Ty::U32
                } else {
                    t
                },
            )?;
        }
        if n >= 3 {
            inst.c = self.src(self.opn(3)?, t)?;
        }
        if n >= 4 {
            inst.e = self.src(self.opn(4)?, t)?;
        }
        Ok(())
    }

    fn mul_mode(&self) -> MulMode {
        if self.has("hi") {
            MulMode::Hi
        } else if self.has("wide") {
            MulMode::Wide
        } else {
            MulMode::Lo
        }
    }

    /// The memory-model qualifiers among the modifiers, as `sem::*` bits.
    fn sem(&self) -> u8 {
        let mut s = 0;
        for m in &self.mods {
            s |= match *m {
                "volatile" => sem::VOLATILE,
                "relaxed" => sem::RELAXED,
                "acquire" => sem::ACQUIRE,
                "release" => sem::RELEASE,
                "acq_rel" | "sc" => sem::ACQUIRE | sem::RELEASE,
                "cta" | "cluster" => sem::CTA,
                "gpu" | "gl" => sem::GPU,
                "sys" => sem::SYS,
                _ => 0,
            };
        }
        s
    }

    fn space_of(&self) -> Option<Space> {
        for m in &self.mods {
            match *m {
                "global" => return Some(Space::Global),
                "shared" => return Some(Space::Shared),
                "local" => return Some(Space::Local),
                "const" => return Some(Space::Const),
                "param" => return Some(Space::Param),
                _ => {}
            }
        }
        None
    }
}

pub(super) fn lower(
    i: &InstAst,
    sc: &FuncScope,
    funcs: &FuncSlots,
    global_atomics: &mut bool,
) -> Result<(Inst, Option<String>), String> {
    // Split `ld.global.v4.f32` into the base and modifiers.
    let mut parts = i.opcode.split('.');
    let base = parts.next().unwrap_or("");
    let mods: Vec<&str> = parts.collect();
    let types: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
    let ty0 = types.first().copied().unwrap_or(Ty::B32);
    let cx = Cx {
        i,
        sc,
        funcs,
        base,
        mods,
        types,
        ty0,
        ops: &i.operands,
    };

    let mut inst = blank(Op::Nop);
    if let Some((g, neg)) = &i.guard {
        inst.guard = cx.reg(g)?;
        inst.guard_neg = *neg;
    }
    for m in &cx.mods {
        match *m {
            "rn" => inst.rnd = Rnd::N,
            "rz" => inst.rnd = Rnd::Z,
            "rm" => inst.rnd = Rnd::M,
            "rp" => inst.rnd = Rnd::P,
            "rni" => (inst.rnd, inst.rnd_int) = (Rnd::N, true),
            "rzi" => (inst.rnd, inst.rnd_int) = (Rnd::Z, true),
            "rmi" => (inst.rnd, inst.rnd_int) = (Rnd::M, true),
            "rpi" => (inst.rnd, inst.rnd_int) = (Rnd::P, true),
            "ftz" => inst.ftz = true,
            "sat" => inst.sat = true,
            "approx" => inst.approx = true,
            _ => {}
        }
    }
    inst.ty = ty0;
    inst.ty2 = cx.types.get(1).copied().unwrap_or(ty0);
    let mut call = None;
    match base {
        "mov" | "prmt" | "cvt" | "cvta" => convert::lower(&cx, &mut inst)?,
        "add" | "sub" | "addc" | "subc" | "mad" | "madc" | "and" | "or" | "xor" | "min" | "max"
        | "div" | "rem" | "shl" | "shr" | "copysign" | "mul" | "mul24" | "fma" | "mad24"
        | "sad" | "dp4a" | "dp2a" => arith::arithmetic(&cx, &mut inst)?,
        "bfind" | "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "rcp" | "sqrt"
        | "rsqrt" | "sin" | "cos" | "ex2" | "lg2" | "tanh" | "bfe" | "bfi" | "shf" | "lop3"
        | "testp" => arith::unary_and_bits(&cx, &mut inst)?,
        "setp" | "set" | "selp" | "slct" => compare::lower(&cx, &mut inst)?,
        "ld" | "ldu" | "st" => memory::ld_st(&cx, &mut inst)?,
        "atom" | "red" => memory::atom(&cx, &mut inst, global_atomics)?,
        "bra" | "brx" | "call" | "ret" | "exit" | "bar" | "barrier" | "membar" | "fence"
        | "prefetch" | "prefetchu" | "nanosleep" | "pmevent" | "brkpt" | "griddepcontrol"
        | "trap" => call = control::lower(&cx, &mut inst, global_atomics)?,
        "shfl" | "vote" | "redux" | "activemask" => warp::lower(&cx, &mut inst)?,
        _ => return cx.unsupported(),
    }
    if !type_ok(inst.op, inst.ty) {
        return Err(err(i, format!("unsupported type for `{base}`")));
    }
    Ok((inst, call))
}

fn blank(op: Op) -> Inst {
    Inst {
        op,
        ty: Ty::B32,
        ty2: Ty::B32,
        d: NOREG,
        d2: NOREG,
        a: Src::I(0),
        b: Src::I(0),
        c: Src::I(0),
        e: Src::I(0),
        guard: NOREG,
        guard_neg: false,
        rnd: Rnd::N,
        rnd_int: false,
        ftz: false,
        sat: false,
        approx: false,
        c_neg: false,
        space: Space::Global,
        vec: 1,
        vregs: [NOREG; 4],
        off: 0,
        aux: 0,
        sem: 0,
    }
}

/// Whether the interpreter has a rule for this operation on this type (the rest of PTX's
/// combinations are load errors rather than silently wrong results).
fn type_ok(op: Op, ty: Ty) -> bool {
    let half = matches!(ty, Ty::F16 | Ty::BF16 | Ty::F16x2 | Ty::BF16x2);
    let wide_float = matches!(ty, Ty::F32 | Ty::F64);
    match op {
        Op::Add
        | Op::Sub
        | Op::Min
        | Op::Max
        | Op::Neg
        | Op::Abs
        | Op::Mul(MulMode::Lo)
        | Op::Fma => true,
        Op::Mul(_) | Op::Mad(_) => !ty.float(),
        Op::Div | Op::Rcp | Op::Sqrt | Op::Rsqrt | Op::Copysign => {
            !half && (wide_float || (op == Op::Div && !ty.float()))
        }
        Op::Sin | Op::Cos | Op::Ex2 | Op::Lg2 | Op::Tanh => ty == Ty::F32,
        Op::Testp(_) => wide_float,
        Op::Rem
        | Op::And
        | Op::Or
        | Op::Xor
        | Op::Not
        | Op::CNot
        | Op::Shl
        | Op::Shr
        | Op::Popc
        | Op::Clz
        | Op::Brev
        | Op::Bfe
        | Op::Bfi
        | Op::Prmt
        | Op::Lop3
        | Op::Mul24(_)
        | Op::Mad24(_)
        | Op::Sad
        | Op::Dp4a { .. }
        | Op::Dp2a { .. }
        | Op::Bfind { .. }
        | Op::Carry { .. } => !ty.float(),
        _ => true,
    }
}
