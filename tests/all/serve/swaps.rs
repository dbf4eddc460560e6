//! Hot swaps while serving: a promotion under load fails no request, the
//! watch rolls back a lenient revision, and a rollback goes live within a
//! bound however steady the load (a saturated watch included).

use super::{client, metrics_text, options, post, start};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use verifine_hotswap::Slot;
use verifine_hotswap::inbox::{self, Action};
use verifine_hotswap::revision::Origin;
use verifine_runtime::Limits;
use verifine_serve::REVISIONS_HEADER;
use verifine_tests::{EXAMPLE_LOOPHOLE, scratch_dir};

/// Hands the loophole rubric (it rewards any response mentioning the
/// reference) to the serve directory's inbox, as `verifine plugin promote` does.
fn promote_loophole(dir: &Path) {
    let wasm = std::fs::read(EXAMPLE_LOOPHOLE).unwrap();
    let origin = Origin::Command {
        path: EXAMPLE_LOOPHOLE.to_string(),
    };
    inbox::submit(
        dir,
        Slot::Rubric,
        &Action::Promote { origin },
        Some(&wasm),
        None,
    )
    .unwrap();
}

/// Waits (20 s at most) until `events.jsonl` mentions `marker`.
fn wait_for_event(dir: &Path, marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let events = || std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    while !events().contains(marker) {
        assert!(Instant::now() < deadline, "no {marker} event: {}", events());
        std::thread::sleep(Duration::from_millis(20));
    }
}

type Seen = Vec<(String, f64)>;

/// `clients` threads posting `body` until `stop`, each returning the
/// revisions header and first reward of every answer (all must be 200).
fn steady_load(
    url: &str,
    body: &Value,
    clients: usize,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<Seen>> {
    (0..clients)
        .map(|_| {
            let (url, body, stop) = (url.to_string(), body.clone(), stop.clone());
            std::thread::spawn(move || {
                let client = client();
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let response = client.post(&url).json(&body).send().unwrap();
                    assert_eq!(response.status().as_u16(), 200);
                    let header = response.headers()[REVISIONS_HEADER]
                        .to_str()
                        .unwrap()
                        .to_string();
                    let answer: Value = response.json().unwrap();
                    seen.push((header, answer["rewards"][0].as_f64().unwrap()));
                }
                seen
            })
        })
        .collect()
}

#[test]
fn a_promotion_under_load_fails_no_request_and_answers_name_their_revision() {
    let dir = scratch_dir("serve-swap");
    // No watch after the promotion here: the next test shows it.
    let unwatched = |dir: &Path| {
        let mut options = options("math-answer", dir);
        options.swap.gate.shadow_steps = 0;
        options
    };
    let server = start(unwatched(&dir), Limits::default());
    let url = format!("{}/get_reward", server.url());
    // The loophole rubric rewards any response that mentions the reference.
    let body = json!({"query": ["the answer might be 42 or 41"], "labels": ["#### 42"]});
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients = steady_load(&url, &body, 3, &stop);
    std::thread::sleep(Duration::from_millis(300));
    promote_loophole(&dir);
    wait_for_event(&dir, "\"promoted\"");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen: Vec<(String, f64)> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let before: Vec<_> = seen
        .iter()
        .filter(|(h, _)| h.starts_with("generation=0;"))
        .collect();
    let after: Vec<_> = seen
        .iter()
        .filter(|(h, _)| h.starts_with("generation=1;"))
        .collect();
    assert_eq!(before.len() + after.len(), seen.len());
    assert!(
        !before.is_empty() && !after.is_empty(),
        "{} before, {} after",
        before.len(),
        after.len()
    );
    // Each answer's reward is what the revision its header names gives.
    assert!(
        before
            .iter()
            .all(|(h, r)| h.contains("rubric=math-answer@") && *r < 1.0)
    );
    assert!(
        after
            .iter()
            .all(|(h, r)| h.contains("rubric=answer-mentioned@") && *r == 1.0)
    );
    let metrics = metrics_text(&server);
    assert!(metrics.contains("verifine_live_generation 1"), "{metrics}");
    server.stop().unwrap();

    // A restart with the same configuration serves what was live.
    let server = start(unwatched(&dir), Limits::default());
    let (_, _, revisions) = post(&server, "/get_reward", &body);
    assert!(
        revisions.contains("rubric=answer-mentioned@"),
        "{revisions}"
    );
    server.stop().unwrap();
}

#[test]
fn the_watch_after_a_promotion_rolls_back_a_revision_lenient_on_served_requests() {
    let dir = scratch_dir("serve-shadow");
    let mut options = options("math-answer", &dir);
    options.swap.gate.shadow_steps = 1000;
    let server = start(options, Limits::default());
    promote_loophole(&dir);
    wait_for_event(&dir, "\"promoted\"");
    let events = || std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Responses that mention the reference without answering it: the new
    // revision accepts them all, the one it replaced none.
    let body = json!({"query": vec!["maybe 42, maybe 41"; 8], "labels": vec!["#### 42"; 8]});
    while !events().contains("auto-rolled-back") {
        assert!(Instant::now() < deadline, "no rollback: {}", events());
        let (status, _, _) = post(&server, "/get_reward", &body);
        assert_eq!(status, 200);
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let (_, answer, revisions) = post(&server, "/get_reward", &body);
    assert!(revisions.contains("rubric=math-answer@"), "{revisions}");
    assert_eq!(answer["rewards"][0], 0.0);
    server.stop().unwrap();
}

#[test]
fn a_rollback_under_steady_load_goes_live_within_a_bound() {
    let dir = scratch_dir("serve-fair-swap");
    let mut options = options("math-answer", &dir);
    // A long watch: every answer is an observation for the swap thread.
    options.swap.gate.shadow_steps = 100_000;
    let server = start(options, Limits::default());
    promote_loophole(&dir);
    wait_for_event(&dir, "\"promoted\"");
    let url = format!("{}/get_reward", server.url());
    let body = json!({"query": vec!["#### 42"; 16], "labels": vec!["42"; 16]});
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = steady_load(&url, &body, 4, &stop);
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    inbox::submit(&dir, Slot::Rubric, &Action::Rollback, None, None).unwrap();
    let bound = Duration::from_secs(3);
    loop {
        let (_, _, revisions) = post(&server, "/get_reward", &body);
        if revisions.contains("rubric=math-answer@") {
            break;
        }
        assert!(
            asked.elapsed() < bound,
            "the rollback is not live after {bound:?} of load"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in load {
        client.join().unwrap();
    }
    let (status, _, revisions) = post(&server, "/get_reward", &body);
    assert_eq!(status, 200);
    assert!(revisions.contains("rubric=math-answer@"), "{revisions}");
    server.stop().unwrap();
}

#[test]
fn a_swap_point_is_not_starved_by_a_saturated_watch() {
    use verifine_runtime::scoring::ScoredSample;
    use verifine_runtime::{PluginSetting, Runtime, Sample};
    use verifine_serve::pool::Observation;
    let dir = scratch_dir("serve-saturated-watch");
    let mut swap = options("math-answer", &dir).swap;
    swap.gate.shadow_steps = 100_000;
    let runtime = Runtime::new(Limits::default()).unwrap();
    let rubric = PluginSetting::new("math-answer");
    let (live, observer, swapper) =
        verifine_serve::live::start(runtime, &rubric, None, &dir, swap).unwrap();
    let swapping = std::thread::spawn(move || swapper.run());
    promote_loophole(&dir);
    let until_generation = |id: u64, bound: Duration| {
        let started = Instant::now();
        while live.current().id < id {
            assert!(
                started.elapsed() < bound,
                "generation {id} not live after {bound:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        started.elapsed()
    };
    until_generation(1, Duration::from_secs(20));
    // Full load for the swap thread: its queue of observations (each
    // rescored by the watched revision's predecessor) is never empty.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeding = {
        let (stop, sender) = (stop.clone(), observer.sender.clone());
        std::thread::spawn(move || {
            let samples: Vec<Sample> = (0..256)
                .map(|i| Sample::new(i.to_string(), "6*7?", "#### 42").with_reference("42"))
                .collect();
            let scored: Vec<ScoredSample> = samples
                .iter()
                .map(|_| ScoredSample {
                    total: Some(1.0),
                    rubric_total: None,
                    judgment: None,
                    error: None,
                })
                .collect();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let observation = Observation {
                    samples: samples.clone(),
                    scored: scored.clone(),
                };
                if sender.send(observation).is_err() {
                    break;
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    inbox::submit(&dir, Slot::Rubric, &Action::Rollback, None, None).unwrap();
    let took = until_generation(2, Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    live.stop();
    swapping.join().unwrap();
    feeding.join().unwrap();
    assert!(
        live.current().header().contains("rubric=math-answer@"),
        "rolled back in {took:?}"
    );
}
