//! The builtins a chat template calls, bounded: every one whose output can
//! outgrow its inputs by a width, count or separator (`indent`, `tojson`,
//! `format`, `replace`, `join`, `batch`, `slice`, `pprint`, the same Python
//! string methods) checks the size it would make before making it, and the
//! ones that run a test or filter per item pay for the items first. The
//! rest cost no more than their (already bounded) inputs.

use super::bounds::{self, MAX_VALUE_DEPTH, MAX_VALUE_SIZE, charge, output, refuse, width};
use minijinja::value::{Kwargs, Rest, StringInput, Value as JinjaValue, ValueKind};
use minijinja::{Environment, Error as JinjaError, ErrorKind, State};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt::Write;

type Result<T> = std::result::Result<T, JinjaError>;

/// Replaces the amplifying builtins of `env` with bounded ones.
pub(crate) fn install(env: &mut Environment<'static>) {
    env.add_filter("tojson", tojson);
    env.add_filter("indent", indent);
    env.add_filter("replace", replace);
    env.add_filter("join", join);
    env.add_filter("trim", trim);
    env.add_filter("batch", batch);
    env.add_filter("slice", slice);
    env.add_filter("format", format);
    env.add_filter("pprint", pprint);
    per_item(
        env,
        "select",
        JinjaValue::from_function(minijinja::filters::select),
    );
    per_item(
        env,
        "reject",
        JinjaValue::from_function(minijinja::filters::reject),
    );
    per_item(
        env,
        "selectattr",
        JinjaValue::from_function(minijinja::filters::selectattr),
    );
    per_item(
        env,
        "rejectattr",
        JinjaValue::from_function(minijinja::filters::rejectattr),
    );
    per_item(
        env,
        "map",
        JinjaValue::from_function(minijinja::filters::map),
    );
    env.add_function("debug", |_: Rest<JinjaValue>| -> Result<JinjaValue> {
        Err(refuse("debug() is not available in a chat template"))
    });
    env.set_unknown_method_callback(methods);
}

fn items(value: &JinjaValue) -> Result<usize> {
    match value.len() {
        Some(n) if value.as_str().is_none() => Ok(n),
        _ => Ok(value.try_iter()?.count()),
    }
}

/// Units an argument brings to each call made with it.
fn shallow(value: &JinjaValue) -> usize {
    value
        .as_str()
        .map(str::len)
        .or_else(|| value.len())
        .unwrap_or(0)
        + 1
}

/// A filter that runs a test or filter once per item (`select('in', s)`),
/// paying `items × arguments` first.
fn per_item(env: &mut Environment<'static>, name: &'static str, filter: JinjaValue) {
    env.add_filter(
        name,
        move |state: &State, args: Rest<JinjaValue>| -> Result<JinjaValue> {
            let count = args.first().map(items).transpose()?.unwrap_or(0);
            let per_call: usize = args.iter().skip(1).map(shallow).sum();
            charge(count.saturating_mul(per_call))?;
            filter.call(state, &args)
        },
    );
}

fn indent(
    value: StringInput<'_>,
    indent_width: Option<usize>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<JinjaValue> {
    let w = match indent_width {
        Some(w) => w,
        None => kwargs.peek::<Option<usize>>("width")?.unwrap_or(4),
    };
    width("indent width", w)?;
    let lines = value.as_str().matches('\n').count() + 1;
    output(
        "indent",
        value.as_str().len().saturating_add(lines.saturating_mul(w)),
    )?;
    minijinja::filters::indent(value, indent_width, first, blank, kwargs)
}

/// The length of `s` with `count` (all when `None`) of `from` replaced by
/// `to`; Python inserts `to` around every character when `from` is empty.
fn replaced_len(s: &str, from: &str, to: &str, count: Option<usize>) -> usize {
    let found = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    };
    let n = count.map_or(found, |c| c.min(found));
    (s.len() - n * from.len()).saturating_add(n.saturating_mul(to.len()))
}

fn replace(
    state: &State,
    value: StringInput<'_>,
    from: StringInput<'_>,
    to: StringInput<'_>,
) -> Result<JinjaValue> {
    output(
        "replace",
        replaced_len(value.as_str(), from.as_str(), to.as_str(), None),
    )?;
    minijinja::filters::replace(state, value, from, to)
}

fn join(state: &State, value: &JinjaValue, joiner: Option<StringInput<'_>>) -> Result<JinjaValue> {
    let sep = joiner.as_ref().map_or(0, |j| j.as_str().len());
    output("join", items(value)?.saturating_mul(sep))?;
    minijinja::filters::join(state, value, joiner)
}

fn trim(value: StringInput<'_>, chars: Option<Cow<'_, str>>) -> Result<JinjaValue> {
    if let Some(chars) = &chars {
        // Each character trimmed is looked up among `chars`.
        charge(value.as_str().len().saturating_mul(chars.chars().count()))?;
    }
    Ok(minijinja::filters::trim(value, chars))
}

fn batch(
    state: &State,
    value: JinjaValue,
    count: usize,
    fill: Option<JinjaValue>,
) -> Result<JinjaValue> {
    width("batch size", count)?;
    minijinja::filters::batch(state, value, count, fill)
}

fn slice(
    state: &State,
    value: JinjaValue,
    count: usize,
    fill: Option<JinjaValue>,
) -> Result<JinjaValue> {
    width("slice count", count)?;
    minijinja::filters::slice(state, value, count, fill)
}

/// Refuses a width or precision past [`bounds::MAX_WIDTH`] in a printf
/// (`%10d`) or `str.format` (`{:>10}`) format string: the digits of every
/// conversion specification are checked.
fn format_widths(format: &str, printf: bool) -> Result<()> {
    let spec_digits = |spec: &str| -> Result<()> {
        for run in spec
            .split(|c: char| !c.is_ascii_digit())
            .filter(|r| !r.is_empty())
        {
            width(
                "a format width or precision",
                run.parse().unwrap_or(usize::MAX),
            )?;
        }
        Ok(())
    };
    if printf {
        let mut rest = format;
        while let Some(at) = rest.find('%') {
            rest = &rest[at + 1..];
            if let Some(after) = rest.strip_prefix('%') {
                rest = after;
                continue;
            }
            if rest.starts_with('(') {
                rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
            }
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || "#0- +.".contains(c)))
                .unwrap_or(rest.len());
            spec_digits(&rest[..end])?;
            rest = &rest[end..];
        }
    } else {
        for field in format.split('{').skip(1) {
            let field = field.split('}').next().unwrap_or("");
            if let Some((_, spec)) = field.split_once(':') {
                spec_digits(spec)?;
            }
        }
    }
    Ok(())
}

fn format(state: &State, format_str: &JinjaValue, args: Rest<JinjaValue>) -> Result<JinjaValue> {
    if let Some(s) = format_str.as_str() {
        format_widths(s, true)?;
    }
    minijinja::filters::format(state, format_str, args)
}

/// A `fmt::Write` that refuses to grow past a limit.
struct Capped {
    text: String,
    limit: usize,
}

impl Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.text.len() + s.len() > self.limit {
            return Err(std::fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

fn pprint(value: &JinjaValue) -> Result<String> {
    bounds::size_of(value, MAX_VALUE_SIZE)?;
    let mut out = Capped {
        text: String::new(),
        limit: MAX_VALUE_SIZE,
    };
    write!(out, "{value:#?}").map_err(|_| {
        refuse(format!(
            "pprint would write more than {MAX_VALUE_SIZE} bytes (MAX_VALUE_SIZE)"
        ))
    })?;
    Ok(out.text)
}

/// Python's string, list and dict methods (minijinja-contrib's pycompat),
/// with the sizes their arguments imply checked first.
fn methods(
    state: &State,
    value: &JinjaValue,
    method: &str,
    args: &[JinjaValue],
) -> Result<JinjaValue> {
    charge(0)?;
    if let Some(s) = value.as_str() {
        let text = |i: usize| args.get(i).and_then(JinjaValue::as_str);
        match method {
            "format" => format_widths(s, false)?,
            "replace" => {
                let count = args.get(2).and_then(JinjaValue::as_i64);
                let count = count.and_then(|c| usize::try_from(c).ok());
                let (from, to) = (text(0).unwrap_or(""), text(1).unwrap_or(""));
                output("str.replace", replaced_len(s, from, to, count))?;
            }
            "join" => {
                let n = args.first().map(items).transpose()?.unwrap_or(0);
                output("str.join", n.saturating_mul(s.len()))?;
            }
            "strip" | "lstrip" | "rstrip" => {
                let chars = text(0).map_or(1, |c| c.chars().count());
                charge(s.len().saturating_mul(chars))?;
            }
            _ => {
                for arg in args.iter().filter(|a| a.is_integer()) {
                    let n = arg.as_i64().unwrap_or(i64::MAX).unsigned_abs();
                    width(&format!("an argument of str.{method}"), n as usize)?;
                }
            }
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// `tojson` as transformers defines it: Python's `json.dumps` (separators
/// `", "` and `": "`, or newlines and `indent` spaces; keys in the order
/// the template wrote them), refused past [`MAX_VALUE_SIZE`] bytes or an
/// indent past [`bounds::MAX_WIDTH`].
fn tojson(value: JinjaValue, kwargs: Kwargs) -> Result<JinjaValue> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    if let Some(indent) = indent {
        width("tojson indent", indent)?;
    }
    let mut out = String::new();
    python_json(&value, indent, 0, &mut out)?;
    charge(out.len())?;
    Ok(JinjaValue::from_safe_string(out))
}

fn python_json(
    value: &JinjaValue,
    indent: Option<usize>,
    depth: usize,
    out: &mut String,
) -> Result<()> {
    if depth > MAX_VALUE_DEPTH {
        return Err(refuse(format!(
            "tojson met lists or maps nested more than {MAX_VALUE_DEPTH} deep (MAX_VALUE_DEPTH)"
        )));
    }
    let newline = |out: &mut String, depth: usize| -> Result<()> {
        if let Some(width) = indent {
            output("tojson", out.len() + 1 + width * depth)?;
            out.push('\n');
            out.push_str(&" ".repeat(width * depth));
        }
        Ok(())
    };
    let separator = if indent.is_some() { "," } else { ", " };
    let scalar = |v: &JinjaValue| -> Result<String> {
        let json = serde_json::to_value(v)
            .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, e.to_string()))?;
        Ok(json.to_string())
    };
    let is_map = value.kind() == ValueKind::Map;
    match value.kind() {
        ValueKind::Map | ValueKind::Seq | ValueKind::Iterable => {
            let (open, close) = if is_map { ('{', '}') } else { ('[', ']') };
            let mut empty = true;
            out.push(open);
            for (i, item) in value.try_iter()?.enumerate() {
                empty = false;
                if i > 0 {
                    out.push_str(separator);
                }
                newline(out, depth + 1)?;
                if is_map {
                    let name = item
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| item.to_string());
                    out.push_str(&Value::String(name).to_string());
                    out.push_str(": ");
                    python_json(&value.get_item(&item)?, indent, depth + 1, out)?;
                } else {
                    python_json(&item, indent, depth + 1, out)?;
                }
                output("tojson", out.len())?;
            }
            if !empty {
                newline(out, depth)?;
            }
            out.push(close);
        }
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        _ => out.push_str(&scalar(value)?),
    }
    output("tojson", out.len())
}
