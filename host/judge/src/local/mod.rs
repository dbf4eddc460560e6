//! A judge model run in this process with candle: a GGUF llama/qwen2
//! decoder ([`model`]) with its SentencePiece vocabulary ([`spm`]).
//!
//! **Prefix reuse.** Every prompt's KV cache is kept (a few, least
//! recently used dropped first); a new prompt starts from the longest
//! token prefix it shares with one of them. A rubric plugin that renders
//! the introduction and conversation first and the criteria last (split
//! at `# Rubric items`) thus encodes a sample's shared prefix once, however
//! many criterion batches follow. The reused tokens are reported as cached
//! input.
//!
//! **Constrained verdicts.** A query with `choices` is answered by scoring
//! each choice as a continuation and taking the likeliest; the answer's
//! log-probabilities are the choices' renormalized over the choices, so
//! `exp` of the first is the confidence. A query with a JSON schema is
//! answered within it ([`schema`]), so the answer always parses.

mod attention;
mod causal;
mod decode;
pub mod error;
mod gguf_load;
pub mod int8;
pub mod model;
mod norms;
mod projection;
pub mod safetensors;
pub mod schema;
mod shared_prefix;
mod tables;
pub mod tiny;
pub mod vocabulary;

/// The SentencePiece tokenizer lives with the other model formats.
pub use verifine_models::spm;

use crate::config::{LocalConfig, PromptTemplate};
use crate::error::{JudgeError, Result};
use crate::http::Exchange;
use candle_core::Device;
use model::{DecoderError, JudgeDecoder, KvCache};
use std::sync::Mutex;
use verifine_base::SplitMix64;
use verifine_models::{ChatTemplate, Message, Role, TextTokenizer};
use verifine_runtime::judge_models::{ModelAnswer, ModelRequest, TokenLogprob, TokenUsage};
use vocabulary::Vocabulary;

/// A prompt whose KV cache is kept for reuse.
struct CachedPrompt {
    tokens: Vec<u32>,
    cache: KvCache,
}

/// A query as token ids ([`LocalBackend::query_ids`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryIds {
    /// The rendered prompt, begin token included where the model adds one.
    pub prompt: Vec<u32>,
    /// Each choice's continuation, in the request's order.
    pub choices: Vec<Vec<u32>>,
}

/// A loaded local judge.
pub struct LocalBackend {
    model: JudgeDecoder,
    vocabulary: Vocabulary,
    chat_template: Option<ChatTemplate>,
    template: PromptTemplate,
    name: String,
    prompts: Mutex<Vec<CachedPrompt>>,
    keep_prompts: usize,
}

impl LocalBackend {
    /// Loads the GGUF file the config names, on the CPU or the first CUDA
    /// device.
    pub fn new(config: &LocalConfig) -> Result<Self> {
        let fail = |m: String| JudgeError::Config(format!("{}: {m}", config.path.display()));
        let device = device(config)?;
        let (content, mut file) =
            verifine_models::gguf::read_content(&config.path).map_err(|e| fail(e.to_string()))?;
        // Ids are checked against the embedding rows before a vocabulary is
        // built from the file's word.
        let tokenizer = match content.tensor_infos.get("token_embd.weight") {
            Some(embedding) => TextTokenizer::from_gguf_for(
                &content,
                &config.path,
                embedding.shape.dims().first().copied().unwrap_or(0),
            ),
            None => TextTokenizer::from_gguf(&content, &config.path),
        }
        .map_err(|e| JudgeError::Config(e.to_string()))?;
        let meta = |key: &str| content.metadata.get(key);
        let id = |key: &str| meta(key).and_then(|v| v.to_u32().ok());
        // llama.cpp's default: SentencePiece vocabularies begin with BOS,
        // byte-level BPE ones only when the file says so.
        let add_bos = meta("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(tokenizer.spm().is_some());
        let bos = id("tokenizer.ggml.bos_token_id");
        let ends: Vec<u32> = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
            .into_iter()
            .filter_map(id)
            .collect();
        let text_of = |id: Option<u32>| {
            id.and_then(|i| tokenizer.id_to_token(i))
                .unwrap_or_default()
        };
        let chat_template = ChatTemplate::from_gguf(
            &content,
            &config.path,
            &text_of(bos),
            &text_of(ends.first().copied()),
        )
        .map_err(|e| JudgeError::Config(e.to_string()))?;
        let vocabulary = Vocabulary::new(tokenizer, bos, add_bos, &ends);
        let model = JudgeDecoder::load(&content, &mut file, &device, config.weight_products)
            .map_err(|e| fail(e.to_string()))?;
        Self::from_parts(model, vocabulary, chat_template, config)
    }

    /// Loads a Hugging Face checkpoint directory (`config.json`,
    /// `*.safetensors`, `tokenizer.json`, the tokenizer config and chat
    /// template when present).
    pub fn from_safetensors(config: &LocalConfig) -> Result<Self> {
        let fail = |m: String| JudgeError::Config(format!("{}: {m}", config.path.display()));
        let device = device(config)?;
        let spec = safetensors::spec(&config.path).map_err(|e| fail(e.to_string()))?;
        let tokenizer = TextTokenizer::from_tokenizer_json_for(
            &config.path.join("tokenizer.json"),
            spec.vocab_size,
        )
        .map_err(|e| JudgeError::Config(e.to_string()))?;
        let tokenizer_config = std::fs::read_to_string(config.path.join("tokenizer_config.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let add_bos = tokenizer_config
            .as_ref()
            .and_then(|c| c.get("add_bos_token"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let chat_template = ChatTemplate::from_checkpoint_dir(&config.path)
            .map_err(|e| JudgeError::Config(e.to_string()))?;
        let vocabulary =
            Vocabulary::new(tokenizer, spec.bos_token_id, add_bos, &spec.eos_token_ids);
        let model =
            safetensors::load(&config.path, &spec, &device).map_err(|e| fail(e.to_string()))?;
        Self::from_parts(model, vocabulary, chat_template, config)
    }

    fn from_parts(
        model: JudgeDecoder,
        vocabulary: Vocabulary,
        chat_template: Option<ChatTemplate>,
        config: &LocalConfig,
    ) -> Result<Self> {
        if vocabulary.len() > model.vocab_size() {
            return Err(JudgeError::Config(format!(
                "{}: the vocabulary has {} tokens but the embedding table {} rows",
                config.path.display(),
                vocabulary.len(),
                model.vocab_size()
            )));
        }
        Ok(LocalBackend {
            model,
            vocabulary,
            chat_template,
            template: config.template,
            name: config
                .path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            prompts: Mutex::new(Vec::new()),
            keep_prompts: config.prefix_cache_prompts,
        })
    }

    /// The vocabulary, for tests that compare tokenizations.
    pub fn vocabulary(&self) -> &Vocabulary {
        &self.vocabulary
    }

    /// The model, for tests and benchmarks that run it directly.
    pub fn model(&self) -> &JudgeDecoder {
        &self.model
    }

    /// Answers a batch: prompts run from the longest kept prefix, those
    /// sharing a prefix together, then every free-text answer decodes
    /// together, one token per answer per step ([`decode`]).
    pub fn exchange_all(&self, requests: &[&ModelRequest]) -> Vec<Exchange> {
        decode::answer_all(self, requests)
    }

    fn answer(
        &self,
        text: String,
        logprobs: Vec<TokenLogprob>,
        usage: TokenUsage,
        seconds: f64,
    ) -> ModelAnswer {
        ModelAnswer {
            text,
            logprobs,
            usage,
            model: self.name.clone(),
            seconds,
            cached: false,
        }
    }

    /// The prompt as the model sees it.
    pub fn render(&self, request: &ModelRequest) -> String {
        let system = request.system.as_deref().unwrap_or("");
        match (self.template, &self.chat_template) {
            (PromptTemplate::Model, Some(template)) => {
                let mut messages = Vec::new();
                if !system.is_empty() {
                    messages.push(Message::new(Role::System, system));
                }
                messages.push(Message::new(Role::User, request.prompt.as_str()));
                // A template that refuses the messages (one that allows no
                // system turn, say) falls back to ChatML rather than
                // failing the query.
                template
                    .render(&messages, true)
                    .unwrap_or_else(|_| chatml(system, &request.prompt))
            }
            (PromptTemplate::Model | PromptTemplate::Chatml, _) => chatml(system, &request.prompt),
            (PromptTemplate::Plain, _) if system.is_empty() => request.prompt.clone(),
            (PromptTemplate::Plain, _) => format!("{system}\n\n{}", request.prompt),
        }
    }

    /// The ids this backend puts before a query's answer, and each choice's
    /// continuation ids, exactly as it scores them. A verifier trained on
    /// these ids (`verifine judge train`) is asked at judging time exactly
    /// what it was trained on.
    pub fn query_ids(&self, request: &ModelRequest) -> QueryIds {
        QueryIds {
            prompt: self.vocabulary.encode(&self.render(request)),
            choices: request
                .choices
                .iter()
                .map(|c| self.vocabulary.encode_continuation(c))
                .collect(),
        }
    }

    /// The cache of the longest kept prefix of `prompt` (at least one
    /// prompt token is always run, for the next token's distribution).
    pub(crate) fn start_from_cache(
        &self,
        prompt: &[u32],
    ) -> std::result::Result<(KvCache, usize), DecoderError> {
        let prompts = self
            .prompts
            .lock()
            .map_err(|_| DecoderError::Batch("the prompt cache's lock is poisoned".into()))?;
        let best = prompts
            .iter()
            .map(|p| common_prefix(&p.tokens, prompt).min(prompt.len() - 1))
            .zip(prompts.iter())
            .filter(|(len, _)| *len > 0)
            .filter_map(|(len, kept)| kept.cache.prefix(len).ok().map(|cache| (len, cache)))
            .max_by_key(|(len, _)| *len);
        Ok(match best {
            Some((len, cache)) => (cache, len),
            None => (KvCache::default(), 0),
        })
    }

    pub(crate) fn remember(&self, prompt: &[u32], cache: &KvCache) {
        if self.keep_prompts == 0 {
            return;
        }
        let Ok(mut prompts) = self.prompts.lock() else {
            return;
        };
        prompts.retain(|p| p.tokens != prompt);
        if prompts.len() >= self.keep_prompts {
            prompts.remove(0);
        }
        prompts.push(CachedPrompt {
            tokens: prompt.to_vec(),
            cache: cache.clone(),
        });
    }

    /// The log-probability of `text` continuing the sequence `cache` holds
    /// (`next`: the next token's log-probabilities); `None` for no tokens.
    pub(crate) fn continuation_logprob(
        &self,
        cache: &KvCache,
        next: &[f32],
        text: &str,
    ) -> std::result::Result<Option<f64>, DecoderError> {
        let tokens = self.vocabulary.encode_continuation(text);
        let Some((&first, rest)) = tokens.split_first() else {
            return Ok(None);
        };
        let mut score = f64::from(next[first as usize]);
        if !rest.is_empty() {
            let mut branch = cache.clone();
            let rows = self
                .model
                .forward(&tokens[..tokens.len() - 1], &mut branch, rest.len())?;
            score += rest
                .iter()
                .zip(rows)
                .map(|(&t, row)| f64::from(row[t as usize]))
                .sum::<f64>();
        }
        Ok(Some(score))
    }

    pub(crate) fn choose(
        &self,
        request: &ModelRequest,
        cache: KvCache,
        next: &[f32],
        usage: &mut TokenUsage,
    ) -> std::result::Result<(String, Vec<TokenLogprob>), DecoderError> {
        let mut scores = Vec::with_capacity(request.choices.len());
        for choice in &request.choices {
            let score = self.continuation_logprob(&cache, next, choice)?;
            scores.push(score.ok_or_else(|| DecoderError::Prompt("an empty choice".into()))?);
        }
        let norm = log_sum_exp(&scores);
        let mut ranked: Vec<(String, f64)> = request
            .choices
            .iter()
            .cloned()
            .zip(scores.iter().map(|s| s - norm))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (text, logprob) = ranked[0].clone();
        usage.output += self.vocabulary.encode_continuation(&text).len() as u64;
        Ok((
            text.clone(),
            vec![TokenLogprob {
                token: text,
                logprob,
                top: ranked,
            }],
        ))
    }
}

fn chatml(system: &str, prompt: &str) -> String {
    let mut text = String::new();
    if !system.is_empty() {
        text += &format!("<|im_start|>system\n{system}<|im_end|>\n");
    }
    text + &format!("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
}

fn device(config: &LocalConfig) -> Result<Device> {
    if config.cuda {
        Device::new_cuda(0).map_err(|e| {
            JudgeError::Config(format!("{}: CUDA device 0: {e}", config.path.display()))
        })
    } else {
        Ok(Device::Cpu)
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

pub(crate) fn argmax(logprobs: &[f32]) -> u32 {
    logprobs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |(i, _)| i as u32)
}

/// The `k` likeliest tokens, strongest first.
pub fn top_k(logprobs: &[f32], k: usize) -> Vec<(u32, f64)> {
    let mut ids: Vec<u32> = (0..logprobs.len() as u32).collect();
    ids.sort_by(|&a, &b| {
        logprobs[b as usize]
            .total_cmp(&logprobs[a as usize])
            .then(a.cmp(&b))
    });
    ids.into_iter()
        .take(k)
        .map(|id| (id, f64::from(logprobs[id as usize])))
        .collect()
}

pub(crate) fn sample(logprobs: &[f32], temperature: f32, rng: &mut SplitMix64) -> u32 {
    let scaled: Vec<f64> = logprobs
        .iter()
        .map(|&l| f64::from(l / temperature))
        .collect();
    let norm = log_sum_exp(&scaled);
    let mut u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    for (i, s) in scaled.iter().enumerate() {
        u -= (s - norm).exp();
        if u <= 0.0 {
            return i as u32;
        }
    }
    argmax(logprobs)
}

fn log_sum_exp(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}
