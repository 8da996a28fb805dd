//! Reading compute-sanitizer's reports: each tool's log file into findings, with where, who
//! and how often, so that a finding reads like the emulator's.

use crate::backend::Diagnostic;

/// Lines of a compute-sanitizer report that are not findings.
fn is_meta(text: &str) -> bool {
    const META: &[&str] = &[
        "COMPUTE-SANITIZER",
        "ERROR SUMMARY",
        "RACECHECK SUMMARY",
        "LEAK SUMMARY",
        "Program hit",
        "Saved host backtrace",
        "Target application returned",
        "Host Frame",
        "Error: process didn't terminate",
        "Warning: Device not supported",
        "Note:",
    ];
    META.iter().any(|m| text.starts_with(m))
}

/// The patterns of a compute-sanitizer report.
struct Patterns {
    place: regex::Regex,
    who: regex::Regex,
    at: regex::Regex,
    hazards: regex::Regex,
    /// `at kernel(float const*, int)+0x1a0 in /tmp/x/reduce.cu:20` -> `at reduce.cu:20`.
    tidy: regex::Regex,
    summary: regex::Regex,
}

static PATTERNS: std::sync::LazyLock<Patterns> = std::sync::LazyLock::new(|| {
    let re = |p: &str| regex::Regex::new(p).expect("static regex");
    Patterns {
        place: re(r"in ([^\s:]+):(\d+)"),
        who: re(r"thread \((\d+),\s*(\d+),\s*(\d+)\)\s+in block \((\d+),\s*(\d+),\s*(\d+)\)"),
        at: re(r"\bat (.+?) in "),
        hazards: re(r"\[(\d+) hazards?\]"),
        tidy: re(r"at \S.*? in (?:\S*/)?([^/\s:]+:\d+)(?::\S+)?"),
        summary: re(r"ERROR SUMMARY: (\d+) errors?"),
    }
});

/// The findings of one tool's log (`compute-sanitizer --log-file`). A finding is a line of
/// its own after `=========`; the indented lines after it say where (`at ... in file:line`),
/// who (`by thread (x,y,z) in block (x,y,z)`) and, for races, how often (`[N hazards]`).
/// Source paths keep their file name only, as the emulator's findings do.
pub fn parse(tool: &str, log: &str) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    let mut cur: Option<Diagnostic> = None;
    // initcheck's "Host API memory access error" is a host-side copy (cugrade's own download
    // of a buffer, or of a module global such as Numba's environment symbol) reading memory no
    // kernel wrote: not the student's code. An output the kernel left unwritten is caught by
    // the correctness and unwritten-output checks; a kernel's own uninitialized read is an
    // "Uninitialized __global__ memory read", which stays a finding.
    let mut harness = 0usize;
    for line in log.lines() {
        let Some(rest) = line.strip_prefix("=========") else {
            continue;
        };
        let text = rest.trim();
        let continuation = rest.starts_with("  ") || rest.starts_with('\t');
        if continuation {
            if let Some(d) = cur.as_mut() {
                absorb(d, text);
            }
            continue;
        }
        out.extend(cur.take());
        if text.is_empty() || is_meta(text) {
            continue;
        }
        if tool == "initcheck" && text.starts_with("Host API memory access error") {
            harness += 1;
            continue;
        }
        cur = Some(finding(tool, text));
    }
    out.extend(cur.take());
    if out.is_empty() && harness == 0 {
        out.extend(unlocated(tool, log));
    }
    out
}

/// A finding's first line.
fn finding(tool: &str, text: &str) -> Diagnostic {
    let message = PATTERNS.tidy.replace_all(text, "at $1").trim().to_string();
    let message = message
        .trim_start_matches("Error: ")
        .trim_start_matches("Warning: ")
        .to_string();
    let mut d = Diagnostic {
        tool: tool.to_string(),
        message,
        thread: [0; 3],
        block: [0; 3],
        instruction: String::new(),
        file: None,
        line: None,
        repeats: 0,
    };
    absorb(&mut d, text);
    d
}

/// What one line of a finding says: where, who, how often.
fn absorb(d: &mut Diagnostic, text: &str) {
    let p = &*PATTERNS;
    if d.file.is_none()
        && let Some(c) = p.place.captures(text)
    {
        let path = &c[1];
        d.file = Some(path.rsplit(['/', '\\']).next().unwrap_or(path).to_string());
        d.line = c[2].parse().ok();
    }
    if d.instruction.is_empty()
        && let Some(c) = p.at.captures(text)
    {
        d.instruction = c[1].trim().to_string();
    }
    if let Some(c) = p.who.captures(text) {
        let n = |k: usize| c[k].parse().unwrap_or(0);
        d.thread = [n(1), n(2), n(3)];
        d.block = [n(4), n(5), n(6)];
    }
    if let Some(c) = p.hazards.captures(text) {
        d.repeats = c[1].parse::<u64>().unwrap_or(1).saturating_sub(1);
    }
    if text.starts_with("and ") && d.tool == "racecheck" {
        let more = p.tidy.replace_all(text, "at $1");
        let more = p.hazards.replace_all(&more, "");
        d.message = format!("{} {}", d.message, more.trim());
    }
}

/// The tool's own summary says errors without saying which: one finding then.
fn unlocated(tool: &str, log: &str) -> Option<Diagnostic> {
    let n = PATTERNS
        .summary
        .captures(log)
        .and_then(|c| c[1].parse::<u64>().ok())
        .filter(|&n| n > 0)?;
    Some(Diagnostic {
        tool: tool.to_string(),
        message: format!("{tool} reported {n} error(s) without a location"),
        thread: [0; 3],
        block: [0; 3],
        instruction: String::new(),
        file: None,
        line: None,
        repeats: n.saturating_sub(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports in the shapes compute-sanitizer 2023-2025 prints (and the older `at 0x.. in
    /// file:line:function` form).
    #[test]
    fn findings_are_read_from_each_tool_s_report() {
        let memcheck = "========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at vector_add(const float *, const float *, float *, int)+0x1b0 in /tmp/cugrade-worker-1/src/add.cu:9
=========     by thread (40,0,0) in block (3,0,0)
=========     Address 0x7f1c00000a00 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c00000000 of size 2560 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f4d5b] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuCtxSynchronize.
=========
========= ERROR SUMMARY: 2 errors
";
        let d = parse("memcheck", memcheck);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].message, "Invalid __global__ write of size 4 bytes");
        assert_eq!((d[0].file.as_deref(), d[0].line), (Some("add.cu"), Some(9)));
        assert_eq!((d[0].thread, d[0].block), ([40, 0, 0], [3, 0, 0]));
        assert!(
            d[0].instruction.starts_with("vector_add("),
            "{}",
            d[0].instruction
        );

        let racecheck = "========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at reduce_shared(const float *, float *, int)+0x2a0 in /tmp/w/reduce.cu:31
=========     and Read access at reduce_shared(const float *, float *, int)+0x2c0 in /tmp/w/reduce.cu:30 [240 hazards]
=========
========= Warning: Race reported between Write access at 0x00000150 in /tmp/w/reduce.cu:44:reduce_shared(const float *, float *, int)
=========     and Read access at 0x00000170 in /tmp/w/reduce.cu:44:reduce_shared(const float *, float *, int) [31 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
";
        let d = parse("racecheck", racecheck);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            d[0].message,
            "Race reported between Write access at reduce.cu:31 and Read access at reduce.cu:30"
        );
        assert_eq!(
            (d[0].file.as_deref(), d[0].line, d[0].repeats),
            (Some("reduce.cu"), Some(31), 239)
        );
        assert_eq!((d[1].line, d[1].repeats), (Some(44), 30));

        let synccheck = "========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at reduce(const float *, float *, int)+0x150 in reduce.cu:18
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";
        let d = parse("synccheck", synccheck);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.starts_with("Barrier error detected"));
        assert_eq!(d[0].line, Some(18));

        // The harness's own download of memory no kernel wrote (as for every Numba kernel on
        // an H100, 2026-11-24) is no finding; a kernel's uninitialized read is.
        let host = "========= COMPUTE-SANITIZER
========= Host API memory access error at host access to 0x7f5082a00000 of size 8 bytes
=========     Uninitialized access at 0x7f5082a00000 on access by cudaMemcopy source.
=========     Host Frame: cuMemcpyDtoH_v2 [0x2c0f4] in libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
";
        assert!(parse("initcheck", host).is_empty());
        let read = "========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at k(float *)+0x90 in k.cu:3
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";
        assert_eq!(parse("initcheck", read).len(), 1);
        let clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        assert!(parse("initcheck", clean).is_empty());
        // A summary that counts errors it did not list still fails.
        let terse = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 3 errors\n";
        assert_eq!(parse("initcheck", terse)[0].repeats, 2);
        // What the kernel prints never reaches the log file; a line without the prefix is
        // ignored anyway.
        assert!(
            parse(
                "memcheck",
                "Invalid __global__ write\nERROR SUMMARY: 0 errors\n"
            )
            .is_empty()
        );
    }
}
