//! The routes and the safety layers around them: the Host/Origin/JSON
//! guard, bearer auth, a body cap and read time, a per-request deadline,
//! budgets of requests, samples and body bytes in flight that answer 503
//! instead of queueing without bound, and a JSON reason for every refusal.

use crate::guard::{self, AllowedHosts, same_secret};
use crate::limits::RequestLimits;
use crate::live::Live;
use crate::metrics::{Endpoint, Metrics};
use crate::pool::{Generation, Pool, SubmitError};
use crate::protocol::{self, FailurePolicy};
use crate::refusal::Refusal;
use crate::{body, sizing};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use verifine_runtime::Sample;
use verifine_runtime::scoring::ScoredSample;
use verifine_runtime::scoring_bounds::ScoringBounds;

/// The header naming the revisions that scored a response.
pub const REVISIONS_HEADER: &str = "x-verifine-revisions";

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
    /// Samples admitted and not yet scored or dropped.
    pub samples_in_flight: Arc<Semaphore>,
    /// Body bytes held by scoring requests.
    pub body_bytes_in_flight: Semaphore,
    /// The `Host`s and `Origin`s requests may name.
    pub hosts: Arc<AllowedHosts>,
}

/// The router with its layers: metrics outermost, then the deadline, then
/// the Host/Origin/JSON guard, then auth, then (scoring routes only) the
/// concurrency limit and the body read.
pub fn router(app: Arc<App>) -> Router {
    let scoring = Router::new()
        .route("/get_reward", post(openrlhf))
        .route("/slime", post(slime))
        .route("/v1/score", post(score))
        .layer(middleware::from_fn_with_state(app.clone(), read_body))
        .layer(middleware::from_fn_with_state(app.clone(), admit));
    Router::new()
        .merge(scoring)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(app.limits.max_body_bytes))
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(middleware::from_fn_with_state(
            app.hosts.clone(),
            guard::guard,
        ))
        .layer(middleware::from_fn_with_state(app.clone(), deadline))
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

async fn count(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let endpoint = Endpoint::of_path(request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    app.metrics
        .request(endpoint, response.status().as_u16(), started.elapsed());
    response
}

tokio::task_local! {
    /// When the request being handled must be answered (set by the
    /// deadline layer, read where scoring starts).
    static REQUEST_DEADLINE: Instant;
}

async fn deadline(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Result<Response, Refusal> {
    let limit = app.limits.deadline;
    let until = Instant::now() + limit;
    tokio::time::timeout(limit, REQUEST_DEADLINE.scope(until, next.run(request)))
        .await
        .map_err(|_| {
            Refusal::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "no answer within the server's deadline of {} ms",
                    limit.as_millis()
                ),
            )
        })
}

async fn authorize(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Result<Response, Refusal> {
    let open = request.uri().path() == "/health";
    if let Some(token) = &app.token
        && !open
        && !bearer_matches(token, request.headers())
    {
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token (Authorization: Bearer TOKEN)",
        )
        .with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
    }
    Ok(next.run(request).await)
}

fn bearer_matches(token: &str, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes()))
}

async fn admit(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Result<Response, Refusal> {
    let _permit = app.permits.try_acquire().map_err(|_| {
        Refusal::busy(format!(
            "{} scoring requests in flight, the server's limit; retry shortly",
            app.limits.max_in_flight
        ))
    })?;
    Ok(next.run(request).await)
}

/// Reads the body within the size and time limits, holding the bytes it
/// received against the in-flight budget until the answer is made.
async fn read_body(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Result<Response, Refusal> {
    let limits = &app.limits;
    let (request, _bytes) = body::buffered(
        request,
        limits.max_body_bytes,
        limits.body_timeout,
        Some(&app.body_bytes_in_flight),
    )
    .await?;
    Ok(next.run(request).await)
}

/// Reserves `samples` of the in-flight budget: 413 over the per-request
/// cap, 503 while the budget is spent.
fn reserve_samples(app: &App, samples: usize) -> Result<OwnedSemaphorePermit, Refusal> {
    let cap = app.limits.max_samples_per_request;
    if samples > cap {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{samples} samples in one request, more than the server's limit of {cap}; split the batch"
            ),
        ));
    }
    let permits = u32::try_from(samples).unwrap_or(u32::MAX);
    app.samples_in_flight
        .clone()
        .try_acquire_many_owned(permits)
        .map_err(|_| {
            Refusal::busy(format!(
                "{} samples in flight, the server's limit; retry shortly",
                app.limits.max_samples_in_flight
            ))
        })
}

/// Sets its flag when dropped: the request future it lives in is gone.
struct FlagOnDrop(Arc<AtomicBool>);

impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Scores `samples` with the generation live now; a response or a refusal.
/// Failure details go to the log; answers carry a short reason.
async fn score_with_live(
    app: &App,
    samples: Vec<Sample>,
    budget: OwnedSemaphorePermit,
) -> Result<(Arc<Generation>, Vec<Sample>, Vec<ScoredSample>), Refusal> {
    let generation = app.live.current();
    // Dropped with this future when the client goes or the deadline
    // layer gives up: the pool then stops, judge queries included.
    let gone = Arc::new(AtomicBool::new(false));
    let _flag_when_gone = FlagOnDrop(gone.clone());
    let bounds = ScoringBounds {
        deadline: REQUEST_DEADLINE.try_with(|until| *until).ok(),
        abandoned: Some(gone),
    };
    let answer = match app.pool.submit(generation.clone(), samples, budget, bounds) {
        Ok(answer) => answer,
        Err(full @ SubmitError::QueueFull(_)) => return Err(Refusal::busy(full.to_string())),
        Err(SubmitError::Stopped) => {
            return Err(Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is shutting down",
            ));
        }
    };
    let (samples, mut scored) = answer.await.map_err(|_| {
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the scoring pool stopped before answering",
        )
    })?;
    let failures = scored.iter().filter(|s| s.total.is_none()).count();
    app.metrics.scored(scored.len(), failures);
    protocol::keep_details_in_the_log(&samples, &mut scored);
    if let Some(reason) = protocol::first_failure(app.on_failure, &samples, &scored) {
        let refusal = Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, reason);
        return Err(match revisions_value(&generation) {
            Some(value) => refusal.with_header(HeaderName::from_static(REVISIONS_HEADER), value),
            None => refusal,
        });
    }
    Ok((generation, samples, scored))
}

fn answer(generation: &Generation, body: Value) -> Response {
    with_revisions(axum::Json(body).into_response(), generation)
}

fn with_revisions(mut response: Response, generation: &Generation) -> Response {
    if let Some(value) = revisions_value(generation) {
        response.headers_mut().insert(REVISIONS_HEADER, value);
    }
    response
}

fn revisions_value(generation: &Generation) -> Option<HeaderValue> {
    HeaderValue::from_str(generation.header()).ok()
}

/// Reads the body, parses it with `parse` (a 400 with the reason when it
/// fails), scores with the live revisions and answers with `respond`.
async fn score_body(
    app: &App,
    body: Result<Bytes, BytesRejection>,
    door: Door,
    respond: fn(&Generation, &[Sample], &[ScoredSample]) -> Value,
) -> Result<Response, Refusal> {
    let body = body.map_err(|rejection| Refusal::new(rejection.status(), rejection.body_text()))?;
    // Counted before any sample is built; a body that cannot be counted
    // does not parse either, and parsing says why.
    let budget = door
        .count(&body)
        .map(|n| reserve_samples(app, n))
        .transpose()?;
    let samples = door
        .parse(&body)
        .map_err(|r| Refusal::new(StatusCode::BAD_REQUEST, r))?;
    let budget = match budget {
        Some(budget) if budget.num_permits() == samples.len() => budget,
        _ => reserve_samples(app, samples.len())?,
    };
    let (generation, samples, scored) = score_with_live(app, samples, budget).await?;
    Ok(answer(&generation, respond(&generation, &samples, &scored)))
}

/// The three scoring doors, each with its way to count and parse a body.
#[derive(Debug, Clone, Copy)]
enum Door {
    OpenRlhf,
    Slime,
    Score,
}

impl Door {
    fn count(self, body: &[u8]) -> Option<usize> {
        match self {
            Door::OpenRlhf => sizing::openrlhf_samples(body),
            Door::Slime => sizing::slime_samples(body),
            Door::Score => sizing::score_samples(body),
        }
    }

    fn parse(self, body: &[u8]) -> Result<Vec<Sample>, String> {
        match self {
            Door::OpenRlhf => protocol::parse_openrlhf(body),
            Door::Slime => protocol::parse_slime(body).map(|sample| vec![sample]),
            Door::Score => protocol::parse_score(body),
        }
    }
}

async fn openrlhf(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    score_body(&app, body, Door::OpenRlhf, |generation, _, scored| {
        protocol::openrlhf_response(generation.id, scored)
    })
    .await
}

async fn slime(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    score_body(&app, body, Door::Slime, |generation, _, scored| {
        protocol::slime_response(generation, &scored[0])
    })
    .await
}

async fn score(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    score_body(&app, body, Door::Score, protocol::score_response).await
}

/// Up or not, for anyone (load balancers probe without a token); which
/// plugins and revisions serve only for a caller with the token.
async fn health(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let trusted = app
        .token
        .as_deref()
        .is_some_and(|token| bearer_matches(token, &headers));
    if !trusted {
        return axum::Json(json!({ "status": "ok" })).into_response();
    }
    let generation = app.live.current();
    answer(
        &generation,
        json!({ "status": "ok", "revisions": generation.revisions_json() }),
    )
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let in_flight = app.limits.max_in_flight - app.permits.available_permits();
    let text = app
        .metrics
        .render(&app.live.current(), in_flight, app.pool.abandoned());
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        Body::from(text),
    )
        .into_response()
}

async fn not_found(request: Request) -> Refusal {
    Refusal::new(
        StatusCode::NOT_FOUND,
        format!(
            "no route {} {}: POST /get_reward, /slime, /v1/score; GET /health, /metrics",
            request.method(),
            request.uri().path()
        ),
    )
}
