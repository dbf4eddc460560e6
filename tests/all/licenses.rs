//! Every dependency's license, as its manifest declares it (what `cargo
//! deny check licenses` checks with `deny.toml`, without needing cargo-deny
//! installed): each SPDX expression must be satisfiable by the licenses
//! this Apache-2.0 project accepts. A new dependency under another license
//! fails here, naming it, until someone decides.

use serde_json::Value;
use verifine_tests::{cargo_metadata, repo_root};

/// Permissive licenses compatible with distributing verifine under Apache-2.0.
/// Keep in step with `deny.toml`.
const ACCEPTED: &[&str] = &[
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "MIT",
    "MIT-0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "Unlicense",
    "CC0-1.0",
    "BSL-1.0",
    "Unicode-3.0",
    "CDLA-Permissive-2.0",
];

/// Whether an SPDX expression (`A OR B`, `A AND B`, `A WITH E`, parentheses;
/// the old `A/B` form means OR) can be satisfied with accepted licenses.
fn satisfiable(expression: &str) -> Result<bool, String> {
    let spaced = expression
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 0;
    let value = or_expression(&tokens, &mut at)?;
    if at != tokens.len() {
        return Err(format!("unexpected {:?} in {expression:?}", tokens[at]));
    }
    Ok(value)
}

fn or_expression(tokens: &[&str], at: &mut usize) -> Result<bool, String> {
    let mut value = and_expression(tokens, at)?;
    while tokens.get(*at) == Some(&"OR") {
        *at += 1;
        value |= and_expression(tokens, at)?;
    }
    Ok(value)
}

fn and_expression(tokens: &[&str], at: &mut usize) -> Result<bool, String> {
    let mut value = term(tokens, at)?;
    while tokens.get(*at) == Some(&"AND") {
        *at += 1;
        value &= term(tokens, at)?;
    }
    Ok(value)
}

fn term(tokens: &[&str], at: &mut usize) -> Result<bool, String> {
    match tokens.get(*at) {
        Some(&"(") => {
            *at += 1;
            let value = or_expression(tokens, at)?;
            if tokens.get(*at) != Some(&")") {
                return Err("unbalanced parenthesis".to_string());
            }
            *at += 1;
            Ok(value)
        }
        Some(license) => {
            *at += 1;
            let mut name = license.to_string();
            if tokens.get(*at) == Some(&"WITH") {
                let exception = tokens.get(*at + 1).ok_or("WITH without an exception")?;
                name = format!("{name} WITH {exception}");
                *at += 2;
            }
            Ok(ACCEPTED.contains(&name.as_str()))
        }
        None => Err("an empty expression".to_string()),
    }
}

#[test]
fn the_expression_reader_follows_spdx() {
    assert_eq!(satisfiable("MIT OR GPL-3.0"), Ok(true));
    assert_eq!(satisfiable("MIT AND GPL-3.0"), Ok(false));
    assert_eq!(
        satisfiable("(Apache-2.0 OR MIT) AND BSD-3-Clause"),
        Ok(true)
    );
    assert_eq!(satisfiable("Apache-2.0 WITH LLVM-exception"), Ok(true));
    assert_eq!(
        satisfiable("GPL-2.0 WITH Classpath-exception-2.0"),
        Ok(false)
    );
    assert_eq!(satisfiable("MIT/Apache-2.0"), Ok(true));
    assert!(satisfiable("(MIT").is_err());
}

#[test]
fn every_dependency_is_under_an_accepted_license() {
    let metadata = cargo_metadata(&[]);
    let members: Vec<&Value> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let mut refused = Vec::new();
    let mut listed = 0;
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let version = package["version"].as_str().unwrap();
        let license = package["license"].as_str();
        if members.contains(&&package["id"]) {
            assert_eq!(
                license,
                Some("Apache-2.0"),
                "{name} is ours: Apache-2.0, as LICENSE says"
            );
            continue;
        }
        listed += 1;
        match license.map(satisfiable) {
            Some(Ok(true)) => {}
            Some(Ok(false)) => refused.push(format!("{name} {version}: {}", license.unwrap())),
            Some(Err(e)) => refused.push(format!("{name} {version}: unreadable license ({e})")),
            None => refused.push(format!("{name} {version}: no SPDX license in its manifest")),
        }
    }
    assert!(listed > 100, "only {listed} dependencies listed");
    assert!(
        refused.is_empty(),
        "licenses to decide on:\n{}",
        refused.join("\n")
    );
}

#[test]
fn the_project_and_its_bundled_font_carry_their_licenses() {
    let root = repo_root();
    let license = std::fs::read_to_string(root.join("LICENSE")).unwrap();
    assert!(license.starts_with("Apache License\nVersion 2.0, January 2004"));
    let font = root.join("host/base/assets/DejaVuSansMono.LICENSE");
    assert!(font.exists(), "the bundled font's license stays beside it");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("DejaVuSansMono.LICENSE"),
        "the README lists the bundled font's license"
    );
}
