//! What `cugrade grade` says while it works: on a terminal, a progress bar with the ETA and
//! the failures so far (indicatif); in CI logs and pipes, one plain line per student with the
//! same counts, since a redrawn bar turns into noise there.

use crate::result::{GradeResult, Status};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<ProgressBar>,
    state: Mutex<State>,
    total: usize,
    started: Instant,
}

#[derive(Default)]
struct State {
    done: usize,
    failing: usize,
}

/// A bar only where someone watches it redraw: stderr is a terminal, `TERM` is not `dumb`
/// and no CI system says it runs us.
pub fn wants_bar() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os("CI").is_none()
        && !std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

/// `1h 02m`, `3m 05s`, `42s`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress {
    pub fn new(total: usize, bar: bool) -> Progress {
        let bar = bar.then(|| {
            let b = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} grading [{elapsed}] {wide_bar} {pos}/{len} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.set_message("0 failing");
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Progress {
            bar,
            state: Mutex::new(State::default()),
            total,
            started: Instant::now(),
        }
    }

    /// One student is done.
    pub fn graded(&self, r: &GradeResult, reused: bool) {
        // As grades.csv says it: a correct result whose speed was not measured is a pass.
        let status = crate::report::describe::shown_overall(r);
        let (done, failing) = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.done += 1;
            if matches!(status, Status::Fail | Status::Error) {
                s.failing += 1;
            }
            (s.done, s.failing)
        };
        let line = format!(
            "{} {}: {}/{} ({})",
            if reused {
                "reused (--resume)"
            } else {
                "graded"
            },
            crate::report::sanitize::one_line(r.key()),
            r.score,
            r.max_score,
            status.as_str()
        );
        match &self.bar {
            Some(bar) => {
                bar.set_message(format!("{failing} failing"));
                bar.inc(1);
                if matches!(status, Status::Fail | Status::Error) {
                    bar.println(line);
                }
            }
            None => {
                let eta = if done < self.total {
                    let per = self.started.elapsed() / done as u32;
                    format!(", ETA {}", duration(per * (self.total - done) as u32))
                } else {
                    String::new()
                };
                eprintln!(
                    "{line} [{done}/{}, {failing} failing so far{eta}]",
                    self.total
                );
            }
        }
    }

    /// A line about the run as a whole (above the bar, or on stderr).
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(Duration::from_secs(42)), "42s");
        assert_eq!(duration(Duration::from_secs(185)), "3m 05s");
        assert_eq!(duration(Duration::from_secs(3720)), "1h 02m");
    }
}
