//! Lowering parsed PTX into the compact program the interpreter runs: every register gets a
//! slot number, every symbol an address, every label a program counter, and every opcode
//! string its `Op` plus typed modifiers. Nothing textual is left for run time.

use super::float::Rnd;
use super::parse::{InstAst, Module, Operand, Space, Stmt, VarDecl, type_size};
use std::collections::HashMap;

/// Generic-address windows: a generic pointer into shared/local/const space is its
/// space-relative offset plus the window base. Global addresses are used as they are.
pub const SHARED_WIN: u64 = 0x0000_7f00_0000_0000;
pub const LOCAL_WIN: u64 = 0x0000_7e00_0000_0000;
pub const CONST_WIN: u64 = 0x0000_7d00_0000_0000;
pub const WIN_SIZE: u64 = 1 << 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    B8,
    B16,
    B32,
    B64,
    B128,
    F16,
    BF16,
    F16x2,
    BF16x2,
    F32,
    F64,
    Pred,
}

impl Ty {
    pub fn parse(s: &str) -> Option<Ty> {
        Some(match s {
            "u8" => Ty::U8,
            "u16" => Ty::U16,
            "u32" => Ty::U32,
            "u64" => Ty::U64,
            "s8" => Ty::S8,
            "s16" => Ty::S16,
            "s32" => Ty::S32,
            "s64" => Ty::S64,
            "b8" => Ty::B8,
            "b16" => Ty::B16,
            "b32" => Ty::B32,
            "b64" => Ty::B64,
            "b128" => Ty::B128,
            "f16" => Ty::F16,
            "bf16" => Ty::BF16,
            "f16x2" => Ty::F16x2,
            "bf16x2" => Ty::BF16x2,
            "f32" => Ty::F32,
            "f64" => Ty::F64,
            "pred" => Ty::Pred,
            _ => return None,
        })
    }
    pub fn bytes(self) -> u32 {
        match self {
            Ty::U8 | Ty::S8 | Ty::B8 | Ty::Pred => 1,
            Ty::U16 | Ty::S16 | Ty::B16 | Ty::F16 | Ty::BF16 => 2,
            Ty::U32 | Ty::S32 | Ty::B32 | Ty::F32 | Ty::F16x2 | Ty::BF16x2 => 4,
            Ty::U64 | Ty::S64 | Ty::B64 | Ty::F64 => 8,
            Ty::B128 => 16,
        }
    }
    pub fn bits(self) -> u32 {
        self.bytes() * 8
    }
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    pub fn float(self) -> bool {
        matches!(
            self,
            Ty::F16 | Ty::BF16 | Ty::F32 | Ty::F64 | Ty::F16x2 | Ty::BF16x2
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    R(u32),
    I(u64),
}

pub const NOREG: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoolOp {
    None,
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulMode {
    Lo,
    Hi,
    Wide,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    Inc,
    Dec,
    Exch,
    Cas,
    And,
    Or,
    Xor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// Special registers whose value changes while a kernel runs (see `specials`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Clock,
    ClockHi,
    Clock64,
    GlobalTimer,
    GlobalTimerLo,
    GlobalTimerHi,
}

impl Special {
    pub fn parse(name: &str) -> Option<Special> {
        Some(match name {
            "%clock" => Special::Clock,
            "%clock_hi" => Special::ClockHi,
            "%clock64" => Special::Clock64,
            "%globaltimer" => Special::GlobalTimer,
            "%globaltimer_lo" => Special::GlobalTimerLo,
            "%globaltimer_hi" => Special::GlobalTimerHi,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Mov,
    Pack,
    Unpack,
    Add,
    Sub,
    Mul(MulMode),
    Mad(MulMode),
    Mul24(MulMode),
    Mad24(MulMode),
    Sad,
    /// `dp4a`: four byte products added to c; `dp2a`: two 16-bit × byte products (`hi`: b's
    /// upper two bytes). Signedness of a's and b's parts as the two types say.
    Dp4a {
        a_signed: bool,
        b_signed: bool,
    },
    Dp2a {
        hi: bool,
        a_signed: bool,
        b_signed: bool,
    },
    Div,
    Rem,
    Abs,
    Neg,
    Min,
    Max,
    And,
    Or,
    Xor,
    Not,
    CNot,
    Shl,
    Shr,
    Popc,
    Clz,
    Brev,
    Bfe,
    Bfi,
    Prmt,
    Shf {
        left: bool,
        clamp: bool,
    },
    Lop3,
    Copysign,
    /// add/sub/mad with carry: (subtract, multiply mode, carry in, carry out).
    Carry {
        sub: bool,
        mul: Option<MulMode>,
        cin: bool,
        cout: bool,
    },
    Bfind {
        shiftamt: bool,
    },
    Fma,
    Rcp,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Ex2,
    Lg2,
    Tanh,
    Testp(u8),
    Setp(Cmp, BoolOp),
    Set(Cmp, BoolOp),
    Selp,
    Slct,
    Cvt,
    /// cvta: `to` converts generic -> space, otherwise space -> generic.
    Cvta {
        to: bool,
    },
    Ld,
    St,
    /// `ld.param` of a kernel parameter: the same value in every lane.
    LdKParam,
    Atom(AtomOp),
    Bra,
    Call,
    Ret,
    Exit,
    Bar {
        arrive: bool,
    },
    BarRed(BoolOp),
    BarWarp,
    Nop,
    Shfl(ShflMode),
    Vote(VoteMode),
    Redux(AtomOp),
    Activemask,
    Trap,
    ReadSpecial(Special),
    Vprintf,
    AssertFail,
}

impl Op {
    /// Ends straight-line code: a branch, call, return, exit, trap or block barrier.
    pub fn is_control(self) -> bool {
        matches!(
            self,
            Op::Bra | Op::Call | Op::Ret | Op::Exit | Op::Bar { .. } | Op::BarRed(_) | Op::Trap
        )
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Inst {
    pub op: Op,
    pub ty: Ty,
    /// Source type for cvt/set, the compare type for set.
    pub ty2: Ty,
    pub d: u32,
    /// Second destination (`%r|%p`), or NOREG.
    pub d2: u32,
    pub a: Src,
    pub b: Src,
    pub c: Src,
    pub e: Src,
    pub guard: u32,
    pub guard_neg: bool,
    pub rnd: Rnd,
    /// cvt/rounding to integral (`.rni`).
    pub rnd_int: bool,
    pub ftz: bool,
    pub sat: bool,
    pub approx: bool,
    /// `!%p` third operand of setp/selp combine.
    pub c_neg: bool,
    pub space: Space,
    /// Vector width of ld/st (1, 2, 4); `vregs` hold the lanes' registers.
    pub vec: u8,
    pub vregs: [u32; 4],
    /// Memory offset, branch target, call index, or barrier id depending on op.
    pub off: i64,
    pub aux: u32,
}

/// Where a `call` copies arguments from and results to (function-parameter slots).
#[derive(Debug, Clone)]
pub struct CallSite {
    pub target_pc: u32,
    /// (caller slot offset, callee slot offset, bytes) for each argument.
    pub args: Vec<(u32, u32, u32)>,
    /// (callee slot offset, caller slot offset, bytes) for each return value.
    pub rets: Vec<(u32, u32, u32)>,
}

/// A function's parameter and return-value slots: (offset, bytes) each.
type FuncSlots = HashMap<String, (Vec<(u32, u32)>, Vec<(u32, u32)>)>;

#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub entry_pc: u32,
    pub param_offsets: Vec<u32>,
    pub param_sizes: Vec<usize>,
    pub param_bytes: usize,
    pub static_shared: u32,
    /// Offset where dynamic (`extern`) shared memory starts: after every static variable
    /// the kernel (or a callee) declares, at the extern declaration's alignment, as on a GPU.
    pub dyn_shared_base: u32,
    pub local_bytes: u32,
    pub uses_global_atomics: bool,
}

#[derive(Debug, Clone)]
pub struct Global {
    pub name: String,
    pub space: Space,
    pub size: u64,
    pub init: Vec<u8>,
    /// Address (global) or const-bank offset.
    pub addr: u64,
    /// (byte offset, symbol) initializers that need the address of another symbol.
    pub sym_init: Vec<(usize, String)>,
}

#[derive(Debug, Clone, Default)]
pub struct Program {
    pub insts: Vec<Inst>,
    pub texts: Vec<String>,
    /// (file index, line) per instruction, or (0, 0) when unknown.
    pub locs: Vec<(u32, u32)>,
    pub files: HashMap<u32, String>,
    pub kernels: Vec<Kernel>,
    pub globals: Vec<Global>,
    pub calls: Vec<CallSite>,
    pub nregs: u32,
    pub fparam_bytes: u32,
    /// [start, end) program counters of each function body.
    pub func_ranges: Vec<(u32, u32)>,
    pub const_bytes: u64,
    pub global_bytes: u64,
}

pub const SPECIALS: &[&str] = &[
    "%tid.x",
    "%tid.y",
    "%tid.z",
    "%ntid.x",
    "%ntid.y",
    "%ntid.z",
    "%ctaid.x",
    "%ctaid.y",
    "%ctaid.z",
    "%nctaid.x",
    "%nctaid.y",
    "%nctaid.z",
    "%laneid",
    "%warpid",
    "%nwarpid",
    "%smid",
    "%nsmid",
    "%gridid",
    "%lanemask_eq",
    "%lanemask_lt",
    "%lanemask_le",
    "%lanemask_gt",
    "%lanemask_ge",
    "%dynamic_smem_size",
    "%total_smem_size",
    "%warpsize",
    // A launch without clusters: every block is a cluster of one (sm_90).
    "%clusterid.x",
    "%clusterid.y",
    "%clusterid.z",
    "%nclusterid.x",
    "%nclusterid.y",
    "%nclusterid.z",
    "%cluster_ctaid.x",
    "%cluster_ctaid.y",
    "%cluster_ctaid.z",
    "%cluster_nctaid.x",
    "%cluster_nctaid.y",
    "%cluster_nctaid.z",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%is_explicit_cluster",
    "%aggr_smem_size",
    "%reserved_smem_offset_begin",
    "%reserved_smem_offset_end",
    "%reserved_smem_offset_cap",
    "%current_graph_exec",
    // Performance-monitor counters: 0 unless a profiler counts.
    "%pm0",
    "%pm1",
    "%pm2",
    "%pm3",
    "%pm4",
    "%pm5",
    "%pm6",
    "%pm7",
    "%pm0_64",
    "%pm1_64",
    "%pm2_64",
    "%pm3_64",
    "%pm4_64",
    "%pm5_64",
    "%pm6_64",
    "%pm7_64",
    // The carry flag of add.cc/addc/mad.cc chains, per lane.
    "%__cc",
];

pub fn special_index(name: &str) -> Option<u32> {
    // `%tid` without a component means `.x` in some hand-written PTX.
    let n = match name {
        "%tid" | "%ntid" | "%ctaid" | "%nctaid" | "%clusterid" | "%nclusterid"
        | "%cluster_ctaid" | "%cluster_nctaid" => return special_index(&format!("{name}.x")),
        n => n,
    };
    SPECIALS.iter().position(|s| *s == n).map(|p| p as u32)
}

#[derive(Debug, Clone, Copy)]
enum SymKind {
    /// Kernel parameter at this offset of the parameter buffer.
    KParam(u32),
    /// Function parameter/retval slot at this offset of the per-lane slot area.
    FParam(u32, u32),
    Shared(u64),
    Local(u64),
    Global(u64),
    Const(u64),
}

fn err(i: &InstAst, msg: impl std::fmt::Display) -> String {
    format!("PTX line {}: {msg} in `{}`", i.line, i.text)
}

struct FuncScope {
    regs: HashMap<String, u32>,
    syms: HashMap<String, SymKind>,
    labels: HashMap<String, u32>,
}

fn decode(m: &Module) -> Result<Program, String> {
    let mut prog = Program {
        // Reports name the student's file, not the directory NVRTC ran in.
        files: m
            .files
            .iter()
            .map(|(k, v)| (*k, v.rsplit(['/', '\\']).next().unwrap_or(v).to_string()))
            .collect(),
        ..Default::default()
    };
    let mut module_syms: HashMap<String, SymKind> = HashMap::new();
    // Module-level variables: global arena and const bank addresses are offsets here; the
    // backend rebases global ones when it places them.
    let mut gcur = 0u64;
    let mut ccur = 0u64;
    let mut module_shared = 0u64;
    let mut module_dyn_align = 16u32;
    for v in &m.globals {
        let align = v.align.max(1) as u64;
        let (kind, addr) = match v.space {
            Space::Global => {
                gcur = gcur.next_multiple_of(align);
                let a = gcur;
                gcur += v.size().max(1);
                (SymKind::Global(a), MODULE_GLOBAL_BASE + a)
            }
            Space::Const => {
                ccur = ccur.next_multiple_of(align);
                let a = ccur;
                ccur += v.size().max(1);
                (SymKind::Const(a), a)
            }
            // NVRTC declares `extern __shared__` arrays at module scope; each kernel places
            // them after its own static variables (resolved per function below).
            Space::Shared if v.array == Some(None) => {
                module_dyn_align = module_dyn_align.max(v.align);
                (SymKind::Shared(DYN_SHARED), 0)
            }
            Space::Shared => {
                module_shared = module_shared.next_multiple_of(align);
                let a = module_shared;
                module_shared += v.size();
                (SymKind::Shared(a), a)
            }
            _ => {
                return Err(format!(
                    "PTX line {}: unsupported module-level variable space",
                    v.line
                ));
            }
        };
        module_syms.insert(v.name.clone(), kind);
        if matches!(v.space, Space::Global | Space::Const) {
            let (init, sym_init) = init_bytes(v)?;
            prog.globals.push(Global {
                name: v.name.clone(),
                space: v.space,
                size: v.size(),
                init,
                addr,
                sym_init,
            });
        }
    }
    prog.const_bytes = ccur;
    prog.global_bytes = gcur;

    // Function parameter slots (per lane) and entry points are laid out before bodies so
    // calls can refer forward.
    let mut fparam = 0u32;
    let mut func_params: FuncSlots = HashMap::new();
    for f in &m.funcs {
        if f.is_entry {
            continue;
        }
        let mut slot = |v: &VarDecl| {
            let a = v.align.max(1);
            fparam = fparam.next_multiple_of(a);
            let o = fparam;
            fparam += v.size().max(1) as u32;
            (o, v.size() as u32)
        };
        let ps: Vec<_> = f.params.iter().map(&mut slot).collect();
        let rs: Vec<_> = f.rets.iter().map(&mut slot).collect();
        func_params.insert(f.name.clone(), (ps, rs));
    }

    // Dynamic shared memory starts after the static variables. A non-inlined callee cannot
    // know which kernel called it, so with callees every kernel uses the module-wide base.
    let shared_layouts: Vec<(u64, u32)> = m
        .funcs
        .iter()
        .map(|f| static_shared_layout(f.body.as_deref().unwrap_or(&[]), module_shared))
        .collect();
    let has_callees = m.funcs.iter().any(|f| !f.is_entry && f.body.is_some());
    let module_dyn_base = shared_layouts
        .iter()
        .fold((module_shared, module_dyn_align), |(e, a), &(fe, fa)| {
            (e.max(fe), a.max(fa))
        });
    let module_dyn_base = module_dyn_base.0.next_multiple_of(module_dyn_base.1 as u64);

    prog.nregs = SPECIALS.len() as u32;
    let mut func_entry: HashMap<String, u32> = HashMap::new();
    let mut pending_calls: Vec<(usize, String)> = Vec::new();
    for (f, &(own_end, own_align)) in m.funcs.iter().zip(&shared_layouts) {
        let Some(body) = &f.body else { continue };
        let entry_pc = prog.insts.len() as u32;
        func_entry.insert(f.name.clone(), entry_pc);
        let mut sc = FuncScope {
            regs: HashMap::new(),
            syms: module_syms.clone(),
            labels: HashMap::new(),
        };
        let mut param_offsets = Vec::new();
        let mut param_sizes = Vec::new();
        let mut pcur = 0u32;
        if f.is_entry {
            for p in &f.params {
                pcur = pcur.next_multiple_of(p.align.max(1));
                sc.syms.insert(p.name.clone(), SymKind::KParam(pcur));
                param_offsets.push(pcur);
                param_sizes.push(p.size() as usize);
                pcur += p.size() as u32;
            }
        } else {
            let (ps, rs) = &func_params[&f.name];
            for (p, (o, s)) in f.params.iter().zip(ps) {
                sc.syms.insert(p.name.clone(), SymKind::FParam(*o, *s));
            }
            for (p, (o, s)) in f.rets.iter().zip(rs) {
                sc.syms.insert(p.name.clone(), SymKind::FParam(*o, *s));
            }
        }
        // First pass: declarations and labels.
        let mut shared = module_shared;
        let mut local = 0u64;
        let mut pc = entry_pc;
        for s in body {
            match s {
                Stmt::Reg { ty, names } => {
                    if ty != "pred" && Ty::parse(ty).is_none() {
                        return Err(format!("unsupported register type `.{ty}` in `{}`", f.name));
                    }
                    for (n, count) in names {
                        if prog.nregs.saturating_add(count.unwrap_or(1)) > MAX_REGS {
                            return Err(format!(
                                "`{}` declares more registers than the emulator allows ({MAX_REGS})",
                                f.name
                            ));
                        }
                        match count {
                            Some(c) => {
                                for k in 0..*c {
                                    sc.regs.insert(format!("{n}{k}"), prog.nregs);
                                    prog.nregs += 1;
                                }
                            }
                            None => {
                                sc.regs.insert(n.clone(), prog.nregs);
                                prog.nregs += 1;
                            }
                        }
                    }
                }
                Stmt::Var(v) => {
                    let a = v.align.max(1) as u64;
                    match v.space {
                        Space::Shared if v.array == Some(None) => {
                            // Resolved after static layout is known.
                            sc.syms.insert(v.name.clone(), SymKind::Shared(DYN_SHARED));
                        }
                        Space::Shared => {
                            shared = shared.next_multiple_of(a);
                            sc.syms.insert(v.name.clone(), SymKind::Shared(shared));
                            shared += v.size();
                        }
                        Space::Local => {
                            local = local.next_multiple_of(a);
                            sc.syms.insert(v.name.clone(), SymKind::Local(local));
                            local += v.size();
                        }
                        Space::Param => {
                            if !matches!(sc.syms.get(&v.name), Some(SymKind::FParam(_, s)) if *s as u64 >= v.size())
                            {
                                fparam = fparam.next_multiple_of(v.align.max(1));
                                sc.syms.insert(
                                    v.name.clone(),
                                    SymKind::FParam(fparam, v.size() as u32),
                                );
                                fparam += v.size().max(1) as u32;
                            }
                        }
                        _ => {
                            return Err(format!(
                                "PTX line {}: unsupported variable space in a function",
                                v.line
                            ));
                        }
                    }
                }
                Stmt::Label(l) => {
                    sc.labels.insert(l.clone(), pc);
                }
                Stmt::Inst(_) => pc += 1,
                Stmt::Loc { .. } => {}
            }
        }
        debug_assert_eq!(shared, own_end);
        let dyn_base = if has_callees {
            module_dyn_base
        } else {
            own_end.next_multiple_of(own_align.max(module_dyn_align) as u64)
        };
        for v in sc.syms.values_mut() {
            if let SymKind::Shared(o) = v
                && *o == DYN_SHARED
            {
                *o = dyn_base;
            }
        }
        // Second pass: instructions.
        let mut cur_loc = (0u32, 0u32);
        let mut global_atomics = false;
        for s in body {
            match s {
                Stmt::Loc { file, line } => cur_loc = (*file, *line),
                Stmt::Inst(i) => {
                    let (inst, call) = lower(i, &sc, &func_params, &mut global_atomics)?;
                    if let Some(name) = call {
                        pending_calls.push((prog.insts.len(), name));
                    }
                    prog.insts.push(inst);
                    prog.texts.push(i.text.clone());
                    prog.locs.push(cur_loc);
                }
                _ => {}
            }
        }
        prog.func_ranges.push((entry_pc, prog.insts.len() as u32));
        if f.is_entry {
            prog.kernels.push(Kernel {
                name: f.name.clone(),
                entry_pc,
                param_offsets,
                param_sizes,
                param_bytes: pcur as usize,
                static_shared: shared as u32,
                dyn_shared_base: dyn_base as u32,
                local_bytes: local as u32,
                uses_global_atomics: global_atomics,
            });
        } else {
            // Callee properties (local frame, atomics) fold into kernels below.
            prog.kernels.push(Kernel {
                name: format!("\0func:{}", f.name),
                entry_pc,
                param_offsets: vec![],
                param_sizes: vec![],
                param_bytes: 0,
                static_shared: shared as u32,
                dyn_shared_base: dyn_base as u32,
                local_bytes: local as u32,
                uses_global_atomics: global_atomics,
            });
        }
    }
    // Resolve calls now that every body has a program counter.
    prog.calls = CALLS.with(|c| c.take());
    for (idx, name) in pending_calls {
        let site = prog.insts[idx].aux as usize;
        match func_entry.get(&name) {
            Some(pc) => prog.calls[site].target_pc = *pc,
            // e.g. device `malloc`/`free`, declared `.extern .func` with no body in the module.
            None => {
                return Err(format!(
                    "`call {name}`: the function has no body in this module (device malloc/free and other external functions are not supported by the emulator)"
                ));
            }
        }
    }
    prog.fparam_bytes = fparam;
    // Hostile PTX must not make the emulator allocate without bound.
    if prog.nregs > MAX_REGS {
        return Err(format!(
            "the module declares {} registers; the emulator allows {MAX_REGS}",
            prog.nregs
        ));
    }
    if prog.global_bytes + prog.const_bytes > MAX_MODULE_BYTES || fparam > 1 << 20 {
        return Err("module variables are too large for the emulator (over 1 GiB)".into());
    }
    // Functions share one frame each (no recursion): a kernel's local size covers callees.
    let func_local: u32 = prog
        .kernels
        .iter()
        .filter(|k| k.name.starts_with('\0'))
        .map(|k| k.local_bytes)
        .sum();
    let func_atomics = prog
        .kernels
        .iter()
        .any(|k| k.name.starts_with('\0') && k.uses_global_atomics);
    let func_shared: u32 = prog
        .kernels
        .iter()
        .filter(|k| k.name.starts_with('\0'))
        .map(|k| k.static_shared)
        .max()
        .unwrap_or(0);
    prog.kernels.retain(|k| !k.name.starts_with('\0'));
    for k in &mut prog.kernels {
        k.local_bytes += func_local;
        k.uses_global_atomics |= func_atomics;
        k.static_shared = k.static_shared.max(func_shared);
    }
    Ok(prog)
}

/// Placeholder offset of `extern .shared` arrays until their function's base is known.
const DYN_SHARED: u64 = u64::MAX;

/// End of a function's static shared variables laid out from `start`, and the alignment its
/// own `extern .shared` declarations ask for (at least 16).
fn static_shared_layout(body: &[Stmt], start: u64) -> (u64, u32) {
    let mut end = start;
    let mut align = 16u32;
    for s in body {
        if let Stmt::Var(v) = s
            && matches!(v.space, Space::Shared)
        {
            if v.array == Some(None) {
                align = align.max(v.align);
            } else {
                end = end.next_multiple_of(v.align.max(1) as u64) + v.size();
            }
        }
    }
    (end, align)
}

/// Initial bytes of a variable, and the (offset, symbol) places that hold addresses.
type InitBytes = (Vec<u8>, Vec<(usize, String)>);

fn init_bytes(v: &VarDecl) -> Result<InitBytes, String> {
    let es = type_size(&v.ty).unwrap_or(1) as usize;
    let mut out = Vec::new();
    let mut syms = Vec::new();
    for x in &v.init {
        match x {
            super::parse::Init::Int(i) => out.extend_from_slice(&(*i as u128).to_le_bytes()[..es]),
            super::parse::Init::F32(b) => {
                let bits = if es == 8 {
                    (f32::from_bits(*b) as f64).to_bits()
                } else {
                    *b as u64
                };
                out.extend_from_slice(&bits.to_le_bytes()[..es]);
            }
            super::parse::Init::F64(b) => {
                let bits = if es == 4 {
                    (f64::from_bits(*b) as f32).to_bits() as u64
                } else {
                    *b
                };
                out.extend_from_slice(&bits.to_le_bytes()[..es.min(8)]);
            }
            super::parse::Init::Sym(s) => {
                syms.push((out.len(), s.clone()));
                out.extend_from_slice(&[0u8; 8][..es.min(8)]);
            }
        }
    }
    Ok((out, syms))
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
    }
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

fn lower(
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
    let has = |m: &str| mods.contains(&m);
    let unsupported = || Err(err(i, format!("unsupported instruction `{}`", i.opcode)));

    let reg = |name: &str| -> Result<u32, String> {
        if let Some(r) = sc.regs.get(name) {
            return Ok(*r);
        }
        if let Some(s) = special_index(name) {
            return Ok(s);
        }
        Err(err(i, format!("unknown register `{name}`")))
    };
    let src = |o: &Operand, ty: Ty| -> Result<Src, String> {
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
    };
    let dst = |o: &Operand| -> Result<u32, String> {
        match o {
            Operand::Name(n) => reg(n),
            _ => Err(err(i, "destination must be a register")),
        }
    };
    let ops = &i.operands;
    let opn = |k: usize| -> Result<&Operand, String> {
        ops.get(k)
            .ok_or_else(|| err(i, format!("missing operand {}", k + 1)))
    };

    let mut inst = blank(Op::Nop);
    if let Some((g, neg)) = &i.guard {
        inst.guard = reg(g)?;
        inst.guard_neg = *neg;
    }
    for m in &mods {
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
    let ty0 = types.first().copied().unwrap_or(Ty::B32);
    inst.ty = ty0;
    inst.ty2 = types.get(1).copied().unwrap_or(ty0);
    let mut call = None;

    // Generic 1/2/3-source ALU shape: d, a[, b[, c]].
    let alu = |inst: &mut Inst, n: usize| -> Result<(), String> {
        inst.d = dst(opn(0)?)?;
        let t = inst.ty;
        inst.a = src(opn(1)?, t)?;
        if n >= 2 {
            inst.b = src(
                opn(2)?,
                if matches!(inst.op, Op::Shl | Op::Shr) {
                    Ty::U32
                } else {
                    t
                },
            )?;
        }
        if n >= 3 {
            inst.c = src(opn(3)?, t)?;
        }
        if n >= 4 {
            inst.e = src(opn(4)?, t)?;
        }
        Ok(())
    };
    let mul_mode = || {
        if has("hi") {
            MulMode::Hi
        } else if has("wide") {
            MulMode::Wide
        } else {
            MulMode::Lo
        }
    };
    let space_of = |mods: &[&str]| {
        for m in mods {
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
    };
    match base {
        "mov" => {
            if types.is_empty() {
                return unsupported();
            }
            match (opn(0)?, opn(1)?) {
                (Operand::Vec(v), a) => {
                    inst.op = Op::Unpack;
                    for (k, r) in v.iter().enumerate().take(4) {
                        inst.vregs[k] = match r {
                            Operand::Name(n) if n == "_" => NOREG,
                            o => dst(o)?,
                        };
                    }
                    inst.vec = v.len() as u8;
                    inst.a = src(a, ty0)?;
                }
                (d, Operand::Vec(v)) => {
                    inst.op = Op::Pack;
                    inst.d = dst(d)?;
                    for (k, r) in v.iter().enumerate().take(4) {
                        inst.vregs[k] = dst(r)?;
                    }
                    inst.vec = v.len() as u8;
                }
                (d, Operand::Name(n)) if Special::parse(n).is_some() => {
                    inst.op = Op::ReadSpecial(Special::parse(n).unwrap_or(Special::Clock64));
                    inst.d = dst(d)?;
                }
                _ => {
                    inst.op = Op::Mov;
                    alu(&mut inst, 1)?;
                }
            }
        }
        "add" | "sub" | "addc" | "subc" if has("cc") || base.ends_with('c') => {
            inst.op = Op::Carry {
                sub: base.starts_with("sub"),
                mul: None,
                cin: base.ends_with('c'),
                cout: has("cc"),
            };
            alu(&mut inst, 2)?;
        }
        "mad" | "madc" if has("cc") || base == "madc" => {
            inst.op = Op::Carry {
                sub: false,
                mul: Some(if has("hi") { MulMode::Hi } else { MulMode::Lo }),
                cin: base == "madc",
                cout: has("cc"),
            };
            alu(&mut inst, 3)?;
        }
        "bfind" => {
            inst.op = Op::Bfind {
                shiftamt: has("shiftamt"),
            };
            alu(&mut inst, 1)?;
        }
        "add" | "sub" | "and" | "or" | "xor" | "min" | "max" | "div" | "rem" | "shl" | "shr"
        | "copysign" => {
            inst.op = match base {
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
                && !matches!(base, "add" | "sub" | "min" | "max")
            {
                return unsupported();
            }
            alu(&mut inst, 2)?;
        }
        "mul" => {
            inst.op = Op::Mul(mul_mode());
            alu(&mut inst, 2)?;
        }
        "mul24" => {
            inst.op = Op::Mul24(mul_mode());
            alu(&mut inst, 2)?;
        }
        "mad" | "fma" => {
            inst.op = if inst.ty.float() {
                Op::Fma
            } else {
                Op::Mad(mul_mode())
            };
            if has("cc") {
                return unsupported();
            }
            alu(&mut inst, 3)?;
        }
        "mad24" => {
            inst.op = Op::Mad24(mul_mode());
            alu(&mut inst, 3)?;
        }
        "sad" => {
            inst.op = Op::Sad;
            alu(&mut inst, 3)?;
        }
        "dp4a" | "dp2a" => {
            let a_signed = ty0 == Ty::S32;
            let b_signed = inst.ty2 == Ty::S32;
            inst.op = if base == "dp4a" {
                Op::Dp4a { a_signed, b_signed }
            } else {
                Op::Dp2a {
                    hi: has("hi"),
                    a_signed,
                    b_signed,
                }
            };
            // d and c are s32 unless both parts are unsigned; the sum wraps at 32 bits.
            inst.ty = Ty::U32;
            alu(&mut inst, 3)?;
        }
        "abs" | "neg" | "not" | "cnot" | "popc" | "clz" | "brev" | "rcp" | "sqrt" | "rsqrt"
        | "sin" | "cos" | "ex2" | "lg2" | "tanh" => {
            inst.op = match base {
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
            alu(&mut inst, 1)?;
        }
        "bfe" => {
            inst.op = Op::Bfe;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, ty0)?;
            inst.b = src(opn(2)?, Ty::U32)?;
            inst.c = src(opn(3)?, Ty::U32)?;
        }
        "bfi" => {
            inst.op = Op::Bfi;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, ty0)?;
            inst.b = src(opn(2)?, ty0)?;
            inst.c = src(opn(3)?, Ty::U32)?;
            inst.e = src(opn(4)?, Ty::U32)?;
        }
        "prmt" => {
            if mods
                .iter()
                .any(|m| matches!(*m, "f4e" | "b4e" | "rc8" | "ecl" | "ecr" | "rc16"))
            {
                return unsupported();
            }
            inst.op = Op::Prmt;
            alu(&mut inst, 3)?;
        }
        "shf" => {
            inst.op = Op::Shf {
                left: has("l"),
                clamp: has("clamp"),
            };
            inst.ty = Ty::B32;
            alu(&mut inst, 3)?;
        }
        "lop3" => {
            inst.op = Op::Lop3;
            alu(&mut inst, 4)?;
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
            .position(|x| has(x))
            .ok_or_else(|| err(i, "testp without a test"))?;
            inst.op = Op::Testp(k as u8);
            alu(&mut inst, 1)?;
        }
        "setp" | "set" => {
            let cmp = mods
                .iter()
                .find_map(|m| parse_cmp(m))
                .ok_or_else(|| err(i, "missing comparison"))?;
            let bop = if has("and") {
                BoolOp::And
            } else if has("or") {
                BoolOp::Or
            } else if has("xor") {
                BoolOp::Xor
            } else {
                BoolOp::None
            };
            // setp.cmp.T: compare type T; set.cmp.D.T: destination D, compare type T.
            if base == "set" {
                inst.op = Op::Set(cmp, bop);
                inst.ty = ty0;
                inst.ty2 = types
                    .get(1)
                    .copied()
                    .ok_or_else(|| err(i, "set needs two types"))?;
            } else {
                inst.op = Op::Setp(cmp, bop);
                inst.ty2 = ty0;
            }
            match opn(0)? {
                Operand::Pair(p, q) => {
                    inst.d = reg(p)?;
                    inst.d2 = reg(q)?;
                }
                o => inst.d = dst(o)?,
            }
            inst.a = src(opn(1)?, inst.ty2)?;
            inst.b = src(opn(2)?, inst.ty2)?;
            if bop != BoolOp::None {
                match opn(3)? {
                    Operand::NotName(n) => {
                        inst.c = Src::R(reg(n)?);
                        inst.c_neg = true;
                    }
                    o => inst.c = src(o, Ty::Pred)?,
                }
            }
        }
        "selp" => {
            inst.op = Op::Selp;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, ty0)?;
            inst.b = src(opn(2)?, ty0)?;
            match opn(3)? {
                Operand::NotName(n) => {
                    inst.c = Src::R(reg(n)?);
                    inst.c_neg = true;
                }
                o => inst.c = src(o, Ty::Pred)?,
            }
        }
        "slct" => {
            inst.op = Op::Slct;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, ty0)?;
            inst.b = src(opn(2)?, ty0)?;
            inst.c = src(opn(3)?, inst.ty2)?;
        }
        "cvt" => {
            if types.len() != 2 {
                return unsupported();
            }
            inst.op = Op::Cvt;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, inst.ty2)?;
            if inst.ty == Ty::F16x2 || inst.ty == Ty::BF16x2 {
                // cvt.rn.f16x2.f32 d, a, b packs a into the upper half, b into the lower.
                if inst.ty2 != Ty::F32 || has("relu") || has("satfinite") {
                    return unsupported();
                }
                inst.b = src(opn(2)?, Ty::F32)?;
            }
        }
        "cvta" => {
            inst.op = Op::Cvta { to: has("to") };
            inst.space = space_of(&mods).ok_or_else(|| err(i, "cvta without a state space"))?;
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, Ty::U64)?;
        }
        "ld" | "ldu" | "st" => {
            let is_ld = base != "st";
            inst.op = if is_ld { Op::Ld } else { Op::St };
            inst.vec = if has("v2") {
                2
            } else if has("v4") {
                4
            } else {
                1
            };
            let sp = space_of(&mods);
            let (data, addr) = if is_ld {
                (opn(0)?, opn(1)?)
            } else {
                (opn(1)?, opn(0)?)
            };
            let Operand::Addr { base: abase, off } = addr else {
                return Err(err(i, "expected a [address] operand"));
            };
            inst.off = *off;
            match abase {
                Some(n) => {
                    if let Some(r) = sc.regs.get(n) {
                        inst.a = Src::R(*r);
                    } else if let Some(k) = sc.syms.get(n) {
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
                                    i,
                                    "taking the address of a parameter is not supported",
                                ));
                            }
                            (k, _) => inst.a = Src::I(sym_addr(*k)),
                        }
                    } else {
                        return Err(err(i, format!("unknown address base `{n}`")));
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
            if inst.space == Space::Param && inst.op != Op::LdKParam && matches!(inst.a, Src::R(_))
            {
                return Err(err(
                    i,
                    "param-space access through a register is not supported",
                ));
            }
            let mut regs = Vec::new();
            match data {
                Operand::Vec(v) => {
                    for o in v {
                        regs.push(match o {
                            Operand::Name(n) if n == "_" => NOREG,
                            Operand::Name(n) => reg(n)?,
                            o if !is_ld => match src(o, ty0)? {
                                Src::R(r) => r,
                                Src::I(_) => {
                                    return Err(err(
                                        i,
                                        "immediate vector store operands are not supported",
                                    ));
                                }
                            },
                            _ => return Err(err(i, "bad vector operand")),
                        });
                    }
                }
                Operand::Name(n) => regs.push(reg(n)?),
                o if !is_ld => {
                    inst.b = src(o, ty0)?;
                    regs.push(NOREG);
                }
                _ => return Err(err(i, "bad load destination")),
            }
            if regs.len() != inst.vec as usize {
                return Err(err(i, "vector width does not match the operand"));
            }
            inst.vregs[..regs.len()].copy_from_slice(&regs);
            if let Some(r) = regs.first()
                && *r != NOREG
                && !is_ld
            {
                inst.b = Src::R(*r);
            }
            if ty0 == Ty::B128 {
                return unsupported();
            }
        }
        "atom" | "red" => {
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
            .find(|(n, _)| has(n))
            .map(|x| x.1)
            .ok_or_else(|| err(i, "atomic without an operation"))?;
            if has("v2")
                || has("v4")
                || has("v8")
                || ty0 == Ty::F16x2
                || ty0 == Ty::BF16x2
                || ty0 == Ty::B128
            {
                return unsupported();
            }
            inst.op = Op::Atom(aop);
            let sp = space_of(&mods);
            inst.space = sp.unwrap_or(Space::Global);
            if sp.is_none() {
                inst.aux = 1;
            }
            if matches!(inst.space, Space::Global) {
                *global_atomics = true;
            }
            let mut k = 0;
            if base == "atom" {
                inst.d = dst(opn(0)?)?;
                k = 1;
            }
            let Operand::Addr { base: abase, off } = opn(k)? else {
                return Err(err(i, "expected a [address] operand"));
            };
            inst.off = *off;
            inst.a = match abase {
                Some(n) => match sc.regs.get(n) {
                    Some(r) => Src::R(*r),
                    None => match sc.syms.get(n) {
                        Some(s) => Src::I(sym_addr(*s)),
                        None => return Err(err(i, format!("unknown address base `{n}`"))),
                    },
                },
                None => Src::I(0),
            };
            inst.b = src(opn(k + 1)?, ty0)?;
            if aop == AtomOp::Cas {
                inst.c = src(opn(k + 2)?, ty0)?;
            }
        }
        "bra" | "brx" => {
            if base == "brx" {
                return unsupported();
            }
            inst.op = Op::Bra;
            let Operand::Name(l) = opn(0)? else {
                return Err(err(i, "branch target must be a label"));
            };
            inst.aux = *sc
                .labels
                .get(l)
                .ok_or_else(|| err(i, format!("unknown label `{l}`")))?;
        }
        "call" => {
            // call[.uni] (rets), func, (args);  /  call func, (args);  /  call func;
            let mut k = 0;
            let mut rets = Vec::new();
            if let Some(Operand::List(r)) = ops.first() {
                rets = r.clone();
                k = 1;
            }
            let Some(Operand::Name(fname)) = ops.get(k) else {
                return Err(err(i, "indirect calls are not supported"));
            };
            let args = match ops.get(k + 1) {
                Some(Operand::List(a)) => a.clone(),
                None => vec![],
                _ => return Err(err(i, "bad call arguments")),
            };
            let slot = |n: &String| -> Result<(u32, u32), String> {
                match sc.syms.get(n) {
                    Some(SymKind::FParam(o, s)) => Ok((*o, *s)),
                    _ => Err(err(i, format!("call argument `{n}` is not a .param"))),
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
                    let Some((ps, rs)) = funcs.get(f) else {
                        return Err(err(i, format!("call to unknown function `{f}`")));
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
        }
        "ret" => inst.op = Op::Ret,
        "exit" => inst.op = Op::Exit,
        "bar" | "barrier" => {
            if has("warp") {
                inst.op = Op::BarWarp;
                inst.a = src(opn(0)?, Ty::U32)?;
            } else if has("red") {
                let bop = if has("popc") {
                    BoolOp::None
                } else if has("and") {
                    BoolOp::And
                } else if has("or") {
                    BoolOp::Or
                } else {
                    return unsupported();
                };
                inst.op = Op::BarRed(bop);
                inst.d = dst(opn(0)?)?;
                inst.a = src(opn(1)?, Ty::U32)?;
                let last = ops
                    .last()
                    .ok_or_else(|| err(i, "bar.red needs a predicate"))?;
                match last {
                    Operand::NotName(n) => {
                        inst.c = Src::R(reg(n)?);
                        inst.c_neg = true;
                    }
                    o => inst.c = src(o, Ty::Pred)?,
                }
                if ops.len() == 4 {
                    inst.b = src(opn(2)?, Ty::U32)?;
                    inst.aux = 1;
                }
            } else if has("sync") || has("arrive") || mods.is_empty() || has("aligned") {
                inst.op = Op::Bar {
                    arrive: has("arrive"),
                };
                inst.a = src(opn(0)?, Ty::U32)?;
                if let Some(o) = ops.get(1) {
                    inst.b = src(o, Ty::U32)?;
                    inst.aux = 1;
                }
            } else {
                return unsupported();
            }
        }
        "membar" | "fence" | "prefetch" | "prefetchu" | "nanosleep" | "pmevent" | "brkpt"
        | "griddepcontrol" => {
            inst.op = Op::Nop;
        }
        "trap" => inst.op = Op::Trap,
        "shfl" => {
            if !has("sync") {
                return Err(err(i, "shfl without .sync (pre-Volta) is not supported"));
            }
            let mode = if has("up") {
                ShflMode::Up
            } else if has("down") {
                ShflMode::Down
            } else if has("bfly") {
                ShflMode::Bfly
            } else {
                ShflMode::Idx
            };
            inst.op = Op::Shfl(mode);
            match opn(0)? {
                Operand::Pair(d, p) => {
                    inst.d = reg(d)?;
                    inst.d2 = reg(p)?;
                }
                o => inst.d = dst(o)?,
            }
            inst.a = src(opn(1)?, Ty::B32)?;
            inst.b = src(opn(2)?, Ty::U32)?;
            inst.c = src(opn(3)?, Ty::U32)?;
            inst.e = src(opn(4)?, Ty::U32)?;
        }
        "vote" => {
            let mode = if has("all") {
                VoteMode::All
            } else if has("any") {
                VoteMode::Any
            } else if has("uni") {
                VoteMode::Uni
            } else if has("ballot") {
                VoteMode::Ballot
            } else {
                return unsupported();
            };
            if !has("sync") {
                return Err(err(i, "vote without .sync (pre-Volta) is not supported"));
            }
            inst.op = Op::Vote(mode);
            inst.d = dst(opn(0)?)?;
            match opn(1)? {
                Operand::NotName(n) => {
                    inst.a = Src::R(reg(n)?);
                    inst.c_neg = true;
                }
                o => inst.a = src(o, Ty::Pred)?,
            }
            inst.e = src(opn(2)?, Ty::U32)?;
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
            .find(|(n, _)| has(n))
            .map(|x| x.1);
            match op {
                Some(op) if has("sync") && !inst.ty.float() => inst.op = Op::Redux(op),
                _ => return unsupported(),
            }
            inst.d = dst(opn(0)?)?;
            inst.a = src(opn(1)?, ty0)?;
            inst.e = src(opn(2)?, Ty::U32)?;
        }
        "activemask" => {
            inst.op = Op::Activemask;
            inst.d = dst(opn(0)?)?;
        }
        _ => return unsupported(),
    }
    if !type_ok(inst.op, inst.ty) {
        return Err(err(i, format!("unsupported type for `{base}`")));
    }
    Ok((inst, call))
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

thread_local! {
    /// Call sites collected while lowering (moved into the program afterwards).
    static CALLS: std::cell::RefCell<Vec<CallSite>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Lower a module into a program, refusing recursion (functions have one frame each).
pub fn decode_module(m: &Module) -> Result<Program, String> {
    CALLS.with(|c| c.borrow_mut().clear());
    let r = decode(m);
    CALLS.with(|c| c.borrow_mut().clear());
    let p = r?;
    check_recursion(&p)?;
    Ok(p)
}

fn check_recursion(p: &Program) -> Result<(), String> {
    // A function calling itself (directly or not) would share one register frame.
    let n = p.calls.len();
    if n == 0 {
        return Ok(());
    }
    let func_of = |pc: u32| -> u32 {
        p.func_ranges
            .iter()
            .find(|(s, e)| (*s..*e).contains(&pc))
            .map(|r| r.0)
            .unwrap_or(0)
    };
    let mut edges: HashMap<u32, Vec<u32>> = HashMap::new();
    for (idx, inst) in p.insts.iter().enumerate() {
        if inst.op == Op::Call {
            let from = func_of(idx as u32);
            edges
                .entry(from)
                .or_default()
                .push(p.calls[inst.aux as usize].target_pc);
        }
    }
    fn dfs(n: u32, e: &HashMap<u32, Vec<u32>>, stack: &mut Vec<u32>) -> bool {
        if stack.contains(&n) {
            return true;
        }
        stack.push(n);
        for &m in e.get(&n).map(|v| v.as_slice()).unwrap_or(&[]) {
            if dfs(m, e, stack) {
                return true;
            }
        }
        stack.pop();
        false
    }
    for c in &p.calls {
        if dfs(c.target_pc, &edges, &mut Vec::new()) {
            return Err("recursive device function calls are not supported by the emulator".into());
        }
    }
    Ok(())
}

fn sym_addr(k: SymKind) -> u64 {
    match k {
        SymKind::KParam(o) | SymKind::FParam(o, _) => o as u64,
        SymKind::Shared(o) | SymKind::Local(o) | SymKind::Const(o) => o,
        SymKind::Global(o) => MODULE_GLOBAL_BASE + o,
    }
}

/// Limits on what one module may declare.
pub const MAX_REGS: u32 = 1 << 15;
pub const MAX_MODULE_BYTES: u64 = 1 << 30;

/// Module `.global` variables live at this address; `alloc` hands out addresses above
/// `ALLOC_BASE`.
pub const MODULE_GLOBAL_BASE: u64 = 0x1_0000_0000;
pub const ALLOC_BASE: u64 = 0x2_0000_0000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::parse::parse_module;

    const SRC: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
        .const .align 4 .b8 filt[16];\n\
        .visible .entry k(.param .u64 p, .param .u32 n)\n{\n\
        \t.reg .pred %p<2>;\n\t.reg .b32 %r<4>;\n\t.reg .f32 %f<3>;\n\t.reg .b64 %rd<3>;\n\
        \t.shared .align 4 .b8 s[64];\n\
        \t.loc 1 7 3\n\
        \tld.param.u32 %r1, [n];\n\
        \tsetp.ge.s32 %p1, %r1, 4;\n\
        \t@!%p1 bra $L__done;\n\
        \tcvt.rzi.sat.s32.f32 %r2, %f1;\n\
        \tld.const.f32 %f2, [filt+8];\n\
        \tmov.u64 %rd1, s;\n\
        $L__done:\n\
        \tret;\n}\n\
        .file 1 \"/tmp/x/kern.cu\"\n";

    #[test]
    fn lowers_labels_params_modifiers_and_locations() {
        let p = decode_module(&parse_module(SRC).unwrap()).unwrap();
        let k = &p.kernels[0];
        assert_eq!(k.param_sizes, vec![8, 4]);
        assert_eq!(k.param_offsets, vec![0, 8]);
        assert_eq!(k.static_shared, 64);
        assert_eq!(p.insts[0].op, Op::LdKParam);
        assert_eq!(p.insts[0].off, 8);
        let bra = &p.insts[2];
        assert_eq!(bra.op, Op::Bra);
        assert!(bra.guard_neg);
        assert_eq!(bra.aux, 6, "the label's program counter");
        let cvt = &p.insts[3];
        assert_eq!(
            (cvt.ty, cvt.ty2, cvt.rnd, cvt.rnd_int, cvt.sat),
            (Ty::S32, Ty::F32, Rnd::Z, true, true)
        );
        assert_eq!(p.insts[4].a, Src::I(0));
        assert_eq!(p.insts[4].off, 8);
        assert_eq!(p.locs[1], (1, 7));
        assert_eq!(
            p.files[&1], "kern.cu",
            "reports name the file, not NVRTC's directory"
        );
    }

    #[test]
    fn unsupported_forms_name_instruction_and_line() {
        let bad = SRC.replace("\tret;", "\trem.f32 %f1, %f1, %f2;\n\tret;");
        let e = decode_module(&parse_module(&bad).unwrap()).unwrap_err();
        assert!(e.contains("rem.f32") && e.contains("line 20"), "{e}");
        let bad = SRC.replace(
            "\tret;",
            "\tsuld.b.1d.v4.b32.trap {%r1,%r2,%r3,%r0}, [%rd1, {%r1}];\n\tret;",
        );
        let e = match parse_module(&bad) {
            Err(e) => e,
            Ok(m) => decode_module(&m).unwrap_err(),
        };
        assert!(e.contains("suld") && e.contains("line 20"), "{e}");
    }
}
