//! Lowering parsed PTX into the compact program the interpreter runs: every register gets a
//! slot number, every symbol an address, every label a program counter, and every opcode
//! string its `Op` plus typed modifiers. Nothing textual is left for run time.
//!
//! This file lays out the module (variables, parameter slots, shared memory, functions) and
//! lowers each function's body; `ir.rs` holds what it produces (the program, its instructions
//! and types), `lower/` turns one instruction into an `Inst`, a file per instruction family.

mod ir;
mod lower;

pub use ir::*;

use super::parse::{Func, InstAst, Module, Space, Stmt, VarDecl, type_size};
use lower::lower;
use std::collections::HashMap;

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

/// A function's parameter and return-value slots: (offset, bytes) each.
type FuncSlots = HashMap<String, (Vec<(u32, u32)>, Vec<(u32, u32)>)>;

/// What every function's lowering takes from the module: its variables' symbols, the
/// functions' parameter slots, and where shared memory's static variables end and the
/// dynamic array starts.
struct ModuleScope {
    syms: HashMap<String, SymKind>,
    func_params: FuncSlots,
    shared: u64,
    dyn_align: u32,
    dyn_base: u64,
    has_callees: bool,
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
    let (module_syms, module_shared, module_dyn_align) = module_variables(m, &mut prog)?;
    let (mut fparam, func_params) = function_slots(m);

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
    let module = ModuleScope {
        syms: module_syms,
        func_params,
        shared: module_shared,
        dyn_align: module_dyn_align,
        dyn_base: module_dyn_base,
        has_callees,
    };

    prog.nregs = SPECIALS.len() as u32;
    let mut func_entry: HashMap<String, u32> = HashMap::new();
    let mut pending_calls: Vec<(usize, String)> = Vec::new();
    for (f, &(own_end, own_align)) in m.funcs.iter().zip(&shared_layouts) {
        let Some(body) = &f.body else { continue };
        let entry_pc = prog.insts.len() as u32;
        func_entry.insert(f.name.clone(), entry_pc);
        decode_function(
            f,
            body,
            &module,
            (own_end, own_align),
            &mut prog,
            &mut fparam,
            &mut pending_calls,
        )?;
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
    fold_callees(&mut prog);
    Ok(prog)
}

/// Module-level variables: global arena and const bank addresses are offsets here; the
/// backend rebases global ones when it places them. Returns their symbols, the end of the
/// module's static shared variables, and the alignment its `extern .shared` arrays ask for.
fn module_variables(
    m: &Module,
    prog: &mut Program,
) -> Result<(HashMap<String, SymKind>, u64, u32), String> {
    let mut module_syms: HashMap<String, SymKind> = HashMap::new();
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
    Ok((module_syms, module_shared, module_dyn_align))
}

/// Function parameter slots (per lane) are laid out before bodies so calls can refer
/// forward: each function's (offset, bytes) per parameter and return value, and the bytes
/// laid out so far.
fn function_slots(m: &Module) -> (u32, FuncSlots) {
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
    (fparam, func_params)
}

/// Lower one function's body into `prog`: its scope (parameters, registers, variables,
/// labels), then its instructions, then its kernel entry (or its callee's, folded into the
/// kernels afterwards).
fn decode_function(
    f: &Func,
    body: &[Stmt],
    module: &ModuleScope,
    (own_end, own_align): (u64, u32),
    prog: &mut Program,
    fparam: &mut u32,
    pending_calls: &mut Vec<(usize, String)>,
) -> Result<(), String> {
    let entry_pc = prog.insts.len() as u32;
    let mut sc = FuncScope {
        regs: HashMap::new(),
        syms: module.syms.clone(),
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
        let (ps, rs) = &module.func_params[&f.name];
        for (p, (o, s)) in f.params.iter().zip(ps) {
            sc.syms.insert(p.name.clone(), SymKind::FParam(*o, *s));
        }
        for (p, (o, s)) in f.rets.iter().zip(rs) {
            sc.syms.insert(p.name.clone(), SymKind::FParam(*o, *s));
        }
    }
    let (shared, local) = declare(f, body, &mut sc, prog, fparam, module.shared, entry_pc)?;
    debug_assert_eq!(shared, own_end);
    let dyn_base = if module.has_callees {
        module.dyn_base
    } else {
        own_end.next_multiple_of(own_align.max(module.dyn_align) as u64)
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
                let (inst, call) = lower(i, &sc, &module.func_params, &mut global_atomics)?;
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
    Ok(())
}

/// First pass over a body: declarations and labels. Returns where the function's static
/// shared variables end and its local bytes.
fn declare(
    f: &Func,
    body: &[Stmt],
    sc: &mut FuncScope,
    prog: &mut Program,
    fparam: &mut u32,
    module_shared: u64,
    entry_pc: u32,
) -> Result<(u64, u64), String> {
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
                            *fparam = fparam.next_multiple_of(v.align.max(1));
                            sc.syms
                                .insert(v.name.clone(), SymKind::FParam(*fparam, v.size() as u32));
                            *fparam += v.size().max(1) as u32;
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
    Ok((shared, local))
}

/// Functions share one frame each (no recursion): a kernel's local size covers callees.
fn fold_callees(prog: &mut Program) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::emu::float::Rnd;
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
