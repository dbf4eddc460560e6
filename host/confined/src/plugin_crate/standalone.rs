//! Copying a plugin crate out of its workspace so it builds on its own
//! (an agent's revision directory): what it inherits is written out.

use super::{PluginCrateError, Result};
use super::{crate_error, read_manifest};
use std::path::{Path, PathBuf};

/// Copies the crate in `source` to `dest` so it builds there on its own:
/// what it inherits from its workspace (`edition.workspace = true`,
/// `serde.workspace = true`, `lints.workspace = true`) is written out,
/// relative `path` dependencies become absolute, the copy is its own
/// workspace, and the nearest `Cargo.lock` above `source` comes along so
/// dependency versions stay those already built. `target/` is not copied.
pub fn copy_standalone(source: &Path, dest: &Path) -> Result<()> {
    copy_tree(source, dest, Some("target"))?;
    let (manifest, mut table) = read_manifest(dest)?;
    let source =
        std::fs::canonicalize(source).map_err(|e| PluginCrateError::io("reading", source, e))?;
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
    std::fs::write(&manifest, text).map_err(|e| PluginCrateError::io("writing", &manifest, e))?;
    if !dest.join("Cargo.lock").exists()
        && let Some(lock) = source
            .ancestors()
            .map(|a| a.join("Cargo.lock"))
            .find(|l| l.exists())
    {
        std::fs::copy(&lock, dest.join("Cargo.lock"))
            .map_err(|e| PluginCrateError::io("copying", &lock, e))?;
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

    fn missing(&self, member: &Path, key: &str) -> PluginCrateError {
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

/// Copies the tree at `source` into `dest` (made when missing):
/// directories, and files with their modification times (cargo's
/// freshness checks compare them); a link is copied as what it names. A
/// directory named `skip` is left out.
pub(super) fn copy_tree(source: &Path, dest: &Path, skip: Option<&str>) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| PluginCrateError::io("creating", dest, e))?;
    let reading = |e| PluginCrateError::io("reading", source, e);
    for entry in std::fs::read_dir(source).map_err(reading)? {
        let entry = entry.map_err(reading)?;
        let path = entry.path();
        let target = dest.join(entry.file_name());
        if entry.file_type().map_err(reading)?.is_dir() {
            if skip.is_none_or(|skip| entry.file_name() != skip) {
                copy_tree(&path, &target, skip)?;
            }
        } else {
            std::fs::copy(&path, &target).map_err(|e| PluginCrateError::io("copying", &path, e))?;
            let modified = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map_err(reading)?;
            std::fs::File::options()
                .write(true)
                .open(&target)
                .and_then(|file| file.set_modified(modified))
                .map_err(|e| PluginCrateError::io("dating", &target, e))?;
        }
    }
    Ok(())
}
