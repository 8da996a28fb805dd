//! The course's "common issues", one hint per failure category (docs/hints.md). Hints teach:
//! they say what to look at, not what the answer is.

/// Output elements differ from the reference.
pub const WRONG_RESULTS: &str = "Wrong results: check the bounds and the index arithmetic. Is every element's index computed from blockIdx, blockDim and threadIdx exactly once, and guarded with `if (i < n)`?";
/// Some output elements were never written.
pub const UNWRITTEN: &str = "Some outputs were never written: does the grid cover every element? With n not a multiple of the block size, the grid must round up (ceil_div) and each thread check `i < n`.";
/// A write landed outside a buffer.
pub const OUT_OF_BOUNDS: &str = "A write landed outside the buffer: a thread with i >= n (or a negative index) wrote memory. Add or fix the bounds check before every store.";
/// A memcheck finding on a load: the read, not a write, went past the buffer.
pub const OUT_OF_BOUNDS_READ: &str = "A read went outside the buffer: a thread with i >= n (or a negative index) loaded memory it does not own (in shared memory: past the size the launch gives the block). Add or fix the bounds check before every load, and check the sizes of shared arrays.";
/// A read-only input changed.
pub const CONST_WRITTEN: &str = "The kernel changed an input it must only read. Write results to the output buffer, not into the inputs.";
/// NaN or Inf where the reference has finite values.
pub const NON_FINITE: &str = "NaN or Inf where a finite value was expected: look for overflow (for softmax, subtract the row maximum before exp), division by zero, or reading memory that was never written.";
/// A timeout or hang.
/// A correctness launch that ran past its deadline (the finding names the line its threads
/// were at, where the emulator saw it).
pub const TIMEOUT: &str = "The kernel did not finish. At the line shown (or in the loops of the kernel): a loop whose condition never becomes false (a bound never reached, an index never advanced), a thread waiting for a value another thread or block should write (a spin on a flag: blocks need not run at the same time, and a plain load may never see the write; use atomics, or split the work into two launches), or a __syncthreads() that not every thread of the block reaches (e.g. inside `if (tid < s)`).";
/// What a failing metric check's metric means and what usually fixes it (the same advice as
/// `check --profile` gives); `None` for a metric without one.
pub fn for_metric(metric: &str) -> Option<&'static str> {
    Some(match metric {
        "shared_bank_conflicts" => {
            "Shared-memory accesses of one warp hit the same bank and are served one after the other: pad the shared array (a 32x32 tile read by columns as `tile[32][33]`) or change which thread touches which word."
        }
        "global_load_efficiency" | "global_load_sectors_per_request" => {
            "The loads of a warp use only part of each 32-byte sector they fetch: consecutive threads should read consecutive addresses (threadIdx.x on the fastest-varying index), or stage a tile through shared memory."
        }
        "global_store_efficiency" | "global_store_sectors_per_request" => {
            "The stores of a warp fill only part of each 32-byte sector they write: consecutive threads should write consecutive addresses (threadIdx.x on the fastest-varying index), or stage a tile through shared memory."
        }
        "branch_divergence" => {
            "The threads of a warp take different sides of a branch, which then run one after the other: let whole warps take the same path (conditions on the warp, not the thread, where you can)."
        }
        "warp_instructions" | "lane_instructions" => {
            "The kernel executes more instructions than the bar allows: do less work per element (hoist what does not change out of loops, reuse loaded values)."
        }
        _ => return None,
    })
}

pub const DEADLOCK: &str = "The kernel did not finish: a __syncthreads() that not every thread of the block reaches (e.g. inside `if (tid < s)`), or a loop whose condition never becomes false.";
/// A fault (illegal address, trap).
pub const FAULT: &str = "The kernel crashed: an access outside any allocation (check the bounds and pointer arithmetic), a trap, or a misaligned access.";
/// Out of memory or resources at launch.
pub const RESOURCES: &str = "Out of memory or resources: check the block size, the shared memory per block, and device-side malloc.";
/// Correct but below the speed threshold.
pub const SLOW: &str = "Correct but slow: check for warp divergence and uncoalesced global memory access (consecutive threads should touch consecutive addresses), and use shared memory to reuse data.";
/// The kernel is missing.
pub const MISSING_KERNEL: &str = "Declare the kernel exactly as the contract says, with extern \"C\" so its name is not mangled: extern \"C\" __global__ void NAME(...).";
/// Shared-memory race.
pub const RACE: &str = "Threads read shared memory another thread writes without a __syncthreads() between the write and the read.";
/// Barrier divergence.
pub const BARRIER_DIVERGENCE: &str = "A __syncthreads() is reached by only some threads of the block: move it out of the divergent branch so every thread executes it.";
/// Compile error.
pub const COMPILE: &str = "The code does not compile: read the first error in the log; later errors often follow from it.";
/// The output is the transpose of the right answer.
pub const TRANSPOSED: &str = "The output is the transpose of the right answer: rows and columns are swapped somewhere. In row-major storage element (row, col) of an R x C matrix is at row * C + col; check which of threadIdx.x / threadIdx.y maps to the row, in the loads and in the store.";
/// The output is all zeros.
pub const ZEROS: &str = "Every output is 0: is the result stored at all (to the output pointer, not a local copy), is the accumulator added to rather than overwritten, and does the store run for the threads that hold the result?";
/// Off by a constant.
pub const OFFSET: &str = "Every output is off by the same amount: look at the accumulator's initial value and at anything added once per element (a bias, a starting value, an extra loop iteration).";
/// The right values in the wrong places.
pub const PERMUTED: &str = "The right values land in the wrong places: check the index arithmetic of the store (which thread writes which element), and whether x and y (or rows and columns) are swapped.";
/// Right inside, wrong at the border.
pub const SHIFTED: &str = "Each output holds its neighbour's right value: an index off by one (or two). Check where each thread reads and stores (i vs i - 1, i + 1), the loop bounds (< vs <=), and, for a scan, whether element i should include x[i] (inclusive) or stop before it (exclusive).";

pub const EDGES: &str = "Right inside but wrong at the border: check the bounds conditions of the threads at the edges, and what the kernel reads outside the matrix (padding, or the last partial tile).";

/// The hint for a kind of wrong output.
pub fn for_wrong(w: &crate::compare::Wrong) -> &'static str {
    use crate::compare::Wrong;
    match w {
        Wrong::Untouched { .. } | Wrong::PartlyUnwritten { .. } => UNWRITTEN,
        Wrong::NonFinite { .. } => NON_FINITE,
        Wrong::Imprecise { .. } => IMPRECISE,
        Wrong::Zeros => ZEROS,
        Wrong::Offset { .. } => OFFSET,
        Wrong::Shifted { .. } => SHIFTED,
        Wrong::Transposed => TRANSPOSED,
        Wrong::Permuted => PERMUTED,
        Wrong::Edges { .. } => EDGES,
        Wrong::Values { .. } => WRONG_RESULTS,
    }
}
/// Right on small inputs, wrong on large ones.
pub const SMALL_ONLY: &str = "Right for small inputs only: what changes when n grows past one block (or one tile)? Check the grid size, the loop over blocks or tiles, the combination of per-block results, and sums that lose precision when they grow.";

/// Right to a few digits, but less precise than the lab's precision allows.
pub const IMPRECISE: &str = "The results are close to the right answer but off by more than rounding in the lab's precision explains: keep the arithmetic in float (no __half or __float2half, no bfloat16, no TF32 tensor cores through wmma or mma.sync, no fast approximations where the lab asks for precise math). A lab that teaches lower precision says so in its rubric (`precision:`).";

/// A timed launch left (part of) its output as it was before the launch.
pub const TIMED_UNWRITTEN: &str = "Every timed launch starts with its outputs refilled with NaN (or the contract's initial value) and fresh inputs: a kernel must write every output element on every launch, not skip work it did on an earlier launch.";

pub const TIMED_WRONG: &str = "Every timed launch runs on fresh inputs and its output is checked against the reference. A kernel must compute the whole answer on every launch: no state kept between launches (a __device__ counter or cache), no answer replayed from an earlier launch, no work skipped once the first launches are done.";

pub const IMPOSSIBLE: &str = "The measured time is below what this GPU's memory bandwidth or arithmetic peak allows for this case: the kernel cannot have done the work it was asked for. If you believe this is wrong, show the course staff your kernel.";

pub const TIMED_TOO_SLOW: &str = "One launch of the performance case took longer than the check allows (its launch timeout, at most twice its time budget): a kernel that is far too slow for this size (one thread doing all the work, printf from every thread) or one that never finishes.";
