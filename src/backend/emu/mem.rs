//! Device global memory: one region per allocation (and one for the module's `.global`
//! variables), so every access is checked against the exact allocation it falls in.
//! Words are relaxed atomics because blocks run in parallel and student kernels may race;
//! relaxed loads and stores compile to plain moves. Regions are shared (`Arc`) so that a rank
//! set's devices (`ranks`) each hold every rank's allocations in their own view.

use crate::inputs::Fill;
use std::sync::atomic::{
    AtomicBool, AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex};

pub struct Region {
    pub base: u64,
    pub len: u64,
    pub words: Box<[AtomicU32]>,
    /// Symbol name for module variables, `None` for allocations.
    pub name: Option<String>,
    /// The rank whose allocation this is, in a rank set (`None` on a single device): memcheck
    /// names it.
    pub owner: Option<u8>,
    /// Contents drawn on first touch, chunk by chunk (the speed estimate's full-size inputs,
    /// of which a sample of blocks reads a few pages).
    lazy: Option<Box<Lazy>>,
}

/// A region's contents described by the generator that draws them.
struct Lazy {
    fill: Fill,
    /// Per chunk of `Fill::CHUNK` elements: drawn into the words yet.
    drawn: Box<[AtomicBool]>,
    /// Taken to draw a chunk (rarely: a few chunks per estimate).
    drawing: Mutex<()>,
}

impl Lazy {
    /// Draw the chunks `[off, off + size)` falls in, if not yet drawn.
    #[inline]
    fn ensure(&self, words: &[AtomicU32], off: u64, size: u64) {
        let chunk_bytes = (Fill::CHUNK * self.fill.elem.size()) as u64;
        let first = (off / chunk_bytes) as usize;
        let last = (off.saturating_add(size.max(1)) - 1) / chunk_bytes;
        for c in first..=(last as usize).min(self.drawn.len().saturating_sub(1)) {
            if !self.drawn[c].load(Acquire) {
                self.draw(words, c, chunk_bytes);
            }
        }
    }

    #[cold]
    fn draw(&self, words: &[AtomicU32], c: usize, chunk_bytes: u64) {
        let _one = self.drawing.lock().unwrap_or_else(|p| p.into_inner());
        if self.drawn[c].load(Acquire) {
            return;
        }
        let bytes = self.fill.chunk(c);
        let start = (c as u64 * chunk_bytes / 4) as usize;
        for (k, w) in bytes.chunks(4).enumerate() {
            let mut word = [0u8; 4];
            word[..w.len()].copy_from_slice(w);
            if let Some(slot) = words.get(start + k) {
                slot.store(u32::from_le_bytes(word), Relaxed);
            }
        }
        self.drawn[c].store(true, Release);
    }
}

/// `n` zeroed words from the allocator's zeroed memory: pages nobody touches are never
/// faulted in (a full-size estimate's outputs, of which a sample writes a few pages).
fn zeroed_words(n: usize) -> Box<[AtomicU32]> {
    let words: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    // SAFETY: AtomicU32 has the same size, alignment and bit validity as u32.
    unsafe { Box::from_raw(Box::into_raw(words) as *mut [AtomicU32]) }
}

impl Region {
    pub fn new(base: u64, len: u64, name: Option<String>) -> Region {
        let n = len.div_ceil(4) as usize;
        Region {
            base,
            len,
            words: zeroed_words(n),
            name,
            owner: None,
            lazy: None,
        }
    }

    /// An allocation whose contents `fill` draws on first touch.
    pub fn drawn(base: u64, len: u64, fill: Fill) -> Region {
        let mut r = Region::new(base, len, None);
        let chunks = fill.len.div_ceil(Fill::CHUNK).max(1);
        r.lazy = Some(Box::new(Lazy {
            fill,
            drawn: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            drawing: Mutex::new(()),
        }));
        r
    }

    /// Read `size` (1, 2, 4, 8) bytes at region offset `off`, which the caller has aligned.
    #[inline]
    pub fn read(&self, off: u64, size: u32) -> u64 {
        if let Some(l) = &self.lazy {
            l.ensure(&self.words, off, size as u64);
        }
        let w = (off >> 2) as usize;
        match size {
            4 => self.words[w].load(Relaxed) as u64,
            8 => {
                self.words[w].load(Relaxed) as u64 | (self.words[w + 1].load(Relaxed) as u64) << 32
            }
            _ => {
                let v = self.words[w].load(Relaxed) >> ((off & 3) * 8);
                (if size == 1 { v & 0xff } else { v & 0xffff }) as u64
            }
        }
    }

    #[inline]
    pub fn write(&self, off: u64, size: u32, v: u64) {
        if let Some(l) = &self.lazy {
            // A partial write must not be overwritten by the chunk's draw later.
            l.ensure(&self.words, off, size as u64);
        }
        let w = (off >> 2) as usize;
        match size {
            4 => self.words[w].store(v as u32, Relaxed),
            8 => {
                self.words[w].store(v as u32, Relaxed);
                self.words[w + 1].store((v >> 32) as u32, Relaxed);
            }
            _ => {
                let sh = (off & 3) * 8;
                let m: u32 = if size == 1 { 0xff } else { 0xffff };
                let _ = self.words[w].fetch_update(Relaxed, Relaxed, |old| {
                    Some((old & !(m << sh)) | ((v as u32 & m) << sh))
                });
            }
        }
    }

    pub fn read_bytes(&self, off: u64, out: &mut [u8]) {
        if let Some(l) = &self.lazy {
            l.ensure(&self.words, off, out.len() as u64);
        }
        let mut k = 0usize;
        // Whole words where aligned: outputs of large cases are read back in full.
        while k < out.len() {
            let o = off + k as u64;
            if o.is_multiple_of(4) && k + 4 <= out.len() {
                let v = self.words[(o >> 2) as usize].load(Relaxed);
                out[k..k + 4].copy_from_slice(&v.to_le_bytes());
                k += 4;
            } else {
                out[k] = self.read(o, 1) as u8;
                k += 1;
            }
        }
    }

    pub fn write_bytes(&self, off: u64, data: &[u8]) {
        if let Some(l) = &self.lazy {
            l.ensure(&self.words, off, data.len() as u64);
        }
        let mut k = 0usize;
        // Whole words where aligned keep host writes of big inputs fast.
        while k < data.len() {
            let o = off + k as u64;
            if o.is_multiple_of(4) && k + 4 <= data.len() {
                let v = u32::from_le_bytes([data[k], data[k + 1], data[k + 2], data[k + 3]]);
                self.words[(o >> 2) as usize].store(v, Relaxed);
                k += 4;
            } else {
                self.write(o, 1, data[k] as u64);
                k += 1;
            }
        }
    }
}

#[derive(Default)]
pub struct GlobalMem {
    /// Sorted by base, non-overlapping. Shared between the views of a rank set's devices; on
    /// the hot path a warp's access dereferences its region once.
    pub regions: Vec<Arc<Region>>,
}

impl GlobalMem {
    /// The region holding `[addr, addr+size)`, and the offset in it.
    #[inline]
    pub fn locate(&self, addr: u64, size: u64, hint: &mut usize) -> Option<(usize, u64)> {
        if let Some(r) = self.regions.get(*hint)
            && addr >= r.base
            && addr.wrapping_sub(r.base).saturating_add(size) <= r.len
        {
            return Some((*hint, addr - r.base));
        }
        let i = self.regions.partition_point(|r| r.base <= addr);
        if i == 0 {
            return None;
        }
        let r = &self.regions[i - 1];
        let off = addr - r.base;
        if off.saturating_add(size) <= r.len {
            *hint = i - 1;
            Some((i - 1, off))
        } else {
            None
        }
    }

    /// Describe where a bad address lies relative to the nearest allocation.
    pub fn describe(&self, addr: u64, size: u64) -> String {
        let i = self.regions.partition_point(|r| r.base <= addr);
        let what = |r: &Region| match (&r.name, r.owner) {
            (Some(n), _) => format!("variable `{n}` ({} bytes)", r.len),
            (None, None) => format!("a {}-byte allocation at {:#x}", r.len, r.base),
            (None, Some(k)) => format!("rank {k}'s {}-byte allocation at {:#x}", r.len, r.base),
        };
        if i > 0 {
            let r = &self.regions[i - 1];
            let end = r.base + r.len;
            if addr < end {
                return format!(
                    "runs {} bytes past the end of {}",
                    addr + size - end,
                    what(r)
                );
            }
            if addr - end < 1 << 20 {
                return format!("is {} bytes past the end of {}", addr - end, what(r));
            }
        }
        if let Some(r) = self.regions.get(i)
            && r.base - addr < 1 << 20
        {
            return format!("is {} bytes before the start of {}", r.base - addr, what(r));
        }
        if addr == 0 || addr < 4096 {
            return "is a null (or near-null) pointer".into();
        }
        "is not inside any allocation".into()
    }
}
