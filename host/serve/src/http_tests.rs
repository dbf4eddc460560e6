//! The router in process (`Router::oneshot`, axum's testing idiom):
//! routing, auth, the guard and the budgets answer as they should without a
//! socket. `tests/all/serve.rs` keeps what needs one (slow clients, connection
//! caps, hot-swap while serving).

use super::{ServeOptions, Server};
use crate::http::*;
use crate::limits::RequestLimits;
use crate::live::SwapOptions;
use crate::protocol::FailurePolicy;
use axum::body::Body;
use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt as _;
use verifine_runtime::{Limits, PluginSetting, Runtime};

/// The app of a server on loopback, with `token` and `limits`, the
/// `Host` that names it, and its directory (removed when dropped).
fn app(
    name: &str,
    token: Option<&str>,
    limits: RequestLimits,
) -> (Arc<App>, String, verifine_test_support::ScratchDir) {
    let dir = verifine_test_support::scratch_path(&format!("oneshot-{name}"));
    let options = ServeOptions {
        rubric: PluginSetting::new("math-answer"),
        aggregator: None,
        dir: dir.to_path_buf(),
        address: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_string),
        limits,
        workers: 1,
        io_threads: 1,
        batch_size: 64,
        on_failure: FailurePolicy::Zero,
        swap: SwapOptions {
            keep_revisions: 2,
            gate: Default::default(),
            canary: Vec::new(),
            watch_dir: None,
            interval: Duration::from_secs(3600),
        },
    };
    let server = Server::bind(options, Runtime::new(Limits::default()).unwrap()).unwrap();
    (server.app(), server.local_addr().to_string(), dir)
}

/// A request the guard lets through: the server's Host, a JSON body.
fn post(host: &str, path: &str, body: &str) -> Request {
    Request::post(path)
        .header(header::HOST, host)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The status, the headers and the body's `error` (or the whole body).
async fn ask(app: &Arc<App>, request: Request) -> (StatusCode, HeaderMap, Value) {
    let response = router(app.clone()).oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

const ONE_ROW: &str =
    r#"{"rows": [{"id": "a", "prompt": "2 + 2?", "response": "A: 4", "reference": "4"}]}"#;

#[tokio::test]
async fn scores_a_row_and_names_the_revisions() {
    let (app, host, _dir) = app("scores", None, RequestLimits::default());
    let (status, headers, body) = ask(&app, post(&host, "/v1/score", ONE_ROW)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"][0]["total"], json!(1.0), "{body}");
    assert!(
        headers[REVISIONS_HEADER]
            .to_str()
            .unwrap()
            .contains("math-answer")
    );
}

#[tokio::test]
async fn an_unknown_route_is_a_404_that_lists_the_routes() {
    let (app, host, _dir) = app("routes", None, RequestLimits::default());
    let (status, _, body) = ask(&app, post(&host, "/v2/score", ONE_ROW)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"].as_str().unwrap().contains("/v1/score"),
        "{body}"
    );
}

#[tokio::test]
async fn without_the_token_only_health_answers() {
    let (app, host, _dir) = app("auth", Some("s3cret"), RequestLimits::default());
    let (status, headers, body) = ask(&app, post(&host, "/v1/score", ONE_ROW)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    let mut with_token = post(&host, "/v1/score", ONE_ROW);
    with_token.headers_mut().insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer s3cret"),
    );
    assert_eq!(ask(&app, with_token).await.0, StatusCode::OK);
    let health = Request::get("/health")
        .header(header::HOST, &host)
        .body(Body::empty())
        .unwrap();
    assert_eq!(ask(&app, health).await.0, StatusCode::OK);
}

#[tokio::test]
async fn the_guard_refuses_foreign_hosts_and_bodies_that_are_not_json() {
    let (app, host, _dir) = app("guard", None, RequestLimits::default());
    let mut foreign = post(&host, "/v1/score", ONE_ROW);
    foreign
        .headers_mut()
        .insert(header::HOST, HeaderValue::from_static("attacker.example"));
    assert_eq!(ask(&app, foreign).await.0, StatusCode::FORBIDDEN);
    let mut text = post(&host, "/v1/score", ONE_ROW);
    text.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    assert_eq!(ask(&app, text).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn limits_answer_413_and_503_with_retry_after() {
    let limits = RequestLimits {
        max_samples_per_request: 1,
        ..RequestLimits::default()
    };
    let (app, host, _dir) = app("limits", None, limits);
    let two_rows = r#"{"rows": [{"id": "a", "prompt": "p", "response": "r"}, {"id": "b", "prompt": "p", "response": "r"}]}"#;
    let (status, _, body) = ask(&app, post(&host, "/v1/score", two_rows)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("split the batch"),
        "{body}"
    );

    // Every scoring permit held: the next request is told to come back.
    let _held = app.permits.acquire_many(512).await.unwrap();
    let (status, headers, body) = ask(&app, post(&host, "/v1/score", ONE_ROW)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(headers[header::RETRY_AFTER], "1");
}

#[tokio::test]
async fn a_body_that_does_not_parse_is_a_400_with_the_reason() {
    let (app, host, _dir) = app("parse", None, RequestLimits::default());
    let (status, _, body) = ask(&app, post(&host, "/v1/score", "{\"rows\": 3}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].is_string(), "{body}");
}
