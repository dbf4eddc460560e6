//! Reading contract 0.3's packed samples: in place, as borrowed views (the
//! fast path, [`crate::in_place`]), or into the strings of the previous
//! batch (the owned path). Decoding through serde allocates every string of
//! every sample afresh and frees it after the call; reading into the last
//! batch reuses the capacity it left, so a steady run of batches allocates
//! nothing on the way in. (A component's linear memory never shrinks, so
//! holding the last batch's capacity costs the host nothing more.)
//!
//! The bytes are postcard's encoding of `list<sample>`, as the contract
//! documents: a varint count, then per sample its fields in order, a
//! string as a varint length and UTF-8 bytes, an option as a 0/1 tag.

use crate::Sample;
use crate::in_place::{Metadata, SampleView};

/// Where a packed batch stops making sense.
#[derive(Debug, PartialEq)]
pub(crate) struct PackedError {
    /// Byte offset of the problem in the batch.
    pub(crate) at: usize,
    /// What was expected there.
    pub(crate) reason: &'static str,
}

impl std::fmt::Display for PackedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.at, self.reason)
    }
}

/// Replaces `samples` with the batch in `bytes`, reusing the strings (and
/// metadata pairs) already there.
pub(crate) fn read_samples_into(
    bytes: &[u8],
    samples: &mut Vec<Sample>,
) -> Result<(), PackedError> {
    let mut views = views(bytes)?;
    samples.truncate(views.len());
    let mut i = 0;
    while let Some(view) = views.next_view()? {
        if i == samples.len() {
            samples.push(empty_sample());
        }
        copy_into(&view, &mut samples[i]);
        i += 1;
    }
    views.finish()
}

/// The samples of a packed batch, read in place one at a time.
pub(crate) struct Views<'a> {
    reader: Reader<'a>,
    left: usize,
    count: usize,
}

/// Starts reading the batch in `bytes`.
pub(crate) fn views(bytes: &[u8]) -> Result<Views<'_>, PackedError> {
    let mut reader = Reader { bytes, at: 0 };
    let count = reader.len()?;
    // Six bytes is the smallest sample (six empty fields): a count larger
    // than that allows is garbage, not a reason to reserve memory.
    if count > bytes.len() / 6 {
        return Err(reader.error("a sample count larger than the batch can hold"));
    }
    Ok(Views {
        reader,
        left: count,
        count,
    })
}

impl<'a> Views<'a> {
    /// How many samples the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The next sample, or `None` after the last.
    pub(crate) fn next_view(&mut self) -> Result<Option<SampleView<'a>>, PackedError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.reader.view().map(Some)
    }

    /// Checks that nothing follows the last sample.
    pub(crate) fn finish(self) -> Result<(), PackedError> {
        if self.left > 0 {
            return Err(self.reader.error("samples left unread"));
        }
        if self.reader.at != self.reader.bytes.len() {
            return Err(self.reader.error("bytes after the last sample"));
        }
        Ok(())
    }
}

/// The `count` metadata pairs encoded in `bytes` (checked when the view
/// holding them was read).
pub(crate) fn pairs(bytes: &[u8], count: usize) -> impl Iterator<Item = (&str, &str)> {
    let mut reader = Reader { bytes, at: 0 };
    (0..count).map(move |_| {
        let key = reader.text().expect("metadata checked when read");
        let value = reader.text().expect("metadata checked when read");
        (key, value)
    })
}

fn copy_into(view: &SampleView<'_>, sample: &mut Sample) {
    let copy = |text: &str, out: &mut String| {
        out.clear();
        out.push_str(text);
    };
    copy(view.id, &mut sample.id);
    copy(view.prompt, &mut sample.prompt);
    copy(view.response, &mut sample.response);
    match view.reference {
        None => sample.reference = None,
        Some(text) => copy(text, sample.reference.get_or_insert_with(String::new)),
    }
    copy(view.context, &mut sample.context);
    let mut pairs = 0;
    for (key, value) in view.metadata() {
        if pairs == sample.metadata.len() {
            sample.metadata.push((String::new(), String::new()));
        }
        let (k, v) = &mut sample.metadata[pairs];
        copy(key, k);
        copy(value, v);
        pairs += 1;
    }
    sample.metadata.truncate(pairs);
}

fn empty_sample() -> Sample {
    Sample {
        id: String::new(),
        prompt: String::new(),
        response: String::new(),
        reference: None,
        context: String::new(),
        metadata: Vec::new(),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, reason: &'static str) -> PackedError {
        PackedError {
            at: self.at,
            reason,
        }
    }

    fn byte(&mut self) -> Result<u8, PackedError> {
        let byte = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.error("the batch ends early"))?;
        self.at += 1;
        Ok(byte)
    }

    /// A postcard varint (LEB128, at most ten bytes) that must fit a `usize`.
    fn len(&mut self) -> Result<usize, PackedError> {
        let mut at = self.at;
        let value = verifine_contract::wire::varint(self.bytes, &mut at);
        self.at = at;
        value.map_err(|reason| self.error(reason))
    }

    fn text(&mut self) -> Result<&'a str, PackedError> {
        let len = self.len()?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.error("a string longer than the batch"))?;
        let bytes = &self.bytes[self.at..end];
        let text = if cfg!(all(target_arch = "wasm32", not(debug_assertions))) {
            // SAFETY: in a component the batch comes from the host, which
            // encodes it from Rust strings; trusting it is what the
            // canonical ABI's own string lifting does in release builds
            // (wit-bindgen's `string_lift`). Native builds, where tests
            // feed hostile bytes, and debug builds check.
            unsafe { std::str::from_utf8_unchecked(bytes) }
        } else {
            std::str::from_utf8(bytes).map_err(|_| self.error("a string that is not UTF-8"))?
        };
        self.at = end;
        Ok(text)
    }

    fn view(&mut self) -> Result<SampleView<'a>, PackedError> {
        let id = self.text()?;
        let prompt = self.text()?;
        let response = self.text()?;
        let reference = match self.byte()? {
            0 => None,
            1 => Some(self.text()?),
            _ => {
                self.at -= 1;
                return Err(self.error("an option tag other than 0 or 1"));
            }
        };
        let context = self.text()?;
        let count = self.len()?;
        if count > (self.bytes.len() - self.at) / 2 {
            return Err(self.error("more metadata pairs than the batch can hold"));
        }
        let start = self.at;
        for _ in 0..count {
            self.text()?;
            self.text()?;
        }
        Ok(SampleView {
            id,
            prompt,
            response,
            reference,
            context,
            metadata: Metadata::Packed {
                bytes: &self.bytes[start..self.at],
                count,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: &str, reference: Option<&str>, metadata: &[(&str, &str)]) -> Sample {
        Sample {
            id: id.into(),
            prompt: format!("prompt of {id}"),
            response: "é 42 — ünïcode".repeat(id.len()),
            reference: reference.map(str::to_string),
            context: r#"{"k": 1}"#.into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn read(bytes: &[u8], into: &mut Vec<Sample>) -> Result<(), PackedError> {
        read_samples_into(bytes, into)
    }

    #[test]
    fn reads_what_postcard_writes_and_reuses_the_last_batch() {
        let first = vec![
            sample("a", Some("#### 4"), &[("k", "v"), ("k2", "v2")]),
            sample("bb", None, &[]),
            sample(&"c".repeat(300), Some(""), &[("x", "")]),
        ];
        // Fewer samples, options flipped, metadata shrunk and grown.
        let second = vec![
            sample("bb", Some("18"), &[("only", "one")]),
            sample("a", None, &[("1", "1"), ("2", "2"), ("3", "3")]),
        ];
        let mut batch = Vec::new();
        for expected in [&first, &second, &Vec::new(), &first] {
            // The SDK's records have no `PartialEq`: compare their encodings.
            let bytes = postcard::to_stdvec(expected).unwrap();
            read(&bytes, &mut batch).unwrap();
            assert_eq!(postcard::to_stdvec(&batch).unwrap(), bytes);
            assert_eq!(batch.len(), expected.len());
        }
    }

    #[test]
    fn broken_batches_are_named_with_their_offset() {
        let bytes = postcard::to_stdvec(&vec![sample("a", Some("1"), &[])]).unwrap();
        let mut batch = Vec::new();
        let error = read(&bytes[..bytes.len() - 1], &mut batch).unwrap_err();
        assert!(error.reason.ends_with("ends early"), "{}", error.reason);
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(read(&trailing, &mut batch).unwrap_err().at, bytes.len());
        // A count of 2^32 in a six-byte batch, an overlong varint, bad UTF-8.
        assert!(read(&[0x80, 0x80, 0x80, 0x80, 0x10, 0], &mut batch).is_err());
        assert_eq!(
            read(&[0xff; 11], &mut batch).unwrap_err().reason,
            "a length over 64 bits"
        );
        let not_utf8 = [1, 1, 0xff, 0, 0, 0, 0, 0];
        assert_eq!(
            read(&not_utf8, &mut batch).unwrap_err(),
            PackedError {
                at: 2,
                reason: "a string that is not UTF-8"
            }
        );
        let bad_option = [1, 0, 0, 0, 7, 0, 0];
        assert_eq!(read(&bad_option, &mut batch).unwrap_err().at, 4);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut batch = Vec::new();
        for len in 0..2000 {
            let bytes: Vec<u8> = (0..len % 97)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 7) as u8
                })
                .collect();
            let _ = read(&bytes, &mut batch);
        }
    }
}
