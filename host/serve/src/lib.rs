//! The reward server: distributed trainers score with verifine's plugins
//! over HTTP, and the plugins stay hot-swappable while they do.
//!
//! Three doors, one scoring core:
//! - `POST /get_reward`: OpenRLHF's remote reward (`--remote_rm_url`);
//! - `POST /slime`: slime's remote reward model (`--rm-type remote_rm --rm-url`);
//! - `POST /v1/score`: score input rows in, output rows with provenance out;
//!
//! and `GET /health`, `GET /metrics` (Prometheus text). Every scoring
//! answer names the revisions that produced it (the `x-verifine-revisions`
//! header, and the body where the protocol has room).
//!
//! Hostile input meets a limit before it costs anything: connections,
//! request heads and bodies are timed and counted ([`listen`],
//! [`limits`]), foreign `Host`s and `Origin`s and non-JSON bodies are
//! refused ([`guard`]), samples are counted before they are built
//! ([`sizing`]), and a job whose request is gone is dropped ([`pool`]).
//!
//! The serve directory is a run directory as far as hot-swap is concerned:
//! `verifine plugin promote DIR rubric new.wasm` and `rollback` hand requests
//! to its inbox, a watched directory works as in training, and decisions go
//! to `DIR/events.jsonl`. A request finishes on the revisions live when it
//! started.

#![warn(missing_docs)]

mod body;
pub mod config;
pub mod error;
pub mod guard;
pub mod http;
pub mod labels;
pub mod limits;
pub mod listen;
pub mod live;
pub mod metrics;
pub mod pool;
pub mod protocol;
pub mod refusal;
mod server;
pub mod sizing;

pub use config::ServeTable;
pub use error::{Result, ServeError};
pub use http::REVISIONS_HEADER;
pub use limits::{ConnectionLimits, RequestLimits};
pub use live::SwapOptions;
pub use protocol::FailurePolicy;
pub use refusal::Refusal;
pub use server::{RunningServer, ServeOptions, Server};
