//! The judge-model host functions of both contract versions: 0.1's
//! `judge-model` (text in, text out, always the judge named `judge`) and
//! 0.2's `ask-judges` (a named judge, sampling controls, choices, and
//! answers with log-probabilities, usage and timing). Both reach the same
//! [`crate::JudgeModels`], so a 0.1 component and a 0.2 one asking the
//! same question get the same answer and the same cost accounting.

use crate::bindings::{JudgeAnswer, JudgeQuery, ModelQuery, TokenLogprob, TokenUsage, v0_1};
use crate::host_state::HostState;
use crate::judge_models::{DEFAULT_JUDGE, ModelAnswer, ModelRequest};

impl From<JudgeQuery> for ModelRequest {
    fn from(q: JudgeQuery) -> Self {
        ModelRequest {
            judge: q.judge.unwrap_or_else(|| DEFAULT_JUDGE.to_string()),
            system: q.system,
            prompt: q.prompt,
            max_tokens: q.max_tokens,
            temperature: q.temperature,
            stop: q.stop,
            json_schema: q.json_schema,
            top_logprobs: q.top_logprobs,
            choices: q.choices,
        }
    }
}

impl From<ModelAnswer> for JudgeAnswer {
    fn from(a: ModelAnswer) -> Self {
        JudgeAnswer {
            text: a.text,
            logprobs: a
                .logprobs
                .into_iter()
                .map(|t| TokenLogprob {
                    token: t.token,
                    logprob: t.logprob,
                    top: t.top,
                })
                .collect(),
            usage: TokenUsage {
                input: a.usage.input,
                cached_input: a.usage.cached_input,
                output: a.usage.output,
            },
            model: a.model,
            seconds: a.seconds,
            cached: a.cached,
        }
    }
}

impl HostState {
    /// Asks the judges; the wait is the host's time, kept off the
    /// plugin's call deadline. Within the thread's [`crate::scoring_bounds`]:
    /// nothing is sent for a caller that is gone or out of time, and the
    /// queries end by its deadline.
    fn ask(&mut self, requests: &[ModelRequest]) -> Vec<Result<ModelAnswer, String>> {
        let bounds = crate::scoring_bounds::current();
        if bounds.is_over() {
            let why =
                "not asked: the request it was for has ended (abandoned or past its deadline)";
            return requests.iter().map(|_| Err(why.to_string())).collect();
        }
        let started = std::time::Instant::now();
        let answers = match bounds.deadline {
            Some(deadline) => self
                .judges
                .ask_before(&self.plugin_name, requests, deadline),
            None => self.judges.ask(&self.plugin_name, requests),
        };
        self.host_wait += started.elapsed();
        answers
    }

    /// 0.1 and 0.2's `judge-model`: the default judge, text only.
    pub(crate) fn answer_model_queries(
        &mut self,
        queries: Vec<ModelQuery>,
    ) -> Vec<Result<String, String>> {
        let requests: Vec<ModelRequest> = queries
            .into_iter()
            .map(|q| ModelRequest {
                system: q.system,
                ..ModelRequest::new(q.prompt, q.max_tokens)
            })
            .collect();
        self.ask(&requests)
            .into_iter()
            .map(|answer| answer.map(|a| a.text))
            .collect()
    }

    /// 0.2's `ask-judges`.
    pub(crate) fn answer_judge_queries(
        &mut self,
        queries: Vec<JudgeQuery>,
    ) -> Vec<Result<JudgeAnswer, String>> {
        let requests: Vec<ModelRequest> = queries.into_iter().map(ModelRequest::from).collect();
        self.ask(&requests)
            .into_iter()
            .map(|answer| answer.map(JudgeAnswer::from))
            .collect()
    }
}

/// Contract 0.1's host interface, for components built against it.
impl v0_1::rubric::verifine::plugin::host::Host for HostState {
    fn log(&mut self, level: v0_1::rubric::verifine::plugin::host::LogLevel, message: String) {
        use crate::bindings::LogLevel as Current;
        use v0_1::rubric::verifine::plugin::host::LogLevel as Old;
        let level = match level {
            Old::Trace => Current::Trace,
            Old::Debug => Current::Debug,
            Old::Info => Current::Info,
            Old::Warn => Current::Warn,
            Old::Error => Current::Error,
        };
        crate::bindings::rubric::verifine::plugin::host::Host::log(self, level, message);
    }

    fn judge_model(
        &mut self,
        queries: Vec<v0_1::rubric::verifine::plugin::host::ModelQuery>,
    ) -> Vec<Result<String, String>> {
        let queries = queries
            .into_iter()
            .map(|q| ModelQuery {
                system: q.system,
                prompt: q.prompt,
                max_tokens: q.max_tokens,
            })
            .collect();
        self.answer_model_queries(queries)
    }
}
