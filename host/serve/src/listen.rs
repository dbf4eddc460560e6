//! The accept loop both the reward server and the label page run: a cap on
//! open connections, a time limit on every request head (idle keep-alive
//! included), and a shutdown that ends within a bound however slowly a
//! client drips. `axum::serve` has none of the three.

use crate::error::{Result, ServeError};
use crate::limits::ConnectionLimits;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// Pause after a failed accept (out of file descriptors, say), so the loop
/// does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` with `threads` async worker threads until
/// `shutdown` completes; requests in flight then get
/// `limits.shutdown_grace` to finish before their connections are closed.
pub fn serve_router(
    listener: std::net::TcpListener,
    router: axum::Router,
    threads: usize,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let address = listener.local_addr().map_err(ServeError::UnnamedSocket)?;
    let socket_error = |action, source| ServeError::Socket {
        action,
        address,
        source,
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| socket_error("configuring", e))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("verifine-serve-io")
        .enable_all()
        .build()
        .map_err(|source| ServeError::AsyncRuntime { address, source })?;
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        accept_until(listener, router, limits, shutdown).await;
        Ok(())
    });
    // Connection tasks still running were aborted; do not wait on them.
    runtime.shutdown_background();
    served.map_err(|e| socket_error("serving", e))
}

async fn accept_until(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (closing, closing_seen) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = open.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let service = TowerToHyperService::new(router.clone());
        let mut closing = closing_seen.clone();
        connections.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections still open {} ms after shutdown began; closing them",
            connections.len(),
            limits.shutdown_grace.as_millis()
        );
        connections.abort_all();
    }
}
