//! What a user outside this repository sees of a release: the version
//! line, and scaffolds that get the SDK the way they are told.

use std::path::Path;
use std::process::Command;

fn verifine(dir: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_verifine"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "verifine {args:?}: {text}");
    text
}

fn empty_dir(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("release-{name}"))
}

#[test]
fn version_names_the_tool_and_the_contracts_it_loads() {
    let text = verifine(&std::env::temp_dir(), &["--version"]);
    assert!(
        text.starts_with(&format!("verifine {} ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("verifine:plugin@{}", verifine_contract::VERSION)),
        "{text}"
    );
    for (folder, _) in verifine_contract::RELEASED {
        assert!(
            text.contains(folder.trim_start_matches('v')),
            "{text} lacks {folder}"
        );
    }
}

#[test]
fn scaffolds_get_the_sdk_as_told() {
    let dir = empty_dir("sdk");
    let manifest = |name: &str| std::fs::read_to_string(dir.join(name).join("Cargo.toml")).unwrap();

    // Outside a checkout the default is the SDK release matching this binary.
    verifine(&dir, &["plugin", "new", "rubric", "by-default"]);
    let sdk_line = format!("verifine-plugin-api = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        manifest("by-default").contains(&sdk_line),
        "{}",
        manifest("by-default")
    );

    verifine(
        &dir,
        &[
            "plugin",
            "new",
            "rubric",
            "by-git",
            "--sdk",
            "git",
            "https://example.org/sdk.git",
        ],
    );
    assert!(
        manifest("by-git")
            .contains("verifine-plugin-api = { git = \"https://example.org/sdk.git\" }")
    );

    // An unpacked package set: the SDK by path, its dependencies patched.
    let unpacked = dir.join("unpacked");
    for name in [
        "verifine-plugin-api",
        "verifine-contract",
        "verifine-native-abi",
    ] {
        let crate_dir = unpacked.join(format!("{name}-0.1.0"));
        std::fs::create_dir_all(&crate_dir).unwrap();
        std::fs::write(
            crate_dir.join("Cargo.toml"),
            format!("[package]\nname = \"{name}\"\n"),
        )
        .unwrap();
    }
    let sdk = unpacked.join("verifine-plugin-api-0.1.0");
    verifine(
        &dir,
        &[
            "plugin",
            "new",
            "rubric",
            "by-path",
            "--sdk",
            "path",
            sdk.to_str().unwrap(),
        ],
    );
    let text = manifest("by-path");
    let sdk = std::fs::canonicalize(&sdk).unwrap();
    assert!(
        text.contains(&format!(
            "verifine-plugin-api = {{ path = \"{}\" }}",
            sdk.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("[patch.crates-io]\nverifine-contract = { path = "),
        "{text}"
    );
    assert!(text.contains("verifine-native-abi-0.1.0\" }"), "{text}");

    // Inside a checkout, its own plugin-api/.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = dir.join("in-checkout");
    verifine(
        &repo,
        &[
            "plugin",
            "new",
            "rubric",
            "in-checkout",
            "--dir",
            out.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    let checkout_sdk = std::fs::canonicalize(repo.join("plugin-api")).unwrap();
    assert!(text.contains(&checkout_sdk.display().to_string()), "{text}");

    let refused = Command::new(env!("CARGO_BIN_EXE_verifine"))
        .args([
            "plugin",
            "new",
            "rubric",
            "x",
            "--sdk",
            "path",
            dir.to_str().unwrap(),
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not the SDK"));
}
