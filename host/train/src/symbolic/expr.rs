//! The expressions of a template (`#init` right-hand sides, `#conditions`,
//! `#answer:`, the solution's `#### {…}`): the small part of Python they
//! use, parsed into a tree and nothing more — no attribute access, no
//! comprehensions, no lambdas, no keyword arguments, and only the helper
//! functions named in [`Func`]. Anything else is refused when the template
//! is loaded, with the column where it starts, rather than guessed at.
//!
//! Precedence, loosest first, as in Python: `a if c else b`; `or`; `and`;
//! `not`; comparisons (chained: `a < b < c`); `+ -`; `* / // %`; unary
//! `- +`; `**` (right-associative, binding tighter than a unary minus on
//! its left); calls and `x[i]`.

use super::helpers::Func;
use super::lex::{ParseError, Token, UNSUPPORTED_WORDS, describe, error, tokenize};
use super::number::Number;

/// Deeper nesting than this is refused: no real template comes close, and a
/// hostile one must not overflow the stack.
const MAX_DEPTH: usize = 48;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    Num(Number),
    Str(String),
    Bool(bool),
    Name(String),
    /// A list or a tuple (Python's difference between them does not matter here).
    List(Vec<Expr>),
    Neg(Box<Expr>),
    Pos(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
    Index(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Calls `visit` on this node and every node below it.
    pub(crate) fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        let children: Vec<&Expr> = match self {
            Expr::Num(_) | Expr::Str(_) | Expr::Bool(_) | Expr::Name(_) => vec![],
            Expr::List(items) | Expr::And(items) | Expr::Or(items) | Expr::Call(_, items) => {
                items.iter().collect()
            }
            Expr::Neg(e) | Expr::Pos(e) | Expr::Not(e) => vec![e],
            Expr::Binary(_, a, b) | Expr::Index(a, b) => vec![a, b],
            Expr::Compare(first, rest) => std::iter::once(&**first)
                .chain(rest.iter().map(|(_, e)| e))
                .collect(),
            Expr::If(a, b, c) => vec![a, b, c],
        };
        for child in children {
            child.walk(visit);
        }
    }

    /// The names it reads, in order of appearance.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Name(name) = e {
                names.push(name.clone());
            }
        });
        names
    }

    /// The random helpers it calls.
    pub(crate) fn random_calls(&self) -> Vec<Func> {
        let mut found = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Call(func, _) = e
                && func.is_random()
            {
                found.push(*func);
            }
        });
        found
    }
}

/// Parses one expression; the whole text must be used.
pub(crate) fn parse(text: &str) -> Result<Expr, ParseError> {
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return error(0, "empty expression");
    }
    let end = text.chars().count();
    let mut parser = Parser {
        tokens,
        at: 0,
        end,
        depth: 0,
    };
    let expr = parser.expr()?;
    match parser.tokens.get(parser.at) {
        None => Ok(expr),
        Some((token, column)) => error(
            *column,
            format!("unexpected {} after a complete expression", describe(token)),
        ),
    }
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    /// The text's length, the column of "end of expression".
    end: usize,
    depth: usize,
}

impl Parser {
    fn column(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |(_, c)| *c)
    }

    fn peek_sym(&self, sym: &str) -> bool {
        matches!(self.tokens.get(self.at), Some((Token::Sym(s), _)) if *s == sym)
    }

    fn peek_word(&self, word: &str) -> bool {
        matches!(self.tokens.get(self.at), Some((Token::Name(n), _)) if n == word)
    }

    fn eat_sym(&mut self, sym: &str) -> bool {
        let found = self.peek_sym(sym);
        self.at += usize::from(found);
        found
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.peek_word(word);
        self.at += usize::from(found);
        found
    }

    fn expect_sym(&mut self, sym: &str) -> Result<(), ParseError> {
        if self.eat_sym(sym) {
            return Ok(());
        }
        match self.tokens.get(self.at) {
            Some((token, column)) => error(
                *column,
                format!("expected `{sym}`, found {}", describe(token)),
            ),
            None => error(
                self.end,
                format!("expected `{sym}` before the end (unbalanced?)"),
            ),
        }
    }

    /// `a if c else b`, the loosest form.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return error(self.column(), format!("nested more than {MAX_DEPTH} deep"));
        }
        let value = self.or()?;
        let result = if self.eat_word("if") {
            let test = self.or()?;
            if !self.eat_word("else") {
                return error(self.column(), "`if` without `else`");
            }
            let other = self.expr()?;
            Expr::If(Box::new(test), Box::new(value), Box::new(other))
        } else {
            value
        };
        self.depth -= 1;
        Ok(result)
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.and()?];
        while self.eat_word("or") {
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items)
        })
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.not()?];
        while self.eat_word("and") {
            items.push(self.not()?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::And(items)
        })
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.eat_word("not") {
            return Ok(Expr::Not(Box::new(self.nested(Parser::not)?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, ParseError> {
        let first = self.sum()?;
        let mut rest = Vec::new();
        loop {
            let op = match () {
                _ if self.eat_sym("==") => CmpOp::Eq,
                _ if self.eat_sym("!=") => CmpOp::Ne,
                _ if self.eat_sym("<=") => CmpOp::Le,
                _ if self.eat_sym(">=") => CmpOp::Ge,
                _ if self.eat_sym("<") => CmpOp::Lt,
                _ if self.eat_sym(">") => CmpOp::Gt,
                _ => break,
            };
            rest.push((op, self.sum()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Expr::Compare(Box::new(first), rest)
        })
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.term()?;
        loop {
            let op = match () {
                _ if self.eat_sym("+") => BinOp::Add,
                _ if self.eat_sym("-") => BinOp::Sub,
                _ => return Ok(left),
            };
            left = Expr::Binary(op, Box::new(left), Box::new(self.term()?));
        }
    }

    fn term(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = match () {
                _ if self.eat_sym("*") => BinOp::Mul,
                _ if self.eat_sym("//") => BinOp::FloorDiv,
                _ if self.eat_sym("/") => BinOp::Div,
                _ if self.eat_sym("%") => BinOp::Mod,
                _ => return Ok(left),
            };
            left = Expr::Binary(op, Box::new(left), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.eat_sym("-") {
            return Ok(Expr::Neg(Box::new(self.nested(Parser::unary)?)));
        }
        if self.eat_sym("+") {
            return Ok(Expr::Pos(Box::new(self.nested(Parser::unary)?)));
        }
        let base = self.postfix()?;
        if self.eat_sym("**") {
            let exponent = self.nested(Parser::unary)?;
            return Ok(Expr::Binary(BinOp::Pow, Box::new(base), Box::new(exponent)));
        }
        Ok(base)
    }

    /// Runs `rule` one level deeper (unary chains recurse without `expr`).
    fn nested(
        &mut self,
        rule: fn(&mut Parser) -> Result<Expr, ParseError>,
    ) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return error(self.column(), format!("nested more than {MAX_DEPTH} deep"));
        }
        let result = rule(self)?;
        self.depth -= 1;
        Ok(result)
    }

    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let column = self.column();
        let mut expr = self.atom()?;
        loop {
            if self.peek_sym("(") {
                let Expr::Name(name) = &expr else {
                    return error(column, "only the helper functions can be called");
                };
                let Some(func) = Func::from_name(name) else {
                    return error(column, format!("unknown function `{name}`"));
                };
                self.at += 1;
                let args = self.items(")")?;
                let (min, max) = func.arity();
                if args.len() < min || args.len() > max {
                    let wanted = if min == max {
                        min.to_string()
                    } else {
                        format!("{min} to {max}")
                    };
                    return error(
                        column,
                        format!("`{name}` takes {wanted} arguments, not {}", args.len()),
                    );
                }
                expr = Expr::Call(func, args);
            } else if self.eat_sym("[") {
                let index = self.expr()?;
                self.expect_sym("]")?;
                expr = Expr::Index(Box::new(expr), Box::new(index));
            } else if self.peek_sym(".") {
                return error(self.column(), "attribute access (`.`) is not supported");
            } else {
                return Ok(expr);
            }
        }
    }

    /// Comma-separated expressions up to `close` (a trailing comma allowed).
    fn items(&mut self, close: &str) -> Result<Vec<Expr>, ParseError> {
        let mut items = Vec::new();
        while !self.eat_sym(close) {
            if matches!(
                self.tokens.get(self.at..self.at + 2),
                Some([(Token::Name(_), _), (Token::Sym("="), _)])
            ) {
                return error(self.column(), "keyword arguments are not supported");
            }
            items.push(self.expr()?);
            if !self.eat_sym(",") {
                self.expect_sym(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        let column = self.column();
        let Some((token, _)) = self.tokens.get(self.at).cloned() else {
            return error(self.end, "expression ends too early");
        };
        self.at += 1;
        match token {
            Token::Num(n) => Ok(Expr::Num(n)),
            Token::Str(s) => Ok(Expr::Str(s)),
            Token::Name(name) => match name.as_str() {
                "True" => Ok(Expr::Bool(true)),
                "False" => Ok(Expr::Bool(false)),
                "and" | "or" | "not" | "if" | "else" => {
                    error(column, format!("misplaced `{name}`"))
                }
                word if UNSUPPORTED_WORDS.contains(&word) => {
                    error(column, format!("`{word}` is not supported"))
                }
                _ => Ok(Expr::Name(name)),
            },
            Token::Sym("(") => {
                let items = self.nested(|p| {
                    let first_column = p.column();
                    let mut items = p.items(")")?;
                    let trailing_comma =
                        matches!(p.tokens.get(p.at - 2), Some((Token::Sym(","), _)));
                    if items.is_empty() {
                        return error(first_column, "empty tuple");
                    }
                    Ok(if items.len() == 1 && !trailing_comma {
                        items.remove(0)
                    } else {
                        Expr::List(items)
                    })
                })?;
                Ok(items)
            }
            Token::Sym("[") => self.nested(|p| p.items("]").map(Expr::List)),
            other => error(column, format!("unexpected {}", describe(&other))),
        }
    }
}
