//! Every reference kernel and example submission of the shipped labs goes through real
//! NVRTC 13 (`--gpu-architecture=sm_90 -lineinfo` and CUDA's header dirs, what the grader uses), and the PTX it
//! produces has the entry points, with the parameter counts, that the rubrics promise.
//!
//! Skips (with a message) where libnvrtc is not installed.

use crate::labs_common::*;
use crate::support::nvrtc;
use cudarc::nvrtc::result as nvrtc;
use std::ffi::CString;
use std::path::Path;

fn nvrtc_present() -> bool {
    let ok = nvrtc();
    if !ok {
        eprintln!("(the lab kernels were not compiled)");
    }
    ok
}

/// Compile one file: `Ok(ptx)` or `Err(log)`.
fn compile(path: &Path) -> Result<String, String> {
    let src = std::fs::read_to_string(path).unwrap();
    let src = CString::new(src).unwrap();
    let name = CString::new(path.file_name().unwrap().to_string_lossy().as_bytes()).unwrap();
    let prog = nvrtc::create_program(&src, Some(&name)).map_err(|e| e.to_string())?;
    // CUDA's own headers, as cugrade's compile worker gets them.
    let mut opts = vec![
        "--gpu-architecture=sm_90".to_string(),
        "-lineinfo".to_string(),
    ];
    opts.extend(
        cugrade::compile::toolchain::cuda_include_dirs()
            .iter()
            .map(|d| format!("--include-path={}", d.display())),
    );
    let result = unsafe { nvrtc::compile_program(prog, &opts) };
    let text = |v: Vec<std::ffi::c_char>| {
        let bytes: Vec<u8> = v
            .into_iter()
            .map(|c| c as u8)
            .take_while(|&c| c != 0)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let out = match result {
        Ok(()) => Ok(text(unsafe { nvrtc::get_ptx(prog) }.unwrap())),
        Err(_) => Err(text(unsafe { nvrtc::get_program_log(prog) }.unwrap())),
    };
    unsafe { nvrtc::destroy_program(prog) }.unwrap();
    out
}

/// Parameter count of `.entry name(...)` in the PTX, if the entry exists.
fn entry_params(ptx: &str, name: &str) -> Option<usize> {
    let head = format!(".entry {name}(");
    let start = ptx.find(&head)? + head.len();
    let body = &ptx[start..start + ptx[start..].find(')')?];
    Some(body.matches(".param").count())
}

#[test]
fn reference_kernels_compile_and_define_every_entry_of_their_rubric() {
    if !nvrtc_present() {
        return;
    }
    let rubrics = rubrics();
    assert!(rubrics.len() >= 10, "expected every lab's rubric");
    for (path, r) in &rubrics {
        let reference = reference_path(path, r);
        if reference.extension().is_some_and(|e| e == "py") {
            // A Python function lab's NumPy reference: not compiled (function_lab:: runs it).
            continue;
        }
        let ptx = compile(&reference)
            .unwrap_or_else(|log| panic!("{} does not compile:\n{log}", reference.display()));
        for (entry, contract) in reference_entries(r) {
            let got = entry_params(&ptx, &entry).unwrap_or_else(|| {
                panic!("{}: no `{entry}` entry in the PTX", reference.display())
            });
            assert_eq!(
                got,
                arg_count(r, &contract),
                "{}: `{entry}` parameter count vs contract `{contract}`",
                reference.display()
            );
        }
        // Parameters set by symbol must exist as module-scope globals of that name.
        for (cname, c) in &r.contracts {
            for p in c.params.iter().filter(|p| p.symbol) {
                assert!(
                    ptx.contains(&format!(" {}[", p.name)),
                    "{}: contract `{cname}` sets symbol `{}` but the reference PTX has no such global",
                    reference.display(),
                    p.name
                );
            }
        }
    }
}

#[test]
fn example_submissions_compile_unless_they_are_meant_not_to() {
    if !nvrtc_present() {
        return;
    }
    let rubrics = rubrics();
    let examples = examples();
    assert!(!examples.is_empty());
    let mut compile_errors = 0;
    for ex in &examples {
        let (_, r) = rubrics
            .iter()
            .find(|(p, _)| lab_name(p) == ex.lab)
            .unwrap_or_else(|| panic!("{}: no rubric for lab {}", ex.name(), ex.lab));
        if ex.is_numba() {
            // Numba examples go through cugrade's own compile worker (tests/it/labs_examples.rs).
            continue;
        }
        assert_eq!(
            ex.sources.len(),
            1,
            "{}: one .cu file per example",
            ex.name()
        );
        let src = &ex.sources[0];
        let is_compile_error = ex.dir.file_name().unwrap() == "compile_error";
        match compile(src) {
            Err(log) => {
                assert!(is_compile_error, "{} does not compile:\n{log}", ex.name());
                assert!(
                    log.contains("error"),
                    "{}: log without an error:\n{log}",
                    ex.name()
                );
                compile_errors += 1;
                for m in &r.milestones {
                    assert_eq!(ex.expected.milestones[&m.id], Status::Fail, "{}", ex.name());
                }
            }
            Ok(ptx) => {
                assert!(!is_compile_error, "{} was meant not to compile", ex.name());
                for m in &r.milestones {
                    let status = ex.expected.milestones[&m.id];
                    match entry_params(&ptx, &m.kernel) {
                        // A missing kernel cannot pass.
                        None => assert!(
                            matches!(status, Status::Fail | Status::Error),
                            "{}: `{}` is missing but expected {status:?}",
                            ex.name(),
                            m.kernel
                        ),
                        Some(n) => assert_eq!(
                            n,
                            arg_count(r, &m.contract),
                            "{}: `{}` parameter count",
                            ex.name(),
                            m.kernel
                        ),
                    }
                }
            }
        }
    }
    assert!(
        compile_errors >= 1,
        "at least one example must fail to compile"
    );
}
