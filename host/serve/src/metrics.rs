//! Counters for `GET /metrics`, in Prometheus' text format: requests by
//! endpoint and status, a latency histogram per endpoint, samples scored,
//! reward failures, and the live revisions. Lock-free on the request path.

use crate::pool::Generation;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The endpoints that are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /get_reward` (OpenRLHF).
    OpenRlhf,
    /// `POST /slime`.
    Slime,
    /// `POST /v1/score`.
    Score,
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// Anything else (answered 404 or 405).
    Other,
}

impl Endpoint {
    const ALL: [Endpoint; 6] = [
        Endpoint::OpenRlhf,
        Endpoint::Slime,
        Endpoint::Score,
        Endpoint::Health,
        Endpoint::Metrics,
        Endpoint::Other,
    ];

    /// The `endpoint` label.
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::OpenRlhf => "/get_reward",
            Endpoint::Slime => "/slime",
            Endpoint::Score => "/v1/score",
            Endpoint::Health => "/health",
            Endpoint::Metrics => "/metrics",
            Endpoint::Other => "other",
        }
    }

    /// The endpoint a request path is counted under.
    pub fn of_path(path: &str) -> Endpoint {
        Endpoint::ALL
            .into_iter()
            .find(|e| e.label() == path)
            .unwrap_or(Endpoint::Other)
    }
}

/// Statuses the server answers with; any other is counted as 500.
const STATUSES: [u16; 13] = [
    200, 400, 401, 403, 404, 405, 408, 413, 415, 422, 500, 503, 504,
];

/// Where an unlisted status is counted: 500.
const OTHER_STATUS: usize = 10;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default)]
struct PerEndpoint {
    by_status: [AtomicU64; STATUSES.len()],
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
}

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    endpoints: [PerEndpoint; Endpoint::ALL.len()],
    samples: AtomicU64,
    failures: AtomicU64,
}

impl Metrics {
    /// Counts one answered request and its latency.
    pub fn request(&self, endpoint: Endpoint, status: u16, latency: Duration) {
        let e = &self.endpoints[endpoint as usize];
        let s = STATUSES
            .iter()
            .position(|&s| s == status)
            .unwrap_or(OTHER_STATUS);
        e.by_status[s].fetch_add(1, Ordering::Relaxed);
        let seconds = latency.as_secs_f64();
        if let Some(b) = BUCKETS.iter().position(|&b| seconds <= b) {
            e.buckets[b].fetch_add(1, Ordering::Relaxed);
        }
        e.count.fetch_add(1, Ordering::Relaxed);
        e.micros
            .fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts scored samples and the ones whose reward failed.
    pub fn scored(&self, samples: usize, failures: usize) {
        self.samples.fetch_add(samples as u64, Ordering::Relaxed);
        self.failures.fetch_add(failures as u64, Ordering::Relaxed);
    }

    /// The text `GET /metrics` returns; `in_flight` is the number of
    /// scoring requests admitted and not yet answered, `abandoned` the jobs
    /// dropped because their request was gone.
    pub fn render(&self, live: &Generation, in_flight: usize, abandoned: u64) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP verifine_requests_in_flight Scoring requests admitted and not yet answered.\n",
        );
        out.push_str("# TYPE verifine_requests_in_flight gauge\n");
        let _ = writeln!(out, "verifine_requests_in_flight {in_flight}");
        out.push_str("# HELP verifine_requests_total Requests answered, by endpoint and status.\n");
        out.push_str("# TYPE verifine_requests_total counter\n");
        for endpoint in Endpoint::ALL {
            let e = &self.endpoints[endpoint as usize];
            for (status, count) in STATUSES.iter().zip(&e.by_status) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "verifine_requests_total{{endpoint=\"{}\",status=\"{status}\"}} {count}",
                        endpoint.label()
                    );
                }
            }
        }
        out.push_str("# HELP verifine_request_seconds Time from request to answer.\n");
        out.push_str("# TYPE verifine_request_seconds histogram\n");
        for endpoint in Endpoint::ALL {
            let e = &self.endpoints[endpoint as usize];
            let count = e.count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let label = endpoint.label();
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(&e.buckets) {
                cumulative += n.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "verifine_request_seconds_bucket{{endpoint=\"{label}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "verifine_request_seconds_bucket{{endpoint=\"{label}\",le=\"+Inf\"}} {count}"
            );
            let seconds = e.micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "verifine_request_seconds_sum{{endpoint=\"{label}\"}} {seconds}"
            );
            let _ = writeln!(
                out,
                "verifine_request_seconds_count{{endpoint=\"{label}\"}} {count}"
            );
        }
        let counters = [
            (
                "verifine_samples_scored_total",
                "Samples scored.",
                &self.samples,
            ),
            (
                "verifine_reward_failures_total",
                "Samples whose reward failed (plugin error, no score, non-finite total).",
                &self.failures,
            ),
        ];
        let abandoned_help = "Scoring jobs dropped, unscored or part-scored, because their request was gone (deadline, disconnect).";
        let counters = counters
            .into_iter()
            .map(|(name, help, value)| (name, help, value.load(Ordering::Relaxed)))
            .chain([("verifine_jobs_abandoned_total", abandoned_help, abandoned)]);
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {value}");
        }
        out.push_str("# HELP verifine_live_revision The revision live in each slot (value 1).\n");
        out.push_str("# TYPE verifine_live_revision gauge\n");
        for (slot, p) in ["rubric", "aggregator"].iter().zip(&live.revisions) {
            let _ = writeln!(
                out,
                "verifine_live_revision{{slot=\"{slot}\",name=\"{}\",version=\"{}\",sha256=\"{}\"}} 1",
                escape(&p.name),
                escape(&p.version),
                p.sha256
            );
        }
        out.push_str("# HELP verifine_live_generation Swaps since the server started.\n");
        out.push_str("# TYPE verifine_live_generation gauge\n");
        let _ = writeln!(out, "verifine_live_generation {}", live.id);
        out
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
