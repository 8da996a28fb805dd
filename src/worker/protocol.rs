//! The typed protocol between the grading parent and a worker process.
//!
//! A frame is `b"CGW1"`, a little-endian `u32` header length, a JSON header (one [`Request`]
//! or [`Response`]), a `u32` blob count and, per blob, a `u64` length and the bytes. Blobs
//! carry bulk data (sources, PTX, buffer contents) without JSON encoding.
//!
//! The parent treats everything a worker sends as untrusted: [`read_frame`] bounds every size
//! before allocating, and the parent checks each response's shape against its request.

pub use crate::backend::{Arg, BufferSpec};
use crate::backend::{BackendError, BackendKind, KernelInfo, LaunchDims, LaunchReport};
use crate::compile::SourceFile;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

const MAGIC: &[u8; 4] = b"CGW1";
/// Largest JSON header either side accepts.
pub const MAX_HEADER: usize = 16 << 20;
/// Most blobs in one frame.
pub const MAX_BLOBS: usize = 64;

/// Parent to worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Compile `main` (with `headers`) for `arch` with NVRTC. Answer: `Compiled` + PTX blob.
    Compile {
        main: SourceFile,
        headers: Vec<SourceFile>,
        arch: String,
        /// CUDA's own header directories (`-I`), readable in the worker's sandbox.
        #[serde(default)]
        include_dirs: Vec<std::path::PathBuf>,
    },
    /// Compile Numba kernels from `files` (`.py`) with the toolchain's Python. Answer:
    /// `NumbaCompiled` + one PTX blob per kernel that compiled, in order.
    CompileNumba {
        files: Vec<SourceFile>,
        kernels: Vec<crate::compile::numba::NumbaKernel>,
        arch: String,
        toolchain: crate::compile::toolchain::NumbaToolchain,
    },
    /// Load the PTX in blob 0 on the worker's backend. Answer: `Loaded`.
    Load,
    /// Answer: `KernelInfo`.
    KernelInfo { kernel: String },
    /// Allocate, fill from the blobs, launch, read back. Answer: `Ran`.
    Run(RunSpec),
    /// Load the reference PTX (blob 0) and the harness PTX (blob 1) into their slots ahead of
    /// a `Measure` that sends the same texts, so that the driver's JIT compiles them outside
    /// the timed section (where every other job waits for the GPU). Answer: `Loaded`.
    LoadSlots,
    /// The timed section of one performance check (`measure::session`). Blobs: reference PTX,
    /// harness PTX, every buffer's initial allocation. Answer: `Staged` once set up (then the
    /// parent takes the GPU's timing lock and sends `Go`), then `Timed`; `Timed` at once when
    /// the setup failed.
    Measure(Box<crate::measure::session::MeasureSpec>),
    /// Start the timed launches of the `Measure` that answered `Staged`. Answer: `Timed`.
    Go,
    /// Profile a kernel for the speed estimate on the emulator, whatever this worker's backend
    /// (`estimate::sample`). Blobs: the module's PTX, then every buffer's whole allocation.
    /// Answer: `Estimated`.
    Estimate(Box<crate::estimate::sample::EstimateSpec>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub kernel: String,
    pub dims: LaunchDims,
    pub args: Vec<Arg>,
    pub buffers: Vec<BufferSpec>,
    /// Buffers set by symbol (`__constant__` data) instead of passed: (symbol, buffer index).
    pub symbols: Vec<(String, usize)>,
    /// Milliseconds the launch may take; the worker gives up cleanly after it.
    pub deadline_ms: u64,
}

/// Worker to parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// First message: the worker is up, confined, and its backend works.
    Ready {
        backend: BackendKind,
        device: String,
        arch: String,
        sandbox: Vec<String>,
    },
    Compiled {
        ok: bool,
        log: String,
    },
    Loaded {
        error: Option<BackendError>,
    },
    /// Per requested kernel; `Err` when the toolchain itself failed (not the student).
    NumbaCompiled(Result<Vec<crate::compile::numba::Outcome>, String>),
    KernelInfo(Result<KernelInfo, BackendError>),
    /// Blobs: every buffer, whole allocation, in `RunSpec::buffers` order (absent on error).
    Ran {
        error: Option<BackendError>,
        report: LaunchReport,
    },
    /// A `Measure` is set up and waits for `Go`.
    Staged,
    /// What a `Measure` found.
    Timed(Box<crate::measure::session::TimingReport>),
    /// What an `Estimate` found, or why it could not.
    Estimated(Result<Box<crate::estimate::model::KernelProfile>, String>),
    /// The worker could not serve the request (e.g. the backend failed to start).
    Failed {
        message: String,
    },
}

/// Write one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T, blobs: &[&[u8]]) -> io::Result<()> {
    let header = serde_json::to_vec(msg).map_err(io::Error::other)?;
    w.write_all(MAGIC)?;
    w.write_all(&(header.len() as u32).to_le_bytes())?;
    w.write_all(&header)?;
    w.write_all(&(blobs.len() as u32).to_le_bytes())?;
    for b in blobs {
        w.write_all(&(b.len() as u64).to_le_bytes())?;
        w.write_all(b)?;
    }
    w.flush()
}

/// Read one frame, refusing anything larger than `max_blob_bytes` in total.
/// `Ok(None)` at a clean end of stream.
pub fn read_frame<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    max_blob_bytes: usize,
) -> io::Result<Option<(T, Vec<Vec<u8>>)>> {
    let mut magic = [0u8; 4];
    match r.read_exact(&mut magic) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    if &magic != MAGIC {
        return Err(bad("bad frame magic"));
    }
    let hlen = read_u32(r)? as usize;
    if hlen > MAX_HEADER {
        return Err(bad(&format!("header of {hlen} bytes exceeds the limit")));
    }
    let mut header = vec![0u8; hlen];
    r.read_exact(&mut header)?;
    let msg: T =
        serde_json::from_slice(&header).map_err(|e| bad(&format!("malformed header: {e}")))?;
    let n = read_u32(r)? as usize;
    if n > MAX_BLOBS {
        return Err(bad(&format!("{n} blobs exceed the limit")));
    }
    let mut blobs = Vec::with_capacity(n);
    let mut total = 0usize;
    for _ in 0..n {
        let mut len = [0u8; 8];
        r.read_exact(&mut len)?;
        let len = u64::from_le_bytes(len);
        total = total.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        if total > max_blob_bytes {
            return Err(bad(&format!(
                "blobs exceed the {max_blob_bytes}-byte limit"
            )));
        }
        let mut b = vec![0u8; len as usize];
        r.read_exact(&mut b)?;
        blobs.push(b);
    }
    Ok(Some((msg, blobs)))
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_blobs() {
        let req = Request::KernelInfo { kernel: "k".into() };
        let mut buf = Vec::new();
        write_frame(&mut buf, &req, &[b"abc", b""]).unwrap();
        let (got, blobs): (Request, _) = read_frame(&mut buf.as_slice(), 10).unwrap().unwrap();
        assert_eq!(got, req);
        assert_eq!(blobs, vec![b"abc".to_vec(), vec![]]);
        assert!(read_frame::<Request>(&mut &b""[..], 10).unwrap().is_none());
    }

    #[test]
    fn refuses_oversized_and_forged_frames() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::Load, &[&[0u8; 100]]).unwrap();
        let err = read_frame::<Request>(&mut buf.as_slice(), 99).unwrap_err();
        assert!(err.to_string().contains("limit"));
        // What a student's printf could produce never parses as a frame.
        let forged = b"{\"Ran\":{\"error\":null}}";
        assert!(read_frame::<Response>(&mut &forged[..], 10).is_err());
        let mut huge = b"CGW1".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            read_frame::<Response>(&mut huge.as_slice(), 10)
                .unwrap_err()
                .to_string()
                .contains("header")
        );
    }
}
