//! The fast path writes exactly what the owned path's serde encoding
//! writes, and reads what the host packs.

use super::*;
use crate::{ExplanationText, NoConfig, Number, RubricInfo, SubScore};

fn judgments() -> Vec<Judgment> {
    let long = "é—".repeat(100); // over 127 bytes: a two-byte length
    vec![
        Judgment::from_verdicts(vec![]),
        Judgment::from_verdicts(vec![Verdict::met("a", true), Verdict::met("b", false)])
            .with_total(Some(0.1))
            .because("answer 18 (by ####) vs reference 18"),
        Judgment::from_verdicts(vec![
            Verdict::scored("graded", 0.25)
                .with_confidence(0.9)
                .because(long.clone()),
            Verdict::scored(&long, -3.0),
        ])
        .with_total(Some(-0.0))
        .with_sub_score("action", 0.5)
        .with_sub_score(&long, f64::MIN_POSITIVE)
        .with_criteria(vec![
            Criterion::new("row-1", "Mentions the dose", -2.0)
                .in_dimension("accuracy")
                .with_tags(["axis:accuracy", "theme:emergency"]),
            Criterion::new("", "", 0.0),
        ])
        .because(""),
        Judgment {
            sub_scores: (0..200)
                .map(|i| SubScore {
                    name: i.to_string(),
                    value: i as f64,
                })
                .collect(),
            ..Judgment::from_verdicts(
                (0..130)
                    .map(|i| Verdict::met(&i.to_string(), i % 2 == 0))
                    .collect(),
            )
        },
    ]
}

#[test]
fn the_writer_writes_what_serde_writes() {
    for judgment in judgments() {
        let expected: Result<&Judgment, String> = Ok(&judgment);
        assert_eq!(
            encode_ok(&judgment),
            postcard::to_stdvec(&expected).unwrap()
        );
    }
}

#[test]
fn views_read_what_the_host_packs_and_copy_back_whole() {
    let samples = vec![
        Sample::new("a", "q", "r").with_reference("#### 4"),
        Sample {
            metadata: vec![("k".into(), "v".into()), ("é".into(), "—".repeat(70))],
            ..Sample::new("b", "", &"x".repeat(300))
        },
    ];
    let bytes = postcard::to_stdvec(&samples).unwrap();
    let mut views = packed::views(&bytes).unwrap();
    assert_eq!(views.len(), 2);
    let mut back = Vec::new();
    while let Some(view) = views.next_view().unwrap() {
        let owned = SampleView::of(&samples[back.len()]);
        assert_eq!(
            view.metadata().collect::<Vec<_>>(),
            owned.metadata().collect::<Vec<_>>()
        );
        back.push(view.to_sample());
    }
    views.finish().unwrap();
    assert_eq!(postcard::to_stdvec(&back).unwrap(), bytes);
}

/// One rule written both ways: the owned judgment, and the same judgment
/// through the writer's parts.
struct Parity;

impl Rubric for Parity {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("parity", "0.0.0")
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response.is_empty() {
            return Err(format!("{}: nothing to judge", sample.id));
        }
        let long = sample.response.len() > 3;
        Ok(Judgment::from_verdicts(vec![
            Verdict::met("long", long),
            Verdict::scored("share", sample.response.len() as f64 / 10.0).because(&sample.id),
        ])
        .with_total(Some(sample.response.len() as f64))
        .with_sub_score("length", 1.0)
        .because(format!(
            "{} bytes, {:?}",
            sample.response.len(),
            sample.reference
        )))
    }
}

impl RubricInPlace for Parity {
    fn judge_in_place(
        _: &NoConfig,
        _: &Context,
        sample: &SampleView<'_>,
        out: &mut JudgmentWriter<'_>,
    ) -> Result<(), String> {
        // Parts written out of order, and before a late failure: the
        // writer puts them in the contract's order, the failure drops them.
        out.explain(format_args!(
            "{} bytes, {:?}",
            sample.response.len(),
            sample.reference
        ))
        .verdict(VerdictRef::met("long", sample.response.len() > 3))
        .sub_score("length", 1.0);
        if sample.response.is_empty() {
            return Err(format!("{}: nothing to judge", sample.id));
        }
        out.verdict(
            VerdictRef::scored("share", sample.response.len() as f64 / 10.0).because(sample.id),
        )
        .total(sample.response.len() as f64);
        Ok(())
    }
}

#[test]
fn a_packed_batch_is_judged_as_the_owned_path_judges_it() {
    let samples: Vec<Sample> = ["ok", "", "a longer one", "é"]
        .iter()
        .enumerate()
        .map(|(i, r)| Sample::new(&format!("s{i}"), "q", r).with_reference("1"))
        .collect();
    let ctx = Context::at_step(3);
    let owned = crate::__private::judge::<Parity>(&ctx, &samples);
    let mut answer = Vec::new();
    let mut scratch = Scratch::default();
    let bytes = postcard::to_stdvec(&samples).unwrap();
    judge_packed::<Parity>(
        &Ok(NoConfig::default()),
        &ctx,
        &bytes,
        &mut scratch,
        &mut answer,
    )
    .unwrap();
    assert_eq!(answer, postcard::to_stdvec(&owned).unwrap());
    for (sample, judged) in samples.iter().zip(&owned) {
        let by_writer = judge_owned::<Parity>(&NoConfig::default(), &ctx, sample);
        assert_eq!(
            postcard::to_stdvec(&by_writer).unwrap(),
            postcard::to_stdvec(judged).unwrap()
        );
    }

    // A config that did not parse: every sample carries its error.
    answer.clear();
    judge_packed::<Parity>(
        &Err("bad config".into()),
        &ctx,
        &bytes,
        &mut scratch,
        &mut answer,
    )
    .unwrap();
    let judged: Vec<Result<Judgment, String>> = postcard::from_bytes(&answer).unwrap();
    assert!(
        judged
            .iter()
            .all(|j| j.as_ref().unwrap_err() == "bad config")
    );
}

#[test]
fn hostile_batches_are_errors_not_panics() {
    let bytes = postcard::to_stdvec(&vec![Sample::new("a", "q", "r")]).unwrap();
    let mut scratch = Scratch::default();
    let judge = |bytes: &[u8], scratch: &mut Scratch| {
        judge_packed::<Parity>(
            &Ok(NoConfig::default()),
            &Context::at_step(0),
            bytes,
            scratch,
            &mut Vec::new(),
        )
    };
    assert!(judge(&bytes[..bytes.len() - 1], &mut scratch).is_err());
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        judge(&trailing, &mut scratch).unwrap_err().reason,
        "bytes after the last sample"
    );
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for len in 0..3000 {
        let bytes: Vec<u8> = (0..len % 89)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 5) as u8
            })
            .collect();
        let _ = judge(&bytes, &mut scratch);
    }
}

#[test]
fn a_number_formats_as_f64_does() {
    let mut values = vec![
        0.0,
        -0.0,
        1.0,
        -5.0,
        18.0,
        0.5,
        -0.75,
        1e15,
        9_007_199_254_740_991.0,
    ];
    values.extend([
        9_007_199_254_740_992.0,
        1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]);
    values.extend([f64::MIN_POSITIVE, 1234.5678, -1e-7]);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        values.push(f64::from_bits(state));
        values.push((state % 100_000) as f64 - 50_000.0);
    }
    for v in values {
        assert_eq!(Number(v).to_string(), v.to_string(), "{v:?}");
        let mut pieces = String::from("x=");
        ExplanationText::appending_to(&mut pieces)
            .push_number(v)
            .push_str(";");
        assert_eq!(pieces, format!("x={v};"));
        assert_eq!(
            format!("{:.2}|{:>8}|{:+}", Number(v), Number(v), Number(v)),
            format!("{v:.2}|{v:>8}|{v:+}")
        );
    }
}
