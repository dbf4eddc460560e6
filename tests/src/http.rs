//! A blocking HTTP client for the server tests, shaped like
//! `reqwest::blocking` (the subset the tests use).
//!
//! reqwest's own `blocking` feature would do, but as a dev-dependency it
//! switches on features of crates the binary shares (futures' `io`), so a
//! CI run compiled wasmtime and every verifine crate twice: once for the
//! tests and once more for the `verifine` binary and the Python extension.
//! This wraps the async client the judge already compiles, on one runtime
//! shared by every test thread.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{IntoUrl, Method, StatusCode};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the tests' HTTP runtime starts")
    })
}

/// A client; cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Client {
    inner: reqwest::Client,
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// A client with reqwest's defaults.
    pub fn new() -> Self {
        Self::builder().build().expect("a default client builds")
    }

    /// A client to configure (timeout, redirects).
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            inner: reqwest::Client::builder(),
        }
    }

    /// A GET request.
    pub fn get(&self, url: impl IntoUrl) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    /// A POST request.
    pub fn post(&self, url: impl IntoUrl) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    /// A PUT request.
    pub fn put(&self, url: impl IntoUrl) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    fn request(&self, method: Method, url: impl IntoUrl) -> RequestBuilder {
        RequestBuilder {
            inner: self.inner.request(method, url),
        }
    }
}

/// Options of a [`Client`].
pub struct ClientBuilder {
    inner: reqwest::ClientBuilder,
}

impl ClientBuilder {
    /// The whole request's deadline, connecting to the last byte.
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            inner: self.inner.timeout(timeout),
        }
    }

    /// Whether and how far redirects are followed.
    pub fn redirect(self, policy: reqwest::redirect::Policy) -> Self {
        Self {
            inner: self.inner.redirect(policy),
        }
    }

    /// The client. A tokio context is needed to build one (its connector
    /// registers with the reactor), hence the runtime.
    pub fn build(self) -> reqwest::Result<Client> {
        let _context = runtime().enter();
        Ok(Client {
            inner: self.inner.build()?,
        })
    }
}

/// A request being put together.
pub struct RequestBuilder {
    inner: reqwest::RequestBuilder,
}

impl RequestBuilder {
    /// Adds a header.
    pub fn header(self, name: &str, value: impl AsRef<str>) -> Self {
        let value = HeaderValue::from_str(value.as_ref()).expect("a valid header value");
        Self {
            inner: self.inner.header(name, value),
        }
    }

    /// `Authorization: Bearer <token>`.
    pub fn bearer_auth(self, token: impl std::fmt::Display) -> Self {
        Self {
            inner: self.inner.bearer_auth(token),
        }
    }

    /// The raw body.
    pub fn body(self, body: impl Into<reqwest::Body>) -> Self {
        Self {
            inner: self.inner.body(body),
        }
    }

    /// `value` as a JSON body, with its content type.
    pub fn json<T: serde::Serialize + ?Sized>(self, value: &T) -> Self {
        let body = serde_json::to_vec(value).expect("the request body serializes");
        self.header("content-type", "application/json").body(body)
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> reqwest::Result<Response> {
        runtime().block_on(async move {
            let response = self.inner.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?.to_vec();
            Ok(Response {
                status,
                headers,
                body,
            })
        })
    }
}

/// A response, read to its end.
pub struct Response {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body as UTF-8 text.
    pub fn text(self) -> Result<String, std::string::FromUtf8Error> {
        String::from_utf8(self.body)
    }

    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }
}
