//! The book's internal links, checked as mdBook renders them: a relative
//! link names a file that exists, a book page links only inside the book,
//! and an `#anchor` into a page names one of its headings (with the pages
//! it includes), under mdBook's rule for heading ids.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// A heading of a page as rendered: its id, and the file its line is in.
pub struct Heading {
    pub anchor: String,
    pub level: usize,
    pub file: PathBuf,
}

/// A link in a markdown file: its target as written, and its line.
pub struct Link {
    pub target: String,
    pub line: usize,
}

/// mdBook's id for a heading: its text without markup, lowercased, spaces
/// as `-`, only letters, digits, `-` and `_` kept; `-1`, `-2` … when taken.
pub fn unique_anchor(heading: &str, used: &mut HashSet<String>) -> String {
    let text = plain_text(heading);
    let id: String = text
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect();
    if used.insert(id.clone()) {
        return id;
    }
    (1..)
        .map(|n| format!("{id}-{n}"))
        .find(|candidate| used.insert(candidate.clone()))
        .unwrap()
}

/// A heading's text as HTML shows it: no backticks or emphasis, link text only.
fn plain_text(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(c) = rest.chars().next() {
        if c == ']' && rest[1..].starts_with('(') {
            rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
            continue;
        }
        if !matches!(c, '`' | '*' | '[') {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out.replace("&lt;", "<")
}

/// The lines of `path` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// `{{#include path}}` / `{{#include path:from:to}}` directives of a page
/// (in code blocks too): the file (relative to the page) and the lines.
pub fn includes(text: &str) -> Vec<(String, usize, Option<usize>)> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(start) = rest.find("{{#include ") {
            let after = &rest[start + "{{#include ".len()..];
            let Some(end) = after.find("}}") else { break };
            let mut parts = after[..end].trim().split(':');
            let file = parts.next().unwrap_or_default().to_string();
            let from = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
            let to = parts.next().and_then(|n| n.parse().ok());
            found.push((file, from, to));
            rest = &after[end..];
        }
    }
    found
}

/// The headings a page renders, its included markdown files' among them.
pub fn headings(page: &Path) -> Vec<Heading> {
    let mut used = HashSet::new();
    let mut out = Vec::new();
    collect_headings(page, 1, None, &mut used, &mut out);
    out
}

fn collect_headings(
    file: &Path,
    from: usize,
    to: Option<usize>,
    used: &mut HashSet<String>,
    out: &mut Vec<Heading>,
) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    for (number, line) in prose_lines(&text) {
        if number < from || to.is_some_and(|to| number > to) {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            out.push(Heading {
                anchor: unique_anchor(&line[hashes..], used),
                level: hashes,
                file: file.to_path_buf(),
            });
        }
        for (included, from, to) in includes(line) {
            let path = file.parent().unwrap().join(&included);
            if included.ends_with(".md") {
                collect_headings(&path, from, to, used, out);
            }
        }
    }
}

/// Inline `[text](target)` links and `[label]: target` definitions outside
/// code; links to the web and to e-mail are left out.
pub fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let prose = without_code_spans(line);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push(Link {
                target: after[..end]
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                line: number,
            });
            rest = &after[end..];
        }
        if let Some((label, target)) = prose.trim_start().split_once("]: ")
            && label.starts_with('[')
        {
            found.push(Link {
                target: target.trim().to_string(),
                line: number,
            });
        }
    }
    found.retain(|l| !l.target.contains("://") && !l.target.starts_with("mailto:"));
    found
}

fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// `path` with `.` and `..` resolved, without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with each relative link of `file`: a missing file, a
/// book page linking out of the book, an anchor no heading has.
pub fn broken(file: &Path, book: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut problems = Vec::new();
    for link in links(&text) {
        let (path, anchor) = link.target.split_once('#').unwrap_or((&link.target, ""));
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&file.parent().unwrap().join(path))
        };
        let at = format!("{}:{}: `{}`", file.display(), link.line, link.target);
        if !target.exists() {
            problems.push(format!("{at}: no such file"));
        } else if file.starts_with(book) && !target.starts_with(book) {
            problems.push(format!(
                "{at}: leaves the book (the rendered book cannot follow it; name the file as code)"
            ));
        } else if !anchor.is_empty()
            && target.extension().is_some_and(|e| e == "md")
            && !headings(&target).iter().any(|h| h.anchor == anchor)
        {
            problems.push(format!("{at}: no heading with this anchor"));
        }
    }
    for (included, _, _) in includes(&text) {
        if !file.parent().unwrap().join(&included).exists() {
            problems.push(format!(
                "{}: includes {included}, which does not exist",
                file.display()
            ));
        }
    }
    problems
}
