//! The book (`docs/`): its configuration reference is what the config
//! types' doc comments say, every internal link and anchor resolves, its
//! summary lists every page, its benchmark log indexes every section of
//! BENCHMARKS.md, and the rubric it shows builds and scores.

use serde_json::json;
use std::path::{Path, PathBuf};
use verifine::commands::score::{ScoreArgs, score};
use verifine_tests::{read_rows, repo_root, scratch_dir, write_rows};

mod config_reference;
mod links;
mod source;
mod values;

/// The generated page, relative to the repository.
const CONFIG_REFERENCE: &str = "docs/src/training/config-reference.md";

/// `examples/book-rubric`, built for wasm32-wasip2 by tests/build.rs.
const BOOK_RUBRIC: &str = env!("FINAL_ANSWER");

#[test]
fn the_config_reference_is_what_the_config_types_say() {
    let root = repo_root();
    let page = config_reference::render(&root);
    let path = root.join(CONFIG_REFERENCE);
    if std::env::var_os("VERIFINE_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != page {
        let (line, (old, new)) = committed
            .lines()
            .chain(std::iter::repeat(""))
            .zip(page.lines().chain(std::iter::repeat("")))
            .enumerate()
            .find(|(_, (old, new))| old != new)
            .unwrap();
        panic!(
            "{CONFIG_REFERENCE} is not what the config types' doc comments make.\n\
             Run `VERIFINE_BLESS=1 cargo test -p verifine-tests --test all book` to \
             rewrite it, and commit the page.\nFirst difference, line {}:\n  committed: {old}\n  \
             generated: {new}",
            line + 1
        );
    }
}

/// Every markdown file under `dir`.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_link_of_the_book_and_the_readme_resolves() {
    let root = repo_root();
    let book = root.join("docs/src");
    let mut pages = Vec::new();
    markdown_files(&book, &mut pages);
    pages.sort();
    let mut problems: Vec<String> = std::iter::once(root.join("README.md"))
        .chain(pages.iter().cloned())
        .flat_map(|file| links::broken(&file, &book))
        .collect();
    // SUMMARY.md lists every page, and only pages that exist (checked above).
    let summary = book.join("SUMMARY.md");
    let listed: Vec<PathBuf> = links::links(&std::fs::read_to_string(&summary).unwrap())
        .iter()
        .map(|link| links::normalize(&book.join(&link.target)))
        .collect();
    for page in pages.iter().filter(|p| **p != summary) {
        if !listed.contains(page) {
            problems.push(format!("{}: not listed in SUMMARY.md", page.display()));
        }
    }
    let root_prefix = format!("{}/", root.display());
    assert!(
        problems.is_empty(),
        "broken links in the book or the README:\n{}",
        problems.join("\n").replace(&root_prefix, "")
    );
}

#[test]
fn the_benchmark_log_indexes_every_section_of_benchmarks_md() {
    let root = repo_root();
    let log = root.join("docs/src/contributing/benchmarks.md");
    let text = std::fs::read_to_string(&log).unwrap();
    let linked: Vec<String> = links::links(&text)
        .into_iter()
        .filter_map(|link| link.target.strip_prefix('#').map(str::to_string))
        .collect();
    let missing: Vec<String> = links::headings(&log)
        .into_iter()
        .filter(|h| h.file.ends_with("BENCHMARKS.md") && h.level > 1)
        .filter(|h| !linked.contains(&h.anchor))
        .map(|h| h.anchor)
        .collect();
    assert!(
        missing.is_empty(),
        "sections of BENCHMARKS.md missing from the dated index of {}: {missing:?}; \
         add a row for each (its date, its heading linked by its anchor)",
        log.display()
    );
}

#[test]
fn the_books_rubric_builds_and_scores() {
    // The README shows the rubric as it is; the book includes the file.
    let root = repo_root();
    let source = std::fs::read_to_string(root.join("examples/book-rubric/src/lib.rs")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&source),
        "README.md's rubric differs from examples/book-rubric/src/lib.rs: copy the file in"
    );
    let dir = scratch_dir("book-rubric");
    let row = |id: &str, response: &str| json!({"id": id, "prompt": "What is 6 * 7?", "response": response, "reference": "6 * 7 = 42\n#### 42"});
    write_rows(
        &dir.join("in.jsonl"),
        &[
            row("right", "6 * 7 = 42\n#### 42"),
            row("wrong", "6 * 7 = 48\n#### 48"),
            row("unmarked", "The answer is 42."),
        ],
    );
    let summary = score(&ScoreArgs {
        rubric: Some(BOOK_RUBRIC.into()),
        input: dir.join("in.jsonl"),
        output: dir.join("out.jsonl"),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(summary.rubric.name, "final-answer");
    let rows: Vec<serde_json::Value> = read_rows(&dir.join("out.jsonl"));
    let totals: Vec<f64> = rows.iter().map(|r| r["total"].as_f64().unwrap()).collect();
    let expected = [1.0, 0.2, 0.0];
    assert!(
        totals
            .iter()
            .zip(expected)
            .all(|(t, e)| (t - e).abs() < 1e-12),
        "{rows:?}"
    );
    assert_eq!(rows[1]["verdicts"][1]["criterion"], json!("correct"));
}
