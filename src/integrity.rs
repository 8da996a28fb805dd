//! Integrity flags: pairs of submissions whose sources are identical or near-identical once
//! comments, whitespace and naming are taken away. Flags for a person to look at, never
//! verdicts.
//!
//! The method is MOSS's (Schleimer, Wilkerson, Aiken, "Winnowing: local algorithms for document
//! fingerprinting", SIGMOD 2003): the source becomes a token stream with comments dropped and
//! every identifier the student chose replaced by one placeholder (keywords, CUDA built-ins and
//! intrinsics are kept, since they carry the structure); every run of `K` tokens is hashed; in
//! each window of `W` consecutive hashes the smallest is kept as a fingerprint. Any shared
//! passage of at least `K + W - 1` tokens is guaranteed to share a fingerprint, and nothing
//! shorter than `K` tokens can. Fingerprints that also occur in the rubric's reference kernels
//! or the lab's starter code are dropped before comparing, so code everyone was given never
//! makes two students look alike.
//!
//! Fingerprints are saved per student (`fingerprints.json`) so that `cugrade merge` can compare
//! students graded on different machines.

pub mod device;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Tokens per hashed run. Twelve tokens is about one statement of kernel code.
pub const K: usize = 12;
/// Window of hashes a fingerprint is chosen from.
pub const W: usize = 8;
/// A pair is flagged when this share of their fingerprints (shared over either's, Jaccard) is
/// shared. Near-identical, not "one contains the other": variants of one template that each
/// changed a different part stay below it, and so does a kernel copied into a much larger
/// submission (MOSS's known limit as well; the pair still shows in a lower-threshold search).
pub const THRESHOLD: f64 = 0.6;
/// Submissions with fewer own fingerprints than this are too small to compare meaningfully.
pub const MIN_PRINTS: usize = 4;

/// One source file handed to fingerprinting: its submission-relative name and text.
#[derive(Debug, Clone)]
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// One kept fingerprint: the hash of a `K`-token run and the lines it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Print {
    pub hash: u64,
    /// Index into [`Fingerprints::files`].
    pub file: u32,
    pub first_line: u32,
    pub last_line: u32,
}

/// A submission's fingerprints, as `<student>/fingerprints.json` stores them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprints {
    pub files: Vec<String>,
    pub prints: Vec<Print>,
    /// Hash of the whole normalized token stream: equal digests mean identical code up to
    /// comments, layout and naming. Empty when the submission has no code of its own.
    pub digest: String,
}

/// A flagged pair (`a` sorts before `b`).
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub a: String,
    pub b: String,
    /// Shared fingerprints over all fingerprints of the two (Jaccard), 0 to 1; 1 when identical.
    pub similarity: f64,
    /// Identical after normalization.
    pub identical: bool,
    /// Matching line ranges in `a` and in `b`, e.g. `reduce.cu:3-12`.
    pub lines_a: Vec<String>,
    pub lines_b: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    C,
    Ptx,
    Python,
}

fn lang_of(name: &str) -> Lang {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".py") {
        Lang::Python
    } else if lower.ends_with(".ptx") {
        Lang::Ptx
    } else {
        Lang::C
    }
}

/// A normalized token and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: u32,
}

/// Words that carry structure, not naming: kept as they are.
fn is_kept_word(w: &str, lang: Lang) -> bool {
    // Keywords, types, CUDA built-ins and PTX opcodes; Python keywords and Numba's names.
    const C_WORDS: &str = "auto break case char const continue default do double else enum \
        extern float for goto if inline int long register return short signed sizeof static \
        struct switch typedef union unsigned void volatile while bool true false nullptr \
        template typename class namespace using constexpr size_t half float2 float4 int2 int4 \
        uint uint32_t int32_t uint64_t int64_t dim3 threadIdx blockIdx blockDim gridDim \
        warpSize min max fminf fmaxf expf logf sqrtf rsqrtf fabsf define include \
        pragma unroll reg param global shared local entry visible ld st mov add mul mad fma \
        setp bra ret cvt and or xor not shl shr atom red bar sync shfl f32 f64 s32 u32 s64 u64 \
        b32 b64 pred";
    const PY_WORDS: &str = "and as assert break class continue def del elif else except \
        False finally for from global if import in is lambda None nonlocal not or pass raise \
        return True try while with yield cuda jit grid gridsize threadIdx blockIdx blockDim \
        gridDim syncthreads atomic shared array local float32 int32 range min max len \
        numba";
    w.starts_with("__")
        || w.starts_with("atomic")
        || match lang {
            Lang::C | Lang::Ptx => C_WORDS.split_whitespace().any(|k| k == w),
            Lang::Python => PY_WORDS.split_whitespace().any(|k| k == w),
        }
}

/// Tokens of one file: comments and whitespace dropped, identifiers canonicalized, literals
/// of strings collapsed. Numbers are kept: `256` and `32` say something about the code.
fn tokens(text: &str, lang: Lang) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1u32);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if (lang != Lang::Python && c == '/' && next == Some('/'))
            || (lang == Lang::Python && c == '#')
        {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if lang != Lang::Python && c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == '"' || c == '\'' {
            let start = line;
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' {
                    i += 1;
                }
                if chars.get(i) == Some(&'\n') {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Token {
                text: "\"".into(),
                line: start,
            });
        } else if c.is_alphabetic()
            || c == '_'
            || (lang == Lang::Ptx && c == '%' && next.is_some_and(char::is_alphabetic))
        {
            // `%r1`, `%tid` in PTX are registers and special registers: words too.
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // Member names (`threadIdx.x`, `v.w`) are structure; a variable called `x` is not.
            let member = out.last().is_some_and(|t: &Token| t.text == ".");
            let text = if member || is_kept_word(&word, lang) {
                word
            } else if let Some(rest) = word.strip_prefix('%') {
                // PTX: keep special registers (%tid, %ntid), canonicalize numbered ones.
                if rest.chars().any(|c| c.is_ascii_digit()) {
                    "%R".into()
                } else {
                    word
                }
            } else {
                "I".into()
            };
            out.push(Token { text, line });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            out.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// FNV-1a: stable across Rust versions and machines, unlike `std`'s hasher, which matters
/// because fingerprints are saved and compared across runs.
fn fnv1a(parts: impl IntoIterator<Item = impl AsRef<[u8]>>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.as_ref().iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Every `K`-gram hash of a file with the lines it spans.
fn kgrams(toks: &[Token]) -> Vec<(u64, u32, u32)> {
    if toks.len() < K {
        return Vec::new();
    }
    toks.windows(K)
        .map(|w| {
            (
                fnv1a(w.iter().map(|t| t.text.as_bytes())),
                w[0].line,
                w[K - 1].line,
            )
        })
        .collect()
}

/// Winnowing: the minimum of every window of `W` hashes (the rightmost on ties), each kept once.
fn winnow(grams: &[(u64, u32, u32)]) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    if grams.is_empty() {
        return kept;
    }
    let w = W.min(grams.len());
    for start in 0..=grams.len() - w {
        let mut best = start;
        for j in start..start + w {
            if grams[j].0 <= grams[best].0 {
                best = j;
            }
        }
        if kept.last() != Some(&best) {
            kept.push(best);
        }
    }
    kept
}

/// Every `K`-gram hash of code everyone was given (reference kernels, starter code): a
/// fingerprint in this set is never a match.
pub fn common_hashes(sources: &[Source<'_>]) -> HashSet<u64> {
    sources
        .iter()
        .flat_map(|s| kgrams(&tokens(s.text, lang_of(s.name))))
        .map(|g| g.0)
        .collect()
}

/// Fingerprint a submission's sources, leaving out what `common` holds.
pub fn fingerprint(sources: &[Source<'_>], common: &HashSet<u64>) -> Fingerprints {
    let mut sorted: Vec<&Source<'_>> = sources.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(b.name));
    let mut fp = Fingerprints::default();
    let mut stream: Vec<String> = Vec::new();
    for (index, s) in sorted.iter().enumerate() {
        let toks = tokens(s.text, lang_of(s.name));
        let grams = kgrams(&toks);
        fp.files.push(s.name.to_string());
        for i in winnow(&grams) {
            let (hash, first_line, last_line) = grams[i];
            if !common.contains(&hash) {
                fp.prints.push(Print {
                    hash,
                    file: index as u32,
                    first_line,
                    last_line,
                });
            }
        }
        stream.extend(toks.into_iter().map(|t| t.text));
        stream.push("\u{0}file".into());
    }
    if !fp.prints.is_empty() {
        fp.digest = format!("{:016x}", fnv1a(stream.iter().map(String::as_bytes)));
    }
    fp
}

fn distinct(fp: &Fingerprints) -> HashSet<u64> {
    fp.prints.iter().map(|p| p.hash).collect()
}

/// Line ranges of `fp` covered by fingerprints in `shared`, per file, overlapping or adjacent
/// ranges merged.
fn ranges(fp: &Fingerprints, shared: &HashSet<u64>) -> Vec<String> {
    let mut by_file: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for p in fp.prints.iter().filter(|p| shared.contains(&p.hash)) {
        by_file
            .entry(p.file)
            .or_default()
            .push((p.first_line, p.last_line));
    }
    let mut out = Vec::new();
    for (file, mut spans) in by_file {
        spans.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let name = fp
            .files
            .get(file as usize)
            .map_or("?", String::as_str)
            .to_string();
        for (a, b) in merged {
            out.push(if a == b {
                format!("{name}:{a}")
            } else {
                format!("{name}:{a}-{b}")
            });
        }
    }
    out
}

/// Flagged pairs among `students` (name, fingerprints), most similar first, then by names.
/// Quadratic in the number of students, but over hash sets of a few hundred entries each: a
/// 500-student course is about 125 000 small set intersections.
pub fn pairs(students: &[(String, Fingerprints)]) -> Vec<Pair> {
    let sets: Vec<HashSet<u64>> = students.iter().map(|(_, f)| distinct(f)).collect();
    // Index fingerprints to the students holding them: only pairs sharing one are compared.
    let mut holders: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, s) in sets.iter().enumerate() {
        for h in s {
            holders.entry(*h).or_default().push(i);
        }
    }
    let mut candidates: HashSet<(usize, usize)> = HashSet::new();
    for list in holders.values().filter(|l| l.len() > 1) {
        for (x, &i) in list.iter().enumerate() {
            for &j in &list[x + 1..] {
                candidates.insert((i.min(j), i.max(j)));
            }
        }
    }
    let mut out = Vec::new();
    for (i, j) in candidates {
        let (na, fa) = &students[i];
        let (nb, fb) = &students[j];
        let smaller = sets[i].len().min(sets[j].len());
        if smaller < MIN_PRINTS {
            continue;
        }
        let shared: HashSet<u64> = sets[i].intersection(&sets[j]).copied().collect();
        let union = sets[i].len() + sets[j].len() - shared.len();
        let similarity = shared.len() as f64 / union.max(1) as f64;
        let identical = !fa.digest.is_empty() && fa.digest == fb.digest;
        if similarity < THRESHOLD && !identical {
            continue;
        }
        let (a, b, fa, fb) = if na <= nb {
            (na, nb, fa, fb)
        } else {
            (nb, na, fb, fa)
        };
        out.push(Pair {
            a: a.clone(),
            b: b.clone(),
            similarity: if identical { 1.0 } else { similarity },
            identical,
            lines_a: ranges(fa, &shared),
            lines_b: ranges(fb, &shared),
        });
    }
    out.sort_by(|x, y| {
        y.similarity
            .total_cmp(&x.similarity)
            .then_with(|| x.a.cmp(&y.a))
            .then_with(|| x.b.cmp(&y.b))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = r#"
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    __shared__ float s_data[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s_data[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) s_data[tid] += s_data[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(out, s_data[0]);
}
"#;

    /// The same kernel with other names, comments and layout.
    const DISGUISED: &str = r#"
// my own work, honest
extern "C" __global__ void reduce_shared(const float* src, float* dst, int count) {
    __shared__ float buf[256];   /* scratch */
    int me = threadIdx.x; int g = blockIdx.x * blockDim.x + me;
    buf[me] = (g < count) ? src[g] : 0.0f; __syncthreads();
    for (int step = blockDim.x / 2; step > 0; step >>= 1) { if (me < step) buf[me] += buf[me + step];
        __syncthreads(); }
    if (me == 0) atomicAdd(dst, buf[0]);
}
"#;

    const OTHER: &str = r#"
extern "C" __global__ void reduce_shared(const float* in, float* out, int n)
{
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        acc += in[i];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffff, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}
"#;

    fn fp(text: &str, common: &HashSet<u64>) -> Fingerprints {
        fingerprint(
            &[Source {
                name: "reduce.cu",
                text,
            }],
            common,
        )
    }

    #[test]
    fn renamed_and_reformatted_copy_is_identical_after_normalization() {
        let none = HashSet::new();
        let (a, b) = (fp(KERNEL, &none), fp(DISGUISED, &none));
        assert!(!a.prints.is_empty());
        assert_eq!(a.digest, b.digest);
        let p = pairs(&[("ann".into(), a), ("bob".into(), b)]);
        assert_eq!(p.len(), 1);
        assert!(p[0].identical);
        // One range each, from the kernel's first line to (near) its last: winnowing keeps
        // one k-gram per window, not necessarily the very last one.
        assert_eq!(p[0].lines_a.len(), 1, "{p:?}");
        assert!(p[0].lines_a[0].starts_with("reduce.cu:2-1"), "{p:?}");
        assert_eq!(p[0].lines_b.len(), 1, "{p:?}");
        assert!(p[0].lines_b[0].starts_with("reduce.cu:3-"), "{p:?}");
    }

    #[test]
    fn different_algorithms_are_not_flagged() {
        let none = HashSet::new();
        let p = pairs(&[
            ("ann".into(), fp(KERNEL, &none)),
            ("cat".into(), fp(OTHER, &none)),
        ]);
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn code_everyone_was_given_never_matches() {
        let common = common_hashes(&[Source {
            name: "reference.cu",
            text: KERNEL,
        }]);
        let (a, b) = (fp(KERNEL, &common), fp(DISGUISED, &common));
        assert!(a.prints.is_empty() && a.digest.is_empty());
        assert!(pairs(&[("ann".into(), a), ("bob".into(), b)]).is_empty());
    }

    #[test]
    fn a_copy_with_a_little_more_code_is_flagged_with_its_lines() {
        let none = HashSet::new();
        let extra = "__device__ float twice(float v)\n{\n    return v + v;\n}\n";
        let bigger = format!("{DISGUISED}{extra}");
        let p = pairs(&[
            ("zed".into(), fp(&bigger, &none)),
            ("ann".into(), fp(KERNEL, &none)),
        ]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!((p[0].a.as_str(), p[0].b.as_str()), ("ann", "zed"));
        assert!(!p[0].identical && p[0].similarity >= THRESHOLD, "{p:?}");
        assert!(p[0].similarity < 1.0, "{p:?}");
        // The matching lines are the copied kernel's, not the added function's (11 to 14).
        assert!(
            p[0].lines_b.iter().all(|r| r.starts_with("reduce.cu:3-")),
            "{p:?}"
        );
    }

    #[test]
    fn one_kernel_copied_into_a_much_larger_submission_is_below_the_threshold() {
        let none = HashSet::new();
        let bigger = format!("{OTHER}\n{OTHER}\n{DISGUISED}").replace("reduce_shared", "k");
        let p = pairs(&[
            ("zed".into(), fp(&bigger, &none)),
            ("ann".into(), fp(OTHER, &none)),
        ]);
        assert!(p.iter().all(|p| p.similarity < 1.0), "{p:?}");
    }

    #[test]
    fn hostile_text_does_not_panic() {
        let none = HashSet::new();
        for t in ["/*", "\"", "'\\", "//", "\u{202e}é漢字 %% 1e+", "", "#"] {
            let _ = fp(t, &none);
            let _ = fingerprint(
                &[Source {
                    name: "a.py",
                    text: t,
                }],
                &none,
            );
        }
    }

    #[test]
    fn fingerprints_are_stable_across_runs() {
        let none = HashSet::new();
        // Pinned: a change here invalidates fingerprints.json files of earlier runs.
        assert_eq!(fp(KERNEL, &none).digest, fp(KERNEL, &none).digest);
        assert_eq!(fnv1a(["a", "b"]), fnv1a(["a", "b"]));
        assert_ne!(fnv1a(["ab"]), fnv1a(["a", "b"]));
    }
}
