//! What every starter language of `commands::init` shares: the languages, the kernels a rubric
//! asks for, comments wrapped for a source file.

use crate::rubric::LoadedRubric;

/// The language a starter's kernels are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StarterLang {
    /// CUDA C++ (`LAB.cu`).
    Cuda,
    /// Numba `@cuda.jit` kernels in Python (`LAB.py`, with `_` for `-`).
    Numba,
    /// CuPy: the CUDA C++ stubs in one `cp.RawModule` (`LAB.py`, with `_` for `-`).
    Cupy,
}

impl StarterLang {
    pub fn as_str(self) -> &'static str {
        match self {
            StarterLang::Cuda => "cuda",
            StarterLang::Numba => "numba",
            StarterLang::Cupy => "cupy",
        }
    }
}

/// Comment lines for a block of prose, wrapped to fit 80 columns; paragraphs are kept apart
/// by an empty comment line.
pub(super) fn comment(text: &str, prefix: &str) -> String {
    let mut paragraphs = Vec::new();
    for para in text.split("\n\n") {
        let mut lines: Vec<String> = Vec::new();
        let mut line = String::new();
        for w in para.split_whitespace() {
            if !line.is_empty() && prefix.len() + line.len() + 1 + w.len() > 80 {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
        if !line.is_empty() {
            lines.push(line);
        }
        if !lines.is_empty() {
            paragraphs.push(
                lines
                    .iter()
                    .map(|l| format!("{prefix}{l}\n"))
                    .collect::<String>(),
            );
        }
    }
    paragraphs.join(&format!("{}\n", prefix.trim_end()))
}

/// The milestones' kernels in milestone order, each once, with their contract names.
pub(super) fn kernels(r: &LoadedRubric) -> Vec<(&str, &str)> {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for m in &r.rubric.milestones {
        // A multi-kernel milestone's later kernels take the same parameters.
        for k in m.kernels() {
            if !seen.iter().any(|(s, _)| *s == k) {
                seen.push((k, &m.contract));
            }
        }
    }
    seen
}
