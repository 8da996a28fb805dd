//! What languages a submission is in, decided once when it is read: CUDA C++ for `.cu` files,
//! PTX for `.ptx`, and for each `.py` file Numba, CuPy, both or neither from its imports (a
//! manifest's `lang:` decides for all of them). The stages read the answer from the
//! [`Submission`](super::Submission); none looks at the files again to decide.

use crate::rubric::schema::Language;

/// How a `.py` file takes part in grading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyLang {
    Numba,
    Cupy,
    /// Imports both: read by both drivers (each finds only its own kernel objects).
    Both,
    /// Imports neither: a helper module.
    Neither,
}

/// A `.py` file's language from its imports (see the module's documentation); `forced` is
/// the manifest's `lang:`.
pub fn python_language(text: &str, forced: Option<Language>) -> PyLang {
    match forced {
        Some(Language::Cupy) => return PyLang::Cupy,
        Some(Language::Numba) => return PyLang::Numba,
        _ => {}
    }
    let re =
        regex::Regex::new(r"(?m)^[ \t]*(?:import|from)[ \t]+(cupy|numba)\b").expect("static regex");
    let mut cupy = false;
    let mut numba = false;
    for c in re.captures_iter(text) {
        match &c[1] {
            "cupy" => cupy = true,
            _ => numba = true,
        }
    }
    match (numba, cupy) {
        (true, true) => PyLang::Both,
        (true, false) => PyLang::Numba,
        (false, true) => PyLang::Cupy,
        (false, false) => PyLang::Neither,
    }
}

/// The languages of a submission with CUDA C++ files (`cuda`), PTX files (`ptx`) and Python
/// files of these languages, in the order `Language` lists them.
pub fn of(cuda: bool, ptx: bool, python: &[PyLang]) -> Vec<Language> {
    let mut v = vec![];
    if cuda {
        v.push(Language::Cuda);
    }
    if ptx {
        v.push(Language::Ptx);
    }
    let any = |l: PyLang| python.iter().any(|x| *x == l || *x == PyLang::Both);
    // Python files alone that import neither are Numba, as before CuPy was graded. Beside
    // CUDA C++ or PTX, a file that imports neither (a plotting or benchmark script) is not
    // a kernel at all: no Numba is needed for it (issue 32).
    let python_only = !cuda && !ptx;
    if any(PyLang::Numba) || (python_only && !python.is_empty() && !any(PyLang::Cupy)) {
        v.push(Language::Numba);
    }
    if any(PyLang::Cupy) {
        v.push(Language::Cupy);
    }
    v
}
