//! The routes and the safety layers around them: bearer auth, a body cap,
//! a per-request deadline, a concurrency limit that answers 503 instead of
//! queueing without bound, and a JSON reason for every refusal.

use crate::live::Live;
use crate::metrics::{Endpoint, Metrics};
use crate::pool::{Generation, Pool};
use crate::protocol::{self, FailurePolicy};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use verifine_runtime::Sample;
use verifine_runtime::scoring::ScoredSample;

/// The header naming the revisions that scored a response.
pub const REVISIONS_HEADER: &str = "x-verifine-revisions";

/// What every request may use.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Time from the request's arrival to its answer (504 after).
    pub deadline: Duration,
    /// Scoring requests in flight; one more is answered 503 with Retry-After.
    pub max_in_flight: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_body_bytes: 16 << 20,
            deadline: Duration::from_secs(60),
            max_in_flight: 512,
        }
    }
}

/// The state every handler shares.
pub struct App {
    /// The live revisions.
    pub live: Arc<Live>,
    /// Scoring threads.
    pub pool: Pool,
    /// Counters.
    pub metrics: Metrics,
    /// Bearer token every route but `/health` requires, when set.
    pub token: Option<String>,
    /// What a failed sample's reward becomes.
    pub on_failure: FailurePolicy,
    /// Per-request limits.
    pub limits: RequestLimits,
    /// Admits scoring requests.
    pub permits: Semaphore,
}

/// The router with its layers: metrics outermost, then the deadline, then
/// auth, then (scoring routes only) the concurrency limit.
pub fn router(app: Arc<App>) -> Router {
    let scoring = Router::new()
        .route("/get_reward", post(openrlhf))
        .route("/slime", post(slime))
        .route("/v1/score", post(score))
        .layer(middleware::from_fn_with_state(app.clone(), admit));
    Router::new()
        .merge(scoring)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(app.limits.max_body_bytes))
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(middleware::from_fn_with_state(app.clone(), deadline))
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

/// A refusal: the status and `{"error": reason}`.
pub fn refuse(status: StatusCode, reason: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": reason.into() }))).into_response()
}

async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let endpoint = Endpoint::of_path(request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    app.metrics
        .request(endpoint, response.status().as_u16(), started.elapsed());
    response
}

async fn deadline(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let limit = app.limits.deadline;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => refuse(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "no answer within the server's deadline of {} ms",
                limit.as_millis()
            ),
        ),
    }
}

async fn authorize(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(token) = &app.token else {
        return next.run(request).await;
    };
    if request.uri().path() == "/health" {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())) {
        return next.run(request).await;
    }
    let mut response = refuse(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token (Authorization: Bearer TOKEN)",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        difference |= e ^ given.get(i).copied().unwrap_or(!e);
    }
    difference == 0
}

async fn admit(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Ok(_permit) = app.permits.try_acquire() else {
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} scoring requests in flight, the server's limit; retry shortly",
                app.limits.max_in_flight
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    next.run(request).await
}

/// Scores `samples` with the generation live now; a response or a refusal.
async fn score_with_live(
    app: &App,
    samples: Vec<Sample>,
) -> Result<(Arc<Generation>, Vec<Sample>, Vec<ScoredSample>), Response> {
    let generation = app.live.current();
    let answer = app.pool.submit(generation.clone(), samples).await;
    let (samples, scored) = answer.map_err(|_| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the scoring pool stopped before answering",
        )
    })?;
    let failures = scored.iter().filter(|s| s.total.is_none()).count();
    app.metrics.scored(scored.len(), failures);
    if let Some(reason) = protocol::first_failure(app.on_failure, &samples, &scored) {
        return Err(with_revisions(
            refuse(StatusCode::UNPROCESSABLE_ENTITY, reason),
            &generation,
        ));
    }
    Ok((generation, samples, scored))
}

fn body_or_refusal(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Response> {
    body.map_err(|rejection| refuse(rejection.status(), rejection.body_text()))
}

fn answer(generation: &Generation, body: Value) -> Response {
    with_revisions(axum::Json(body).into_response(), generation)
}

fn with_revisions(mut response: Response, generation: &Generation) -> Response {
    if let Ok(value) = HeaderValue::from_str(&generation.header()) {
        response.headers_mut().insert(REVISIONS_HEADER, value);
    }
    response
}

/// Reads the body, parses it with `parse` (a 400 with the reason when it
/// fails), scores with the live revisions and answers with `respond`.
async fn score_body(
    app: &App,
    body: Result<Bytes, BytesRejection>,
    parse: fn(&[u8]) -> Result<Vec<Sample>, String>,
    respond: fn(&Generation, &[Sample], &[ScoredSample]) -> Value,
) -> Response {
    let run = async {
        let body = body_or_refusal(body)?;
        let samples = parse(&body).map_err(|r| refuse(StatusCode::BAD_REQUEST, r))?;
        let (generation, samples, scored) = score_with_live(app, samples).await?;
        Ok(answer(&generation, respond(&generation, &samples, &scored)))
    };
    run.await.unwrap_or_else(|refusal: Response| refusal)
}

async fn openrlhf(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    score_body(
        &app,
        body,
        protocol::parse_openrlhf,
        |generation, _, scored| protocol::openrlhf_response(generation.id, scored),
    )
    .await
}

async fn slime(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    let parse = |body: &[u8]| protocol::parse_slime(body).map(|sample| vec![sample]);
    score_body(&app, body, parse, |generation, _, scored| {
        protocol::slime_response(generation, &scored[0])
    })
    .await
}

async fn score(State(app): State<Arc<App>>, body: Result<Bytes, BytesRejection>) -> Response {
    score_body(&app, body, protocol::parse_score, protocol::score_response).await
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let generation = app.live.current();
    answer(
        &generation,
        json!({ "status": "ok", "revisions": generation.revisions_json() }),
    )
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let in_flight = app.limits.max_in_flight - app.permits.available_permits();
    let text = app.metrics.render(&app.live.current(), in_flight);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        Body::from(text),
    )
        .into_response()
}

async fn not_found(request: Request) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        format!(
            "no route {} {}: POST /get_reward, /slime, /v1/score; GET /health, /metrics",
            request.method(),
            request.uri().path()
        ),
    )
}
