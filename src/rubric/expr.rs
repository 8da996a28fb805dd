//! Size expressions: launch dimensions, buffer lengths, scalar values and tolerances.
//!
//! Parsing and evaluation are evalexpr's. What this module adds is the language's limits:
//! integer expressions may use `+ - * / %`, parentheses, `min`, `max`, `ceil_div` and the
//! case's variables (SPEC.md); tolerance expressions may also use reals, `sqrt`, `log2`,
//! `abs`, `^`, and the data-derived variables the checker provides (`eps`, `<buf>_abs_sum`).

use evalexpr::{
    ContextWithMutableFunctions, ContextWithMutableVariables, DefaultNumericTypes, Function,
    HashMapContext, Node, Value,
};
use std::collections::BTreeMap;

/// Variables in scope: the case's size variables (and, for tolerances, data statistics).
pub type Vars = BTreeMap<String, f64>;

/// Which flavour of expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Must evaluate to an integer; integer operations only.
    Int,
    /// May be real.
    Real,
}

const INT_FUNCS: &[&str] = &["min", "max", "ceil_div"];

/// Longest expression accepted, in bytes. Real launch and tolerance expressions are a few
/// dozen; the bound keeps a hostile manifest from handing evalexpr (whose parser and evaluator
/// recurse) anything that could exhaust a grading thread's stack.
pub const MAX_LEN: usize = 1024;
/// Deepest nesting of parentheses.
pub const MAX_DEPTH: usize = 32;
/// Most operators, commas and parentheses in one expression: a chain `1+1+...` or `- - -x`
/// parses into a tree as deep as it is long.
pub const MAX_OPERATORS: usize = 128;

/// `source` as messages quote it: whole when short, else its start and an ellipsis.
pub fn excerpt(source: &str) -> String {
    const SHOWN: usize = 60;
    if source.chars().count() <= SHOWN {
        source.to_string()
    } else {
        let head: String = source.chars().take(SHOWN).collect();
        format!("{head}…")
    }
}

/// The bounds above, checked on the text before any parsing.
fn check_bounds(source: &str) -> Result<(), String> {
    if source.len() > MAX_LEN {
        return Err(format!(
            "the expression is {} bytes long; at most {MAX_LEN} are allowed",
            source.len()
        ));
    }
    let (mut depth, mut deepest, mut operators) = (0usize, 0usize, 0usize);
    for c in source.chars() {
        match c {
            '(' => {
                depth += 1;
                deepest = deepest.max(depth);
                operators += 1;
            }
            ')' => depth = depth.saturating_sub(1),
            '+' | '-' | '*' | '/' | '%' | '^' | ',' => operators += 1,
            _ => {}
        }
    }
    if deepest > MAX_DEPTH {
        return Err(format!(
            "parentheses nest {deepest} deep; at most {MAX_DEPTH} levels are allowed"
        ));
    }
    if operators > MAX_OPERATORS {
        return Err(format!(
            "the expression has {operators} operators and parentheses; at most {MAX_OPERATORS} \
             are allowed"
        ));
    }
    Ok(())
}
const REAL_FUNCS: &[&str] = &[
    "min", "max", "ceil_div", "sqrt", "log2", "abs", "floor", "ceil",
];

/// A parsed expression, checked against the language's limits.
#[derive(Debug, Clone)]
pub struct Expression {
    source: String,
    tree: Node<DefaultNumericTypes>,
    kind: Kind,
}

impl Expression {
    /// Parse `source`; the error says what is wrong in terms a rubric author can act on.
    pub fn parse(source: &str, kind: Kind) -> Result<Expression, String> {
        if source.trim().is_empty() {
            return Err("empty expression".into());
        }
        let allowed_punct: &[char] = match kind {
            Kind::Int => &['+', '-', '*', '/', '%', '(', ')', ',', ' ', '_'],
            Kind::Real => &['+', '-', '*', '/', '%', '(', ')', ',', ' ', '_', '.', '^'],
        };
        if let Some(c) = source
            .chars()
            .find(|c| !c.is_ascii_alphanumeric() && !allowed_punct.contains(c))
        {
            return Err(format!(
                "`{c}` is not allowed in {} expressions",
                kind_name(kind)
            ));
        }
        check_bounds(source)?;
        // evalexpr is third-party code fed text a student wrote: a panic in it must stay an
        // error of that student, never take the grading thread down.
        let built = std::panic::catch_unwind(|| {
            evalexpr::build_operator_tree::<DefaultNumericTypes>(source)
        })
        .map_err(|_| format!("cannot parse `{}`", excerpt(source)))?;
        let tree = built.map_err(|e| format!("cannot parse `{}`: {e}", excerpt(source)))?;
        let funcs = match kind {
            Kind::Int => INT_FUNCS,
            Kind::Real => REAL_FUNCS,
        };
        for f in tree.iter_function_identifiers() {
            if !funcs.contains(&f) {
                return Err(format!(
                    "unknown function `{f}` (allowed: {})",
                    funcs.join(", ")
                ));
            }
        }
        Ok(Expression {
            source: source.to_string(),
            tree,
            kind,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Variables the expression reads.
    pub fn variables(&self) -> Vec<String> {
        self.tree
            .iter_variable_identifiers()
            .map(str::to_string)
            .collect()
    }

    /// Check every variable is in `known`; the error lists what is known.
    pub fn check_vars<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<(), String> {
        for v in self.variables() {
            if !known.clone().into_iter().any(|k| k == v) {
                let mut names: Vec<&str> = known.clone().into_iter().collect();
                names.sort_unstable();
                names.dedup();
                return Err(format!(
                    "unknown variable `{v}` (known here: {})",
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Evaluate to an integer (Kind::Int expressions).
    pub fn eval_int(&self, vars: &Vars) -> Result<i64, String> {
        match self.eval(vars)? {
            Value::Int(i) => Ok(i),
            Value::Float(f) if self.kind == Kind::Real && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Ok(f as i64)
            }
            other => Err(format!(
                "`{}` gave {other}, not an integer",
                excerpt(&self.source)
            )),
        }
    }

    /// Evaluate to a real number.
    pub fn eval_f64(&self, vars: &Vars) -> Result<f64, String> {
        match self.eval(vars)? {
            Value::Int(i) => Ok(i as f64),
            Value::Float(f) => Ok(f),
            other => Err(format!(
                "`{}` gave {other}, not a number",
                excerpt(&self.source)
            )),
        }
    }

    fn eval(&self, vars: &Vars) -> Result<Value<DefaultNumericTypes>, String> {
        let mut ctx = HashMapContext::<DefaultNumericTypes>::new();
        for (k, &v) in vars {
            let value = if self.kind == Kind::Int || (v.fract() == 0.0 && v.abs() < 9.0e15) {
                Value::Int(v as i64)
            } else {
                Value::Float(v)
            };
            ctx.set_value(k.clone(), value).map_err(|e| e.to_string())?;
        }
        install_functions(&mut ctx);
        let source = excerpt(&self.source);
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.tree.eval_with_context(&ctx)
        }))
        .map_err(|_| format!("cannot evaluate `{source}`"))?;
        value.map_err(|e| {
            let msg = e.to_string();
            let arithmetic = [
                "Error adding",
                "Error subtracting",
                "Error negating",
                "Error multiplying",
                "Error dividing",
                "Error modulating",
            ];
            if (msg.starts_with("Error dividing") || msg.starts_with("Error modulating"))
                && (msg.ends_with(" 0") || msg.ends_with(" 0.0"))
                || msg.to_lowercase().contains("division by zero")
            {
                format!("`{source}` divides by zero")
            } else if msg.contains("overflow") || arithmetic.iter().any(|a| msg.starts_with(a)) {
                format!("`{source}` overflows")
            } else {
                format!("cannot evaluate `{source}`: {msg}")
            }
        })
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Int => "integer",
        Kind::Real => "tolerance",
    }
}

fn as_f64(
    v: &Value<DefaultNumericTypes>,
) -> Result<f64, evalexpr::EvalexprError<DefaultNumericTypes>> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(f) => Ok(*f),
        other => Err(evalexpr::EvalexprError::expected_number(other.clone())),
    }
}

fn install_functions(ctx: &mut HashMapContext<DefaultNumericTypes>) {
    let ceil_div = Function::new(|arg: &Value<DefaultNumericTypes>| {
        let t = arg.as_fixed_len_tuple(2)?;
        match (&t[0], &t[1]) {
            (Value::Int(a), Value::Int(b)) => {
                if *b == 0 {
                    Err(evalexpr::EvalexprError::DivisionError {
                        dividend: t[0].clone(),
                        divisor: t[1].clone(),
                    })
                } else {
                    // `i64::MIN / -1` overflows: an error, not a panic.
                    a.checked_div_euclid(*b)
                        .zip(a.checked_rem_euclid(*b))
                        .and_then(|(q, r)| q.checked_add(i64::from(r != 0)))
                        .map(Value::Int)
                        .ok_or_else(|| {
                            evalexpr::EvalexprError::CustomMessage("ceil_div overflow".into())
                        })
                }
            }
            _ => Ok(Value::Float((as_f64(&t[0])? / as_f64(&t[1])?).ceil())),
        }
    });
    let real = |f: fn(f64) -> f64| {
        Function::new(move |arg: &Value<DefaultNumericTypes>| Ok(Value::Float(f(as_f64(arg)?))))
    };
    // Names are fixed and valid, so these cannot fail.
    let _ = ctx.set_function("ceil_div".into(), ceil_div);
    let _ = ctx.set_function("sqrt".into(), real(f64::sqrt));
    let _ = ctx.set_function("log2".into(), real(f64::log2));
    let _ = ctx.set_function("abs".into(), real(f64::abs));
    let _ = ctx.set_function("floor".into(), real(f64::floor));
    let _ = ctx.set_function("ceil".into(), real(f64::ceil));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, f64)]) -> Vars {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn integer_launch_expressions() {
        let e = Expression::parse("ceil_div(n, 256)", Kind::Int).unwrap();
        assert_eq!(e.eval_int(&vars(&[("n", 1000003.0)])).unwrap(), 3907);
        assert_eq!(e.eval_int(&vars(&[("n", 256.0)])).unwrap(), 1);
        let e = Expression::parse("min(N, 16) * 16 * 4 + K % 3", Kind::Int).unwrap();
        assert_eq!(
            e.eval_int(&vars(&[("N", 5.0), ("K", 7.0)])).unwrap(),
            5 * 64 + 1
        );
        assert_eq!(e.variables().len(), 2);
    }

    #[test]
    fn rejects_what_the_language_lacks() {
        assert!(
            Expression::parse("n = 3", Kind::Int)
                .unwrap_err()
                .contains("`=` is not allowed")
        );
        assert!(
            Expression::parse("sqrt(n)", Kind::Int)
                .unwrap_err()
                .contains("unknown function `sqrt`")
        );
        assert!(
            Expression::parse("ceil_div(n, ", Kind::Int)
                .unwrap_err()
                .contains("cannot parse")
        );
        let e = Expression::parse("n / 0", Kind::Int).unwrap();
        assert!(
            e.eval_int(&vars(&[("n", 1.0)]))
                .unwrap_err()
                .contains("divides by zero")
        );
        let e = Expression::parse("nn + 1", Kind::Int).unwrap();
        assert_eq!(
            e.check_vars(["n", "m"]).unwrap_err(),
            "unknown variable `nn` (known here: m, n)"
        );
    }

    #[test]
    fn real_tolerances() {
        let e = Expression::parse("4 * eps * sqrt(n) * in_abs_sum", Kind::Real).unwrap();
        let v = e
            .eval_f64(&vars(&[
                ("eps", 2f64.powi(-24)),
                ("n", 16.0),
                ("in_abs_sum", 8.5),
            ]))
            .unwrap();
        assert!((v - 4.0 * 2f64.powi(-24) * 4.0 * 8.5).abs() < 1e-18);
        let e = Expression::parse("1e-5", Kind::Real).unwrap();
        assert_eq!(e.eval_f64(&Vars::new()).unwrap(), 1e-5);
    }

    #[test]
    fn hostile_expressions_are_errors_not_crashes() {
        // 10,000 nested parentheses: refused before evalexpr sees them.
        let deep = format!("{}n{}", "(".repeat(10_000), ")".repeat(10_000));
        let e = Expression::parse(&deep, Kind::Int).unwrap_err();
        assert!(e.contains("at most 1024"), "{e}");
        let deep = format!("{}n{}", "(".repeat(40), ")".repeat(40));
        let e = Expression::parse(&deep, Kind::Int).unwrap_err();
        assert!(e.contains("nest 40 deep"), "{e}");
        let chain = vec!["n"; 200].join("+");
        let e = Expression::parse(&chain, Kind::Int).unwrap_err();
        assert!(e.contains("at most 128"), "{e}");
        // Overflow is an error, never a panic.
        let v = vars(&[("n", 1.0)]);
        for src in [
            "ceil_div(-9223372036854775807 - 1, -1)",
            "(-9223372036854775807 - 1) / -1",
            "(-9223372036854775807 - 1) % -1",
            "9223372036854775807 * 2",
            "9223372036854775807 + n",
            "-(-9223372036854775807 - 1)",
        ] {
            let e = Expression::parse(src, Kind::Int).unwrap();
            let err = e.eval_int(&v).unwrap_err();
            assert!(err.ends_with("overflows"), "{src}: {err}");
        }
        // Messages quote a long expression by its start only.
        let long = format!("ceil_div(n, {}", "1 + ".repeat(60));
        let e = Expression::parse(&long, Kind::Int).unwrap_err();
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn the_deepest_expressions_allowed_fit_a_small_stack() {
        // The worst shapes within the bounds: nested parentheses, a long left-deep chain, a
        // run of unary minus; parsed, evaluated and dropped on a 256 KiB stack.
        let shapes = [
            format!("{}n{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH)),
            vec!["n"; MAX_OPERATORS + 1].join("-"),
            format!("{}n", "-".repeat(MAX_OPERATORS)),
            format!(
                "{}n{}",
                "ceil_div(".repeat(MAX_DEPTH),
                ", 2)".repeat(MAX_DEPTH)
            ),
        ];
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                for s in &shapes {
                    if let Ok(e) = Expression::parse(s, Kind::Int) {
                        let _ = e.eval_int(&vars(&[("n", 3.0)]));
                    }
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn random_text_never_panics() {
        // A cheap fuzz over the characters the language admits: every input is Ok or Err.
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "0123456789n_ab+-*/%(),. ^e".chars().collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let v = vars(&[("n", 7.0), ("a", -3.0), ("b", 0.0)]);
        for _ in 0..50_000 {
            let len = rng.random_range(1..24);
            let s: String = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            for kind in [Kind::Int, Kind::Real] {
                if let Ok(e) = Expression::parse(&s, kind) {
                    let _ = e.eval_int(&v);
                    let _ = e.eval_f64(&v);
                }
            }
        }
    }
}
