//! What the timed loop does on the device around each launch: draw and re-poison the buffers,
//! build a launch's parameters, compute the sums a tolerance scales with, and compare every
//! output with the reference's on the device.

use super::*;

impl Device<'_> {
    fn draw(&mut self, addr: u64, b: usize, seed: u64) -> Result<(), BackendError> {
        let pb = &self.spec.buffers[b];
        let s = pb.spec;
        match (&pb.draw, self.tables[b]) {
            (Some(g), Some((values, specials))) => {
                self.t.fill(addr, crate::inputs::GUARD_BYTE, s.total())?;
                let params = [
                    ParamValue::Ptr(addr + s.guard as u64),
                    ParamValue::U64((s.bytes / elem_size(pb.elem)) as u64),
                    ParamValue::I32(pb.elem as i32),
                    ParamValue::U64(seed),
                    ParamValue::I32(g.kind.code()),
                    ParamValue::F64(g.a),
                    ParamValue::F64(g.b),
                    ParamValue::Ptr(values),
                    ParamValue::I32(g.values.len() as i32),
                    ParamValue::F64(g.special_fraction),
                    ParamValue::Ptr(specials),
                    ParamValue::I32(g.specials.len() as i32),
                ];
                let n = s.bytes / elem_size(pb.elem);
                self.t
                    .enqueue(Slot::Harness, "cugrade_generate", spread(n), &params)
            }
            _ => self.t.copy(addr, self.pristine[b], s.total()),
        }
    }

    /// Fresh inputs (and re-poisoned outputs) in set `set` for iteration `i`; with `reference`,
    /// the reference's own output copies too.
    pub(super) fn prepare(
        &mut self,
        set: usize,
        i: u64,
        reference: bool,
    ) -> Result<(), BackendError> {
        for b in 0..self.spec.buffers.len() {
            let pb = &self.spec.buffers[b];
            let is_out = pb.compare.is_some();
            let target = if reference && is_out {
                self.reference[b].unwrap_or(self.sets[set][b])
            } else {
                self.sets[set][b]
            };
            if pb.draw.is_some() || !is_out {
                self.draw(target, b, seed_for(self.spec.seed, i, b))?;
            } else {
                self.t.copy(target, self.pristine[b], pb.spec.total())?;
            }
        }
        Ok(())
    }

    /// Parameters and symbols for a launch in `slot` on set `set`.
    pub(super) fn params(
        &mut self,
        slot: Slot,
        set: usize,
    ) -> Result<Vec<ParamValue>, BackendError> {
        let role = if slot == Slot::Reference {
            Role::Reference
        } else {
            Role::Student
        };
        self.params_for(role, set)
    }

    fn params_for(&mut self, role: Role, set: usize) -> Result<Vec<ParamValue>, BackendError> {
        let slot = if role == Role::Student {
            Slot::Student
        } else {
            Slot::Reference
        };
        let addr = |d: &Device, b: usize| {
            let pb = &d.spec.buffers[b];
            let base = match role {
                Role::Reference if pb.compare.is_some() => d.reference[b].unwrap_or(d.sets[set][b]),
                Role::Magnitude { squares } => {
                    let out = if squares && pb.compare.is_some() {
                        d.squares[b]
                    } else {
                        d.mags[b]
                    };
                    out.unwrap_or(d.sets[set][b])
                }
                _ => d.sets[set][b],
            };
            base + pb.spec.guard as u64
        };
        let own_args = match (&self.spec.student_args, slot) {
            (Some(a), Slot::Student) => Some(a.clone()),
            _ => None,
        };
        for b in 0..self.spec.buffers.len() {
            if own_args.is_some() {
                break;
            }
            if let Some(sym) = self.spec.buffers[b].symbol.clone() {
                let (ptr, size) = self.t.global(slot, &sym)?;
                let bytes = self.spec.buffers[b].spec.bytes.min(size);
                let from = addr(self, b);
                self.t.copy(ptr, from, bytes)?;
            }
        }
        Ok(own_args
            .as_ref()
            .unwrap_or(&self.spec.args)
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => ParamValue::Ptr(addr(self, *b)),
                Arg::Value(v) => *v,
            })
            .collect())
    }

    /// After the reference's run on set `set`: the reference twice more, on the absolute values
    /// and on the squares of the same inputs, for each output's sums of absolute and squared
    /// terms (`Tolerance::sum`). Outputs drawn as inputs (in/out) are drawn again with launch
    /// `i`'s seed.
    pub(super) fn magnitudes(&mut self, set: usize, i: u64) -> Result<(), BackendError> {
        for squares in [false, true] {
            for b in 0..self.spec.buffers.len() {
                let Some(m) = self.mags[b] else { continue };
                let pb = self.spec.buffers[b].clone();
                let s = pb.spec;
                let (src, dst) = if pb.compare.is_some() {
                    // An output: its initial contents (an in/out buffer's drawn values).
                    let dst = if squares {
                        self.squares[b].unwrap_or(m)
                    } else {
                        m
                    };
                    if pb.draw.is_some() {
                        self.draw(dst, b, seed_for(self.spec.seed, i, b))?;
                    } else {
                        self.t.copy(dst, self.pristine[b], s.total())?;
                    }
                    (dst, dst)
                } else {
                    (self.sets[set][b], m)
                };
                if elem_type(pb.elem).is_float() {
                    let n = s.bytes / elem_size(pb.elem);
                    self.t.enqueue(
                        Slot::Harness,
                        "cugrade_terms",
                        spread(n),
                        &[
                            ParamValue::Ptr(src + s.guard as u64),
                            ParamValue::Ptr(dst + s.guard as u64),
                            ParamValue::U64(n as u64),
                            ParamValue::I32(pb.elem as i32),
                            ParamValue::I32(i32::from(squares)),
                        ],
                    )?;
                }
            }
            let p = self.params_for(Role::Magnitude { squares }, set)?;
            let r = self.spec.verify.clone();
            enqueue_all(self.t, Slot::Reference, &r.kernel, r.dims, &r.then, &p)?;
        }
        Ok(())
    }

    /// Queue the checks of set `set`'s outputs against the reference's.
    pub(super) fn compare(&mut self, set: usize) -> Result<usize, BackendError> {
        let mut slot = 0u64;
        for b in 0..self.spec.buffers.len() {
            let pb = self.spec.buffers[b].clone();
            let Some(c) = pb.compare else { continue };
            let s = pb.spec;
            let (got, exp) = (self.sets[set][b], self.reference[b].unwrap_or(0));
            let n = s.bytes / elem_size(pb.elem);
            let result = self.results + (8 * RESULT_WORDS as u64) * (slot / 2);
            let sabs = self.mags[b].map_or(0, |m| m + s.guard as u64);
            let sq = self.squares[b].map_or(0, |m| m + s.guard as u64);
            // An output refilled from its initial contents before every launch: what an
            // unwritten element still holds.
            let initial = if pb.draw.is_none() && self.pristine[b] != 0 {
                self.pristine[b] + s.guard as u64
            } else {
                0
            };
            self.t.enqueue(
                Slot::Harness,
                "cugrade_compare",
                spread(n),
                &[
                    ParamValue::Ptr(got + s.guard as u64),
                    ParamValue::Ptr(exp + s.guard as u64),
                    ParamValue::Ptr(sabs),
                    ParamValue::Ptr(sq),
                    ParamValue::Ptr(initial),
                    ParamValue::U64(n as u64),
                    ParamValue::I32(pb.elem as i32),
                    ParamValue::F64(c.abs),
                    ParamValue::F64(c.rel),
                    ParamValue::F64(c.sum),
                    ParamValue::I64(c.ulp),
                    ParamValue::I32(i32::from(c.exact)),
                    ParamValue::F64(c.coarse_abs),
                    ParamValue::F64(c.coarse_rel),
                    ParamValue::F64(c.coarse_sum),
                    ParamValue::Ptr(result),
                ],
            )?;
            for at in [got, got + (s.guard + s.bytes) as u64] {
                self.t.enqueue(
                    Slot::Harness,
                    "cugrade_guard",
                    spread(s.guard),
                    &[
                        ParamValue::Ptr(at),
                        ParamValue::U64(s.guard as u64),
                        ParamValue::U32(u32::from(crate::inputs::GUARD_BYTE)),
                        ParamValue::Ptr(result + 16),
                    ],
                )?;
            }
            slot += 2;
        }
        Ok(slot as usize)
    }
}
