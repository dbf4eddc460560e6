//! Inside a crate, modules point one way too: no module reaches (through
//! `crate::…` or `super::…` paths) a sibling that reaches it back, directly
//! or around a circle of siblings. A parent and its children may use each
//! other (a parent re-exports, a child uses its parent's types); siblings
//! may not, so every directory of modules reads bottom-up.
//!
//! The check reads the sources as text: it follows `mod` declarations
//! (with `#[path]`) from `lib.rs` to map files to module paths, drops
//! comments, and resolves every `crate::a::b` and `super::…` path to the
//! deepest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use verifine_tests::repo_root;

/// A module's path inside its crate (`[]` for the crate root).
type ModulePath = Vec<String>;

/// Every module file of the crate whose root is `lib`, with its path.
fn module_files(lib: &Path) -> BTreeMap<ModulePath, PathBuf> {
    let mut files = BTreeMap::new();
    let mut queue = vec![(Vec::new(), lib.to_path_buf())];
    while let Some((module, file)) = queue.pop() {
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let owns_dir = matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("lib.rs" | "mod.rs" | "main.rs")
        );
        let dir = file.parent().unwrap().to_path_buf();
        // Where this file's child modules live without `#[path]`.
        let children_dir = match owns_dir {
            true => dir.clone(),
            false => dir.join(file.file_stem().unwrap()),
        };
        let mut path_attribute: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("#[path = \"") {
                path_attribute = rest.split('"').next().map(str::to_string);
                continue;
            }
            let declaration = line
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ");
            let Some(name) = declaration
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            else {
                if !line.starts_with("#[") {
                    path_attribute = None;
                }
                continue;
            };
            let child_file = match path_attribute.take() {
                Some(relative) => dir.join(relative),
                None if children_dir.join(format!("{name}.rs")).exists() => {
                    children_dir.join(format!("{name}.rs"))
                }
                None => children_dir.join(name).join("mod.rs"),
            };
            let mut child = module.clone();
            child.push(name.to_string());
            queue.push((child, child_file));
        }
        files.insert(module, file);
    }
    files
}

/// `text` without `//` comments (doc comments included).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The path segments written after `at` (`a::b::C` → `[a, b, C]`).
fn segments_after(text: &str, at: usize) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = &text[at..];
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segments.push(rest[..end].to_string());
        match rest[end..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    segments
}

/// The modules the file of `module` names, each resolved to the deepest
/// existing module its path goes through.
fn references(
    module: &ModulePath,
    file: &Path,
    modules: &BTreeSet<ModulePath>,
) -> BTreeSet<ModulePath> {
    let text = without_comments(&std::fs::read_to_string(file).unwrap());
    let mut found = BTreeSet::new();
    for (prefix, base) in [("crate::", Some(Vec::new())), ("super::", None)] {
        for (at, _) in text.match_indices(prefix) {
            // Only whole tokens: `verifine_crate::` is not `crate::`.
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let mut target = match &base {
                Some(root) => root.clone(),
                None => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut segments = segments_after(&text, at + prefix.len());
            while segments.first().map(String::as_str) == Some("super") {
                segments.remove(0);
                target.pop();
            }
            for segment in segments {
                let mut deeper = target.clone();
                deeper.push(segment);
                if !modules.contains(&deeper) {
                    break;
                }
                target = deeper;
            }
            found.insert(target);
        }
    }
    found
}

/// Edges between siblings: `a → b` when something inside sibling `a`
/// names something inside sibling `b` (keyed by their parent).
fn sibling_edges(lib: &Path) -> BTreeMap<ModulePath, BTreeSet<(String, String)>> {
    let files = module_files(lib);
    let modules: BTreeSet<ModulePath> = files.keys().cloned().collect();
    let mut edges: BTreeMap<ModulePath, BTreeSet<(String, String)>> = BTreeMap::new();
    for (module, file) in &files {
        for target in references(module, file, &modules) {
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            // An ancestor or a descendant (parent and child) is not a sibling.
            if common == module.len() || common == target.len() {
                continue;
            }
            edges
                .entry(module[..common].to_vec())
                .or_default()
                .insert((module[common].clone(), target[common].clone()));
        }
    }
    edges
}

/// The circles (strongly connected sets of two or more) in `edges`.
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let reaches = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for (a, b) in edges {
                if *a == node && seen.insert(b.clone()) {
                    stack.push(b.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reaches(n))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for node in &nodes {
        let circle: BTreeSet<String> = nodes
            .iter()
            .filter(|other| reach[node].contains(**other) && reach[**other].contains(*node))
            .map(|other| (*other).clone())
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

/// One circle: the crate, the parent module of its siblings (`""` for the
/// crate root) and the siblings in it.
#[derive(Debug, Clone, PartialEq)]
struct Circle {
    crate_dir: String,
    parent: String,
    members: BTreeSet<String>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parent = match self.parent.is_empty() {
            true => "the crate root",
            false => &self.parent,
        };
        let members: Vec<&str> = self.members.iter().map(String::as_str).collect();
        write!(f, "{}, in {parent}: {}", self.crate_dir, members.join(", "))
    }
}

/// Every circle among sibling modules of the crate in `crate_dir`.
fn crate_circles(crate_dir: &str) -> Vec<Circle> {
    let lib = repo_root().join(crate_dir).join("src/lib.rs");
    let mut found = Vec::new();
    for (parent, edges) in sibling_edges(&lib) {
        for members in circles(&edges) {
            found.push(Circle {
                crate_dir: crate_dir.to_string(),
                parent: parent.join("::"),
                members,
            });
        }
    }
    found
}

#[test]
fn no_module_reaches_a_sibling_that_reaches_it_back() {
    let crates = std::fs::read_dir(repo_root().join("host"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("src/lib.rs").is_file())
        .map(|dir| format!("host/{}", dir.file_name().unwrap().to_str().unwrap()));
    let found: Vec<String> = crates
        .flat_map(|crate_dir| crate_circles(&crate_dir))
        .map(|circle| format!("an import circle: {circle}"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_circle_and_passes_parent_and_child() {
    let dir = verifine_test_support::scratch_dir("module-cycles");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("nested")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write(
        "lib.rs",
        "mod a;\nmod b;\npub mod nested;\nuse crate::a::A;\n",
    );
    write(
        "a.rs",
        "use crate::b::B; // crate::nested is a comment\npub struct A;\n",
    );
    write("b.rs", "pub struct B(super::a::A);\n");
    write(
        "nested/mod.rs",
        "#[path = \"child_tests.rs\"]\nmod child;\npub use child::C;\n",
    );
    write(
        "nested/child_tests.rs",
        "pub struct C(super::super::a::A);\n",
    );
    let edges = sibling_edges(&src.join("lib.rs"));
    let root = &edges[&Vec::new()];
    let names = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        *root,
        BTreeSet::from([names("a", "b"), names("b", "a"), names("nested", "a")])
    );
    assert_eq!(circles(root).len(), 1);
    assert!(!edges.contains_key(&vec!["nested".to_string()]));
    std::fs::remove_dir_all(&dir).unwrap();
}
