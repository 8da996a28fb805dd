//! CPU `embedding_lookup`: `out[i*dim + j] = table[ids[i]*dim + j]` (lab `embedding`).

use super::{Args, BaselineError, HostArgs, Threads, product, with_output};
use rayon::prelude::*;

const IMP: &str = "embedding_lookup";

pub fn embedding_lookup(args: &mut HostArgs, threads: Threads) -> Result<(), BaselineError> {
    let a = Args::new(IMP, args);
    let (num_ids, dim, vocab) = (a.size("num_ids")?, a.size("dim")?, a.size("vocab")?);
    let (table_len, out_len) = (product(IMP, &[vocab, dim])?, product(IMP, &[num_ids, dim])?);
    with_output(IMP, args, "out", out_len, |a, out| {
        let (table, ids) = (a.f32("table", table_len)?, a.i32("ids", num_ids)?);
        if let Some((i, id)) = ids
            .iter()
            .enumerate()
            .find(|(_, id)| !(0..vocab as i64).contains(&(**id as i64)))
        {
            return Err(a.err(format!("ids[{i}] = {id} is outside [0, {vocab})")));
        }
        if dim == 0 {
            return Ok(());
        }
        let row = |(o, &id): (&mut [f32], &i32)| {
            let id = id as usize;
            o.copy_from_slice(&table[id * dim..(id + 1) * dim]);
        };
        match threads {
            Threads::Single => out.chunks_mut(dim).zip(ids).for_each(row),
            Threads::Parallel => out.par_chunks_mut(dim).zip(ids.par_iter()).for_each(row),
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::HostBuffer::{F32, I32};
    use crate::baseline::testutil::*;

    fn mk(ids: Vec<i32>) -> HostArgs {
        let n = ids.len();
        args(
            vec![
                ("table", F32(vec![0., 1., 10., 11., 20., 21.])),
                ("ids", I32(ids)),
                ("out", F32(vec![f32::NAN; n * 2])),
            ],
            &[("num_ids", n as f64), ("dim", 2.), ("vocab", 3.)],
        )
    }

    #[test]
    fn gathers_rows_including_repeats() {
        for t in [Threads::Single, Threads::Parallel] {
            let mut a = mk(vec![2, 0, 2]);
            embedding_lookup(&mut a, t).unwrap();
            assert_eq!(out(&a, "out"), vec![20., 21., 0., 1., 20., 21.]);
        }
    }

    #[test]
    fn out_of_range_ids_are_errors_not_panics() {
        for bad in [3, -1] {
            let e = embedding_lookup(&mut mk(vec![0, bad]), Threads::Single).unwrap_err();
            assert!(e.message.contains("ids[1]"), "{}", e.message);
        }
    }
}
