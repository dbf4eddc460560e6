//! Chat templates: the Jinja a model ships (in `tokenizer_config.json`,
//! `chat_template.jinja` or GGUF's `tokenizer.chat_template`), rendered
//! with minijinja the way transformers' `apply_chat_template` renders it:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods available,
//! `raise_exception`, and a `tojson` that writes JSON as Python's
//! `json.dumps` does (`", "` and `": "`, nothing escaped for HTML).
//!
//! A template comes with a downloaded model and is hostile input: each
//! render runs within bounds — instructions ([`MAX_RENDER_FUEL`]), sizes
//! ([`MAX_VALUE_SIZE`], [`MAX_RENDER_WORK`]), nesting ([`MAX_VALUE_DEPTH`],
//! [`MAX_RECURSION`]), widths ([`MAX_WIDTH`]) and time
//! ([`MAX_RENDER_TIME`]) — and an error names the file and field the
//! template came from.

mod bounds;
mod builtins;
mod program;

pub use bounds::{
    MAX_RECURSION, MAX_RENDER_FUEL, MAX_RENDER_TIME, MAX_RENDER_WORK, MAX_TEMPLATE_BYTES,
    MAX_VALUE_DEPTH, MAX_VALUE_SIZE, MAX_WIDTH,
};

use crate::error::{ModelError, Result};
use bounds::{Guard, Metered};
use candle_core::quantized::gguf_file::Content;
use minijinja::value::Value as JinjaValue;
use minijinja::{Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
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
    origin: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("origin", &self.origin)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

const NAME: &str = "chat_template";

/// minijinja's own limits, which it reports only in words.
const MINIJINJA_LIMITS: [(&str, &str); 3] = [
    ("recursion limit exceeded", "MAX_RECURSION"),
    ("range has too many elements", "minijinja's range limit"),
    ("repeated string is too large", "minijinja's repeat limit"),
];

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the texts the
    /// template may write. Errors name it `chat_template`; a template read
    /// from a model file is better compiled with [`ChatTemplate::from_source`].
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<Self> {
        Self::from_source(NAME, source, bos_token, eos_token)
    }

    /// Compiles `source`, which came from `origin` — the file and field
    /// (`model.gguf: tokenizer.chat_template`) every error of this
    /// template names, so that a refused download can be told apart.
    pub fn from_source(
        origin: impl Into<String>,
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<Self> {
        let origin = origin.into();
        let fail = |message: String| ModelError::Template {
            origin: origin.clone(),
            message,
        };
        if source.len() > MAX_TEMPLATE_BYTES {
            return Err(ModelError::Limit {
                origin,
                message: format!(
                    "the template is {} bytes, more than {MAX_TEMPLATE_BYTES} (MAX_TEMPLATE_BYTES)",
                    source.len()
                ),
            });
        }
        match program::screen(source) {
            Ok(()) => {}
            Err(program::Refused::Limit(message)) => {
                return Err(ModelError::Limit { origin, message });
            }
            Err(program::Refused::Invalid(message)) => return Err(fail(message)),
        }
        let mut environment = Environment::new();
        environment.set_trim_blocks(true);
        environment.set_lstrip_blocks(true);
        environment.set_fuel(Some(MAX_RENDER_FUEL));
        environment.set_recursion_limit(MAX_RECURSION);
        environment.set_formatter(bounds::format);
        builtins::install(&mut environment);
        environment.add_function(
            "raise_exception",
            |message: String| -> std::result::Result<JinjaValue, JinjaError> {
                Err(JinjaError::new(ErrorKind::InvalidOperation, message))
            },
        );
        for guard in Guard::ALL {
            environment.add_global(guard.name(), JinjaValue::from_object(guard));
        }
        environment
            .add_template_owned(NAME, source.to_string())
            .map_err(|e| fail(e.to_string()))?;
        Ok(ChatTemplate {
            environment,
            source: source.to_string(),
            origin,
            bos_token: bos_token.to_string(),
            eos_token: eos_token.to_string(),
        })
    }

    /// The Jinja source (written out with an exported checkpoint).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the template came from (file and field), as errors name it.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The conversation as the model reads it; with `add_generation_prompt`
    /// it ends where the assistant's answer begins. A render that goes past
    /// one of this module's `MAX_*` bounds fails with [`ModelError::Limit`].
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let context = JinjaValue::from_serialize(minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        });
        let metered = Metered::start();
        let text = self
            .run(context)
            .map_err(|e| self.render_error(e, metered.refusal()))?;
        if text.len() > MAX_VALUE_SIZE {
            return Err(self.limit(format!(
                "the template rendered {} bytes, more than {MAX_VALUE_SIZE} (MAX_VALUE_SIZE)",
                text.len()
            )));
        }
        Ok(text)
    }

    /// Runs the compiled template with its guards (see [`program`]).
    fn run(&self, context: JinjaValue) -> std::result::Result<String, JinjaError> {
        let template = self.environment.get_template(NAME)?;
        let compiled = minijinja::machinery::get_compiled_template(&template);
        let code = program::guarded(&compiled.instructions);
        let blocks: BTreeMap<_, _> = compiled
            .blocks
            .iter()
            .map(|(name, block)| (*name, program::guarded(block)))
            .collect();
        let mut text = String::new();
        let mut out = minijinja::machinery::make_string_output(&mut text);
        minijinja::machinery::Vm::new(&self.environment).eval(
            &code,
            context,
            &blocks,
            &mut out,
            compiled.initial_auto_escape,
        )?;
        Ok(text)
    }

    fn limit(&self, message: String) -> ModelError {
        ModelError::Limit {
            origin: self.origin.clone(),
            message,
        }
    }

    /// A render's error: the limit it hit (the refusal a guard or builtin
    /// recorded, fuel, or one of minijinja's own), or what the template
    /// did wrong.
    fn render_error(&self, error: JinjaError, refusal: Option<String>) -> ModelError {
        let at = error
            .line()
            .map(|line| format!(" (line {line})"))
            .unwrap_or_default();
        let detail = error.detail().unwrap_or_default();
        let limit = refusal.or_else(|| {
            if error.kind() == ErrorKind::OutOfFuel {
                return Some(format!(
                    "the template ran more than {MAX_RENDER_FUEL} instructions (MAX_RENDER_FUEL)"
                ));
            }
            MINIJINJA_LIMITS
                .iter()
                .find(|(words, _)| detail.contains(words))
                .map(|(words, name)| format!("{words} ({name})"))
        });
        match limit {
            Some(message) => self.limit(format!("{message}{at}")),
            None => ModelError::Template {
                origin: self.origin.clone(),
                message: error.to_string(),
            },
        }
    }

    /// The template of a GGUF file (`tokenizer.chat_template`), `None` when
    /// it has none.
    pub fn from_gguf(
        content: &Content,
        path: &Path,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<Option<Self>> {
        crate::gguf::chat_template_source(content)
            .map(|source| {
                let origin = format!("{}: tokenizer.chat_template", path.display());
                Self::from_source(origin, &source, bos_token, eos_token)
            })
            .transpose()
    }

    /// The template of a checkpoint directory: `chat_template.jinja`, else
    /// `chat_template.json`, else `tokenizer_config.json`'s `chat_template`
    /// (a string, or a list whose `default` entry is taken); `None` when
    /// the model has none.
    pub fn from_checkpoint_dir(dir: &Path) -> Result<Option<Self>> {
        let config_path = dir.join("tokenizer_config.json");
        let config = read_json_if_present(&config_path)?;
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
            let origin = jinja.display().to_string();
            return ChatTemplate::from_source(origin, &source, &bos, &eos).map(Some);
        }
        let json_path = dir.join("chat_template.json");
        let (path, from_json) =
            match read_json_if_present(&json_path)?.and_then(|v| v.get("chat_template").cloned()) {
                Some(found) => (json_path, Some(found)),
                None => (
                    config_path,
                    config
                        .as_ref()
                        .and_then(|c| c.get("chat_template").cloned()),
                ),
            };
        let (source, field) = match from_json {
            Some(Value::String(s)) => (s, "chat_template"),
            Some(Value::Array(entries)) => entries
                .iter()
                .find(|e| e.get("name").and_then(Value::as_str) == Some("default"))
                .and_then(|e| e.get("template").and_then(Value::as_str))
                .map(|s| (s.to_string(), "chat_template[default]"))
                .ok_or_else(|| {
                    ModelError::format(&path, "chat_template lists no \"default\" template")
                })?,
            _ => return Ok(None),
        };
        let origin = format!("{}: {field}", path.display());
        ChatTemplate::from_source(origin, &source, &bos, &eos).map(Some)
    }
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
