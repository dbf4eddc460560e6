//! Who may send a request, checked before routing by the reward server and
//! the label page alike. A browser on the same machine can reach a
//! loopback port: a page the user visits may POST `text/plain` to it (no
//! CORS preflight), or rebind its own name to 127.0.0.1. So a request must
//! name an allowed `Host` (a rebound name is not one), carry no foreign
//! `Origin`, and declare a JSON body (what no simple cross-site form or
//! `fetch` can send without a preflight the server never grants).

use crate::refusal::Refusal;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::Arc;

/// Names that always mean this machine.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Random bytes in a token made per start.
const TOKEN_BYTES: usize = 24;

/// The `Host` (and `Origin`) values a server accepts: loopback names and
/// the bound address on the bound port, plus configured extras.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    port: u16,
    /// Bound to every interface (which needs a token): no name is foreign.
    any_name: bool,
    names: Vec<String>,
    extras: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    /// What a server bound to `address` accepts; `extra` entries are
    /// `name` (any port) or `name:port`.
    pub fn for_address(address: SocketAddr, extra: &[String]) -> AllowedHosts {
        let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|n| n.to_string()).collect();
        names.push(address.ip().to_string());
        let extras = extra
            .iter()
            .map(|entry| {
                let (name, port) = split_authority(entry);
                (name.to_ascii_lowercase(), port)
            })
            .collect();
        AllowedHosts {
            port: address.port(),
            any_name: address.ip().is_unspecified(),
            names,
            extras,
        }
    }

    /// Whether `authority` (`name[:port]`, as in `Host`) names this server;
    /// a missing port is `default_port`.
    pub fn admits(&self, authority: &str, default_port: u16) -> bool {
        let (name, port) = split_authority(authority);
        let name = name.to_ascii_lowercase();
        let port = port.unwrap_or(default_port);
        if self
            .extras
            .iter()
            .any(|(extra, extra_port)| *extra == name && extra_port.is_none_or(|p| p == port))
        {
            return true;
        }
        port == self.port && (self.any_name || self.names.contains(&name))
    }

    fn admits_origin(&self, origin: &str) -> bool {
        let (authority, default_port) = if let Some(rest) = origin.strip_prefix("http://") {
            (rest, 80)
        } else if let Some(rest) = origin.strip_prefix("https://") {
            (rest, 443)
        } else {
            return false;
        };
        !authority.contains('/') && self.admits(authority, default_port)
    }
}

/// `name` and `port` of `name[:port]`, with IPv6 brackets removed.
fn split_authority(authority: &str) -> (&str, Option<u16>) {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, "")) => (name, None),
            Some((name, port)) => (name, port.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, port.parse().ok()),
        _ => (authority, None),
    }
}

/// Why a request was refused before routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// No `Host` header (HTTP/1.1 requires one).
    MissingHost,
    /// A `Host` that does not name this server: a rebound DNS name, say.
    ForeignHost,
    /// An `Origin` of another site: a page the user visits.
    ForeignOrigin,
    /// A body that does not declare `Content-Type: application/json`.
    NotJson,
}

impl Violation {
    /// The status it is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Violation::MissingHost => StatusCode::BAD_REQUEST,
            Violation::ForeignHost | Violation::ForeignOrigin => StatusCode::FORBIDDEN,
            Violation::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }

    /// The reason given to the client.
    pub fn reason(self) -> &'static str {
        match self {
            Violation::MissingHost => "the request has no Host header",
            Violation::ForeignHost => {
                "the Host header does not name this server (add it to allowed_hosts if it should)"
            }
            Violation::ForeignOrigin => "requests from other sites' pages are refused",
            Violation::NotJson => "the body must be sent with Content-Type: application/json",
        }
    }
}

/// Checks `Host`, `Origin` and, on methods that carry a body, its type.
pub fn check(hosts: &AllowedHosts, method: &Method, headers: &HeaderMap) -> Result<(), Violation> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).ok_or(Violation::MissingHost)?;
    if !hosts.admits(host, 80) {
        return Err(Violation::ForeignHost);
    }
    if headers.contains_key(header::ORIGIN)
        && !text(header::ORIGIN).is_some_and(|origin| hosts.admits_origin(origin))
    {
        return Err(Violation::ForeignOrigin);
    }
    if [Method::POST, Method::PUT, Method::PATCH].contains(method)
        && !is_json(text(header::CONTENT_TYPE))
    {
        return Err(Violation::NotJson);
    }
    Ok(())
}

fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or("").trim();
        essence.eq_ignore_ascii_case("application/json")
    })
}

/// The middleware form of [`check`].
pub async fn guard(
    State(hosts): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Result<Response, Refusal> {
    check(&hosts, request.method(), request.headers())
        .map_err(|violation| Refusal::new(violation.status(), violation.reason()))?;
    Ok(next.run(request).await)
}

/// Compares without stopping at the first difference, so the time taken
/// does not tell how much of a guess was right.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        difference |= e ^ given.get(i).copied().unwrap_or(!e);
    }
    difference == 0
}

/// A token made per start from the operating system's random source, as
/// lowercase hex.
pub fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| (name.clone(), value.parse().unwrap()))
            .collect()
    }

    #[test]
    fn loopback_names_and_the_bound_port_are_the_only_hosts() {
        let hosts = AllowedHosts::for_address("127.0.0.1:8000".parse().unwrap(), &[]);
        for host in [
            "127.0.0.1:8000",
            "localhost:8000",
            "LOCALHOST:8000",
            "[::1]:8000",
        ] {
            assert!(hosts.admits(host, 80), "{host}");
        }
        for host in [
            "evil.example:8000",
            "127.0.0.1:8001",
            "localhost",
            "127.0.0.1.evil:8000",
        ] {
            assert!(!hosts.admits(host, 80), "{host}");
        }
        let extra = ["trainer.internal".to_string(), "proxy:443".to_string()];
        let hosts = AllowedHosts::for_address("127.0.0.1:8000".parse().unwrap(), &extra);
        assert!(hosts.admits("trainer.internal:9", 80));
        assert!(hosts.admits("proxy:443", 80) && !hosts.admits("proxy:80", 80));
        let everywhere = AllowedHosts::for_address("0.0.0.0:8000".parse().unwrap(), &[]);
        assert!(everywhere.admits("gpu-node-3:8000", 80));
    }

    #[test]
    fn foreign_hosts_origins_and_plain_text_bodies_are_refused() {
        let hosts = AllowedHosts::for_address("127.0.0.1:8000".parse().unwrap(), &[]);
        let json = (header::CONTENT_TYPE, "application/json; charset=utf-8");
        let here = (header::HOST, "127.0.0.1:8000");
        let check =
            |pairs: &[(header::HeaderName, &str)]| check(&hosts, &Method::POST, &headers(pairs));
        assert_eq!(check(&[here.clone(), json.clone()]), Ok(()));
        assert_eq!(
            check(std::slice::from_ref(&json)),
            Err(Violation::MissingHost)
        );
        assert_eq!(
            check(&[(header::HOST, "rebound.example:8000"), json.clone()]),
            Err(Violation::ForeignHost)
        );
        for origin in [
            "https://evil.example",
            "null",
            "http://127.0.0.1:8000.evil.example",
        ] {
            assert_eq!(
                check(&[here.clone(), json.clone(), (header::ORIGIN, origin)]),
                Err(Violation::ForeignOrigin),
                "{origin}"
            );
        }
        let own = (header::ORIGIN, "http://localhost:8000");
        assert_eq!(check(&[here.clone(), json.clone(), own]), Ok(()));
        assert_eq!(
            check(&[here.clone(), (header::CONTENT_TYPE, "text/plain")]),
            Err(Violation::NotJson)
        );
        assert_eq!(check(std::slice::from_ref(&here)), Err(Violation::NotJson));
        let get = super::check(&hosts, &Method::GET, &headers(&[here]));
        assert_eq!(get, Ok(()), "no body, no type to declare");
    }

    #[test]
    fn tokens_are_long_fresh_and_compared_whole() {
        let (a, b) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(a.len(), 2 * TOKEN_BYTES);
        assert_ne!(a, b);
        assert!(same_secret(a.as_bytes(), a.as_bytes()));
        assert!(!same_secret(&a.as_bytes()[1..], a.as_bytes()));
        assert!(!same_secret(b.as_bytes(), a.as_bytes()));
    }
}
