//! Device printf: `vprintf`'s format string and argument buffer, read as the C library would,
//! into the launch's output (capped at [`super::PRINTF_CAP`]).

use super::BlockRunner;
use super::lanes::le;
use super::memory::resolve_generic;
use crate::backend::emu::decode::*;
use crate::backend::emu::parse::Space;

impl BlockRunner<'_, '_> {
    pub(super) fn vprintf(&mut self, wi: usize, inst: &Inst, mask: u32) {
        let fp = self.ctx.prog.fparam_bytes as usize;
        lanes!(mask, l, {
            let w = &self.warps[wi];
            let slot = |o: usize| -> u64 {
                let s = l * fp + o;
                w.fparam.get(s..s + 8).map(le).unwrap_or(0)
            };
            let fmt_ptr = slot(inst.off as usize);
            let args_ptr = slot(inst.aux as usize);
            let fmt = self.read_cstr(fmt_ptr);
            let text = self.format_printf(wi, l, &fmt, args_ptr);
            let bytes = text.as_bytes();
            if self.printf_room > 0 {
                let n = bytes.len().min(self.printf_room);
                self.out.printf.extend_from_slice(&bytes[..n]);
                self.printf_room -= n;
                if self.printf_room == 0 {
                    self.out.printf.extend_from_slice(b"\n[output truncated]\n");
                }
            }
            if inst.d != NOREG {
                let d = l * fp + inst.d as usize;
                let w = &mut self.warps[wi];
                if let Some(s) = w.fparam.get_mut(d..d + 4) {
                    s.copy_from_slice(&(bytes.len() as u32).to_le_bytes());
                }
            }
        });
    }

    fn arg_read(&mut self, wi: usize, lane: usize, addr: u64, size: u32) -> u64 {
        let (space, off) = resolve_generic(addr);
        if space == Space::Local {
            let lb = self.ctx.kernel.local_bytes as usize;
            let o = off as usize;
            if o + size as usize <= lb {
                let base = lane * lb + o;
                return le(&self.warps[wi].local[base..base + size as usize]);
            }
            return 0;
        }
        self.generic_read(addr, size).unwrap_or(0)
    }

    fn format_printf(&mut self, wi: usize, lane: usize, fmt: &str, args: u64) -> String {
        let mut out = String::new();
        let mut pos = 0u64;
        let mut it = fmt.chars().peekable();
        while let Some(ch) = it.next() {
            if ch != '%' {
                out.push(ch);
                continue;
            }
            let mut spec = String::from("%");
            let mut conv = None;
            for c in it.by_ref() {
                spec.push(c);
                if c.is_ascii_alphabetic() && !matches!(c, 'l' | 'h' | 'z' | 'j' | 't' | 'L')
                    || c == '%'
                {
                    conv = Some(c);
                    break;
                }
            }
            let Some(conv) = conv else {
                out.push_str(&spec);
                break;
            };
            if conv == '%' {
                out.push('%');
                continue;
            }
            let long = spec.contains('l') || spec.contains('z') || spec.contains('j');
            let size = match conv {
                'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' | 's' | 'p' => 8,
                _ if long => 8,
                _ => 4,
            };
            pos = pos.next_multiple_of(size as u64);
            let raw = self.arg_read(wi, lane, args + pos, size);
            pos += size as u64;
            let s = if conv == 's' {
                let s = self.read_cstr(raw);
                cfmt::format_str(&spec, &s)
            } else {
                cfmt::format_one(&spec, conv, raw, size)
            };
            out.push_str(&s);
        }
        out
    }
}

/// C printf conversions for device printf.
mod cfmt {
    struct Spec {
        left: bool,
        plus: bool,
        space: bool,
        zero: bool,
        alt: bool,
        width: usize,
        prec: Option<usize>,
    }

    fn parse(spec: &str) -> Spec {
        let b = spec.as_bytes();
        let mut i = 1;
        let mut s = Spec {
            left: false,
            plus: false,
            space: false,
            zero: false,
            alt: false,
            width: 0,
            prec: None,
        };
        while i < b.len() {
            match b[i] {
                b'-' => s.left = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'0' => s.zero = true,
                b'#' => s.alt = true,
                _ => break,
            }
            i += 1;
        }
        while i < b.len() && b[i].is_ascii_digit() {
            s.width = (s.width * 10 + (b[i] - b'0') as usize).min(4096);
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let mut p = 0;
            while i < b.len() && b[i].is_ascii_digit() {
                p = (p * 10 + (b[i] - b'0') as usize).min(4096);
                i += 1;
            }
            s.prec = Some(p);
        }
        s
    }

    fn pad(s: &Spec, body: String, numeric: bool) -> String {
        if body.len() >= s.width {
            return body;
        }
        let n = s.width - body.len();
        if s.left {
            format!("{body}{}", " ".repeat(n))
        } else if s.zero && numeric {
            let (sign, rest) = if body.starts_with(['-', '+', ' ']) {
                body.split_at(1)
            } else {
                ("", body.as_str())
            };
            format!("{sign}{}{rest}", "0".repeat(n))
        } else {
            format!("{}{body}", " ".repeat(n))
        }
    }

    fn sign(s: &Spec, neg: bool) -> &'static str {
        if neg {
            "-"
        } else if s.plus {
            "+"
        } else if s.space {
            " "
        } else {
            ""
        }
    }

    fn exp_form(x: f64, prec: usize, upper: bool) -> String {
        let t = format!("{:.*e}", prec, x);
        let (m, e) = t.split_once('e').unwrap_or((&t, "0"));
        let ev: i32 = e.parse().unwrap_or(0);
        let s = format!("{m}e{}{:02}", if ev < 0 { '-' } else { '+' }, ev.abs());
        if upper { s.to_uppercase() } else { s }
    }

    pub fn format_str(spec: &str, v: &str) -> String {
        let s = parse(spec);
        let v: String = match s.prec {
            Some(p) => v.chars().take(p).collect(),
            None => v.to_string(),
        };
        pad(&s, v, false)
    }

    pub fn format_one(spec: &str, conv: char, raw: u64, size: u32) -> String {
        let s = parse(spec);
        let body = match conv {
            'd' | 'i' => {
                let v = if size == 8 {
                    raw as i64
                } else {
                    raw as u32 as i32 as i64
                };
                let mut digits = v.unsigned_abs().to_string();
                if let Some(p) = s.prec {
                    while digits.len() < p {
                        digits.insert(0, '0');
                    }
                }
                format!("{}{digits}", sign(&s, v < 0))
            }
            'u' | 'x' | 'X' | 'o' => {
                let v = if size == 8 { raw } else { raw as u32 as u64 };
                let mut d = match conv {
                    'u' => v.to_string(),
                    'x' => format!("{v:x}"),
                    'X' => format!("{v:X}"),
                    _ => format!("{v:o}"),
                };
                if let Some(p) = s.prec {
                    while d.len() < p {
                        d.insert(0, '0');
                    }
                }
                if s.alt && v != 0 {
                    d = match conv {
                        'x' => format!("0x{d}"),
                        'X' => format!("0X{d}"),
                        'o' => format!("0{d}"),
                        _ => d,
                    };
                }
                d
            }
            'c' => ((raw as u8) as char).to_string(),
            'p' => format!("0x{raw:x}"),
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' => {
                let x = f64::from_bits(raw);
                let neg = x.is_sign_negative() && !x.is_nan();
                let a = x.abs();
                let p = s.prec.unwrap_or(6);
                let upper = conv.is_ascii_uppercase();
                let body = if a.is_nan() {
                    "nan".to_string()
                } else if a.is_infinite() {
                    "inf".to_string()
                } else {
                    match conv.to_ascii_lowercase() {
                        'f' => format!("{a:.p$}"),
                        'e' => exp_form(a, p, false),
                        'a' => format!("{a:e}"),
                        _ => {
                            let p = if p == 0 { 1 } else { p };
                            let e = if a == 0.0 {
                                0
                            } else {
                                a.log10().floor() as i32
                            };
                            let mut t = if e < -4 || e >= p as i32 {
                                exp_form(a, p - 1, false)
                            } else {
                                format!("{a:.*}", (p as i32 - 1 - e).max(0) as usize)
                            };
                            if !s.alt {
                                if let Some((m, ex)) = t.clone().split_once('e') {
                                    let m = if m.contains('.') {
                                        m.trim_end_matches('0').trim_end_matches('.')
                                    } else {
                                        m
                                    };
                                    t = format!("{m}e{ex}");
                                } else if t.contains('.') {
                                    t = t.trim_end_matches('0').trim_end_matches('.').to_string();
                                }
                            }
                            t
                        }
                    }
                };
                let body = if upper { body.to_uppercase() } else { body };
                format!("{}{body}", sign(&s, neg))
            }
            _ => spec.to_string(),
        };
        pad(&s, body, !matches!(conv, 'c' | 'p'))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn c_formats() {
            assert_eq!(super::format_one("%d", 'd', (-5i32) as u32 as u64, 4), "-5");
            assert_eq!(
                super::format_one("%5.2f", 'f', 3.25159f64.to_bits(), 8),
                " 3.25"
            );
            assert_eq!(
                super::format_one("%g", 'g', 0.0001f64.to_bits(), 8),
                "0.0001"
            );
            assert_eq!(super::format_one("%g", 'g', 1e20f64.to_bits(), 8), "1e+20");
            assert_eq!(
                super::format_one("%e", 'e', 12345.0f64.to_bits(), 8),
                "1.234500e+04"
            );
            assert_eq!(super::format_one("%04x", 'x', 0xab, 4), "00ab");
            assert_eq!(super::format_one("%-3d", 'd', 7, 4), "7  ");
            assert_eq!(super::format_str("%.2s", "hello"), "he");
        }
    }
}
