//! The server's tables of a config file, beside `score`'s `[rubric]`,
//! `[aggregator]` and `[limits]`:
//!
//! ```toml
//! [serve]
//! workers = 0              # scoring threads; 0: one per core
//! io_threads = 0           # async runtime threads; 0: one per core
//! batch_size = 64          # samples per plugin call within a request
//! max_in_flight = 512      # scoring requests at once; more get 503 + Retry-After
//! max_body_bytes = 16777216           # per request (413 above)
//! max_body_bytes_in_flight = 268435456  # all bodies held at once (503 above)
//! max_samples_per_request = 16384     # counted before building (413 above)
//! max_samples_in_flight = 65536       # admitted, not yet scored (503 above)
//! max_queued_jobs = 1024   # jobs waiting for a scoring thread (503 above)
//! deadline_ms = 60000      # per request, from arrival to answer (504 after)
//! body_timeout_ms = 30000  # for the body once the head is in (408 after)
//! header_timeout_ms = 10000  # for a request head, idle keep-alive included
//! max_connections = 1024   # open at once; more wait in the listen backlog
//! shutdown_grace_ms = 5000 # for requests in flight at shutdown
//! allowed_hosts = []       # Host/Origin names besides localhost and the bound
//!                          # address: "name" (any port) or "name:port"
//! on_failure = "zero"      # or "error": a failed sample makes the request 422
//! swap_interval_ms = 500   # time between swap points
//!
//! [hot_swap]
//! keep_revisions = 5
//! canary = "canary.jsonl"  # labelled rows the gate checks candidates on
//! watch_dir = "incoming"   # <dir>/rubric/*.wasm, <dir>/aggregator/*.wasm
//! gate = { canary_margin = 0.0, canary_threshold = 0.5, shadow_steps = 20, shadow_margin = 0.2 }
//! ```
//! (`shadow_steps` counts swap points here.)

use crate::error::ServeError;
use crate::limits::{ConnectionLimits, RequestLimits};
use crate::live::SwapOptions;
use crate::protocol::FailurePolicy;
use serde::Deserialize;
use std::time::Duration;
use verifine_hotswap::HotSwapConfig;
use verifine_hotswap::gate::CanaryCase;

/// `[serve]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeTable {
    /// Scoring threads; 0: one per core.
    pub workers: usize,
    /// Async runtime threads; 0: one per core.
    pub io_threads: usize,
    /// Samples per plugin call within a request.
    pub batch_size: usize,
    /// Scoring requests at once.
    pub max_in_flight: usize,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Body bytes all scoring requests may hold at once.
    pub max_body_bytes_in_flight: usize,
    /// Samples one request may carry.
    pub max_samples_per_request: usize,
    /// Samples admitted and not yet scored, over all requests.
    pub max_samples_in_flight: usize,
    /// Scoring jobs waiting for a thread.
    pub max_queued_jobs: usize,
    /// Per-request deadline.
    pub deadline_ms: u64,
    /// Time for a body to arrive once its head is in.
    pub body_timeout_ms: u64,
    /// Time for a request head to arrive, idle keep-alive included.
    pub header_timeout_ms: u64,
    /// Connections open at once.
    pub max_connections: usize,
    /// Time requests in flight get to finish at shutdown.
    pub shutdown_grace_ms: u64,
    /// `Host`/`Origin` names accepted besides loopback and the bound address.
    pub allowed_hosts: Vec<String>,
    /// What a failed sample's reward becomes.
    pub on_failure: FailurePolicy,
    /// Time between swap points.
    pub swap_interval_ms: u64,
}

impl Default for ServeTable {
    fn default() -> Self {
        let limits = RequestLimits::default();
        let millis = |d: Duration| d.as_millis() as u64;
        ServeTable {
            workers: 0,
            io_threads: 0,
            batch_size: 64,
            max_in_flight: limits.max_in_flight,
            max_body_bytes: limits.max_body_bytes,
            max_body_bytes_in_flight: limits.max_body_bytes_in_flight,
            max_samples_per_request: limits.max_samples_per_request,
            max_samples_in_flight: limits.max_samples_in_flight,
            max_queued_jobs: limits.max_queued_jobs,
            deadline_ms: millis(limits.deadline),
            body_timeout_ms: millis(limits.body_timeout),
            header_timeout_ms: millis(limits.connections.header_timeout),
            max_connections: limits.connections.max_connections,
            shutdown_grace_ms: millis(limits.connections.shutdown_grace),
            allowed_hosts: limits.allowed_hosts,
            on_failure: FailurePolicy::Zero,
            swap_interval_ms: 500,
        }
    }
}

impl ServeTable {
    /// The request limits it sets.
    pub fn limits(&self) -> RequestLimits {
        RequestLimits {
            max_body_bytes: self.max_body_bytes,
            max_body_bytes_in_flight: self.max_body_bytes_in_flight,
            deadline: Duration::from_millis(self.deadline_ms),
            body_timeout: Duration::from_millis(self.body_timeout_ms),
            max_in_flight: self.max_in_flight,
            max_samples_per_request: self.max_samples_per_request,
            max_samples_in_flight: self.max_samples_in_flight,
            max_queued_jobs: self.max_queued_jobs,
            allowed_hosts: self.allowed_hosts.clone(),
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                header_timeout: Duration::from_millis(self.header_timeout_ms),
                shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            },
        }
    }
}

/// The swap options of the server's `[hot_swap]` table (the table every
/// host reads), with the canary rows read (errors name `file:line`).
/// Training's settings there are refused rather than ignored: the server
/// asks no agent and generates no canary.
pub fn swap_options(table: &HotSwapConfig, interval_ms: u64) -> crate::error::Result<SwapOptions> {
    let training_only = |key: &str| {
        ServeError::Option(format!(
            "[hot_swap] {key} is for `verifine train`: the server asks no revision agent and \
             generates no canary (give `canary = FILE`, and hand candidates in through the \
             inbox or `watch_dir`)"
        ))
    };
    if !table.agent.command.is_empty() {
        return Err(training_only("agent"));
    }
    if table.canary_size != HotSwapConfig::default().canary_size {
        return Err(training_only("canary_size"));
    }
    let canary = match &table.canary {
        Some(path) => verifine_runtime::rows::read_labelled(path, table.gate.canary_threshold)?
            .into_iter()
            .map(|(sample, label)| CanaryCase { sample, label })
            .collect(),
        None => Vec::new(),
    };
    Ok(SwapOptions {
        keep_revisions: table.keep_revisions,
        gate: table.gate.clone(),
        canary,
        watch_dir: table.watch_dir.clone(),
        interval: Duration::from_millis(interval_ms),
    })
}

/// The server's tables of a config file (other tables are left to `score`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServeFile {
    /// `[serve]`.
    #[serde(default)]
    pub serve: ServeTable,
    /// `[hot_swap]`.
    #[serde(default)]
    pub hot_swap: HotSwapConfig,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_hot_swap_table_is_trainings_and_refuses_its_training_keys() {
        let read = |text: &str| toml::from_str::<ServeFile>(text).unwrap().hot_swap;
        let plain = read("[hot_swap]\nkeep_revisions = 2\nwatch_dir = \"incoming\"\n");
        let options = swap_options(&plain, 100).unwrap();
        assert_eq!(options.keep_revisions, 2);
        assert_eq!(options.interval, Duration::from_millis(100));
        for (text, key) in [
            ("[hot_swap.agent]\ncommand = [\"agent.sh\"]\n", "agent"),
            ("[hot_swap]\ncanary_size = 10\n", "canary_size"),
        ] {
            let err = swap_options(&read(text), 100).unwrap_err().to_string();
            assert!(
                err.contains(&format!("[hot_swap] {key} is for `verifine train`")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_hostile_client_limits_are_read_with_documented_defaults() {
        let file: ServeFile = toml::from_str(
            r#"
[serve]
max_samples_per_request = 100
max_samples_in_flight = 400
max_body_bytes_in_flight = 1048576
max_queued_jobs = 8
body_timeout_ms = 2000
header_timeout_ms = 1000
max_connections = 64
shutdown_grace_ms = 250
allowed_hosts = ["trainer.internal", "proxy:443"]
"#,
        )
        .unwrap();
        let limits = file.serve.limits();
        assert_eq!(limits.max_samples_per_request, 100);
        assert_eq!(limits.max_samples_in_flight, 400);
        assert_eq!(limits.max_body_bytes_in_flight, 1 << 20);
        assert_eq!(limits.max_queued_jobs, 8);
        assert_eq!(limits.body_timeout, Duration::from_secs(2));
        assert_eq!(limits.connections.header_timeout, Duration::from_secs(1));
        assert_eq!(limits.connections.max_connections, 64);
        assert_eq!(
            limits.connections.shutdown_grace,
            Duration::from_millis(250)
        );
        assert_eq!(limits.allowed_hosts, ["trainer.internal", "proxy:443"]);
        // Unset keys keep the defaults the module documents.
        let defaults = ServeFile::default().serve.limits();
        assert_eq!(defaults.max_samples_per_request, 16_384);
        assert_eq!(defaults.max_samples_in_flight, 65_536);
        assert_eq!(defaults.max_body_bytes_in_flight, 256 << 20);
        assert_eq!(defaults.max_queued_jobs, 1024);
        assert_eq!(defaults.body_timeout, Duration::from_secs(30));
        assert_eq!(defaults.connections.header_timeout, Duration::from_secs(10));
        assert_eq!(defaults.connections.max_connections, 1024);
        assert_eq!(defaults.connections.shutdown_grace, Duration::from_secs(5));
        assert!(defaults.allowed_hosts.is_empty());
        let typo = toml::from_str::<ServeFile>("[serve]\nmax_sample_per_request = 1\n");
        assert!(
            typo.unwrap_err()
                .to_string()
                .contains("max_sample_per_request")
        );
    }
}
