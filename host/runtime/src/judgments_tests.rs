//! The packed answer read in place agrees with postcard's encoding, field
//! by field and as JSON, and everything else is refused, without
//! panicking, by its byte offset.

use super::*;

/// The owned results of a packed answer, or why it does not decode, read
/// both ways (in one pass, and checked then copied from the view): they
/// must agree, refusals included.
fn judgments(bytes: &[u8]) -> Result<Vec<Result<Judgment, String>>, String> {
    let viewed = Judgments::from_packed(bytes.to_vec()).map(|batch| batch.to_owned_results());
    assert_eq!(decode_owned(bytes), viewed);
    viewed
}

fn answer() -> Vec<Result<Judgment, String>> {
    let long = "é—".repeat(90);
    let verdict = |criterion: &str, met: Option<bool>| Verdict {
        criterion: criterion.into(),
        score: 0.25,
        met,
        confidence: met.map(|_| 0.5),
        explanation: met.map(|_| long.clone()),
    };
    vec![
        Ok(Judgment {
            total: Some(0.1),
            verdicts: vec![verdict("format", Some(true)), verdict("correct", None)],
            sub_scores: vec![SubScore {
                name: "action".into(),
                value: -1.5,
            }],
            criteria: vec![Criterion {
                id: "row-1".into(),
                description: long.clone(),
                weight: -2.0,
                dimension: "accuracy".into(),
                tags: vec!["axis:accuracy".into(), String::new()],
            }],
            explanation: Some("answer 18 (by ####) vs reference 18".into()),
        }),
        Err("math-answer needs a reference answer".into()),
        Ok(Judgment {
            total: None,
            verdicts: (0..200)
                .map(|i| verdict(&i.to_string(), Some(i % 2 == 0)))
                .collect(),
            sub_scores: vec![],
            criteria: vec![],
            explanation: None,
        }),
    ]
}

#[test]
fn reads_what_postcard_writes() {
    for results in [answer(), vec![]] {
        let bytes = postcard::to_stdvec(&results).unwrap();
        assert_eq!(judgments(&bytes).unwrap(), results);
    }
}

#[test]
fn the_view_reads_every_field_in_place_and_serializes_as_the_records_do() {
    let results = answer();
    let batch = Judgments::from_owned(&results);
    assert_eq!(batch.len(), results.len());
    for (view, owned) in batch.iter().zip(&results) {
        match (view, owned) {
            (Ok(view), Ok(owned)) => {
                assert_eq!(view.total(), owned.total);
                assert_eq!(view.verdicts().len(), owned.verdicts.len());
                for (v, o) in view.verdicts().zip(&owned.verdicts) {
                    assert_eq!(v.to_verdict(), *o);
                    assert_eq!(
                        serde_json::to_value(v).unwrap(),
                        serde_json::to_value(o).unwrap()
                    );
                }
                assert_eq!(view.explanation(), owned.explanation.as_deref());
                assert_eq!(view.to_judgment(), *owned);
                assert_eq!(
                    serde_json::to_string(&view).unwrap(),
                    serde_json::to_string(owned).unwrap()
                );
                for (c, o) in view.criteria().zip(&owned.criteria) {
                    assert_eq!(
                        serde_json::to_value(c).unwrap(),
                        serde_json::to_value(o).unwrap()
                    );
                }
            }
            (Err(view), Err(owned)) => assert_eq!(view, owned),
            (view, owned) => panic!("{view:?} read where {owned:?} was written"),
        }
    }
    assert!(batch.get(results.len()).is_none());
    assert!(Items::<VerdictRef>::empty().is_empty());
    assert_eq!(
        serde_json::to_string(&Items::<VerdictRef>::empty()).unwrap(),
        "[]"
    );
}

#[test]
fn every_truncation_and_trailing_byte_is_refused_by_offset() {
    let bytes = postcard::to_stdvec(&answer()).unwrap();
    for end in 0..bytes.len() {
        assert!(judgments(&bytes[..end]).is_err(), "cut at {end}");
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    let err = judgments(&trailing).unwrap_err();
    assert_eq!(
        err,
        format!("byte {}: bytes after the last result", bytes.len())
    );
    // One result whose error string is not UTF-8; a bad option tag.
    assert_eq!(
        judgments(&[1, 1, 1, 0xff]).unwrap_err(),
        "byte 3: a string that is not UTF-8"
    );
    assert_eq!(
        judgments(&[1, 0, 7]).unwrap_err(),
        "byte 2: an option tag other than 0 or 1"
    );
    assert!(judgments(&[0xff; 11]).unwrap_err().contains("64 bits"));
    // A count of 2^32 results in a five-byte answer reserves nothing.
    assert!(
        judgments(&[0x80, 0x80, 0x80, 0x80, 0x10])
            .unwrap_err()
            .contains("count")
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for len in 0..4000 {
        let bytes: Vec<u8> = (0..len % 131)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 4) as u8
            })
            .collect();
        let _ = judgments(&bytes);
    }
}
