//! Contract versions side by side: components built against 0.1 and 0.2
//! (without the SDK, frozen in `tests/plugins/contract-0-1` and
//! `contract-0-2`) load and run on the current host; 0.1's `judge-model`
//! questions reach the same judges as `ask-judges` (since 0.2), which also
//! carries judge names, choices and answers with usage; a 0.3 rubric gets
//! its batch packed with only the fields it reads.

use std::sync::{Arc, Mutex};
use verifine_runtime::judge_models::{
    JudgeModels, ModelAnswer, ModelError, ModelRequest, TokenUsage,
};
use verifine_runtime::{Limits, Runtime};
use verifine_tests::{LEGACY_CONTRACT_0_1, LEGACY_CONTRACT_0_2, ctx, sample};

/// Judges that say YES to responses containing "right", and remember what
/// they were asked.
#[derive(Default)]
struct Recording(Mutex<Vec<ModelRequest>>, std::time::Duration);

impl JudgeModels for Recording {
    fn ask(&self, _: &str, requests: &[ModelRequest]) -> Vec<Result<ModelAnswer, ModelError>> {
        self.0.lock().unwrap().extend(requests.iter().cloned());
        std::thread::sleep(self.1);
        requests
            .iter()
            .map(|r| {
                if r.judge != "judge" && r.judge != "golden-1" {
                    return Err(ModelError::UnknownJudge {
                        name: r.judge.clone(),
                        known: vec!["judge".into(), "golden-1".into()],
                    });
                }
                let yes = r.prompt.contains("right");
                let text = match (r.choices.is_empty(), yes) {
                    (true, true) => "YES, it is.",
                    (true, false) => "NO.",
                    (false, true) => "YES",
                    (false, false) => "NO",
                };
                Ok(ModelAnswer {
                    text: text.to_string(),
                    logprobs: Vec::new(),
                    usage: TokenUsage {
                        input: 10,
                        cached_input: 4,
                        output: 2,
                    },
                    model: "recording".into(),
                    seconds: 0.0,
                    cached: false,
                })
            })
            .collect()
    }
}

fn runtime(judges: Arc<Recording>) -> Runtime {
    Runtime::with_cache(Limits::default(), None)
        .unwrap()
        .with_judges(judges)
}

#[test]
fn a_component_built_against_0_1_loads_and_asks_the_judge() {
    let judges = Arc::new(Recording::default());
    let runtime = runtime(judges.clone());
    let legacy = runtime.load(LEGACY_CONTRACT_0_1).unwrap();
    assert_eq!(legacy.metadata.api_version.to_string(), "0.1.0");
    let mut instance = legacy.instance();
    let info = instance.describe().unwrap();
    assert_eq!(info.name, "legacy-contract-0-1");
    let results = instance
        .judge(
            &ctx(),
            &[sample("a", "the right answer"), sample("b", "wrong")],
        )
        .unwrap();
    let totals: Vec<Option<f64>> = results.iter().map(|r| r.as_ref().unwrap().total).collect();
    assert_eq!(totals, vec![Some(1.0), Some(0.0)]);
    let asked = judges.0.lock().unwrap();
    assert_eq!(asked.len(), 2);
    // 0.1 names no judge: its questions go to `judge`, as text.
    assert!(
        asked
            .iter()
            .all(|r| r.judge == "judge" && r.choices.is_empty())
    );
}

#[test]
fn a_component_built_against_0_2_gets_whole_samples_and_asks_named_judges() {
    let judges = Arc::new(Recording::default());
    let runtime = runtime(judges.clone());
    let legacy = runtime.load(LEGACY_CONTRACT_0_2).unwrap();
    assert_eq!(legacy.metadata.api_version.to_string(), "0.2.0");
    let mut instance = legacy.instance();
    assert_eq!(instance.describe().unwrap().name, "legacy-contract-0-2");
    let mut right = sample("a", "the right answer");
    right.prompt = "What is 6 x 7?".into();
    let results = instance
        .judge(&ctx(), &[right, sample("b", "wrong")])
        .unwrap();
    let judgments: Vec<_> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        judgments.iter().map(|j| j.total).collect::<Vec<_>>(),
        vec![Some(1.0), Some(0.0)]
    );
    // The prompt crossed (0.2 has no packed batch to leave it out of), and
    // the answer's usage came back through 0.2's own records.
    assert_eq!(
        judgments[0].explanation.as_deref(),
        Some(r#"prompt "What is 6 x 7?"; 10 input tokens"#)
    );
    let asked = judges.0.lock().unwrap();
    assert!(
        asked
            .iter()
            .all(|r| r.judge == "golden-1" && r.choices == ["YES", "NO"] && r.max_tokens == 1)
    );
}

#[test]
fn a_0_3_rubric_is_sent_only_the_fields_it_reads_and_answers_in_order() {
    let runtime = runtime(Arc::new(Recording::default()));
    let echo = runtime.load(verifine_tests::READS_ECHO).unwrap();
    assert_eq!(
        echo.metadata.api_version.to_string(),
        verifine_runtime::metadata::HOST_API_VERSION
    );
    let mut instance = echo.instance();
    let full = |id: &str, response: &str| verifine_runtime::Sample {
        id: id.into(),
        prompt: "a prompt \u{1F600}".into(),
        response: response.into(),
        reference: Some("#### 4".into()),
        context: r#"{"scenario": "x"}"#.into(),
        metadata: vec![("source".into(), "gsm8k".into())],
    };
    let batch: Vec<_> = (0..300)
        .map(|i| {
            full(
                &format!("s{i}"),
                if i == 7 { "fail" } else { "four \u{e9}" },
            )
        })
        .collect();
    let results = instance.judge(&ctx(), &batch).unwrap();
    assert_eq!(results.len(), batch.len());
    for (i, result) in results.iter().enumerate() {
        if i == 7 {
            assert_eq!(result.as_ref().unwrap_err(), "asked to fail on s7");
            continue;
        }
        let seen: serde_json::Value =
            serde_json::from_str(result.as_ref().unwrap().explanation.as_deref().unwrap()).unwrap();
        assert_eq!(
            seen,
            serde_json::json!({
                "id": format!("s{i}"),
                "prompt": "",
                "response": "four \u{e9}",
                "reference": null,
                "context": r#"{"scenario": "x"}"#,
                "metadata": [],
            })
        );
    }
}

#[test]
fn a_0_2_rubric_names_its_judge_and_constrains_the_answer() {
    let judges = Arc::new(Recording::default());
    let runtime = runtime(judges.clone());
    let healthbench = runtime.load("healthbench").unwrap();
    let mut instance = healthbench.instance();
    let context = serde_json::json!({"rubrics": [
        {"criterion": "says it is right", "points": 5},
        {"criterion": "is polite", "points": 3},
    ]});
    let mut row = sample("a", "this is right");
    row.context = context.to_string();
    let config = r#"{"judge": "golden-1", "answer": "yes-no"}"#;
    let ctx = verifine_runtime::Context {
        config: config.into(),
        ..ctx()
    };
    let judgment = instance
        .judge(&ctx, &[row.clone()])
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(judgment.total, Some(1.0), "{judgment:?}");
    {
        let asked = judges.0.lock().unwrap();
        assert_eq!(asked.len(), 2, "yes-no asks one item per query");
        assert!(
            asked
                .iter()
                .all(|r| r.judge == "golden-1" && r.choices == ["YES", "NO"])
        );
    }
    // An unknown judge is the sample's error, naming the judge.
    let ctx = verifine_runtime::Context {
        config: r#"{"judge": "nobody"}"#.into(),
        ..ctx
    };
    let error = instance.judge(&ctx, &[row]).unwrap().remove(0).unwrap_err();
    assert!(error.contains("nobody"), "{error}");
}

/// A judge slower than the plugin's whole call budget does not time the
/// plugin out: waiting on judges is the host's time. (The sandbox tests
/// show a plugin that loops on its own still stopped at its deadline.)
#[test]
fn waiting_on_a_slow_judge_is_not_the_plugins_time() {
    let slow = Arc::new(Recording(
        Mutex::default(),
        std::time::Duration::from_millis(700),
    ));
    let limits = Limits {
        call_timeout_ms: 300,
        ..Limits::default()
    };
    let runtime = Runtime::with_cache(limits, None).unwrap().with_judges(slow);
    let legacy = runtime.load(LEGACY_CONTRACT_0_1).unwrap();
    let results = legacy
        .instance()
        .judge(&ctx(), &[sample("a", "right")])
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().total, Some(1.0));
}

/// A training run whose reward asks a judge model (here the 0.1 component
/// above, through a local random-weight GGUF judge) logs what the judge
/// spent on each metrics line.
#[test]
fn a_training_run_logs_what_its_judge_spent() {
    use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
    let dir = verifine_tests::scratch_dir("judged-training");
    write_tiny_llama(&dir.join("judge.gguf"), TinySpec::default()).unwrap();
    let judges = dir.join("judges.toml");
    std::fs::write(
        &judges,
        format!(
            "[judges.judge]\nbackend = {{ kind = \"local-gguf\", path = {:?} }}\nprice = {{ input = 1.0, output = 1.0 }}\n",
            dir.join("judge.gguf").display().to_string()
        ),
    )
    .unwrap();
    let text = format!(
        r#"
train_problems = 50
heldout_problems = 4
eval_every = 0
vocab_size = 300
[model]
hidden_size = 16
num_layers = 1
num_heads = 2
num_kv_heads = 1
intermediate_size = 32
[sft]
steps = 1
batch_size = 2
[grpo]
steps = 2
prompts_per_step = 2
max_new_tokens = 6
objective = {{ num_generations = 2, dynamic_sampling = false }}
[reward]
rubric = {{ plugin = {legacy:?} }}
[judges]
file = {judges:?}
"#,
        legacy = LEGACY_CONTRACT_0_1,
        judges = judges.display().to_string(),
    );
    let config = verifine::run::RunConfig::from_toml(&text, "judged").unwrap();
    let run = dir.join("run");
    verifine::run::train(&config, &run).unwrap();
    let lines: Vec<serde_json::Value> = verifine_tests::read_rows(&run.join("metrics.jsonl"));
    let grpo: Vec<&serde_json::Value> = lines.iter().filter(|l| l["phase"] == "grpo").collect();
    assert_eq!(grpo.len(), 2);
    for line in grpo {
        let costs = &line["reward_costs"];
        // Two prompts × two generations, one query each.
        assert_eq!(costs["judge.judge.calls"], 4.0, "{line}");
        assert!(costs["judge.judge.usd"].as_f64().unwrap() > 0.0);
        assert!(costs["judge.judge.device_seconds"].as_f64().unwrap() > 0.0);
    }
}
