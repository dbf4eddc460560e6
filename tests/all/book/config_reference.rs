//! The book's configuration reference, made from the config types' source:
//! each table's type is found by name in its crate, its `///` docs and its
//! fields' docs become the page, and serde's renames, aliases and defaults
//! (the type's `impl Default`, narrowed by its parent's, or a field's
//! `default = "…"` function) are read from the same text when they are
//! simple. No parser crate: config types are plain structs and enums, so
//! lines, braces and commas are enough.

use super::source::{Item, Sources, split_top_level};
use super::values::{render_value, struct_literal, type_default};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// One table of a config file.
struct Table {
    /// The TOML path (`model.lora`); `None` for a table with no fixed place.
    path: Option<&'static str>,
    /// The heading when `path` is `None`.
    heading: &'static str,
    /// The crate that defines the type (`host/train`).
    krate: &'static str,
    /// The Rust type whose fields are the table's keys.
    ty: &'static str,
}

const fn at(path: &'static str, krate: &'static str, ty: &'static str) -> Table {
    Table {
        path: Some(path),
        heading: "",
        krate,
        ty,
    }
}

const fn named(heading: &'static str, krate: &'static str, ty: &'static str) -> Table {
    Table {
        path: None,
        heading,
        krate,
        ty,
    }
}

/// One config file: its title, what reads it, and its tables.
struct File {
    title: &'static str,
    intro: &'static str,
    tables: &'static [Table],
}

const FILES: &[File] = &[
    File {
        title: "The training config",
        intro: "`verifine train --config FILE` (the default run is `examples/arithmetic/train.toml`). \
                Training's tables sit at the top level beside the host's `[limits]`, `[hot_swap]` and `[judges]`.",
        tables: &[
            at("", "host/train", "TrainConfig"),
            at("task", "host/train", "TaskConfig"),
            at("task.dataset", "host/train", "DatasetConfig"),
            at("task.symbolic", "host/train", "SymbolicConfig"),
            at("model", "host/train", "ModelSize"),
            at("model.lora", "host/train", "LoraConfig"),
            at("model.freeze", "host/train", "FreezeConfig"),
            at("sft", "host/train", "SftConfig"),
            at("sft.optim", "host/train", "OptimConfig"),
            at("grpo", "host/train", "GrpoPhase"),
            at("grpo.objective", "host/train", "GrpoConfig"),
            at("grpo.optim", "host/train", "OptimConfig"),
            at("self_verification", "host/train", "SelfVerification"),
            at("reward", "host/train", "RewardConfig"),
            named("Plugin settings", "host/base", "PluginSetting"),
            at("checkpoints", "host/train", "CheckpointConfig"),
            at("limits", "host/runtime", "Limits"),
            at("hot_swap", "host/hotswap", "HotSwapConfig"),
            at("hot_swap.gate", "host/hotswap", "GateConfig"),
            at("hot_swap.agent", "host/hotswap", "AgentConfig"),
            at("judges", "host/cli", "JudgesTable"),
        ],
    },
    File {
        title: "The co-evolution config",
        intro: "`verifine evolve --config FILE` (the default run is `examples/evolve/evolve.toml`). \
                `[train]` holds a whole training config.",
        tables: &[
            at("", "host/evolve", "EvolveConfig"),
            at("queries", "host/evolve", "QueryConfig"),
            at("annotator", "host/evolve", "AnnotatorConfig"),
            at("membership", "host/evolve", "MembershipConfig"),
            at("calibration", "host/evolve", "CalibrationConfig"),
            at("agent", "host/evolve", "AgentConfig"),
            at("verifier", "host/evolve", "RetrainConfig"),
        ],
    },
    File {
        title: "The scoring config",
        intro: "`verifine score --config FILE`; `verifine serve` reads the same file.",
        tables: &[
            at("", "host/cli", "ScoreConfig"),
            at("scoring", "host/cli", "ScoringOptions"),
        ],
    },
    File {
        title: "The reward server's tables",
        intro: "`verifine serve --config FILE`, beside the scoring config's tables.",
        tables: &[
            at("", "host/serve", "ServeFile"),
            at("serve", "host/serve", "ServeTable"),
        ],
    },
    File {
        title: "The judges file",
        intro: "`verifine score --judges FILE`, `[judges] file` in a training config, \
                `judges` in an evolve config (`examples/judges/judges.toml`).",
        tables: &[
            at("", "host/judge", "JudgesConfig"),
            at("judges.NAME", "host/judge", "JudgeConfig"),
            named(
                "`backend` with `kind = \"openai-http\"`",
                "host/judge",
                "HttpConfig",
            ),
            named(
                "`backend` with `kind = \"local-gguf\"` or `\"local-safetensors\"`",
                "host/judge",
                "LocalConfig",
            ),
            at("judges.NAME.price", "host/judge", "Price"),
            at("judges.NAME.budget", "host/judge", "Budget"),
        ],
    },
    File {
        title: "The verifier screen",
        intro: "`verifine verifiers screen --config FILE` (`examples/verifiers/screen.toml`).",
        tables: &[
            at("", "host/cli", "ScreenConfig"),
            named("`[[candidates]]` and `[[goldens]]`", "host/cli", "Verifier"),
            at("post_training", "host/cli", "PostTraining"),
        ],
    },
];

/// The page, as `docs/src/training/config-reference.md` holds it.
pub fn render(root: &Path) -> String {
    let mut sources = Sources::new(root);
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the config types' doc comments by tests/all/book/config_reference.rs: \
         do not edit; `VERIFINE_BLESS=1 cargo test -p verifine-tests --test all book` rewrites it. -->\n\n\
         Every file is TOML, and every table and key is optional unless it says *required*; \
         a key the table does not know is an error. Each key says its type and its default \
         when one is set, then what the type's doc comment says.\n",
    );
    // Headings and their anchors first, so a key can link to a table below it.
    let mut used = HashSet::from(["configuration-reference".to_string()]);
    let mut anchors = Anchors::default();
    let mut headings = Vec::new();
    for (index, file) in FILES.iter().enumerate() {
        super::links::unique_anchor(file.title, &mut used);
        for table in file.tables {
            let heading = heading(table);
            let anchor = super::links::unique_anchor(&heading, &mut used);
            anchors.0.push((index, table, anchor));
            headings.push(heading);
        }
    }
    let mut headings = headings.into_iter();
    for (index, file) in FILES.iter().enumerate() {
        out += &format!("\n## {}\n\n{}\n", file.title, file.intro);
        for table in file.tables {
            let item = sources.item(table.krate, "struct", table.ty);
            let defaults = defaults(&mut sources, file.tables, table);
            out += &format!("\n### {}\n\n", headings.next().unwrap());
            out += &format!("`{}`: {}\n\n", table.ty, doc_text(&item.doc, ""));
            for field in item.fields() {
                out += &field_line(&mut sources, (index, table), &field, &defaults, &anchors);
            }
        }
    }
    out
}

/// Every table's heading anchor, with its file and type.
#[derive(Default)]
struct Anchors(Vec<(usize, &'static Table, String)>);

impl Anchors {
    /// The table a key of `table` (in file `file`) opens: the one of its
    /// type at the key's own path in the same file, else the first of its type.
    fn of(&self, file: usize, table: &Table, key: &str, ty: &str) -> Option<&String> {
        let path = match table.path {
            Some("") => Some(key.to_string()),
            Some(parent) => Some(format!("{parent}.{key}")),
            None => None,
        };
        let of_type = || self.0.iter().filter(|(_, t, _)| t.ty == ty);
        of_type()
            .find(|(f, t, _)| *f == file && t.path.map(str::to_string) == path)
            .or_else(|| of_type().next())
            .map(|(_, _, anchor)| anchor)
    }
}

fn heading(table: &Table) -> String {
    match table.path {
        Some("") => "Top level".to_string(),
        Some(path) => format!("`[{path}]`"),
        None => table.heading.to_string(),
    }
}

/// The default expression of each field of `table`: its type's `impl
/// Default`, with what its parent's default says of it laid over.
fn defaults(sources: &mut Sources, tables: &[Table], table: &Table) -> BTreeMap<String, String> {
    let mut fields = sources.default_literal(table.krate, table.ty);
    let Some(path) = table.path.filter(|p| !p.is_empty()) else {
        return fields;
    };
    let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
    if let Some(parent) = tables.iter().find(|t| t.path == Some(parent)) {
        let parent_defaults = defaults(sources, tables, parent);
        if let Some(literal) = parent_defaults.get(key).and_then(|e| struct_literal(e)) {
            fields.extend(split_top_level(literal).into_iter().filter_map(|entry| {
                let (name, expr) = entry.split_once(':')?;
                Some((name.trim().to_string(), expr.trim().to_string()))
            }));
        }
    }
    fields
}

/// One key: `- **`name`** (type, default `x`): doc`, then its values when
/// its type is an enum.
fn field_line(
    sources: &mut Sources,
    (file, table): (usize, &Table),
    field: &Item,
    defaults: &BTreeMap<String, String>,
    anchors: &Anchors,
) -> String {
    let serde = field.serde_attrs();
    if serde.iter().any(|a| a == "skip" || a == "flatten") {
        return String::new();
    }
    let key = serde
        .iter()
        .find_map(|a| a.strip_prefix("rename = "))
        .map_or(field.name.clone(), |r| r.trim_matches('"').to_string());
    let ty = field.ty.as_str();
    let (inner, optional) = match ty.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')) {
        Some(inner) => (inner, true),
        None => (ty, false),
    };
    let map_of = inner
        .strip_prefix("BTreeMap<String, ")
        .and_then(|t| t.strip_suffix('>'));
    let bare = map_of.unwrap_or(inner).rsplit("::").next().unwrap_or(inner);
    let enumeration = sources
        .type_named(table.krate, "enum", bare)
        .filter(|e| e.derives("Deserialize"));
    let tag = enumeration.as_ref().and_then(|e| {
        e.serde_attrs()
            .iter()
            .find_map(|a| a.strip_prefix("tag = ").map(str::to_string))
    });
    let mut kind = match (anchors.of(file, table, &key, bare), &tag) {
        (Some(anchor), _) if map_of.is_some() => {
            format!("tables by name, see [their table](#{anchor})")
        }
        (Some(anchor), _) => format!("table, see [its table](#{anchor})"),
        (None, Some(tag)) => format!("table whose `{}` is one of these", tag.trim_matches('"')),
        (None, None) if enumeration.is_some() => "string".to_string(),
        (None, None) => toml_type(inner),
    };
    let variants = enumeration.map(|e| e.variants());
    if let Some(alias) = serde.iter().find_map(|a| a.strip_prefix("alias = ")) {
        kind += &format!("; also `{}`", alias.trim_matches('"'));
    }
    let struct_default = sources
        .item(table.krate, "struct", table.ty)
        .has_serde("default");
    let default = if let Some(function) = serde.iter().find_map(|a| a.strip_prefix("default = ")) {
        let name = function
            .trim_matches('"')
            .rsplit("::")
            .next()
            .unwrap_or_default();
        sources
            .function_body(table.krate, name)
            .and_then(|b| render_value(sources, table.krate, &b))
    } else if struct_default && defaults.contains_key(&field.name) {
        render_value(sources, table.krate, &defaults[&field.name])
    } else if struct_default || field.has_serde("default") || optional {
        type_default(sources, table.krate, ty)
    } else {
        kind += ", *required*";
        None
    };
    let default = match default {
        Some(value) if !value.is_empty() => format!(", default `{value}`"),
        _ => String::new(),
    };
    let mut line = format!(
        "- **`{key}`** ({kind}{default}): {}\n",
        doc_text(&field.doc, "  ")
    );
    for variant in variants.unwrap_or_default() {
        line += &format!("  - {}: {}\n", variant.name, doc_text(&variant.doc, "    "));
    }
    line
}

/// A type as a TOML user reads it.
fn toml_type(ty: &str) -> String {
    let ty = ty.trim();
    if let Some(inner) = ty.strip_prefix("Vec<").and_then(|t| t.strip_suffix('>')) {
        return format!("array of {}", toml_type(inner));
    }
    if ty.starts_with('[') {
        return "array".to_string();
    }
    if ty.starts_with("BTreeMap<String,") {
        return "table of tables by name".to_string();
    }
    match ty.rsplit("::").next().unwrap_or(ty) {
        "usize" | "u64" | "u32" | "u16" | "i64" | "i32" => "integer",
        "f64" | "f32" => "number",
        "bool" => "boolean",
        "String" | "PluginSpec" => "string",
        "PathBuf" => "path",
        "Table" => "table",
        "Value" => "any value",
        other => return format!("`{other}`"),
    }
    .to_string()
}

/// Doc lines as markdown: paragraphs kept (indented by `indent` inside a
/// list item), intra-doc links as code, `<` outside code escaped.
fn doc_text(lines: &[String], indent: &str) -> String {
    let text = lines.join("\n");
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .map(|p| markdown(&p))
        .collect();
    paragraphs.join(&format!("\n\n{indent}"))
}

/// Rustdoc's `[`path`]` links become code, `[text](target)` its text, and
/// a `<` outside code an entity (mdBook would read it as an HTML tag).
fn markdown(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(end) = rest.find(']').filter(|_| !in_code && c == '[') {
            let (inner, after) = (&rest[1..end], &rest[end + 1..]);
            if inner.starts_with('`') && !after.starts_with('(') {
                out += inner;
                rest = after;
                continue;
            }
            if let Some(close) = after.strip_prefix('(').and_then(|a| a.find(')')) {
                out += inner;
                rest = &after[close + 2..];
                continue;
            }
        }
        match c {
            '`' => in_code = !in_code,
            '<' if !in_code => {
                out += "&lt;";
                rest = &rest[1..];
                continue;
            }
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}
