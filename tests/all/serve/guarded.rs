//! Requests a browser can be made to send (other sites' pages, DNS
//! rebinding), what clients learn of internals, and the label page's token.

use super::{client, options, post, start};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use verifine_runtime::Limits;
use verifine_serve::labels::{LabelQueue, PageAccess};
use verifine_serve::{RequestLimits, ServeOptions};
use verifine_tests::{hostile, scratch_dir};

fn status_and_reason(response: verifine_tests::http::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().unwrap_or(Value::Null);
    (
        status,
        body["error"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn cross_site_posts_rebound_hosts_and_foreign_origins_are_refused() {
    let dir = scratch_dir("serve-cross-site");
    let server = start(
        ServeOptions {
            limits: RequestLimits {
                allowed_hosts: vec!["trainer.internal".to_string()],
                ..RequestLimits::default()
            },
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    let url = format!("{}/get_reward", server.url());
    let body = json!({"query": ["#### 1"], "labels": ["1"]}).to_string();
    let port = server.address.port();
    // A form or a no-cors fetch from any page: text/plain needs no preflight.
    let plain = client()
        .post(&url)
        .header("content-type", "text/plain")
        .body(body.clone())
        .send()
        .unwrap();
    let (status, reason) = status_and_reason(plain);
    assert_eq!(status, 415, "{reason}");
    assert!(reason.contains("application/json"), "{reason}");
    // DNS rebinding: the page's own name resolves to 127.0.0.1.
    let rebound = client()
        .post(&url)
        .header("host", format!("attacker.example:{port}"))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .unwrap();
    assert_eq!(status_and_reason(rebound).0, 403);
    let foreign = client()
        .post(&url)
        .header("origin", "https://attacker.example")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .unwrap();
    assert_eq!(status_and_reason(foreign).0, 403);
    assert!(
        super::metrics_text(&server).contains("verifine_samples_scored_total 0"),
        "nothing refused was scored"
    );
    // Its own origin, localhost, and a configured name are served.
    for (host, origin) in [
        (
            format!("localhost:{port}"),
            format!("http://localhost:{port}"),
        ),
        (
            format!("trainer.internal:{port}"),
            "http://trainer.internal:9000".to_string(),
        ),
    ] {
        let response = client()
            .post(&url)
            .header("host", host)
            .header("origin", origin)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.clone())
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }
    server.stop().unwrap();
}

#[test]
fn failures_reach_clients_as_a_short_reason_and_health_names_no_plugins() {
    let dir = scratch_dir("serve-internals");
    let server = start(options(hostile::PANICKER, &dir), Limits::default());
    let (status, answer, _) = post(
        &server,
        "/v1/score",
        &json!([{"id": "a", "prompt": "p", "response": "panic"}, {"id": "b", "prompt": "p", "response": "ok"}]),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, slime, _) = post(
        &server,
        "/slime",
        &json!({"prompt": "p", "response": "panic"}),
    );
    for reason in [&answer["rows"][0]["error"], &slime["error"]] {
        let reason = reason.as_str().expect("a failed sample says why");
        assert!(
            !reason.is_empty() && reason.chars().count() <= 201,
            "{reason}"
        );
        for internal in ["backtrace", "panicked at", ".rs:", "deliberate panic", "\n"] {
            assert!(!reason.contains(internal), "{internal:?} in {reason:?}");
        }
    }
    assert_eq!(answer["rows"][1]["total"], 1.0);
    let health = client()
        .get(format!("{}/health", server.url()))
        .send()
        .unwrap();
    assert!(
        health
            .headers()
            .get(verifine_serve::REVISIONS_HEADER)
            .is_none()
    );
    assert_eq!(health.json::<Value>().unwrap(), json!({"status": "ok"}));
    server.stop().unwrap();

    // With a token, a caller who shows it learns the revisions.
    let server = start(
        ServeOptions {
            token: Some("s3cret".to_string()),
            ..options("math-answer", &dir)
        },
        Limits::default(),
    );
    let health = |token: Option<&str>| {
        let request = client().get(format!("{}/health", server.url()));
        let request = match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        request.send().unwrap().json::<Value>().unwrap()
    };
    assert_eq!(health(None), json!({"status": "ok"}));
    assert_eq!(health(Some("wrong")), json!({"status": "ok"}));
    assert_eq!(
        health(Some("s3cret"))["revisions"]["rubric"]["name"],
        "math-answer"
    );
    server.stop().unwrap();
}

/// A label page over a one-case queue, serving on its own thread.
struct LabelPage {
    address: std::net::SocketAddr,
    url: String,
    queue_file: std::path::PathBuf,
    _server: verifine_serve::RunningServer,
    /// Last, so it goes after the server has stopped.
    _dir: verifine_tests::ScratchDir,
}

impl LabelPage {
    fn start(name: &str) -> LabelPage {
        let dir = scratch_dir(name);
        let queue_file = dir.join("to-label.jsonl");
        let item = json!({
            "case": {"id": "c1", "prompt": "2+3?", "response": "#### 5", "reference": "#### 5"},
            "reason": "uncertain",
            "judge": {"revision": 0, "total": 0.5, "dimensions": {"correct": 0.5}},
            "label": null,
        });
        std::fs::write(&queue_file, format!("{item}\n")).unwrap();
        let queue = LabelQueue::open(&queue_file, Box::new(|_| Ok(()))).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let access = PageAccess::new(address).unwrap();
        let url = access.url(address);
        let router = verifine_serve::labels::router(Arc::new(queue), Arc::new(access));
        LabelPage {
            address,
            url,
            queue_file,
            _server: verifine_serve::labels::spawn(router, listener).unwrap(),
            _dir: dir,
        }
    }
}

#[test]
fn the_label_page_answers_only_the_token_it_printed() {
    let page = LabelPage::start("labels-token");
    let base = format!("http://{}", page.address);
    let plain = verifine_tests::http::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Without the token, neither the queue nor a save.
    let status_of = |path: &str| {
        plain
            .get(format!("{base}{path}"))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    for path in ["/api/queue", "/", "/?token=00"] {
        assert_eq!(status_of(path), 401, "{path}");
    }
    let edit = json!({"version": 0, "label": {"action": "confirm"}});
    let save = plain
        .put(format!("{base}/api/cases/c1"))
        .json(&edit)
        .send()
        .unwrap();
    assert_eq!(save.status().as_u16(), 401);
    // The printed address sets an HttpOnly, SameSite=Strict cookie.
    assert!(page.url.starts_with(&format!("{base}/?token=")) && page.url.len() > base.len() + 40);
    let opened = plain.get(&page.url).send().unwrap();
    assert_eq!(opened.status().as_u16(), 303);
    let cookie = opened.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let page_html = plain
        .get(format!("{base}/"))
        .header("cookie", &cookie)
        .send()
        .unwrap();
    assert_eq!(page_html.status().as_u16(), 200);
    // With it: the queue, without the server's paths; the page shows the
    // reference, so it is sent.
    let queue = plain
        .get(format!("{base}/api/queue"))
        .header("cookie", &cookie)
        .send()
        .unwrap()
        .text()
        .unwrap();
    let dir = page
        .queue_file
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        !queue.contains(&dir) && !queue.contains("\"file\""),
        "{queue}"
    );
    assert!(queue.contains("\"c1\""), "{queue}");
    // The guard holds even with the cookie: text bodies, rebound hosts, other origins.
    let put = |content_type: &str, host: Option<&str>, origin: Option<&str>| {
        let mut request = plain
            .put(format!("{base}/api/cases/c1"))
            .header("cookie", &cookie)
            .header("content-type", content_type)
            .body(edit.to_string());
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().unwrap().status().as_u16()
    };
    let rebound = format!("attacker.example:{}", page.address.port());
    assert_eq!(put("text/plain", None, None), 415);
    assert_eq!(put("application/json", Some(&rebound), None), 403);
    assert_eq!(
        put("application/json", None, Some("https://attacker.example")),
        403
    );
    let unlabelled = std::fs::read_to_string(&page.queue_file).unwrap();
    assert!(unlabelled.contains("\"label\":null"), "{unlabelled}");
    assert_eq!(put("application/json", None, Some(&base)), 200);
    let saved = std::fs::read_to_string(&page.queue_file).unwrap();
    assert!(saved.contains("\"confirm\""), "{saved}");
}
