//! Rust source read as text, as much as the configuration reference needs:
//! a struct's or enum's docs, attributes and members, a type's `impl
//! Default` literal, a function's body, a constant's value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `.rs` files of the repository, read once each.
pub struct Sources {
    root: PathBuf,
    dirs: BTreeMap<String, Vec<PathBuf>>,
    files: BTreeMap<PathBuf, Vec<String>>,
}

/// A struct, an enum, a field or a variant: its name, its type (fields),
/// its doc lines, its attributes and, for a struct or enum, its member lines.
#[derive(Clone, Debug, Default)]
pub struct Item {
    pub name: String,
    pub ty: String,
    pub doc: Vec<String>,
    pub attrs: Vec<String>,
    body: Vec<String>,
}

/// An enum's variant as users write it: `"token-mean"` (with its aliases).
pub struct Variant {
    pub name: String,
    pub doc: Vec<String>,
}

impl Sources {
    pub fn new(root: &Path) -> Self {
        Sources {
            root: root.to_path_buf(),
            dirs: BTreeMap::new(),
            files: BTreeMap::new(),
        }
    }

    /// The `.rs` files under `dir`, read into `files`, sorted.
    fn paths(&mut self, dir: &str) -> Vec<PathBuf> {
        if let Some(paths) = self.dirs.get(dir) {
            return paths.clone();
        }
        let mut paths = Vec::new();
        collect_rs(&self.root.join(dir), &mut paths);
        paths.sort();
        for path in &paths {
            self.files.entry(path.clone()).or_insert_with(|| {
                let text = std::fs::read_to_string(path).unwrap();
                text.lines().map(str::to_string).collect()
            });
        }
        self.dirs.insert(dir.to_string(), paths.clone());
        paths
    }

    /// `pub struct NAME` / `pub enum NAME` in `krate`'s sources, if exactly one.
    pub fn find(&mut self, krate: &str, kind: &str, name: &str) -> Option<Item> {
        let mut found = self.all(&format!("{krate}/src"), kind, name);
        assert!(
            found.len() <= 1,
            "{kind} {name} is defined {} times in {krate}: name the crate that holds one",
            found.len()
        );
        found.pop()
    }

    /// A field's type: in `krate`, else the one of that name under `host/`
    /// (none for std's and serde's types).
    pub fn type_named(&mut self, krate: &str, kind: &str, name: &str) -> Option<Item> {
        let ours = name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !["String", "PathBuf", "Table", "Value", "Duration"].contains(&name);
        if !ours {
            return None;
        }
        self.find(krate, kind, name).or_else(|| {
            let mut anywhere = self.all("host", kind, name);
            (anywhere.len() == 1).then(|| anywhere.pop()).flatten()
        })
    }

    /// Every `pub struct NAME` / `pub enum NAME` under `dir`.
    fn all(&mut self, dir: &str, kind: &str, name: &str) -> Vec<Item> {
        let start = format!("pub {kind} {name}");
        let mut found = Vec::new();
        for path in self.paths(dir) {
            let lines = &self.files[&path];
            for (i, line) in lines.iter().enumerate() {
                let rest = line.trim_start().strip_prefix(&start);
                if rest.is_some_and(|r| r.starts_with([' ', '{', '<'])) {
                    found.push(item_at(lines, i, name));
                }
            }
        }
        found
    }

    /// Like [`Sources::find`], for a type the reference must document.
    pub fn item(&mut self, krate: &str, kind: &str, name: &str) -> Item {
        self.find(krate, kind, name).unwrap_or_else(|| {
            panic!(
                "no `pub {kind} {name}` in {krate}/src: update tests/all/book/config_reference.rs"
            )
        })
    }

    /// The fields of the struct literal in `impl Default for TY`, as
    /// `field → expression` (none when the default is derived).
    pub fn default_literal(&mut self, krate: &str, ty: &str) -> BTreeMap<String, String> {
        let header = format!("impl Default for {ty} {{");
        for path in self.paths(&format!("{krate}/src")) {
            let lines = &self.files[&path];
            let Some(at) = lines.iter().position(|l| l.trim() == header) else {
                continue;
            };
            let code = code_text(&lines[at..]);
            let body = &code[..closing(&code, code.find('{').unwrap())];
            let body = &body[body.find("fn default").unwrap_or(0)..];
            let Some(literal) = [format!("{ty} {{"), "Self {".to_string()]
                .iter()
                .find_map(|open| body.find(open.as_str()).map(|i| i + open.len() - 1))
            else {
                return BTreeMap::new();
            };
            let inner = &body[literal + 1..closing(body, literal)];
            return split_top_level(inner)
                .into_iter()
                .filter_map(|entry| {
                    let (name, expr) = entry.split_once(':')?;
                    Some((name.trim().to_string(), expr.trim().to_string()))
                })
                .collect();
        }
        BTreeMap::new()
    }

    /// The body of `fn NAME()` in `krate` when it is one expression.
    pub fn function_body(&mut self, krate: &str, name: &str) -> Option<String> {
        let start = format!("fn {name}()");
        for path in self.paths(&format!("{krate}/src")) {
            let lines = &self.files[&path];
            if let Some(at) = lines.iter().position(|l| l.contains(&start)) {
                let code = code_text(&lines[at..]);
                let open = code.find('{')?;
                return Some(code[open + 1..closing(&code, open)].trim().to_string());
            }
        }
        None
    }

    /// The value of `const NAME: T = value;` anywhere under `host/`.
    pub fn constant(&mut self, name: &str) -> Option<String> {
        let start = format!("const {name}:");
        self.paths("host").into_iter().find_map(|path| {
            let line = self.files[&path].iter().find(|l| l.contains(&start))?;
            let value = line.split_once('=')?.1.trim().strip_suffix(';')?;
            Some(value.to_string())
        })
    }
}

impl Item {
    /// The words and `key = value` pairs of its `#[serde(…)]` attributes.
    pub fn serde_attrs(&self) -> Vec<String> {
        self.attrs
            .iter()
            .filter_map(|a| a.strip_prefix("#[serde(")?.strip_suffix(")]"))
            .flat_map(split_top_level)
            .collect()
    }

    /// Whether its `#[derive(…)]` names `trait_name`.
    pub fn derives(&self, trait_name: &str) -> bool {
        self.attrs.iter().any(|a| {
            a.strip_prefix("#[derive(")
                .is_some_and(|d| d.split([',', ' ', ')', ':']).any(|t| t == trait_name))
        })
    }

    /// Whether a `#[serde(…)]` attribute says `word` (alone).
    pub fn has_serde(&self, word: &str) -> bool {
        self.serde_attrs().iter().any(|a| a == word)
    }

    /// A struct's fields, in order.
    pub fn fields(&self) -> Vec<Item> {
        self.members()
            .into_iter()
            .filter_map(|mut member| {
                let (name, ty) = member.name.split_once(':')?;
                let name = name
                    .trim()
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ");
                member.ty = ty.trim().trim_end_matches(',').to_string();
                member.name = name.to_string();
                Some(member)
            })
            .collect()
    }

    /// An enum's variants, named as serde reads them (quoted, code), with
    /// their aliases.
    pub fn variants(&self) -> Vec<Variant> {
        self.members()
            .into_iter()
            .map(|member| {
                let mut name = format!("`{}`", self.serde_name(&member));
                let aliases: Vec<String> = member
                    .serde_attrs()
                    .iter()
                    .filter_map(|a| a.strip_prefix("alias = "))
                    .map(|a| format!("`{a}`"))
                    .collect();
                if !aliases.is_empty() {
                    name += &format!(" (also {})", aliases.join(", "));
                }
                Variant {
                    name,
                    doc: member.doc,
                }
            })
            .collect()
    }

    /// The serde name of variant `ident` (quoted); `""` names the `#[default]` one.
    pub fn variant_named(&self, ident: &str) -> Option<String> {
        self.members()
            .into_iter()
            .find(|m| {
                ident_of(&m.name) == ident
                    || ident.is_empty() && m.attrs.iter().any(|a| a == "#[default]")
            })
            .map(|m| self.serde_name(&m))
    }

    /// A variant's name as serde reads it, quoted: its `rename`, else the
    /// enum's `rename_all` rule applied to its identifier.
    fn serde_name(&self, variant: &Item) -> String {
        let rule = self
            .serde_attrs()
            .into_iter()
            .find_map(|a| a.strip_prefix("rename_all = ").map(str::to_string));
        let renamed = variant
            .serde_attrs()
            .into_iter()
            .find_map(|a| a.strip_prefix("rename = ").map(str::to_string));
        let name = renamed.unwrap_or_else(|| rename(&ident_of(&variant.name), rule.as_deref()));
        format!("\"{}\"", name.trim_matches('"'))
    }

    /// The members one level inside the braces, each with its docs and
    /// attributes; `name` holds the member's line.
    fn members(&self) -> Vec<Item> {
        let mut members = Vec::new();
        let mut pending = Item::default();
        let mut depth = 0i32;
        for line in &self.body {
            let trimmed = line.trim();
            let at = depth;
            depth += brace_change(&code_text(std::slice::from_ref(line)));
            if at != 0 || trimmed.is_empty() {
                continue;
            }
            if let Some(doc) = trimmed.strip_prefix("///") {
                pending
                    .doc
                    .push(doc.strip_prefix(' ').unwrap_or(doc).to_string());
            } else if trimmed.starts_with("#[") {
                pending.attrs.push(trimmed.to_string());
            } else if !trimmed.starts_with("//") {
                pending.name = trimmed.to_string();
                members.push(std::mem::take(&mut pending));
            }
        }
        members
    }
}

/// The item whose declaration is `lines[at]`: docs and attributes above it,
/// member lines inside its braces.
fn item_at(lines: &[String], at: usize, name: &str) -> Item {
    let mut item = Item {
        name: name.to_string(),
        ..Item::default()
    };
    for line in lines[..at].iter().rev().map(|l| l.trim()) {
        if let Some(doc) = line.strip_prefix("///") {
            item.doc
                .insert(0, doc.strip_prefix(' ').unwrap_or(doc).to_string());
        } else if line.starts_with("#[") {
            item.attrs.insert(0, line.to_string());
        } else if !line.starts_with("//") {
            break;
        }
    }
    let mut depth = 0;
    for line in &lines[at..] {
        let change = brace_change(&code_text(std::slice::from_ref(line)));
        if depth > 0 && depth + change > 0 {
            item.body.push(line.clone());
        }
        depth += change;
        if depth <= 0 && change != 0 {
            break;
        }
    }
    item
}

/// `text` split at the commas outside brackets and strings, trimmed.
pub fn split_top_level(text: &str) -> Vec<String> {
    let (mut parts, mut current, mut depth, mut in_string) = (Vec::new(), String::new(), 0, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => in_string = !in_string,
            '\\' if in_string => {
                current.push(c);
                current.extend(chars.next());
                continue;
            }
            '(' | '[' | '{' if !in_string => depth += 1,
            ')' | ']' | '}' if !in_string => depth -= 1,
            ',' if !in_string && depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// The identifier a member's line starts with.
fn ident_of(line: &str) -> String {
    line.chars().take_while(|c| c.is_alphanumeric()).collect()
}

/// A serde `rename_all` rule (quoted or not) applied to a variant's name.
fn rename(ident: &str, rule: Option<&str>) -> String {
    let words = ident.chars().fold(String::new(), |mut s, c| {
        if c.is_uppercase() && !s.is_empty() {
            s.push(' ');
        }
        s.extend(c.to_lowercase());
        s
    });
    match rule.map(|r| r.trim_matches('"')) {
        Some("kebab-case") => words.replace(' ', "-"),
        Some("snake_case") => words.replace(' ', "_"),
        Some("lowercase") => ident.to_lowercase(),
        _ => ident.to_string(),
    }
}

/// The lines joined, with `//` comments (outside strings) left out.
fn code_text(lines: &[String]) -> String {
    let mut out = String::new();
    for line in lines {
        let mut in_string = false;
        let mut prev = ' ';
        for (i, c) in line.char_indices() {
            if c == '"' && prev != '\\' {
                in_string = !in_string;
            }
            if !in_string && line[i..].starts_with("//") {
                break;
            }
            out.push(c);
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// Opening minus closing braces outside strings.
fn brace_change(code: &str) -> i32 {
    let mut in_string = false;
    let mut prev = ' ';
    let mut change = 0;
    for c in code.chars() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '{' if !in_string => change += 1,
            '}' if !in_string => change -= 1,
            _ => {}
        }
        prev = c;
    }
    change
}

/// The index of the brace that closes the one at `open`.
fn closing(code: &str, open: usize) -> usize {
    let mut depth = 0;
    let mut in_string = false;
    let mut prev = ' ';
    for (i, c) in code[open..].char_indices() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '{' if !in_string => depth += 1,
            '}' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
        prev = c;
    }
    panic!(
        "unbalanced braces in {}",
        &code[open..code.len().min(open + 80)]
    )
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
