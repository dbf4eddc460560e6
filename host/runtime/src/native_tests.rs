//! Tests of the native plugin loader.

use super::*;

#[test]
fn refuses_without_opt_in_before_touching_the_file() {
    let err = NativePlugin::load("/no/such/libplugin.so", false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not sandboxed"), "{err}");
    assert!(err.contains(OPT_IN_FLAG), "{err}");
    assert!(err.contains("/no/such/libplugin.so"), "{err}");
}

#[test]
fn a_missing_file_is_named() {
    let err = NativePlugin::load("/no/such/file.so", true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("reading native plugin"), "{err}");
}

/// Host records (wasmtime's bindings) and guest records (wit-bindgen's)
/// must encode identically (postcard relies on field order), or native
/// calls would fail to decode.
#[test]
fn host_and_sdk_records_share_one_encoding() {
    use crate::{Criterion, DimensionHistory, Selection, SubScore, Verdict};
    use verifine_plugin_api as sdk;

    fn round_trip<H, G>(host: &H)
    where
        H: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
        G: Serialize + DeserializeOwned,
    {
        let bytes = postcard::to_stdvec(host).unwrap();
        let guest: G = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(postcard::to_stdvec(&guest).unwrap(), bytes);
        let back: H = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(&back, host);
    }

    let criterion = Criterion {
        id: "c".into(),
        description: "d".into(),
        weight: -0.5,
        dimension: "accuracy".into(),
        tags: vec!["t".into()],
    };
    let judgment = Judgment {
        total: Some(0.25),
        verdicts: vec![Verdict {
            criterion: "c".into(),
            score: 0.5,
            met: Some(true),
            confidence: None,
            explanation: Some("why".into()),
        }],
        sub_scores: vec![SubScore {
            name: "s".into(),
            value: 1.0,
        }],
        criteria: vec![criterion.clone()],
        explanation: None,
    };
    round_trip::<_, sdk::Scoring>(&Scoring {
        criteria: vec![criterion],
        judgment: judgment.clone(),
    });
    round_trip::<_, Result<sdk::Judgment, String>>(&Ok::<_, String>(judgment));
    round_trip::<_, sdk::Sample>(&Sample {
        id: "i".into(),
        prompt: "p".into(),
        response: "r".into(),
        reference: None,
        context: "{}".into(),
        metadata: vec![("k".into(), "v".into())],
    });
    round_trip::<_, sdk::Candidate>(&Candidate {
        sample_id: "i".into(),
        tags: vec![],
        history: vec![DimensionHistory {
            dimension: "d".into(),
            scores: vec![0.1, 0.9],
        }],
        reward_mean: 0.5,
        reward_std: 0.1,
        rollouts: 8,
        reference_score: Some(1.0),
    });
    for selection in [Selection::Drop, Selection::Keep(2.0)] {
        round_trip::<_, sdk::CurriculumDecision>(&CurriculumDecision {
            selection,
            reason: "r".into(),
        });
    }
    round_trip::<_, sdk::MonitorPoint>(&MonitorPoint {
        step: 3,
        round: 1,
        evaluator_score: 0.5,
        judge_reward: 0.7,
    });
    round_trip::<_, sdk::TriggerDecision>(&TriggerDecision {
        fire: true,
        reason: "plateau".into(),
    });
    round_trip::<_, sdk::Context>(&Context {
        step: 1,
        round: 2,
        config: "{}".into(),
    });
}
