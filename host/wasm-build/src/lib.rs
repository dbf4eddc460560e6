//! Compiles workspace crates to `wasm32-wasip2` components from a build script.
//!
//! The host embeds the built-in plugins and the tests use hostile plugins; both
//! are ordinary workspace crates, built here by a nested `cargo build` into a
//! target directory of their own (so the outer build's lock is never contended),
//! the way wasmtime's `test-programs/artifacts` crate does it.
//!
//! [`build_native_libraries`] builds the same crates for the host target
//! instead, as the shared libraries of native (unsandboxed) plugins.

use std::path::{Path, PathBuf};
use std::process::Command;
use thiserror::Error;

/// Why a plugin crate did not become a component.
#[derive(Debug, Error)]
pub enum BuildError {
    /// The wasm32-wasip2 standard library is missing and rustup could not add it.
    #[error(
        "the {TARGET} target is not installed and `rustup target add` failed; \
         run `rustup target add {TARGET}{toolchain_flag}` and build again"
    )]
    TargetMissing {
        /// ` --toolchain NAME` when a toolchain is pinned, else empty.
        toolchain_flag: String,
    },
    /// cargo itself could not be started.
    #[error("could not run cargo: {0}")]
    CargoNotRun(String),
    /// cargo ran and failed; its error output says why.
    #[error("cargo build of {} for {TARGET} failed:\n{stderr}", manifest.display())]
    CargoFailed {
        /// The crate's manifest.
        manifest: PathBuf,
        /// What cargo printed on stderr.
        stderr: String,
    },
    /// cargo succeeded but produced no component.
    #[error("cargo built {} but left no {}: is it a cdylib plugin crate?", manifest.display(), path.display())]
    NoComponent {
        /// The crate's manifest.
        manifest: PathBuf,
        /// Where the component should be.
        path: PathBuf,
    },
}

/// The target plugins are compiled for.
pub const TARGET: &str = "wasm32-wasip2";

/// A compiled component: the package it came from and where the `.wasm` lies.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The workspace package it was built from.
    pub package: String,
    /// The built file.
    pub path: PathBuf,
}

/// The package names of the crates in the subdirectories of `dir` (e.g.
/// `plugins/`), sorted, so plugins are discovered rather than listed by hand.
///
/// Panics, naming the directory, when a subdirectory is not a crate with a
/// `[package] name`: everything there is built and embedded, so a stray
/// directory is a mistake to report, not to skip.
pub fn discover_packages(dir: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing plugin crates in {}: {e}", dir.display()));
    let mut names: Vec<String> = entries
        .map(|entry| entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display())))
        .filter(|entry| entry.path().is_dir())
        .map(|entry| {
            let manifest = entry.path().join("Cargo.toml");
            let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
                panic!(
                    "{} is under {} but has no readable Cargo.toml ({e}); every crate there \
                     is built and embedded, so move anything else elsewhere",
                    entry.path().display(),
                    dir.display()
                )
            });
            package_name(&text).unwrap_or_else(|| {
                panic!(
                    "{} has no [package] name; every crate under {} is built and embedded",
                    manifest.display(),
                    dir.display()
                )
            })
        })
        .collect();
    names.sort();
    names
}

/// The `name` of a manifest's `[package]` table (a line-level read: enough
/// for the manifests of this workspace, without a TOML parser in every build
/// script).
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// Builds `packages` (workspace package names) in release mode for [`TARGET`]
/// and returns their components, in the order given.
///
/// Panics with an actionable message when the target is missing and cannot be
/// installed, or when cargo fails: a build script has no better way to report.
pub fn build_components(workspace_root: &Path, packages: &[&str]) -> Vec<Artifact> {
    let target_dir = workspace_root.join("target").join("wasm-plugins");
    build_into(workspace_root, packages, &[], &target_dir)
}

/// Builds one package's component with cargo `features` into its own
/// target directory (`target/wasm-plugins-<variant>`), so that a variant of
/// a built-in plugin (the bench's owned-path math-answer) never replaces
/// the component the tree embeds.
pub fn build_component_variant(
    workspace_root: &Path,
    package: &str,
    features: &str,
    variant: &str,
) -> Artifact {
    let target_dir = workspace_root
        .join("target")
        .join(format!("wasm-plugins-{variant}"));
    let mut built = build_into(
        workspace_root,
        &[package],
        &["--features", features],
        &target_dir,
    );
    built.remove(0)
}

fn build_into(
    workspace_root: &Path,
    packages: &[&str],
    args: &[&str],
    target_dir: &Path,
) -> Vec<Artifact> {
    ensure_target_installed();
    let mut cmd = cargo_build(target_dir);
    cmd.current_dir(workspace_root).args(args);
    for package in packages {
        cmd.args(["-p", package]);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run cargo to build plugins: {e}"));
    assert!(
        status.success(),
        "building plugins for {TARGET} failed (see the cargo output above)"
    );

    packages
        .iter()
        .map(|package| {
            let file = format!("{}.wasm", package.replace('-', "_"));
            let path = target_dir.join(TARGET).join("release").join(file);
            assert!(path.exists(), "cargo did not produce {}", path.display());
            Artifact {
                package: package.to_string(),
                path,
            }
        })
        .collect()
}

/// Builds `packages` (workspace `cdylib` plugin crates that call
/// `export_native_plugin!`) in release mode for the host target into
/// `target/native-plugins`, and returns their shared libraries in the order
/// given. Panics when cargo fails, as [`build_components`] does.
pub fn build_native_libraries(workspace_root: &Path, packages: &[&str]) -> Vec<Artifact> {
    let target_dir = workspace_root.join("target").join("native-plugins");
    let mut cmd = cargo_command(&target_dir);
    cmd.current_dir(workspace_root);
    for package in packages {
        cmd.args(["-p", package]);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run cargo to build native plugins: {e}"));
    assert!(
        status.success(),
        "building native plugins failed (see the cargo output above)"
    );
    packages
        .iter()
        .map(|package| {
            let path = target_dir
                .join("release")
                .join(native_library_name(package));
            assert!(path.exists(), "cargo did not produce {}", path.display());
            Artifact {
                package: package.to_string(),
                path,
            }
        })
        .collect()
}

/// The file a `cdylib` package becomes on this platform (`libNAME.so`,
/// `libNAME.dylib`, `NAME.dll`, with `-` as `_`).
pub fn native_library_name(package: &str) -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// `cargo build --release --target wasm32-wasip2 --target-dir DIR`, with the
/// flags meant for an outer host build removed.
///
/// Components are built with link-time optimization in one codegen unit:
/// a plugin is small, so this costs seconds, and the judgment code it
/// inlines across crates (SDK, serde, the plugin) runs 10–15% faster in
/// the sandbox (BENCHMARKS.md, issue 25).
fn cargo_build(target_dir: &Path) -> Command {
    let mut cmd = cargo_command(target_dir);
    cmd.args(["--target", TARGET])
        .args(RELEASE_PROFILE.map(|setting| format!("--config={setting}")));
    cmd
}

/// The release profile components are built with (see `cargo_build`), as
/// cargo `--config` settings: every build of a plugin crate, confined or
/// not, passes the same, so their compiled dependencies are
/// interchangeable.
pub const RELEASE_PROFILE: [&str; 2] = [
    "profile.release.lto=true",
    "profile.release.codegen-units=1",
];

/// `cargo build --release --target-dir DIR` for the host target, with the
/// flags meant for an outer build removed.
fn cargo_command(target_dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release"])
        .arg("--target-dir")
        .arg(target_dir);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Builds one plugin crate (any directory with a `Cargo.toml`, in a workspace
/// or not) into `target_dir` and returns its component and cargo's output.
pub fn build_crate(
    manifest: &Path,
    package: &str,
    target_dir: &Path,
) -> Result<PathBuf, BuildError> {
    try_ensure_target_installed()?;
    let output = cargo_build(target_dir)
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .map_err(|e| BuildError::CargoNotRun(e.to_string()))?;
    if !output.status.success() {
        return Err(BuildError::CargoFailed {
            manifest: manifest.to_path_buf(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let path = target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    if !path.exists() {
        return Err(BuildError::NoComponent {
            manifest: manifest.to_path_buf(),
            path,
        });
    }
    Ok(path)
}

/// Tells cargo to rebuild when any of these sources change.
pub fn rerun_if_changed(paths: &[PathBuf]) {
    for path in paths {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// Makes sure the toolchain has the wasm32-wasip2 standard library.
///
/// rustup 1.29 installs a target listed in `rust-toolchain.toml` only on
/// `rustup toolchain install`, not on a plain `cargo` call, so we add it here.
fn ensure_target_installed() {
    if let Err(message) = try_ensure_target_installed() {
        panic!("{message}");
    }
}

/// Makes sure the toolchain has the wasm32-wasip2 standard library, adding
/// it with rustup when missing; the error says exactly what to run.
pub fn try_ensure_target_installed() -> Result<(), BuildError> {
    if target_installed() {
        return Ok(());
    }
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN").ok();
    let mut cmd = Command::new("rustup");
    cmd.args(["target", "add", TARGET]);
    if let Some(toolchain) = &toolchain {
        cmd.args(["--toolchain", toolchain]);
    }
    let added = cmd.status().map(|s| s.success()).unwrap_or(false);
    if !added || !target_installed() {
        let toolchain_flag = toolchain
            .map(|t| format!(" --toolchain {t}"))
            .unwrap_or_default();
        return Err(BuildError::TargetMissing { toolchain_flag });
    }
    Ok(())
}

fn target_installed() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let Ok(output) = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
    else {
        return false;
    };
    let libdir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    output.status.success()
        && Path::new(&libdir)
            .read_dir()
            .map(|mut entries| entries.any(|e| e.is_ok()))
            .unwrap_or(false)
}
