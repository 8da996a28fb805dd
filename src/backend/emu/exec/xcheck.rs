//! A rank set's block: its agent in the cross-device race check (`emu::xrace`), told of the
//! block's fences and of its lanes' accesses to global memory. A single-device launch has no
//! race check attached and pays one branch per global access.

use super::BlockRunner;
use crate::backend::emu::decode::*;
use crate::backend::emu::mem::Region;
use crate::backend::emu::xrace::{Access, XRace};
use std::cell::RefCell;

impl<'a, 'c> BlockRunner<'a, 'c> {
    /// Attach the rank set's race check, this block being `agent` in it.
    pub fn with_xrace(mut self, x: &'c RefCell<XRace>, agent: u32) -> Self {
        self.xrace = Some((x, agent));
        self
    }

    /// membar / fence: ordering for the race check; nothing else to do when run.
    #[inline]
    pub(super) fn fence(&mut self, inst: &Inst) {
        if let Some((x, agent)) = self.xrace {
            x.borrow_mut().fence(agent, inst.sem);
        }
    }

    /// Lane `l`'s access of `size` bytes at offset `off` of global allocation `reg`, checked
    /// across ranks (a race becomes a `racecheck` diagnostic of this instruction).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cross_rank(
        &mut self,
        wi: usize,
        l: usize,
        inst: &Inst,
        pc: u32,
        reg: &Region,
        off: u64,
        size: u32,
    ) {
        let Some((x, agent)) = self.xrace else {
            return;
        };
        let what = match inst.op {
            Op::Ld => Access::Read,
            Op::Atom(_) => Access::Rmw,
            _ => Access::Write,
        };
        let race = x.borrow_mut().access(agent, reg, off, size, what, inst.sem);
        if let Some(r) = race {
            let wid = self.warps[wi].id;
            self.diag("racecheck", r.kind, pc, wid, l, || r.message);
        }
    }
}
