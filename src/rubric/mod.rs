//! Rubrics: what an assignment checks. See docs/rubric.md.
//!
//! `load` reads a rubric file and checks everything that can be checked without running a
//! kernel: the schema (serde), every expression, and every name that refers to another entry.
//! Any mistake is a [`ConfigError`] with `file:line:col`.

pub mod args;
pub mod baseline;
pub mod bounds;
mod collect;
pub mod confine;
pub mod convention;
pub mod expr;
pub mod locate;
pub mod numbers;
pub mod plan;
pub mod schema;
mod sizes;

use crate::errors::{ConfigError, Pos};
use expr::{Expression, Kind, Vars};
use locate::Locations;
pub use schema::ParamType;

/// Largest buffer a contract may ask for (elements), so a typo cannot allocate the world.
pub const MAX_ELEMENTS: usize = 1 << 30;
use schema::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A rubric that passed every static check.
#[derive(Debug, Clone)]
pub struct LoadedRubric {
    pub rubric: Rubric,
    pub path: PathBuf,
    /// Absolute path of the reference kernel source.
    pub reference_path: PathBuf,
    source: String,
    locations: Locations,
}

/// Names a tolerance expression may read beyond the case's variables.
pub fn tolerance_vars(contract: &Contract) -> Vec<String> {
    let mut names = vec![
        "eps".to_string(),
        "eps64".to_string(),
        "u".to_string(),
        // The element's flat index: a scan's error grows with it.
        schema::INDEX_VAR.to_string(),
    ];
    for p in &contract.params {
        if let Some(ParamType::Buffer(t)) = p.param_type()
            && t.is_float()
            && p.dir.is_input()
        {
            names.push(format!("{}_abs_sum", p.name));
            names.push(format!("{}_abs_max", p.name));
        }
    }
    names
}

impl LoadedRubric {
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn contract(&self, name: &str) -> &Contract {
        &self.rubric.contracts[name]
    }

    /// The precision milestone `m` computes in: its own `precision`, else its contract's,
    /// else float.
    pub fn precision(&self, m: &Milestone) -> crate::model::precision::Precision {
        m.precision
            .or(self.contract(&m.contract).precision)
            .unwrap_or_default()
    }

    pub fn correctness_case(&self, name: &str) -> Option<&Case> {
        self.rubric
            .cases
            .correctness
            .iter()
            .find(|c| c.name == name)
    }

    pub fn performance_case(&self, name: &str) -> Option<&Case> {
        self.rubric
            .cases
            .performance
            .iter()
            .find(|c| c.name == name)
    }

    /// The correctness cases a milestone runs, in rubric order.
    pub fn cases_for(&self, m: &Milestone) -> Vec<&Case> {
        if m.correctness.cases.is_empty() {
            self.rubric.cases.correctness.iter().collect()
        } else {
            m.correctness
                .cases
                .iter()
                .filter_map(|n| self.correctness_case(n))
                .collect()
        }
    }

    pub fn max_score(&self) -> f64 {
        self.rubric.milestones.iter().map(milestone_max).sum()
    }

    /// An error located at the key that introduces `path` in this rubric (`params:`).
    pub fn error_at_key(&self, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.path, self.locations.key(path), message, &self.source)
    }

    /// An error located at `path` in this rubric.
    pub fn error_at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(
            &self.path,
            self.locations.value(path),
            message,
            &self.source,
        )
    }
}

/// Points a milestone can award.
pub fn milestone_max(m: &Milestone) -> f64 {
    let perf: f64 = m.performance.iter().map(perf_max).sum();
    let metrics: f64 = m.metrics.iter().map(|x| x.points).sum();
    m.correctness.points + perf + metrics
}

pub fn perf_max(p: &PerfSpec) -> f64 {
    p.tiers
        .iter()
        .map(|t| t.points)
        .fold(p.points.unwrap_or(0.0), f64::max)
}

/// The bar a performance check must reach to pass.
pub fn perf_bar(p: &PerfSpec) -> f64 {
    p.min
        .unwrap_or_else(|| p.tiers.iter().map(|t| t.min).fold(0.0, f64::max))
}

/// Read and check a rubric of a course (its files confined to its course tree, see
/// [`confine`]).
pub fn load(path: &Path) -> Result<LoadedRubric, ConfigError> {
    load_within(path, None)
}

/// Read and check a rubric whose files must all lie in `within` when given (a rubric a
/// submission's manifest names: the submission's folder), else in its course tree.
pub fn load_within(path: &Path, within: Option<&Path>) -> Result<LoadedRubric, ConfigError> {
    let (_, root) = confine::rubric_file(path, within)?;
    let source = read_bounded(path, bounds::RUBRIC.max_bytes)?;
    // The first mistake in file order (`load_all` reports them all).
    let (rubric, mut schema) = collect::parse_all::<Rubric>(path, &source);
    if !schema.is_empty() {
        return Err(schema.swap_remove(0));
    }
    let Some(mut rubric) = rubric else {
        return Err(ConfigError::whole_file(path, "the rubric does not parse"));
    };
    add_rank_vars(&mut rubric);
    let locations = Locations::of(&source);
    let reference_path = confine::reference(path, &rubric.reference, &root, within.is_some())
        .map_err(|m| ConfigError::new(path, locations.value("reference"), m, &source))?;
    let loaded = LoadedRubric {
        rubric,
        path: path.to_path_buf(),
        reference_path,
        source,
        locations,
    };
    match check_all(&loaded).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(loaded),
    }
}

/// A multi-GPU lab's cases get `nranks` (the rubric's rank count) and `rank` (0) where they do
/// not set them, so that its expressions are checked as any others; the plan sets both for
/// the rank set it grades on (`LoadedRubric::plan_ranks`).
fn add_rank_vars(rubric: &mut Rubric) {
    let Some(n) = rubric.ranks else {
        return;
    };
    for case in rubric
        .cases
        .correctness
        .iter_mut()
        .chain(rubric.cases.performance.iter_mut())
    {
        case.vars.entry("nranks".into()).or_insert(i64::from(n));
        case.vars.entry("rank".into()).or_insert(0);
    }
}

/// [`load`], reporting every mistake it finds instead of the first: one per part of the rubric
/// (the reference file, each setting, the cases, each contract, each milestone), in file
/// order. `cugrade validate` prints them all.
pub fn load_all(path: &Path) -> Result<LoadedRubric, Vec<ConfigError>> {
    let (_, root) = confine::rubric_file(path, None).map_err(|e| vec![e])?;
    let source = read_bounded(path, bounds::RUBRIC.max_bytes).map_err(|e| vec![e])?;
    // Every unknown key (and wrong value) serde can be taken past, each at its own line; the
    // checks below then run on the rest, so that one typo hides nothing else.
    let (rubric, mut schema) = collect::parse_all::<Rubric>(path, &source);
    let Some(mut rubric) = rubric else {
        return Err(schema);
    };
    add_rank_vars(&mut rubric);
    let locations = Locations::of(&source);
    let reference_path =
        confine::reference(path, &rubric.reference, &root, false).map_err(|m| {
            let mut all = std::mem::take(&mut schema);
            all.push(ConfigError::new(
                path,
                locations.value("reference"),
                m,
                &source,
            ));
            all
        })?;
    let loaded = LoadedRubric {
        rubric,
        path: path.to_path_buf(),
        reference_path,
        source,
        locations,
    };
    let mut errors = schema;
    errors.extend(check_all(&loaded));
    errors.sort_by_key(|e| e.pos.map(|p| (p.line, p.col)));
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

/// The text of `path`, refused unread past `max` bytes.
fn read_bounded(path: &Path, max: usize) -> Result<String, ConfigError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let unreadable =
        |e: std::io::Error| ConfigError::whole_file(path, format!("cannot read rubric: {e}"));
    // Non-blocking: opening a FIFO for reading waits for a writer, forever if none comes.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(unreadable)?;
    let kind = file.metadata().map_err(unreadable)?.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(ConfigError::whole_file(
            path,
            format!("the rubric is {what}; --rubric and `rubric:` name a regular YAML file"),
        ));
    }
    let mut text = String::new();
    file.take(max as u64 + 1)
        .read_to_string(&mut text)
        .map_err(unreadable)?;
    if text.len() > max {
        return Err(ConfigError::whole_file(
            path,
            format!("the file is over {max} bytes; a rubric may have at most {max} bytes"),
        ));
    }
    Ok(text)
}

/// Deserialize a rubric's YAML (see [`parse_yaml_within`]).
pub fn parse_yaml<T: serde::de::DeserializeOwned>(
    path: &Path,
    source: &str,
) -> Result<T, ConfigError> {
    parse_yaml_within(path, source, &bounds::RUBRIC)
}

/// Deserialize YAML that keeps within `limits` (size, nesting, values: checked first, see
/// [`bounds`]), turning serde_yaml's error into a positioned [`ConfigError`].
pub fn parse_yaml_within<T: serde::de::DeserializeOwned>(
    path: &Path,
    source: &str,
    limits: &bounds::YamlLimits,
) -> Result<T, ConfigError> {
    bounds::check(path, source, limits)?;
    serde_yaml::from_str(source).map_err(|e| {
        let pos = e.location().map(|l| Pos {
            line: l.line(),
            col: l.column(),
        });
        let mut msg = e.to_string();
        if let Some(i) = msg.rfind(" at line ") {
            msg.truncate(i);
        }
        ConfigError::new(path, pos, msg, source)
    })
}

/// Every mistake of a parsed rubric, at most one per part (a part stops at its first), in the
/// order of the file.
fn check_all(r: &LoadedRubric) -> Vec<ConfigError> {
    let rb = &r.rubric;
    let mut errors = Vec::new();
    let reference = std::fs::read(&r.reference_path)
        .ok()
        .filter(|_| r.reference_path.is_file());
    if reference.is_none() {
        errors.push(r.error_at(
            "reference",
            format!(
                "reference kernel file `{}` does not exist",
                r.reference_path.display()
            ),
        ));
    }
    if let Some(n) = rb.ranks
        && !schema::RANKS_ALLOWED.contains(&n)
    {
        errors.push(r.error_at(
            "ranks",
            format!(
                "ranks: {n}: a multi-GPU lab runs on {} to {} ranks",
                schema::RANKS_ALLOWED.start(),
                schema::RANKS_ALLOWED.end()
            ),
        ));
    }
    if rb.trials < 2 {
        errors.push(r.error_at(
            "trials",
            "trials must be at least 2: each case runs on at least two fresh inputs",
        ));
    }
    for (key, t) in [
        ("compile_s", rb.timeouts.compile_s),
        ("launch_s", rb.timeouts.launch_s),
        ("launch_min_s", rb.timeouts.launch_min_s),
        ("milestone_s", rb.timeouts.milestone_s),
    ] {
        if !(t > 0.0 && t <= 3600.0) {
            errors.push(r.error_at(
                &format!("timeouts.{key}"),
                "timeouts must be between 0 and 3600 seconds",
            ));
        }
    }
    if !(rb.timeouts.launch_factor >= 1.0 && rb.timeouts.launch_factor <= 1e9) {
        errors.push(r.error_at(
            "timeouts.launch_factor",
            "launch_factor must be at least 1: a correctness launch may take this many times the reference kernel's time",
        ));
    }
    errors.extend(check_cases(r).err());
    errors.extend(check_case_generators(r).err());
    for (name, c) in &rb.contracts {
        errors.extend(check_contract(r, name, c).err());
    }
    let mut ids = BTreeSet::new();
    for (i, m) in rb.milestones.iter().enumerate() {
        let at = format!("milestones[{i}]");
        if !ids.insert(m.id.as_str()) {
            errors.push(r.error_at(
                &format!("{at}.id"),
                format!("duplicate milestone id `{}`", m.id),
            ));
        }
        errors.extend(check_milestone(r, &at, m).err());
        if let Some(text) = &reference {
            errors.extend(check_reference_names(
                r,
                &at,
                m,
                &String::from_utf8_lossy(text),
            ));
        }
    }
    if rb.milestones.is_empty() {
        errors.push(r.error_at("milestones", "a rubric needs at least one milestone"));
    }
    let function = |m: &Milestone| {
        rb.contracts
            .get(&m.contract)
            .is_some_and(Contract::is_function)
    };
    if rb.milestones.iter().any(function) && !rb.milestones.iter().all(function) {
        errors.push(r.error_at(
            "milestones",
            "a rubric grades kernels or Python functions (`returns:`), not both: split it in two",
        ));
    }
    errors.extend(numbers::check(r).err());
    errors.extend(baseline::check(r));
    if errors.is_empty() {
        // Sizes are evaluated only once every expression parsed and every case is known.
        errors.extend(sizes::check(r));
    }
    // File order: what an editor shows top to bottom.
    errors.sort_by_key(|e| e.pos.map(|p| (p.line, p.col)));
    errors
}

/// The kernels a milestone names in the reference file (`kernel:`, or `reference_kernel:` when
/// set, and `against: {reference: NAME}`) must appear there: a name that does not occur in the
/// file at all (comments aside) cannot be one of its kernels. Found here, it is the rubric's
/// mistake at its own line, before any grading starts.
fn check_reference_names(
    r: &LoadedRubric,
    at: &str,
    m: &Milestone,
    reference: &str,
) -> Vec<ConfigError> {
    let code = crate::compile::without_comments(reference);
    let file = r
        .reference_path
        .file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
    if r.rubric
        .contracts
        .get(&m.contract)
        .is_some_and(Contract::is_function)
    {
        let name = m.reference_kernel.as_deref().unwrap_or(&m.kernel);
        let def = regex::Regex::new(&format!(r"(?m)^def\s+{}\s*\(", regex::escape(name)))
            .expect("escaped regex");
        if def.is_match(reference) {
            return vec![];
        }
        let key = if m.reference_kernel.is_some() {
            "reference_kernel"
        } else {
            "kernel"
        };
        return vec![r.error_at(
            &format!("{at}.{key}"),
            format!(
                "function `{name}` is not defined at the top level of the reference file `{file}`"
            ),
        )];
    }
    let mut named: Vec<(String, &str)> = vec![match &m.reference_kernel {
        Some(k) => (format!("{at}.reference_kernel"), k.as_str()),
        None => (format!("{at}.kernel"), m.kernel.as_str()),
    }];
    let then_key = if m.reference_then.is_some() {
        "reference_then"
    } else {
        "then"
    };
    for (k, name) in m.reference_then().iter().enumerate() {
        named.push((format!("{at}.{then_key}[{k}]"), name.as_str()));
    }
    for (i, p) in m.performance.iter().enumerate() {
        if let Against::Reference(k) = &p.against {
            named.push((
                format!("{at}.performance[{i}].against.reference"),
                k.as_str(),
            ));
        }
    }
    named
        .into_iter()
        .filter(|(_, k)| !crate::compile::mentions(&code, k))
        .map(|(path, k)| {
            r.error_at(
                &path,
                format!(
                    "kernel `{k}` is not in the reference file `{file}`: name a kernel it \
                     defines, or add `reference_kernel:` with the reference's name for it"
                ),
            )
        })
        .collect()
}

/// Whether any tolerance of the rubric reads the element's index.
fn reads_index(r: &LoadedRubric) -> bool {
    let rb = &r.rubric;
    let contracts = rb.contracts.values().flat_map(|c| {
        std::iter::once(&c.tolerance).chain(c.params.iter().filter_map(|p| p.tolerance.as_ref()))
    });
    let milestones = rb
        .milestones
        .iter()
        .filter_map(|m| m.correctness.tolerance.as_ref());
    contracts.chain(milestones).any(Tolerance::reads_index)
}

fn check_cases(r: &LoadedRubric) -> Result<(), ConfigError> {
    let mut names = BTreeSet::new();
    let groups = [
        ("correctness", &r.rubric.cases.correctness),
        ("performance", &r.rubric.cases.performance),
    ];
    for (group, cases) in groups {
        for (i, c) in cases.iter().enumerate() {
            if !names.insert(c.name.as_str()) {
                return Err(r.error_at(
                    &format!("cases.{group}[{i}].name"),
                    format!("duplicate case name `{}`", c.name),
                ));
            }
            let index = schema::INDEX_VAR;
            if c.vars.contains_key(index) && reads_index(r) {
                return Err(r.error_at(
                    &format!("cases.{group}[{i}].vars.{index}"),
                    format!(
                        "`{index}` is the element's index in a tolerance expression, which this rubric's tolerances read; give the case variable another name"
                    ),
                ));
            }
            let timing_keys = [
                ("budget_s", c.budget_s.is_some()),
                ("cache", c.cache.is_some()),
                ("flops", c.flops.is_some()),
            ];
            if group == "correctness"
                && let Some((key, _)) = timing_keys.iter().find(|(_, set)| *set)
            {
                return Err(r.error_at(
                    &format!("cases.{group}[{i}].{key}"),
                    format!("`{key}` applies to performance cases only: move it to a case under cases.performance"),
                ));
            }
            if let Some(b) = c.budget_s
                && !(b > 0.0 && b <= 600.0)
            {
                return Err(r.error_at(
                    &format!("cases.{group}[{i}].budget_s"),
                    "budget_s must be between 0 and 600 seconds (default 2)",
                ));
            }
            if let Some(f) = &c.flops {
                let vars: Vec<String> = c.vars.keys().cloned().collect();
                parse_at(
                    r,
                    &format!("cases.{group}[{i}].flops"),
                    f,
                    Kind::Real,
                    &vars,
                )?;
            }
        }
    }
    if r.rubric.cases.correctness.is_empty() {
        return Err(r.error_at(
            "cases.correctness",
            "a rubric needs at least one correctness case",
        ));
    }
    Ok(())
}

/// Parse an expression found at `path`, checking its variables against `known`.
fn parse_at(
    r: &LoadedRubric,
    path: &str,
    e: &Expr,
    kind: Kind,
    known: &[String],
) -> Result<Expression, ConfigError> {
    numbers::finite_literal(r, path, e)?;
    let parsed = e.parse_as(kind).map_err(|m| r.error_at(path, m))?;
    parsed
        .check_vars(known.iter().map(String::as_str))
        .map_err(|m| r.error_at(path, m))?;
    numbers::finite_constant(r, path, e, parsed)?;
    Ok(parsed.clone())
}

/// Every variable any case defines: contract expressions may use these, and each case a
/// milestone runs is checked to define the ones its contract actually reads.
fn all_case_vars(r: &LoadedRubric) -> Vec<String> {
    let cases = r
        .rubric
        .cases
        .correctness
        .iter()
        .chain(&r.rubric.cases.performance);
    let set: BTreeSet<String> = cases.flat_map(|c| c.vars.keys().cloned()).collect();
    set.into_iter().collect()
}

fn check_tolerance(
    r: &LoadedRubric,
    at: &str,
    t: &Tolerance,
    known: &[String],
) -> Result<(), ConfigError> {
    if let Some(a) = &t.abs {
        parse_at(r, &format!("{at}.abs"), a, Kind::Real, known)?;
    }
    if let Some(a) = &t.rel {
        parse_at(r, &format!("{at}.rel"), a, Kind::Real, known)?;
    }
    if let Some(a) = &t.sum {
        parse_at(r, &format!("{at}.sum"), a, Kind::Real, known)?;
    }
    Ok(())
}

/// A contract's `cpu:`: a built-in's name, or the course's Python file (beside the rubric)
/// and a function name.
fn check_cpu(
    r: &LoadedRubric,
    at: &str,
    cpu: &crate::rubric::schema::CpuImpl,
) -> Result<(), ConfigError> {
    use crate::rubric::schema::CpuImpl;
    match cpu {
        CpuImpl::Builtin(name) if crate::baseline::lookup(name).is_none() => {
            let known: Vec<&str> = crate::baseline::registry()
                .iter()
                .map(|(n, _)| *n)
                .collect();
            Err(r.error_at(
                at,
                format!(
                    "unknown CPU implementation `{name}` (known: {}; or the course's own: `cpu: {{python: FILE.py, function: NAME}}`)",
                    known.join(", ")
                ),
            ))
        }
        CpuImpl::Builtin(_) => Ok(()),
        CpuImpl::Python(p) => {
            let ident = regex::Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").expect("a valid regex");
            if !ident.is_match(&p.function) {
                return Err(r.error_at(
                    &format!("{at}.function"),
                    format!("`{}` is not a Python function name", p.function),
                ));
            }
            let file = r.path.parent().unwrap_or(Path::new(".")).join(&p.python);
            if !p.python.ends_with(".py") || !file.is_file() {
                return Err(r.error_at(
                    &format!("{at}.python"),
                    format!(
                        "`{}` is not a Python file beside the rubric ({} {}); the path is relative to the rubric's folder",
                        p.python,
                        file.display(),
                        if file.exists() { "is not a .py file" } else { "does not exist" }
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// A generator's expressions, parsed against the case variables `vars`; `gen_at` is the path
/// of the `gen` map.
fn check_gen_exprs(
    r: &LoadedRubric,
    gen_at: &str,
    g: &Gen,
    vars: &[String],
) -> Result<(), ConfigError> {
    let bounds: Vec<(usize, &Expr)> = match g {
        Gen::Uniform(b) | Gen::Normal(b) | Gen::Int(b) => b.iter().enumerate().collect(),
        Gen::Constant(e) => vec![(0, e)],
        Gen::Values(v) if v.is_empty() => {
            return Err(r.error_at(gen_at, "`values` needs at least one value"));
        }
        Gen::Values(_) => vec![],
    };
    let key = match g {
        Gen::Uniform(_) => "uniform",
        Gen::Normal(_) => "normal",
        Gen::Int(_) => "int",
        Gen::Constant(_) => "constant",
        Gen::Values(_) => "values",
    };
    for (j, e) in bounds {
        let path = if matches!(g, Gen::Constant(_)) {
            format!("{gen_at}.{key}")
        } else {
            format!("{gen_at}.{key}[{j}]")
        };
        parse_at(r, &path, e, Kind::Real, vars)?;
    }
    Ok(())
}

/// A case's own generators (`cases.*[i].gen`): each names an input buffer of a contract the
/// case is run on, and draws what that buffer's type holds.
fn check_case_generators(r: &LoadedRubric) -> Result<(), ConfigError> {
    let vars = all_case_vars(r);
    let groups = [
        ("correctness", &r.rubric.cases.correctness),
        ("performance", &r.rubric.cases.performance),
    ];
    for (group, cases) in groups {
        for (i, case) in cases.iter().enumerate() {
            for (name, g) in &case.generators {
                let at = format!("cases.{group}[{i}].gen.{name}");
                let params: Vec<&Param> = r
                    .rubric
                    .contracts
                    .values()
                    .flat_map(|c| c.params.iter())
                    .filter(|p| p.name == *name)
                    .collect();
                let inputs: Vec<&&Param> = params.iter().filter(|p| p.dir.is_input()).collect();
                if inputs.is_empty() {
                    let all: BTreeSet<&str> = r
                        .rubric
                        .contracts
                        .values()
                        .flat_map(|c| c.params.iter())
                        .filter(|p| {
                            p.dir.is_input() && matches!(p.param_type(), Some(ParamType::Buffer(_)))
                        })
                        .map(|p| p.name.as_str())
                        .collect();
                    let what = if params.is_empty() {
                        format!("no contract has a parameter `{name}`")
                    } else {
                        format!(
                            "`{name}` is not an input buffer (only `in` and `inout` buffers are drawn)"
                        )
                    };
                    return Err(r.error_at(
                        &format!("cases.{group}[{i}].gen"),
                        format!(
                            "{what}; a case's `gen` replaces the generator of one of: {}",
                            all.into_iter().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                check_gen_exprs(r, &at, g, &vars)?;
                for p in inputs {
                    if let Some(ParamType::Buffer(elem)) = p.param_type() {
                        numbers::check_gen(r, &at, g, elem)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_contract(r: &LoadedRubric, name: &str, c: &Contract) -> Result<(), ConfigError> {
    let at = format!("contracts.{name}");
    let vars = all_case_vars(r);
    let mut tol_vars = vars.clone();
    tol_vars.extend(tolerance_vars(c));
    if let Some(cpu) = &c.cpu {
        check_cpu(r, &format!("{at}.cpu"), cpu)?;
    }
    let mut seen = BTreeSet::new();
    for (i, p) in c.params.iter().enumerate() {
        let pat = format!("{at}.params[{i}]");
        if !seen.insert(p.name.as_str()) {
            return Err(r.error_at(
                &format!("{pat}.name"),
                format!("duplicate parameter `{}`", p.name),
            ));
        }
        if p.peers && r.rubric.ranks.is_none() {
            return Err(r.error_at(
                &format!("{pat}.peers"),
                "`peers` hands the kernel every rank's copy of a buffer: only a multi-GPU lab (`ranks:`) has ranks",
            ));
        }
        if p.peers && p.symbol {
            return Err(r.error_at(
                &format!("{pat}.peers"),
                "a buffer set by symbol cannot also be a table of every rank's copy",
            ));
        }
        let Some(ty) = p.param_type() else {
            return Err(r.error_at(
                &format!("{pat}.type"),
                format!("unknown type `{}` (use u8, i8, u16, i16, i32, u32, i64, u64, f16, bf16, f32, f64, or a pointer such as `f32*` or `u8*`)", p.ty),
            ));
        };
        match ty {
            ParamType::Buffer(elem) => {
                let Some(len) = &p.len else {
                    return Err(r.error_at(&pat, format!("buffer `{}` needs `len`", p.name)));
                };
                parse_at(r, &format!("{pat}.len"), len, Kind::Int, &vars)?;
                for (j, s) in p.shape.iter().flatten().enumerate() {
                    parse_at(r, &format!("{pat}.shape[{j}]"), s, Kind::Int, &vars)?;
                }
                if p.value.is_some() {
                    return Err(r.error_at(
                        &format!("{pat}.value"),
                        "`value` is for scalars; a buffer gets `gen` or `init`",
                    ));
                }
                match (p.dir, &p.generator) {
                    (Direction::Out, Some(_)) => {
                        return Err(r.error_at(
                            &format!("{pat}.gen"),
                            "an `out` buffer is not generated; use `init` or `dir: inout`",
                        ));
                    }
                    (Direction::Scratch, Some(_)) => {
                        return Err(r.error_at(
                            &format!("{pat}.gen"),
                            "a `scratch` buffer is not generated: it starts zeroed (or at `init`) before every launch; a buffer the kernel reads from the case is `dir: in` or `inout`",
                        ));
                    }
                    (Direction::Scratch, None) if p.tolerance.is_some() => {
                        return Err(r.error_at(
                            &format!("{pat}.tolerance"),
                            "a `scratch` buffer is never compared, so it takes no tolerance; a buffer whose values are graded is `dir: out` or `inout`",
                        ));
                    }
                    (Direction::In | Direction::InOut, None) => {
                        return Err(
                            r.error_at(&pat, format!("input buffer `{}` needs `gen`", p.name))
                        );
                    }
                    _ => {}
                }
                if let Some(g) = &p.generator {
                    check_gen_exprs(r, &format!("{pat}.gen"), g, &vars)?;
                }
                if let Some(s) = &p.specials
                    && !(0.0..=1.0).contains(&s.fraction)
                {
                    return Err(r.error_at(
                        &format!("{pat}.specials.fraction"),
                        "fraction must be between 0 and 1",
                    ));
                }
                if let Some(t) = &p.tolerance {
                    check_tolerance(r, &format!("{pat}.tolerance"), t, &tol_vars)?;
                }
                numbers::check_param(r, &pat, p, elem)?;
            }
            ParamType::Scalar(_) => {
                let Some(v) = &p.value else {
                    return Err(r.error_at(&pat, format!("scalar `{}` needs `value`", p.name)));
                };
                parse_at(r, &format!("{pat}.value"), v, Kind::Real, &vars)?;
                if p.len.is_some() || p.generator.is_some() || p.dir != Direction::In || p.symbol {
                    return Err(r.error_at(
                        &pat,
                        format!("scalar `{}` takes only `name`, `type` and `value`", p.name),
                    ));
                }
            }
        }
    }
    if let Some(ret) = &c.returns {
        return check_function(r, &at, c, ret, &tol_vars);
    }
    let launches = std::iter::once((format!("{at}.launch"), &c.launch)).chain(
        c.then
            .iter()
            .enumerate()
            .map(|(k, l)| (format!("{at}.then[{k}]"), l)),
    );
    for (lat, launch) in launches {
        for (key, list) in [("block", &launch.block), ("grid", &launch.grid)] {
            if list.is_empty() || list.len() > 3 {
                return Err(r.error_at(
                    &format!("{lat}.{key}"),
                    format!("`{key}` takes 1 to 3 entries"),
                ));
            }
            for (j, e) in list.iter().enumerate() {
                parse_at(r, &format!("{lat}.{key}[{j}]"), e, Kind::Int, &vars)?;
            }
        }
        if let Some(s) = &launch.shared_bytes {
            parse_at(r, &format!("{lat}.shared_bytes"), s, Kind::Int, &vars)?;
        }
    }
    check_tolerance(r, &format!("{at}.tolerance"), &c.tolerance, &tol_vars)
}

/// A Python function's contract (`returns:`): it returns one `out` buffer and takes the rest;
/// no launch, no symbols, no built-in CPU implementation (the reference file is the CPU's).
fn check_function(
    r: &LoadedRubric,
    at: &str,
    c: &Contract,
    ret: &str,
    tol_vars: &[String],
) -> Result<(), ConfigError> {
    if !(c.launch.block.is_empty() && c.launch.grid.is_empty() && c.launch.shared_bytes.is_none()) {
        return Err(r.error_at(
            &format!("{at}.launch"),
            "a function contract (`returns:`) has no launch: the function runs its own kernels",
        ));
    }
    if !c.then.is_empty() {
        return Err(r.error_at(
            &format!("{at}.then"),
            "a function contract (`returns:`) has no launches: the function runs its own kernels",
        ));
    }
    if c.cpu.is_some() {
        return Err(r.error_at(
            &format!("{at}.cpu"),
            "a function contract compares with its reference file's own function: drop `cpu`",
        ));
    }
    if !c.params.iter().any(|p| p.name == ret) {
        return Err(r.error_at(
            &format!("{at}.returns"),
            format!("`returns: {ret}` names no parameter of this contract"),
        ));
    }
    for (i, p) in c.params.iter().enumerate() {
        let returned = p.name == ret;
        let out = p.dir != Direction::In;
        if p.symbol || returned != out || (returned && p.dir != Direction::Out) {
            return Err(r.error_at(
                &format!("{at}.params[{i}]"),
                format!(
                    "a function contract's parameters are its table's entries (`dir: in`) and the one `out` buffer it returns (`returns: {ret}`); `{}` is neither",
                    p.name
                ),
            ));
        }
    }
    check_tolerance(r, &format!("{at}.tolerance"), &c.tolerance, tol_vars)
}

/// Variables the contract's expressions read (a case must define all of them).
pub fn contract_variables(c: &Contract) -> BTreeSet<String> {
    let mut exprs: Vec<&Expr> = Vec::new();
    for p in &c.params {
        exprs.extend(p.len.iter());
        exprs.extend(p.value.iter());
        exprs.extend(p.shape.iter().flatten());
        if let Some(Gen::Uniform(b) | Gen::Normal(b) | Gen::Int(b)) = &p.generator {
            exprs.extend(b.iter());
        }
    }
    for l in std::iter::once(&c.launch).chain(&c.then) {
        exprs.extend(l.block.iter().chain(&l.grid));
        exprs.extend(l.shared_bytes.iter());
    }
    exprs
        .into_iter()
        .filter_map(|e| e.parse_as(Kind::Real).ok())
        .flat_map(|e| e.variables())
        .collect()
}

/// A milestone's load-time checks, the first problem found: its contract, its kernels, its
/// correctness cases, then its performance and metric checks.
fn check_milestone(r: &LoadedRubric, at: &str, m: &Milestone) -> Result<(), ConfigError> {
    let Some(contract) = r.rubric.contracts.get(&m.contract) else {
        let known: Vec<&str> = r.rubric.contracts.keys().map(String::as_str).collect();
        return Err(r.error_at(
            &format!("{at}.contract"),
            format!(
                "unknown contract `{}` (defined: {})",
                m.contract,
                known.join(", ")
            ),
        ));
    };
    let check = MilestoneCheck {
        r,
        at,
        m,
        contract,
        needed: contract_variables(contract),
    };
    check.kernels()?;
    check.correctness()?;
    for (i, p) in m.performance.iter().enumerate() {
        check.performance(i, p)?;
    }
    check.metrics()
}

/// A milestone being checked, with its contract and the case variables that contract reads.
struct MilestoneCheck<'a> {
    r: &'a LoadedRubric,
    at: &'a str,
    m: &'a Milestone,
    contract: &'a Contract,
    /// [`contract_variables`] of `contract`: every case the milestone uses defines them.
    needed: BTreeSet<String>,
}

impl MilestoneCheck<'_> {
    /// A variable the contract reads that `case` does not define.
    fn missing_var(&self, case: &Case) -> Option<String> {
        self.needed
            .iter()
            .find(|v| !case.vars.contains_key(*v))
            .cloned()
    }

    /// The kernels: one per launch of the contract, distinct, and no `then` or metrics where
    /// they do not apply.
    fn kernels(&self) -> Result<(), ConfigError> {
        let (r, at, m, contract) = (self.r, self.at, self.m, self.contract);
        if m.then.len() != contract.then.len() {
            let (path, what) = if m.then.is_empty() {
                (format!("{at}.kernel"), "names one kernel".to_string())
            } else {
                (
                    format!("{at}.then"),
                    format!("names {} later kernels in `then`", m.then.len()),
                )
            };
            return Err(r.error_at(
                &path,
                format!(
                    "milestone `{}` {what}, and contract `{}` has {} later launches in its `then`: a multi-kernel milestone names one kernel per launch, the first in `kernel` and the others in `then`",
                    m.id,
                    m.contract,
                    contract.then.len()
                ),
            ));
        }
        if let Some(rt) = &m.reference_then
            && rt.len() != m.then.len()
        {
            return Err(r.error_at(
                &format!("{at}.reference_then"),
                format!(
                    "`reference_then` names {} kernels and `then` {}: one reference kernel per launch",
                    rt.len(),
                    m.then.len()
                ),
            ));
        }
        let mut names = BTreeSet::new();
        for (k, name) in m.kernels().enumerate() {
            if !names.insert(name) {
                let path = if k == 0 {
                    format!("{at}.kernel")
                } else {
                    format!("{at}.then[{}]", k - 1)
                };
                return Err(r.error_at(
                    &path,
                    format!("kernel `{name}` is launched twice in milestone `{}`: a multi-kernel milestone's kernels are distinct entry points", m.id),
                ));
            }
        }
        if !m.then.is_empty() && !m.metrics.is_empty() {
            return Err(r.error_at(
                &format!("{at}.metrics"),
                "metric checks read one kernel's counters: a multi-kernel milestone (`then`) takes none; put the kernel to measure in a milestone of its own",
            ));
        }
        if contract.is_function() && !m.then.is_empty() {
            return Err(r.error_at(
                &format!("{at}.then"),
                "a function lab's milestone is one function: `then` is for kernels",
            ));
        }
        if contract.is_function() && !m.metrics.is_empty() {
            return Err(r.error_at(
                &format!("{at}.metrics"),
                "a function lab has no emulator metrics: they are a kernel's",
            ));
        }
        Ok(())
    }

    /// The correctness cases (every case when the milestone names none) define the contract's
    /// variables; points and tolerance are valid.
    fn correctness(&self) -> Result<(), ConfigError> {
        let (r, at, m) = (self.r, self.at, self.m);
        for (i, name) in m.correctness.cases.iter().enumerate() {
            let Some(case) = r.correctness_case(name) else {
                return Err(r.error_at(
                    &format!("{at}.correctness.cases[{i}]"),
                    unknown_case(name, &r.rubric.cases.correctness),
                ));
            };
            if let Some(v) = self.missing_var(case) {
                return Err(r.error_at(
                    &format!("{at}.correctness.cases[{i}]"),
                    format!(
                        "case `{name}` does not define `{v}`, which contract `{}` uses",
                        m.contract
                    ),
                ));
            }
        }
        if m.correctness.cases.is_empty() {
            for (i, case) in r.rubric.cases.correctness.iter().enumerate() {
                if let Some(v) = self.missing_var(case) {
                    return Err(r.error_at(&format!("cases.correctness[{i}].vars"), format!("case `{}` does not define `{v}`, which contract `{}` (milestone `{}`) uses", case.name, m.contract, m.id)));
                }
            }
        }
        if m.correctness.points < 0.0 {
            return Err(r.error_at(
                &format!("{at}.correctness.points"),
                "points cannot be negative",
            ));
        }
        let mut tol_vars = all_case_vars(r);
        tol_vars.extend(tolerance_vars(self.contract));
        if let Some(t) = &m.correctness.tolerance {
            check_tolerance(r, &format!("{at}.correctness.tolerance"), t, &tol_vars)?;
        }
        Ok(())
    }

    /// Performance check `i`: a known case defining the contract's variables, a bar, and a
    /// baseline the contract and the case can provide.
    fn performance(&self, i: usize, p: &PerfSpec) -> Result<(), ConfigError> {
        let (r, m, contract) = (self.r, self.m, self.contract);
        let pat = format!("{}.performance[{i}]", self.at);
        let Some(case) = r.performance_case(&p.case) else {
            return Err(r.error_at(
                &format!("{pat}.case"),
                unknown_case(&p.case, &r.rubric.cases.performance),
            ));
        };
        if let Some(v) = self.missing_var(case) {
            return Err(r.error_at(
                &format!("{pat}.case"),
                format!(
                    "case `{}` does not define `{v}`, which contract `{}` uses",
                    p.case, m.contract
                ),
            ));
        }
        if p.tiers.is_empty() && p.min.is_none() {
            return Err(r.error_at(&pat, "a performance check needs `min` or `tiers`"));
        }
        match &p.against {
            Against::Cpu if contract.is_function() => {}
            _ if contract.is_function() => {
                return Err(r.error_at(
                    &format!("{pat}.against"),
                    "a function lab's speed compares with `cpu`: its reference file's function",
                ));
            }
            Against::Cpu | Against::CpuParallel if contract.cpu.is_none() => {
                return Err(r.error_at(
                    &format!("{pat}.against"),
                    format!(
                        "contract `{}` has no `cpu` implementation to compare with",
                        m.contract
                    ),
                ));
            }
            Against::Cublas => {
                for v in ["M", "N", "K"] {
                    if !case.vars.contains_key(v) {
                        return Err(r.error_at(
                            &format!("{pat}.against"),
                            format!(
                                "`cublas` needs case variables M, N and K; case `{}` lacks `{v}`",
                                p.case
                            ),
                        ));
                    }
                }
            }
            Against::Nccl if r.rubric.ranks.is_none() => {
                return Err(r.error_at(
                    &format!("{pat}.against"),
                    "`nccl` compares a multi-GPU lab's all-reduce with NCCL's: the rubric needs `ranks:`",
                ));
            }
            Against::CopyBandwidth { bytes } => {
                let vars: Vec<String> = case.vars.keys().cloned().collect();
                parse_at(
                    r,
                    &format!("{pat}.against.copy_bandwidth.bytes"),
                    bytes,
                    Kind::Int,
                    &vars,
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The metric checks: known metrics on known correctness cases, each with a bound.
    fn metrics(&self) -> Result<(), ConfigError> {
        let r = self.r;
        for (i, x) in self.m.metrics.iter().enumerate() {
            let pat = format!("{}.metrics[{i}]", self.at);
            if !crate::backend::Metrics::NAMES.contains(&x.metric.as_str()) {
                return Err(r.error_at(
                    &format!("{pat}.metric"),
                    format!(
                        "unknown metric `{}` (known: {})",
                        x.metric,
                        crate::backend::Metrics::NAMES.join(", ")
                    ),
                ));
            }
            if r.correctness_case(&x.case).is_none() {
                return Err(r.error_at(
                    &format!("{pat}.case"),
                    unknown_case(&x.case, &r.rubric.cases.correctness),
                ));
            }
            if x.min.is_none() && x.max.is_none() {
                return Err(r.error_at(&pat, "a metric check needs `min` or `max`"));
            }
        }
        Ok(())
    }
}

fn unknown_case(name: &str, cases: &[Case]) -> String {
    let known: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    format!("unknown case `{name}` (defined: {})", known.join(", "))
}

/// The case's variables as expression variables.
/// Elements the buffers of `contract` hold for `case`: the measure of a case's size.
pub fn case_elements(contract: &Contract, case: &Case) -> usize {
    let vars = case_vars(case);
    contract
        .params
        .iter()
        .filter(|p| p.len.is_some())
        .filter_map(|p| eval_len(p, &vars).ok())
        .fold(0usize, usize::saturating_add)
}

pub fn case_vars(case: &Case) -> Vars {
    case.vars
        .iter()
        .map(|(k, &v)| (k.clone(), v as f64))
        .collect()
}

/// Evaluate a launch for a case: returns (grid, block, shared) or a message.
pub fn eval_launch(l: &Launch, vars: &Vars) -> Result<crate::backend::LaunchDims, String> {
    let dims = |list: &[Expr], what: &str| -> Result<[u32; 3], String> {
        let mut out = [1u32; 3];
        for (i, e) in list.iter().enumerate().take(3) {
            let v = e.eval_int(vars)?;
            out[i] = u32::try_from(v).ok().filter(|&v| v >= 1).ok_or_else(|| {
                format!(
                    "{what}[{i}] = `{}` evaluates to {v}; it must be at least 1",
                    e.source()
                )
            })?;
        }
        Ok(out)
    };
    let shared = match &l.shared_bytes {
        Some(e) => {
            let v = e.eval_int(vars)?;
            u32::try_from(v)
                .map_err(|_| format!("shared_bytes = `{}` evaluates to {v}", e.source()))?
        }
        None => 0,
    };
    Ok(crate::backend::LaunchDims {
        grid: dims(&l.grid, "grid")?,
        block: dims(&l.block, "block")?,
        shared_bytes: shared,
    })
}

/// Evaluated sizes for a case: map of buffer name to element count.
pub fn eval_len(p: &Param, vars: &Vars) -> Result<usize, String> {
    let e = p
        .len
        .as_ref()
        .ok_or_else(|| format!("`{}` has no len", p.name))?;
    let v = e.eval_int(vars)?;
    usize::try_from(v)
        .map_err(|_| format!("len of `{}` = `{}` evaluates to {v}", p.name, e.source()))
}

/// Helper used by tests and `validate`: all buffers' tolerance-variable names resolve.
pub fn known_names(c: &Contract) -> BTreeMap<String, ParamType> {
    c.params
        .iter()
        .filter_map(|p| p.param_type().map(|t| (p.name.clone(), t)))
        .collect()
}

#[cfg(test)]
mod case_input_tests;
#[cfg(test)]
mod then_tests;

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
assignment: vector-add
reference: ref.cu
contracts:
  add:
    params:
      - { name: a, type: f32*, len: n, gen: { uniform: [-1, 1] } }
      - { name: c, type: f32*, dir: out, len: n }
      - { name: n, type: i32, value: n }
    launch: { block: [256], grid: [\"ceil_div(n, 256)\"] }
cases:
  correctness:
    - { name: small, vars: { n: 1000 } }
milestones:
  - id: vector_add
    kernel: vector_add
    contract: add
    correctness: { points: 10 }
";

    fn load_text(text: &str) -> Result<LoadedRubric, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ref.cu"),
            "extern \"C\" __global__ void vector_add(const float* a, float* c, int n) {}\n\
             // reduce_old is gone\n",
        )
        .unwrap();
        let p = dir.path().join("r.yaml");
        std::fs::write(&p, text).unwrap();
        load(&p).map_err(|e| e.to_string().replace(&format!("{}", p.display()), "r.yaml"))
    }

    #[test]
    fn good_rubric_loads() {
        let r = load_text(GOOD).unwrap();
        assert_eq!(r.max_score(), 10.0);
        let c = r.contract("add");
        let v = case_vars(&r.rubric.cases.correctness[0]);
        let d = eval_launch(&c.launch, &v).unwrap();
        assert_eq!(d.grid, [4, 1, 1]);
        assert_eq!(d.block, [256, 1, 1]);
    }

    #[test]
    fn unknown_key_is_pinned_word_for_word() {
        let text = GOOD.replace("    launch:", "    tolerence: 1\n    launch:");
        assert_eq!(
            load_text(&text).unwrap_err(),
            "error: contracts.add: unknown field `tolerence`, expected one of `params`, `cpu`, `returns`, `launch`, `then`, `tolerance`, `precision`; did you mean `tolerance`?\n \
             --> r.yaml:9:5\n  |\n9 |     tolerence: 1\n  |     ^"
        );
    }

    #[test]
    fn every_independent_mistake_is_reported_at_its_line() {
        let text = GOOD
            .replace("    launch:", "    tolerence: { abs: 0.1 }\n    launch:")
            .replace(
                "reference: ref.cu",
                "reference: ref.cu\ntrials: 1\ntrails: 3",
            )
            .replace(
                "    kernel: vector_add",
                "    kernel: vector_add\n    titel: x",
            )
            .replace("contract: add", "contract: ad");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ref.cu"),
            "extern \"C\" __global__ void vector_add() {}\n",
        )
        .unwrap();
        let p = dir.path().join("r.yaml");
        std::fs::write(&p, &text).unwrap();
        let errors = load_all(&p).unwrap_err();
        let said: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.pos.unwrap().line, e.message))
            .collect();
        let want = [
            ("trials must be at least 2", "trials: 1"),
            ("unknown field `trails`", "trails: 3"),
            ("unknown field `tolerence`", "tolerence: {"),
            ("unknown field `titel`", "titel: x"),
            ("unknown contract `ad`", "contract: ad"),
        ];
        assert_eq!(said.len(), want.len(), "{said:#?}");
        for ((msg, line), got) in want.iter().zip(&errors) {
            assert!(got.message.contains(msg), "{said:#?}");
            let at = text.lines().nth(got.pos.unwrap().line - 1).unwrap();
            assert!(at.contains(line), "{msg} at `{at}`: {said:#?}");
        }
        assert!(said[2].contains("did you mean `tolerance`?"), "{said:#?}");
        assert!(said[3].contains("did you mean `title`?"), "{said:#?}");
    }

    #[test]
    fn wrong_type_is_pinned_word_for_word() {
        let text = GOOD.replace("points: 10", "points: ten");
        assert_eq!(
            load_text(&text).unwrap_err(),
            "error: milestones[0].correctness.points: invalid type: string \"ten\", expected f64\n  \
             --> r.yaml:17:28\n   |\n17 |     correctness: { points: ten }\n   |                            ^"
        );
    }

    #[test]
    fn bad_expression_is_pinned_word_for_word() {
        let text = GOOD.replace("ceil_div(n, 256)", "ceil_div(n, 256");
        let err = load_text(&text).unwrap_err();
        assert!(
            err.starts_with("error: cannot parse `ceil_div(n, 256`: "),
            "{err}"
        );
        assert!(err.ends_with(" --> r.yaml:9:36\n  |\n9 |     launch: { block: [256], grid: [\"ceil_div(n, 256\"] }\n  |                                    ^"), "{err}");
        let text = GOOD.replace("ceil_div(n, 256)", "ceil_div(m, 256)");
        assert_eq!(
            load_text(&text).unwrap_err(),
            "error: unknown variable `m` (known here: n)\n --> r.yaml:9:36\n  |\n9 |     launch: { block: [256], grid: [\"ceil_div(m, 256)\"] }\n  |                                    ^"
        );
    }

    #[test]
    fn dangling_names_point_at_the_reference() {
        let text = GOOD.replace("contract: add", "contract: ad");
        assert_eq!(
            load_text(&text).unwrap_err(),
            "error: unknown contract `ad` (defined: add)\n  --> r.yaml:16:15\n   |\n16 |     contract: ad\n   |               ^"
        );
        let text = GOOD.replace("{ points: 10 }", "{ points: 10, cases: [big] }");
        let e = load_text(&text).unwrap_err();
        assert!(
            e.starts_with("error: unknown case `big` (defined: small)\n  --> r.yaml:17:"),
            "{e}"
        );
        let text = GOOD
            .replace("trials", "x")
            .replace("contracts:", "trials: 1\ncontracts:");
        assert!(
            load_text(&text)
                .unwrap_err()
                .starts_with("error: trials must be at least 2")
        );
    }

    #[test]
    fn syntax_error_has_position() {
        let text = GOOD.replace("  add:", "  add: [");
        let err = load_text(&text).unwrap_err();
        assert!(err.contains("--> r.yaml:"), "{err}");
    }

    #[test]
    fn a_kernel_the_reference_file_lacks_is_an_error_at_its_name() {
        let e = load_text(&GOOD.replace("    kernel: vector_add", "    kernel: reduce_old"))
            .unwrap_err();
        assert!(
            e.contains("kernel `reduce_old` is not in the reference file `ref.cu`")
                && e.contains("r.yaml:15:13"),
            "{e}"
        );
        // With reference_kernel, that line names the reference's kernel.
        let text = GOOD.replace(
            "    contract: add",
            "    reference_kernel: vector_add\n    contract: add",
        );
        assert!(load_text(&text.replace("    kernel: vector_add", "    kernel: mine")).is_ok());
        let e = load_text(&text.replace("reference_kernel: vector_add", "reference_kernel: va"))
            .unwrap_err();
        assert!(
            e.contains("kernel `va`") && e.contains("r.yaml:16:23"),
            "{e}"
        );
    }

    #[test]
    fn non_finite_and_overflowing_numbers_are_refused_at_their_line() {
        for (from, to, want, line) in [
            ("points: 10", "points: .nan", "points must be a number", 17),
            ("points: 10", "points: 1e308", "points must be a number", 17),
            ("points: 10", "points: -.inf", "negative", 17),
            (
                "uniform: [-1, 1]",
                "uniform: [-1e308, 1e308]",
                "outside what a `f32`",
                6,
            ),
            (
                "uniform: [-1, 1]",
                "uniform: [-1, .inf]",
                "not a finite number",
                6,
            ),
            ("uniform: [-1, 1]", "uniform: [1, -1]", "is empty", 6),
            (
                "uniform: [-1, 1]",
                "normal: [0, 1e300]",
                "standard deviation",
                6,
            ),
            (
                "dir: out, len: n }",
                "dir: out, len: n, init: .nan }",
                "init: .nan",
                7,
            ),
            (
                "gen: { uniform: [-1, 1] }",
                "gen: { uniform: [-1, 1] }, specials: { values: [], fraction: 0.5 }",
                "at least one value",
                6,
            ),
        ] {
            let text = GOOD.replace(from, to);
            assert_ne!(text, GOOD, "{from}");
            let e = load_text(&text).unwrap_err();
            assert!(e.contains(want), "{to}: {e}");
            assert!(e.contains(&format!("--> r.yaml:{line}:")), "{to}: {e}");
        }
        // Data may be special on purpose: values and specials take .inf and .nan, init -.inf.
        let text = GOOD
            .replace(
                "gen: { uniform: [-1, 1] }",
                "gen: { values: [.inf, .nan, 1] }, specials: { values: [.nan], fraction: 0.1 }",
            )
            .replace("dir: out, len: n }", "dir: out, len: n, init: -.inf }");
        load_text(&text).unwrap();
        let text = GOOD.replace("n: 1000 }", "n: 9223372036854775807 }");
        let e = load_text(&text).unwrap_err();
        assert!(e.contains("too large") && e.contains("r.yaml:12:33"), "{e}");
        let text = GOOD.replace("contracts:", "trials: 100000\ncontracts:");
        assert!(
            load_text(&text)
                .unwrap_err()
                .contains("trials must be between 2 and 1000")
        );
    }

    #[test]
    fn missing_reference_file_is_an_error() {
        let text = GOOD.replace("ref.cu", "nope.cu");
        assert!(
            load_text(&text)
                .unwrap_err()
                .contains("reference kernel file")
        );
    }
}
