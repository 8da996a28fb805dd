//! Compile CUDA C++ to PTX with NVRTC, inside the worker.
//!
//! The source arrives over the worker's pipe under its submission-relative name, so NVRTC's
//! log already says `reduce.cu(12): error: ...` with the student's own line numbers. Headers
//! of the submission (`.h`, `.cuh`) are handed to NVRTC in memory: no include ever needs the
//! file system, and the sandbox denies every path outside the worker's temp dir.
//!
//! `--ptxas-options=-v` makes NVRTC assemble for the target too, which puts register, shared
//! memory and spill counts in the log without a GPU; `resources` reads them back.
//!
//! CUDA's own headers (`<cooperative_groups.h>`, `<cuda_fp16.h>`, CCCL) come from NVIDIA's
//! wheels ([`toolchain`]), passed as `-I` directories the sandbox lets the worker read. Numba
//! submissions (`.py`) compile in the same kind of worker through [`numba`]; CuPy submissions
//! (`.py`) are read there through [`cupy`] and become CUDA C++ for NVRTC.

pub mod arrays;
pub mod cupy;
pub mod install;
pub mod jitlink;
pub mod numba;
pub mod nvrtc_lib;
pub mod toolchain;

use crate::result::KernelResources;

/// Why [`write_sources`] failed.
#[derive(Debug)]
pub enum WriteError {
    /// A file name that is not a plain relative path (the student's mistake, said so).
    Name(String),
    Io(std::io::Error),
}

/// Write a submission's source files under `dir`, keeping their relative paths (Python
/// packages): a name that is absolute or climbs out (`..`) is refused, never written.
pub fn write_sources(files: &[SourceFile], dir: &std::path::Path) -> Result<(), WriteError> {
    for f in files {
        let rel = std::path::Path::new(&f.name);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(WriteError::Name(format!(
                "`{}` is not a relative path",
                f.name
            )));
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(WriteError::Io)?;
        }
        std::fs::write(&path, &f.text).map_err(WriteError::Io)?;
    }
    Ok(())
}
use cudarc::nvrtc::{result as nv, sys};
use serde::{Deserialize, Serialize};
use std::ffi::{CString, c_char};

/// One source file handed to NVRTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFile {
    /// Path relative to the submission, as the log shows it.
    pub name: String,
    pub text: String,
}

/// What NVRTC produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Compiled {
    pub ok: bool,
    pub log: String,
    pub ptx: String,
}

/// Options for a submission: the target, line info for feedback, resource usage in the log,
/// and CUDA's header directories (NVIDIA's headers only: never `/usr/include`).
pub fn options(arch: &str, include_dirs: &[std::path::PathBuf]) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={arch}"),
        "-lineinfo".into(),
        "--ptxas-options=-v".into(),
        "--std=c++17".into(),
        "-default-device".into(),
    ];
    o.extend(
        include_dirs
            .iter()
            .map(|d| format!("--include-path={}", d.display())),
    );
    o
}

/// Compile `main` with `headers` available to `#include "name"`.
pub fn compile(main: &SourceFile, headers: &[SourceFile], options: &[String]) -> Compiled {
    if !crate::backend::cuda::nvrtc_present() {
        return Compiled {
            ok: false,
            log: "NVRTC (libnvrtc.so.13) is not available in the worker".into(),
            ptx: String::new(),
        };
    }
    let cstr =
        |s: &str, what: &str| CString::new(s).map_err(|_| format!("{what} contains a NUL byte"));
    let prepared = (|| -> Result<_, String> {
        let src = cstr(&main.text, &main.name)?;
        let name = cstr(&main.name, "the file name")?;
        let hdr_src: Vec<CString> = headers
            .iter()
            .map(|h| cstr(&h.text, &h.name))
            .collect::<Result<_, _>>()?;
        let hdr_names: Vec<CString> = headers
            .iter()
            .map(|h| cstr(&h.name, "a header name"))
            .collect::<Result<_, _>>()?;
        Ok((src, name, hdr_src, hdr_names))
    })();
    let (src, name, hdr_src, hdr_names) = match prepared {
        Ok(p) => p,
        Err(e) => {
            return Compiled {
                ok: false,
                log: format!("{}: error: {e}", main.name),
                ptx: String::new(),
            };
        }
    };
    let src_ptrs: Vec<*const c_char> = hdr_src.iter().map(|s| s.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = hdr_names.iter().map(|s| s.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string for the duration of the call.
    let created = unsafe {
        sys::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            src_ptrs.len() as i32,
            if src_ptrs.is_empty() {
                std::ptr::null()
            } else {
                src_ptrs.as_ptr()
            },
            if name_ptrs.is_empty() {
                std::ptr::null()
            } else {
                name_ptrs.as_ptr()
            },
        )
    };
    if created != sys::nvrtcResult::NVRTC_SUCCESS {
        return Compiled {
            ok: false,
            log: format!("nvrtcCreateProgram failed: {created:?}"),
            ptx: String::new(),
        };
    }
    // SAFETY: prog is a valid program until destroyed below.
    let compiled = unsafe { nv::compile_program(prog, options) };
    let log = unsafe { nv::get_program_log(prog) }
        .map(chars_to_string)
        .unwrap_or_default();
    let ptx = if compiled.is_ok() {
        unsafe { nv::get_ptx(prog) }
            .map(chars_to_string)
            .unwrap_or_default()
    } else {
        String::new()
    };
    // SAFETY: destroyed once.
    let _ = unsafe { nv::destroy_program(prog) };
    Compiled {
        ok: compiled.is_ok() && !ptx.is_empty(),
        log: log.trim_end_matches('\0').trim_end().to_string(),
        ptx,
    }
}

fn chars_to_string(v: Vec<c_char>) -> String {
    let bytes: Vec<u8> = v
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Read per-kernel resource usage out of a `ptxas -v` log.
pub fn resources(log: &str) -> Vec<KernelResources> {
    let entry = regex::Regex::new(
        r"(?:Compiling entry function|Function properties for) '?([A-Za-z_][A-Za-z0-9_$]*)'?",
    )
    .expect("static regex");
    let frame = regex::Regex::new(
        r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
    )
    .expect("static regex");
    let used = regex::Regex::new(r"Used (\d+) registers").expect("static regex");
    let smem = regex::Regex::new(r"(\d+) bytes smem").expect("static regex");
    let cmem = regex::Regex::new(r"(\d+) bytes cmem\[0\]").expect("static regex");
    let mut out: Vec<KernelResources> = Vec::new();
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if let Some(c) = entry.captures(line) {
            let name = c[1].to_string();
            current = Some(match out.iter().position(|k| k.name == name) {
                Some(i) => i,
                None => {
                    out.push(KernelResources {
                        name,
                        ..Default::default()
                    });
                    out.len() - 1
                }
            });
            continue;
        }
        let Some(i) = current else { continue };
        let k = &mut out[i];
        if let Some(c) = frame.captures(line) {
            k.stack_bytes = c[1].parse().unwrap_or(0);
            k.spill_stores = c[2].parse().unwrap_or(0);
            k.spill_loads = c[3].parse().unwrap_or(0);
        }
        if let Some(c) = used.captures(line) {
            k.registers = c[1].parse().unwrap_or(0);
        }
        if let Some(c) = smem.captures(line) {
            k.shared_bytes = c[1].parse().unwrap_or(0);
        }
        if let Some(c) = cmem.captures(line) {
            k.const_bytes = c[1].parse().unwrap_or(0);
        }
    }
    out
}

/// The log without ptxas's informational lines: what a student needs to read.
pub fn diagnostics_only(log: &str) -> String {
    log.lines()
        .filter(|l| {
            !l.starts_with("ptxas info")
                && !l.trim_start().starts_with(|c: char| c.is_ascii_digit())
                || l.contains("error")
                || l.contains("warning")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first `file(line)` an NVRTC log names, as `file:line`.
pub fn first_location(log: &str) -> Option<String> {
    let re = regex::Regex::new(r"(?m)^([^\s()]+)\((\d+)\): (?:error|catastrophic error|warning)")
        .expect("static regex");
    re.captures(log).map(|c| format!("{}:{}", &c[1], &c[2]))
}

/// One error of an NVRTC log: where, what, and its part of the log (the error line, the
/// source line NVRTC echoes with a caret under the column, and the notes that follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    pub file: String,
    pub line: u32,
    /// 1-based column of NVRTC's caret, counted in characters of the source line.
    pub col: Option<u32>,
    /// `error: identifier "x" is undefined` (without the `file(line): ` that `location` says).
    pub message: String,
    pub text: String,
    /// What the log says beyond the error line and the echoed source line with its caret
    /// (`argument types are: ...`, `Note #3326-D: ...`); empty when nothing.
    pub notes: String,
}

impl LogError {
    /// `file:line:col`, or `file:line` when NVRTC showed no caret.
    pub fn location(&self) -> String {
        match self.col {
            Some(c) => format!("{}:{}:{c}", self.file, self.line),
            None => format!("{}:{}", self.file, self.line),
        }
    }
}

/// Every error an NVRTC log reports, in order, each with its own part of the log. Warnings
/// stay in the log but are not errors; text before the first error (ptxas's info lines) and the
/// closing `N errors detected` line belong to none.
pub fn log_errors(log: &str) -> Vec<LogError> {
    let head =
        regex::Regex::new(r"^([^\s()]+)\((\d+)\): (error|catastrophic error|warning|remark)(.*)$")
            .expect("static regex");
    let mut out: Vec<LogError> = Vec::new();
    // The error being read, and the source line NVRTC echoed under it.
    let mut current: Option<(LogError, Option<String>)> = None;
    let finish = |cur: Option<(LogError, Option<String>)>, out: &mut Vec<LogError>| {
        if let Some((mut e, echoed)) = cur {
            e.text = e.text.trim_end().to_string();
            // The notes: every line but the first, the echoed line and the caret under it.
            let mut lines: Vec<&str> = e.text.lines().skip(1).collect();
            if e.col.is_some()
                && let Some(i) = echoed.and_then(|x| lines.iter().position(|l| *l == x))
            {
                lines.drain(i..(i + 2).min(lines.len()));
            }
            e.notes = lines.join("\n").trim().to_string();
            out.push(e);
        }
    };
    for line in log.lines() {
        if let Some(c) = head.captures(line) {
            finish(current.take(), &mut out);
            if matches!(&c[3], "error" | "catastrophic error") {
                current = Some((
                    LogError {
                        file: c[1].to_string(),
                        line: c[2].parse().unwrap_or(0),
                        col: None,
                        message: format!("{}{}", &c[3], &c[4]),
                        text: format!("{line}\n"),
                        notes: String::new(),
                    },
                    None,
                ));
            }
            continue;
        }
        if line.contains(" detected in the compilation of ") || line.starts_with("ptxas") {
            finish(current.take(), &mut out);
            continue;
        }
        let Some((e, echoed)) = current.as_mut() else {
            continue;
        };
        // NVRTC echoes the line with two spaces in front, then a caret line that keeps the
        // line's own tabs: the caret's index, less those two, is the column.
        if e.col.is_none() && line.trim() == "^" {
            let previous = e.text.lines().last().filter(|l| l.starts_with("  "));
            if let Some(p) = previous {
                *echoed = Some(p.to_string());
                let idx = line.chars().take_while(|&ch| ch != '^').count();
                e.col = u32::try_from(idx.saturating_sub(1)).ok();
            }
        }
        e.text.push_str(line);
        e.text.push('\n');
    }
    finish(current.take(), &mut out);
    out
}

/// C, C++ or PTX source with its `//` and `/* */` comments blanked (string literals are kept
/// as they are: a comment marker inside one is rare in kernel code and only makes this
/// conservative).
pub fn without_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    if n == '\n' {
                        out.push('\n');
                    }
                    prev = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether `name` occurs in `code` as a whole identifier.
pub fn mentions(code: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    !name.is_empty()
        && code.match_indices(name).any(|(i, _)| {
            let before = code[..i].chars().next_back();
            let after = code[i + name.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
}

/// Names of the `.entry` kernels a PTX module defines.
pub fn ptx_entries(ptx: &str) -> Vec<String> {
    let re = regex::Regex::new(
        r"(?m)^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)",
    )
    .expect("static regex");
    re.captures_iter(ptx).map(|c| c[1].to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'reduce_shared' for 'sm_90'
ptxas info    : Function properties for reduce_shared
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 16 registers, used 1 barriers, 1024 bytes smem, 372 bytes cmem[0]
ptxas info    : Compiling entry function 'reduce_naive' for 'sm_90'
ptxas info    : Used 8 registers, 368 bytes cmem[0]";

    #[test]
    fn reads_ptxas_resources() {
        let r = resources(LOG);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "reduce_shared");
        assert_eq!(
            (
                r[0].registers,
                r[0].shared_bytes,
                r[0].spill_stores,
                r[0].spill_loads
            ),
            (16, 1024, 8, 4)
        );
        assert_eq!(r[0].const_bytes, 372);
        assert_eq!(
            (r[1].name.as_str(), r[1].registers, r[1].shared_bytes),
            ("reduce_naive", 8, 0)
        );
    }

    #[test]
    fn finds_first_error_location_and_entries() {
        let log =
            "sum.cu(3): warning #177-D: unused\nsum.cu(12): error: identifier \"x\" is undefined\n";
        assert_eq!(first_location(log).as_deref(), Some("sum.cu:3"));
        let ptx = ".version 8.8\n.visible .entry vector_add(\n.param .u64 a\n)\n.entry helper(\n";
        assert_eq!(ptx_entries(ptx), vec!["vector_add", "helper"]);
    }

    #[test]
    fn every_error_of_a_log_with_its_column() {
        let log = [
            "ptxas info    : 0 bytes gmem",
            "k.cu(4): error: identifier \"bb\" is undefined",
            "  \tif (i < n) c[i] = a[i] + bb[i];",
            "  \t                         ^",
            "",
            "k.cu(5): warning #177-D: variable \"y\" was declared but never referenced",
            "      int y;",
            "          ^",
            "",
            "k.cu(12): error: no instance of overloaded function \"atomicAdd\" matches the argument list",
            "            argument types are: (float *, const float *)",
            "      if (i < n) atomicAdd(out, in + i);",
            "                 ^",
            "Note #3326-D: function \"atomicAdd(int *, int)\" does not match",
            "",
            "2 errors detected in the compilation of \"k.cu\".",
        ]
        .join("\n");
        let log = log.as_str();
        let e = log_errors(log);
        assert_eq!(e.len(), 2, "{e:#?}");
        // The tab counts as one character: `bb` starts at the 27th of its line.
        assert_eq!(e[0].location(), "k.cu:4:27");
        assert_eq!(e[0].message, "error: identifier \"bb\" is undefined");
        assert!(
            e[0].text.ends_with('^') && !e[0].text.contains("warning"),
            "{}",
            e[0].text
        );
        assert_eq!(e[1].location(), "k.cu:12:16");
        assert!(e[1].text.contains("Note #3326-D") && !e[1].text.contains("detected"));
        assert_eq!(e[0].notes, "");
        assert_eq!(
            e[1].notes,
            "argument types are: (float *, const float *)\n\
             Note #3326-D: function \"atomicAdd(int *, int)\" does not match"
        );
        assert!(log_errors("ptxas fatal   : Unresolved extern function 'f'").is_empty());
    }

    #[test]
    fn names_are_found_outside_comments_only() {
        let src = "// reduce_old\n/* reduce_gone(\n */ extern \"C\" __global__ void reduce_naive2(int n) {}\n";
        let code = without_comments(src);
        assert!(mentions(&code, "reduce_naive2"));
        assert!(!mentions(&code, "reduce_naive"), "a prefix is not the name");
        assert!(!mentions(&code, "reduce_old") && !mentions(&code, "reduce_gone"));
        assert_eq!(code.lines().count(), src.lines().count(), "lines stay put");
    }

    #[test]
    fn compiles_with_real_nvrtc_when_present() {
        if !crate::backend::cuda::nvrtc_present() {
            eprintln!(
                "skipped: libnvrtc.so.13 not found (set LD_LIBRARY_PATH; .ci/run installs it)"
            );
            return;
        }
        let main = SourceFile {
            name: "k.cu".into(),
            text: "#include \"common.cuh\"\nextern \"C\" __global__ void k(float* x) { x[threadIdx.x] = TWO; }\n".into(),
        };
        let hdr = SourceFile {
            name: "common.cuh".into(),
            text: "#define TWO 2.0f\n".into(),
        };
        let c = compile(&main, &[hdr], &options("sm_90", &[]));
        assert!(c.ok, "{}", c.log);
        assert_eq!(ptx_entries(&c.ptx), vec!["k"]);
        assert_eq!(resources(&c.log)[0].name, "k");
        let bad = SourceFile {
            name: "bad.cu".into(),
            text: "\n\nextern \"C\" __global__ void k() { undefined_thing; }\n".into(),
        };
        let c = compile(&bad, &[], &options("sm_90", &[]));
        assert!(!c.ok);
        assert_eq!(
            first_location(&c.log).as_deref(),
            Some("bad.cu:3"),
            "{}",
            c.log
        );
    }
}
