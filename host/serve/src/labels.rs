//! The label queue in a browser: a page over a queue file (what
//! `verifine labels export` writes and `verifine labels import` reads), and
//! the small JSON API it uses. Every save rewrites the file atomically.
//! Each item carries a version; a save made against an older version than
//! the file holds is refused with 409 and the current item, so two people
//! editing one case never overwrite each other unseen.
//!
//! The page knows the queue's shape (case, reason, judge, label) but not
//! its rules: the caller passes a check (the judge loop's own) that every
//! edited item must pass before it is written.
//!
//! The queue holds gold references and its labels steer the judge, so the
//! page is not open to whoever reaches the port: each start makes a random
//! token, the address printed carries it (`/?token=...`, as Jupyter does),
//! the page keeps it in an `HttpOnly`, `SameSite=Strict` cookie and every
//! route requires it. The reward server's Host/Origin/JSON guard applies
//! too, against DNS rebinding and other sites' pages.

use crate::error::{Result, ServeError};
use crate::guard::{self, AllowedHosts, same_secret};
use crate::limits::ConnectionLimits;
use crate::refusal::Refusal;
use crate::server::RunningServer;
pub use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, put};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The page: plain HTML and JavaScript, no build step.
const PAGE: &str = include_str!("labels.html");

/// Largest edit accepted (a label is a few hundred bytes).
const MAX_EDIT_BYTES: usize = 1 << 20;

/// Time an edit's body may take to arrive.
const EDIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Who may use the page: whoever holds the token of this start.
pub struct PageAccess {
    token: String,
    cookie: String,
    hosts: Arc<AllowedHosts>,
}

impl PageAccess {
    /// A fresh token for a page bound to `address`.
    pub fn new(address: SocketAddr) -> Result<PageAccess> {
        Ok(PageAccess {
            token: guard::random_token().map_err(ServeError::Random)?,
            // Cookies ignore ports: one name per port keeps two pages apart.
            cookie: format!("verifine-labels-{}", address.port()),
            hosts: Arc::new(AllowedHosts::for_address(address, &[])),
        })
    }

    /// The address to open, token included: print it to the person only.
    pub fn url(&self, address: SocketAddr) -> String {
        format!("http://{address}/?token={}", self.token)
    }

    fn admits(&self, given: &str) -> bool {
        same_secret(given.as_bytes(), self.token.as_bytes())
    }

    fn cookie_token<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value)
    }
}

/// Checks an edited queue item before it is saved; `Err` is shown to the person.
pub type ItemCheck = Box<dyn Fn(&Value) -> std::result::Result<(), String> + Send + Sync>;

struct Entry {
    item: Value,
    version: u64,
}

/// A queue file held in memory, saved on every edit.
pub struct LabelQueue {
    path: PathBuf,
    entries: Mutex<Vec<Entry>>,
    check: ItemCheck,
}

impl LabelQueue {
    /// Reads the queue file; each line must be an item with a `case.id`.
    pub fn open(path: &Path, check: ItemCheck) -> Result<LabelQueue> {
        let text = std::fs::read_to_string(path).map_err(|source| ServeError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        })?;
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = |message: String| ServeError::State {
                path: PathBuf::from(format!("{}:{}", path.display(), i + 1)),
                message,
            };
            let item: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
            if case_id(&item).is_none() {
                return Err(at("a queue item needs a string `case.id`".to_string()));
            }
            entries.push(Entry { item, version: 0 });
        }
        Ok(LabelQueue {
            path: path.to_path_buf(),
            entries: Mutex::new(entries),
            check,
        })
    }

    /// Every item with its version.
    pub fn snapshot(&self) -> Value {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let items: Vec<Value> = entries.iter().map(entry_json).collect();
        json!({ "items": items })
    }

    /// Sets the label of case `id`, if `version` is the item's current one
    /// and the edited item passes the check; writes the file.
    pub fn save(
        &self,
        id: &str,
        version: u64,
        label: Value,
    ) -> std::result::Result<Value, Refusal> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(index) = entries.iter().position(|e| case_id(&e.item) == Some(id)) else {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                format!("no case {id:?} in the queue"),
            ));
        };
        let current = &entries[index];
        if current.version != version {
            let reason = format!(
                "case {id:?} was saved by someone else since you loaded it (version {} now, yours {version}); here is the saved item",
                current.version
            );
            return Err(Refusal::new(StatusCode::CONFLICT, reason)
                .with_field("current", entry_json(current)));
        }
        let mut item = current.item.clone();
        item["label"] = label;
        (self.check)(&item)
            .map_err(|reason| Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, reason))?;
        let previous = std::mem::replace(&mut entries[index].item, item);
        if let Err(e) = self.write(&entries) {
            entries[index].item = previous;
            tracing::error!("saving case {id:?}: {e}");
            return Err(Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "nothing saved: the queue file could not be written (the server's log says why)",
            ));
        }
        entries[index].version += 1;
        Ok(entry_json(&entries[index]))
    }

    fn write(&self, entries: &[Entry]) -> Result<()> {
        verifine_base::write_atomically(&self.path, |w| {
            for entry in entries {
                serde_json::to_writer(&mut *w, &entry.item)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })?;
        Ok(())
    }
}

fn case_id(item: &Value) -> Option<&str> {
    item.get("case")?.get("id")?.as_str()
}

fn entry_json(entry: &Entry) -> Value {
    json!({ "version": entry.version, "item": entry.item })
}

/// The page and its API: `GET /`, `GET /api/queue`,
/// `PUT /api/cases/{id}` with `{"version": n, "label": {...} | null}`;
/// all of them behind the guard and `access`'s token.
pub fn router(queue: Arc<LabelQueue>, access: Arc<PageAccess>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/queue", get(list))
        .route("/api/cases/{id}", put(save))
        .layer(middleware::from_fn(read_edit))
        .layer(middleware::from_fn_with_state(
            access.clone(),
            require_token,
        ))
        .layer(middleware::from_fn_with_state(
            access.hosts.clone(),
            guard::guard,
        ))
        .with_state(queue)
}

/// Lets through a request carrying the token in its cookie; a `GET /`
/// carrying it in the query (the printed address) sets the cookie and
/// redirects to `/`, so the token leaves the address bar.
async fn require_token(
    State(access): State<Arc<PageAccess>>,
    request: Request,
    next: Next,
) -> Response {
    if access
        .cookie_token(request.headers())
        .is_some_and(|given| access.admits(given))
    {
        return next.run(request).await;
    }
    let from_query = request.uri().query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
    });
    if request.uri().path() == "/" && from_query.is_some_and(|given| access.admits(given)) {
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            access.cookie, access.token
        );
        let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        return response;
    }
    Refusal::new(
        StatusCode::UNAUTHORIZED,
        "missing or wrong token: open the address `verifine labels serve` printed",
    )
    .into_response()
}

async fn read_edit(request: Request, next: Next) -> Result<Response, Refusal> {
    let (request, _) = crate::body::buffered(request, MAX_EDIT_BYTES, EDIT_TIMEOUT, None).await?;
    Ok(next.run(request).await)
}

async fn page() -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(PAGE)).into_response()
}

async fn list(State(queue): State<Arc<LabelQueue>>) -> Response {
    axum::Json(queue.snapshot()).into_response()
}

async fn save(
    State(queue): State<Arc<LabelQueue>>,
    UrlPath(id): UrlPath<String>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> std::result::Result<Response, Refusal> {
    let body = body.map_err(|rejection| Refusal::new(rejection.status(), rejection.body_text()))?;
    let edit: Value = serde_json::from_slice(&body)
        .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))?;
    let version = edit.get("version").and_then(Value::as_u64).ok_or_else(|| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "the body needs the item's `version`",
        )
    })?;
    let label = edit.get("label").cloned().unwrap_or(Value::Null);
    // The file write blocks; keep it off the async workers.
    let saved = tokio::task::spawn_blocking(move || queue.save(&id, version, label))
        .await
        .map_err(|_| {
            Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the save was interrupted",
            )
        })??;
    Ok(axum::Json(saved).into_response())
}

/// Serves the label page on `listener` on a thread of its own until
/// [`RunningServer::stop`].
pub fn spawn(router: Router, listener: std::net::TcpListener) -> Result<RunningServer> {
    let address = listener.local_addr().map_err(ServeError::UnnamedSocket)?;
    Ok(RunningServer::serve(address, move |shutdown| {
        serve_blocking(router, listener, shutdown)
    }))
}

/// Serves the label page on `listener` until `shutdown` completes.
pub fn serve_blocking(
    router: Router,
    listener: std::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    crate::listen::serve_router(listener, router, 2, ConnectionLimits::default(), shutdown)
}
