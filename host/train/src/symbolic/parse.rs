//! Reading a template file (see the module documentation for the format)
//! into a [`Template`], refusing what this reader does not support with
//! the file and, where it can, the line. Once read, every name an
//! expression reads is defined, every function is known and random
//! helpers appear only in `#init`, so a draw can fail only on its values.

use super::SymbolicError;
use super::expr::parse;
use super::helpers::Func;
use super::render::placeholders;
use super::template::{Checked, InitLine, Template};
use super::value::Value;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};

#[derive(Deserialize)]
struct RawTemplate {
    question: Option<String>,
    answer: Option<String>,
    question_annotated: toml::Spanned<String>,
    answer_annotated: Option<toml::Spanned<String>>,
    #[serde(default)]
    ignore: bool,
}

/// Builds the errors of one file.
struct Fail<'a>(&'a str);

impl Fail<'_> {
    fn at(&self, line: Option<usize>, message: impl Into<String>) -> SymbolicError {
        SymbolicError::Template {
            template: self.0.to_string(),
            line,
            message: message.into(),
        }
    }

    fn line(&self, line: usize, message: impl Into<String>) -> SymbolicError {
        self.at(Some(line), message)
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The lines of a TOML string value with their 1-based file lines (exact
/// for the usual `"""` block; an escaped newline would shift them).
fn value_lines<'a>(file: &str, value: &'a toml::Spanned<String>) -> Vec<(usize, &'a str)> {
    let start = value.span().start;
    let opens_block = file[start..].starts_with("\"\"\"\n") || file[start..].starts_with("'''\n");
    let first = line_of(file, start) + usize::from(opens_block);
    value
        .get_ref()
        .lines()
        .enumerate()
        .map(|(k, line)| (first + k, line))
        .collect()
}

/// `#init` lines, conditions and answers, as written.
#[derive(Default)]
struct Sections {
    init: Vec<InitLine>,
    conditions: Vec<Checked>,
    answers: Vec<Checked>,
}

impl Template {
    /// Reads a template from `text`; `source` names it in errors and
    /// `lists` holds the name lists its expressions may read.
    pub(crate) fn parse(
        source: &str,
        text: &str,
        lists: &BTreeMap<String, Value>,
    ) -> Result<Template, SymbolicError> {
        let fail = Fail(source);
        let raw: RawTemplate = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|span| line_of(text, span.start));
            fail.at(line, format!("not a template: {}", e.message()))
        })?;
        if raw.ignore {
            return Err(fail.at(None, "marked `ignore = true`"));
        }
        let lines = value_lines(text, &raw.question_annotated);
        let mut rows = lines
            .iter()
            .copied()
            .skip_while(|(_, l)| l.trim().is_empty());
        let Some((question_line, question_text)) = rows.next() else {
            return Err(fail.at(None, "question_annotated is empty"));
        };
        let (question, defaults) =
            placeholders(question_text.trim()).map_err(|e| fail.line(question_line, e))?;
        let mut sections = read_sections(rows, &fail)?;
        if let Some(block) = &raw.answer_annotated {
            sections
                .answers
                .extend(solution_answer(&value_lines(text, block), &fail)?);
        }
        if sections.answers.is_empty() {
            return Err(fail.at(None, "no `#answer:` and no `#### {…}` solution line"));
        }
        let variables = defined_once(&sections.init, &fail)?;
        if let Some((name, _)) = defaults.iter().find(|(name, _)| !variables.contains(name)) {
            return Err(fail.line(
                question_line,
                format!("placeholder `{name}` has no #init line"),
            ));
        }
        let used_lists = check_names(&sections, &variables, lists, &fail)?;
        order_lines(&mut sections.init, &variables, &fail)?;
        let original_answer = raw
            .answer
            .as_deref()
            .and_then(|a| a.rsplit_once("####"))
            .map(|(_, n)| n.trim().replace(',', ""));
        Ok(Template {
            source: source.to_string(),
            question,
            defaults,
            lines: sections.init,
            conditions: sections.conditions,
            answers: sections.answers,
            lists: used_lists,
            original_question: raw.question.map(|q| q.trim().to_string()),
            original_answer,
        })
    }
}

/// The lines after the question: `#init:` and `#conditions:` with their
/// `- …` lines, and `#answer: …`.
fn read_sections<'a>(
    rows: impl Iterator<Item = (usize, &'a str)>,
    fail: &Fail,
) -> Result<Sections, SymbolicError> {
    let mut sections = Sections::default();
    let mut section = "";
    for (line, row) in rows {
        let parse_at =
            |text: &str| parse(text).map_err(|e| fail.line(line, format!("{e} in `{text}`")));
        let trimmed = row.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(heading) = trimmed.strip_prefix('#') {
            let (name, rest) = heading.split_once(':').unwrap_or((heading, ""));
            section = match (name, rest.trim()) {
                ("init", "") if section.is_empty() => "init",
                ("conditions", "") if section == "init" => "conditions",
                ("answer", expr) if !expr.is_empty() && section != "answer" => {
                    let at = "#answer".to_string();
                    sections.answers.push(Checked {
                        expr: parse_at(expr)?,
                        source: expr.into(),
                        at,
                    });
                    "answer"
                }
                _ => return Err(fail.line(line, format!("unknown or misplaced `{trimmed}`"))),
            };
            continue;
        }
        let item = trimmed.strip_prefix('-').map(str::trim);
        let at = format!("line {line}");
        match (section, item) {
            ("conditions", Some("True")) => {}
            ("conditions", Some(item)) => {
                sections.conditions.push(Checked {
                    expr: parse_at(item)?,
                    source: item.into(),
                    at,
                });
            }
            ("init", Some(item)) => {
                let Some((left, right)) = item.split_once('=').filter(|(_, r)| !r.starts_with('='))
                else {
                    return Err(fail.line(
                        line,
                        format!("expected `name = expression`, found `{item}`"),
                    ));
                };
                // `$` and parentheses are decoration: `(a, a_txt), $b`.
                let decoration = |c: char| c.is_whitespace() || "()$".contains(c);
                let names: Vec<String> = left
                    .split(',')
                    .map(|n| n.trim_matches(decoration).to_string())
                    .collect();
                let is_name = |n: &String| {
                    !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_')
                };
                if !names.iter().all(is_name) {
                    let message = format!("`{}` is not a list of variable names", left.trim());
                    return Err(fail.line(line, message));
                }
                let expr = parse_at(right.trim())?;
                sections.init.push(InitLine {
                    names,
                    expr,
                    derived: false,
                    at: format!("{at} (`{item}`)"),
                });
            }
            _ => {
                let message =
                    format!("expected a `- …` line of #init or #conditions, found `{trimmed}`");
                return Err(fail.line(line, message));
            }
        }
    }
    Ok(sections)
}

/// The solution's `#### {expression}` line, if it has one.
fn solution_answer(lines: &[(usize, &str)], fail: &Fail) -> Result<Option<Checked>, SymbolicError> {
    let Some(&(line, row)) = lines
        .iter()
        .find(|(_, l)| l.trim_start().starts_with("####"))
    else {
        return Ok(None);
    };
    let inner = row.trim().trim_start_matches('#').trim();
    let expr = inner.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
    let Some(expr) = expr.filter(|e| !e.contains(['{', '}'])) else {
        let message = format!(
            "the solution's `{}` is not `#### {{expression}}`",
            row.trim()
        );
        return Err(fail.line(line, message));
    };
    let parsed = parse(expr).map_err(|e| fail.line(line, format!("{e} in `{expr}`")))?;
    Ok(Some(Checked {
        expr: parsed,
        source: expr.trim().into(),
        at: "the #### line".into(),
    }))
}

/// The variables, each defined by one `#init` line only.
fn defined_once(init: &[InitLine], fail: &Fail) -> Result<HashSet<String>, SymbolicError> {
    let mut variables = HashSet::new();
    for line in init {
        for name in &line.names {
            if !variables.insert(name.clone()) {
                return Err(fail.at(None, format!("`{name}` is defined twice ({})", line.at)));
            }
        }
    }
    Ok(variables)
}

/// Every name read is a variable or a name list (returned: the lists the
/// template uses); conditions and answers call no random helper.
fn check_names(
    sections: &Sections,
    variables: &HashSet<String>,
    lists: &BTreeMap<String, Value>,
    fail: &Fail,
) -> Result<BTreeMap<String, Value>, SymbolicError> {
    let checked = sections.conditions.iter().chain(&sections.answers);
    for c in checked.clone() {
        if let Some(func) = c.expr.random_calls().first() {
            let message = format!(
                "{}: {}() draws at random; only #init lines may",
                c.at,
                func.name()
            );
            return Err(fail.at(None, message));
        }
    }
    let exprs = sections
        .init
        .iter()
        .map(|l| (&l.expr, &l.at))
        .chain(checked.map(|c| (&c.expr, &c.at)));
    let mut used = BTreeMap::new();
    for (expr, at) in exprs {
        for name in expr.names().into_iter().filter(|n| !variables.contains(n)) {
            let Some(list) = lists.get(&name) else {
                return Err(fail.at(
                    None,
                    format!("{at}: `{name}` is neither a variable nor a name list"),
                ));
            };
            used.insert(name, list.clone());
        }
    }
    Ok(used)
}

/// Puts the lines that read no other variable first (the package's
/// order), then the others in file order, and checks that each of those
/// reads only variables defined before it.
fn order_lines(
    init: &mut [InitLine],
    variables: &HashSet<String>,
    fail: &Fail,
) -> Result<(), SymbolicError> {
    for line in init.iter_mut() {
        line.derived = line.expr.names().iter().any(|n| variables.contains(n));
    }
    init.sort_by_key(|l| l.derived);
    let mut defined: HashSet<&String> = HashSet::new();
    for line in init.iter() {
        let names = line.expr.names();
        if let Some(late) = names
            .iter()
            .find(|n| variables.contains(*n) && !defined.contains(n))
        {
            return Err(fail.at(
                None,
                format!("{}: reads `{late}` before it is defined", line.at),
            ));
        }
        // The package draws these with an inclusive `range`, unlike every
        // other line; rather than guess, they are refused.
        let calls = line.expr.random_calls();
        if let Some(func) = calls.iter().find(|f| line.derived && **f != Func::Sample) {
            let message = format!(
                "{}: {}() with bounds from other variables",
                line.at,
                func.name()
            );
            return Err(fail.at(None, format!("{message} is not supported")));
        }
        defined.extend(&line.names);
    }
    Ok(())
}
