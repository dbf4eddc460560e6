//! Plugin crates as source: copying one somewhere it still builds, and
//! building it to a component.

pub mod seed;
mod standalone;

pub use standalone::copy_standalone;

use crate::Sandbox;
use std::path::{Path, PathBuf};
use verifine_base::FileError;

/// What went wrong with a plugin crate; every error names its file or
/// directory.
#[derive(Debug, thiserror::Error)]
pub enum PluginCrateError {
    /// A file or directory could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A crate that could not be read, copied or built.
    #[error("plugin crate {}: {message}", dir.display())]
    Crate {
        /// The crate's directory (or manifest).
        dir: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl PluginCrateError {
    /// An I/O failure doing `action` on `path`.
    pub fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        PluginCrateError::File(FileError::io(action, path, source))
    }
}

/// A result with a [`PluginCrateError`].
pub type Result<T, E = PluginCrateError> = std::result::Result<T, E>;

/// Where the user's own plugin crates are compiled (`verifine plugin
/// build`): `$VERIFINE_PLUGIN_TARGET_DIR`, else a directory in the user's
/// cache shared by those builds (dependencies are compiled once). A confined
/// build never writes here: it gets a fresh directory of its own (see
/// [`build_confined`]), since an unconfined build loads the proc-macros and
/// runs the build scripts it finds here.
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VERIFINE_PLUGIN_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    verifine_base::default_cache_dir()
        .and_then(|code| code.parent().map(|p| p.join("plugin-target")))
        .unwrap_or_else(|| std::env::temp_dir().join("verifine-plugin-target"))
}

/// The package name in `dir/Cargo.toml`.
pub fn package_name(dir: &Path) -> Result<String> {
    let (manifest, table) = read_manifest(dir)?;
    table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .ok_or_else(|| crate_error(&manifest, "no [package] name"))
}

/// The package name and version in `dir/Cargo.toml`.
fn package_id(dir: &Path) -> Result<(String, String)> {
    let (manifest, table) = read_manifest(dir)?;
    let field = |key: &str| {
        table
            .get("package")
            .and_then(|p| p.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| crate_error(&manifest, format!("no [package] {key} (as a string)")))
    };
    Ok((field("name")?, field("version")?))
}

/// `dir/Cargo.toml`, parsed.
fn read_manifest(dir: &Path) -> Result<(PathBuf, toml::Table)> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| PluginCrateError::io("reading", &manifest, e))?;
    let table = toml::from_str(&text).map_err(|e| crate_error(&manifest, e))?;
    Ok((manifest, table))
}

fn crate_error(dir: &Path, message: impl std::fmt::Display) -> PluginCrateError {
    PluginCrateError::Crate {
        dir: dir.to_path_buf(),
        message: message.to_string(),
    }
}

/// Builds the plugin crate in `dir` for wasm32-wasip2 into `target_dir` and
/// returns the component's bytes and path.
pub fn build(dir: &Path, target_dir: &Path) -> Result<(Vec<u8>, PathBuf)> {
    let name = package_name(dir)?;
    let path = verifine_wasm_build::build_crate(&dir.join("Cargo.toml"), &name, target_dir)
        .map_err(|e| crate_error(dir, e))?;
    let bytes = std::fs::read(&path).map_err(|e| PluginCrateError::io("reading", &path, e))?;
    Ok((bytes, path))
}

/// Builds the plugin crate in `dir` like [`build`], but as code someone else
/// wrote, and returns the component's bytes: cargo (and so the crate's
/// `build.rs` and proc-macros) runs confined (see [`crate`]: it
/// reads `dir`, an offline build's share of the toolchain and `sources` —
/// the live crate's [`local_source_trees`] —, makes no socket, and writes
/// only a fresh target directory made under `parent` and removed after,
/// whatever happened), offline and locked to `dir/Cargo.lock` (see
/// [`pin_lock`]), and is killed with everything it started at `deadline`.
///
/// The fresh directory is the point: a directory a confined build wrote is
/// never read by an unconfined process, nor by the next confined build
/// (whose artifacts it could otherwise replace). It starts as a copy of
/// `seed` when one is given (see [`seed`]: the dependencies compiled from
/// the user's own crate), so only the revision itself is compiled.
pub fn build_confined(
    dir: &Path,
    parent: &Path,
    sources: &[PathBuf],
    seed: Option<&Path>,
    deadline: std::time::Instant,
) -> Result<Vec<u8>> {
    let target_dir = FreshDir::new(&absolute(parent)?)?;
    if let Some(seed) = seed {
        seed::copy_into(seed, &target_dir.path)?;
    }
    cargo_build_confined(dir, &target_dir.path, sources, deadline)
}

/// `cargo build` of the crate in `dir` for wasm32-wasip2 into `target_dir`
/// (which it may write, and nothing else), confined, offline and locked,
/// with the release profile `verifine plugin build` uses; the component's
/// bytes.
fn cargo_build_confined(
    dir: &Path,
    target_dir: &Path,
    sources: &[PathBuf],
    deadline: std::time::Instant,
) -> Result<Vec<u8>> {
    let dir = &absolute(dir)?;
    let name = package_name(dir)?;
    verifine_wasm_build::try_ensure_target_installed().map_err(|e| crate_error(dir, e))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(&cargo);
    command
        .args(["build", "--release", "--offline", "--locked", "--target"])
        .arg(verifine_wasm_build::TARGET)
        .args(verifine_wasm_build::RELEASE_PROFILE.map(|setting| format!("--config={setting}")))
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"));
    let sandbox = Sandbox::new(target_dir)
        .reading([dir.to_path_buf()])
        .reading(sources.iter().cloned())
        .running(&cargo.to_string_lossy())
        .with_rust_toolchain(dir);
    command.current_dir(dir);
    let finished = crate::run(command, &sandbox, deadline)
        .map_err(|e| crate_error(dir, format!("cargo build {e}")))?;
    if !finished.status.success() {
        return Err(crate_error(
            dir,
            format!("cargo build failed:\n{}", finished.output),
        ));
    }
    let path = target_dir
        .join(verifine_wasm_build::TARGET)
        .join("release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    crate::read_regular_file(&path, crate::MAX_COMPONENT_BYTES).map_err(|e| crate_error(dir, e))
}

/// A directory made new (never one that was there), removed with
/// everything in it when dropped.
struct FreshDir {
    path: PathBuf,
}

impl FreshDir {
    fn new(parent: &Path) -> Result<FreshDir> {
        std::fs::create_dir_all(parent).map_err(|e| PluginCrateError::io("creating", parent, e))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for attempt in 0..100u32 {
            let path = parent.join(format!(
                "confined-build-{}-{nanos:09}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(FreshDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(PluginCrateError::io("creating", &path, e)),
            }
        }
        Err(PluginCrateError::io(
            "creating a fresh build directory in",
            parent,
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ))
    }
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!("removing {}: {e}", self.path.display());
        }
    }
}

/// `path` made absolute against the current directory, once: a confined
/// process runs in another directory, where a relative path means
/// something else.
fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| PluginCrateError::io("resolving", path, e))
}

/// Resolves the dependencies of the crate in `dir` offline, keeping the
/// versions of the lock copied beside it (see [`copy_standalone`]) and
/// dropping what it does not use, and returns that lock: what a revision of
/// the crate is built against. Only cargo's resolver runs (no build script,
/// no crate code), confined and within `deadline`.
pub fn resolve_lock(dir: &Path, deadline: std::time::Instant) -> Result<String> {
    let dir = &absolute(dir)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(&cargo);
    command
        .args(["metadata", "--offline", "--format-version", "1"])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"));
    let sandbox = Sandbox::new(dir)
        .reading(local_source_trees(dir)?)
        .running(&cargo.to_string_lossy())
        .with_rust_toolchain(dir);
    command.current_dir(dir);
    let finished = crate::run(command, &sandbox, deadline)
        .map_err(|e| crate_error(dir, format!("cargo metadata {e}")))?;
    if !finished.status.success() {
        let tail = finished.output.lines().rev().take(20).collect::<Vec<_>>();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(crate_error(
            dir,
            format!("resolving its dependencies failed:\n{}", tail.join("\n")),
        ));
    }
    let lock = dir.join("Cargo.lock");
    std::fs::read_to_string(&lock).map_err(|e| PluginCrateError::io("reading", &lock, e))
}

/// Writes `lock` (from [`resolve_lock`] on the live crate `live`) into the
/// revised crate in `dir`, replacing whatever lock it brought: a revision is
/// built against exactly the dependencies of the crate it revises. Its own
/// version may change (the lock follows it); its package name may not, and a
/// dependency it adds makes the locked build fail.
pub fn pin_lock(dir: &Path, live: &Path, lock: &str) -> Result<()> {
    let (live_name, live_version) = package_id(live)?;
    let (name, version) = package_id(dir)?;
    if name != live_name {
        return Err(crate_error(
            dir,
            format!("a revision keeps the package name {live_name:?}; this one is named {name:?}"),
        ));
    }
    let entry =
        |version: &str| format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n");
    let old = entry(&live_version);
    if !lock.contains(&old) {
        return Err(crate_error(
            live,
            format!("its Cargo.lock has no entry for {name} {live_version}"),
        ));
    }
    let path = dir.join("Cargo.lock");
    let pinned = lock.replacen(&old, &entry(&version), 1);
    Ok(verifine_base::write_atomically(&path, |w| {
        w.write_all(pinned.as_bytes())
    })?)
}

/// The source trees a confined cargo must read to build the crate in `dir`:
/// for each `path` dependency of its manifest, the workspace it belongs to
/// (whose manifest it inherits from), or the dependency itself. Read from the
/// live crate's copy, never from a revision: a revision cannot widen them.
pub fn local_source_trees(dir: &Path) -> Result<Vec<PathBuf>> {
    let (_, table) = read_manifest(dir)?;
    let targets = table.get("target").and_then(|t| t.as_table());
    let platform_tables = targets.into_iter().flat_map(|t| t.values());
    let mut trees = Vec::new();
    for owner in std::iter::once(&toml::Value::Table(table.clone())).chain(platform_tables) {
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = owner.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            let paths = deps.values().filter_map(|d| d.get("path")?.as_str());
            for path in paths {
                let Ok(path) = std::fs::canonicalize(dir.join(path)) else {
                    continue;
                };
                let workspace = path.ancestors().find(|above| {
                    std::fs::read_to_string(above.join("Cargo.toml"))
                        .ok()
                        .and_then(|text| text.parse::<toml::Table>().ok())
                        .is_some_and(|t| t.contains_key("workspace"))
                });
                trees.push(workspace.unwrap_or(&path).to_path_buf());
            }
        }
    }
    trees.sort();
    trees.dedup();
    Ok(trees)
}
