//! Reading a rubric's packed answer (`list<result<judgment, string>>` in
//! postcard) straight into the host's records. The answer comes from the
//! sandbox, so every length is checked against the bytes left and every
//! string's UTF-8 is checked; what does not decode is named by its offset.
//! Decoding through serde did the same work through a visitor per field,
//! a fifth of the crossing's time (BENCHMARKS.md).

use crate::bindings::{Criterion, Judgment, SubScore, Verdict};

/// The judgments of a packed answer, or where and why it does not decode.
pub(crate) fn judgments(bytes: &[u8]) -> Result<Vec<Result<Judgment, String>>, String> {
    let mut reader = Reader { bytes, at: 0 };
    let results = reader.list(|r| match r.varint()? {
        0 => r.judgment().map(Ok),
        1 => r.text().map(Err),
        _ => Err(r.fail("a result tag other than 0 or 1")),
    })?;
    if reader.at != bytes.len() {
        return Err(reader.fail("bytes after the last result"));
    }
    Ok(results)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn fail(&self, reason: &str) -> String {
        format!("byte {}: {reason}", self.at)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.fail("the answer ends early"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    /// A LEB128 varint of at most ten bytes that fits a `usize`.
    fn varint(&mut self) -> Result<usize, String> {
        let mut at = self.at;
        let value = verifine_contract::wire::varint(self.bytes, &mut at);
        self.at = at;
        value.map_err(|reason| self.fail(reason))
    }

    /// `count` then the items; a count larger than the bytes left could
    /// hold (every item takes one at least) is refused before reserving.
    fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let count = self.varint()?;
        if count > self.bytes.len() - self.at {
            return Err(self.fail("a count larger than the answer can hold"));
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }

    fn text(&mut self) -> Result<String, String> {
        let len = self.varint()?;
        let start = self.at;
        let bytes = self.take(len)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => {
                self.at = start;
                Err(self.fail("a string that is not UTF-8"))
            }
        }
    }

    fn f64(&mut self) -> Result<f64, String> {
        let bytes: [u8; 8] = self.take(8)?.try_into().expect("eight bytes");
        Ok(f64::from_le_bytes(bytes))
    }

    fn option<T>(
        &mut self,
        value: impl FnOnce(&mut Self) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        match self.byte()? {
            0 => Ok(None),
            1 => value(self).map(Some),
            _ => {
                self.at -= 1;
                Err(self.fail("an option tag other than 0 or 1"))
            }
        }
    }

    fn bool(&mut self) -> Result<bool, String> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => {
                self.at -= 1;
                Err(self.fail("a bool other than 0 or 1"))
            }
        }
    }

    fn judgment(&mut self) -> Result<Judgment, String> {
        Ok(Judgment {
            total: self.option(Self::f64)?,
            verdicts: self.list(|r| {
                Ok(Verdict {
                    criterion: r.text()?,
                    score: r.f64()?,
                    met: r.option(Self::bool)?,
                    confidence: r.option(Self::f64)?,
                    explanation: r.option(Self::text)?,
                })
            })?,
            sub_scores: self.list(|r| {
                Ok(SubScore {
                    name: r.text()?,
                    value: r.f64()?,
                })
            })?,
            criteria: self.list(|r| {
                Ok(Criterion {
                    id: r.text()?,
                    description: r.text()?,
                    weight: r.f64()?,
                    dimension: r.text()?,
                    tags: r.list(Self::text)?,
                })
            })?,
            explanation: self.option(Self::text)?,
        })
    }
}

#[cfg(test)]
#[path = "packed_answer_tests.rs"]
mod tests;
