//! Declares that it reads the response and the context only, and answers
//! every sample with what arrived: each field's value in the explanation
//! (as JSON), so a test sees which fields crossed the packed batch and
//! which came empty.
use verifine_plugin_api::*;

pub struct ReadsEcho;

impl Rubric for ReadsEcho {
    type Config = NoConfig;
    const READS: SampleFields = SampleFields::RESPONSE.union(SampleFields::CONTEXT);
    fn describe() -> RubricInfo {
        RubricInfo::new("reads-echo", "0.1.0").criterion(Criterion::new("seen", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response == "fail" {
            return Err(format!("asked to fail on {}", sample.id));
        }
        let seen = serde_json::json!({
            "id": sample.id,
            "prompt": sample.prompt,
            "response": sample.response,
            "reference": sample.reference,
            "context": sample.context,
            "metadata": sample.metadata,
        });
        Ok(Judgment::from_verdicts(vec![Verdict::met("seen", true)]).because(seen.to_string()))
    }
}

export_plugin!(rubric: ReadsEcho);
