//! A rubric that asks a judge model, served: its judge queries belong to the
//! request that asked them, so once the request is past its deadline no
//! more of them are sent, inside a batch too (each is paid for).

use super::*;
use std::sync::Arc;
use verifine_judge::scripted_server::{Reply, completion, serve as judge_server};
use verifine_judge::{Judges, JudgesConfig};

#[test]
fn judge_queries_stop_with_the_request_that_asked_them() {
    // Every judge query takes 600 ms; the row's four rubric items are asked
    // one query each (`batch = 1`), in one plugin call, one at a time
    // (`concurrency = 1`).
    let judge = judge_server(|_, _| {
        Reply::After(
            Duration::from_millis(600),
            Box::new(completion(r#"{"explanation": "ok", "criteria_met": true}"#)),
        )
    });
    let config = format!(
        "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{}\", model = \"m\", concurrency = 1 }}\n",
        judge.url
    );
    let judges = Judges::new(&JudgesConfig::parse(&config, "judges.toml").unwrap()).unwrap();
    let dir = scratch_dir("serve-judged");
    let mut options = options("healthbench", &dir);
    options.rubric.config = "batch = 1".parse().unwrap();
    options.limits.deadline = Duration::from_millis(1000);
    let runtime = Runtime::new(Limits::default())
        .unwrap()
        .with_judges(Arc::new(judges));
    let server = Server::bind(options, runtime).unwrap().spawn();
    let rubrics: Vec<Value> = (0..4)
        .map(|i| json!({"criterion": format!("criterion {i}"), "points": 1, "tags": []}))
        .collect();
    let row = |id: &str| {
        json!({"id": id, "prompt": "user: dizzy", "response": "Drink water.",
               "context": {"rubrics": rubrics}})
    };
    let started = Instant::now();
    let (status, body, _) = post(&server, "/v1/score", &json!({"rows": [row("slow")]}));
    // Either the deadline layer answers first (504), or the row comes back
    // at the deadline with the items it could not ask named as unjudged.
    assert!(
        status == 504 || (status == 200 && body.to_string().contains("not asked")),
        "{status} {body}"
    );
    // Asked at 0, 0.6 s; the query that would start at 1.2 s is not sent
    // (the third, in flight at the deadline, is cut off there).
    std::thread::sleep(Duration::from_millis(2500));
    let sent = judge.received.lock().unwrap().len();
    assert!(
        sent <= 2,
        "{sent} judge queries for a request past its deadline"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    server.stop().unwrap();
}
