//! `verifine serve`: the reward server for distributed trainers
//! (OpenRLHF, slime, anything that posts rows), hot-swappable while it serves.

use super::config::ScoreConfig;
use anyhow::{Context as _, Result};
use clap::Args;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use verifine_base::PluginSpec;
use verifine_serve::config::ServeFile;
use verifine_serve::{ServeOptions, Server};

/// Serve rewards over HTTP: `POST /get_reward` (OpenRLHF), `POST /slime`
/// (slime), `POST /v1/score`, `GET /health`, `GET /metrics`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Built-in name, path to a .wasm component, or native:PATH (needs
    /// --allow-native); replaces the config's `[rubric]` plugin.
    #[arg(long)]
    pub rubric: Option<PluginSpec>,
    /// Aggregator (built-in name, path or native:PATH).
    #[arg(long)]
    pub aggregator: Option<PluginSpec>,
    /// TOML with `score`'s `[rubric]`, `[aggregator]`, `[limits]` tables and
    /// the server's `[serve]` and `[hot_swap]` tables.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub config: Option<PathBuf>,
    /// Address to listen on. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0: any free port, printed at start).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Bearer token every route but /health requires. Prefer
    /// VERIFINE_SERVE_TOKEN in the environment: arguments are visible to
    /// other users of the machine.
    #[arg(long, env = "VERIFINE_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The serve directory: inbox (`verifine plugin promote DIR ...`),
    /// events.jsonl, revisions, live.json.
    #[arg(long, default_value = "serve", value_parser = crate::commands::absolute_path)]
    pub dir: PathBuf,
    /// Judge models for rubrics that ask them (a judges.toml).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub judges: Option<PathBuf>,
    /// Allow native:PATH plugins (NOT sandboxed; only for code you trust).
    #[arg(long)]
    pub allow_native: bool,
}

/// Loads the plugins, binds, prints where it listens, and serves until
/// Ctrl-C or SIGTERM.
pub fn run(args: ServeArgs) -> Result<()> {
    let server = bind(&args)?;
    println!(
        "verifine serve: listening on http://{} (serve dir {})",
        server.local_addr(),
        args.dir.display()
    );
    server.run(shutdown_signal())?;
    Ok(())
}

/// The server `args` describe, bound but not yet serving.
pub fn bind(args: &ServeArgs) -> Result<Server> {
    let (config, file) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let score: ScoreConfig = toml::from_str(&text)
                .with_context(|| format!("invalid config {}", path.display()))?;
            let serve: ServeFile = toml::from_str(&text)
                .with_context(|| format!("invalid config {}", path.display()))?;
            (score, serve)
        }
        None => Default::default(),
    };
    let (rubric, aggregator) = config.slots(args.rubric.as_ref(), args.aggregator.as_ref())?;
    let (runtime, _) = config.runtime(args.judges.as_deref(), args.allow_native)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let or_cores = |n: usize| if n == 0 { cores } else { n };
    let table = &file.serve;
    let options = ServeOptions {
        rubric,
        aggregator,
        dir: args.dir.clone(),
        address: SocketAddr::new(args.host, args.port),
        token: args.token.clone(),
        limits: table.limits(),
        workers: or_cores(table.workers),
        io_threads: or_cores(table.io_threads),
        batch_size: table.batch_size.max(1),
        on_failure: table.on_failure,
        swap: verifine_serve::config::swap_options(&file.hot_swap, table.swap_interval_ms)?,
    };
    Ok(Server::bind(options, runtime)?)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
