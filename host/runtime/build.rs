//! Compiles the built-in plugins to wasm32-wasip2 components and embeds them,
//! so `verifine` works from a fresh clone with no extra step. Every crate
//! under `plugins/` is one: they are discovered, not listed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir
        .ancestors()
        .nth(2)
        .expect("host/runtime sits two levels below the workspace")
        .to_path_buf();
    // Every crate under plugins/ is a built-in plugin: discovered, not listed.
    let builtin = verifine_wasm_build::discover_packages(&workspace.join("plugins"));
    let builtin: Vec<&str> = builtin.iter().map(String::as_str).collect();
    let mut watched = vec![
        workspace.join("wit"),
        workspace.join("plugin-api"),
        workspace.join("Cargo.lock"),
    ];
    watched.push(workspace.join("plugins"));
    verifine_wasm_build::rerun_if_changed(&watched);

    let artifacts = verifine_wasm_build::build_components(&workspace, &builtin);
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
