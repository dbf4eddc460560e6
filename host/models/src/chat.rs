//! Chat templates: the Jinja a model ships (in `tokenizer_config.json`,
//! `chat_template.jinja` or GGUF's `tokenizer.chat_template`), rendered
//! with minijinja the way transformers' `apply_chat_template` renders it:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods available,
//! `raise_exception`, and a `tojson` that writes JSON as Python's
//! `json.dumps` does (`", "` and `": "`, nothing escaped for HTML).

use crate::error::{ModelError, Result};
use minijinja::value::{Kwargs, Value as JinjaValue, ValueKind};
use minijinja::{Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions before the conversation.
    System,
    /// The person asking.
    User,
    /// The model.
    Assistant,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A turn of `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// A compiled chat template with the special tokens it may name.
#[derive(Clone)]
pub struct ChatTemplate {
    environment: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the texts the
    /// template may write.
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        let mut environment = Environment::new();
        environment.set_trim_blocks(true);
        environment.set_lstrip_blocks(true);
        environment
            .set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        environment.add_filter("tojson", tojson);
        environment.add_function(
            "raise_exception",
            |message: String| -> std::result::Result<JinjaValue, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, message))
            },
        );
        environment
            .add_template_owned(NAME, source.to_string())
            .map_err(|e| ModelError::Template(e.to_string()))?;
        Ok(ChatTemplate {
            environment,
            source: source.to_string(),
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The Jinja source (written out with an exported checkpoint).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The conversation as the model reads it; with `add_generation_prompt`
    /// it ends where the assistant's answer begins.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let template = self
            .environment
            .get_template(NAME)
            .map_err(|e| ModelError::Template(e.to_string()))?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| ModelError::Template(e.to_string()))
    }

    /// The template of a checkpoint directory: `chat_template.jinja`, else
    /// `chat_template.json`, else `tokenizer_config.json`'s `chat_template`
    /// (a string, or a list whose `default` entry is taken); `None` when
    /// the model has none.
    pub fn from_checkpoint_dir(dir: &Path) -> Result<Option<Self>> {
        let config = read_json_if_present(&dir.join("tokenizer_config.json"))?;
        let token = |key: &str| -> String {
            match config.as_ref().and_then(|c| c.get(key)) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(o)) => o
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                _ => String::new(),
            }
        };
        let (bos, eos) = (token("bos_token"), token("eos_token"));
        let jinja = dir.join("chat_template.jinja");
        if jinja.is_file() {
            let source = std::fs::read_to_string(&jinja)
                .map_err(|e| verifine_base::FileError::io("reading", &jinja, e))?;
            return ChatTemplate::new(&source, &bos, &eos)
                .map(Some)
                .map_err(|e| in_file(&jinja, e));
        }
        let from_json = read_json_if_present(&dir.join("chat_template.json"))?
            .and_then(|v| v.get("chat_template").cloned())
            .or_else(|| {
                config
                    .as_ref()
                    .and_then(|c| c.get("chat_template").cloned())
            });
        let source = match from_json {
            Some(Value::String(s)) => s,
            Some(Value::Array(entries)) => entries
                .iter()
                .find(|e| e.get("name").and_then(Value::as_str) == Some("default"))
                .and_then(|e| e.get("template").and_then(Value::as_str))
                .map(str::to_string)
                .ok_or_else(|| {
                    ModelError::format(
                        dir.join("tokenizer_config.json"),
                        "chat_template lists no \"default\" template",
                    )
                })?,
            _ => return Ok(None),
        };
        ChatTemplate::new(&source, &bos, &eos)
            .map(Some)
            .map_err(|e| in_file(&dir.join("tokenizer_config.json"), e))
    }
}

fn in_file(path: &Path, error: ModelError) -> ModelError {
    ModelError::format(path, error.to_string())
}

/// Reads a JSON file, `None` when it is not there.
pub(crate) fn read_json_if_present(path: &Path) -> Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| verifine_base::FileError::io("reading", path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::format(path, e.to_string()))
}

/// `tojson` as transformers defines it: Python's `json.dumps` (separators
/// `", "` and `": "`, or newlines and `indent` spaces; keys in the order
/// the template wrote them).
fn tojson(value: JinjaValue, kwargs: Kwargs) -> std::result::Result<JinjaValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    python_json(&value, indent, 0, &mut out)?;
    Ok(JinjaValue::from_safe_string(out))
}

fn python_json(
    value: &JinjaValue,
    indent: Option<usize>,
    depth: usize,
    out: &mut String,
) -> std::result::Result<(), JinjaError> {
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(width * depth));
        }
    };
    let separator = if indent.is_some() { "," } else { ", " };
    let scalar = |v: &JinjaValue| -> std::result::Result<String, JinjaError> {
        let json = serde_json::to_value(v)
            .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, e.to_string()))?;
        Ok(json.to_string())
    };
    match value.kind() {
        ValueKind::Map => {
            let keys: Vec<JinjaValue> = value.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(separator);
                }
                newline(out, depth + 1);
                let name = key
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| key.to_string());
                out.push_str(&Value::String(name).to_string());
                out.push_str(": ");
                python_json(&value.get_item(key)?, indent, depth + 1, out)?;
            }
            newline(out, depth);
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<JinjaValue> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(separator);
                }
                newline(out, depth + 1);
                python_json(item, indent, depth + 1, out)?;
            }
            newline(out, depth);
            out.push(']');
        }
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        _ => out.push_str(&scalar(value)?),
    }
    Ok(())
}
