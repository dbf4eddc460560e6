//! `verifine plugin …`: list, inspect and check plugins (here), and the
//! author's workflow — new, build, test, diff, promote, rollback — in
//! [`super::author`].

use super::author;
use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::path::PathBuf;
use verifine_base::PASS_MARK;
use verifine_hotswap::Slot;
use verifine_runtime::builtin::builtin_names;
use verifine_runtime::metadata::{check_api, read_metadata};
use verifine_runtime::{
    Context, HOST_API_VERSION, MonitorPoint, PluginKind, PluginMetadata, RubricInfo, Runtime,
};
use verifine_runtime::{Limits, PluginSpec, spec_bytes};

/// One line of `plugin list`.
#[derive(Debug, Serialize)]
pub struct ListedPlugin {
    /// The built-in name, as `--rubric` and configs take it.
    pub name: String,
    /// The one kind the plugin exports.
    pub kind: PluginKind,
    /// The plugin's own version, from its metadata.
    pub version: String,
    /// Hex sha256 of the component bytes, as results stamp it.
    pub sha256: String,
}

/// The built-in plugins.
pub fn list(runtime: &Runtime) -> Result<Vec<ListedPlugin>> {
    builtin_names()
        .into_iter()
        .map(|name| {
            let plugin = runtime.load(name)?;
            Ok(ListedPlugin {
                name: name.to_string(),
                kind: plugin.kind(),
                version: plugin.metadata.version.to_string(),
                sha256: plugin.sha256.clone(),
            })
        })
        .collect()
}

/// What `plugin inspect` reports.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// The spec as given: a built-in name or a file path.
    pub origin: String,
    /// What the plugin's metadata section says.
    pub metadata: PluginMetadata,
    /// The contract version this host implements, to compare with `metadata.api_version`.
    pub host_api_version: &'static str,
    /// Whether this host can load it: same API major, minor no newer.
    pub compatible: bool,
    /// Hex sha256 of the component bytes.
    pub sha256: String,
    /// Size of the component, in bytes.
    pub size_bytes: usize,
    /// A rubric's description (criteria), when the plugin is a loadable rubric.
    pub rubric: Option<RubricInfo>,
}

/// Reads a plugin's metadata (and, for rubrics, its criteria) without running a batch.
pub fn inspect(runtime: &Runtime, spec: impl Into<PluginSpec>) -> Result<Inspection> {
    let spec = spec.into();
    let (bytes, origin) = spec_bytes(&spec).with_context(|| format!("reading {spec}"))?;
    let metadata = read_metadata(&bytes).with_context(|| format!("inspecting {spec}"))?;
    let compatible = check_api(&metadata).is_ok();
    let rubric = if compatible && metadata.kind == PluginKind::Rubric {
        let plugin = runtime.load_bytes(&bytes, &origin)?;
        Some(plugin.instance().describe()?)
    } else {
        None
    };
    Ok(Inspection {
        origin: spec.to_string(),
        sha256: verifine_base::sha256_hex(&bytes),
        size_bytes: bytes.len(),
        metadata,
        host_api_version: HOST_API_VERSION,
        compatible,
        rubric,
    })
}

/// Loads the plugin and makes one harmless call of its kind; any problem is an error.
pub fn check(runtime: &Runtime, spec: impl Into<PluginSpec>) -> Result<String> {
    let plugin = runtime.load(spec)?;
    let mut instance = plugin.instance();
    let ctx = Context::empty();
    match plugin.kind() {
        PluginKind::Rubric => {
            let info = instance.describe()?;
            if info.name.is_empty() {
                bail!("rubric describes itself with an empty name");
            }
            instance.judge(&ctx, &[])?;
        }
        PluginKind::Aggregator => {
            instance.aggregate(&ctx, &[])?;
        }
        PluginKind::Curriculum => {
            instance.select(&ctx, &[])?.map_err(anyhow::Error::msg)?;
        }
        PluginKind::Trigger => {
            let point = MonitorPoint {
                step: 0,
                round: 0,
                evaluator_score: 0.0,
                judge_reward: 0.0,
            };
            instance
                .check(&ctx, &[point])?
                .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(format!(
        "ok: {} {} ({} plugin, API {}, sha256 {})",
        plugin.metadata.name,
        plugin.metadata.version,
        plugin.kind(),
        plugin.metadata.api_version,
        plugin.sha256
    ))
}

/// Inspect, check, write, test and promote plugins.
#[derive(Debug, Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// The built-in plugins.
    List,
    /// Metadata, compatibility and (for rubrics) criteria of a plugin.
    Inspect {
        /// A built-in name or a .wasm file.
        plugin: PluginSpec,
    },
    /// Load the plugin and make one harmless call; exit 1 on any problem.
    Check {
        /// A built-in name or a .wasm file.
        plugin: PluginSpec,
    },
    /// Scaffold a plugin crate that builds for wasm32-wasip2 as it is.
    New {
        /// rubric | aggregator | curriculum | trigger
        kind: PluginKind,
        /// The plugin's name (lowercase, digits, '-').
        name: String,
        /// Where to create it (default: ./NAME).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        dir: Option<PathBuf>,
        /// How the crate gets the SDK: `version [V]` (crates.io; default
        /// outside a verifine checkout: the SDK matching this binary),
        /// `git URL`, or `path DIR` (default inside a checkout: its
        /// plugin-api/).
        #[arg(long, num_args = 1..=2, value_names = ["KIND", "WHERE"])]
        sdk: Option<Vec<String>>,
    },
    /// Build a plugin crate to a component and print its metadata.
    Build {
        /// The crate's directory.
        #[arg(value_parser = crate::commands::absolute_path)]
        dir: PathBuf,
        /// Where to compile (default: a shared directory in the user cache).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        target_dir: Option<PathBuf>,
    },
    /// Run a rubric's cases and compare with stored snapshots (insta format).
    Test {
        /// A built-in name or a .wasm file.
        plugin: PluginSpec,
        /// Cases: score input rows (JSONL).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        cases: PathBuf,
        /// Snapshot directory (default: snapshots/ beside the cases).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        snapshots: Option<PathBuf>,
        /// Store new and changed snapshots.
        #[arg(long)]
        accept: bool,
    },
    /// Score samples with two rubric revisions and list what changes.
    Diff {
        /// The old revision (built-in name or .wasm).
        old: PluginSpec,
        /// The new revision.
        new: PluginSpec,
        /// Samples: score input rows (JSONL).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        input: PathBuf,
        /// Labels: rows with `id` and `label` (boolean, or a number cut at --threshold).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        gold: Option<PathBuf>,
        /// A reward at or above this accepts a response.
        #[arg(long, default_value_t = PASS_MARK)]
        threshold: f64,
    },
    /// Hand a revision to a run or a `verifine serve` directory: it goes live at the next step
    /// boundary (swap point) if it passes the gate.
    Promote {
        /// The run directory.
        #[arg(value_parser = crate::commands::absolute_path)]
        run_dir: PathBuf,
        /// rubric | aggregator
        slot: Slot,
        /// The component.
        #[arg(value_parser = crate::commands::absolute_path)]
        file: PathBuf,
        /// Snapshot cases the revision ships (snapshots/ beside them).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        cases: Option<PathBuf>,
    },
    /// Restore a slot's previous revision in a run.
    Rollback {
        /// The run directory.
        #[arg(value_parser = crate::commands::absolute_path)]
        run_dir: PathBuf,
        /// rubric | aggregator
        slot: Slot,
    },
}

/// `verifine plugin …`: runs the subcommand and prints its result.
pub fn run(args: PluginArgs) -> Result<()> {
    let runtime = Runtime::new(Limits::default())?;
    match args.command {
        PluginCommand::List => {
            for p in list(&runtime)? {
                println!(
                    "{:<22} {:<11} {:<8} {}",
                    p.name,
                    p.kind.to_string(),
                    p.version,
                    &p.sha256[..16]
                );
            }
        }
        PluginCommand::Inspect { plugin } => {
            println!(
                "{}",
                serde_json::to_string_pretty(&inspect(&runtime, plugin)?)?
            );
        }
        PluginCommand::Check { plugin } => println!("{}", check(&runtime, plugin)?),
        PluginCommand::New {
            kind,
            name,
            dir,
            sdk,
        } => {
            let sdk = match sdk {
                Some(words) => author::SdkSource::parse(&words)?,
                None => author::SdkSource::for_current_dir(),
            };
            let dir = author::new_with_sdk(kind, &name, dir.as_deref(), &sdk)?;
            println!(
                "created {}; build it with `verifine plugin build {}`",
                dir.display(),
                dir.display()
            );
        }
        PluginCommand::Build { dir, target_dir } => {
            let built = author::build(&runtime, &dir, target_dir.as_deref())?;
            println!("{}", serde_json::to_string_pretty(&built)?);
        }
        PluginCommand::Test {
            plugin,
            cases,
            snapshots,
            accept,
        } => {
            let results = author::test(&runtime, plugin, &cases, snapshots.as_deref(), accept)?;
            let (text, passed) = author::report_cases(&results, accept);
            print!("{text}");
            if !passed {
                bail!("snapshot cases are new or differ from their snapshots (see above)");
            }
        }
        PluginCommand::Diff {
            old,
            new,
            input,
            gold,
            threshold,
        } => {
            let diff = author::diff(&runtime, old, new, &input, gold.as_deref(), threshold)?;
            println!("{}", serde_json::to_string_pretty(&diff)?);
        }
        PluginCommand::Promote {
            run_dir,
            slot,
            file,
            cases,
        } => {
            let request = author::promote(&runtime, &run_dir, slot, &file, cases.as_deref())?;
            println!(
                "queued {}; the run decides it at its next step boundary (a server: its next swap point) (see {})",
                request.display(),
                run_dir.join("events.jsonl").display()
            );
        }
        PluginCommand::Rollback { run_dir, slot } => {
            let request = author::rollback(&run_dir, slot)?;
            println!(
                "queued {}; the run rolls back at its next step boundary (a server: its next swap point) (see {})",
                request.display(),
                run_dir.join("events.jsonl").display()
            );
        }
    }
    Ok(())
}
