//! The rank set's cross-device race check: a happens-before check of global memory accesses
//! between ranks, at block granularity. Each (rank, block) is an agent with a vector clock;
//! the threads of a block are one agent (so a block that sets a flag before all its threads
//! wrote their data, for want of a `__syncthreads()`, is not seen). Only accesses to the
//! ranks' allocations are tracked, and only pairs of accesses by agents on different ranks
//! are reported: races between blocks of one device are the single-device checks' business.
//!
//! Edges follow the PTX memory model as it applies between two devices:
//! - a `.sys`-scope fence (`membar.sys` = `__threadfence_system()`, `fence.sc.sys`,
//!   `fence.acq_rel.sys`) marks what the block did before it; a later strong store (volatile,
//!   relaxed or release at `.sys` scope, any atomic) to a location publishes the block's clock
//!   as of that fence to the location (`st.release.sys` and `atom.release.sys` publish the
//!   clock as of themselves);
//! - a strong load (volatile, acquire, relaxed at `.sys` scope, any atomic) of that location
//!   acquires what was published there.
//!
//! A `.gpu`-scope fence (`__threadfence()`) does not order a block's stores for another
//! device (another GPU is outside gpu scope), but it does for blocks of its own device: a
//! block that acquires from its own device's publication learns its writes up to the gpu
//! fence. Each clock entry has three levels: what is ordered (`HB`), what would be if gpu
//! fences ordered for peers (`GPU`), and what would be if a flag store ordered without any
//! fence (`FLAG`); a race's level says what to fix (`__threadfence_system()`, a fence at all,
//! or waiting for the flag).
//!
//! Shadow state, per 4-byte word of an allocation that a launch touches: the last write and,
//! per rank, the last read (agent, clock): 8 bytes x (ranks + 1) a word,
//! allocated zeroed (pages never touched cost nothing), at most `MAX_SHADOW_WORDS` in all
//! (allocations beyond that are not checked). Vector clocks are sparse (the agents a block
//! heard of); their entries in all are bounded by `MAX_ENTRIES`, past which the check stops.
//! Accesses narrower than a word count as the whole word.

use super::decode::sem;
use super::mem::Region;
use std::collections::HashMap;

/// Most ranks a set may have (as many GPUs as one host of the lent machines has).
pub const MAX_RANKS: usize = 8;
/// Agents (blocks of all ranks) the check follows at most.
const MAX_AGENTS: usize = 1 << 24;
/// Shadow `u32`s at most (512 MiB).
const MAX_SHADOW_WORDS: usize = 128 << 20;
/// Vector-clock entries (agents' and publications') at most.
const MAX_ENTRIES: usize = 32 << 20;
/// A stamp's clock bit that says the access was strong.
const STRONG: u32 = 1 << 31;

/// Levels of a clock entry (see the module's documentation).
const HB: usize = 0;
const GPU: usize = 1;
const FLAG: usize = 2;
type Clocks = [u32; 3];

/// A sparse vector clock: (agent, clocks), sorted by agent.
#[derive(Clone, Default)]
struct Vc(Vec<(u32, Clocks)>);

impl Vc {
    fn get(&self, a: u32) -> Clocks {
        match self.0.binary_search_by_key(&a, |e| e.0) {
            Ok(i) => self.0[i].1,
            Err(_) => [0; 3],
        }
    }

    fn raise(&mut self, a: u32, c: Clocks) -> usize {
        match self.0.binary_search_by_key(&a, |e| e.0) {
            Ok(i) => {
                let e = &mut self.0[i].1;
                for k in 0..3 {
                    e[k] = e[k].max(c[k]);
                }
                0
            }
            Err(i) => {
                self.0.insert(i, (a, c));
                1
            }
        }
    }

    /// Join `other` in; `upgrade(agent)`: that agent's gpu level counts as ordered. Returns
    /// the entries added.
    fn join(&mut self, other: &Vc, upgrade: impl Fn(u32) -> bool) -> usize {
        let mut added = 0;
        for &(a, mut c) in &other.0 {
            if upgrade(a) {
                c[HB] = c[HB].max(c[GPU]);
            }
            added += self.raise(a, c);
        }
        added
    }
}

/// One block of one rank.
struct Agent {
    rank: u8,
    block: [u32; 3],
    /// Its own clock: stamps its accesses; a fence or a strong store moves it on.
    clock: u32,
    /// What it knows of other agents.
    vc: Vc,
    /// Its knowledge and own clock at its last `.sys` fence, and at its last fence of gpu
    /// scope or wider.
    sys: (Vc, u32),
    gpu: (Vc, u32),
    live: bool,
}

/// What strong stores published at a word: the clocks, and the one rank that published
/// there (`None` when several did: no gpu-level upgrade then).
struct Pub {
    vc: Vc,
    rank: Option<u8>,
}

/// One access in the shadow: agent + 1 (0: none), clock (| `STRONG`).
#[derive(Clone, Copy)]
struct Stamp {
    agent: u32,
    clock: u32,
}

/// A conflict found: its kind, the other agent, and whether this access was strong.
struct Found {
    kind: u8,
    other: u32,
    strong: bool,
}

/// A race found at an access: the diagnostic's kind (its fold key) and message.
pub struct Race {
    pub kind: u8,
    pub message: String,
}

/// What an access does.
#[derive(Clone, Copy, PartialEq)]
pub enum Access {
    Read,
    Write,
    /// An atomic: reads, then writes.
    Rmw,
}

pub struct XRace {
    ranks: usize,
    agents: Vec<Agent>,
    /// Per allocation (by base): its shadow, `None` when it did not fit the bound.
    shadow: HashMap<u64, Option<Vec<u32>>>,
    shadow_words: usize,
    pubs: HashMap<u64, Pub>,
    entries: usize,
    /// The check stopped (a bound was reached).
    off: bool,
}

/// The agent id a `BlockRunner` passes for "not checked".
pub const NO_AGENT: u32 = u32::MAX;

impl XRace {
    pub fn new(ranks: usize) -> XRace {
        XRace {
            ranks: ranks.clamp(1, MAX_RANKS),
            agents: Vec::new(),
            shadow: HashMap::new(),
            shadow_words: 0,
            pubs: HashMap::new(),
            entries: 0,
            off: false,
        }
    }

    /// A block of `rank` became resident: its agent id.
    pub fn add_agent(&mut self, rank: usize, block: [u32; 3]) -> u32 {
        if self.off || self.agents.len() >= MAX_AGENTS {
            return NO_AGENT;
        }
        self.agents.push(Agent {
            rank: rank as u8,
            block,
            clock: 1,
            vc: Vc::default(),
            sys: (Vc::default(), 0),
            gpu: (Vc::default(), 0),
            live: true,
        });
        (self.agents.len() - 1) as u32
    }

    /// The block finished: drop its clocks (its stamps keep naming it).
    pub fn end_agent(&mut self, agent: u32) {
        if let Some(a) = self.agents.get_mut(agent as usize) {
            self.entries = self
                .entries
                .saturating_sub(a.vc.0.len() + a.sys.0.0.len() + a.gpu.0.0.len());
            a.vc = Vc::default();
            a.sys.0 = Vc::default();
            a.gpu.0 = Vc::default();
            a.live = false;
        }
    }

    /// A fence (`sem` of an `Op::Fence`) by `agent`.
    pub fn fence(&mut self, agent: u32, sem_bits: u8) {
        let scope = sem_bits & sem::SCOPE;
        if self.off || scope < sem::GPU {
            return;
        }
        let Some(a) = self.agents.get_mut(agent as usize).filter(|a| a.live) else {
            return;
        };
        let snap = (a.vc.clone(), a.clock);
        let mut n = snap.0.0.len();
        if scope == sem::SYS {
            a.sys = snap.clone();
            n *= 2;
        }
        a.gpu = snap;
        self.entries += n;
        self.tick(agent);
    }

    /// Move an agent's clock on (after a fence or a strong store).
    fn tick(&mut self, agent: u32) {
        if let Some(a) = self.agents.get_mut(agent as usize) {
            a.clock += 1;
            if a.clock >= STRONG >> 1 || self.entries > MAX_ENTRIES {
                self.off = true;
            }
        }
    }

    /// One lane's access of `size` bytes at offset `off` of `reg` (at address `addr`), by
    /// `agent`, with the instruction's `sem` bits: the race it makes, if any (one per access;
    /// the block folds repeats per instruction).
    #[allow(clippy::too_many_arguments)]
    pub fn access(
        &mut self,
        agent: u32,
        reg: &Region,
        off: u64,
        size: u32,
        what: Access,
        sem_bits: u8,
    ) -> Option<Race> {
        let owner = reg.owner?;
        if self.off || reg.name.is_some() || !self.agents.get(agent as usize)?.live {
            return None;
        }
        let scope = sem_bits & sem::SCOPE;
        let atomic = what == Access::Rmw;
        let volatile = sem_bits & sem::VOLATILE != 0;
        let strong_load = atomic
            || volatile
            || sem_bits & sem::ACQUIRE != 0
            || (sem_bits & sem::RELAXED != 0 && scope == sem::SYS);
        let strong_store = atomic
            || volatile
            || (sem_bits & (sem::RELAXED | sem::RELEASE) != 0 && scope == sem::SYS);
        let strong = if what == Access::Read {
            strong_load
        } else {
            strong_store
        };
        let first = (off / 4) as usize;
        let last = ((off + size.max(1) as u64 - 1) / 4) as usize;
        let mut race = None;
        for w in first..=last {
            let found = self.word(agent, reg, owner, w, what, strong);
            race = race.or(found);
        }
        let key = reg.base + first as u64 * 4;
        if what != Access::Write && strong_load {
            self.acquire(agent, key);
        }
        if what != Access::Read && strong_store {
            let release_sys = sem_bits & sem::RELEASE != 0 && scope == sem::SYS;
            let release_gpu = sem_bits & sem::RELEASE != 0 && scope == sem::GPU;
            self.publish(agent, key, release_sys, release_gpu);
        }
        race
    }

    /// Check one word against its shadow and record the access.
    fn word(
        &mut self,
        agent: u32,
        reg: &Region,
        owner: u8,
        w: usize,
        what: Access,
        strong: bool,
    ) -> Option<Race> {
        let stride = 2 * (self.ranks + 1);
        let at = w.checked_mul(stride)?;
        let mut stamps = [Stamp { agent: 0, clock: 0 }; MAX_RANKS + 1];
        {
            let cells = self.shadow_of(reg)?.get(at..at + stride)?;
            for (k, s) in stamps.iter_mut().enumerate().take(stride / 2) {
                *s = Stamp {
                    agent: cells[2 * k],
                    clock: cells[2 * k + 1],
                };
            }
        }
        let stamp = |k: usize| stamps[k];
        let me = &self.agents[agent as usize];
        let mine = me.rank as usize;
        let mut race = None;
        // The last write, against this read or write.
        let wr = stamp(0);
        if wr.agent != 0 {
            race = self.conflict(agent, wr, strong, what != Access::Read, false);
        }
        // Every other rank's last read, against this write.
        if what != Access::Read && race.is_none() {
            for r in (0..self.ranks).filter(|&r| r != mine) {
                let rd = stamp(1 + r);
                if rd.agent != 0 {
                    race = self.conflict(agent, rd, strong, true, true);
                    if race.is_some() {
                        break;
                    }
                }
            }
        }
        let clock = self.agents[agent as usize].clock | if strong { STRONG } else { 0 };
        let shadow = self.shadow_of(reg)?;
        let cells = shadow.get_mut(at..at + stride)?;
        let put = |cells: &mut [u32], k: usize| {
            cells[2 * k] = agent + 1;
            cells[2 * k + 1] = clock;
        };
        if what == Access::Read {
            put(cells, 1 + mine);
        } else {
            cells.fill(0);
            put(cells, 0);
        }
        let addr = reg.base + w as u64 * 4;
        race.map(|f| self.describe(&f, agent, owner, reg, addr))
    }

    /// Whether `agent`'s access (a write when `writes`) conflicts with the earlier access
    /// `prev` (a read when `prev_read`, else a write) by an agent of another rank.
    fn conflict(
        &self,
        agent: u32,
        prev: Stamp,
        strong: bool,
        writes: bool,
        prev_read: bool,
    ) -> Option<Found> {
        let other = prev.agent - 1;
        let me = &self.agents[agent as usize];
        let them = self.agents.get(other as usize)?;
        let prev_strong = prev.clock & STRONG != 0;
        let c = prev.clock & !STRONG;
        if them.rank == me.rank || (!writes && prev_read) || (strong && prev_strong) {
            return None;
        }
        let k = me.vc.get(other);
        if k[HB] >= c {
            return None;
        }
        // 0: no flag set after it was waited for; 1: a flag, without a fence; 2: a flag
        // after a gpu-scope fence only.
        let level = if k[GPU] >= c {
            2
        } else if k[FLAG] >= c {
            1
        } else {
            0
        };
        let kind = if strong != prev_strong {
            // A flag one side accesses plainly.
            109 + u8::from(writes) * 2 + u8::from(prev_read)
        } else if prev_read {
            106 + level
        } else if writes {
            103 + level
        } else {
            100 + level
        };
        Some(Found {
            kind,
            other,
            strong,
        })
    }

    /// The allocation's shadow, made (zeroed) on first touch when it fits the bound.
    fn shadow_of(&mut self, reg: &Region) -> Option<&mut Vec<u32>> {
        let stride = 2 * (self.ranks + 1);
        let words = reg.len.div_ceil(4) as usize;
        let used = &mut self.shadow_words;
        self.shadow
            .entry(reg.base)
            .or_insert_with(|| {
                let n = words.checked_mul(stride)?;
                if *used + n > MAX_SHADOW_WORDS {
                    return None;
                }
                *used += n;
                Some(vec![0u32; n])
            })
            .as_mut()
    }

    /// A strong load of the word at `key`: learn what was published there.
    fn acquire(&mut self, agent: u32, key: u64) {
        let Some(p) = self.pubs.get(&key) else {
            return;
        };
        let me = self.agents[agent as usize].rank;
        let same = p.rank == Some(me);
        let ranks: Vec<u8> = if same {
            self.agents.iter().map(|a| a.rank).collect()
        } else {
            Vec::new()
        };
        let upgrade = |a: u32| same && ranks.get(a as usize) == Some(&me);
        let added = self.agents[agent as usize].vc.join(&p.vc, upgrade);
        self.entries += added;
    }

    /// A strong store to the word at `key`: publish what the agent's fences (or the store's
    /// own release) order before it.
    fn publish(&mut self, agent: u32, key: u64, release_sys: bool, release_gpu: bool) {
        let a = &self.agents[agent as usize];
        let mut out = Vc::default();
        for &(x, c) in &a.vc.0 {
            let hb = if release_sys {
                c[HB]
            } else {
                a.sys.0.get(x)[HB]
            };
            let gpu = if release_sys || release_gpu {
                c[GPU]
            } else {
                a.gpu.0.get(x)[GPU]
            };
            out.raise(x, [hb, gpu, c[FLAG]]);
        }
        let own = [
            if release_sys { a.clock } else { a.sys.1 },
            if release_sys || release_gpu {
                a.clock
            } else {
                a.gpu.1
            },
            a.clock,
        ];
        out.raise(agent, own);
        let rank = a.rank;
        let p = self.pubs.entry(key).or_insert_with(|| Pub {
            vc: Vc::default(),
            rank: Some(rank),
        });
        if p.rank != Some(rank) {
            p.rank = None;
        }
        let added = p.vc.join(&out, |_| false);
        self.entries += added;
        self.tick(agent);
    }

    /// The diagnostic's message: both ranks and blocks, the buffer and offset, what to fix.
    fn describe(&self, f: &Found, agent: u32, owner: u8, reg: &Region, addr: u64) -> Race {
        let me = &self.agents[agent as usize];
        let them = &self.agents[f.other as usize];
        let (r, b) = (me.rank, fmt_block(me.block));
        let (o, ob) = (them.rank, fmt_block(them.block));
        let at = format!(
            "{addr:#x} (byte {} of rank {owner}'s {}-byte allocation at {:#x})",
            addr - reg.base,
            reg.len,
            reg.base
        );
        let kind = f.kind;
        let message = match kind {
            100 => format!(
                "cross-device race: rank {r} block {b} reads {at}, which rank {o} block {ob} writes, without waiting for a flag rank {o} sets after writing it (a flag read before its peer's write is visible). Spin on the peer's flag with a volatile or atomic load until it is set, then read the data"
            ),
            101 => format!(
                "cross-device race (missing fence): rank {r} block {b} reads {at}, which rank {o} block {ob} wrote before setting the flag rank {r} waited for, with no fence between the write and the flag store: the data may not be visible to rank {r} yet. Put __threadfence_system() between writing the data and setting the flag"
            ),
            102 => format!(
                "cross-device race (fence scope): rank {r} block {b} reads {at}, which rank {o} block {ob} wrote and then fenced with __threadfence() only before setting the flag rank {r} waited for: a gpu-scope fence does not order writes for another device. Use __threadfence_system() (system scope) between writing the data and setting the flag"
            ),
            103..=105 => format!(
                "cross-device race: rank {r} block {b} writes {at}, which rank {o} block {ob} also writes, and nothing orders the two writes ({}). Hand the buffer over with a flag: write, __threadfence_system(), set the flag; the peer waits for it before writing",
                level_note(kind - 103)
            ),
            106..=108 => format!(
                "cross-device race: rank {r} block {b} overwrites {at}, which rank {o} block {ob} may still be reading (a write after a peer's read; {}). Wait for a flag rank {o} sets once it has finished reading (after __threadfence_system()) before writing",
                level_note(kind - 106)
            ),
            _ => {
                let access = |strong: bool, write: bool| {
                    format!(
                        "{} {}",
                        if strong {
                            "a volatile/atomic"
                        } else {
                            "a plain"
                        },
                        if write { "write" } else { "read" }
                    )
                };
                let writes = kind >= 111;
                let prev_read = (kind - 109) % 2 == 1;
                format!(
                    "cross-device race on a flag: rank {r} block {b} makes {} of {at}, and rank {o} block {ob} made {} of it, unordered. A flag must be written and read with volatile or atomic accesses on both sides",
                    access(f.strong, writes),
                    access(!f.strong, !prev_read)
                )
            }
        };
        Race { kind, message }
    }
}

/// Why two accesses are unordered, by level (see `conflict`).
fn level_note(level: u8) -> &'static str {
    match level {
        2 => {
            "the peer fenced with __threadfence() only, and a gpu-scope fence does not order for another device: use __threadfence_system()"
        }
        1 => {
            "the peer set its flag without a fence before it: put __threadfence_system() before the flag store"
        }
        _ => "no flag hand-off orders them",
    }
}

fn fmt_block(b: [u32; 3]) -> String {
    if b[1] == 0 && b[2] == 0 {
        format!("{}", b[0])
    } else {
        format!("({},{},{})", b[0], b[1], b[2])
    }
}
