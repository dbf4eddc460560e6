//! Answering a batch on the local backend. Prompts run from the longest
//! prefix the prompt cache holds; consecutive prompts that share a prefix
//! run together after it; a query with choices is then scored and done. Free-text answers decode together: at
//! every step each unfinished answer picks its token and all of them run
//! through the model as one batch ([`JudgeDecoder::forward_batch`](super::model::JudgeDecoder::forward_batch)), so the
//! weight products are paid once per step, not once per answer.

use super::model::{DecoderError, KvCache};
use super::shared_prefix::{PromptGroup, group_by_prefix};
use super::{LocalBackend, argmax, sample, schema, top_k};
use crate::http::Exchange;
use std::time::Instant;
use verifine_base::SplitMix64;
use verifine_runtime::judge_models::{
    ModelAnswer, ModelError, ModelRequest, TokenLogprob, TokenUsage,
};

/// One free-text answer being decoded.
struct Decoding<'a> {
    request: &'a ModelRequest,
    cache: KvCache,
    /// The next token's log-probabilities.
    next: Vec<f32>,
    answer: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    usage: TokenUsage,
    rng: SplitMix64,
    seconds: f64,
    /// The final text, once finished.
    text: Option<String>,
    /// Why the model could not go on (the answer then fails).
    error: Option<DecoderError>,
}

/// Where a request stands after its prompt was encoded.
enum Started<'a> {
    Done(Result<ModelAnswer, ModelError>, f64),
    Decoding(Box<Decoding<'a>>),
}

pub(super) fn answer_all(backend: &LocalBackend, requests: &[&ModelRequest]) -> Vec<Exchange> {
    let mut states: Vec<Started> = start_all(backend, requests);
    loop {
        let mut active: Vec<&mut Decoding> = states
            .iter_mut()
            .filter_map(|s| match s {
                Started::Decoding(d) if d.text.is_none() => Some(d.as_mut()),
                _ => None,
            })
            .collect();
        let step_started = Instant::now();
        let mut feeding: Vec<(&mut Decoding, u32)> = Vec::new();
        for d in active.drain(..) {
            if let Some(token) = d.advance(backend) {
                feeding.push((d, token));
            }
        }
        if feeding.is_empty() {
            break;
        }
        let tokens: Vec<u32> = feeding.iter().map(|(_, t)| *t).collect();
        let mut caches: Vec<&mut KvCache> = feeding.iter_mut().map(|(d, _)| &mut d.cache).collect();
        let ran = backend.model.forward_batch(&tokens, &mut caches);
        let share = step_started.elapsed().as_secs_f64() / tokens.len() as f64;
        match ran {
            Ok(rows) => {
                for ((d, _), row) in feeding.iter_mut().zip(rows) {
                    d.next = row;
                    d.seconds += share;
                }
            }
            Err(error) => {
                for (d, _) in feeding.iter_mut() {
                    d.error = Some(error.clone());
                    d.text = Some(String::new());
                }
            }
        }
    }
    states
        .into_iter()
        .map(|s| match s {
            Started::Done(answer, seconds) => Exchange {
                answer,
                calls: 1,
                seconds,
            },
            Started::Decoding(d) => d.finish(backend),
        })
        .collect()
}

/// Encodes every prompt and runs it through the model, prompts that share
/// a prefix together ([`shared_prefix`](super::shared_prefix)); a query
/// with choices or a schema is then answered at once.
fn start_all<'a>(backend: &LocalBackend, requests: &[&'a ModelRequest]) -> Vec<Started<'a>> {
    let prompts: Vec<Result<Vec<u32>, ModelError>> = requests
        .iter()
        .map(|request| {
            let prompt = backend.vocabulary.encode(&backend.render(request));
            match prompt.is_empty() {
                true => Err(ModelError::BadQuery(
                    "the prompt encodes to no tokens".into(),
                )),
                false => Ok(prompt),
            }
        })
        .collect();
    let encoded: Vec<Option<&[u32]>> = prompts.iter().map(|p| p.as_deref().ok()).collect();
    let reusable: Vec<usize> = encoded
        .iter()
        .map(|p| p.map_or(0, |p| backend.reusable(p)))
        .collect();
    let mut states: Vec<Option<Started>> = prompts
        .iter()
        .map(|p| p.as_ref().err().map(|e| Started::Done(Err(e.clone()), 0.0)))
        .collect();
    // Without a prompt cache no prefix is reused, in a batch either.
    let groups = match backend.keep_prompts {
        0 => (0..encoded.len())
            .filter(|&i| encoded[i].is_some())
            .map(PromptGroup::alone)
            .collect(),
        _ => group_by_prefix(&encoded, &reusable),
    };
    for group in groups {
        let started = Instant::now();
        let members: Vec<&[u32]> = group.members.iter().filter_map(|&m| encoded[m]).collect();
        if members.is_empty() {
            continue;
        }
        let prefilled: Vec<Result<Prefilled, DecoderError>> = match members.as_slice() {
            [prompt] => vec![prefill_one(backend, prompt)],
            _ => match backend.prefill_group(&members, group.shared) {
                Ok(all) => all.into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error); members.len()],
            },
        };
        let share = started.elapsed().as_secs_f64() / members.len() as f64;
        for ((&m, prompt), prefilled) in group.members.iter().zip(&members).zip(prefilled) {
            states[m] = Some(begin(backend, requests[m], prompt, prefilled, share));
        }
    }
    states
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Started::Done(Err(ModelError::Unanswered), 0.0)))
        .collect()
}

/// A prompt's cache, its next token's log-probabilities, and how many of
/// its tokens were not computed for it.
type Prefilled = (KvCache, Vec<f32>, usize);

/// One prompt from the longest prefix the prompt cache holds.
fn prefill_one(backend: &LocalBackend, prompt: &[u32]) -> Result<Prefilled, DecoderError> {
    let (mut cache, reused) = backend.start_from_cache(prompt)?;
    let next = backend
        .model
        .forward(&prompt[reused..], &mut cache, 1)?
        .remove(0);
    Ok((cache, next, reused))
}

/// Where a prompt's request goes once its prompt has run (`seconds`: its
/// share of the prefill): answered at once for choices and schemas, into
/// decoding otherwise.
fn begin<'a>(
    backend: &LocalBackend,
    request: &'a ModelRequest,
    prompt: &[u32],
    prefilled: Result<Prefilled, DecoderError>,
    seconds: f64,
) -> Started<'a> {
    let started = Instant::now();
    let elapsed = || seconds + started.elapsed().as_secs_f64();
    let (cache, next, reused) = match prefilled {
        Ok(p) => p,
        Err(e) => return Started::Done(Err(e.into()), elapsed()),
    };
    backend.remember(prompt, &cache);
    let mut usage = TokenUsage {
        input: prompt.len() as u64,
        cached_input: reused as u64,
        output: 0,
    };
    if let Some(schema) = &request.json_schema {
        let answer = schema::Schema::parse(schema).and_then(|schema| {
            let mut cursor = schema::Cursor::new(backend, cache, next);
            cursor.value(&schema, "")?;
            usage.output += cursor.tokens as u64;
            Ok(backend.answer(cursor.text, Vec::new(), usage, elapsed()))
        });
        let answer = answer.map_err(ModelError::from);
        return Started::Done(answer, elapsed());
    }
    if !request.choices.is_empty() {
        let answer = backend
            .choose(request, cache, &next, &mut usage)
            .map(|(text, logprobs)| backend.answer(text, logprobs, usage, elapsed()))
            .map_err(ModelError::from);
        return Started::Done(answer, elapsed());
    }
    let seed = prompt.iter().fold(0x9e37_79b9, |h, &t| {
        (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3)
    });
    Started::Decoding(Box::new(Decoding {
        request,
        cache,
        next,
        answer: Vec::new(),
        logprobs: Vec::new(),
        usage,
        rng: SplitMix64::new(seed),
        seconds: elapsed(),
        text: None,
        error: None,
    }))
}

impl Decoding<'_> {
    /// Picks the next token from `next`: the token to run, or `None` when
    /// the answer is finished (EOS, a stop string, the token limit, the
    /// context's end).
    fn advance(&mut self, backend: &LocalBackend) -> Option<u32> {
        let request = self.request;
        if self.answer.len() >= request.max_tokens as usize {
            self.text = Some(backend.vocabulary.decode(&self.answer));
            return None;
        }
        let temperature = request.temperature.unwrap_or(0.0);
        let token = if temperature > 0.0 {
            sample(&self.next, temperature, &mut self.rng)
        } else {
            argmax(&self.next)
        };
        if backend.vocabulary.is_stop(token) {
            self.text = Some(backend.vocabulary.decode(&self.answer));
            return None;
        }
        self.answer.push(token);
        self.usage.output += 1;
        if request.top_logprobs > 0 {
            self.logprobs.push(TokenLogprob {
                token: backend.vocabulary.decode(&[token]),
                logprob: f64::from(self.next[token as usize]),
                top: top_k(&self.next, request.top_logprobs as usize)
                    .into_iter()
                    .map(|(id, lp)| (backend.vocabulary.decode(&[id]), lp))
                    .collect(),
            });
        }
        let text = backend.vocabulary.decode(&self.answer);
        if let Some(at) = request
            .stop
            .iter()
            .filter_map(|s| text.find(s.as_str()))
            .min()
        {
            self.text = Some(text[..at].to_string());
            return None;
        }
        let room = self.cache.len() + 1 < backend.model.context_length;
        if self.answer.len() >= request.max_tokens as usize || !room {
            self.text = Some(text);
            return None;
        }
        Some(token)
    }

    fn finish(self, backend: &LocalBackend) -> Exchange {
        let seconds = self.seconds;
        let answer = match self.error {
            Some(error) => Err(error.into()),
            None => Ok(ModelAnswer {
                text: self.text.unwrap_or_default(),
                logprobs: self.logprobs,
                usage: self.usage,
                model: backend.name.clone(),
                seconds,
                cached: false,
            }),
        };
        Exchange {
            answer,
            calls: 1,
            seconds,
        }
    }
}
