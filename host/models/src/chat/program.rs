//! A chat template as a bounded program. minijinja has no hook between
//! instructions, and its compiler folds constant expressions (`'x' * n`,
//! `[1] * n == [1] * n`) before anything runs, so this module
//!
//! - screens the parsed template: a constant expression that would fold to
//!   more than [`MAX_VALUE_SIZE`] is refused before minijinja compiles it;
//! - rewrites the compiled instructions with guard calls
//!   ([`super::bounds::Guard`]) around every operation that makes a value
//!   or whose cost grows with its inputs, jump targets moved to match;
//! - refuses `include`, `import` and `extends`, which would load the
//!   template again unguarded (transformers has no loader either).

use super::bounds::{Guard, MAX_VALUE_SIZE};
use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt};
use minijinja::machinery::{Instruction, Instructions, WhitespaceConfig};
use minijinja::value::Value;

/// Why [`screen`] refused a template.
pub(crate) enum Refused {
    /// Its constants would fold to more than the limit.
    Limit(String),
    /// It does not parse, or loads other templates.
    Invalid(String),
}

/// Refuses a template whose constants would fold to too much, or that
/// loads other templates.
pub(crate) fn screen(source: &str) -> Result<(), Refused> {
    let whitespace = WhitespaceConfig {
        keep_trailing_newline: false,
        lstrip_blocks: true,
        trim_blocks: true,
    };
    let ast = minijinja::machinery::parse(source, "chat_template", Default::default(), whitespace)
        .map_err(|e| Refused::Invalid(e.to_string()))?;
    let mut screen = Screen { folded: 0 };
    screen.stmt(&ast)
}

struct Screen {
    /// Units of constants folded so far.
    folded: usize,
}

impl Screen {
    fn stmts(&mut self, stmts: &[Stmt<'_>]) -> Result<(), Refused> {
        stmts.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt<'_>) -> Result<(), Refused> {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr).map(drop),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => Ok(()),
            Stmt::ForLoop(l) => {
                self.exprs([&l.target, &l.iter])?;
                self.exprs(&l.filter_expr)?;
                self.stmts(&l.body)?;
                self.stmts(&l.else_body)
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr)?;
                self.stmts(&c.true_body)?;
                self.stmts(&c.false_body)
            }
            Stmt::WithBlock(w) => {
                for (target, value) in &w.assignments {
                    self.exprs([target, value])?;
                }
                self.stmts(&w.body)
            }
            Stmt::Set(s) => self.exprs([&s.target, &s.expr]),
            Stmt::SetBlock(s) => {
                self.expr(&s.target)?;
                self.exprs(&s.filter)?;
                self.stmts(&s.body)
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled)?;
                self.stmts(&a.body)
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter)?;
                self.stmts(&f.body)
            }
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Import(_) | Stmt::FromImport(_) | Stmt::Extends(_) | Stmt::Include(_) => {
                Err(Refused::Invalid(
                    "include, import and extends are not supported in a chat template".into(),
                ))
            }
            Stmt::Macro(m) => {
                self.exprs(&m.args)?;
                self.exprs(&m.defaults)?;
                self.stmts(&m.body)
            }
            Stmt::CallBlock(c) => {
                self.expr(&c.call.expr)?;
                self.args(&c.call.args)?;
                self.exprs(&c.macro_decl.args)?;
                self.exprs(&c.macro_decl.defaults)?;
                self.stmts(&c.macro_decl.body)
            }
            Stmt::Do(d) => {
                self.expr(&d.call.expr)?;
                self.args(&d.call.args)
            }
        }
    }

    fn exprs<'e, 'a: 'e>(
        &mut self,
        exprs: impl IntoIterator<Item = &'e Expr<'a>>,
    ) -> Result<(), Refused> {
        exprs.into_iter().try_for_each(|e| self.expr(e).map(drop))
    }

    fn args(&mut self, args: &[CallArg<'_>]) -> Result<(), Refused> {
        args.iter().try_for_each(|arg| match arg {
            CallArg::Pos(e)
            | CallArg::Kwarg(_, e)
            | CallArg::PosSplat(e)
            | CallArg::KwargSplat(e) => self.expr(e).map(drop),
        })
    }

    /// Screens `expr`; for a constant one, a bound on the size (in
    /// [`MAX_VALUE_SIZE`]'s units) of what minijinja folds it to, found
    /// without folding anything larger than the limit.
    fn expr(&mut self, expr: &Expr<'_>) -> Result<Option<usize>, Refused> {
        let folded = match expr {
            Expr::Const(c) => return Ok(Some(literal_size(&c.value))),
            Expr::List(l) => {
                let mut total = Some(1usize);
                for item in &l.items {
                    let size = self.expr(item)?;
                    total = total.zip(size).map(|(t, s)| t.saturating_add(s));
                }
                // minijinja folds a list only when every item is a literal.
                total.filter(|_| l.items.iter().all(|e| matches!(e, Expr::Const(_))))
            }
            Expr::Map(m) => {
                self.exprs(m.keys.iter().chain(&m.values))?;
                let literal = m.keys.iter().chain(&m.values);
                let sizes = literal.map(|e| match e {
                    Expr::Const(c) => Some(literal_size(&c.value)),
                    _ => None,
                });
                sizes.sum::<Option<usize>>().map(|s| s + 1)
            }
            Expr::UnaryOp(u) => self.expr(&u.expr)?.map(|_| 1),
            Expr::BinOp(b) => {
                let left = self.expr(&b.left)?;
                let right = self.expr(&b.right)?;
                left.zip(right)
                    .map(|(l, r)| binop_size(b.op, &b.left, &b.right, l, r))
            }
            Expr::Compare(c) => {
                let mut constant = self.expr(&c.expr)?.is_some();
                for op in &c.ops {
                    constant &= self.expr(&op.expr)?.is_some();
                }
                constant.then_some(1)
            }
            Expr::Var(_) => None,
            Expr::Slice(s) => {
                self.expr(&s.expr)?;
                self.exprs(s.start.iter().chain(&s.stop).chain(&s.step))?;
                None
            }
            Expr::IfExpr(i) => {
                self.exprs([&i.test_expr, &i.true_expr])?;
                self.exprs(&i.false_expr)?;
                None
            }
            Expr::Filter(f) => {
                self.exprs(&f.expr)?;
                self.args(&f.args)?;
                None
            }
            Expr::Test(t) => {
                self.expr(&t.expr)?;
                self.args(&t.args)?;
                None
            }
            Expr::GetAttr(g) => self.expr(&g.expr).map(|_| None)?,
            Expr::GetItem(g) => {
                self.exprs([&g.expr, &g.subscript_expr])?;
                None
            }
            Expr::Call(c) => {
                self.expr(&c.expr)?;
                self.args(&c.args)?;
                None
            }
        };
        if let Some(size) = folded {
            self.folded = self.folded.saturating_add(size);
            if size > MAX_VALUE_SIZE || self.folded > 4 * MAX_VALUE_SIZE {
                return Err(Refused::Limit(format!(
                    "its constant expressions fold to more than {MAX_VALUE_SIZE} bytes (MAX_VALUE_SIZE)"
                )));
            }
        }
        Ok(folded)
    }
}

fn literal_size(value: &Value) -> usize {
    1 + value.as_str().map_or(0, str::len)
}

/// A bound on what a constant binary operation folds to, from the bounds
/// of its operands (`l`, `r`), already known to be within the limit, so
/// evaluating an operand is cheap.
fn binop_size(op: BinOpKind, left: &Expr<'_>, right: &Expr<'_>, l: usize, r: usize) -> usize {
    let value = |e: &Expr<'_>| e.as_const().unwrap_or_default();
    match op {
        BinOpKind::Mul => {
            let (a, b) = (value(left), value(right));
            let times = |v: &Value| v.as_usize().filter(|_| v.is_integer());
            match (times(&a), times(&b)) {
                (Some(_), Some(_)) => 1,
                (Some(n), None) => r.saturating_mul(n),
                (None, Some(n)) => l.saturating_mul(n),
                (None, None) => 1,
            }
        }
        // Shown in a string, a list may take several bytes per unit (quotes,
        // separators, escapes).
        BinOpKind::Concat | BinOpKind::Add => {
            let shown = |v: Value, size: usize| {
                if v.as_str().is_some() {
                    size
                } else {
                    size.saturating_mul(8)
                }
            };
            shown(value(left), l).saturating_add(shown(value(right), r))
        }
        BinOpKind::ScAnd | BinOpKind::ScOr => l.max(r),
        _ => 1,
    }
}

/// `code` with guard calls around the operations that make values or
/// scan their inputs (see [`Guard`]), jumps retargeted.
pub(crate) fn guarded<'s>(code: &Instructions<'s>) -> Instructions<'s> {
    let call = |guard: Guard, args: u16| Instruction::CallFunction(guard.name(), Some(args));
    let before = |instr: &Instruction<'s>| -> Vec<Instruction<'s>> {
        match instr {
            Instruction::EmitRaw(text) => vec![
                Instruction::LoadConst(Value::from(text.len())),
                call(Guard::Raw, 1),
                Instruction::DiscardTop,
            ],
            Instruction::Mul => vec![call(Guard::Repeat, 2), Instruction::UnpackList(2)],
            Instruction::SetAttr(_) => vec![call(Guard::Assign, 2), Instruction::UnpackList(2)],
            _ => Vec::new(),
        }
    };
    let after = |instr: &Instruction<'s>| -> Option<Instruction<'s>> {
        match instr {
            Instruction::Add
            | Instruction::Mul
            | Instruction::StringConcat
            | Instruction::Slice
            | Instruction::BuildList(_)
            | Instruction::BuildMap(_)
            | Instruction::ApplyFilter(..)
            | Instruction::CallFunction(..)
            | Instruction::CallMethod(..)
            | Instruction::CallObject(_)
            | Instruction::EndCapture => Some(call(Guard::New, 1)),
            Instruction::GetAttr(_)
            | Instruction::GetItem
            | Instruction::Eq
            | Instruction::Ne
            | Instruction::Gt
            | Instruction::Gte
            | Instruction::Lt
            | Instruction::Lte
            | Instruction::In
            | Instruction::CompareAndPreserve(_)
            | Instruction::PerformTest(..)
            | Instruction::UnpackLists(_) => Some(call(Guard::Tick, 1)),
            Instruction::UnpackList(n) if *n > 0 => Some(call(Guard::Tick, 1)),
            _ => None,
        }
    };
    let instructions: Vec<&Instruction<'s>> = (0..code.len() as u32)
        .map_while(|pc| code.get(pc))
        .collect();
    // Where each old instruction's group (guards before it included) starts.
    let mut starts = Vec::with_capacity(instructions.len() + 1);
    let mut at = 0u32;
    for instr in &instructions {
        starts.push(at);
        at += (before(instr).len() + 1 + usize::from(after(instr).is_some())) as u32;
    }
    starts.push(at);
    let moved = |target: &u32| starts[*target as usize];
    let mut out = Instructions::new(code.name(), code.source());
    for (pc, instr) in instructions.into_iter().enumerate() {
        let line = code.get_line(pc as u32);
        let mut add = |i: Instruction<'s>| match line {
            Some(line) => out.add_with_line(i, line as u16),
            None => out.add(i),
        };
        for guard in before(instr) {
            add(guard);
        }
        add(match instr {
            Instruction::Jump(t) => Instruction::Jump(moved(t)),
            Instruction::JumpIfFalse(t) => Instruction::JumpIfFalse(moved(t)),
            Instruction::JumpIfFalseOrPop(t) => Instruction::JumpIfFalseOrPop(moved(t)),
            Instruction::JumpIfTrueOrPop(t) => Instruction::JumpIfTrueOrPop(moved(t)),
            Instruction::Iterate(t) => Instruction::Iterate(moved(t)),
            Instruction::BuildMacro(name, t, flags) => {
                Instruction::BuildMacro(name, moved(t), *flags)
            }
            other => other.clone(),
        });
        if let Some(guard) = after(instr) {
            add(guard);
        }
    }
    out
}
