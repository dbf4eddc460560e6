//! Starting and stopping the server: the bind check, the scoring pool, the
//! swap thread and the HTTP loop, in that order; stopping reverses it.

use crate::error::{Result, ServeError};
use crate::guard::AllowedHosts;
use crate::http::{App, router};
use crate::limits::RequestLimits;
use crate::listen::serve_router;
use crate::live::{self, Live, SwapOptions, Swapper};
use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::protocol::FailurePolicy;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use verifine_runtime::{PluginSetting, Runtime};

/// Everything `verifine serve` is told.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The rubric (built-in name, path, `native:PATH`) and its config table.
    pub rubric: PluginSetting,
    /// The aggregator, when one is named.
    pub aggregator: Option<PluginSetting>,
    /// The serve directory: inbox, events, revisions, `live.json`.
    pub dir: PathBuf,
    /// Where to listen; only loopback without a token.
    pub address: SocketAddr,
    /// Bearer token required on every route but `/health`.
    pub token: Option<String>,
    /// Per-request limits.
    pub limits: RequestLimits,
    /// Scoring threads, each with its own plugin instances.
    pub workers: usize,
    /// Threads of the async runtime that parse requests and write answers.
    pub io_threads: usize,
    /// Samples per plugin call within a request.
    pub batch_size: usize,
    /// What a failed sample's reward becomes.
    pub on_failure: FailurePolicy,
    /// Revisions and swaps.
    pub swap: SwapOptions,
}

/// A server that has bound its socket and loaded its plugins.
pub struct Server {
    app: Arc<App>,
    live: Arc<Live>,
    swapper: Swapper,
    listener: std::net::TcpListener,
    io_threads: usize,
}

impl Server {
    /// Checks the options, loads the plugins (restoring the revisions the
    /// serve directory records for the same configuration) and binds.
    pub fn bind(options: ServeOptions, runtime: Runtime) -> Result<Server> {
        if !options.address.ip().is_loopback() && options.token.is_none() {
            return Err(ServeError::UnauthenticatedBind {
                address: options.address,
            });
        }
        if options.token.as_deref().is_some_and(str::is_empty) {
            return Err(ServeError::Option("--token must not be empty".to_string()));
        }
        check_limits(&options)?;
        let (live, observer, swapper) = live::start(
            runtime,
            &options.rubric,
            options.aggregator.as_ref(),
            &options.dir,
            options.swap.clone(),
        )?;
        let listener =
            std::net::TcpListener::bind(options.address).map_err(|source| ServeError::Socket {
                action: "binding",
                address: options.address,
                source,
            })?;
        let bound = listener.local_addr().map_err(|source| ServeError::Socket {
            action: "reading the address of",
            address: options.address,
            source,
        })?;
        let limits = options.limits;
        let app = Arc::new(App {
            live: live.clone(),
            pool: Pool::start(
                options.workers,
                options.batch_size,
                limits.max_queued_jobs,
                observer,
            ),
            metrics: Metrics::default(),
            token: options.token,
            on_failure: options.on_failure,
            permits: Semaphore::new(limits.max_in_flight),
            samples_in_flight: Arc::new(Semaphore::new(limits.max_samples_in_flight)),
            body_bytes_in_flight: Semaphore::new(limits.max_body_bytes_in_flight),
            hosts: Arc::new(AllowedHosts::for_address(bound, &limits.allowed_hosts)),
            limits,
        });
        Ok(Server {
            app,
            live,
            swapper,
            listener,
            io_threads: options.io_threads,
        })
    }

    /// The state the router serves (for in-process tests of the router).
    #[cfg(test)]
    pub(crate) fn app(&self) -> Arc<App> {
        self.app.clone()
    }

    /// The address bound (the port, when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound socket has an address")
    }

    /// Serves until `shutdown` completes, then lets requests in flight
    /// finish, stops the swap thread and the scoring pool.
    pub fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let address = self.local_addr();
        let swapper = std::thread::Builder::new()
            .name("verifine-swap".to_string())
            .spawn(move || self.swapper.run())
            .map_err(|source| ServeError::Socket {
                action: "starting the swap thread for",
                address,
                source,
            })?;
        let served = serve_router(
            self.listener,
            router(self.app.clone()),
            self.io_threads,
            self.app.limits.connections,
            shutdown,
        );
        self.live.stop();
        let _ = swapper.join();
        self.app.pool.stop();
        served
    }

    /// Serves on a thread of its own until [`RunningServer::stop`].
    pub fn spawn(self) -> RunningServer {
        let address = self.local_addr();
        RunningServer::serve(address, move |shutdown| self.run(shutdown))
    }
}

/// A server serving on its own thread.
pub struct RunningServer {
    /// Where it listens.
    pub address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl RunningServer {
    /// Runs `serve` on a thread of its own, with a shutdown future that
    /// completes at [`RunningServer::stop`].
    pub(crate) fn serve(
        address: SocketAddr,
        serve: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> Result<()> + Send + 'static,
    ) -> RunningServer {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            serve(Box::pin(async move {
                let _ = stopped.await;
            }))
        });
        RunningServer {
            address,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://ADDRESS`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stops serving (requests in flight finish) and waits.
    pub fn stop(mut self) -> Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServeError::Option("the server thread panicked".to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// Refuses limits that cannot work: zeros, and budgets smaller than what
/// one request may take (such a request could never be admitted).
fn check_limits(options: &ServeOptions) -> Result<()> {
    let limits = &options.limits;
    for (name, value) in [
        ("workers", options.workers),
        ("io_threads", options.io_threads),
        ("max_in_flight", limits.max_in_flight),
        ("max_body_bytes", limits.max_body_bytes),
        ("max_samples_per_request", limits.max_samples_per_request),
        ("max_queued_jobs", limits.max_queued_jobs),
        ("max_connections", limits.connections.max_connections),
    ] {
        if value == 0 {
            return Err(ServeError::Option(format!("{name} must be at least 1")));
        }
    }
    for (budget, value, single, per_request) in [
        (
            "max_samples_in_flight",
            limits.max_samples_in_flight,
            "max_samples_per_request",
            limits.max_samples_per_request,
        ),
        (
            "max_body_bytes_in_flight",
            limits.max_body_bytes_in_flight,
            "max_body_bytes",
            limits.max_body_bytes,
        ),
    ] {
        if value < per_request || u32::try_from(per_request).is_err() {
            return Err(ServeError::Option(format!(
                "{budget} ({value}) must be at least {single} ({per_request}), which must fit in 32 bits"
            )));
        }
    }
    let durations = [
        options.swap.interval,
        limits.deadline,
        limits.body_timeout,
        limits.connections.header_timeout,
    ];
    if durations.iter().any(Duration::is_zero) {
        return Err(ServeError::Option(
            "swap_interval_ms, deadline_ms, body_timeout_ms and header_timeout_ms must be positive"
                .to_string(),
        ));
    }
    Ok(())
}

// The router in process: it needs a bound server's app, so the tests
// live under the server, which sits above the router.
#[cfg(test)]
#[path = "http_tests.rs"]
mod http_tests;
