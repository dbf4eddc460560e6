//! Contract 0.3's packed batch, host side. `judge-packed` takes the samples
//! as one postcard buffer and answers the judgments as another (and
//! `aggregate-packed` likewise), so a batch crosses the sandbox with one
//! allocation and one copy each way instead of one `cabi_realloc` per
//! string. The fields a rubric does not read (`reads`) are sent empty.

use crate::bindings::{Context, Judgment, Sample, SampleFields, Scoring, aggregator, rubric};
use crate::host_state::HostState;
use serde::de::DeserializeOwned;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use wasmtime::Store;

/// One sample as the rubric sees it: the fields it does not read are empty.
/// Serialized exactly as [`Sample`] is (postcard writes a struct as its
/// fields in order), so the guest decodes a `Sample`.
struct Masked<'a> {
    sample: &'a Sample,
    reads: SampleFields,
}

impl<'a> Serialize for Masked<'a> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (sample, reads) = (self.sample, self.reads);
        let text = |field: SampleFields, value: &'a String| match reads.contains(field) {
            true => value.as_str(),
            false => "",
        };
        let mut out = serializer.serialize_struct("Sample", 6)?;
        out.serialize_field("id", &sample.id)?;
        out.serialize_field("prompt", text(SampleFields::PROMPT, &sample.prompt))?;
        out.serialize_field("response", text(SampleFields::RESPONSE, &sample.response))?;
        let reference = match reads.contains(SampleFields::REFERENCE) {
            true => sample.reference.as_deref(),
            false => None,
        };
        out.serialize_field("reference", &reference)?;
        out.serialize_field("context", text(SampleFields::CONTEXT, &sample.context))?;
        let metadata: &[(String, String)] = match reads.contains(SampleFields::METADATA) {
            true => &sample.metadata,
            false => &[],
        };
        out.serialize_field("metadata", metadata)?;
        out.end()
    }
}

/// A batch as the rubric sees it, encoded as `list<sample>` is.
struct MaskedBatch<'a> {
    samples: &'a [Sample],
    reads: SampleFields,
}

impl Serialize for MaskedBatch<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let reads = self.reads;
        serializer.collect_seq(self.samples.iter().map(|sample| Masked { sample, reads }))
    }
}

/// The postcard encoding of `samples` with only the fields in `reads`.
pub(crate) fn encode_samples(samples: &[Sample], reads: SampleFields) -> Vec<u8> {
    let read = |field: SampleFields, len: usize| if reads.contains(field) { len } else { 0 };
    let bytes: usize = samples
        .iter()
        .map(|s| {
            s.id.len()
                + read(SampleFields::PROMPT, s.prompt.len())
                + read(SampleFields::RESPONSE, s.response.len())
                + read(
                    SampleFields::REFERENCE,
                    s.reference.as_ref().map_or(0, String::len),
                )
                + read(SampleFields::CONTEXT, s.context.len())
                + 16
        })
        .sum();
    postcard::to_extend(&MaskedBatch { samples, reads }, Vec::with_capacity(bytes))
        .expect("samples always encode: strings, options and lists only")
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

/// Judges `samples` through a 0.3 rubric's `judge-packed`.
pub(crate) fn judge(
    store: &mut Store<HostState>,
    rubric: &rubric::Rubric,
    ctx: &Context,
    samples: &[Sample],
) -> Unpacked<Result<Judgment, String>> {
    let exports = rubric.verifine_plugin_rubric_plugin();
    let reads = match store.data().rubric_reads {
        Some(reads) => reads,
        None => {
            let reads = exports.call_reads(&mut *store)?;
            store.data_mut().rubric_reads = Some(reads);
            reads
        }
    };
    let packed = encode_samples(samples, reads);
    let answer = exports.call_judge_packed(&mut *store, ctx, &packed)?;
    Ok(decode("judge-packed", &answer))
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
