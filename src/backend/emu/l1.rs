//! The memory side of the cost counters (`super::cost`): the L1 cache model for global loads
//! and the L1/shared-memory wavefronts of one warp access, by the rules measured on an H100
//! (`ci/estimate/probe_l1.py`, docs/estimate.md).

const WAYS: usize = 4;

/// Timing scenarios run side by side: a load missing L1 on a sector the block touches first
/// comes from DRAM (scenario 0) or from L2 (scenario 1). Which is right depends on whether
/// other blocks brought the sector into L2 first, which the whole grid's footprint tells
/// (`crate::estimate::model`), so both critical paths are kept.
pub const SCENARIOS: usize = 2;
pub type Cycles = [u64; SCENARIOS];

/// A sector's fetch: when it was asked for and when its data arrives, per scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Fill {
    asked: Cycles,
    arrives: Cycles,
}

/// A sectored, set-associative, LRU L1 for global loads: 128-byte lines of four 32-byte
/// sectors, each with its fetch.
///
/// Warps are emulated in turns of 32 instructions, each on its own clock, so a warp may find a
/// sector that another warp asks for only later in time: then this access is the one that
/// fetches it (it pays the fetch's latency), though the traffic counts once. Sets are chosen
/// by a hash of the line, as GPUs' L1s choose them.
pub struct L1 {
    sets: usize,
    tags: Vec<[u64; WAYS]>,
    used: Vec<[u64; WAYS]>,
    fills: Vec<[[Fill; 4]; WAYS]>,
    valid: Vec<[u8; WAYS]>,
    stamp: u64,
}

impl L1 {
    pub fn new(bytes: u32) -> L1 {
        let lines = (bytes as usize / 128).max(WAYS);
        let sets = (lines / WAYS).max(1);
        L1 {
            sets,
            tags: vec![[u64::MAX; WAYS]; sets],
            used: vec![[0; WAYS]; sets],
            fills: vec![[[Fill::default(); 4]; WAYS]; sets],
            valid: vec![[0; WAYS]; sets],
            stamp: 0,
        }
    }

    /// The set of `line`: hashed, as GPUs' L1s hash their set index, so that a power-of-two
    /// stride (a matrix's column) does not pile every line into a few sets.
    fn set_of(&self, line: u64) -> usize {
        ((line.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % self.sets as u64) as usize
    }

    /// A load of `sector` at cycles `at`: whether the L1 holds it (a hit for traffic), and when
    /// its data is there. A miss fetches it with latency `miss`; `hit` is the L1's latency.
    pub fn access(&mut self, sector: u64, at: Cycles, miss: Cycles, hit: u64) -> (bool, Cycles) {
        let line = sector >> 2;
        let s = (sector & 3) as usize;
        let set = self.set_of(line);
        self.stamp += 1;
        let fetch = Fill {
            asked: at,
            arrives: [at[0] + miss[0], at[1] + miss[1]],
        };
        let tags = &mut self.tags[set];
        if let Some(w) = tags.iter().position(|&t| t == line) {
            self.used[set][w] = self.stamp;
            if self.valid[set][w] & (1 << s) != 0 {
                let f = &mut self.fills[set][w][s];
                let mut done = [0; SCENARIOS];
                for k in 0..SCENARIOS {
                    if at[k] >= f.asked[k] {
                        done[k] = (at[k] + hit).max(f.arrives[k]);
                    } else {
                        // Asked for earlier than the access that brought it in: this one
                        // fetches it, with that fetch's latency.
                        let lat = f.arrives[k] - f.asked[k];
                        f.asked[k] = at[k];
                        f.arrives[k] = at[k] + lat;
                        done[k] = f.arrives[k];
                    }
                }
                return (true, done);
            }
            self.valid[set][w] |= 1 << s;
            self.fills[set][w][s] = fetch;
            return (false, fetch.arrives);
        }
        let w = (0..WAYS).min_by_key(|&w| self.used[set][w]).unwrap_or(0);
        tags[w] = line;
        self.used[set][w] = self.stamp;
        self.valid[set][w] = 1 << s;
        self.fills[set][w][s] = fetch;
        (false, fetch.arrives)
    }
}

/// The L1 data banks' cycles for one warp's global load: like shared memory, the most distinct
/// 4-byte words on one of the 32 banks (a word's bank is its address's, whatever line it is
/// in), so that lanes 128 bytes apart take 32 cycles and lanes 132 bytes apart one.
pub fn global_wavefronts(addrs: &[u64; 32], mask: u32, size: u32) -> u64 {
    let words_per_lane = size.div_ceil(4).clamp(1, 4) as u64;
    let mut words: Vec<u64> = Vec::with_capacity(32 * words_per_lane as usize);
    let mut m = mask;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        for k in 0..words_per_lane {
            words.push((addrs[l] >> 2) + k);
        }
    }
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u16; 32];
    for w in &words {
        per_bank[(w & 31) as usize] += 1;
    }
    per_bank.iter().copied().max().unwrap_or(0) as u64
}

/// Shared-memory wavefronts of one warp access, as an H100 counts them (measured with
/// `ci/estimate/probe_l1.py`): the most distinct 4-byte words any of the 32 banks must serve
/// (lanes reading one word share it), and at least the bytes over the 128 one wavefront
/// carries. For 8- and 16-byte accesses those bytes are counted per quarter-warp (8 lanes:
/// quarters reading the same data each pay for it), and a 16-byte access takes at least one
/// wavefront per half-warp (a broadcast `LDS.128` is two).
pub fn wavefronts(addrs: &[u64; 32], mask: u32, size: u32) -> u64 {
    let words_per_lane = size.div_ceil(4).max(1) as u64;
    let mut words: Vec<u64> = Vec::with_capacity(32 * words_per_lane as usize);
    let mut bytes = 0u64;
    let mut halves = 0u64;
    for q in 0..4 {
        let start = words.len();
        let mut m = mask & (0xffu32 << (8 * q));
        if q % 2 == 0 && mask & (0xffffu32 << (8 * q)) != 0 {
            halves += 1;
        }
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            for k in 0..words_per_lane {
                words.push((addrs[l] >> 2) + k);
            }
        }
        let quarter = &mut words[start..];
        quarter.sort_unstable();
        let mut distinct = 0u64;
        let mut last = u64::MAX;
        for &w in quarter.iter() {
            if w != last {
                distinct += 1;
                last = w;
            }
        }
        bytes += 4 * distinct;
    }
    if words.is_empty() {
        return 0;
    }
    words.sort_unstable();
    words.dedup();
    if size <= 4 {
        bytes = 4 * words.len() as u64;
    }
    let mut per_bank = [0u16; 32];
    for w in &words {
        per_bank[(w & 31) as usize] += 1;
    }
    let most = *per_bank.iter().max().unwrap_or(&1) as u64;
    let least = if size >= 16 { halves } else { 1 };
    most.max(bytes.div_ceil(128)).max(least)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(f: impl Fn(u64) -> u64) -> [u64; 32] {
        std::array::from_fn(|l| f(l as u64))
    }

    #[test]
    fn wavefronts_count_conflicts_and_phases() {
        // Consecutive words: one wavefront; a column of a 32x32 float tile: 32.
        assert_eq!(wavefronts(&lanes(|l| 4 * l), u32::MAX, 4), 1);
        assert_eq!(wavefronts(&lanes(|l| 128 * l), u32::MAX, 4), 32);
        // Padded tile (33 floats a row): conflict-free.
        assert_eq!(wavefronts(&lanes(|l| 132 * l), u32::MAX, 4), 1);
        // A broadcast: one.
        assert_eq!(wavefronts(&lanes(|_| 64), u32::MAX, 4), 1);
        // 16-byte accesses of consecutive float4s: 512 bytes, four wavefronts; the same
        // float4 in every lane: two (one per half-warp).
        assert_eq!(wavefronts(&lanes(|l| 16 * l), u32::MAX, 16), 4);
        assert_eq!(wavefronts(&lanes(|_| 32), u32::MAX, 16), 2);
        assert_eq!(wavefronts(&lanes(|_| 32), 1, 16), 1);
        // 8-byte accesses: two phases.
        assert_eq!(wavefronts(&lanes(|l| 8 * l), u32::MAX, 8), 2);
        // What ci/estimate/probe_l1.py measured on an H100, lane pattern by width: 16 distinct
        // float4s repeated (lane % 16) four; 8 distinct repeated by quarter (lane % 8) four,
        // the same 8 grouped by lane / 4 two; float2s by lane % 8 two, by lane / 4 one.
        assert_eq!(wavefronts(&lanes(|l| 16 * (l % 16)), u32::MAX, 16), 4);
        assert_eq!(wavefronts(&lanes(|l| 16 * (l % 8)), u32::MAX, 16), 4);
        assert_eq!(wavefronts(&lanes(|l| 16 * (l / 4)), u32::MAX, 16), 2);
        assert_eq!(wavefronts(&lanes(|l| 16 * (l / 16)), u32::MAX, 16), 2);
        assert_eq!(wavefronts(&lanes(|l| 32 * l), u32::MAX, 16), 8);
        assert_eq!(wavefronts(&lanes(|l| 8 * (l % 8)), u32::MAX, 8), 2);
        assert_eq!(wavefronts(&lanes(|l| 8 * (l / 4)), u32::MAX, 8), 1);
        assert_eq!(wavefronts(&lanes(|l| 8 * (l % 16)), u32::MAX, 8), 2);
        assert_eq!(wavefronts(&lanes(|l| 16 * l), u32::MAX, 8), 4);
        // Stride of 2 words: 2-way conflict.
        assert_eq!(wavefronts(&lanes(|l| 8 * l), u32::MAX, 4), 2);
    }

    #[test]
    fn l1_hits_what_it_holds_and_evicts_the_oldest() {
        let mut c = L1::new(WAYS as u32 * 128); // one set of four lines
        assert_eq!(c.access(0, [10, 10], [600, 260], 35), (false, [610, 270]));
        // Later: a hit that waits for the data in flight.
        assert_eq!(c.access(0, [20, 20], [600, 260], 35), (true, [610, 270]));
        // After it arrived: the L1's own latency.
        assert_eq!(
            c.access(0, [1000, 1000], [600, 260], 35),
            (true, [1035, 1035])
        );
        // A warp that asks before the one that brought it in (on its own clock) fetches it.
        assert_eq!(c.access(0, [2, 2], [260, 260], 35), (true, [602, 262]));
        // Another sector of the same line: a sector miss.
        assert!(!c.access(1, [300, 300], [260, 260], 35).0);
        for line in 1..=4u64 {
            assert!(!c.access(line * 4, [0, 0], [260, 260], 35).0);
        }
        // Line 0 was the least recently used: gone.
        assert!(!c.access(0, [5, 5], [260, 260], 35).0);
    }
}
