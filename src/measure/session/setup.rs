//! The set-up before the GPU's timing lock is taken: the input sets, the initial contents,
//! the input tables, the sums' scratch and the baseline's operands, allocated and filled once.

use super::*;

impl<'a> Device<'a> {
    /// Allocate and fill what the timed loop uses, in this order: the input sets, the
    /// initial contents, the result words, the sums' scratch, the baseline's operands.
    pub(super) fn set_up(
        t: &'a mut dyn Timer,
        spec: &'a MeasureSpec,
        buffer_blobs: &[Vec<u8>],
        l2_bytes: usize,
        plan: &LoopPlan,
    ) -> Result<Device<'a>, BackendError> {
        let sets = input_sets(t, spec, l2_bytes)?;
        let initial = initial_contents(t, spec, buffer_blobs)?;
        let results = t.alloc(plan.result_bytes)?;
        let sums = sum_scratch(t, spec, plan.wants_mags)?;
        let operands = baseline_operands(t, spec)?;
        Ok(Device {
            t,
            spec,
            sets,
            reference: initial.reference,
            pristine: initial.pristine,
            tables: initial.tables,
            results,
            mags: sums.mags,
            squares: sums.squares,
            cublas: operands.cublas,
            copy: operands.copy,
        })
    }
}

/// Sets of inputs used in turn, together larger than L2 (at least two, at most eight).
fn input_sets(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    l2_bytes: usize,
) -> Result<Vec<Vec<u64>>, BackendError> {
    let set_bytes: usize = spec
        .buffers
        .iter()
        .map(|b| b.spec.total())
        .sum::<usize>()
        .max(1);
    let sets_wanted = (2 * l2_bytes).div_ceil(set_bytes).clamp(2, 8);
    let mut sets = Vec::with_capacity(sets_wanted);
    for _ in 0..sets_wanted {
        let mut one = Vec::with_capacity(spec.buffers.len());
        for b in &spec.buffers {
            one.push(t.alloc(b.spec.total())?);
        }
        sets.push(one);
    }
    Ok(sets)
}

/// Per buffer, what the setup places on the device besides the input sets.
struct Initial {
    /// Initial contents (0 for a buffer drawn on the device from an empty blob).
    pristine: Vec<u64>,
    /// The reference's own copy of each output.
    reference: Vec<Option<u64>>,
    /// Each drawn buffer's `values` and `specials`.
    tables: Vec<Option<(u64, u64)>>,
}

/// Each buffer's initial contents uploaded from its blob, the reference's copy of each output
/// and each drawn buffer's tables allocated, buffer by buffer.
fn initial_contents(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    buffer_blobs: &[Vec<u8>],
) -> Result<Initial, BackendError> {
    let mut initial = Initial {
        pristine: Vec::new(),
        reference: Vec::new(),
        tables: Vec::new(),
    };
    for (b, blob) in spec.buffers.iter().zip(buffer_blobs) {
        // A buffer drawn on the device needs no initial contents from the host (an empty blob).
        let drawn_empty = b.draw.is_some() && blob.is_empty();
        if blob.len() != b.spec.total() && !drawn_empty {
            return Err(BackendError::Other(
                "measure: a buffer blob has the wrong size".into(),
            ));
        }
        if drawn_empty {
            initial.pristine.push(0);
        } else {
            let p = t.alloc(b.spec.total())?;
            t.upload(p, blob)?;
            initial.pristine.push(p);
        }
        initial.reference.push(if b.compare.is_some() {
            Some(t.alloc(b.spec.total())?)
        } else {
            None
        });
        initial.tables.push(match &b.draw {
            Some(g) => Some(draw_tables(t, g)?),
            None => None,
        });
    }
    Ok(initial)
}

/// A drawn buffer's `values` and `specials` on the device, as f64s (one word when empty).
fn draw_tables(t: &mut dyn Timer, g: &GenPlan) -> Result<(u64, u64), BackendError> {
    let pack = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let values = t.alloc(8 * g.values.len().max(1))?;
    let specials = t.alloc(8 * g.specials.len().max(1))?;
    if !g.values.is_empty() {
        t.upload(values, &pack(&g.values))?;
    }
    if !g.specials.is_empty() {
        t.upload(specials, &pack(&g.specials))?;
    }
    Ok((values, specials))
}

/// Per buffer, scratch for the sums a tolerance scales with (`mags` and `squares` of
/// [`Device`]).
struct SumScratch {
    mags: Vec<Option<u64>>,
    squares: Vec<Option<u64>>,
}

/// Per buffer, the sums' scratch, filled with guard bytes; `None` where no tolerance needs it.
fn sum_scratch(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    wants_mags: bool,
) -> Result<SumScratch, BackendError> {
    let mut mags = Vec::with_capacity(spec.buffers.len());
    let mut squares = Vec::with_capacity(spec.buffers.len());
    for b in &spec.buffers {
        let float = elem_type(b.elem).is_float();
        let mut scratch = |wanted: bool| -> Result<Option<u64>, BackendError> {
            if !wanted {
                return Ok(None);
            }
            let m = t.alloc(b.spec.total())?;
            t.fill(m, crate::inputs::GUARD_BYTE, b.spec.total())?;
            Ok(Some(m))
        };
        mags.push(scratch(wants_mags && (b.compare.is_some() || float))?);
        squares.push(scratch(wants_mags && b.compare.is_some())?);
    }
    Ok(SumScratch { mags, squares })
}

/// The baseline's own operands (`cublas` and `copy` of [`Device`]).
struct Operands {
    cublas: Option<[u64; 3]>,
    copy: Option<(u64, u64)>,
}

/// The baseline's own operands: cuBLAS's A, B and C, or a copy's source and destination.
fn baseline_operands(t: &mut dyn Timer, spec: &MeasureSpec) -> Result<Operands, BackendError> {
    let cublas = match spec.baseline {
        BaselinePlan::Cublas { m, n, k } => {
            let (a, b, c) = (
                t.alloc(4 * m * k)?,
                t.alloc(4 * k * n)?,
                t.alloc(4 * m * n)?,
            );
            // Non-zero operands: some hardware runs faster on zeros (docs/labs/matmul.md).
            t.fill(a, 0x3e, 4 * m * k)?;
            t.fill(b, 0x3d, 4 * k * n)?;
            Some([a, b, c])
        }
        _ => None,
    };
    let copy = match spec.baseline {
        BaselinePlan::Copy { bytes } => Some((t.alloc(bytes.max(4))?, t.alloc(bytes.max(4))?)),
        _ => None,
    };
    Ok(Operands { cublas, copy })
}
