//! Making hostile text safe to put in a report.
//!
//! Check messages and details carry text the student controls: device `printf` output, kernel
//! names, compile logs, the `student:` field of a manifest. Every report writes that text into a
//! format with its own syntax (XML, Markdown, a terminal, GitHub workflow commands), so every
//! string passes through here first. ANSI escape sequences are parsed with `vte` (the parser
//! behind Alacritty) and dropped; other control characters are kept visible as `\x1b`-style
//! escapes so a student can still see that their kernel printed a NUL.

use std::borrow::Cow;

/// Longest text put in one XML element or Markdown block; beyond this a report gets too big to
/// open, and the first part is what explains a failure.
pub const DETAILS_CAP: usize = 64 * 1024;
/// Longest one-line text (messages, names, attribute values).
pub const LINE_CAP: usize = 4 * 1024;

/// Text with ANSI escape sequences removed and every other control character made visible,
/// except tab and newline. CR LF becomes LF and a lone CR becomes LF, so output that redraws a
/// line cannot hide what came before it. Unicode bidirectional overrides are made visible too
/// (they can make a terminal or a rendered page show text in another order than it is).
pub fn plain_text(s: &str) -> String {
    let normalized = s.replace("\r\n", "\n");
    let mut out = Visible(String::with_capacity(normalized.len()));
    vte::Parser::new().advance(&mut out, normalized.as_bytes());
    out.0
}

/// [`plain_text`] on one line: newlines and tabs become spaces, runs of spaces collapse, and the
/// result is capped at [`LINE_CAP`] bytes.
pub fn one_line(s: &str) -> String {
    let text = plain_text(s);
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&joined, LINE_CAP).replace('\n', " ")
}

/// Text safe to hand to `junit-report` for an attribute, element text or CDATA section, capped
/// at [`DETAILS_CAP`] bytes.
///
/// Beyond [`plain_text`]: `]]>` becomes `]] >`. `junit-report` writes `system-out` and failure
/// bodies as raw CDATA, where `]]>` would end the section early; the space is the same in every
/// XML context, so this stays correct whichever way the crate writes a field. Chars XML 1.0
/// forbids (C0 controls but tab/LF/CR, U+FFFE, U+FFFF) never survive [`plain_text`]; lone
/// surrogates cannot occur in a Rust `&str` (output bytes are decoded lossily before this).
pub fn xml_text(s: &str) -> String {
    xml_text_capped(s, DETAILS_CAP)
}

/// [`xml_text`] with a cap of `max_bytes` instead of [`DETAILS_CAP`].
pub fn xml_text_capped(s: &str, max_bytes: usize) -> String {
    let text = plain_text(s);
    let capped = truncate(&text, max_bytes);
    // Truncation happens first so the marker it appends is covered too, and so a `]]>` split
    // by the cut cannot reappear.
    capped.replace("]]>", "]] >")
}

/// [`xml_text`] for an attribute value: one line, capped at [`LINE_CAP`].
pub fn xml_attr(s: &str) -> String {
    one_line(s).replace("]]>", "]] >")
}

/// `s` cut to at most `max_bytes` (on a char boundary) plus a marker saying how much was cut.
pub fn truncate(s: &str, max_bytes: usize) -> Cow<'_, str> {
    if s.len() <= max_bytes {
        return Cow::Borrowed(s);
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}\n… [truncated: {} more bytes]",
        &s[..end],
        s.len() - end
    ))
}

/// A `vte` performer that keeps printable text and makes controls visible.
struct Visible(String);

impl Visible {
    fn push_escaped(&mut self, c: char) {
        let code = u32::from(c);
        if code < 0x80 {
            self.0.push_str(&format!("\\x{code:02x}"));
        } else {
            self.0.push_str(&format!("\\u{{{code:04x}}}"));
        }
    }
}

impl vte::Perform for Visible {
    fn print(&mut self, c: char) {
        match c {
            '\u{7f}' | '\u{fffe}' | '\u{ffff}' => self.push_escaped(c),
            // Bidi embeddings, overrides and isolates ("Trojan Source").
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => self.push_escaped(c),
            _ => self.0.push(c),
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | b'\r' => self.0.push('\n'),
            b'\t' => self.0.push('\t'),
            // vte hands C1 controls (U+0080..U+009F) here as their low byte.
            _ => self.push_escaped(char::from(byte)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xml_1_0_char(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
    }

    #[test]
    fn ansi_colour_and_cursor_sequences_are_removed() {
        let s = "\x1b[31;1mred\x1b[0m \x1b]0;title\x07after \x1b[2Kline";
        assert_eq!(plain_text(s), "red after line");
    }

    #[test]
    fn controls_stay_visible_but_tab_and_newline_are_kept() {
        assert_eq!(
            plain_text("a\0b\x07c\td\ne\x7f"),
            "a\\x00b\\x07c\td\ne\\x7f"
        );
        assert_eq!(plain_text("x\u{85}y\u{9b}z"), "x\\u{0085}y\\u{009b}z");
    }

    #[test]
    fn carriage_returns_cannot_overwrite_a_line() {
        assert_eq!(plain_text("FAIL\rPASS\r\nok"), "FAIL\nPASS\nok");
    }

    #[test]
    fn bidi_overrides_are_made_visible() {
        assert_eq!(plain_text("a\u{202e}b\u{2066}"), "a\\u{202e}b\\u{2066}");
    }

    #[test]
    fn xml_text_only_yields_xml_chars_and_no_cdata_end() {
        let mut hostile = String::new();
        for b in 0u8..=0x7f {
            hostile.push(char::from(b));
        }
        hostile.push_str("]]>\u{fffe}\u{ffff}\u{85}]]]]>>");
        let out = xml_text(&hostile);
        assert!(out.chars().all(xml_1_0_char), "{out:?}");
        assert!(!out.contains("]]>"), "{out:?}");
    }

    #[test]
    fn truncation_respects_char_boundaries_and_says_so() {
        let s = "é".repeat(10);
        let t = truncate(&s, 5);
        assert!(t.starts_with("éé\n"));
        assert!(t.ends_with("[truncated: 16 more bytes]"));
        assert_eq!(truncate("short", 5), "short");
    }

    #[test]
    fn one_line_joins_lines_and_caps() {
        assert_eq!(one_line("a\n  b\tc\r\n"), "a b c");
        assert!(one_line(&"x".repeat(LINE_CAP * 2)).len() < LINE_CAP + 64);
    }
}
