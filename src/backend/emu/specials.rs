//! What the emulator's time and placement special registers read: the values an H100 gives,
//! so that a kernel cannot tell it runs on the emulator by reading them (issue 19).
//!
//! - `%globaltimer` (and `_lo`, `_hi`): nanoseconds since the Unix epoch, as the GPU's global
//!   timer reads, in steps of 32 ns. A virtual clock: it starts at the host's wall clock on
//!   the first launch, advances within a launch with the block's work at the SM clock rate,
//!   and between launches by the launch's estimated duration plus a launch gap, so that two
//!   reads never go backwards and never jump by the emulator's (much longer) wall time.
//! - `%clock64`, `%clock`, `%clock_hi`: SM cycles since the GPU was "switched on" (the host's
//!   boot time), per SM (each SM's counter is offset a little), advancing with the block's
//!   instructions at a plausible issue rate: the warps of one block read one counter, so a
//!   read after a barrier is never below a read before it.
//! - `%smid` and `%nsmid`: blocks spread over the H100's 132 SMs in the order the hardware's
//!   block scheduler hands them out (even SMs first, then odd: one SM per TPC, then the
//!   other); `%nsmid` is 132.
//! - `%warpid` (the warp's slot on its SM) and `%nwarpid` (64 slots per SM on sm_90), `%gridid`
//!   (a 64-bit launch number), the cluster registers of a launch without clusters, and
//!   `%pm0`..`%pm7` (0: no profiler is counting).

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// SMs of the target GPU (H100 SXM and H200: 132).
pub const SMS: u64 = 132;
/// Warp slots per SM (sm_90).
pub const WARP_SLOTS: u64 = 64;
/// SM clock, cycles per nanosecond (H100 SXM boost clock, 1755 MHz).
const CYCLES_PER_NS: f64 = 1.755;
/// `%globaltimer` resolution, ns.
const TIMER_STEP_NS: u64 = 32;
/// Host-side gap between two launches, ns.
const LAUNCH_GAP_NS: u64 = 6_000;

/// The clocks one launch starts from.
#[derive(Debug, Clone, Copy)]
pub struct Clocks {
    /// `%globaltimer` at the launch, ns since the Unix epoch.
    pub timer_ns: u64,
    /// SM cycles since the GPU was switched on, at the launch.
    pub cycles: u64,
    /// This launch's `%gridid`.
    pub grid_id: u64,
}

struct Virtual {
    timer_ns: u64,
    boot_ns: u64,
    grids: u64,
}

static VIRTUAL: Mutex<Option<Virtual>> = Mutex::new(None);

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1_700_000_000_000_000_000, |d| d.as_nanos() as u64)
}

/// Seconds the host has been up (the GPU's counters started about then).
fn uptime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0;
    if ok {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        3_600_000_000_000
    }
}

impl Clocks {
    /// The clocks for the next launch (advancing the grid number).
    pub fn at_launch() -> Clocks {
        let mut v = VIRTUAL.lock().unwrap_or_else(|p| p.into_inner());
        let now = wall_ns();
        let st = v.get_or_insert_with(|| Virtual {
            timer_ns: now,
            boot_ns: now.saturating_sub(uptime_ns()),
            // Grid ids of a fresh context start small and grow with every launch.
            grids: 4 + now % 61,
        });
        st.grids += 1;
        st.timer_ns += LAUNCH_GAP_NS;
        Clocks {
            timer_ns: st.timer_ns,
            cycles: ((st.timer_ns - st.boot_ns) as f64 * CYCLES_PER_NS) as u64,
            grid_id: st.grids,
        }
    }

    /// After a launch of `blocks` blocks that issued `warp_instructions`: the virtual clock
    /// moves on by the launch's duration at an H100's issue rate.
    pub fn finish(&self, warp_instructions: u64, blocks: u64) {
        let sms = blocks.clamp(1, SMS) as f64;
        // About two warp instructions per cycle per busy SM.
        let cycles = warp_instructions as f64 / (2.0 * sms);
        let ns = (cycles / CYCLES_PER_NS) as u64 + 2_000;
        let mut v = VIRTUAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(st) = v.as_mut() {
            st.timer_ns = st.timer_ns.max(self.timer_ns + ns);
        }
    }
}

/// The SM block `linear` (the block's index in x, y, z order) runs on.
pub fn smid(linear: u64) -> u64 {
    let slot = linear % SMS;
    let half = SMS / 2;
    if slot < half {
        2 * slot
    } else {
        2 * (slot - half) + 1
    }
}

/// The warp slot of warp `w` of block `linear` with `nwarps` warps on its SM.
pub fn warpid(linear: u64, w: u64, nwarps: u64) -> u64 {
    let resident = (WARP_SLOTS / nwarps.max(1)).max(1);
    ((linear / SMS) % resident * nwarps + w) % WARP_SLOTS
}

/// SM cycles a block has used after `steps` warp instructions with `nwarps` warps. A warp
/// issues a dependent instruction about every 4 cycles; an SM's 4 schedulers issue up to 4
/// warp instructions per cycle: the block issues min(4, nwarps / 4) per cycle.
fn block_cycles(steps: u64, nwarps: u64) -> u64 {
    steps * 4 / nwarps.clamp(1, 16)
}

/// `%clock64` on SM `sm` after the block has issued `steps` warp instructions.
pub fn clock64(c: &Clocks, sm: u64, steps: u64, nwarps: u64) -> u64 {
    // The SMs' counters are not in step with each other.
    c.cycles + sm * 7_919 + block_cycles(steps, nwarps)
}

/// `%globaltimer` after the block has issued `steps` warp instructions.
pub fn globaltimer(c: &Clocks, steps: u64, nwarps: u64) -> u64 {
    let ns = c.timer_ns + (block_cycles(steps, nwarps) as f64 / CYCLES_PER_NS) as u64;
    ns - ns % TIMER_STEP_NS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_spread_over_every_sm() {
        let ids: std::collections::BTreeSet<u64> = (0..SMS).map(smid).collect();
        assert_eq!(ids.len() as u64, SMS);
        assert_eq!((smid(0), smid(1), smid(66), smid(132)), (0, 2, 1, 0));
        assert!((0..1000).all(|b| smid(b) < SMS));
        assert!((0..1000).all(|b| warpid(b, 3, 8) < WARP_SLOTS));
    }

    #[test]
    fn clocks_look_like_a_gpu_and_never_go_back() {
        let a = Clocks::at_launch();
        // Nanoseconds since the epoch: after 2020, before 2100.
        assert!(a.timer_ns > 1_577_836_800_000_000_000 && a.timer_ns < 4_102_444_800_000_000_000);
        let t0 = globaltimer(&a, 0, 4);
        let t1 = globaltimer(&a, 10_000, 4);
        assert_eq!(t0 % TIMER_STEP_NS, 0);
        // 10,000 warp instructions of a 4-warp block: 10,000 cycles, about 5.7 µs.
        assert!((5_000..6_500).contains(&(t1 - t0)), "{}", t1 - t0);
        let (c0, c1) = (clock64(&a, 5, 0, 4), clock64(&a, 5, 10_000, 4));
        assert_eq!(c1 - c0, 10_000);
        // One warp alone: 4 cycles per instruction; 32 warps: a quarter cycle.
        assert_eq!(clock64(&a, 5, 100, 1) - clock64(&a, 5, 0, 1), 400);
        assert_eq!(clock64(&a, 5, 100, 32) - clock64(&a, 5, 0, 32), 25);
        // The cycle counter and the timer advance at the same clock rate.
        let rate = (c1 - c0) as f64 / (t1 - t0) as f64;
        assert!((1.6..1.9).contains(&rate), "{rate}");
        a.finish(50_000_000, 1024);
        let b = Clocks::at_launch();
        assert!(
            b.timer_ns > t1,
            "the next launch starts after this one's reads"
        );
        assert!(b.grid_id > a.grid_id);
    }
}
