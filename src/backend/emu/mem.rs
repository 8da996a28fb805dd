//! Device global memory: one region per allocation (and one for the module's `.global`
//! variables), so every access is checked against the exact allocation it falls in.
//! Words are relaxed atomics because blocks run in parallel and student kernels may race;
//! relaxed loads and stores compile to plain moves.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

pub struct Region {
    pub base: u64,
    pub len: u64,
    pub words: Box<[AtomicU32]>,
    /// Symbol name for module variables, `None` for allocations.
    pub name: Option<String>,
}

impl Region {
    pub fn new(base: u64, len: u64, name: Option<String>) -> Region {
        let n = len.div_ceil(4) as usize;
        let words = (0..n).map(|_| AtomicU32::new(0)).collect();
        Region {
            base,
            len,
            words,
            name,
        }
    }

    /// Read `size` (1, 2, 4, 8) bytes at region offset `off`, which the caller has aligned.
    #[inline]
    pub fn read(&self, off: u64, size: u32) -> u64 {
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
        for (k, b) in out.iter_mut().enumerate() {
            *b = self.read(off + k as u64, 1) as u8;
        }
    }

    pub fn write_bytes(&self, off: u64, data: &[u8]) {
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
    /// Sorted by base, non-overlapping.
    pub regions: Vec<Region>,
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
        let what = |r: &Region| match &r.name {
            Some(n) => format!("variable `{n}` ({} bytes)", r.len),
            None => format!("a {}-byte allocation at {:#x}", r.len, r.base),
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
