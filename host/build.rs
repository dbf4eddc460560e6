//! Compiles the built-in plugins to wasm32-wasip2 components and embeds them,
//! so `verifine` works from a fresh clone with no extra step.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Built-in plugins: workspace packages under `plugins/`, named as users name them.
const BUILTIN_PLUGINS: &[&str] = &[
    "driving",
    "navigation",
    "healthbench",
    "prbench",
    "math-answer",
    "plateau-trigger",
    "weakness-curriculum",
    "weighted-sum",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let mut watched = vec![
        workspace.join("wit"),
        workspace.join("plugin-api"),
        workspace.join("Cargo.lock"),
    ];
    watched.extend(
        BUILTIN_PLUGINS
            .iter()
            .map(|p| workspace.join("plugins").join(p)),
    );
    verifine_wasm_build::rerun_if_changed(&watched);

    let artifacts = verifine_wasm_build::build_components(&workspace, BUILTIN_PLUGINS);
    let mut table = String::from(
        "/// Built-in plugins compiled by the build script: (name, component bytes).\n\
         pub const BUILTIN_PLUGINS: &[(&str, &[u8])] = &[\n",
    );
    for artifact in &artifacts {
        writeln!(
            table,
            "    ({:?}, include_bytes!({:?})),",
            artifact.package,
            artifact.path.display().to_string()
        )
        .unwrap();
    }
    table.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_plugins.rs");
    std::fs::write(out, table).unwrap();
}
