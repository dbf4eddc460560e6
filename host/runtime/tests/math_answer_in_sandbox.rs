//! math-answer judges the same inside the sandbox as linked in. The
//! component finds its markers with wasm's SIMD (sixteen bytes a step) and
//! the linked crate with 64-bit words: texts with every marker byte and
//! near-miss at every offset, shorter and longer than a step, must get the
//! same judgment both ways.

use verifine_plugin_api as api;
use verifine_plugin_api::Rubric;
use verifine_runtime::{Context, Limits, Runtime, Sample};

/// Pieces the texts are made of: markers, their first bytes alone,
/// near-misses, numbers, line breaks, a multi-byte character.
const PIECES: [&str; 16] = [
    "\\boxed{",
    "}",
    "####",
    "#",
    "\\",
    "A:",
    "A",
    "Answer:",
    "\n",
    " ",
    "7",
    "-3",
    "1,000",
    "x",
    "é",
    "<<2+2=4>>",
];

/// Half the samples are their own reference (the reference's markers are
/// found the same way), half have a plain number.
fn reference(i: usize, text: &str) -> &str {
    if i.is_multiple_of(2) { text } else { "7" }
}

#[test]
fn the_component_judges_as_the_linked_crate_does() {
    let mut state = 0x853c_49e6_748f_ea9b_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let texts: Vec<String> = (0..3000)
        .map(|i| {
            let pieces = i % 48;
            (0..pieces).map(|_| PIECES[next(PIECES.len())]).collect()
        })
        .collect();
    let runtime = Runtime::new(Limits::default()).unwrap();
    let mut component = runtime.load("math-answer").unwrap().instance();
    let ctx = Context {
        step: 0,
        round: 0,
        config: "{}".into(),
    };
    let config = math_answer::Config::default();
    let mut compared = 0;
    for batch in texts.chunks(256) {
        let host: Vec<Sample> = batch
            .iter()
            .enumerate()
            .map(|(i, text)| {
                Sample::new(i.to_string(), "q", text).with_reference(reference(i, text))
            })
            .collect();
        let guest: Vec<api::Sample> = batch
            .iter()
            .enumerate()
            .map(|(i, text)| {
                api::Sample::new(&i.to_string(), "q", text).with_reference(reference(i, text))
            })
            .collect();
        let sandboxed = component.judge(&ctx, &host).unwrap();
        let linked =
            math_answer::MathAnswer::judge_batch(&config, &api::Context::at_step(0), &guest);
        for ((text, sandboxed), linked) in batch.iter().zip(&sandboxed).zip(&linked) {
            assert_eq!(
                serde_json::to_value(sandboxed).unwrap(),
                serde_json::to_value(linked).unwrap(),
                "{text:?}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, texts.len());
}
