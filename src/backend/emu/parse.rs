//! PTX module syntax: directives, variables, functions and instruction statements, as
//! written. `decode` turns this into the compact form the interpreter runs.

use super::lex::{Tok, Token, tokenize};
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    Local,
    Const,
    Param,
}

#[derive(Debug, Clone)]
pub struct VarDecl {
    pub space: Space,
    pub align: u32,
    /// Element type name without the dot (`b8`, `f32`, `u64`).
    pub ty: String,
    pub vec: u32,
    pub name: String,
    /// `None`: scalar; `Some(None)`: unsized array (`extern .shared smem[]`).
    pub array: Option<Option<u64>>,
    pub init: Vec<Init>,
    pub line: u32,
}

impl VarDecl {
    pub fn elem_size(&self) -> u32 {
        type_size(&self.ty).unwrap_or(1) * self.vec.max(1)
    }
    pub fn size(&self) -> u64 {
        let n = match self.array {
            None => 1,
            Some(Some(n)) => n,
            Some(None) => 0,
        };
        n * self.elem_size() as u64
    }
}

#[derive(Debug, Clone)]
pub enum Init {
    Int(i128),
    F32(u32),
    F64(u64),
    /// Address of another global (`generic(sym)` or `sym`).
    Sym(String),
}

#[derive(Debug, Clone)]
pub struct Func {
    pub name: String,
    pub is_entry: bool,
    pub params: Vec<VarDecl>,
    pub rets: Vec<VarDecl>,
    /// `None` for a prototype (`.extern .func vprintf(...)`).
    pub body: Option<Vec<Stmt>>,
}

#[derive(Debug, Clone)]
pub enum Stmt {
    Reg {
        ty: String,
        names: Vec<(String, Option<u32>)>,
    },
    Var(VarDecl),
    Label(String),
    Loc {
        file: u32,
        line: u32,
    },
    Inst(InstAst),
}

#[derive(Debug, Clone)]
pub struct InstAst {
    /// Guard predicate register and whether it is negated (`@!%p`).
    pub guard: Option<(String, bool)>,
    pub opcode: String,
    pub operands: Vec<Operand>,
    pub line: u32,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// Register, special register, label, symbol or function name.
    Name(String),
    /// `!%p` as an operand (setp/selp combine).
    NotName(String),
    Int(i128),
    F32(u32),
    F64(u64),
    Vec(Vec<Operand>),
    /// `[base+off]` (base may be absent for an absolute address).
    Addr {
        base: Option<String>,
        off: i64,
    },
    /// `%r|%p` (shfl/setp two destinations).
    Pair(String, String),
    /// `sym+4` as an immediate.
    SymOff(String, i64),
    /// `(a, b)` argument lists of `call`.
    List(Vec<String>),
}

#[derive(Debug, Default)]
pub struct Module {
    pub globals: Vec<VarDecl>,
    pub funcs: Vec<Func>,
    pub files: HashMap<u32, String>,
    pub address_size: u32,
}

pub fn type_size(ty: &str) -> Option<u32> {
    Some(match ty {
        "b8" | "u8" | "s8" | "pred" => 1,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 2,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" => 4,
        "b64" | "u64" | "s64" | "f64" => 8,
        "b128" => 16,
        _ => return None,
    })
}

struct P<'a> {
    t: Vec<Token<'a>>,
    i: usize,
    src: &'a str,
}

type R<T> = Result<T, String>;

impl<'a> P<'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.t.get(self.i)
    }
    fn peek_tok(&self) -> Option<Tok> {
        self.peek().map(|t| t.tok)
    }
    fn line(&self) -> u32 {
        self.peek().or(self.t.last()).map(|t| t.line).unwrap_or(1)
    }
    fn err<T>(&self, msg: impl std::fmt::Display) -> R<T> {
        Err(format!("PTX line {}: {msg}", self.line()))
    }
    fn next(&mut self) -> R<Token<'a>> {
        match self.t.get(self.i) {
            Some(t) => {
                self.i += 1;
                Ok(*t)
            }
            None => self.err("unexpected end of PTX"),
        }
    }
    fn eat(&mut self, tok: Tok) -> bool {
        if self.peek_tok() == Some(tok) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, tok: Tok, what: &str) -> R<Token<'a>> {
        match self.peek() {
            Some(t) if t.tok == tok => self.next(),
            Some(t) => {
                let t = t.text.to_string();
                self.err(format!("expected {what}, found `{t}`"))
            }
            None => self.err(format!("expected {what}, found end of PTX")),
        }
    }
    fn is_dir(&self, d: &str) -> bool {
        matches!(self.peek(), Some(t) if t.tok == Tok::Directive && t.text == d)
    }
    fn int(&mut self) -> R<i128> {
        let neg = self.eat(Tok::Minus);
        let t = self.next()?;
        let v = parse_int(t.text)
            .ok_or_else(|| format!("PTX line {}: bad integer `{}`", t.line, t.text))?;
        Ok(if neg { -v } else { v })
    }
    /// Skip to just past the next `;` (or stop before a `{`).
    fn skip_stmt(&mut self) -> R<()> {
        while let Some(t) = self.peek() {
            match t.tok {
                Tok::Semi => {
                    self.i += 1;
                    return Ok(());
                }
                Tok::LBrace => return Ok(()),
                _ => self.i += 1,
            }
        }
        Ok(())
    }
    fn skip_braces(&mut self) -> R<()> {
        self.expect(Tok::LBrace, "`{`")?;
        let mut depth = 1;
        while depth > 0 {
            match self.next()?.tok {
                Tok::LBrace => depth += 1,
                Tok::RBrace => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }
}

pub fn parse_int(s: &str) -> Option<i128> {
    let s = s.trim_end_matches(['u', 'U']);
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        i128::from_str_radix(b, 2).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        i128::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

pub fn parse_module(src: &str) -> R<Module> {
    let t = tokenize(src)?;
    let mut p = P { t, i: 0, src };
    let mut m = Module {
        address_size: 64,
        ..Default::default()
    };
    while let Some(tok) = p.peek().copied() {
        match (tok.tok, tok.text) {
            (Tok::Directive, ".version") => {
                p.next()?;
                p.next()?;
            }
            (Tok::Directive, ".target") => {
                p.next()?;
                p.next()?;
                while p.eat(Tok::Comma) {
                    p.next()?;
                }
            }
            (Tok::Directive, ".address_size") => {
                p.next()?;
                let n = p.int()?;
                if n != 64 {
                    return p.err(".address_size 32 is not supported (only 64-bit PTX)");
                }
                m.address_size = 64;
            }
            (Tok::Directive, ".file") => {
                p.next()?;
                let n = p.int()? as u32;
                let s = p.expect(Tok::Str, "file name")?;
                m.files.insert(n, unquote(s.text));
                while p.eat(Tok::Comma) {
                    p.next()?;
                }
            }
            (Tok::Directive, ".section") => {
                p.next()?;
                p.next()?;
                p.skip_braces()?;
            }
            (Tok::Directive, ".pragma") => p.skip_stmt()?,
            (Tok::Directive, ".visible" | ".extern" | ".weak" | ".common")
            | (Tok::Directive, ".entry" | ".func" | ".global" | ".const" | ".shared")
            | (Tok::Directive, ".local") => {
                while p.is_dir(".visible")
                    || p.is_dir(".extern")
                    || p.is_dir(".weak")
                    || p.is_dir(".common")
                {
                    p.next()?;
                }
                if p.is_dir(".entry") || p.is_dir(".func") {
                    let f = parse_func(&mut p)?;
                    m.funcs.push(f);
                } else {
                    let v = parse_var(&mut p)?;
                    p.expect(Tok::Semi, "`;`")?;
                    m.globals.push(v);
                }
            }
            _ => {
                return p.err(format!(
                    "unsupported module-level directive or token `{}`",
                    tok.text
                ));
            }
        }
    }
    Ok(m)
}

fn unquote(s: &str) -> String {
    s.trim_matches('"').to_string()
}

/// `.space [.align N] [.vN] .type name[N] [= init]` (without the trailing `;`).
fn parse_var(p: &mut P) -> R<VarDecl> {
    let line = p.line();
    let sp = p.next()?;
    let space = match sp.text {
        ".global" => Space::Global,
        ".shared" => Space::Shared,
        ".local" => Space::Local,
        ".const" => Space::Const,
        ".param" => Space::Param,
        o => {
            return Err(format!(
                "PTX line {}: unsupported state space `{o}`",
                sp.line
            ));
        }
    };
    let mut align = 0;
    let mut vec = 1;
    let mut ty = None;
    loop {
        let t = p.peek().copied();
        match t {
            Some(t) if t.tok == Tok::Directive => {
                p.next()?;
                match t.text {
                    ".align" => align = p.int()? as u32,
                    ".v2" => vec = 2,
                    ".v4" => vec = 4,
                    ".v8" => vec = 8,
                    ".ptr" | ".volatile" | ".global" | ".shared" | ".const" | ".local" => {}
                    d => {
                        let name = &d[1..];
                        if type_size(name).is_none() {
                            return Err(format!(
                                "PTX line {}: unsupported variable attribute `{d}`",
                                t.line
                            ));
                        }
                        ty = Some(name.to_string());
                    }
                }
            }
            _ => break,
        }
    }
    let ty = match ty {
        Some(t) => t,
        None => return p.err("variable declaration without a type"),
    };
    let name = p.expect(Tok::Ident, "variable name")?.text.to_string();
    let mut array = None;
    if p.eat(Tok::LBracket) {
        if p.eat(Tok::RBracket) {
            array = Some(None);
        } else {
            let n = p.int()?;
            p.expect(Tok::RBracket, "`]`")?;
            array = Some(Some(n as u64));
        }
        // Multi-dimensional arrays flatten.
        while p.eat(Tok::LBracket) {
            let n = p.int()?;
            p.expect(Tok::RBracket, "`]`")?;
            if let Some(Some(m)) = array {
                array = Some(Some(m * n as u64));
            }
        }
    }
    let mut init = Vec::new();
    if p.eat(Tok::Eq) {
        parse_init(p, &mut init)?;
    }
    if align == 0 {
        align = type_size(&ty).unwrap_or(1) * vec;
    }
    Ok(VarDecl {
        space,
        align,
        ty,
        vec,
        name,
        array,
        init,
        line,
    })
}

fn parse_init(p: &mut P, out: &mut Vec<Init>) -> R<()> {
    if p.eat(Tok::LBrace) {
        loop {
            if p.eat(Tok::RBrace) {
                break;
            }
            parse_init(p, out)?;
            p.eat(Tok::Comma);
        }
        return Ok(());
    }
    let t = p.peek().copied().ok_or("unexpected end of initializer")?;
    match t.tok {
        Tok::F32Hex => {
            p.next()?;
            out.push(Init::F32(
                u32::from_str_radix(&t.text[2..], 16).unwrap_or(0),
            ));
        }
        Tok::F64Hex => {
            p.next()?;
            out.push(Init::F64(
                u64::from_str_radix(&t.text[2..], 16).unwrap_or(0),
            ));
        }
        Tok::DecFloat => {
            p.next()?;
            out.push(Init::F64(t.text.parse::<f64>().unwrap_or(0.0).to_bits()));
        }
        Tok::Ident => {
            p.next()?;
            if t.text == "generic" {
                p.expect(Tok::LParen, "`(`")?;
                let s = p.expect(Tok::Ident, "symbol")?.text.to_string();
                p.expect(Tok::RParen, "`)`")?;
                out.push(Init::Sym(s));
            } else {
                out.push(Init::Sym(t.text.to_string()));
            }
        }
        _ => out.push(Init::Int(p.int()?)),
    }
    Ok(())
}

fn parse_params(p: &mut P) -> R<Vec<VarDecl>> {
    let mut v = Vec::new();
    p.expect(Tok::LParen, "`(`")?;
    if p.eat(Tok::RParen) {
        return Ok(v);
    }
    loop {
        if p.is_dir(".reg") {
            // `.reg` parameters of .func behave like .param scalars for us.
            p.next()?;
            p.t[p.i - 1].text = ".param";
            p.i -= 1;
        }
        v.push(parse_var(p)?);
        if p.eat(Tok::RParen) {
            break;
        }
        p.expect(Tok::Comma, "`,` or `)`")?;
    }
    Ok(v)
}

fn parse_func(p: &mut P) -> R<Func> {
    let is_entry = p.next()?.text == ".entry";
    let mut rets = Vec::new();
    if !is_entry && p.peek_tok() == Some(Tok::LParen) {
        rets = parse_params(p)?;
    }
    let name = p.expect(Tok::Ident, "function name")?.text.to_string();
    let params = if p.peek_tok() == Some(Tok::LParen) {
        parse_params(p)?
    } else {
        Vec::new()
    };
    // Performance directives (.maxntid 256, 1, 1 / .noreturn / ...) until the body or `;`.
    while let Some(t) = p.peek() {
        match t.tok {
            Tok::LBrace | Tok::Semi => break,
            _ => p.i += 1,
        }
    }
    let body = if p.eat(Tok::Semi) {
        None
    } else {
        Some(parse_body(p)?)
    };
    Ok(Func {
        name,
        is_entry,
        params,
        rets,
        body,
    })
}

fn parse_body(p: &mut P) -> R<Vec<Stmt>> {
    p.expect(Tok::LBrace, "`{`")?;
    let mut out = Vec::new();
    let mut depth = 1;
    loop {
        let t = p.next()?;
        match (t.tok, t.text) {
            (Tok::RBrace, _) => {
                depth -= 1;
                if depth == 0 {
                    return Ok(out);
                }
            }
            (Tok::LBrace, _) => depth += 1,
            (Tok::Directive, ".reg") => {
                let mut ty = None;
                while p.peek_tok() == Some(Tok::Directive) {
                    let d = p.next()?.text;
                    if d != ".v2" && d != ".v4" && d != ".align" {
                        ty = Some(d[1..].to_string());
                    }
                }
                let ty = ty.ok_or_else(|| format!("PTX line {}: .reg without a type", t.line))?;
                let mut names = Vec::new();
                loop {
                    let n = p.expect(Tok::Ident, "register name")?.text.to_string();
                    let mut count = None;
                    if p.eat(Tok::Lt) {
                        count = Some(p.int()? as u32);
                        p.expect(Tok::Gt, "`>`")?;
                    }
                    names.push((n, count));
                    if !p.eat(Tok::Comma) {
                        break;
                    }
                }
                p.expect(Tok::Semi, "`;`")?;
                out.push(Stmt::Reg { ty, names });
            }
            (Tok::Directive, ".shared" | ".local" | ".const" | ".global" | ".param") => {
                p.i -= 1;
                let v = parse_var(p)?;
                p.expect(Tok::Semi, "`;`")?;
                out.push(Stmt::Var(v));
            }
            (Tok::Directive, ".extern") => {
                let v = parse_var(p)?;
                p.expect(Tok::Semi, "`;`")?;
                out.push(Stmt::Var(v));
            }
            (Tok::Directive, ".loc") => {
                let file = p.int()? as u32;
                let line = p.int()? as u32;
                let _col = p.int()?;
                // `, function_name $L__info_stringN, inlined_at F L C`
                while p.peek_tok() == Some(Tok::Comma) {
                    p.next()?;
                    let key = p.next()?.text;
                    if key == "inlined_at" {
                        p.int()?;
                        p.int()?;
                        p.int()?;
                    } else {
                        p.next()?;
                    }
                }
                out.push(Stmt::Loc { file, line });
            }
            (Tok::Directive, ".pragma") => p.skip_stmt()?,
            (Tok::Directive, d) => {
                return Err(format!(
                    "PTX line {}: unsupported directive `{d}` in a function body",
                    t.line
                ));
            }
            (Tok::Ident, name) if p.peek_tok() == Some(Tok::Colon) => {
                p.next()?;
                out.push(Stmt::Label(name.to_string()));
            }
            (Tok::Ident | Tok::At, _) => {
                p.i -= 1;
                out.push(Stmt::Inst(parse_inst(p)?));
            }
            (_, x) => {
                return Err(format!(
                    "PTX line {}: unexpected `{x}` in a function body",
                    t.line
                ));
            }
        }
    }
}

fn parse_inst(p: &mut P) -> R<InstAst> {
    let first = *p.peek().ok_or("end of PTX")?;
    let mut guard = None;
    if p.eat(Tok::At) {
        let neg = p.eat(Tok::Bang);
        let r = p.expect(Tok::Ident, "guard predicate")?.text.to_string();
        guard = Some((r, neg));
    }
    let op = p.expect(Tok::Ident, "instruction")?;
    let mut operands = Vec::new();
    let mut operand_list = || -> R<()> {
        if !p.eat(Tok::Semi) {
            loop {
                operands.push(parse_operand(p)?);
                if p.eat(Tok::Semi) {
                    break;
                }
                p.expect(Tok::Comma, "`,` or `;`")?;
            }
        }
        Ok(())
    };
    if let Err(e) = operand_list() {
        return Err(format!(
            "{e} (in the operands of `{}`; unsupported instruction?)",
            op.text
        ));
    }
    let end = p.t[p.i - 1].end;
    let text = p.src[first.start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Ok(InstAst {
        guard,
        opcode: op.text.to_string(),
        operands,
        line: op.line,
        text,
    })
}

fn parse_operand(p: &mut P) -> R<Operand> {
    let t = *p.peek().ok_or("end of PTX")?;
    match t.tok {
        Tok::LBrace => {
            p.next()?;
            let mut v = Vec::new();
            loop {
                v.push(parse_operand(p)?);
                if p.eat(Tok::RBrace) {
                    break;
                }
                p.expect(Tok::Comma, "`,` or `}`")?;
            }
            Ok(Operand::Vec(v))
        }
        Tok::LParen => {
            p.next()?;
            let mut v = Vec::new();
            if !p.eat(Tok::RParen) {
                loop {
                    v.push(p.expect(Tok::Ident, "argument")?.text.to_string());
                    if p.eat(Tok::RParen) {
                        break;
                    }
                    p.expect(Tok::Comma, "`,` or `)`")?;
                }
            }
            Ok(Operand::List(v))
        }
        Tok::LBracket => {
            p.next()?;
            let mut base = None;
            let mut off = 0i64;
            if p.peek_tok() == Some(Tok::Ident) {
                base = Some(p.next()?.text.to_string());
                // `+4`, `+-4` and `-4` all parse through `int`, which takes the sign.
                if p.eat(Tok::Plus) || p.peek_tok() == Some(Tok::Minus) {
                    off = p.int()? as i64;
                }
            } else {
                off = p.int()? as i64;
            }
            p.expect(Tok::RBracket, "`]`")?;
            Ok(Operand::Addr { base, off })
        }
        Tok::Bang => {
            p.next()?;
            Ok(Operand::NotName(
                p.expect(Tok::Ident, "predicate")?.text.to_string(),
            ))
        }
        Tok::Ident => {
            p.next()?;
            let n = t.text.to_string();
            if p.eat(Tok::Pipe) {
                let q = p.expect(Tok::Ident, "predicate")?.text.to_string();
                return Ok(Operand::Pair(n, q));
            }
            // `sym+4` as an immediate address operand.
            if p.peek_tok() == Some(Tok::Plus) {
                p.next()?;
                let off = p.int()? as i64;
                return Ok(Operand::SymOff(n, off));
            }
            Ok(Operand::Name(n))
        }
        Tok::F32Hex => {
            p.next()?;
            Ok(Operand::F32(
                u32::from_str_radix(&t.text[2..], 16).unwrap_or(0),
            ))
        }
        Tok::F64Hex => {
            p.next()?;
            Ok(Operand::F64(
                u64::from_str_radix(&t.text[2..], 16).unwrap_or(0),
            ))
        }
        Tok::DecFloat => {
            p.next()?;
            Ok(Operand::F64(t.text.parse::<f64>().unwrap_or(0.0).to_bits()))
        }
        Tok::Minus if matches!(p.t.get(p.i + 1).map(|t| t.tok), Some(Tok::DecFloat)) => {
            p.next()?;
            let f = p.next()?;
            Ok(Operand::F64(
                (-f.text.parse::<f64>().unwrap_or(0.0)).to_bits(),
            ))
        }
        _ => Ok(Operand::Int(p.int()?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"
.version 8.0
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 $str[3] = {104, 105, 0};
.const .align 4 .b8 filt[36];
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1) .maxntid 256, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<5>;
	.extern .shared .align 16 .b8 smem[];
	.loc	1 3 5
	ld.param.u64 	%rd1, [k_param_0];
	@!%p1 bra 	$L__BB0_2;
	shfl.sync.down.b32 	%r3|%p2, %r1, 16, 31, -1;
	ld.global.v2.f32 {%f1, %f2}, [%rd1+-8];
$L__BB0_2:
	ret;
}
.file 1 "k.cu"
"#;

    #[test]
    fn parses_module_shapes() {
        let m = parse_module(SRC).unwrap();
        assert_eq!(m.files[&1], "k.cu");
        assert_eq!(m.globals.len(), 2);
        assert_eq!(m.globals[0].size(), 3);
        assert_eq!(m.funcs.len(), 2);
        assert!(m.funcs[0].body.is_none());
        let k = &m.funcs[1];
        assert!(k.is_entry);
        assert_eq!(k.params.len(), 2);
        let body = k.body.as_ref().unwrap();
        let insts: Vec<&InstAst> = body
            .iter()
            .filter_map(|s| if let Stmt::Inst(i) = s { Some(i) } else { None })
            .collect();
        assert_eq!(insts[1].guard, Some(("%p1".into(), true)));
        assert_eq!(
            insts[2].operands[0],
            Operand::Pair("%r3".into(), "%p2".into())
        );
        assert_eq!(insts[2].operands[4], Operand::Int(-1));
        assert_eq!(
            insts[3].operands[1],
            Operand::Addr {
                base: Some("%rd1".into()),
                off: -8
            }
        );
        assert_eq!(insts[3].line, 17);
        assert!(
            body.iter()
                .any(|s| matches!(s, Stmt::Var(v) if v.array == Some(None) && v.align == 16))
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_module(".version 8.0\n.target sm_90\n.bogus 3\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
    }
}
