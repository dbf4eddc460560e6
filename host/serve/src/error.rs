//! What can stop the server from starting or keep its state.

use std::path::PathBuf;

/// Errors of starting and running the reward server. Per-request problems
/// are not errors of this kind: they become HTTP answers with a reason.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A bind address other than loopback without a bearer token.
    #[error(
        "refusing to bind {address} without --token: only loopback addresses may serve unauthenticated"
    )]
    UnauthenticatedBind {
        /// The address asked for.
        address: std::net::SocketAddr,
    },
    /// An option that cannot work (zero workers, say).
    #[error("invalid serve option: {0}")]
    Option(String),
    /// Binding or serving the socket failed.
    #[error("{action} {address}: {source}")]
    Socket {
        /// What was being done.
        action: &'static str,
        /// The address.
        address: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The listening socket has no address to report (it was closed under
    /// the server, say).
    #[error("reading the listening socket's address: {0}")]
    UnnamedSocket(std::io::Error),
    /// The async runtime that serves connections could not start.
    #[error("starting the async runtime that serves {address}: {source}")]
    AsyncRuntime {
        /// The address it was to serve.
        address: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A file of the serve directory.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The serve directory's recorded state is not readable.
    #[error("{}: {message}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The operating system's random source, read for a per-start token.
    #[error("reading the operating system's random source for a token: {0}")]
    Random(std::io::Error),
    /// Loading or gating plugins.
    #[error(transparent)]
    Hotswap(#[from] verifine_hotswap::HotswapError),
    /// The plugin runtime.
    #[error(transparent)]
    Runtime(#[from] verifine_runtime::RuntimeError),
    /// Writing a file atomically.
    #[error(transparent)]
    File(#[from] verifine_base::files::FileError),
}

/// Results of this crate.
pub type Result<T, E = ServeError> = std::result::Result<T, E>;
