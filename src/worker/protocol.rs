//! The typed protocol between the grading parent and a worker process.
//!
//! A frame is `b"CGW2"`, a little-endian `u32` header length, a MessagePack header (one
//! [`Request`] or [`Response`], structs as maps), a `u32` blob count and, per blob, a `u64`
//! length and the bytes. Blobs carry bulk data (sources, PTX, buffer contents) unencoded.
//!
//! MessagePack, not JSON: every value survives the trip. A float is its 4 or 8 IEEE bytes, so
//! NaN (with its payload: cugrade's poison is a NaN), ±inf, -0.0 and subnormals come back as
//! they were sent; integers keep all 64 bits. JSON has no NaN or infinity: serde_json writes
//! them as `null`, and a timed launch that left NaN poison in its output broke the protocol
//! instead of being named.
//!
//! The parent treats everything a worker sends as untrusted: [`read_frame`] bounds every size
//! before allocating, and the parent checks each response's shape against its request.

pub use crate::backend::{Arg, BufferSpec};
use crate::backend::{
    BackendError, BackendKind, DeviceFacts, KernelInfo, LaunchDims, LaunchReport, ParamValue,
};
use crate::compile::SourceFile;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

const MAGIC: &[u8; 4] = b"CGW2";
/// Largest header either side accepts.
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
        /// Seconds the student's modules may take to import (`timeouts.import_s`).
        #[serde(default = "crate::compile::numba::default_import_s")]
        import_s: f64,
    },
    /// Import CuPy modules (`entries` of `files`) with cugrade's `cupy` stand-in and report
    /// their kernel definitions. Answer: `CupyExtracted`.
    ExtractCupy {
        files: Vec<SourceFile>,
        entries: Vec<String>,
        interpreter: crate::compile::cupy::Interpreter,
    },
    /// Assemble the PTX in blob 0 for `arch` with the nvJitLink at `library`, for ptxas's
    /// resource facts (`compile::jitlink`). Answer: `Compiled`, its log ptxas's verbose output
    /// (or what failed).
    Assemble {
        arch: String,
        library: std::path::PathBuf,
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
    /// Extract the source files of the archive in blob 0 (`submission::archive::extract`).
    /// Answer: `Unpacked` + one blob per file kept, in order.
    Unpack {
        kind: crate::submission::archive::ArchiveKind,
        /// The archive's file name, for messages.
        name: String,
    },
    /// Role `Python` only, first request: become the Python harness for a function lab
    /// (`worker::python`). Answer: the harness's first `Python` frame.
    PythonStart(Box<crate::worker::python::PythonStart>),
    /// To the Python harness: a call (`worker::python::Call` as JSON; blobs: the columns).
    Python { json: String },
    /// A rank worker (`WorkerConfig::ranks`): allocate every rank's buffers, hand each rank's
    /// kernel its peers' addresses, launch on every rank at once, read every buffer back.
    /// Blobs: every buffer's whole allocation, rank by rank (`RanksSpec::blob`). Answer:
    /// `RanRanks` + the same allocations after the launch.
    RunRanks(Box<RanksSpec>),
    /// A rank worker's timed section (answers `Staged`, waits for `Go`, then `TimedRanks`).
    /// Blobs: as `RunRanks`.
    MeasureRanks(Box<RanksMeasure>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub kernel: String,
    pub dims: LaunchDims,
    /// A multi-kernel milestone's later launches, in order, on the same arguments.
    #[serde(default)]
    pub then: Vec<crate::backend::Then>,
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
    /// `Err` when the machinery failed (not the student).
    CupyExtracted(Result<crate::compile::cupy::Extracted, String>),
    KernelInfo(Result<KernelInfo, BackendError>),
    /// Blobs: every buffer, whole allocation, in `RunSpec::buffers` order (absent on error).
    Ran {
        error: Option<BackendError>,
        report: LaunchReport,
    },
    /// A `Measure` is set up and waits for `Go`.
    Staged,
    /// What a `RunRanks` found: one report per rank (absent ranks' on an error that left none).
    RanRanks {
        error: Option<BackendError>,
        reports: Vec<LaunchReport>,
    },
    /// What a `MeasureRanks` found.
    TimedRanks(Box<RanksTimed>),
    /// What a `Measure` found.
    Timed(Box<crate::measure::session::TimingReport>),
    /// What an `Estimate` found, or why it could not.
    Estimated(Result<Box<crate::estimate::model::KernelProfile>, String>),
    /// A compile failed, and the worker was refused some of the toolchain's files (which the
    /// parent confirms from the host's side before it blames the machine).
    Unreadable {
        paths: Vec<crate::sandbox::access::Blocked>,
    },
    /// The paths of the files an `Unpack` kept (their bytes are the blobs), or why the
    /// archive was refused.
    Unpacked(Result<Vec<String>, String>),
    /// From the Python harness (JSON; a returned array's bytes as the blob).
    Python {
        json: String,
    },
    /// The worker could not serve the request (e.g. the backend failed to start).
    Failed {
        message: String,
    },
}

/// Write one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T, blobs: &[&[u8]]) -> io::Result<()> {
    let header = rmp_serde::to_vec_named(msg).map_err(io::Error::other)?;
    if header.len() > MAX_HEADER {
        return Err(bad(&format!(
            "header of {} bytes exceeds the limit",
            header.len()
        )));
    }
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
    read_frame_within(r, max_blob_bytes, MAX_HEADER, MAX_BLOBS)
}

/// [`read_frame`] with other limits on the header and the number of blobs: for files the
/// trusted parent wrote (a compute-sanitizer job holds every launch of several students).
pub fn read_frame_within<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    max_blob_bytes: usize,
    max_header: usize,
    max_blobs: usize,
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
    if hlen > max_header {
        return Err(bad(&format!("header of {hlen} bytes exceeds the limit")));
    }
    let mut header = vec![0u8; hlen];
    r.read_exact(&mut header)?;
    let msg: T =
        rmp_serde::from_slice(&header).map_err(|e| bad(&format!("malformed header: {e}")))?;
    let n = read_u32(r)? as usize;
    if n > max_blobs {
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

// A rank worker's requests and answers (`worker::ranks`).

/// One kernel argument of a rank launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RankArg {
    /// This rank's own buffer `i`.
    Own(usize),
    /// A table of every rank's buffer `i` (one device pointer a rank, in rank order), held in
    /// this rank's own memory: the kernel's `float* const* peers`.
    Table(usize),
    /// The same value on every rank.
    Value(ParamValue),
    /// One value a rank, in rank order (the kernel's `rank`).
    PerRank(Vec<ParamValue>),
}

/// One launch on every rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanksSpec {
    pub kernel: String,
    pub dims: LaunchDims,
    pub ranks: usize,
    /// Each rank's buffers (the same sizes on every rank).
    pub buffers: Vec<BufferSpec>,
    pub args: Vec<RankArg>,
    pub deadline_ms: u64,
}

impl RanksSpec {
    /// Which blob holds rank `rank`'s buffer `i` (rank by rank, buffers in order).
    pub fn blob(&self, rank: usize, i: usize) -> usize {
        rank * self.buffers.len() + i
    }
}

/// A rank set's timed section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanksMeasure {
    pub run: RanksSpec,
    /// Buffers set to 0 before every timed launch (flags, workspace).
    pub zero: Vec<usize>,
    /// Buffers put back as they were before every timed launch (inputs, outputs poisoned).
    pub restore: Vec<usize>,
    pub reps: usize,
}

/// What a rank set's timed section found. Blobs: every rank's buffers after the last timed
/// launch (for the parent to check), absent when the launches failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RanksTimed {
    /// Why the student's launches could not be timed.
    pub error: Option<BackendError>,
    /// Each repetition's seconds (the slowest rank's).
    pub student_s: Vec<f64>,
    /// Each rank's device.
    pub devices: Vec<DeviceFacts>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::LaunchDims;

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

    /// Every value a message can hold comes back bit for bit: NaN (the poison pattern and a
    /// quiet NaN with a sign), ±inf, -0.0, subnormals, the extremes of every integer type.
    #[test]
    fn every_value_survives_a_frame() {
        use crate::backend::ParamValue as P;
        use crate::measure::session::{GenPlan, Problem, TimingReport};
        let poison = f32::from_bits(crate::inputs::POISON_F32);
        let odd64 = [
            f64::NAN,
            -f64::NAN,
            f64::from_bits(crate::inputs::POISON_F64),
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            f64::MIN_POSITIVE / 4.0,
            5e-324,
            f64::MAX,
            f64::from(poison),
        ];
        let odd32 = [
            poison,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e-45,
            f32::MIN_POSITIVE / 2.0,
        ];
        let bits64 = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // Parent to worker: scalar arguments and the timed section's input plan.
        let mut args: Vec<Arg> = odd64.iter().map(|&x| Arg::Value(P::F64(x))).collect();
        args.extend(odd32.iter().map(|&x| Arg::Value(P::F32(x))));
        args.extend([
            Arg::Value(P::U64(u64::MAX)),
            Arg::Value(P::I64(i64::MIN)),
            Arg::Value(P::I32(i32::MIN)),
            Arg::Value(P::U32(u32::MAX)),
            Arg::Value(P::Ptr(u64::MAX - 7)),
        ]);
        let req = Request::Run(RunSpec {
            kernel: "k".into(),
            then: vec![],
            dims: LaunchDims {
                grid: [u32::MAX, 65535, 65535],
                block: [1024, 1, 1],
                shared_bytes: u32::MAX,
            },
            args: args.clone(),
            buffers: vec![],
            symbols: vec![],
            deadline_ms: u64::MAX,
        });
        let mut buf = Vec::new();
        write_frame(&mut buf, &req, &[]).unwrap();
        let (back, _): (Request, _) = read_frame(&mut buf.as_slice(), 0).unwrap().unwrap();
        let Request::Run(spec) = back else {
            panic!("{back:?}")
        };
        assert_eq!(spec.args.len(), args.len());
        for (a, b) in args.iter().zip(&spec.args) {
            let bytes = |x: &Arg| match x {
                Arg::Value(v) => v.to_bytes(),
                Arg::Buffer(i) => i.to_le_bytes().to_vec(),
            };
            assert_eq!(bytes(a), bytes(b), "{a:?} came back as {b:?}");
        }
        assert_eq!(spec.deadline_ms, u64::MAX);
        let plan = GenPlan {
            kind: crate::measure::session::DrawKind::Values,
            a: f64::NEG_INFINITY,
            b: f64::NAN,
            values: odd64.to_vec(),
            specials: odd64.to_vec(),
            special_fraction: 5e-324,
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &plan, &[]).unwrap();
        let (p, _): (GenPlan, _) = read_frame(&mut buf.as_slice(), 0).unwrap().unwrap();
        assert_eq!(bits64(&p.values), bits64(&odd64));
        assert_eq!(bits64(&p.specials), bits64(&odd64));
        assert_eq!(
            (p.a.to_bits(), p.b.to_bits()),
            (plan.a.to_bits(), plan.b.to_bits())
        );
        // Worker to parent: a timed launch that found NaN poison where a value belongs.
        for &got in &odd64 {
            let report = TimingReport {
                probe_ms: f64::INFINITY,
                student_ms: odd64.to_vec(),
                estimates: vec![f64::NAN, -0.0],
                problem: Some(Problem::Wrong(crate::measure::session::WrongLaunch {
                    launch: u32::MAX,
                    buffer: "C".into(),
                    mismatches: u64::MAX,
                    index: u64::MAX - 1,
                    got,
                    expected: -got,
                    chained: true,
                    unwritten: u64::MAX,
                    gross: 0,
                    bound: f64::NAN,
                })),
                ..Default::default()
            };
            let mut buf = Vec::new();
            write_frame(&mut buf, &Response::Timed(Box::new(report.clone())), &[]).unwrap();
            let (r, _): (Response, _) = read_frame(&mut buf.as_slice(), 0).unwrap().unwrap();
            let Response::Timed(r) = r else {
                panic!("{r:?}")
            };
            assert_eq!(bits64(&r.student_ms), bits64(&odd64));
            assert_eq!(r.probe_ms, f64::INFINITY);
            let Some(Problem::Wrong(crate::measure::session::WrongLaunch {
                got: g,
                expected: e,
                mismatches,
                unwritten,
                ..
            })) = r.problem
            else {
                panic!("{:?}", r.problem)
            };
            assert_eq!(
                (g.to_bits(), e.to_bits()),
                (got.to_bits(), (-got).to_bits())
            );
            assert_eq!((mismatches, unwritten), (u64::MAX, u64::MAX));
        }
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
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            read_frame::<Response>(&mut huge.as_slice(), 10)
                .unwrap_err()
                .to_string()
                .contains("header")
        );
    }
}
