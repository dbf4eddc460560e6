//! `verifine serve` as trainers and operators meet it: the three protocols
//! give the rewards in-process scoring gives, every answer names its
//! revisions, and each safety behaviour (bind check, token, body cap,
//! deadline, concurrency limit, malformed bodies; hostile clients and swaps
//! under load in the submodules) answers as documented.

use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Limits, PluginSetting, Runtime, Sample};
use verifine_serve::{
    FailurePolicy, REVISIONS_HEADER, RequestLimits, RunningServer, ServeOptions, Server,
    SwapOptions,
};
use verifine_tests::{hostile, scratch_dir};

#[path = "serve/guarded.rs"]
mod guarded;
#[path = "serve/hostile.rs"]
mod hostile_clients;
#[path = "serve/judged.rs"]
mod judged;
#[path = "serve/startup.rs"]
mod startup;
#[path = "serve/swaps.rs"]
mod swaps;

fn options(rubric: &str, dir: &Path) -> ServeOptions {
    ServeOptions {
        rubric: PluginSetting::new(rubric),
        aggregator: None,
        dir: dir.to_path_buf(),
        address: "127.0.0.1:0".parse().unwrap(),
        token: None,
        limits: RequestLimits::default(),
        workers: 2,
        io_threads: 2,
        batch_size: 64,
        on_failure: FailurePolicy::Zero,
        swap: SwapOptions {
            keep_revisions: 5,
            gate: Default::default(),
            canary: Vec::new(),
            watch_dir: None,
            interval: Duration::from_millis(50),
        },
    }
}

fn start(options: ServeOptions, limits: Limits) -> RunningServer {
    Server::bind(options, Runtime::new(limits).unwrap())
        .unwrap()
        .spawn()
}

fn client() -> verifine_tests::http::Client {
    verifine_tests::http::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn post(server: &RunningServer, path: &str, body: &Value) -> (u16, Value, String) {
    let response = client()
        .post(format!("{}{path}", server.url()))
        .json(body)
        .send()
        .unwrap();
    let status = response.status().as_u16();
    let revisions = response
        .headers()
        .get(REVISIONS_HEADER)
        .map_or(String::new(), |v| v.to_str().unwrap().to_string());
    (status, response.json().unwrap_or(Value::Null), revisions)
}

/// A server of the spinning plugin ("loop" spins until the call timeout)
/// with one scoring thread, so one such request holds it.
fn start_spinning(name: &str, call_timeout_ms: u64, limits: RequestLimits) -> RunningServer {
    let options = ServeOptions {
        limits,
        workers: 1,
        ..options(hostile::INFINITE_LOOP, &scratch_dir(name).keep())
    };
    start(
        options,
        Limits {
            call_timeout_ms,
            ..Limits::default()
        },
    )
}

/// Posts `body` to `/get_reward` on a thread of its own; the status.
fn post_in_background(server: &RunningServer, body: Value) -> std::thread::JoinHandle<u16> {
    let url = format!("{}/get_reward", server.url());
    std::thread::spawn(move || {
        let response = client().post(url).json(&body).send().unwrap();
        response.status().as_u16()
    })
}

/// `GET /metrics` as text.
fn metrics_text(server: &RunningServer) -> String {
    client()
        .get(format!("{}/metrics", server.url()))
        .send()
        .unwrap()
        .text()
        .unwrap()
}

/// What in-process scoring gives the same samples.
fn in_process(rubric: &str, samples: &[Sample]) -> Vec<Option<f64>> {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let plugins = RewardPlugins::load(&runtime, rubric, &json!({}), None, &json!({})).unwrap();
    plugins
        .scorer()
        .unwrap()
        .score_batch(0, 0, samples)
        .into_iter()
        .map(|s| s.total)
        .collect()
}

#[test]
fn openrlhf_slime_and_score_bodies_get_the_in_process_rewards() {
    let dir = scratch_dir("serve-protocols");
    let server = start(options("math-answer", &dir), Limits::default());
    let prompt = "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n";
    let responses = ["6*7 = 42\n#### 42", "It is 41.\n#### 41", "no idea"];
    let (status, body, revisions) = post(
        &server,
        "/get_reward",
        &json!({
            "query": responses.iter().map(|r| format!("{prompt}{r}<|im_end|>")).collect::<Vec<_>>(),
            "prompts": [prompt, prompt, prompt],
            "labels": ["42", "42", "42"],
        }),
    );
    assert_eq!(status, 200, "{body}");
    assert!(revisions.contains("rubric=math-answer@"), "{revisions}");
    let samples: Vec<Sample> = responses
        .iter()
        .enumerate()
        .map(|(i, r)| Sample::new(i.to_string(), prompt, *r).with_reference("42"))
        .collect();
    let expected = in_process("math-answer", &samples);
    let rewards: Vec<Option<f64>> = body["rewards"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::as_f64)
        .collect();
    assert_eq!(
        rewards,
        expected
            .iter()
            .map(|t| Some(t.unwrap_or(0.0)))
            .collect::<Vec<_>>()
    );
    assert_eq!(rewards[0], Some(1.0));
    assert!(rewards[1].unwrap() < 1.0);
    assert_eq!(body["scores"], body["rewards"]);
    assert_eq!(body["extra_logs"]["correct"], json!([1.0, 0.0, 0.0]));
    assert_eq!(
        body["extra_logs"]["revision_generation"],
        json!([0.0, 0.0, 0.0])
    );

    // slime: a chat prompt, the label as reference, a dict with the reward.
    let (status, body, _) = post(
        &server,
        "/slime",
        &json!({"prompt": [{"role": "user", "content": "What is 6*7?"}], "response": "#### 42", "label": "42"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reward"], 1.0);
    assert_eq!(body["criteria"]["correct"], 1.0);
    assert_eq!(body["revisions"]["rubric"]["name"], "math-answer");

    // verifine's own rows, with provenance per row.
    let (status, body, _) = post(
        &server,
        "/v1/score",
        &json!({"rows": [{"id": "a", "prompt": "6*7?", "response": "#### 42", "reference": "42"},
                         {"id": 7, "prompt": "6*7?", "response": "#### 40", "reference": "42"}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rows"][0]["id"], "a");
    assert_eq!(body["rows"][0]["total"], 1.0);
    assert_eq!(body["rows"][1]["id"], "7");
    assert_eq!(body["rows"][0]["plugin"]["name"], "math-answer");

    let health: Value = client()
        .get(format!("{}/health", server.url()))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(health["status"], "ok");
    let metrics = metrics_text(&server);
    assert!(
        metrics.contains("verifine_requests_total{endpoint=\"/get_reward\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("verifine_samples_scored_total 6"),
        "{metrics}"
    );
    assert!(
        metrics.contains("verifine_live_revision{slot=\"rubric\",name=\"math-answer\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("verifine_request_seconds_count{endpoint=\"/slime\"} 1"),
        "{metrics}"
    );
    server.stop().unwrap();
}

#[test]
fn failed_samples_are_zero_and_flagged_or_a_422_by_policy() {
    let dir = scratch_dir("serve-failures");
    let limits = Limits {
        call_timeout_ms: 300,
        ..Limits::default()
    };
    let server = start(options(hostile::INFINITE_LOOP, &dir), limits);
    let body = json!({"query": ["fine", "loop"]});
    let (status, answer, _) = post(&server, "/get_reward", &body);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["extra_logs"]["reward_failed"],
        json!([1.0, 1.0]),
        "a timed-out batch fails whole"
    );
    assert_eq!(answer["rewards"], json!([0.0, 0.0]));
    server.stop().unwrap();

    let dir = scratch_dir("serve-failures-error");
    let server = start(
        ServeOptions {
            on_failure: FailurePolicy::Error,
            ..options(hostile::INFINITE_LOOP, &dir)
        },
        limits,
    );
    let (status, answer, _) = post(&server, "/get_reward", &json!({"query": ["loop"]}));
    assert_eq!(status, 422);
    assert!(
        answer["error"].as_str().unwrap().starts_with("sample 0:"),
        "{answer}"
    );
    server.stop().unwrap();
}

#[test]
fn a_non_loopback_bind_needs_a_token_and_the_token_is_checked() {
    let dir = scratch_dir("serve-token");
    let open = ServeOptions {
        address: "0.0.0.0:0".parse().unwrap(),
        ..options("math-answer", &dir)
    };
    let refused = Server::bind(open.clone(), Runtime::new(Limits::default()).unwrap())
        .err()
        .expect("an unauthenticated public bind is refused");
    assert!(refused.to_string().contains("without --token"), "{refused}");

    let server = start(
        ServeOptions {
            token: Some("s3cret".to_string()),
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    let url = format!("{}/get_reward", server.url());
    let body = json!({"query": ["#### 1"], "labels": ["1"]});
    let response = client().post(&url).json(&body).send().unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let wrong = client()
        .post(&url)
        .bearer_auth("s3cre")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let right = client()
        .post(&url)
        .bearer_auth("s3cret")
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(right.status().as_u16(), 200);
    let health = client()
        .get(format!("{}/health", server.url()))
        .send()
        .unwrap();
    assert_eq!(
        health.status().as_u16(),
        200,
        "load balancers probe without a token"
    );
    server.stop().unwrap();
}

#[test]
fn oversized_slow_and_excess_requests_are_refused_with_reasons() {
    let limits = RequestLimits {
        max_body_bytes: 1024,
        deadline: Duration::from_millis(400),
        max_in_flight: 1,
        ..RequestLimits::default()
    };
    let server = start_spinning("serve-limits", 1500, limits);
    let big = json!({"query": ["x".repeat(4096)]});
    let (status, body, _) = post(&server, "/get_reward", &big);
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("length limit"),
        "{body}"
    );

    // A request that spins holds the only permit until its deadline.
    let url = server.url();
    let slow = std::thread::spawn(move || {
        let started = Instant::now();
        let response = client()
            .post(format!("{url}/get_reward"))
            .json(&json!({"query": ["loop"]}))
            .send()
            .unwrap();
        (response.status().as_u16(), started.elapsed())
    });
    // Once the spinning request holds the only permit (the in-flight gauge
    // says so), the next is turned away at once.
    while !metrics_text(&server).contains("verifine_requests_in_flight 1") {
        assert!(
            !slow.is_finished(),
            "the slow request ended before it was seen in flight"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let refused = client()
        .post(format!("{}/get_reward", server.url()))
        .json(&json!({"query": ["fine"]}))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let (status, elapsed) = slow.join().unwrap();
    assert_eq!(status, 504);
    assert!(
        elapsed < Duration::from_millis(1400),
        "answered at the deadline, not after the plugin: {elapsed:?}"
    );
    server.stop().unwrap();
}

#[test]
fn malformed_bodies_get_400_with_a_reason() {
    let dir = scratch_dir("serve-malformed");
    let server = start(options("math-answer", &dir), Limits::default());
    let raw = |path: &str, body: &'static [u8]| {
        let response = client()
            .post(format!("{}{path}", server.url()))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap())
    };
    for (path, body, reason) in [
        ("/get_reward", &b"{\"query\": [1]}"[..], "invalid JSON body"),
        ("/get_reward", b"not json", "invalid JSON body"),
        ("/get_reward", b"", "empty body"),
        ("/get_reward", b"{\"query\": [\"a\"], \"labels\": []}", "`labels` has 0 entries"),
        ("/slime", b"{\"prompt\": {}, \"response\": \"r\"}", "found an object"),
        ("/v1/score", b"{\"rows\": [{\"id\": 1}]}", "row 1:"),
        ("/v1/score", b"{\"rows\": [{\"id\": 1, \"prompt\": \"p\", \"response\": \"r\"}, {\"id\": 1, \"prompt\": \"p\", \"response\": \"r\"}]}", "duplicate id"),
    ] {
        let (status, answer) = raw(path, body);
        assert_eq!(status, 400, "{path} {answer}");
        assert!(answer["error"].as_str().unwrap().contains(reason), "{path}: {answer}");
    }
    let (status, answer) = raw("/nowhere", b"");
    assert_eq!(status, 404);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("POST /get_reward")
    );
    server.stop().unwrap();
}
