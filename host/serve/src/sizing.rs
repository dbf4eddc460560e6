//! How many samples a body holds, found without building them: one pass
//! over the JSON that allocates nothing per element, so a 16 MiB body of
//! millions of empty queries is refused in milliseconds instead of costing
//! gigabytes of samples first.

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// The number of elements of a JSON list.
struct ListLength(usize);

impl<'de> Deserialize<'de> for ListLength {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(LengthVisitor)
    }
}

struct LengthVisitor;

impl<'de> Visitor<'de> for LengthVisitor {
    type Value = ListLength;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ListLength, A::Error> {
        let mut n = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            n += 1;
        }
        Ok(ListLength(n))
    }
}

/// OpenRLHF's body as far as counting goes: the other fields are skipped.
#[derive(Deserialize)]
struct OpenRlhfQueries {
    query: ListLength,
}

/// The number of samples in an OpenRLHF body (its queries); `None` when
/// the body is not one (parsing then says why).
pub fn openrlhf_samples(body: &[u8]) -> Option<usize> {
    serde_json::from_slice::<OpenRlhfQueries>(body)
        .ok()
        .map(|b| b.query.0)
}

/// `/v1/score`'s body as far as counting goes: a list of rows, or an
/// object whose `rows` is one.
struct ScoreRows(usize);

impl<'de> Deserialize<'de> for ScoreRows {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RowsVisitor)
    }
}

struct RowsVisitor;

impl<'de> Visitor<'de> for RowsVisitor {
    type Value = ScoreRows;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of rows or {\"rows\": [...]}")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ScoreRows, A::Error> {
        LengthVisitor.visit_seq(seq).map(|n| ScoreRows(n.0))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ScoreRows, A::Error> {
        let mut rows = 0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "rows" {
                rows += map.next_value::<ListLength>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(ScoreRows(rows))
    }
}

/// The number of rows in a `/v1/score` body; `None` when the body is not
/// one (parsing then says why).
pub fn score_samples(body: &[u8]) -> Option<usize> {
    serde_json::from_slice::<ScoreRows>(body).ok().map(|r| r.0)
}

/// A slime body is one sample, whatever it holds.
pub fn slime_samples(_: &[u8]) -> Option<usize> {
    Some(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_counted_without_their_other_fields() {
        let body = br#"{"labels": [1, 2, 3], "query": ["a", "", {"x": [1]}], "prompts": null}"#;
        assert_eq!(openrlhf_samples(body), Some(3));
        assert_eq!(openrlhf_samples(br#"{"query": "a"}"#), None);
        assert_eq!(score_samples(br#"[{"id": 1}, {}]"#), Some(2));
        assert_eq!(
            score_samples(br#"{"meta": {"rows": []}, "rows": [1, 2, 3, 4]}"#),
            Some(4)
        );
        assert_eq!(score_samples(b"3"), None);
        assert_eq!(score_samples(b"not json"), None);
    }

    #[test]
    fn millions_of_empty_queries_are_counted_quickly() {
        let mut body = b"{\"query\": [".to_vec();
        for i in 0..2_000_000 {
            body.extend_from_slice(if i == 0 { b"\"\"" } else { b",\"\"" });
        }
        body.extend_from_slice(b"]}");
        let started = std::time::Instant::now();
        assert_eq!(openrlhf_samples(&body), Some(2_000_000));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
