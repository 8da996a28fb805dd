//! The program the interpreter runs: its instructions (`Inst`: an `Op`, types and operands
//! already resolved to register slots and immediates), kernels, module variables and call
//! sites, and the address layout they assume.

use crate::backend::emu::float::Rnd;
use crate::backend::emu::parse::Space;
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
    #[inline]
    pub fn bytes(self) -> u32 {
        match self {
            Ty::U8 | Ty::S8 | Ty::B8 | Ty::Pred => 1,
            Ty::U16 | Ty::S16 | Ty::B16 | Ty::F16 | Ty::BF16 => 2,
            Ty::U32 | Ty::S32 | Ty::B32 | Ty::F32 | Ty::F16x2 | Ty::BF16x2 => 4,
            Ty::U64 | Ty::S64 | Ty::B64 | Ty::F64 => 8,
            Ty::B128 => 16,
        }
    }
    #[inline]
    pub fn bits(self) -> u32 {
        self.bytes() * 8
    }
    #[inline]
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    #[inline]
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
    /// membar and fence: a no-op when run, but a rank set's race check orders by it
    /// (`Inst::sem` holds its scope).
    Fence,
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
    /// Memory-model qualifiers of ld, st, atom, red and fence (`sem::*` bits): what a rank
    /// set's race check orders accesses by. Execution ignores them.
    pub sem: u8,
}

/// `Inst::sem`'s bits: the ordering (`.volatile`, `.relaxed`, `.acquire`, `.release`; `.acq_rel`
/// and `fence.sc` set both acquire and release) and the scope (`.cta`, `.gpu`/`.gl`, `.sys`;
/// `.cluster` counts as `.cta`).
pub mod sem {
    pub const VOLATILE: u8 = 1;
    pub const RELAXED: u8 = 2;
    pub const ACQUIRE: u8 = 4;
    pub const RELEASE: u8 = 8;
    /// The scope's two bits: none (0), cta, gpu, sys.
    pub const SCOPE: u8 = 0x30;
    pub const CTA: u8 = 0x10;
    pub const GPU: u8 = 0x20;
    pub const SYS: u8 = 0x30;
    /// A fence that orders memory (membar, fence.sc, fence.acq_rel; not fence.proxy).
    pub const FENCE: u8 = 0x40;
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

/// Limits on what one module may declare.
pub const MAX_REGS: u32 = 1 << 15;
pub const MAX_MODULE_BYTES: u64 = 1 << 30;

/// Module `.global` variables live at this address; `alloc` hands out addresses above
/// `ALLOC_BASE`.
pub const MODULE_GLOBAL_BASE: u64 = 0x1_0000_0000;
pub const ALLOC_BASE: u64 = 0x2_0000_0000;
