//! Plugin crates as source: copying one somewhere it still builds, and
//! building it to a component.

use crate::confined::Sandbox;
use crate::error::{HotswapError, Result};
use std::path::{Path, PathBuf};

/// Where plugin crates are compiled: `$VERIFINE_PLUGIN_TARGET_DIR`, else a
/// directory in the user's cache shared by all builds (dependencies are
/// compiled once).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VERIFINE_PLUGIN_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    verifine_runtime::default_cache_dir()
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
        .map_err(|e| HotswapError::io("reading", &manifest, e))?;
    let table = toml::from_str(&text).map_err(|e| crate_error(&manifest, e))?;
    Ok((manifest, table))
}

fn crate_error(dir: &Path, message: impl std::fmt::Display) -> HotswapError {
    HotswapError::Crate {
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
    let bytes = std::fs::read(&path).map_err(|e| HotswapError::io("reading", &path, e))?;
    Ok((bytes, path))
}

/// Builds the plugin crate in `dir` like [`build`], but as code someone else
/// wrote: cargo (and so the crate's `build.rs` and proc-macros) runs
/// confined (see [`crate::confined`]: it reads `dir`, the toolchain and
/// `sources` — the live crate's [`local_source_trees`] — and writes only
/// `target_dir`), offline and locked to `dir/Cargo.lock` (see [`pin_lock`]),
/// and is killed with everything it started at `deadline`.
pub fn build_confined(
    dir: &Path,
    target_dir: &Path,
    sources: &[PathBuf],
    deadline: std::time::Instant,
) -> Result<(Vec<u8>, PathBuf)> {
    let name = package_name(dir)?;
    verifine_wasm_build::try_ensure_target_installed().map_err(|e| crate_error(dir, e))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(&cargo);
    command
        .args(["build", "--release", "--offline", "--locked", "--target"])
        .arg(verifine_wasm_build::TARGET)
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"));
    std::fs::create_dir_all(target_dir).map_err(|e| HotswapError::io("creating", target_dir, e))?;
    let sandbox = Sandbox::new(target_dir)
        .reading([dir.to_path_buf()])
        .reading(sources.iter().cloned())
        .running(&cargo.to_string_lossy())
        .with_rust_toolchain(dir);
    command.current_dir(dir);
    let finished = crate::confined::run(command, &sandbox, deadline)
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
    let bytes = crate::inbox::read_regular_file(&path, crate::inbox::MAX_CANDIDATE_BYTES)
        .map_err(|e| crate_error(dir, e))?;
    Ok((bytes, path))
}

/// Resolves the dependencies of the crate in `dir` offline, keeping the
/// versions of the lock copied beside it (see [`copy_standalone`]) and
/// dropping what it does not use, and returns that lock: what a revision of
/// the crate is built against. Only cargo's resolver runs (no build script,
/// no crate code), confined and within `deadline`.
pub fn resolve_lock(dir: &Path, deadline: std::time::Instant) -> Result<String> {
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
    let finished = crate::confined::run(command, &sandbox, deadline)
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
    std::fs::read_to_string(&lock).map_err(|e| HotswapError::io("reading", &lock, e))
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

/// Copies the crate in `source` to `dest` so it builds there on its own:
/// what it inherits from its workspace (`edition.workspace = true`,
/// `serde.workspace = true`, `lints.workspace = true`) is written out,
/// relative `path` dependencies become absolute, the copy is its own
/// workspace, and the nearest `Cargo.lock` above `source` comes along so
/// dependency versions stay those already built. `target/` is not copied.
pub fn copy_standalone(source: &Path, dest: &Path) -> Result<()> {
    copy_dir(source, dest)?;
    let (manifest, mut table) = read_manifest(dest)?;
    let source =
        std::fs::canonicalize(source).map_err(|e| HotswapError::io("reading", source, e))?;
    inline_workspace(&mut table, &source)?;
    for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(deps) = table.get_mut(section).and_then(|d| d.as_table_mut()) else {
            continue;
        };
        for (_, dep) in deps.iter_mut() {
            if let Some(path) = dep.get_mut("path")
                && let Some(relative) = path.as_str()
            {
                let absolute = source.join(relative);
                *path = toml::Value::String(absolute.display().to_string());
            }
        }
    }
    table
        .entry("workspace")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let text = toml::to_string(&table).map_err(|e| crate_error(&manifest, e))?;
    std::fs::write(&manifest, text).map_err(|e| HotswapError::io("writing", &manifest, e))?;
    if !dest.join("Cargo.lock").exists()
        && let Some(lock) = source
            .ancestors()
            .map(|a| a.join("Cargo.lock"))
            .find(|l| l.exists())
    {
        std::fs::copy(&lock, dest.join("Cargo.lock"))
            .map_err(|e| HotswapError::io("copying", &lock, e))?;
    }
    Ok(())
}

/// Replaces what the manifest `table` of the crate at `source` inherits
/// from its workspace with the workspace's values (a `path` in them made
/// absolute), so the manifest means the same outside the workspace.
fn inline_workspace(table: &mut toml::Table, source: &Path) -> Result<()> {
    let Some(workspace) = Workspace::enclosing(source) else {
        return Ok(());
    };
    if let Some(package) = table.get_mut("package").and_then(|p| p.as_table_mut()) {
        for (key, value) in package.iter_mut().filter(|(_, v)| inherits(v)) {
            let mut inherited = workspace
                .section("package")
                .get(key)
                .cloned()
                .ok_or_else(|| workspace.missing(source, &format!("package.{key}")))?;
            if matches!(key.as_str(), "readme" | "license-file")
                && let Some(relative) = inherited.as_str()
            {
                inherited = workspace.absolute(relative);
            }
            *value = inherited;
        }
    }
    workspace.inline_dependencies(table, source)?;
    if let Some(targets) = table.get_mut("target").and_then(|t| t.as_table_mut()) {
        for (_, platform) in targets.iter_mut() {
            let Some(platform) = platform.as_table_mut() else {
                continue;
            };
            workspace.inline_dependencies(platform, source)?;
        }
    }
    if table.get("lints").is_some_and(inherits) {
        let lints = workspace.section("lints").clone();
        table.insert("lints".into(), toml::Value::Table(lints));
    }
    Ok(())
}

/// `{ workspace = true }`: a value taken from the workspace.
fn inherits(value: &toml::Value) -> bool {
    value.get("workspace").and_then(|w| w.as_bool()) == Some(true)
}

/// The workspace a crate belongs to: its root directory and manifest.
struct Workspace {
    dir: PathBuf,
    manifest: toml::Table,
}

impl Workspace {
    /// The nearest directory at or above `dir` whose manifest has a
    /// `[workspace]`.
    fn enclosing(dir: &Path) -> Option<Workspace> {
        dir.ancestors().find_map(|above| {
            let text = std::fs::read_to_string(above.join("Cargo.toml")).ok()?;
            let manifest: toml::Table = text.parse().ok()?;
            manifest.contains_key("workspace").then(|| Workspace {
                dir: above.to_path_buf(),
                manifest,
            })
        })
    }

    /// `[workspace.<name>]`, empty when absent.
    fn section(&self, name: &str) -> toml::Table {
        self.manifest
            .get("workspace")
            .and_then(|w| w.get(name))
            .and_then(|v| v.as_table())
            .cloned()
            .unwrap_or_default()
    }

    fn absolute(&self, relative: &str) -> toml::Value {
        toml::Value::String(self.dir.join(relative).display().to_string())
    }

    fn missing(&self, member: &Path, key: &str) -> HotswapError {
        crate_error(
            &self.dir.join("Cargo.toml"),
            format!(
                "has no workspace.{key}, which {} inherits",
                member.display()
            ),
        )
    }

    /// Writes out the inherited entries of `owner`'s dependency tables; a
    /// member may add features and make a dependency optional.
    fn inline_dependencies(&self, owner: &mut toml::Table, member: &Path) -> Result<()> {
        let shared = self.section("dependencies");
        for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = owner.get_mut(kind).and_then(|d| d.as_table_mut()) else {
                continue;
            };
            for (name, dep) in deps.iter_mut().filter(|(_, d)| inherits(d)) {
                let mut resolved = match shared.get(name) {
                    Some(toml::Value::String(version)) => {
                        toml::Table::from_iter([("version".to_string(), version.clone().into())])
                    }
                    Some(toml::Value::Table(spec)) => spec.clone(),
                    _ => return Err(self.missing(member, &format!("dependencies.{name}"))),
                };
                if let Some(path) = resolved.get("path").and_then(|p| p.as_str()) {
                    let path = self.absolute(path);
                    resolved.insert("path".into(), path);
                }
                if let Some(features) = dep.get("features").and_then(|f| f.as_array()) {
                    let mut all = resolved
                        .get("features")
                        .and_then(|f| f.as_array())
                        .cloned()
                        .unwrap_or_default();
                    for feature in features {
                        if !all.contains(feature) {
                            all.push(feature.clone());
                        }
                    }
                    resolved.insert("features".into(), all.into());
                }
                if let Some(optional) = dep.get("optional") {
                    resolved.insert("optional".into(), optional.clone());
                }
                *dep = toml::Value::Table(resolved);
            }
        }
        Ok(())
    }
}

fn copy_dir(source: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| HotswapError::io("creating", dest, e))?;
    let reading = |e| HotswapError::io("reading", source, e);
    for entry in std::fs::read_dir(source).map_err(reading)? {
        let entry = entry.map_err(reading)?;
        let path = entry.path();
        let target = dest.join(entry.file_name());
        if entry.file_type().map_err(reading)?.is_dir() {
            if entry.file_name() != "target" {
                copy_dir(&path, &target)?;
            }
        } else {
            std::fs::copy(&path, &target).map_err(|e| HotswapError::io("copying", &path, e))?;
        }
    }
    Ok(())
}
