//! Builds the plugins the tests load: hostile ones for the sandbox tests,
//! the book's example plugins, and native (host-target) builds of the
//! plugins the native fast-path tests load.

use std::path::PathBuf;

/// Built beside the hostile plugins (every crate under tests/plugins/, discovered).
const EXAMPLES: &[&str] = &[
    // An example plugin with a config table, built the way an author builds it.
    "concise",
    // The book's rubric (examples/book-rubric, docs/src/plugins/writing.md).
    "final-answer",
    // The hot-swap walkthrough's loophole rubric.
    "answer-mentioned",
];

/// Built as native shared libraries too (`export_native_plugin!`).
const NATIVE: &[&str] = &["math-answer", "hostile-panicker", "hostile-future-api"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    verifine_wasm_build::rerun_if_changed(&[
        manifest_dir.join("plugins"),
        workspace.join("plugin-api"),
        workspace.join("native-abi"),
        workspace.join("plugins").join("math-answer"),
        workspace.join("wit"),
        workspace.join("examples").join("concise-rubric"),
        workspace.join("examples").join("loophole-rubric"),
        workspace.join("examples").join("book-rubric"),
    ]);
    // Copies in OUT_DIR: a later build into the shared target directory (an
    // agent's revision of the same package, say) must not change what the
    // tests load.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut components = verifine_wasm_build::discover_packages(&manifest_dir.join("plugins"));
    components.extend(EXAMPLES.iter().map(|name| name.to_string()));
    let components: Vec<&str> = components.iter().map(String::as_str).collect();
    for artifact in verifine_wasm_build::build_components(&workspace, &components) {
        let var = artifact.package.to_uppercase().replace('-', "_");
        let copy = out_dir.join(artifact.path.file_name().unwrap());
        std::fs::copy(&artifact.path, &copy).unwrap();
        println!("cargo:rustc-env={var}={}", copy.display());
    }
    for artifact in verifine_wasm_build::build_native_libraries(&workspace, NATIVE) {
        let var = format!(
            "NATIVE_{}",
            artifact.package.to_uppercase().replace('-', "_")
        );
        let copy = out_dir.join(artifact.path.file_name().unwrap());
        std::fs::copy(&artifact.path, &copy).unwrap();
        println!("cargo:rustc-env={var}={}", copy.display());
    }
}
