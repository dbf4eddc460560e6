//! Finding the final answer in a response and reading it as a number.

use crate::scan;

/// How the final answer was marked in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// `\boxed{…}`
    Boxed,
    /// `#### N` (GSM8K's convention)
    Hashes,
    /// `A: N` at the start of a line
    AnswerPrefix,
    /// No marker: the last number in the text.
    LastNumber,
}

impl Marker {
    /// Whether the response followed an answer format (anything but the fallback).
    pub fn is_explicit(self) -> bool {
        self != Marker::LastNumber
    }

    /// How the marker is named in explanations.
    pub fn label(self) -> &'static str {
        match self {
            Marker::Boxed => "\\boxed{}",
            Marker::Hashes => "####",
            Marker::AnswerPrefix => "A:",
            Marker::LastNumber => "last number",
        }
    }
}

/// The final answer of `text`: its marker and its numeric value, when one is found.
pub fn final_answer(text: &str) -> Option<(Marker, f64)> {
    let last = last_markers(text);
    if let Some(inner) = last.boxed {
        return parse_number(inner).map(|n| (Marker::Boxed, n));
    }
    if let Some(at) = last.hashes {
        return parse_number(first_line(&text[at + 4..])).map(|n| (Marker::Hashes, n));
    }
    if let Some(after) = last.answer_prefix {
        return parse_number(first_line(&text[after..])).map(|n| (Marker::AnswerPrefix, n));
    }
    last_number(&strip_calculator_annotations(text)).map(|n| (Marker::LastNumber, n))
}

/// The reference's answer: a marked answer of a worked solution, else the whole
/// text as a number, else its last number.
pub fn reference_answer(reference: &str) -> Option<f64> {
    match final_answer(reference) {
        Some((marker, n)) if marker.is_explicit() => Some(n),
        _ => parse_number(reference)
            .or_else(|| last_number(&strip_calculator_annotations(reference))),
    }
}

/// Equal up to a relative tolerance that absorbs decimal rendering (0.1 + 0.2).
pub fn same_number(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// Where each marker last occurs in a text.
#[derive(Default)]
struct LastMarkers<'a> {
    /// Content of the last `\boxed{…}`, when its braces balance.
    boxed: Option<&'a str>,
    /// Whether a `\boxed{` was seen: only the last one counts.
    boxed_seen: bool,
    /// Start of the last `####`.
    hashes: Option<usize>,
    /// End of the last line-initial `A:` or `Answer:`.
    answer_prefix: Option<usize>,
}

/// Every marker's last occurrence, in one backward pass over the bytes
/// where a marker's first byte occurs (all three are ASCII, so never
/// inside a multi-byte character). A balanced `\boxed{…}` outranks the
/// others wherever it is, so the pass ends there; an unbalanced last one
/// counts as none, and earlier ones are not looked at.
fn last_markers(text: &str) -> LastMarkers<'_> {
    let bytes = text.as_bytes();
    let mut last = LastMarkers::default();
    let mut end = bytes.len();
    while let Some(at) = scan::last_of_three(bytes, end, [b'\\', b'#', b'A']) {
        let rest = &bytes[at..];
        match bytes[at] {
            b'\\' if !last.boxed_seen && rest.starts_with(b"\\boxed{") => {
                last.boxed_seen = true;
                last.boxed = balanced_content(text, at + "\\boxed{".len());
                if last.boxed.is_some() {
                    break;
                }
            }
            b'#' if last.hashes.is_none() && rest.starts_with(b"####") => last.hashes = Some(at),
            b'A' if last.answer_prefix.is_none() && starts_line(text, at) => {
                last.answer_prefix = ["A:", "Answer:"]
                    .iter()
                    .find(|prefix| rest.starts_with(prefix.as_bytes()))
                    .map(|prefix| at + prefix.len());
            }
            _ => {}
        }
        end = at;
    }
    last
}

/// Only whitespace between the line's start and `at`.
fn starts_line(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .rev()
        .take_while(|&c| c != '\n')
        .all(char::is_whitespace)
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// The text from `start` up to the brace that closes the one just before it.
fn balanced_content(text: &str, start: usize) -> Option<&str> {
    let mut depth = 1usize;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Drops GSM8K calculator annotations such as `<<16-3=13>>`.
fn strip_calculator_annotations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("<<") {
        out.push_str(&rest[..open]);
        match rest[open..].find(">>") {
            Some(close) => rest = &rest[open + close + 2..],
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Reads the first number of an answer span: signs, thousands separators,
/// currency and percent signs, a trailing period, `a/b` and `\frac{a}{b}`.
pub fn parse_number(span: &str) -> Option<f64> {
    let span = span.trim();
    if let Some(value) = parse_latex_fraction(span) {
        return Some(value);
    }
    let tokens = number_tokens(span);
    let first = tokens.first()?;
    // "3/4" or "3 / 4": a fraction when the slash directly joins two numbers.
    if let Some(next) = tokens.get(1) {
        let between = span[first.end..next.start].trim();
        if between == "/" && next.value != 0.0 {
            return Some(first.value / next.value);
        }
    }
    Some(first.value)
}

fn parse_latex_fraction(span: &str) -> Option<f64> {
    let negative = span.starts_with('-');
    let body = span.trim_start_matches('-');
    let body = body
        .strip_prefix("\\frac")
        .or_else(|| body.strip_prefix("\\dfrac"))
        .or_else(|| body.strip_prefix("\\tfrac"))?;
    let (numerator, rest) = braced(body)?;
    let (denominator, _) = braced(rest)?;
    let value = parse_number(numerator)? / parse_number(denominator)?;
    Some(if negative { -value } else { value })
}

fn braced(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start().strip_prefix('{')?;
    let close = text.find('}')?;
    Some((&text[..close], &text[close + 1..]))
}

fn last_number(text: &str) -> Option<f64> {
    number_tokens(text).last().map(|t| t.value)
}

struct NumberToken {
    value: f64,
    start: usize,
    end: usize,
}

/// Every number in `text`, left to right. A comma counts as a thousands
/// separator only between digits followed by exactly three digits.
fn number_tokens(text: &str) -> Vec<NumberToken> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit()
            || (bytes[i] == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        if !starts_number {
            i += 1;
            continue;
        }
        let negative = is_sign_of_number(bytes, i);
        let start = if negative { i - 1 } else { i };
        // Digits (separators dropped) go to a stack buffer; numbers longer
        // than it are not answers we can compare exactly anyway.
        let mut digits = [0u8; 64];
        let mut len = 0;
        let mut seen_point = false;
        while i < bytes.len() {
            let b = bytes[i];
            let keep = if b.is_ascii_digit() {
                true
            } else if b == b','
                && !seen_point
                && bytes
                    .get(i + 1..i + 4)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
                && !bytes.get(i + 4).is_some_and(u8::is_ascii_digit)
            {
                false // thousands separator
            } else if b == b'.' && !seen_point && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
                seen_point = true;
                true
            } else {
                break;
            };
            if keep && len < digits.len() {
                digits[len] = b;
                len += 1;
            }
            i += 1;
        }
        let magnitude = std::str::from_utf8(&digits[..len])
            .ok()
            .and_then(|d| d.parse::<f64>().ok());
        if let Some(magnitude) = magnitude {
            tokens.push(NumberToken {
                value: if negative { -magnitude } else { magnitude },
                start,
                end: i,
            });
        }
    }
    tokens
}

/// A '-' right before the digits (or before a '$') is a sign unless it joins
/// two words or numbers ("5-3", "well-2").
fn is_sign_of_number(bytes: &[u8], digit_at: usize) -> bool {
    let mut j = digit_at;
    if j > 0 && bytes[j - 1] == b'$' {
        j -= 1;
    }
    if j == 0 || bytes[j - 1] != b'-' {
        return false;
    }
    j -= 1;
    j == 0 || !bytes[j - 1].is_ascii_alphanumeric()
}
