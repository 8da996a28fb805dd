//! Flags from the student's device code (PTX, whatever language it came from): what KernelGuard
//! does for Python source, done on what the GPU runs. Flags for a person to look at, never
//! verdicts (docs/integrity.md):
//!
//! - `reads-timer`: a kernel reads `%globaltimer`, `%clock`, `%clock64` or a performance
//!   counter. Nothing in these labs needs the time inside a kernel; a kernel that reads it can
//!   behave differently when it is timed, profiled or emulated.
//! - `reads-placement`: a kernel reads `%smid`, `%nsmid`, `%warpid`, `%nwarpid`, `%gridid` or
//!   an environment register: where and in which launch it runs, with the same uses.
//! - `large-device-array`: the module declares a `__device__` array of
//!   [`LARGE_DEVICE_ARRAY`] bytes or more: room to keep inputs or results from one launch for
//!   the next.
//!
//! `.loc` directives (NVRTC's `-lineinfo`, Numba's `lineinfo=True`) give the source line.

use crate::result::Flag;
use std::collections::{BTreeMap, BTreeSet};

/// Bytes from which a `__device__` array is flagged.
pub const LARGE_DEVICE_ARRAY: u64 = 256 << 10;

/// Special registers that tell the time, and what the message calls them.
const TIMERS: &[(&str, &str)] = &[
    ("globaltimer", "the GPU's nanosecond clock"),
    ("globaltimer_lo", "the GPU's nanosecond clock"),
    ("globaltimer_hi", "the GPU's nanosecond clock"),
    ("clock", "the SM's cycle counter"),
    ("clock_hi", "the SM's cycle counter"),
    ("clock64", "the SM's cycle counter"),
];

/// Special registers that tell where a kernel runs.
const PLACEMENT: &[(&str, &str)] = &[
    ("smid", "the SM it runs on"),
    ("nsmid", "the number of SMs"),
    ("warpid", "its warp slot on the SM"),
    ("nwarpid", "the warp slots per SM"),
    ("gridid", "the launch's grid number"),
];

fn describe(reg: &str) -> Option<(&'static str, String)> {
    if let Some((_, what)) = TIMERS.iter().find(|(n, _)| *n == reg) {
        return Some(("reads-timer", (*what).to_string()));
    }
    if let Some((_, what)) = PLACEMENT.iter().find(|(n, _)| *n == reg) {
        return Some(("reads-placement", (*what).to_string()));
    }
    if reg.strip_prefix("pm").is_some_and(|r| {
        r.trim_end_matches("_64")
            .parse::<u32>()
            .is_ok_and(|k| k < 8)
    }) {
        return Some(("reads-timer", "a performance-monitor counter".into()));
    }
    if reg
        .strip_prefix("envreg")
        .is_some_and(|r| r.parse::<u32>().is_ok())
    {
        return Some(("reads-placement", "a driver environment register".into()));
    }
    None
}

fn element_bytes(ty: &str) -> u64 {
    match ty {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => 4,
    }
}

/// Flags for one module: `file` names it in messages (the student's source file), `ptx` is
/// what it compiled to. Each register is flagged once per kernel, at its first read. With each
/// flag, the function it is in (none for a module-level array).
pub fn scan(file: &str, ptx: &str) -> Vec<(Option<String>, Flag)> {
    let special = regex::Regex::new(r"%([a-z_]+[0-9]*(?:_64|_lo|_hi)?)\b").expect("static regex");
    let array = regex::Regex::new(
        r"^\s*(?:\.visible\s+|\.extern\s+|\.weak\s+|\.common\s+)*\.global\s+(?:\.align\s+\d+\s+)?\.([a-z]+[0-9]*)\s+([A-Za-z_$][A-Za-z0-9_$]*)((?:\[\d+\])+)",
    )
    .expect("static regex");
    let dims = regex::Regex::new(r"\[(\d+)\]").expect("static regex");
    let entry =
        regex::Regex::new(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][A-Za-z0-9_$]*)")
            .expect("static regex");
    let dotfile = regex::Regex::new(r#"^\s*\.file\s+(\d+)\s+"([^"]*)""#).expect("static regex");
    let dotloc = regex::Regex::new(r"^\s*\.loc\s+(\d+)\s+(\d+)").expect("static regex");
    let mut files: BTreeMap<u32, String> = BTreeMap::new();
    let mut function: Option<String> = None;
    let mut loc: Option<(u32, u32)> = None;
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut out = Vec::new();
    let place = |files: &BTreeMap<u32, String>, loc: Option<(u32, u32)>| match loc {
        Some((f, line)) => {
            let name = files
                .get(&f)
                .map(|n| n.rsplit(['/', '\\']).next().unwrap_or(n).to_string())
                .unwrap_or_else(|| file.to_string());
            format!("{name}:{line}")
        }
        None => file.to_string(),
    };
    for raw in ptx.lines() {
        let line = raw.split("//").next().unwrap_or("");
        if let Some(c) = dotfile.captures(line) {
            if let Ok(k) = c[1].parse() {
                files.insert(k, c[2].to_string());
            }
            continue;
        }
        if let Some(c) = dotloc.captures(line) {
            loc = c[1].parse().ok().zip(c[2].parse().ok());
            continue;
        }
        if let Some(c) = entry.captures(line) {
            function = Some(c[1].to_string());
            loc = None;
        }
        if function.is_none()
            && let Some(c) = array.captures(line)
        {
            let count: u64 = dims
                .captures_iter(&c[3])
                .filter_map(|d| d[1].parse::<u64>().ok())
                .fold(1u64, u64::saturating_mul);
            let bytes = count.saturating_mul(element_bytes(&c[1]));
            if bytes >= LARGE_DEVICE_ARRAY {
                out.push((None, Flag {
                    kind: "large-device-array".into(),
                    milestone: None,
                    location: Some(file.to_string()),
                    message: format!(
                        "declares a {} `__device__` array `{}`: room to keep inputs or results from one launch for the next",
                        human_bytes(bytes),
                        &c[2]
                    ),
                }));
            }
            continue;
        }
        let Some(kernel) = &function else { continue };
        for c in special.captures_iter(line) {
            let reg = &c[1];
            let Some((kind, what)) = describe(reg) else {
                continue;
            };
            if !seen.insert((kernel.clone(), reg.to_string())) {
                continue;
            }
            out.push((Some(kernel.clone()), Flag {
                kind: kind.into(),
                milestone: None,
                location: Some(place(&files, loc)),
                message: format!(
                    "`{kernel}` reads %{reg} ({what}): device code that reads timers or where it runs can behave differently when it is graded, timed or emulated"
                ),
            }));
        }
    }
    out
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    } else {
        format!("{} KiB", b >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.version 9.0
.target sm_90
.address_size 64
	.file	1 "/tmp/cugrade-worker-x/src/reduce.cu"
.global .align 4 .b8 cache[67108864];
.global .align 4 .f32 small[16];
.visible .global .align 8 .u64 grid2d[512][128];

.visible .entry reduce_shared(
	.param .u64 reduce_shared_param_0
)
{
	.reg .b64 	%rd<9>;
	.reg .b32 	%r<4>;
	.loc	1 12 5
	mov.u64 	%rd1, %globaltimer;
	.loc	1 13 5
	mov.u64 	%rd2, %globaltimer;
	mov.u32 	%r1, %tid.x;
	mov.u32 	%r2, %laneid;
	.loc	1 20 3
	mov.u32 	%r3, %smid;
	// mov.u32 %r3, %clock;  (a comment)
	mov.u64 	%rd3, %clock64;
	ret;
}
"#;

    #[test]
    fn timers_placement_and_large_arrays_are_flagged_once_each() {
        let flags: Vec<Flag> = scan("reduce.cu", PTX).into_iter().map(|(_, f)| f).collect();
        let kinds: Vec<(&str, Option<&str>)> = flags
            .iter()
            .map(|f| (f.kind.as_str(), f.location.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("large-device-array", Some("reduce.cu")),
                ("large-device-array", Some("reduce.cu")),
                ("reads-timer", Some("reduce.cu:12")),
                ("reads-placement", Some("reduce.cu:20")),
                ("reads-timer", Some("reduce.cu:20")),
            ]
        );
        assert!(
            flags[0]
                .message
                .contains("64.0 MiB `__device__` array `cache`"),
            "{}",
            flags[0].message
        );
        assert!(
            flags[1].message.contains("512.0 KiB") || flags[1].message.contains("512 KiB"),
            "{}",
            flags[1].message
        );
        assert!(
            flags[2]
                .message
                .contains("`reduce_shared` reads %globaltimer"),
            "{}",
            flags[2].message
        );
        assert!(flags[4].message.contains("%clock64"));
        // Thread and lane ids, small arrays and plain code are nobody's business.
        assert!(scan("k.cu", "\t.global .align 4 .f32 lut[256];\n.visible .entry k()\n{\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %lanemask_lt;\n}\n").is_empty());
    }
}
