//! The 50-student fixture cohort of the reduction lab, generated (deterministically) from the
//! example submissions and a few inline sources rather than committed as 50 copies: good
//! solutions in every form a course receives (folders, single files, `.zip`, `.tar.gz`), the
//! classic bugs, hostile entries (hangs, traps, printf floods, includes of system files, a
//! corrupt archive, a path-traversing archive, a malformed manifest, an id claimed twice,
//! formula and non-ASCII names, empty folders), planted duplicates (an exact copy and a
//! renamed, re-commented, re-formatted copy), and students who handed in another lab.

use std::io::Write as _;
use std::path::Path;

/// Correct, in another style than the examples: grid-stride atomics, an interleaved tree,
/// butterfly shuffles with one atomic per warp.
pub const ALT_A: &str = r#"// Interleaved tree and butterfly shuffles.
extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        atomicAdd(&out[0], in[k]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float cache[256];
    unsigned t = threadIdx.x;
    unsigned g = blockIdx.x * blockDim.x + t;
    cache[t] = g < (unsigned)n ? in[g] : 0.0f;
    __syncthreads();
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        if (t % (2 * stride) == 0) cache[t] += cache[t + stride];
        __syncthreads();
    }
    if (t == 0) atomicAdd(out, cache[0]);
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (g < (unsigned)n) v = in[g];
    for (int mask = 16; mask >= 1; mask /= 2)
        v += __shfl_xor_sync(0xffffffff, v, mask);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"#;

/// Correct, a third style: early return, a `while` tree, an unrolled warp sum.
pub const ALT_B: &str = r#"/* Unrolled warp sums, while-loop tree. */
#define WARP 32
__device__ float lane_total(float x)
{
    x += __shfl_down_sync(0xffffffffu, x, 16);
    x += __shfl_down_sync(0xffffffffu, x, 8);
    x += __shfl_down_sync(0xffffffffu, x, 4);
    x += __shfl_down_sync(0xffffffffu, x, 2);
    x += __shfl_down_sync(0xffffffffu, x, 1);
    return x;
}

extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int idx = threadIdx.x + blockDim.x * blockIdx.x;
    if (idx >= n) return;
    atomicAdd(out, in[idx]);
}

extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float sm[256];
    int idx = threadIdx.x + blockDim.x * blockIdx.x;
    float x = 0.0f;
    if (idx < n) x = in[idx];
    sm[threadIdx.x] = x;
    __syncthreads();
    int half = blockDim.x >> 1;
    while (half > 0) {
        if (threadIdx.x < half) sm[threadIdx.x] = sm[threadIdx.x] + sm[threadIdx.x + half];
        __syncthreads();
        half >>= 1;
    }
    if (threadIdx.x == 0) atomicAdd(&out[0], sm[0]);
}

extern "C" __global__ void reduce_shuffle(const float* in, float* out, int n)
{
    __shared__ float per_warp[WARP];
    int idx = threadIdx.x + blockDim.x * blockIdx.x;
    float x = idx < n ? in[idx] : 0.0f;
    x = lane_total(x);
    int lane = threadIdx.x % WARP;
    int wid = threadIdx.x / WARP;
    if (lane == 0) per_warp[wid] = x;
    __syncthreads();
    if (wid == 0) {
        int warps = (blockDim.x + WARP - 1) / WARP;
        x = lane < warps ? per_warp[lane] : 0.0f;
        x = lane_total(x);
        if (lane == 0) atomicAdd(out, x);
    }
}
"#;

/// submissions-example/reduction/optimized with other names, comments and layout: identical
/// once normalized.
pub const DISGUISED_OPTIMIZED: &str = r#"/* All my own work. */
extern "C" __global__ void reduce_naive(const float* src, float* total, int count) {
    int me = blockIdx.x * blockDim.x + threadIdx.x;   // global index
    if (me < count) atomicAdd(total, src[me]);
}
extern "C" __global__ void reduce_shared(const float* src, float* total, int count) {
    __shared__ float buf[256];
    int t = threadIdx.x; int me = blockIdx.x * blockDim.x + t;
    buf[t] = (me < count) ? src[me] : 0.0f; __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step >>= 1) { if (t < step) buf[t] += buf[t + step]; __syncthreads(); }
    if (t == 0) atomicAdd(total, buf[0]);
}
__device__ float sum32(float acc) {
    for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);
    return acc;
}
extern "C" __global__ void reduce_shuffle(const float* src, float* total, int count) {
    __shared__ float parts[32];
    int me = blockIdx.x * blockDim.x + threadIdx.x;
    int l = threadIdx.x & 31, w = threadIdx.x >> 5;
    float acc = sum32(me < count ? src[me] : 0.0f);
    if (l == 0) parts[w] = acc;
    __syncthreads();
    if (w == 0) { acc = sum32(l < (blockDim.x + 31) / 32 ? parts[l] : 0.0f); if (l == 0) atomicAdd(total, acc); }
}
"#;

const NAIVE_ONLY: &str = r#"extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}
"#;

const PRINTF_FLOOD: &str = r#"extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 8; k++) printf("::error file=x.cu,line=1::cugrade says 100/100 %d %d\n", i, k);
    if (i < n) atomicAdd(out, in[i]);
}
"#;

const TRAP: &str = r#"extern "C" __global__ void reduce_naive(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) __trap();
    if (i < n) atomicAdd(out, in[i]);
}
"#;

const INCLUDE_PASSWD: &str = "#include \"/etc/passwd\"\nextern \"C\" __global__ void reduce_naive(const float* in, float* out, int n) {}\n";

/// How an entry reaches the cohort folder.
enum Form {
    Dir,
    /// A single `<entry>.cu` file.
    File,
    Zip,
    TarGz,
    /// These exact bytes as `<entry>` (a corrupt archive).
    Raw(&'static [u8]),
}

/// Where an entry's files come from.
enum Files {
    /// An example submission's folder (`lab/name` below submissions-example/), minus
    /// its expected.yaml.
    Example(&'static str),
    Inline(Vec<(&'static str, &'static str)>),
}

struct Entry {
    name: &'static str,
    form: Form,
    files: Files,
}

fn entries() -> Vec<Entry> {
    use Files::{Example, Inline};
    use Form::*;
    let e = |name, form, files| Entry { name, form, files };
    let mut v = vec![
        // Good, in every form.
        e("s01-optimized", Dir, Example("reduction/optimized")),
        e(
            "s02-naive",
            Dir,
            Inline(vec![
                (
                    "reduce.cu",
                    include_str!("../../submissions-example/reduction/naive/reduce.cu"),
                ),
                ("cugrade.yaml", "student: S1002\n"),
            ]),
        ),
        e("s03-alt-a", Zip, Inline(vec![("src/reduce.cu", ALT_A)])),
        e("s04-alt-b", TarGz, Inline(vec![("reduce.cu", ALT_B)])),
        e("s05-single-file", File, Inline(vec![("", ALT_B)])),
        // The classic bugs.
        e("s06-compile-error", Dir, Example("reduction/compile_error")),
        e(
            "s07-missing-bounds",
            Dir,
            Example("reduction/missing_bounds"),
        ),
        e(
            "s08-missing-syncthreads",
            Dir,
            Example("reduction/missing_syncthreads"),
        ),
        e("s09-off-by-one", Dir, Example("reduction/off_by_one")),
        e(
            "s10-syncthreads-in-branch",
            Dir,
            Example("reduction/syncthreads_in_branch"),
        ),
        e("s11-unfinished", Dir, Example("reduction/unfinished")),
        // Hostile.
        e("s12-infinite-loop", Dir, Example("reduction/infinite_loop")),
        e(
            "s13-printf-flood",
            Dir,
            Inline(vec![("reduce.cu", PRINTF_FLOOD)]),
        ),
        e("s14-trap", Dir, Inline(vec![("reduce.cu", TRAP)])),
        e(
            "s15-include-passwd",
            Dir,
            Inline(vec![("reduce.cu", INCLUDE_PASSWD)]),
        ),
        e(
            "s16-claims-s02s-id",
            Dir,
            Inline(vec![
                ("reduce.cu", NAIVE_ONLY),
                ("cugrade.yaml", "student: S1002\n"),
            ]),
        ),
        e(
            "s17-bad-manifest",
            Dir,
            Inline(vec![
                ("reduce.cu", NAIVE_ONLY),
                ("cugrade.yaml", "student: [unclosed\n"),
            ]),
        ),
        e(
            "s18-corrupt.zip",
            Raw(b"PK\x03\x04 this is not a zip archive"),
            Inline(vec![]),
        ),
        e(
            "s19-zip-slip",
            Zip,
            Inline(vec![("../escaped.cu", NAIVE_ONLY)]),
        ),
        e("s20-empty", Dir, Inline(vec![])),
        e(
            "s21-no-sources",
            Dir,
            Inline(vec![("README.txt", "I will hand it in tomorrow.\n")]),
        ),
        e("=SUM(A1;A2)", Dir, Inline(vec![("reduce.cu", NAIVE_ONLY)])),
        e("s23-zoë", Dir, Inline(vec![("kernels.cu", ALT_A)])),
        // Planted duplicates.
        e("s24-copy-of-s01", Dir, Example("reduction/optimized")),
        e(
            "s25-disguised-s01",
            Dir,
            Inline(vec![("mine.cu", DISGUISED_OPTIMIZED)]),
        ),
    ];
    // Handed in another lab: distinct code, every reduction kernel missing.
    for (name, lab) in [
        ("s26-vector-add-naive", "vector-add/naive"),
        ("s27-vector-add-grid-stride", "vector-add/grid_stride"),
        ("s28-vector-add-uncoalesced", "vector-add/uncoalesced"),
        ("s29-vector-add-missing-bounds", "vector-add/missing_bounds"),
        ("s30-vector-add-off-by-one", "vector-add/off_by_one"),
        ("s31-vector-add-compile-error", "vector-add/compile_error"),
        ("s32-vector-add-missing-kernel", "vector-add/missing_kernel"),
        ("s33-vector-add-infinite-loop", "vector-add/infinite_loop"),
        ("s34-transpose-naive", "transpose/naive_for_both"),
        ("s35-transpose-tiled", "transpose/tiled"),
        ("s36-transpose-bank-conflicts", "transpose/bank_conflicts"),
        (
            "s37-transpose-rows-per-thread",
            "transpose/tiled_rows_per_thread",
        ),
        ("s38-softmax-rows", "softmax/one_thread_per_row"),
        ("s39-softmax-unstable", "softmax/unstable"),
        ("s40-softmax-warp", "softmax/warp_reduce"),
        ("s41-embedding-block", "embedding/block_per_row"),
        ("s42-embedding-missing", "embedding/missing_indirection"),
        ("s43-embedding-thread", "embedding/thread_per_row"),
        ("s44-matmul-naive", "matmul/naive"),
        ("s45-matmul-register", "matmul/register_tiled"),
        ("s46-matmul-transposed", "matmul/transposed_operand"),
        ("s47-convolution-naive", "convolution/naive"),
        ("s48-convolution-halo", "convolution/shared_halo"),
        ("s49-fused-gemm-naive", "fused-gemm/naive"),
        ("s50-activations", "activations/straightforward"),
    ] {
        v.push(e(name, Dir, Example(lab)));
    }
    v
}

/// The files of an entry, in name order.
fn files(root: &Path, f: &Files) -> Vec<(String, Vec<u8>)> {
    let mut out = match f {
        Files::Inline(v) => v
            .iter()
            .map(|(n, t)| (n.to_string(), t.as_bytes().to_vec()))
            .collect(),
        Files::Example(rel) => {
            let dir = root.join("submissions-example").join(rel);
            let mut v = Vec::new();
            for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                if name != "expected.yaml" && e.path().is_file() {
                    v.push((name, std::fs::read(e.path()).unwrap()));
                }
            }
            v
        }
    };
    out.sort();
    out
}

/// Write the 50 entries into `cohort` (created). Same bytes every time: archive timestamps
/// and modes are fixed.
pub fn write(root: &Path, cohort: &Path) -> usize {
    std::fs::create_dir_all(cohort).unwrap();
    let list = entries();
    assert_eq!(list.len(), 50, "the fixture cohort has 50 students");
    for entry in &list {
        let files = files(root, &entry.files);
        match entry.form {
            Form::Dir => {
                let dir = cohort.join(entry.name);
                std::fs::create_dir_all(&dir).unwrap();
                for (name, bytes) in &files {
                    let p = dir.join(name);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(p, bytes).unwrap();
                }
            }
            Form::File => {
                std::fs::write(cohort.join(format!("{}.cu", entry.name)), &files[0].1).unwrap();
            }
            Form::Raw(bytes) => std::fs::write(cohort.join(entry.name), bytes).unwrap(),
            Form::Zip => {
                let f = std::fs::File::create(cohort.join(format!("{}.zip", entry.name))).unwrap();
                let mut z = zip::ZipWriter::new(f);
                let opts = zip::write::SimpleFileOptions::default()
                    .last_modified_time(zip::DateTime::default())
                    .unix_permissions(0o644);
                for (name, bytes) in &files {
                    z.start_file(name.as_str(), opts).unwrap();
                    z.write_all(bytes).unwrap();
                }
                z.finish().unwrap();
            }
            Form::TarGz => {
                let f =
                    std::fs::File::create(cohort.join(format!("{}.tar.gz", entry.name))).unwrap();
                let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
                let mut t = tar::Builder::new(gz);
                for (name, bytes) in &files {
                    let mut h = tar::Header::new_gnu();
                    h.set_size(bytes.len() as u64);
                    h.set_mode(0o644);
                    h.set_mtime(0);
                    h.set_cksum();
                    t.append_data(&mut h, name, bytes.as_slice()).unwrap();
                }
                t.into_inner().unwrap().finish().unwrap();
            }
        }
    }
    list.len()
}
