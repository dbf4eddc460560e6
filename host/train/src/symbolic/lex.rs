//! Splitting an expression's text into tokens (numbers, text, names,
//! operators), each with its column for error messages.

use super::number::Number;
use std::fmt;

/// Where an expression could not be parsed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based character column in the expression's text.
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    Num(Number),
    Str(String),
    Name(String),
    /// Operators and punctuation.
    Sym(&'static str),
}

const SYMBOLS: [&str; 20] = [
    "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">", "(", ")", "[", "]", ",",
    "=", ".",
];

/// Python keywords a template might try that this evaluator does not have.
pub(crate) const UNSUPPORTED_WORDS: [&str; 10] = [
    "None", "in", "is", "lambda", "for", "import", "while", "def", "class", "yield",
];

pub(crate) fn error<T>(column: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        column: column + 1,
        message: message.into(),
    })
}

/// Splits `text` into tokens, each with its 0-based character column.
pub(crate) fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            if i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                return error(i, format!("unsupported number syntax near {:?}", chars[i]));
            }
            let literal: String = chars[start..i].iter().collect();
            tokens.push((
                Token::Num(Number::parse(&literal).ok_or_else(|| ParseError {
                    column: start + 1,
                    message: format!("bad or too large number {literal}"),
                })?),
                start,
            ));
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push((Token::Name(chars[start..i].iter().collect()), start));
        } else if c == '"' || c == '\'' {
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => return error(start, "string not closed"),
                    Some(&q) if q == c => break,
                    Some('\\') => match chars.get(i + 1) {
                        Some(&e @ ('\\' | '\'' | '"')) => {
                            s.push(e);
                            i += 1;
                        }
                        _ => return error(i, "unsupported escape in a string"),
                    },
                    Some(&other) => s.push(other),
                }
                i += 1;
            }
            i += 1;
            tokens.push((Token::Str(s), start));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(sym) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) else {
                return error(i, format!("unexpected character {c:?}"));
            };
            i += sym.chars().count();
            tokens.push((Token::Sym(sym), start));
        }
    }
    Ok(tokens)
}

pub(crate) fn describe(token: &Token) -> String {
    match token {
        Token::Num(_) => "number".into(),
        Token::Str(_) => "string".into(),
        Token::Name(name) => format!("`{name}`"),
        Token::Sym(sym) => format!("`{sym}`"),
    }
}
