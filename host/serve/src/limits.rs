//! What one client may make the server hold: request and sample budgets,
//! body and head read times, connections, and how long shutdown may wait.
//! Every limit is a number a hostile client runs into with a reason (413,
//! 503 with Retry-After, 408, a closed socket), never an unbounded queue.

use std::time::Duration;

/// What every request may use, and which `Host`s it may name. The defaults
/// are those of `[serve]` in a config file (see [`crate::config`]).
#[derive(Debug, Clone)]
pub struct RequestLimits {
    /// Largest accepted body (413 above).
    pub max_body_bytes: usize,
    /// Body bytes held by all requests at once; a request that would pass
    /// it gets 503 before its body is read. Bounds memory where
    /// `max_in_flight * max_body_bytes` would not.
    pub max_body_bytes_in_flight: usize,
    /// Time from the request's arrival to its answer (504 after).
    pub deadline: Duration,
    /// Time the body may take to arrive once the head is in (408 after),
    /// so a dripping body cannot hold a permit until the deadline.
    pub body_timeout: Duration,
    /// Scoring requests in flight; one more is answered 503 with Retry-After.
    pub max_in_flight: usize,
    /// Samples one request may carry (413 above), counted before any
    /// sample is built.
    pub max_samples_per_request: usize,
    /// Samples admitted and not yet scored or dropped, over all requests;
    /// a request that would pass it gets 503 with Retry-After.
    pub max_samples_in_flight: usize,
    /// Scoring jobs waiting for a worker; one more is answered 503.
    pub max_queued_jobs: usize,
    /// Host names (`name` for any port, `name:port` for one) accepted in
    /// `Host` and `Origin` besides `localhost`, the loopback addresses and
    /// the bound address.
    pub allowed_hosts: Vec<String>,
    /// The connection layer's limits.
    pub connections: ConnectionLimits,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_body_bytes: 16 << 20,
            max_body_bytes_in_flight: 256 << 20,
            deadline: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_in_flight: 512,
            max_samples_per_request: 16_384,
            max_samples_in_flight: 65_536,
            max_queued_jobs: 1024,
            allowed_hosts: Vec::new(),
            connections: ConnectionLimits::default(),
        }
    }
}

/// What sockets may hold, before any request is read (and so before the
/// token is checked): the reward server and the label page share these.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; further ones wait in the listen backlog
    /// until one closes.
    pub max_connections: usize,
    /// Time a request head may take to arrive, idle keep-alive time
    /// included; the connection is closed after it (slow heads, idle
    /// sockets).
    pub header_timeout: Duration,
    /// Time requests in flight get to finish at shutdown; connections still
    /// open after it are closed.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}
