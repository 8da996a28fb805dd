//! CuPy starters (`cugrade init LAB --lang cupy`): the lab's kernels as CUDA C++ stubs with the
//! contract's signatures in one `cp.RawModule`, each fetched under its kernel name, the way the
//! course's CuPy guide writes raw kernels. cugrade finds and grades them as
//! docs/submissions.md#cupy-submissions says.

use crate::labs::Lab;
use crate::rubric::LoadedRubric;

/// Whether the rubric accepts CuPy kernels.
pub fn can_grade(r: &LoadedRubric) -> bool {
    r.rubric
        .languages
        .as_ref()
        .is_none_or(|v| v.contains(&crate::rubric::schema::Language::Cupy))
}

/// `LAB.py`, with `_` for `-` (an importable module name).
pub fn file_name(lab: &Lab) -> String {
    format!("{}.py", lab.name.replace('-', "_"))
}

/// The starter's Python source.
pub fn kernel_source(lab: &Lab, r: &LoadedRubric) -> String {
    let cuda = super::cuda::kernel_source(lab, r);
    let mut kernels: Vec<&str> = vec![];
    for m in &r.rubric.milestones {
        if !kernels.contains(&m.kernel.as_str()) {
            kernels.push(&m.kernel);
        }
    }
    let mut s = format!(
        "# {}\n#\n\
         # The kernels are CUDA C++ in the string below, in one CuPy RawModule; each is fetched\n\
         # under the lab's kernel name. Grade them with `cugrade check` in this folder (no GPU\n\
         # and no CuPy needed: cugrade reads the definitions and compiles them itself). Keep\n\
         # test code under `if __name__ == \"__main__\":`.\n\n\
         import cupy as cp\n\n\
         SOURCE = r'''\n",
        super::text::title(lab).replace('`', "")
    );
    s.push_str(&cuda.replace("'''", "\"\"\""));
    s.push_str("'''\n\nmodule = cp.RawModule(code=SOURCE)\n");
    for k in &kernels {
        s.push_str(&format!("{k} = module.get_function(\"{k}\")\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::cupy;

    #[test]
    fn every_lab_starter_defines_its_kernels_for_cupy() {
        let Ok(python) = cupy::interpreter() else {
            eprintln!("skipped: no python3");
            return;
        };
        for lab in crate::labs::LABS {
            let m = lab.materialize().unwrap();
            let r = crate::rubric::load(&m.rubric_path).unwrap();
            if crate::commands::init::is_function_lab(&r) {
                continue; // a Python function's starter: init::function's tests
            }
            let text = kernel_source(lab, &r);
            let name = file_name(lab);
            assert_eq!(cupy::python_language(&text, None), cupy::PyLang::Cupy);
            let tmp = tempfile::tempdir().unwrap();
            let files = [crate::compile::SourceFile {
                name: name.clone(),
                text,
            }];
            let found =
                cupy::extract(&python, &files, std::slice::from_ref(&name), tmp.path()).unwrap();
            assert!(found.errors.is_empty(), "{}: {:?}", lab.name, found.errors);
            for ms in &r.rubric.milestones {
                let (def, entry) = cupy::find(&found.definitions, &ms.kernel)
                    .unwrap_or_else(|| panic!("{}: no {}", lab.name, ms.kernel));
                let src =
                    cupy::kernel_source(def, &entry, &ms.kernel, r.contract(&ms.contract)).unwrap();
                // The CUDA lines map back to the `.py`: line 1 of the string is SOURCE's line.
                assert!(
                    src.text.contains(&format!("#line 10 \"{name}\"")),
                    "{}",
                    src.text
                );
            }
            // An untouched starter is "not implemented yet", kernel by kernel.
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(&name), &files[0].text).unwrap();
            let sub = crate::submission::load(dir.path()).unwrap();
            let stubs = super::super::starter::stubs(&sub, &r);
            for ms in &r.rubric.milestones {
                assert!(
                    stubs.contains_key(&ms.kernel),
                    "{}: {} {stubs:?}",
                    lab.name,
                    ms.kernel
                );
            }
        }
    }
}
