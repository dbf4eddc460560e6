//! The layers of `host/` as Cargo resolves them: dependencies point down
//! only. Cargo already refuses code that uses an undeclared crate; this test
//! refuses a manifest that declares a dependency against the direction
//! (directly or through another crate), naming the path it came by.

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::Command;
use verifine_tests::{cargo_metadata, repo_root};

/// Every normal (non-dev, non-build) dependency of each workspace package,
/// transitively, with the chain that brings it in.
fn normal_closure() -> HashMap<String, HashMap<String, Vec<String>>> {
    let metadata = cargo_metadata(&["--filter-platform", &host_triple()]);
    let name_of: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let edges: HashMap<&str, Vec<&str>> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let normal = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|d| d["pkg"].as_str().unwrap())
                .collect();
            (node["id"].as_str().unwrap(), normal)
        })
        .collect();
    metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| {
            let root = member.as_str().unwrap();
            let mut chains: HashMap<String, Vec<String>> = HashMap::new();
            let mut seen = HashSet::from([root]);
            let mut queue = VecDeque::from([(root, vec![name_of[root].to_string()])]);
            while let Some((id, chain)) = queue.pop_front() {
                for &dep in edges.get(id).into_iter().flatten() {
                    if seen.insert(dep) {
                        let mut next = chain.clone();
                        next.push(name_of[dep].to_string());
                        chains.insert(name_of[dep].to_string(), next.clone());
                        queue.push_back((dep, next));
                    }
                }
            }
            (name_of[root].to_string(), chains)
        })
        .collect()
}

/// The platform this runs on (dependencies of other platforms are neither
/// built nor downloaded here).
fn host_triple() -> String {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

#[test]
fn dependencies_point_down_only() {
    let closure = normal_closure();
    let below_cli = [
        "verifine-base",
        "verifine-models",
        "verifine-runtime",
        "verifine-judge",
        "verifine-confined",
        "verifine-hotswap",
        "verifine-train",
        "verifine-reward",
        "verifine-evolve",
        "verifine-serve",
    ];
    let mut rules: Vec<(&str, &str)> = vec![
        ("verifine-base", "wasmtime"),
        ("verifine-base", "candle-core"),
        ("verifine-runtime", "candle-core"),
        ("verifine-runtime", "verifine-train"),
        ("verifine-runtime", "verifine-hotswap"),
        ("verifine-runtime", "verifine-judge"),
        ("verifine-runtime", "reqwest"),
        ("verifine-judge", "verifine-hotswap"),
        ("verifine-judge", "verifine-train"),
        ("verifine-train", "verifine-judge"),
        ("verifine-hotswap", "candle-core"),
        ("verifine-hotswap", "verifine-train"),
        ("verifine-train", "wasmtime"),
        ("verifine-train", "verifine-runtime"),
        ("verifine-train", "verifine-hotswap"),
        // Training's plugin hooks sit above training, hot-swap and the
        // judges, below the loops that train with them.
        ("verifine-runtime", "verifine-reward"),
        ("verifine-hotswap", "verifine-reward"),
        ("verifine-train", "verifine-reward"),
        ("verifine-judge", "verifine-reward"),
        ("verifine-serve", "verifine-reward"),
        ("verifine-reward", "verifine-evolve"),
        ("verifine-reward", "verifine-serve"),
        ("verifine-runtime", "verifine-evolve"),
        ("verifine-hotswap", "verifine-evolve"),
        ("verifine-train", "verifine-evolve"),
        // The server scores with plugins; it trains nothing.
        ("verifine-serve", "candle-core"),
        ("verifine-serve", "verifine-train"),
        ("verifine-serve", "verifine-evolve"),
        ("verifine-runtime", "verifine-serve"),
        ("verifine-hotswap", "verifine-serve"),
        ("verifine-train", "verifine-serve"),
        ("verifine-runtime", "axum"),
        ("verifine-hotswap", "axum"),
        // Model formats sit below training and the judge: tensors, files
        // and tokenizers, no sandbox, no network, no training loop.
        ("verifine-models", "wasmtime"),
        ("verifine-models", "verifine-runtime"),
        ("verifine-models", "verifine-judge"),
        ("verifine-models", "verifine-train"),
        ("verifine-models", "verifine-hotswap"),
        ("verifine-models", "reqwest"),
        ("verifine-models", "tokio"),
        ("verifine-models", "candle-nn"),
        ("verifine-runtime", "verifine-models"),
        // Confinement runs code someone else controls and knows nothing of
        // plugins, revisions or training: under hot-swap, beside the
        // runtime, no sandbox engine of its own.
        ("verifine-confined", "wasmtime"),
        ("verifine-confined", "verifine-runtime"),
        ("verifine-confined", "verifine-hotswap"),
        ("verifine-confined", "candle-core"),
        ("verifine-confined", "verifine-train"),
        ("verifine-confined", "verifine-evolve"),
        ("verifine-confined", "tokio"),
        ("verifine-runtime", "verifine-confined"),
        ("verifine-judge", "verifine-confined"),
        ("verifine-models", "verifine-confined"),
        ("verifine-train", "verifine-confined"),
    ];
    for crate_name in below_cli {
        rules.push((crate_name, "clap"));
        rules.push((crate_name, "indicatif"));
    }
    // Test support is a dev-dependency only: as a normal one it would ship
    // in every build, and as a feature it gave the test build a second copy
    // of every crate above it.
    for crate_name in below_cli.into_iter().chain(["verifine"]) {
        rules.push((crate_name, "verifine-test-support"));
    }
    let mut broken = Vec::new();
    for (package, forbidden) in rules {
        let deps = closure
            .get(package)
            .unwrap_or_else(|| panic!("{package} is not a workspace member"));
        if let Some(chain) = deps.get(forbidden) {
            broken.push(format!(
                "{package} depends on {forbidden}: {}",
                chain.join(" → ")
            ));
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn the_scoring_only_cli_has_no_candle() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "verifine",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(repo_root())
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    for forbidden in ["candle-core", "verifine-train", "tokenizers"] {
        assert!(
            !tree
                .lines()
                .any(|l| l.starts_with(&format!("{forbidden} "))),
            "`verifine --no-default-features` still pulls {forbidden}"
        );
    }
}

#[test]
fn no_source_file_under_host_is_longer_than_600_lines() {
    fn visit(dir: &std::path::Path, long: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, long);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > 600 {
                    long.push(format!("{} ({lines} lines)", path.display()));
                }
            }
        }
    }
    let mut long = Vec::new();
    visit(&repo_root().join("host"), &mut long);
    assert!(
        long.is_empty(),
        "split these by concern: {}",
        long.join(", ")
    );
}
