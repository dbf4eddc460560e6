//! Answers held to a JSON schema while they are decoded, so a local
//! judge's answer always parses (llama.cpp does the same with a grammar).
//!
//! The structure — braces, property names, commas — is written by us; the
//! model decides only the values: a boolean or an enum member is the
//! likeliest of its alternatives (each scored as a whole continuation), a
//! number's digits are the likeliest digit tokens until ending the number
//! is likelier, a string's content the likeliest tokens that neither close
//! nor escape it until its closing quote is likelier (or its length runs
//! out). Decoding is greedy.
//!
//! The subset enforced: `object` (every listed property, in order),
//! `array` (`items`, `minItems`, `maxItems`), `boolean`, `integer`,
//! `number`, `string` (`maxLength`), `enum` and `const`. A schema using
//! anything else is refused with what it used, rather than answered
//! unconstrained.

use super::LocalBackend;
use super::model::{DecoderError, KvCache};
use serde_json::Value;

/// Longest free string or number when the schema sets no bound, in tokens.
const MAX_FREE_TOKENS: usize = 96;
/// Most digits of a number: beyond them an integer no longer fits 64 bits
/// and a float loses them anyway.
const MAX_DIGITS: usize = 15;
/// Most array items when the schema sets no `maxItems`.
const MAX_ITEMS: usize = 16;

/// The part of a JSON schema the local judge enforces.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    /// Properties in the order they are written.
    Object(Vec<(String, Schema)>),
    /// Between `min` and `max` items of one schema.
    Array {
        /// The items' schema.
        items: Box<Schema>,
        /// Fewest items.
        min: usize,
        /// Most items.
        max: usize,
    },
    /// `true` or `false`.
    Boolean,
    /// Digits, maybe signed.
    Integer,
    /// Digits with at most one decimal point, maybe signed.
    Number,
    /// A string of at most this many characters.
    String(Option<usize>),
    /// One of these values.
    Enum(Vec<Value>),
}

impl Schema {
    /// Reads `text`; a schema outside the subset is refused naming what
    /// it used.
    pub fn parse(text: &str) -> Result<Schema, DecoderError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            DecoderError::Schema(format!("the query's JSON schema is not JSON: {e}"))
        })?;
        Self::from_value(&value, text)
    }

    /// `text` is the schema as written: a JSON map here does not keep
    /// the order of its keys, and properties are written in the order
    /// the schema lists them (an explanation before its verdict).
    fn from_value(v: &Value, text: &str) -> Result<Schema, DecoderError> {
        if let Some(values) = v.get("enum").and_then(Value::as_array) {
            if values.is_empty() {
                return Err(DecoderError::Schema("an empty enum".into()));
            }
            return Ok(Schema::Enum(values.clone()));
        }
        if let Some(value) = v.get("const") {
            return Ok(Schema::Enum(vec![value.clone()]));
        }
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let bound = |key: &str| v.get(key).and_then(Value::as_u64).map(|n| n as usize);
        Ok(match kind {
            "object" => {
                let Some(properties) = v.get("properties").and_then(Value::as_object) else {
                    return Err(DecoderError::Schema(
                        "an object schema without properties".into(),
                    ));
                };
                let mut fields = properties
                    .iter()
                    .map(|(name, s)| Ok((name.clone(), Self::from_value(s, text)?)))
                    .collect::<Result<Vec<_>, DecoderError>>()?;
                let written_at = |name: &str| {
                    let quoted = serde_json::to_string(name).unwrap_or_default();
                    text.find(&quoted).unwrap_or(usize::MAX)
                };
                fields.sort_by_key(|(name, _)| written_at(name));
                Schema::Object(fields)
            }
            "array" => {
                let items = v
                    .get("items")
                    .ok_or_else(|| DecoderError::Schema("an array schema without items".into()))?;
                let min = bound("minItems").unwrap_or(0);
                let max = bound("maxItems").unwrap_or(MAX_ITEMS.max(min));
                if max < min {
                    return Err(DecoderError::Schema(format!(
                        "maxItems {max} below minItems {min}"
                    )));
                }
                Schema::Array {
                    items: Box::new(Self::from_value(items, text)?),
                    min,
                    max,
                }
            }
            "boolean" => Schema::Boolean,
            "integer" => Schema::Integer,
            "number" => Schema::Number,
            "string" => Schema::String(bound("maxLength")),
            other => {
                return Err(DecoderError::Schema(format!(
                    "the local judge cannot enforce a schema of type {other:?} (object, array, \
                     boolean, integer, number, string, enum, const)"
                )));
            }
        })
    }
}

/// Where a constrained answer stands: the model's state after the text so
/// far, and the next token's log-probabilities.
pub(crate) struct Cursor<'a> {
    backend: &'a LocalBackend,
    cache: KvCache,
    next: Vec<f32>,
    /// The answer so far.
    pub(crate) text: String,
    /// Tokens run for it.
    pub(crate) tokens: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(backend: &'a LocalBackend, cache: KvCache, next: Vec<f32>) -> Self {
        Cursor {
            backend,
            cache,
            next,
            text: String::new(),
            tokens: 0,
        }
    }

    /// Writes the answer `schema` describes.
    pub(crate) fn value(&mut self, schema: &Schema, follow: &str) -> Result<(), DecoderError> {
        match schema {
            Schema::Object(fields) => {
                self.literal("{")?;
                for (i, (name, field)) in fields.iter().enumerate() {
                    let key = serde_json::to_string(name)
                        .map_err(|e| DecoderError::Schema(e.to_string()))?;
                    self.literal(&format!("{}{key}: ", if i > 0 { ", " } else { "" }))?;
                    let after = if i + 1 < fields.len() { ", " } else { "}" };
                    self.value(field, after)?;
                }
                self.literal("}")
            }
            Schema::Array { items, min, max } => {
                self.literal("[")?;
                let mut count = 0;
                while count < *max {
                    if count >= *min && self.pick(&[", ".into(), "]".into()])? == 1 {
                        break;
                    }
                    if count > 0 {
                        self.literal(", ")?;
                    }
                    self.value(items, ", ")?;
                    count += 1;
                }
                self.literal("]")
            }
            Schema::Boolean => self.choose(&["true".into(), "false".into()]),
            Schema::Enum(values) => {
                let written: Vec<String> = values.iter().map(Value::to_string).collect();
                self.choose(&written)
            }
            Schema::Integer => self.number(false, follow),
            Schema::Number => self.number(true, follow),
            Schema::String(max_len) => self.string(*max_len),
        }
    }

    /// Runs `text` as the model's own tokens.
    fn literal(&mut self, text: &str) -> Result<(), DecoderError> {
        let ids = self.backend.vocabulary.encode_continuation(text);
        self.run(&ids)?;
        self.text += text;
        Ok(())
    }

    fn run(&mut self, ids: &[u32]) -> Result<(), DecoderError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.next = self
            .backend
            .model
            .forward(ids, &mut self.cache, 1)?
            .remove(0);
        self.tokens += ids.len();
        Ok(())
    }

    /// Writes the likeliest of `options`.
    fn choose(&mut self, options: &[String]) -> Result<(), DecoderError> {
        let best = self.pick(options)?;
        self.literal(&options[best])
    }

    /// The index of the likeliest of `options`, each scored as a whole
    /// continuation of the answer so far.
    fn pick(&self, options: &[String]) -> Result<usize, DecoderError> {
        let mut best = (0, f64::NEG_INFINITY);
        for (i, option) in options.iter().enumerate() {
            let score = self
                .backend
                .continuation_logprob(&self.cache, &self.next, option)?;
            if let Some(score) = score.filter(|&s| s > best.1) {
                best = (i, score);
            }
        }
        Ok(best.0)
    }

    /// Digits (and one point when `decimal`) until ending the number —
    /// writing the first token of `follow` — is likelier than going on.
    fn number(&mut self, decimal: bool, follow: &str) -> Result<(), DecoderError> {
        let end = self
            .backend
            .vocabulary
            .encode_continuation(follow)
            .first()
            .copied();
        let mut written = String::new();
        for _ in 0..MAX_FREE_TOKENS {
            let digit = self.best_token(|piece| {
                let candidate = format!("{written}{piece}");
                !piece.is_empty()
                    && number_prefix(&candidate, decimal)
                    && candidate.chars().filter(char::is_ascii_digit).count() <= MAX_DIGITS
            });
            let end_score = end
                .filter(|_| complete_number(&written))
                .map(|id| self.next[id as usize]);
            match (digit, end_score) {
                (Some((_, score)), Some(end)) if end >= score => break,
                (Some((id, _)), _) => {
                    let piece = self.backend.vocabulary.decode(&[id]);
                    self.run(&[id])?;
                    self.text += &piece;
                    written += &piece;
                }
                (None, _) => break,
            }
        }
        // Nothing likely enough was a digit: a number is still written.
        if !complete_number(&written) {
            self.literal("0")?;
        }
        Ok(())
    }

    /// A string: its content's tokens until the closing quote is likelier
    /// or the length runs out.
    fn string(&mut self, max_len: Option<usize>) -> Result<(), DecoderError> {
        self.literal("\"")?;
        let close = self.backend.vocabulary.encode_continuation("\"");
        let mut length = 0;
        let limit = max_len.unwrap_or(usize::MAX);
        for _ in 0..MAX_FREE_TOKENS {
            let room = limit.saturating_sub(length);
            let content = self.best_token(|piece| {
                !piece.is_empty()
                    && piece.chars().count() <= room
                    && !piece.contains(['"', '\\', '\u{fffd}'])
                    && !piece.chars().any(char::is_control)
            });
            let close_score = close.first().map(|&id| self.next[id as usize]);
            match (content, close_score) {
                (Some((_, score)), Some(close)) if close >= score => break,
                (Some((id, _)), _) => {
                    let piece = self.backend.vocabulary.decode(&[id]);
                    self.run(&[id])?;
                    length += piece.chars().count();
                    self.text += &piece;
                }
                (None, _) => break,
            }
        }
        self.literal("\"")
    }

    /// The likeliest token whose text `allowed` accepts, with its
    /// log-probability.
    fn best_token(&self, allowed: impl Fn(&str) -> bool) -> Option<(u32, f32)> {
        let mut order: Vec<u32> = (0..self.next.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.next[b as usize].total_cmp(&self.next[a as usize]));
        order
            .into_iter()
            .filter(|&id| self.next[id as usize].is_finite())
            .find(|&id| {
                !self.backend.vocabulary.is_stop(id)
                    && allowed(&self.backend.vocabulary.decode(&[id]))
            })
            .map(|id| (id, self.next[id as usize]))
    }
}

/// Whether `text` can begin a JSON number: an optional minus, digits
/// without a leading zero, and (when `decimal`) one point after at least
/// one digit.
fn number_prefix(text: &str, decimal: bool) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let whole = digits.split('.').next().unwrap_or_default();
    if whole.len() > 1 && whole.starts_with('0') {
        return false;
    }
    match digits.split_once('.') {
        None => digits.chars().all(|c| c.is_ascii_digit()),
        Some((whole, fraction)) => {
            decimal
                && !whole.is_empty()
                && whole.chars().all(|c| c.is_ascii_digit())
                && fraction.chars().all(|c| c.is_ascii_digit())
        }
    }
}

/// Whether `text`, a [`number_prefix`], is a whole JSON number.
fn complete_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && !digits.ends_with('.')
        && digits.chars().next().is_some_and(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subset_is_read_and_anything_else_refused() {
        let schema = Schema::parse(
            r#"{"type": "array", "minItems": 2, "maxItems": 2,
                "items": {"type": "object", "properties": {"criteria_met": {"type": "boolean"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            schema,
            Schema::Array {
                items: Box::new(Schema::Object(vec![(
                    "criteria_met".into(),
                    Schema::Boolean
                )])),
                min: 2,
                max: 2
            }
        );
        assert!(
            Schema::parse(r#"{"type": "null"}"#)
                .unwrap_err()
                .to_string()
                .contains("\"null\"")
        );
        assert!(Schema::parse(r#"{"type": "array"}"#).is_err());
        assert!(Schema::parse("not json").is_err());
    }

    #[test]
    fn properties_keep_the_order_they_are_written_in() {
        let schema = Schema::parse(
            r#"{"type": "object", "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}}}"#,
        )
        .unwrap();
        let Schema::Object(fields) = schema else {
            panic!()
        };
        assert_eq!(fields[0].0, "explanation");
    }

    #[test]
    fn number_prefixes() {
        assert!(number_prefix("-12.5", true) && number_prefix("-", false));
        assert!(!number_prefix("1.5", false) && !number_prefix(".5", true));
        assert!(!number_prefix("07", false) && number_prefix("0.7", true));
        assert!(complete_number("12") && !complete_number("-") && !complete_number("3."));
    }
}
