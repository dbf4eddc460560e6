//! The judge-model host functions of every contract version: 0.1's
//! `judge-model` (text in, text out, always the judge named `judge`) and
//! `ask-judges` since 0.2 (a named judge, sampling controls, choices, and
//! answers with log-probabilities, usage and timing). All reach the same
//! [`crate::JudgeModels`], so components of any version asking the same
//! question get the same answer and the same cost accounting.

use crate::bindings::{LogLevel, ModelQuery, v0_1, v0_2};
use crate::host_state::HostState;
use crate::judge_models::{DEFAULT_JUDGE, ModelAnswer, ModelError, ModelRequest};

/// The conversions between a contract version's `ask-judges` records and
/// the host's own: 0.2's and 0.3's `host` interfaces are the same text, but
/// each version's imports are their own generated types.
macro_rules! judge_records {
    ($host:path) => {
        const _: () = {
            use $host as records;

            impl From<records::JudgeQuery> for ModelRequest {
                fn from(q: records::JudgeQuery) -> Self {
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

            impl From<ModelAnswer> for records::JudgeAnswer {
                fn from(a: ModelAnswer) -> Self {
                    records::JudgeAnswer {
                        text: a.text,
                        logprobs: a
                            .logprobs
                            .into_iter()
                            .map(|t| records::TokenLogprob {
                                token: t.token,
                                logprob: t.logprob,
                                top: t.top,
                            })
                            .collect(),
                        usage: records::TokenUsage {
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
        };
    };
}

judge_records!(crate::bindings::rubric::verifine::plugin::host);
judge_records!(v0_2::rubric::verifine::plugin::host);

/// `log` and `judge-model` of an older version's `host` (in `impl Host`):
/// its records converted to the current ones, then the current functions.
macro_rules! older_log_and_judge_model {
    ($($host:ident)::+) => {
        fn log(&mut self, level: $($host)::+::LogLevel, message: String) {
            use $($host)::+::LogLevel as Old;
            let level = match level {
                Old::Trace => LogLevel::Trace,
                Old::Debug => LogLevel::Debug,
                Old::Info => LogLevel::Info,
                Old::Warn => LogLevel::Warn,
                Old::Error => LogLevel::Error,
            };
            crate::bindings::rubric::verifine::plugin::host::Host::log(self, level, message);
        }

        fn judge_model(
            &mut self,
            queries: Vec<$($host)::+::ModelQuery>,
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
    };
}

impl HostState {
    /// Asks the judges; the wait is the host's time, kept off the
    /// plugin's call deadline. Within the thread's [`crate::scoring_bounds`]:
    /// nothing is sent for a caller that is gone or out of time, and the
    /// queries end by its deadline.
    fn ask(&mut self, requests: &[ModelRequest]) -> Vec<Result<ModelAnswer, ModelError>> {
        let bounds = crate::scoring_bounds::current();
        if bounds.is_over() {
            return requests
                .iter()
                .map(|_| Err(ModelError::RequestEnded))
                .collect();
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
            .map(|answer| answer.map(|a| a.text).map_err(|e| e.to_string()))
            .collect()
    }

    /// `ask-judges`, for the records of any version that has it.
    pub(crate) fn answer_judge_queries<Query, Answer>(
        &mut self,
        queries: Vec<Query>,
    ) -> Vec<Result<Answer, String>>
    where
        ModelRequest: From<Query>,
        Answer: From<ModelAnswer>,
    {
        let requests: Vec<ModelRequest> = queries.into_iter().map(ModelRequest::from).collect();
        self.ask(&requests)
            .into_iter()
            .map(|answer| answer.map(Answer::from).map_err(|e| e.to_string()))
            .collect()
    }
}

/// Contract 0.1's host interface, for components built against it.
impl v0_1::rubric::verifine::plugin::host::Host for HostState {
    older_log_and_judge_model!(v0_1::rubric::verifine::plugin::host);
}

/// Contract 0.2's host interface: 0.3's, under 0.2's name.
impl v0_2::rubric::verifine::plugin::host::Host for HostState {
    older_log_and_judge_model!(v0_2::rubric::verifine::plugin::host);

    fn ask_judges(
        &mut self,
        queries: Vec<v0_2::rubric::verifine::plugin::host::JudgeQuery>,
    ) -> Vec<Result<v0_2::rubric::verifine::plugin::host::JudgeAnswer, String>> {
        self.answer_judge_queries(queries)
    }
}
