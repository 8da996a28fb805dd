//! `cugrade init LAB`: a lab's starter (`starter`: CUDA C++; `numba` and `cupy` for
//! `--lang numba|cupy`), and `cugrade init --list`.

mod common;
mod cuda;
mod cupy;
mod function;
pub use function::is_function_lab;
mod labdoc;
mod numba;
pub mod starter;
mod text;

use crate::errors::CliError;
use crate::exit;
use crate::labs;
use std::path::{Path, PathBuf};

/// `cugrade init LAB [DIR] [--lang numba]` and `cugrade init --list`.
pub fn run(
    lab: Option<&str>,
    dir: Option<PathBuf>,
    list: bool,
    lang: Option<starter::StarterLang>,
) -> Result<i32, CliError> {
    if list {
        println!("{:<12} {:<18} about", "lab", "--lang");
        for l in labs::LABS {
            let langs: Vec<&str> = starter::languages(l).iter().map(|x| x.as_str()).collect();
            let about = l.heading().replace('`', "");
            let about = about.strip_prefix("Lab: ").unwrap_or(&about);
            let mut line = format!("{:<12} {:<18} {about}", l.name, langs.join(", "));
            // 80 columns: the rubric's file name goes first.
            if line.chars().count() > 80
                && let Some((short, _)) = line.rsplit_once(" (")
            {
                line = short.to_string();
            }
            println!("{line}");
        }
        return Ok(exit::OK);
    }
    let name = lab.unwrap_or_default();
    let lab = labs::find(name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown lab `{name}`; the labs are: {}",
            labs::names()
        ))
    })?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(lab.name));
    let (files, lang) = starter::init(lab, &dir, lang).map_err(CliError::Usage)?;
    println!(
        "wrote a {} starter for the {} lab in {}:",
        match lang {
            starter::StarterLang::Cuda => "CUDA C++",
            starter::StarterLang::Numba => "Numba",
            starter::StarterLang::Cupy => "CuPy",
        },
        lab.name,
        dir.display()
    );
    for f in &files {
        println!("  {f}");
    }
    if dir == Path::new(".") {
        println!("next: cugrade check");
    } else {
        println!(
            "next: cd {} && cugrade check",
            shell_word(&dir.to_string_lossy())
        );
    }
    Ok(exit::OK)
}

/// `cugrade init --rubric FILE [DIR] [--lang L]`: a starter for a course's own lab. Its
/// `cugrade.yaml` cannot name the rubric (a submission's rubric must be inside its folder, and
/// the course's reference must never travel with a starter): `check` takes `--rubric`.
pub fn run_course_rubric(
    path: &Path,
    dir: Option<PathBuf>,
    lang: Option<starter::StarterLang>,
) -> Result<i32, CliError> {
    let r = crate::rubric::load(path).map_err(|e| CliError::Usage(e.to_string()))?;
    let lab = labs::Lab::from_course(&r).map_err(CliError::Usage)?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(lab.name));
    let shown = path.display().to_string();
    let manifest = format!(
        "# cugrade reads this file. This lab's rubric is your course's, not one built into\n\
         # cugrade: grade with `cugrade check --rubric {shown}` (the path from where you run it).\n\
         # A `rubric:` line may only name a file in this folder or a built-in lab.\n"
    );
    let (files, lang) =
        starter::write_starter(lab, &r, &dir, lang, &manifest).map_err(CliError::Usage)?;
    println!(
        "wrote a {} starter for the course's {} lab ({}) in {}:",
        match lang {
            starter::StarterLang::Cuda => "CUDA C++",
            starter::StarterLang::Numba => "Numba",
            starter::StarterLang::Cupy => "CuPy",
        },
        lab.name,
        shown,
        dir.display()
    );
    for f in &files {
        println!("  {f}");
    }
    println!(
        "next: cugrade check --rubric {} {}",
        shell_word(&shown),
        shell_word(&dir.to_string_lossy())
    );
    Ok(exit::OK)
}

/// Quote a path for the `next:` line when it needs it.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
