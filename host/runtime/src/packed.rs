//! Contract 0.3's packed batch, host side. `judge-packed` takes the samples
//! as one postcard buffer and answers the judgments as another (and
//! `aggregate-packed` likewise), so a batch crosses the sandbox with one
//! allocation and one copy each way instead of one `cabi_realloc` per
//! string. The fields a rubric does not read (`reads`) are sent empty.

use crate::bindings::{Context, Sample, SampleFields, Scoring, aggregator, rubric};
use crate::host_state::HostState;
use serde::de::DeserializeOwned;
use verifine_contract::wire::{put_text, put_varint};
use wasmtime::Store;

/// The postcard encoding of `samples` (as `list<sample>`) with only the
/// fields in `reads`: the others are sent empty.
#[cfg(test)]
pub(crate) fn encode_samples(samples: &[Sample], reads: SampleFields) -> Vec<u8> {
    let mut out = Vec::new();
    encode_samples_into(samples, reads, &mut out);
    out
}

/// [`encode_samples`] into `out` (cleared first), whose capacity a steady
/// run of batches reuses: a batch is often larger than the allocator's
/// threshold for mapping fresh pages.
pub(crate) fn encode_samples_into(samples: &[Sample], reads: SampleFields, out: &mut Vec<u8>) {
    let read = |field: SampleFields, text: &str| match reads.contains(field) {
        true => text.len(),
        false => 0,
    };
    let bytes: usize = samples
        .iter()
        .map(|s| {
            s.id.len()
                + read(SampleFields::PROMPT, &s.prompt)
                + read(SampleFields::RESPONSE, &s.response)
                + read(
                    SampleFields::REFERENCE,
                    s.reference.as_deref().unwrap_or(""),
                )
                + read(SampleFields::CONTEXT, &s.context)
                + 32
        })
        .sum();
    out.clear();
    out.reserve(bytes + 10);
    put_varint(out, samples.len());
    let field = |out: &mut Vec<u8>, field: SampleFields, text: &str| match reads.contains(field) {
        true => put_text(out, text),
        false => out.push(0),
    };
    for sample in samples {
        put_text(out, &sample.id);
        field(out, SampleFields::PROMPT, &sample.prompt);
        field(out, SampleFields::RESPONSE, &sample.response);
        match sample.reference.as_deref() {
            Some(reference) if reads.contains(SampleFields::REFERENCE) => {
                out.push(1);
                put_text(out, reference);
            }
            _ => out.push(0),
        }
        field(out, SampleFields::CONTEXT, &sample.context);
        match reads.contains(SampleFields::METADATA) {
            true => {
                put_varint(out, sample.metadata.len());
                for (key, value) in &sample.metadata {
                    put_text(out, key);
                    put_text(out, value);
                }
            }
            false => out.push(0),
        }
    }
}

/// A packed call's outcome: the outer error is the call's (a trap), the
/// inner one an answer that does not decode.
pub(crate) type Unpacked<T> = wasmtime::Result<Result<Vec<T>, String>>;

/// The answer of `call` (a packed export), or what is wrong with it.
pub(crate) fn decode<T: DeserializeOwned>(call: &str, bytes: &[u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| {
        format!(
            "{call} answered {} bytes that do not decode as its results: {e}",
            bytes.len()
        )
    })
}

/// Judges `samples` through a 0.3 rubric's `judge-packed`: its answer, not
/// yet checked ([`answer_error`] names what does not decode).
pub(crate) fn judge(
    store: &mut Store<HostState>,
    rubric: &rubric::Rubric,
    ctx: &Context,
    samples: &[Sample],
) -> wasmtime::Result<Vec<u8>> {
    let exports = rubric.verifine_plugin_rubric_plugin();
    let reads = match store.data().rubric_reads {
        Some(reads) => reads,
        None => {
            let reads = exports.call_reads(&mut *store)?;
            store.data_mut().rubric_reads = Some(reads);
            reads
        }
    };
    let mut packed = std::mem::take(&mut store.data_mut().packed_samples);
    encode_samples_into(samples, reads, &mut packed);
    let answer = exports.call_judge_packed(&mut *store, ctx, &packed);
    store.data_mut().packed_samples = packed;
    answer
}

/// Why `judge-packed`'s answer of `len` bytes was refused.
pub(crate) fn answer_error(len: usize, error: String) -> String {
    format!("judge-packed answered {len} bytes that do not decode as its results: {error}")
}

/// Aggregates `items` through a 0.3 aggregator's `aggregate-packed`.
pub(crate) fn aggregate(
    store: &mut Store<HostState>,
    aggregator: &aggregator::Aggregator,
    ctx: &Context,
    items: &[Scoring],
) -> Unpacked<Result<Option<f64>, String>> {
    let packed = postcard::to_stdvec(items).expect("scorings always encode");
    let answer = aggregator
        .verifine_plugin_aggregator_plugin()
        .call_aggregate_packed(&mut *store, ctx, &packed)?;
    Ok(decode("aggregate-packed", &answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::Judgment;

    fn sample() -> Sample {
        Sample {
            id: "s1".into(),
            prompt: "What is 2 + 2?".into(),
            response: "4".into(),
            reference: Some("#### 4".into()),
            context: r#"{"tag": "x"}"#.into(),
            metadata: vec![("k".into(), "v".into())],
        }
    }

    #[test]
    fn every_field_read_is_the_samples_own_encoding() {
        let samples = vec![
            sample(),
            Sample {
                reference: None,
                ..sample()
            },
        ];
        let packed = encode_samples(&samples, SampleFields::all());
        assert_eq!(packed, postcard::to_stdvec(&samples).unwrap());
        let back: Vec<Sample> = postcard::from_bytes(&packed).unwrap();
        assert_eq!(back, samples);
    }

    #[test]
    fn unread_fields_arrive_empty() {
        let packed = encode_samples(
            &[sample()],
            SampleFields::RESPONSE | SampleFields::REFERENCE,
        );
        let back: Vec<Sample> = postcard::from_bytes(&packed).unwrap();
        let expected = Sample {
            id: "s1".into(),
            prompt: String::new(),
            response: "4".into(),
            reference: Some("#### 4".into()),
            context: String::new(),
            metadata: Vec::new(),
        };
        assert_eq!(back, vec![expected]);
        let nothing: Vec<Sample> =
            postcard::from_bytes(&encode_samples(&[sample()], SampleFields::empty())).unwrap();
        assert_eq!(
            (nothing[0].id.as_str(), nothing[0].reference.as_ref()),
            ("s1", None)
        );
    }

    #[test]
    fn a_broken_answer_is_named_not_trusted() {
        let judgments: Vec<Result<Judgment, String>> = vec![Err("no reference".into())];
        let bytes = postcard::to_stdvec(&judgments).unwrap();
        let decoded: Vec<Result<Judgment, String>> = decode("judge-packed", &bytes).unwrap();
        assert_eq!(decoded, judgments);
        for broken in [&bytes[..bytes.len() - 1], &[0xff; 12][..], &[][..]] {
            let error =
                decode::<Vec<Result<Judgment, String>>>("judge-packed", broken).unwrap_err();
            assert!(error.starts_with("judge-packed answered"), "{error}");
        }
    }
}
