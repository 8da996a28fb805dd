//! Which scalar shared-memory loads ptxas merges into one wider load, for the cost counters
//! (`super::cost`). The emulator runs PTX, but the GPU runs what ptxas made of it, and ptxas
//! turns an unrolled run of 32-bit shared loads from one base address at consecutive offsets
//! (`As[row * 32 + k]` for `k = 0..31`) into `LDS.128`/`LDS.64`: four or two loads become one
//! instruction, with the wavefronts of a 16- or 8-byte access. Measured on an H100
//! (`ci/estimate/probe_l1.py`, docs/estimate.md): an aligned row of a 32x32 tile and an 8x8
//! block tile are merged by four, a padded row (33 floats, no alignment to prove) is not, and
//! per-lane rows (`As[lane * 8 + k]`) are merged too.
//!
//! Static part (here): within straight-line code, 32-bit `ld.shared` with the same base
//! register (or none) whose offsets cover an aligned window of 16 (or 8) bytes form a group;
//! its first load in program order is the head. A store, atomic or barrier between them, a
//! label, or a write to the base register ends the window. Dynamic part (`cost::BlockCost`):
//! the head merges only if every lane's address is aligned to the group's width; a group seen
//! misaligned once is never merged again (ptxas merges only what it can prove aligned).

use super::decode::*;
use super::parse::Space;
use std::collections::{HashMap, HashSet};

/// What ptxas does with the load at one program counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Merge {
    #[default]
    None,
    /// First load of group `slot`, which merges `width` 32-bit loads (2 or 4).
    Head { slot: u16, width: u8 },
    /// Another load of group `slot`: free when its head merged.
    Member { slot: u16 },
}

fn is_scalar_shared_load(i: &Inst) -> bool {
    i.op == Op::Ld && i.space == Space::Shared && i.vec <= 1 && i.ty.bits() == 32
}

fn ends_window(i: &Inst) -> bool {
    i.op.is_control()
        || matches!(i.op, Op::BarWarp | Op::AssertFail | Op::Atom(_))
        || (i.op == Op::St && (i.space == Space::Shared || i.aux == 1))
}

fn written(i: &Inst) -> impl Iterator<Item = u32> + '_ {
    let v = if matches!(i.op, Op::Ld | Op::Unpack) {
        &i.vregs[..(i.vec as usize).min(4)]
    } else {
        &[][..]
    };
    [i.d, i.d2]
        .into_iter()
        .chain(v.iter().copied())
        .filter(|&r| r != NOREG)
}

/// Loads in a window of straight-line code by base: (offset, pc, guard).
type Window = HashMap<u32, Vec<(i64, u32, (u32, bool))>>;

/// The merges of every instruction of `prog`, by program counter.
pub fn merges(prog: &Program) -> Vec<Merge> {
    let n = prog.insts.len();
    let mut out = vec![Merge::None; n];
    let labels: HashSet<u32> = prog
        .insts
        .iter()
        .filter(|i| i.op == Op::Bra)
        .map(|i| i.aux)
        .chain(prog.func_ranges.iter().map(|r| r.0))
        .collect();
    // Bases: a register, or NOREG for an absolute address.
    let mut window: Window = HashMap::new();
    let mut slot: u16 = 0;
    let flush = |window: &mut Window, out: &mut Vec<Merge>, slot: &mut u16| {
        for loads in window.values() {
            group(loads, out, slot);
        }
        window.clear();
    };
    for (pc, i) in prog.insts.iter().enumerate() {
        let pc = pc as u32;
        if labels.contains(&pc) {
            flush(&mut window, &mut out, &mut slot);
        }
        if is_scalar_shared_load(i) {
            let (base, off) = match i.a {
                Src::R(r) => (r, i.off),
                Src::I(a) => (NOREG, a as i64 + i.off),
            };
            window
                .entry(base)
                .or_default()
                .push((off, pc, (i.guard, i.guard_neg)));
        }
        if ends_window(i) {
            flush(&mut window, &mut out, &mut slot);
            continue;
        }
        for r in written(i) {
            if let Some(loads) = window.remove(&r) {
                group(&loads, &mut out, &mut slot);
            }
        }
    }
    flush(&mut window, &mut out, &mut slot);
    out
}

/// Group the loads of one base: aligned windows of four, then of two.
fn group(loads: &[(i64, u32, (u32, bool))], out: &mut [Merge], slot: &mut u16) {
    let mut by_off: HashMap<i64, (u32, (u32, bool))> = HashMap::new();
    for &(off, pc, g) in loads {
        // A second load of one address (another window's value) is left alone.
        by_off.entry(off).or_insert((pc, g));
    }
    let mut offs: Vec<i64> = by_off.keys().copied().collect();
    offs.sort_unstable();
    let mut used: HashSet<i64> = HashSet::new();
    for width in [4u8, 2] {
        let span = 4 * width as i64;
        for &o in &offs {
            if o.rem_euclid(span) != 0 || used.contains(&o) {
                continue;
            }
            let members: Vec<i64> = (0..width as i64).map(|k| o + 4 * k).collect();
            let Some(found) = members
                .iter()
                .map(|m| by_off.get(m).filter(|_| !used.contains(m)))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            // One guard for all (a predicated load cannot merge with an unpredicated one).
            if found.iter().any(|f| f.1 != found[0].1) || *slot == u16::MAX {
                continue;
            }
            let head = found.iter().map(|f| f.0).min().unwrap_or(0);
            for f in &found {
                out[f.0 as usize] = if f.0 == head {
                    Merge::Head { slot: *slot, width }
                } else {
                    Merge::Member { slot: *slot }
                };
            }
            used.extend(members);
            *slot += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(m: &[Merge]) -> Vec<u8> {
        m.iter()
            .filter_map(|m| match m {
                Merge::Head { width, .. } => Some(*width),
                _ => None,
            })
            .collect()
    }

    fn program(body: &str) -> Program {
        let src = format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n\
             .reg .b32 %r<40>;\n.reg .f32 %f<40>;\n.reg .b64 %rd<4>;\n.reg .pred %p<4>;\n\
             .shared .align 16 .b8 s[4096];\n{body}\nret;\n}}\n"
        );
        decode_module(&super::super::parse::parse_module(&src).unwrap()).unwrap()
    }

    #[test]
    fn an_unrolled_row_of_loads_merges_by_four() {
        let loads: String = (0..8)
            .map(|k| format!("ld.shared.f32 %f{k}, [%r1+{}];\n", 4 * k))
            .collect();
        let p = program(&format!("mov.u32 %r1, s;\n{loads}"));
        assert_eq!(heads(&merges(&p)), vec![4, 4]);
    }

    #[test]
    fn interleaved_rows_merge_each_row() {
        // As[(r*8)+k] for k outer, r inner: two rows of 4, interleaved.
        let mut body = String::from("mov.u32 %r1, s;\n");
        for k in 0..4 {
            for r in 0..2 {
                body += &format!("ld.shared.f32 %f{}, [%r1+{}];\n", k * 2 + r, 32 * r + 4 * k);
            }
        }
        assert_eq!(heads(&merges(&program(&body))), vec![4, 4]);
    }

    #[test]
    fn no_merge_across_a_store_a_barrier_a_base_change_or_a_gap() {
        let p = program(
            "mov.u32 %r1, s;\nld.shared.f32 %f0, [%r1];\nld.shared.f32 %f1, [%r1+4];\n\
             st.shared.f32 [%r1+64], %f0;\nld.shared.f32 %f2, [%r1+8];\nld.shared.f32 %f3, [%r1+12];\n",
        );
        // Two pairs, not one quadruple.
        assert_eq!(heads(&merges(&p)), vec![2, 2]);
        let p = program(
            "mov.u32 %r1, s;\nld.shared.f32 %f0, [%r1];\nbar.sync 0;\nld.shared.f32 %f1, [%r1+4];\n",
        );
        assert!(heads(&merges(&p)).is_empty());
        let p = program(
            "mov.u32 %r1, s;\nld.shared.f32 %f0, [%r1];\nadd.u32 %r1, %r1, 4;\nld.shared.f32 %f1, [%r1+4];\n",
        );
        assert!(heads(&merges(&p)).is_empty());
        // A column (stride 128 bytes) has nothing to merge.
        let col: String = (0..4)
            .map(|k| format!("ld.shared.f32 %f{k}, [%r1+{}];\n", 128 * k))
            .collect();
        assert!(heads(&merges(&program(&format!("mov.u32 %r1, s;\n{col}")))).is_empty());
    }
}
