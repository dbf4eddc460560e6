//! Hostile clients against a running server: oversized batches, abandoned
//! requests, slow heads, idle sockets and a dripping client at shutdown.
//! Each shows the attack contained, then a good request still answered.

use super::{client, metrics_text, options, post, post_in_background, start, start_spinning};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use verifine_runtime::Limits;
use verifine_serve::{ConnectionLimits, RequestLimits, ServeOptions};
use verifine_tests::scratch_dir;

/// A raw connection that sent `text` and keeps the socket open.
fn raw(address: SocketAddr, text: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(text.as_bytes()).unwrap();
    stream
}

/// A JSON POST head for `body`, as a client that then sends `body` would.
fn json_head(address: SocketAddr, path: &str, body_len: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
    )
}

/// Waits until `metric` (a full `name value` line) shows in `/metrics`.
fn wait_for_metric(server: &verifine_serve::RunningServer, line: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !metrics_text(server).lines().any(|l| l == line) {
        assert!(
            Instant::now() < deadline,
            "no `{line}`:\n{}",
            metrics_text(server)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn oversized_batches_are_refused_before_their_samples_are_built() {
    let dir = scratch_dir("serve-oversized");
    let server = start(
        ServeOptions {
            limits: RequestLimits {
                max_samples_per_request: 1000,
                max_samples_in_flight: 1000,
                ..RequestLimits::default()
            },
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    // 2 M empty queries in a 6 MiB body: millions of samples if built.
    let mut body = String::from("{\"query\": [\"\"");
    body.push_str(&",\"\"".repeat(2_000_000));
    body.push_str("]}");
    let started = Instant::now();
    let response = client()
        .post(format!("{}/get_reward", server.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    let reason: serde_json::Value = response.json().unwrap();
    assert!(
        reason["error"]
            .as_str()
            .unwrap()
            .contains("2000001 samples in one request, more than the server's limit of 1000"),
        "{reason}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let rows: Vec<_> = (0..1001)
        .map(|i| json!({"id": i, "prompt": "p", "response": "r"}))
        .collect();
    let (status, answer, _) = post(&server, "/v1/score", &json!({ "rows": rows }));
    assert_eq!(status, 413, "{answer}");
    assert!(metrics_text(&server).contains("verifine_samples_scored_total 0"));
    // A batch at the cap is answered.
    let (status, answer, _) = post(
        &server,
        "/get_reward",
        &json!({"query": vec!["#### 1"; 1000], "labels": vec!["1"; 1000]}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["rewards"].as_array().unwrap().len(), 1000);
    server.stop().unwrap();
}

#[test]
fn the_sample_budget_and_the_job_queue_answer_503_while_spent() {
    let limits = RequestLimits {
        max_samples_per_request: 4,
        max_samples_in_flight: 6,
        max_queued_jobs: 1,
        ..RequestLimits::default()
    };
    let server = start_spinning("serve-budgets", 1200, limits);
    let spinning = post_in_background(&server, json!({"query": ["loop", "loop", "loop", "loop"]}));
    wait_for_metric(
        &server,
        "verifine_requests_in_flight 1",
        Duration::from_secs(5),
    );
    // 4 of 6 samples are held: 3 more do not fit, 1 does (and queues).
    let (status, answer, _) = post(&server, "/get_reward", &json!({"query": ["a", "b", "c"]}));
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("samples in flight"),
        "{answer}"
    );
    let queued = post_in_background(&server, json!({"query": ["fine"]}));
    wait_for_metric(
        &server,
        "verifine_requests_in_flight 2",
        Duration::from_secs(5),
    );
    // One more sample fits the budget, not the one-job queue.
    let (status, answer, _) = post(&server, "/get_reward", &json!({"query": ["fine"]}));
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("jobs are queued"),
        "{answer}"
    );
    assert_eq!(spinning.join().unwrap(), 200, "failed samples are zero");
    assert_eq!(queued.join().unwrap(), 200);
    let (status, answer, _) = post(
        &server,
        "/get_reward",
        &json!({"query": ["a", "b", "c", "d"]}),
    );
    assert_eq!(status, 200, "{answer}");
    server.stop().unwrap();
}

#[test]
fn requests_gone_by_deadline_or_disconnect_are_not_scored() {
    let limits = RequestLimits {
        deadline: Duration::from_millis(4000),
        ..RequestLimits::default()
    };
    let server = start_spinning("serve-abandoned", 1500, limits);
    let spinning = post_in_background(&server, json!({"query": ["loop"]}));
    wait_for_metric(
        &server,
        "verifine_requests_in_flight 1",
        Duration::from_secs(5),
    );
    // Queued behind the spinning job, then the client hangs up.
    let body = r#"{"query": ["fine", "fine", "fine"]}"#;
    let mut gone = raw(
        server.address,
        &json_head(server.address, "/get_reward", body.len()),
    );
    gone.write_all(body.as_bytes()).unwrap();
    wait_for_metric(
        &server,
        "verifine_requests_in_flight 2",
        Duration::from_secs(5),
    );
    // Admitted; its job is queued a moment later.
    std::thread::sleep(Duration::from_millis(100));
    drop(gone);
    assert_eq!(spinning.join().unwrap(), 200);
    wait_for_metric(
        &server,
        "verifine_jobs_abandoned_total 1",
        Duration::from_secs(5),
    );
    let (status, _, _) = post(&server, "/get_reward", &json!({"query": ["fine"]}));
    assert_eq!(status, 200);
    server.stop().unwrap();

    // Past the deadline: the queued jobs of requests answered 504 are dropped.
    let limits = RequestLimits {
        deadline: Duration::from_millis(500),
        ..RequestLimits::default()
    };
    let server = start_spinning("serve-abandoned-deadline", 1500, limits);
    let mut waiting = vec![post_in_background(&server, json!({"query": ["loop"]}))];
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..3 {
        waiting.push(post_in_background(&server, json!({"query": ["fine"]})));
    }
    for request in waiting {
        assert_eq!(request.join().unwrap(), 504);
    }
    wait_for_metric(
        &server,
        "verifine_jobs_abandoned_total 3",
        Duration::from_secs(5),
    );
    let started = Instant::now();
    let (status, _, _) = post(&server, "/get_reward", &json!({"query": ["fine"]}));
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    server.stop().unwrap();
}

#[test]
fn slow_heads_idle_sockets_and_connection_floods_do_not_lock_out_health() {
    let dir = scratch_dir("serve-slowloris");
    let server = start(
        ServeOptions {
            limits: RequestLimits {
                connections: ConnectionLimits {
                    max_connections: 8,
                    header_timeout: Duration::from_secs(1),
                    shutdown_grace: Duration::from_millis(500),
                },
                ..RequestLimits::default()
            },
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    let address = server.address;
    // Twice the connection cap: half idle, half a head that never ends.
    let mut held: Vec<TcpStream> = (0..16)
        .map(|i| {
            let text = if i % 2 == 0 {
                ""
            } else {
                "POST /get_reward HTTP/1.1\r\nHost: 127"
            };
            raw(address, text)
        })
        .collect();
    let started = Instant::now();
    let health = client()
        .get(format!("{}/health", server.url()))
        .send()
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Every slow head was answered or closed by the header timeouts.
    for stream in &mut held {
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest);
        assert!(
            read.as_ref().map_or_else(
                |e| e.kind() == std::io::ErrorKind::ConnectionReset,
                |_| true
            ),
            "{read:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    drop(held);
    let (status, _, _) = post(
        &server,
        "/get_reward",
        &json!({"query": ["#### 1"], "labels": ["1"]}),
    );
    assert_eq!(status, 200);

    // A body that drips holds shutdown no longer than the grace.
    let mut dripping = raw(address, &json_head(address, "/get_reward", 1000));
    dripping.write_all(b"{\"query\": [").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stopping = Instant::now();
    server.stop().unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopping.elapsed()
    );
}

#[test]
fn dripping_bodies_hold_only_what_they_sent_and_time_out() {
    let dir = scratch_dir("serve-dripping-bodies");
    let server = start(
        ServeOptions {
            limits: RequestLimits {
                max_body_bytes: 1024,
                max_body_bytes_in_flight: 1024,
                body_timeout: Duration::from_secs(1),
                ..RequestLimits::default()
            },
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    let address = server.address;
    // 700 of 1000 declared bytes, then nothing: 700 bytes are held.
    let padded = format!(
        "{:<1000}",
        json!({"query": ["#### 1"], "labels": ["1"]}).to_string()
    );
    let mut dripping = raw(address, &json_head(address, "/get_reward", 1000));
    dripping.write_all(&padded.as_bytes()[..700]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let body = json!({"query": vec!["#### 1"; 40], "labels": vec!["1"; 40]});
    assert!(body.to_string().len() > 400);
    let (status, answer, _) = post(&server, "/get_reward", &body);
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("body bytes"),
        "{answer}"
    );
    // The drip ends at the body timeout with 408, and its bytes are freed.
    let mut answer = [0u8; 64];
    dripping
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let started = Instant::now();
    let n = dripping.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let (status, answer, _) = post(&server, "/get_reward", &body);
    assert_eq!(status, 200, "{answer}");
    server.stop().unwrap();
}
