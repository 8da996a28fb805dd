//! PTX tokens. Opcodes keep their dotted modifiers in one token (`ld.global.v4.f32`) so the
//! parser splits them once; directives (`.reg`) are their own tokens.

use logos::Logos;

#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
#[logos(skip r"[ \t\r\f]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
#[logos(skip r"/\*([^*]|\*+[^*/])*\*+/")]
pub enum Tok {
    #[token("\n")]
    Newline,
    #[regex(r"\.[a-zA-Z_][a-zA-Z0-9_]*")]
    Directive,
    #[regex(r"[%$a-zA-Z_][a-zA-Z0-9_$]*(\.[a-zA-Z0-9_]+)*")]
    Ident,
    #[regex(r"0[fF][0-9a-fA-F]{8}")]
    F32Hex,
    #[regex(r"0[dD][0-9a-fA-F]{16}")]
    F64Hex,
    #[regex(r"0[xX][0-9a-fA-F]+[uU]?")]
    HexInt,
    #[regex(r"0[bB][01]+[uU]?")]
    BinInt,
    #[regex(r"[0-9]+[uU]?")]
    DecInt,
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?")]
    DecFloat,
    #[regex(r#""([^"\\\n]|\\.)*""#)]
    Str,
    #[token(",")]
    Comma,
    #[token(";")]
    Semi,
    #[token(":")]
    Colon,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("@")]
    At,
    #[token("!")]
    Bang,
    #[token("|")]
    Pipe,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("=")]
    Eq,
}

/// A token with its text and 1-based PTX line.
#[derive(Debug, Clone, Copy)]
pub struct Token<'a> {
    pub tok: Tok,
    pub text: &'a str,
    pub line: u32,
    pub start: usize,
    pub end: usize,
}

/// Tokenize, dropping newlines (lines are kept on each token). An unknown character is an
/// error naming its line.
pub fn tokenize(src: &str) -> Result<Vec<Token<'_>>, String> {
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut lex = Tok::lexer(src);
    while let Some(t) = lex.next() {
        let span = lex.span();
        let text = lex.slice();
        match t {
            Ok(Tok::Newline) => line += 1,
            Ok(tok) => {
                out.push(Token {
                    tok,
                    text,
                    line,
                    start: span.start,
                    end: span.end,
                });
                // Block comments and strings may span lines.
                line += text.matches('\n').count() as u32;
            }
            Err(()) => {
                return Err(format!(
                    "PTX line {line}: unexpected character(s) `{}`",
                    text.escape_debug()
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_is_one_token_and_lines_count() {
        let t = tokenize("ld.global.v4.f32 {%f1,%f2}, [%rd1+-4];\n@!%p1 bra $L__BB0_2;").unwrap();
        assert_eq!(t[0].tok, Tok::Ident);
        assert_eq!(t[0].text, "ld.global.v4.f32");
        let minus = t.iter().position(|x| x.tok == Tok::Minus).unwrap();
        assert_eq!(t[minus - 1].tok, Tok::Plus);
        let bra = t.iter().find(|x| x.text == "bra").unwrap();
        assert_eq!(bra.line, 2);
        assert!(tokenize("mov.u32 %r1, #3;").is_err());
    }

    #[test]
    fn float_literals() {
        let t = tokenize("0f3F800000 0d3FF0000000000000 0x10 42U 1.5e3").unwrap();
        let kinds: Vec<Tok> = t.iter().map(|t| t.tok).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::F32Hex,
                Tok::F64Hex,
                Tok::HexInt,
                Tok::DecInt,
                Tok::DecFloat
            ]
        );
    }
}
