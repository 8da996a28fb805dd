//! Deserialize a rubric reporting every schema mistake serde can get past, not just the first
//! (issue 32: one misspelled key hid every other mistake of the file).
//!
//! serde stops at its first error. For an unknown key (and a value of the wrong type under a
//! key), the key is recorded with its position and a did-you-mean, taken out of the document
//! (a near miss of a key the map lacks is read as that key instead, so that what it holds is
//! checked too: `kernell:` as `kernel:`), and the document deserialized again; this repeats until it deserializes or an error comes
//! that taking a key out cannot get past (a missing required key, a malformed list entry).
//! Positions are those of the original text ([`Locations`] by the error's key path), so every
//! mistake is reported at its own `file:line:column`. A "missing field `x`" that only follows
//! from taking out a key suggested as `x` (or `x` itself, for a wrong type) is not reported
//! again.

use super::bounds;
use super::locate::Locations;
use crate::errors::{ConfigError, Pos};
use serde::de::DeserializeOwned;
use std::path::Path;

/// At most this many mistakes are collected from one file.
const MAX_ROUNDS: usize = 64;

/// One segment of a key path: `a.b[2]` is `Key(a)`, `Key(b)`, `Index(2)`.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn segments(path: &str) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key.to_string()));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            out.push(Seg::Index(r[..end].parse().ok()?));
            rest = &r[end + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// Take the key at `path` out of `doc`, or rename it to `rename` when given and the map has
/// no such key yet: whether it was renamed; `None` when there is no key at `path`.
fn take(doc: &mut serde_yaml::Value, path: &[Seg], rename: Option<&str>) -> Option<bool> {
    let (Seg::Key(last), parents) = path.split_last()? else {
        return None;
    };
    let mut at = doc;
    for seg in parents {
        let next = match (seg, at) {
            (Seg::Key(k), serde_yaml::Value::Mapping(m)) => m.get_mut(k.as_str()),
            (Seg::Index(i), serde_yaml::Value::Sequence(s)) => s.get_mut(*i),
            _ => None,
        };
        at = next?;
    }
    let serde_yaml::Value::Mapping(m) = at else {
        return None;
    };
    let v = m.shift_remove(last.as_str())?;
    match rename.filter(|to| !m.contains_key(*to)) {
        Some(to) => {
            m.insert(serde_yaml::Value::String(to.to_string()), v);
            Some(true)
        }
        None => Some(false),
    }
}

/// serde_yaml's message split into its key path (`contracts.add`, empty at the root) and the
/// rest, without its ` at line L column C`.
fn split(e: &serde_yaml::Error) -> (String, String) {
    let mut msg = e.to_string();
    if let Some(i) = msg.rfind(" at line ") {
        msg.truncate(i);
    }
    // A path is identifiers, dots and [N]; the message after it starts after ": ".
    if let Some((p, rest)) = msg.split_once(": ")
        && !p.is_empty()
        && p.chars()
            .all(|c| c.is_alphanumeric() || "_-.[]".contains(c))
    {
        return (p.to_string(), rest.to_string());
    }
    (String::new(), msg)
}

/// The backticked names after "expected" in serde's message.
fn expected(rest: &str) -> Vec<String> {
    let Some(i) = rest.find("expected") else {
        return vec![];
    };
    rest[i..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Edit distance with transpositions (optimal string alignment): `titel` is one from `title`.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The known name closest to `unknown`, when it is close (a typo, not another word).
pub fn did_you_mean<'a>(unknown: &str, known: &'a [String]) -> Option<&'a str> {
    let limit = (unknown.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (distance(&unknown.to_lowercase(), &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Deserialize `source`, collecting the mistakes serde can be taken past. Returns the value
/// when the document (less the keys taken out) deserializes, and every mistake found, in
/// file order.
pub fn parse_all<T: DeserializeOwned>(path: &Path, source: &str) -> (Option<T>, Vec<ConfigError>) {
    if let Err(e) = bounds::check(path, source, &bounds::RUBRIC) {
        return (None, vec![e]);
    }
    let positioned = |e: &serde_yaml::Error| {
        e.location().map(|l| Pos {
            line: l.line(),
            col: l.column(),
        })
    };
    // The original text first: its errors have exact positions.
    let first = match serde_yaml::from_str::<T>(source) {
        Ok(v) => return (Some(v), vec![]),
        Err(e) => e,
    };
    let mut doc: serde_yaml::Value = match serde_yaml::from_str(source) {
        Ok(d) => d,
        // Not even YAML: the syntax error, once.
        Err(_) => {
            let (p, rest) = split(&first);
            let msg = if p.is_empty() {
                rest
            } else {
                format!("{p}: {rest}")
            };
            return (
                None,
                vec![ConfigError::new(path, positioned(&first), msg, source)],
            );
        }
    };
    let locations = Locations::of(source);
    let mut errors: Vec<ConfigError> = Vec::new();
    // (parent path, field) that a later "missing field" would only repeat.
    let mut taken: Vec<(String, String)> = Vec::new();
    // Keys read as another (`kernell` as `kernel`): (path as read, path in the file).
    let mut renamed: Vec<(String, String)> = Vec::new();
    let in_file = |p: &str, renamed: &[(String, String)]| -> String {
        for (read, file) in renamed {
            if p == read {
                return file.clone();
            }
            if let Some(rest) = p.strip_prefix(read.as_str())
                && (rest.starts_with('.') || rest.starts_with('['))
            {
                return format!("{file}{rest}");
            }
        }
        p.to_string()
    };
    let mut err = first;
    let mut round = 0;
    let value = loop {
        let (p, rest) = split(&err);
        let exact = if round == 0 { positioned(&err) } else { None };
        let missing = rest
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next());
        if let Some(field) = missing
            && taken.iter().any(|(tp, tf)| *tp == p && tf == field)
        {
            break None;
        }
        // The key to take out; the key its absence would be reported as missing; and, for a
        // near miss of a key, that key's name.
        let (key_path, stands_for, rename) = match rest
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            Some(field) => {
                let mut message = if p.is_empty() {
                    rest.clone()
                } else {
                    format!("{p}: {rest}")
                };
                let known = expected(&rest);
                let suggestion = did_you_mean(field, &known).map(str::to_string);
                if let Some(s) = &suggestion {
                    message.push_str(&format!("; did you mean `{s}`?"));
                }
                let at = exact.or_else(|| locations.key(&in_file(&join(&p, field), &renamed)));
                errors.push(ConfigError::new(path, at, message, source));
                let stands_for = suggestion.clone().map(|s| (p.clone(), s));
                (join(&p, field), stands_for, suggestion)
            }
            None => {
                let message = if p.is_empty() {
                    rest.clone()
                } else {
                    format!("{p}: {rest}")
                };
                let at = exact.or_else(|| locations.value(&in_file(&p, &renamed)));
                errors.push(ConfigError::new(path, at, message, source));
                // A wrong value under a key: take the key out (its default, if any, stands in).
                let parent_field = match p.rsplit_once('.') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => (String::new(), p.clone()),
                };
                (p.clone(), Some(parent_field), None)
            }
        };
        let Some(segs) = segments(&key_path) else {
            break None;
        };
        // A near miss of a key the map lacks reads as that key (`kernell:` as `kernel:`), so
        // that what it holds is checked too; anything else is left out.
        if key_path.is_empty() {
            break None;
        }
        let Some(was_renamed) = take(&mut doc, &segs, rename.as_deref()) else {
            break None;
        };
        if let Some(t) = stands_for {
            taken.push(t);
        }
        if let Some(to) = rename.as_ref().filter(|_| was_renamed) {
            let read = join(key_path.rsplit_once('.').map_or("", |(a, _)| a), to);
            renamed.push((read, in_file(&key_path, &renamed)));
        }
        round += 1;
        if round >= MAX_ROUNDS {
            break None;
        }
        let text = match serde_yaml::to_string(&doc) {
            Ok(t) => t,
            Err(_) => break None,
        };
        match serde_yaml::from_str::<T>(&text) {
            Ok(v) => break Some(v),
            Err(e) => err = e,
        }
    };
    errors.sort_by_key(|e| e.pos.map(|p| (p.line, p.col)));
    errors.dedup();
    (value, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(
            segments("milestones[1].performance[0].min"),
            Some(vec![
                Seg::Key("milestones".into()),
                Seg::Index(1),
                Seg::Key("performance".into()),
                Seg::Index(0),
                Seg::Key("min".into())
            ])
        );
        assert_eq!(segments("a[x]"), None);
    }

    #[test]
    fn suggestions_are_for_typos_only() {
        let known: Vec<String> = ["tolerance", "params", "cpu"].map(String::from).to_vec();
        assert_eq!(did_you_mean("tolerence", &known), Some("tolerance"));
        assert_eq!(did_you_mean("cpuu", &known), Some("cpu"));
        assert_eq!(did_you_mean("banana", &known), None);
        let known: Vec<String> = ["title", "trials"].map(String::from).to_vec();
        assert_eq!(did_you_mean("titel", &known), Some("title"));
        assert_eq!(did_you_mean("trails", &known), Some("trials"));
    }
}
