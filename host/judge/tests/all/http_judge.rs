//! The HTTP judge against a scripted OpenAI-compatible server: what is
//! sent, what is read back, retries, timeouts, the disk cache, budgets,
//! cost, and a HealthBench rubric scored through it inside the sandbox.

use std::sync::Arc;
use std::time::Duration;
use verifine_judge::scripted_server::{Reply, completion, serve};
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::judge_models::{JudgeModels, ModelError, ModelRequest};

/// One judge named `judge` at `url`, with extra TOML lines for its table.
fn judges(url: &str, extra: &str, cache: Option<&std::path::Path>) -> Judges {
    let cache = cache.map_or(String::new(), |d| {
        format!("cache_dir = {:?}\n", d.display().to_string())
    });
    let text = format!(
        "{cache}[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{url}\", model = \"m\", backoff_ms = 5 {extra} }}\n\
         price = {{ input = 1.0, cached_input = 0.5, output = 4.0 }}\n"
    );
    Judges::new(&JudgesConfig::parse(&text, "test.toml").unwrap()).unwrap()
}

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("judge-{name}"))
}

#[test]
fn an_answer_carries_text_logprobs_usage_model_and_the_request_what_was_asked() {
    let server = serve(|_, _| completion("YES\nbecause"));
    // SAFETY: the variable is set once, before any thread reads it, and named for this test only.
    unsafe { std::env::set_var("VERIFINE_TEST_KEY_ANSWER", "sk-test") };
    let judges = judges(
        &server.url,
        ", api_key_env = \"VERIFINE_TEST_KEY_ANSWER\"",
        None,
    );
    let request = ModelRequest {
        system: Some("grade".into()),
        temperature: Some(0.0),
        stop: vec!["\n\n".into()],
        json_schema: Some(r#"{"type": "object"}"#.into()),
        top_logprobs: 2,
        ..ModelRequest::new("Is it right?", 16)
    };
    let answers = judges.ask("healthbench", &[request]);
    let answer = answers[0].as_ref().unwrap();
    assert_eq!(answer.text, "YES\nbecause");
    assert_eq!(answer.model, "tiny-judge");
    assert_eq!(
        (
            answer.usage.input,
            answer.usage.cached_input,
            answer.usage.output
        ),
        (30, 10, 5)
    );
    assert_eq!(answer.logprobs[0].top[1], ("NO".to_string(), -2.4));
    assert!(!answer.cached);

    let sent = server.received.lock().unwrap()[0].clone();
    assert!(
        sent.head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-test"),
        "{}",
        sent.head
    );
    assert!(
        sent.head.starts_with("POST /v1/chat/completions"),
        "{}",
        sent.head
    );
    let body = sent.body;
    assert_eq!(body["model"], "m");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "Is it right?");
    assert_eq!(body["max_tokens"], 16);
    assert_eq!(body["stop"][0], "\n\n");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["type"],
        "object"
    );
    assert_eq!(
        (body["logprobs"].as_bool(), body["top_logprobs"].as_u64()),
        (Some(true), Some(2))
    );

    // Cost: 20 fresh input × 1 + 10 cached × 0.5 + 5 output × 4, per million.
    let ledger = judges.ledgers()["judge"];
    assert_eq!(ledger.calls, 1);
    assert!((ledger.usd - 45e-6).abs() < 1e-12, "{ledger:?}");
}

#[test]
fn rate_limits_and_server_errors_are_retried_and_client_errors_are_not() {
    let server = serve(|n, _| match n {
        0 => Reply::Status(429, Some(0)),
        1 => Reply::Status(503, None),
        _ => completion("NO"),
    });
    let retrying = judges(&server.url, ", retries = 3", None);
    let answers = retrying.ask("p", &[ModelRequest::new("q", 4)]);
    assert_eq!(answers[0].as_ref().unwrap().text, "NO");
    assert_eq!(retrying.ledgers()["judge"].calls, 3);

    let always = serve(|_, _| Reply::Status(500, None));
    let judges_ = judges(&always.url, ", retries = 1", None);
    let err = judges_.ask("p", &[ModelRequest::new("q", 4)])[0]
        .clone()
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("HTTP 500") && m.contains("after 2 attempts")),
        "{err}"
    );
    assert_eq!(judges_.ledgers()["judge"].failures, 1);

    let bad_request = serve(|_, _| Reply::Status(400, None));
    let judges_ = judges(&bad_request.url, ", retries = 3", None);
    let err = judges_.ask("p", &[ModelRequest::new("q", 4)])[0]
        .clone()
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("HTTP 400") && m.contains("after 1 attempt")),
        "{err}"
    );
    assert_eq!(bad_request.received.lock().unwrap().len(), 1);
}

#[test]
fn a_slow_server_times_out_per_request_and_a_dead_one_fails_cleanly() {
    let slow = serve(|_, _| Reply::After(Duration::from_millis(800), Box::new(completion("YES"))));
    let judges_ = judges(&slow.url, ", timeout_seconds = 0.2, retries = 1", None);
    let err = judges_.ask("p", &[ModelRequest::new("q", 4)])[0]
        .clone()
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("timed out after 0.2 s") && m.contains("2 attempts")),
        "{err}"
    );

    // Nothing listens there (a port just freed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let judges_ = judges(
        &format!("http://127.0.0.1:{port}/v1"),
        ", retries = 1",
        None,
    );
    let err = judges_.ask("p", &[ModelRequest::new("q", 4)])[0]
        .clone()
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport(m) if m.contains("connection") && m.contains("2 attempts")),
        "{err}"
    );
}

#[test]
fn the_disk_cache_answers_a_repeated_question_for_free() {
    let dir = scratch("cache");
    let server = serve(|_, _| completion("YES"));
    let first = judges(&server.url, "", Some(&dir));
    let q = ModelRequest::new("same question", 8);
    assert!(
        !first.ask("p", std::slice::from_ref(&q))[0]
            .as_ref()
            .unwrap()
            .cached
    );
    // A new process (new judges) with the same cache: no request sent.
    let again = judges(&server.url, "", Some(&dir));
    let hit = again.ask("p", std::slice::from_ref(&q))[0].clone().unwrap();
    assert!(hit.cached && hit.text == "YES" && hit.usage.input == 0);
    assert_eq!(server.received.lock().unwrap().len(), 1);
    let ledger = again.ledgers()["judge"];
    assert_eq!((ledger.calls, ledger.cache_hits, ledger.usd), (0, 1, 0.0));
    // Another temperature is another question.
    let warmer = ModelRequest {
        temperature: Some(0.7),
        ..q
    };
    assert!(!again.ask("p", &[warmer])[0].as_ref().unwrap().cached);
    assert_eq!(server.received.lock().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn budgets_stop_asking_and_say_so() {
    let server = serve(|_, _| completion("YES"));
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{}\", model = \"m\" }}\nbudget = {{ max_calls = 2 }}\n",
        server.url
    );
    let judges_ = Judges::new(&JudgesConfig::parse(&text, "t").unwrap()).unwrap();
    let asked: Vec<ModelRequest> = (0..3)
        .map(|i| ModelRequest::new(format!("q{i}"), 4))
        .collect();
    let answers = judges_.ask("p", &asked);
    assert!(answers[0].is_ok() && answers[1].is_ok());
    assert!(matches!(&answers[2], Err(ModelError::OverBudget(m)) if m.contains("max_calls 2")));
    let later = judges_.ask("p", &asked[..1]);
    assert!(matches!(&later[0], Err(ModelError::OverBudget(m)) if m.contains("budget exhausted")));
    assert_eq!(server.received.lock().unwrap().len(), 2);
}

#[test]
fn requests_in_flight_stay_under_the_concurrency_limit() {
    let server =
        serve(|_, _| Reply::After(Duration::from_millis(150), Box::new(completion("YES"))));
    let judges_ = judges(&server.url, ", concurrency = 2", None);
    let asked: Vec<ModelRequest> = (0..6)
        .map(|i| ModelRequest::new(format!("q{i}"), 4))
        .collect();
    assert!(judges_.ask("p", &asked).iter().all(Result::is_ok));
    let max = server
        .in_flight_max
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=2).contains(&max), "{max} in flight");
}

#[test]
fn invalid_utf8_in_an_answer_is_replaced_not_fatal() {
    let server = serve(|_, _| {
        let mut body = br#"{"choices": [{"message": {"content": "YES "#.to_vec();
        body.extend([0xff, 0xfe]);
        body.extend(br#""}}]}"#);
        Reply::Ok(body)
    });
    let answer = judges(&server.url, "", None).ask("p", &[ModelRequest::new("q", 4)])[0]
        .clone()
        .unwrap();
    assert!(
        answer.text.starts_with("YES ") && answer.text.contains('\u{FFFD}'),
        "{:?}",
        answer.text
    );
}

#[test]
fn configs_name_what_is_wrong() {
    let err = |text: &str| match JudgesConfig::parse(text, "j.toml") {
        Ok(config) => Judges::new(&config).err().unwrap().to_string(),
        Err(e) => e.to_string(),
    };
    let base = "[judges.judge]\nbackend = { kind = \"openai-http\", base_url = \"http://x/v1\", model = \"m\"";
    assert!(err(&format!("{base}, api_key = \"sk\" }}\n")).contains("api_key"));
    assert!(
        err(&format!(
            "{base}, api_key_env = \"VERIFINE_SURELY_UNSET\" }}\n"
        ))
        .contains("VERIFINE_SURELY_UNSET")
    );
    assert!(err(&format!("{base}, concurrency = 0 }}\n")).contains("concurrency"));
    assert!(err("[judges.judge]\nbackend = { kind = \"openai-http\", base_url = \"ftp://x\", model = \"m\" }\n")
        .contains("ftp://x"));
    assert!(err(&format!("{base} }}\nprice = {{ output = -1.0 }}\n")).contains("prices"));
    // A query naming an unknown judge fails alone, naming the known ones.
    let server = serve(|_, _| completion("YES"));
    let judges_ = judges(&server.url, "", None);
    let golden = ModelRequest {
        judge: "golden-1".into(),
        ..ModelRequest::new("q", 4)
    };
    let answers = judges_.ask("p", &[golden, ModelRequest::new("q", 4)]);
    assert_eq!(
        answers[0].as_ref().unwrap_err(),
        &ModelError::UnknownJudge {
            name: "golden-1".into(),
            known: vec!["judge".into()]
        }
    );
    assert!(
        answers[0]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("\"golden-1\" (configured: judge)")
    );
    assert!(answers[1].is_ok());
}

#[test]
fn a_healthbench_row_without_verdicts_is_scored_through_the_judge_in_the_sandbox() {
    // The judge meets a criterion when its text mentions "doctor"; one
    // item per query (`batch = 1`), answered as HealthBench's JSON object.
    let server = serve(|_, body| {
        let question = body["messages"][0]["content"].as_str().unwrap_or_default();
        let item = question
            .split("# Rubric items\n1. ")
            .nth(1)
            .unwrap_or_default();
        let item = item.lines().next().unwrap_or_default();
        completion(&format!(
            r#"{{"explanation": "checked", "criteria_met": {}}}"#,
            item.contains("doctor")
        ))
    });
    let judges_ = Arc::new(judges(&server.url, "", None));
    let rubrics = serde_json::json!([
        {"criterion": "Advises seeing a doctor", "points": 5, "tags": []},
        {"criterion": "Mentions hydration", "points": 3, "tags": []},
        {"criterion": "Recommends a doctor-only drug without caution", "points": -4, "tags": []},
    ]);
    let scored = healthbench_rows(judges_.clone(), rubrics, 1, 1);
    // Met: +5 and −4 of 8 positive points.
    assert_eq!(scored[0].total, Some(1.0 / 8.0), "{:?}", scored[0].error);
    let explanations: Vec<Option<&str>> = scored[0]
        .judgment
        .as_ref()
        .unwrap()
        .verdicts
        .iter()
        .map(|v| v.explanation.as_deref())
        .collect();
    assert_eq!(explanations, [Some("checked"); 3]);
    let ledger = judges_.ledgers()["judge"];
    assert_eq!(ledger.calls, 3);
    assert_eq!(ledger.usage.input, 90);
}

/// The healthbench plugin (one rubric item per judge query, `batch = 1`)
/// scoring `copies` of one row with `rubrics` through `judges` in the
/// sandbox, on `threads` scoring threads.
fn healthbench_rows(
    judges: Arc<Judges>,
    rubrics: serde_json::Value,
    copies: usize,
    threads: usize,
) -> Vec<verifine_runtime::scoring::ScoredSample> {
    let runtime = verifine_runtime::Runtime::with_cache(Default::default(), None)
        .unwrap()
        .with_judges(judges);
    let plugins = verifine_runtime::scoring::RewardPlugins::load(
        &runtime,
        "healthbench",
        &serde_json::json!({"batch": 1}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let mut sample = verifine_runtime::Sample::new("row-1", "user: I feel dizzy", "Drink water.");
    sample.context = serde_json::json!({"rubrics": rubrics}).to_string();
    let samples = vec![sample; copies];
    verifine_runtime::scorer_pool::score_all(&plugins, &samples, 1, threads, &|_| {}).unwrap()
}

/// Two rubric items, as the bounded-request test asks them; two copies on
/// two threads, so the bounds must reach threads the scoring starts.
fn healthbench_row(judges: Arc<Judges>) -> verifine_runtime::scoring::ScoredSample {
    let rubrics = serde_json::json!([
        {"criterion": "Advises seeing a doctor", "points": 5, "tags": []},
        {"criterion": "Mentions hydration", "points": 3, "tags": []},
    ]);
    healthbench_rows(judges, rubrics, 2, 2).remove(0)
}

#[test]
fn a_plugins_judge_queries_stop_with_the_request_they_serve() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use verifine_runtime::scoring_bounds::{ScoringBounds, within};
    let server = serve(|_, body| {
        let slow = body["messages"][0]["content"]
            .as_str()
            .is_some_and(|q| q.contains("Drink water") && q.contains("hydration"));
        let answer = completion(r#"{"explanation": "checked", "criteria_met": true}"#);
        if slow {
            verifine_judge::scripted_server::Reply::After(
                std::time::Duration::from_secs(3),
                Box::new(answer),
            )
        } else {
            answer
        }
    });
    let judges_ = Arc::new(judges(&server.url, "", None));
    // A request whose client is gone: nothing is sent for it.
    let gone = Arc::new(AtomicBool::new(true));
    let abandoned = ScoringBounds {
        deadline: None,
        abandoned: Some(gone.clone()),
    };
    let scored = within(abandoned, || healthbench_row(judges_.clone()));
    assert!(scored.total.is_none(), "{scored:?}");
    assert_eq!(server.received.lock().unwrap().len(), 0);
    assert!(gone.load(Ordering::Relaxed));
    // A request with half a second left: the slow query ends with it,
    // not after the server's three seconds (or the judge's own 120 s).
    let started = std::time::Instant::now();
    let bounded = ScoringBounds {
        deadline: Some(started + std::time::Duration::from_millis(500)),
        abandoned: None,
    };
    let scored = within(bounded, || healthbench_row(judges_.clone()));
    assert!(
        started.elapsed() < std::time::Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    let unjudged = format!("{scored:?}");
    assert!(unjudged.contains("deadline"), "{unjudged}");
    // Outside any request, the same row is judged in full.
    let scored = healthbench_row(judges_);
    assert_eq!(scored.total, Some(1.0), "{:?}", scored.error);
}

#[test]
fn the_shipped_example_config_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/judges/judges.toml");
    let config = JudgesConfig::load(&path).unwrap();
    let names: Vec<&String> = config.judges.keys().collect();
    assert_eq!(names, ["golden-1", "judge"]);
    assert_eq!(config.judges["golden-1"].budget.max_calls, Some(20000));
}
