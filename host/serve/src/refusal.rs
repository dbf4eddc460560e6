//! A request answered without a result: a status, a reason the client can
//! act on (`{"error": reason}`), and the headers that go with it
//! (`Retry-After` on a spent budget, the revisions that refused a batch).
//! Handlers and helpers return `Result<_, Refusal>` and `?` turns it into
//! the response, as in axum's error-handling example.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A refusal on its way to the client.
#[derive(Debug)]
pub struct Refusal {
    status: StatusCode,
    reason: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Fields of the body beside `error`.
    fields: Vec<(&'static str, Value)>,
}

impl Refusal {
    /// Answered with `status` and `reason`.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> Self {
        Refusal {
            status,
            reason: reason.into(),
            headers: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// A 503 with `Retry-After`: a budget is spent for now, not for good.
    pub fn busy(reason: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, reason)
            .with_header(header::RETRY_AFTER, HeaderValue::from_static("1"))
    }

    /// The same refusal with one more header.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The same refusal with one more field in its body (what the client
    /// needs to act on it: the current version of what it tried to change).
    pub fn with_field(mut self, name: &'static str, value: Value) -> Self {
        self.fields.push((name, value));
        self
    }

    /// The status it is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The reason given to the client.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.reason });
        for (name, value) in self.fields {
            body[name] = value;
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}
