//! A template's question line: `{name,default}` placeholders between plain
//! text, and the finishing the package gives a rendered question (numbers
//! of five or more digits grouped by commas, sentences capitalised), so a
//! variant reads like the data set's own questions.

use super::eval_error::EvalError;
use super::value::Value;
use std::collections::HashMap;

/// A piece of the question line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    /// A variable's value.
    Var(String),
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A question line's pieces and its placeholders' `(name, default)`.
pub(crate) type Placeholders = (Vec<Piece>, Vec<(String, String)>);

/// Splits a question line into pieces, with each placeholder's default
/// (the original problem's value, as written) in order of appearance. A
/// brace that does not open a `{name,default}` placeholder is an error
/// (the package would leave it in the question as it is).
pub(crate) fn placeholders(line: &str) -> Result<Placeholders, String> {
    let chars: Vec<char> = line.chars().collect();
    let (mut pieces, mut defaults) = (Vec::new(), Vec::new());
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '}' => return Err(format!("column {}: `}}` without a placeholder", i + 1)),
            '{' => {
                let close = chars[i..].iter().position(|&c| c == '}').map(|p| i + p);
                let inner: String = close
                    .map(|c| chars[i + 1..c].iter().collect())
                    .unwrap_or_default();
                let Some((name, default)) = inner.split_once(',') else {
                    return Err(format!(
                        "column {}: `{{` does not open a `{{name,default}}` placeholder",
                        i + 1
                    ));
                };
                let default = default.trim_start();
                if name.is_empty() || !name.chars().all(is_word) || default.is_empty() {
                    return Err(format!(
                        "column {}: `{{{inner}}}` is not a `{{name,default}}` placeholder",
                        i + 1
                    ));
                }
                pieces.push(Piece::Text(std::mem::take(&mut text)));
                pieces.push(Piece::Var(name.to_string()));
                defaults.push((name.to_string(), default.to_string()));
                i = close.unwrap_or(i) + 1;
                continue;
            }
            c => text.push(c),
        }
        i += 1;
    }
    pieces.push(Piece::Text(text));
    pieces.retain(|p| *p != Piece::Text(String::new()));
    Ok((pieces, defaults))
}

/// The question with each variable's value (as `str()` shows it) put in.
pub(crate) fn render(
    pieces: &[Piece],
    shown: &HashMap<String, Value>,
) -> Result<String, EvalError> {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Var(name) => match shown.get(name) {
                Some(value) => out.push_str(&value.display()?),
                None => return Err(EvalError::Value(format!("`{name}` has no value"))),
            },
        }
    }
    Ok(capitalize_sentences(&group_thousands(&out)))
}

/// `12345` → `12,345` and `12345.5` → `12,345.5` for every number standing
/// alone (not glued to letters); shorter integers are left as they are.
fn group_thousands(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_number = chars[i].is_ascii_digit() && (i == 0 || !is_word(chars[i - 1]));
        if !starts_number {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run_end = |from: usize| {
            (from..chars.len())
                .find(|&k| !chars[k].is_ascii_digit())
                .unwrap_or(chars.len())
        };
        let int_end = run_end(i);
        let int_part: String = chars[i..int_end].iter().collect();
        let alone = |end: usize| end == chars.len() || !is_word(chars[end]);
        let has_fraction = chars.get(int_end) == Some(&'.')
            && chars.get(int_end + 1).is_some_and(char::is_ascii_digit);
        let (grouped, end) = if has_fraction && alone(run_end(int_end + 1)) {
            let frac_end = run_end(int_end + 1);
            let fraction: String = chars[int_end..frac_end].iter().collect();
            (format!("{}{fraction}", group(&int_part)), frac_end)
        } else if int_part.len() >= 5 && alone(int_end) && group(&int_part).contains(',') {
            // (A run of five digits below 10000, `00123`, stays as written.)
            (group(&int_part), int_end)
        } else {
            (int_part, int_end)
        };
        out.push_str(&grouped);
        i = end;
    }
    out
}

/// Without leading zeros, and with commas every three digits from 10000 on
/// (`1234` stays).
fn group(digits: &str) -> String {
    let digits = digits.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if digits.len() < 5 {
        return digits.to_string();
    }
    let mut out = String::new();
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first letter, and a lowercase ASCII letter after `.`, `!` or `?`
/// (and any spaces), made uppercase.
fn capitalize_sentences(text: &str) -> String {
    let mut out = String::new();
    let mut after_stop = false;
    for (k, c) in text.chars().enumerate() {
        if k == 0 {
            out.extend(c.to_uppercase());
        } else if after_stop && c.is_ascii_lowercase() {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c);
        }
        after_stop = matches!(c, '.' | '!' | '?') || (after_stop && c.is_whitespace());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_and_sentences_capitalised() {
        assert_eq!(
            group_thousands("$400000 and 1234 and 12345.25 and 0.5 x12345 00123"),
            "$400,000 and 1234 and 12,345.25 and 0.5 x12345 00123"
        );
        assert_eq!(
            capitalize_sentences("a b. c d?  e 2.5 f"),
            "A b. C d?  E 2.5 f"
        );
    }

    #[test]
    fn placeholders_keep_defaults_and_refuse_stray_braces() {
        let (pieces, defaults) = placeholders("{n, Benny} saw a {x,10}-foot shark").unwrap();
        assert_eq!(pieces.len(), 4);
        assert_eq!(
            defaults,
            vec![("n".into(), "Benny".into()), ("x".into(), "10".into())]
        );
        assert!(placeholders("a {x} b").unwrap_err().contains("column 3"));
        assert!(placeholders("a } b").is_err());
    }
}
