//! Reading a request body whole, within a size and a time limit, before
//! the handler runs: a body that drips arrives in time or the request ends
//! with 408, and one over the limit ends with 413 before it is all read.

use crate::http::refuse;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use std::time::Duration;

/// The length a request declares (`Content-Length`), when it does.
pub fn declared_length(request: &Request) -> Option<usize> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// `request` with its body read into memory, or the refusal: 413 when it
/// declares or sends more than `max_bytes`, 408 when it takes longer than
/// `timeout`, 400 when the connection fails midway.
pub async fn buffered(
    request: Request,
    max_bytes: usize,
    timeout: Duration,
) -> Result<Request, Response> {
    if let Some(length) = declared_length(&request).filter(|&n| n > max_bytes) {
        return Err(too_large(Some(length), max_bytes));
    }
    let (parts, body) = request.into_parts();
    let bytes = match tokio::time::timeout(timeout, axum::body::to_bytes(body, max_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error)) => {
            let over = error
                .into_inner()
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            return Err(if over {
                too_large(None, max_bytes)
            } else {
                refuse(StatusCode::BAD_REQUEST, "the body could not be read")
            });
        }
        Err(_) => {
            return Err(refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within the server's {} ms",
                    timeout.as_millis()
                ),
            ));
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn too_large(declared: Option<usize>, max_bytes: usize) -> Response {
    let size = declared.map_or(String::new(), |n| format!(" {n} bytes,"));
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is{size} over the length limit of {max_bytes} bytes"),
    )
}
