//! Where each value of a YAML file sits, by key path.
//!
//! serde_yaml reports positions for syntax errors, unknown keys and wrong types, but the
//! checks that run after deserializing (expressions, names that refer to other entries) only
//! know the key path of what is wrong, e.g. `milestones[1].correctness.cases[0]`. This module
//! walks the same text with a marked event parser and records the position of every node.

use crate::errors::Pos;
use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Positions of every node, by key path (`a.b[2].c`); the root is `""`.
#[derive(Debug, Default, Clone)]
pub struct Locations {
    values: HashMap<String, Pos>,
    keys: HashMap<String, Pos>,
}

impl Locations {
    /// Parse `source`; an unparsable file yields no locations (serde_yaml reports the syntax).
    pub fn of(source: &str) -> Locations {
        let mut rec = Recorder::default();
        let mut parser = Parser::new_from_str(source);
        if parser.load(&mut rec, false).is_err() {
            return Locations::default();
        }
        rec.locs
    }

    /// Position of the value at `path`, or of its nearest ancestor that has one.
    pub fn value(&self, path: &str) -> Option<Pos> {
        let mut p = path.to_string();
        loop {
            if let Some(pos) = self.values.get(&p) {
                return Some(*pos);
            }
            match p.rfind(['.', '[']) {
                Some(i) => p.truncate(i),
                None if !p.is_empty() => p.clear(),
                None => return None,
            }
        }
    }

    /// Position of the key that introduces `path` (falls back to the value).
    pub fn key(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied().or_else(|| self.value(path))
    }
}

enum Frame {
    Map {
        path: String,
        pending_key: Option<(String, Pos)>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    locs: Locations,
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Recorder {
    /// The path the next value node will have; for a map awaiting a key, `None`.
    fn next_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some(p)
            }
            Some(Frame::Map { path, pending_key }) => {
                pending_key.take().map(|(k, _)| join(path, &k))
            }
        }
    }

    fn node(&mut self, pos: Pos) -> Option<String> {
        // A scalar in a map with no pending key is a key.
        let path = self.next_path()?;
        self.locs.values.insert(path.clone(), pos);
        Some(path)
    }
}

fn pos_of(m: Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = pos_of(mark);
        match ev {
            Event::Scalar(value, ..) => {
                let awaiting_key = matches!(
                    self.stack.last(),
                    Some(Frame::Map {
                        pending_key: None,
                        ..
                    })
                );
                if awaiting_key {
                    if let Some(Frame::Map { path, pending_key }) = self.stack.last_mut() {
                        self.locs.keys.insert(join(path, &value), pos);
                        *pending_key = Some((value, pos));
                    }
                } else {
                    self.node(pos);
                }
            }
            Event::Alias(_) => {
                self.node(pos);
            }
            Event::MappingStart(..) => {
                let path = self.node(pos).unwrap_or_default();
                self.stack.push(Frame::Map {
                    path,
                    pending_key: None,
                });
            }
            Event::SequenceStart(..) => {
                let path = self.node(pos).unwrap_or_default();
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_values_and_keys() {
        let src = "a: 1\nlist:\n  - x: foo\n    y: [1, \"two\"]\n  - bar\n";
        let l = Locations::of(src);
        assert_eq!(l.value("a"), Some(Pos { line: 1, col: 4 }));
        assert_eq!(l.key("list[0].y"), Some(Pos { line: 4, col: 5 }));
        assert_eq!(l.value("list[0].y[1]"), Some(Pos { line: 4, col: 12 }));
        assert_eq!(l.value("list[1]"), Some(Pos { line: 5, col: 5 }));
        // Unknown leaf falls back to its parent.
        assert_eq!(l.value("list[0].x.nope"), Some(Pos { line: 3, col: 8 }));
    }
}
