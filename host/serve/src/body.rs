//! Reading a request body whole, within a size and a time limit, before
//! the handler runs: a body that drips arrives in time or the request ends
//! with 408, one over the limit ends with 413 before it is all read, and
//! the bytes held by all requests stay within a budget.

use crate::refusal::Refusal;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use http_body_util::BodyExt as _;
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};

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
/// `timeout`, 400 when the connection fails midway, 503 when `budget` (of
/// body bytes held by all requests) runs out. The bytes are reserved from
/// `budget` as they arrive, so a body that drips holds only what it sent;
/// the returned permit holds them until it is dropped.
pub async fn buffered<'a>(
    request: Request,
    max_bytes: usize,
    timeout: Duration,
    budget: Option<&'a Semaphore>,
) -> Result<(Request, Option<SemaphorePermit<'a>>), Refusal> {
    if let Some(length) = declared_length(&request).filter(|&n| n > max_bytes) {
        return Err(too_large(Some(length), max_bytes));
    }
    let (parts, mut body) = request.into_parts();
    let mut bytes = Vec::new();
    let mut held: Option<SemaphorePermit<'a>> = None;
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|_| Refusal::new(StatusCode::BAD_REQUEST, "the body could not be read"))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if bytes.len() + data.len() > max_bytes {
                return Err(too_large(None, max_bytes));
            }
            if let Some(budget) = budget {
                let permits = u32::try_from(data.len()).unwrap_or(u32::MAX);
                let permit = budget.try_acquire_many(permits).map_err(|_| {
                    Refusal::busy("the server holds its limit of body bytes; retry shortly")
                })?;
                match held.as_mut() {
                    Some(held) => held.merge(permit),
                    None => held = Some(permit),
                }
            }
            bytes.extend_from_slice(&data);
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(())) => Ok((Request::from_parts(parts, Body::from(bytes)), held)),
        Ok(Err(refusal)) => Err(refusal),
        Err(_) => Err(Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within the server's {} ms",
                timeout.as_millis()
            ),
        )),
    }
}

fn too_large(declared: Option<usize>, max_bytes: usize) -> Refusal {
    let size = declared.map_or(String::new(), |n| format!(" {n} bytes,"));
    Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is{size} over the length limit of {max_bytes} bytes"),
    )
}
