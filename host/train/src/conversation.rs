//! Multi-turn rollouts: the policy answers and, with self-verification
//! (SVR-R1), is asked to check its answer YES/NO with the same weights; on NO,
//! below the turn cap, a rethink trigger is appended and it answers again with
//! the whole history in context. Only answer turns are loss targets: the
//! prompt, the verification turns and the trigger text are masked out. With
//! one turn allowed this is a plain single-answer rollout.
//!
//! Also builds the SFT conversations that teach verification.

use super::config::SelfVerification;
use super::model::Decoder;
use super::problem::Problem;
use super::rollout::{Completion, GenerateOptions, Sampling, generate};
use super::sequences::Sequence;
use super::task::with_slip;
use super::tokenizer::ChatTokenizer;
use crate::error::{Result, ensure};
use candle_core::Device;
use verifine_base::SplitMix64;

/// What the policy said when asked to verify its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyReply {
    /// It accepts the answer.
    Yes,
    /// It rejects the answer (a rethink follows when turns are left).
    No,
    /// Neither: treated as acceptance, counted in metrics.
    Unclear,
}

impl VerifyReply {
    /// Reads a verification reply: it must start with YES or NO.
    pub fn parse(reply: &str) -> VerifyReply {
        let reply = reply.trim_start().to_ascii_uppercase();
        if reply.starts_with("YES") {
            VerifyReply::Yes
        } else if reply.starts_with("NO") {
            VerifyReply::No
        } else {
            VerifyReply::Unclear
        }
    }
}

/// One finished rollout.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// The whole conversation; only answer turns are trainable.
    pub sequence: Sequence,
    /// The last answer: the one that is rewarded.
    pub final_answer: Completion,
    /// Answer turns taken (1 without self-verification).
    pub turns: usize,
    /// The verification replies, in order.
    pub replies: Vec<VerifyReply>,
}

/// How rollouts are sampled.
#[derive(Debug, Clone, Copy)]
pub struct RolloutOptions<'a> {
    /// Longest answer turn.
    pub max_new_tokens: usize,
    /// Longest conversation (the model's context).
    pub max_seq_len: usize,
    /// Greedy (evaluation) or temperature (training).
    pub sampling: Sampling,
    /// Self-verification settings; `None` or disabled = one answer.
    pub verification: Option<&'a SelfVerification>,
}

impl RolloutOptions<'_> {
    fn max_turns(&self) -> usize {
        match self.verification {
            Some(v) if v.enabled => v.max_turns,
            _ => 1,
        }
    }
}

/// Rolls out every prompt (already in chat form), all rows batched per turn.
pub fn rollouts(
    model: &Decoder,
    tokenizer: &ChatTokenizer,
    prompts: &[Vec<u32>],
    options: RolloutOptions<'_>,
    rng: &mut SplitMix64,
    device: &Device,
) -> Result<Vec<Rollout>> {
    let mut rows: Vec<Rollout> = prompts
        .iter()
        .map(|p| Rollout {
            sequence: Sequence::prompt_response(p, &[]),
            final_answer: Completion {
                ids: Vec::new(),
                truncated: true,
            },
            turns: 0,
            replies: Vec::new(),
        })
        .collect();
    let mut active: Vec<usize> = (0..rows.len()).collect();
    let max_turns = options.max_turns();
    for turn in 1..=max_turns {
        let answers = continue_rows(
            model,
            tokenizer,
            &rows,
            &active,
            options.max_new_tokens,
            options.max_seq_len,
            options.sampling,
            rng,
            device,
        )?;
        for (&row, answer) in active.iter().zip(answers) {
            let r = &mut rows[row];
            append(&mut r.sequence, &answer.ids, true);
            r.turns = turn;
            r.final_answer = answer;
        }
        let Some(verification) = options.verification.filter(|v| v.enabled) else {
            break;
        };
        if turn == max_turns {
            break;
        }
        let verify_ids = tokenizer.follow_up_ids(&verification.verify_prompt)?;
        let rethink_ids = tokenizer.follow_up_ids(&verification.rethink_prompt)?;
        // A row verifies only when a whole rethink would still fit; an
        // answer that was truncated or ended the document rather than the
        // turn ends its rollout.
        active.retain(|&row| {
            let r = &rows[row];
            let needed = r.sequence.ids.len()
                + verify_ids.len()
                + verification.max_verify_tokens
                + rethink_ids.len()
                + options.max_new_tokens.min(8);
            r.final_answer.ids.last() == Some(&tokenizer.end) && needed <= options.max_seq_len
        });
        if active.is_empty() {
            break;
        }
        for &row in &active {
            append(&mut rows[row].sequence, &verify_ids, false);
        }
        let replies = continue_rows(
            model,
            tokenizer,
            &rows,
            &active,
            verification.max_verify_tokens,
            options.max_seq_len,
            options.sampling,
            rng,
            device,
        )?;
        let mut rethinking = Vec::new();
        for (&row, reply) in active.iter().zip(replies) {
            let verdict = VerifyReply::parse(&tokenizer.decode(&reply.ids)?);
            let r = &mut rows[row];
            append(&mut r.sequence, &reply.ids, false);
            r.replies.push(verdict);
            if verdict == VerifyReply::No && reply.ids.last() == Some(&tokenizer.end) {
                append(&mut r.sequence, &rethink_ids, false);
                rethinking.push(row);
            }
        }
        active = rethinking;
        if active.is_empty() {
            break;
        }
    }
    Ok(rows)
}

/// Generates the next turn of the `active` rows, each at most `max_new`
/// tokens and never past `max_seq_len`.
#[allow(
    clippy::too_many_arguments,
    reason = "the rollout's model, tokenizer, rows and sampling settings, all distinct"
)]
fn continue_rows(
    model: &Decoder,
    tokenizer: &ChatTokenizer,
    rows: &[Rollout],
    active: &[usize],
    max_new: usize,
    max_seq_len: usize,
    sampling: Sampling,
    rng: &mut SplitMix64,
    device: &Device,
) -> Result<Vec<Completion>> {
    let histories: Vec<Vec<u32>> = active
        .iter()
        .map(|&row| rows[row].sequence.ids.clone())
        .collect();
    let longest = histories.iter().map(Vec::len).max().unwrap_or(0);
    let room = max_seq_len.saturating_sub(longest);
    ensure!(
        room > 0,
        "a conversation of {longest} tokens leaves no room under max_seq_len {max_seq_len}"
    );
    let options = GenerateOptions {
        pad: tokenizer.pad,
        stops: &tokenizer.stops,
        max_new_tokens: max_new.min(room),
        sampling,
    };
    generate(model, &histories, options, rng, device)
}

fn append(sequence: &mut Sequence, ids: &[u32], trainable: bool) {
    sequence.ids.extend_from_slice(ids);
    sequence
        .trainable
        .extend(std::iter::repeat_n(trainable, ids.len()));
}

/// An SFT conversation for `problem` whose answer turns carry `target`
/// (the worked solution, or a slipped one from noisy data). With
/// self-verification on, a `verification.sft_share` of them also teach
/// checking: a correct answer verified YES, or a slipped answer (not trained)
/// verified NO and solved again.
pub fn sft_sequence(
    problem: &Problem,
    target: &str,
    tokenizer: &ChatTokenizer,
    verification: &SelfVerification,
    rng: &mut SplitMix64,
) -> Result<Sequence> {
    let mut sequence = Sequence::prompt_response(&tokenizer.prompt_ids(&problem.prompt)?, &[]);
    let teach_verification = verification.enabled && unit(rng) < verification.sft_share;
    if !teach_verification {
        append(&mut sequence, &tokenizer.response_ids(target)?, true);
        return Ok(sequence);
    }
    let verify = tokenizer.follow_up_ids(&verification.verify_prompt)?;
    if rng.below(2) == 0 {
        append(&mut sequence, &tokenizer.response_ids(target)?, true);
        append(&mut sequence, &verify, false);
        append(&mut sequence, &tokenizer.response_ids("YES")?, true);
    } else {
        let slipped = with_slip(problem, rng);
        append(&mut sequence, &tokenizer.response_ids(&slipped)?, false);
        append(&mut sequence, &verify, false);
        append(&mut sequence, &tokenizer.response_ids("NO")?, true);
        append(
            &mut sequence,
            &tokenizer.follow_up_ids(&verification.rethink_prompt)?,
            false,
        );
        append(&mut sequence, &tokenizer.response_ids(target)?, true);
    }
    Ok(sequence)
}

/// A uniform draw in [0, 1).
pub fn unit(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelConfig, sorted_vars};
    use crate::task::{TaskConfig, generate as problems};
    use candle_nn::VarMap;

    fn tokenizer() -> ChatTokenizer {
        let ps = problems(1, 200, &TaskConfig::default());
        let mut corpus: Vec<String> = ps
            .iter()
            .flat_map(|p| [p.prompt.clone(), p.solution.clone()])
            .collect();
        let svr = SelfVerification::default();
        corpus.extend([svr.verify_prompt, svr.rethink_prompt, "YES NO".into()]);
        ChatTokenizer::train(&corpus, 300).unwrap()
    }

    #[test]
    fn verdicts_are_read_from_the_start_of_the_reply() {
        assert_eq!(VerifyReply::parse(" yes, it is"), VerifyReply::Yes);
        assert_eq!(VerifyReply::parse("NO"), VerifyReply::No);
        assert_eq!(VerifyReply::parse("maybe NO"), VerifyReply::Unclear);
        assert_eq!(VerifyReply::parse(""), VerifyReply::Unclear);
    }

    #[test]
    fn verification_and_trigger_turns_are_masked_out_of_the_loss() {
        let tok = tokenizer();
        let svr = SelfVerification {
            enabled: true,
            sft_share: 1.0,
            ..SelfVerification::default()
        };
        let p = &problems(2, 1, &TaskConfig::default())[0];
        let verify = tok.prompt_ids(&svr.verify_prompt).unwrap();
        let rethink = tok.prompt_ids(&svr.rethink_prompt).unwrap();
        let mut rng = SplitMix64::new(0);
        let (mut saw_yes, mut saw_no) = (false, false);
        for _ in 0..20 {
            let s = sft_sequence(p, &p.solution, &tok, &svr, &mut rng).unwrap();
            let trained: Vec<u32> = s
                .ids
                .iter()
                .zip(&s.trainable)
                .filter(|(_, t)| **t)
                .map(|(id, _)| *id)
                .collect();
            let text = tok.decode(&trained).unwrap();
            // The user turns are never trained: none of their ids is a target.
            let user_positions = s
                .ids
                .windows(verify.len())
                .position(|w| w == verify.as_slice())
                .unwrap();
            assert!(
                !s.trainable[user_positions..user_positions + verify.len()]
                    .iter()
                    .any(|t| *t)
            );
            if text.contains("NO") {
                saw_no = true;
                assert!(
                    s.ids
                        .windows(rethink.len())
                        .any(|w| w == rethink.as_slice())
                );
                // The slipped answer is not trained; the redo is, exactly once.
                assert_eq!(
                    text.matches(&format!("#### {}", p.answer)).count(),
                    1,
                    "{text}"
                );
                assert_eq!(text.matches("####").count(), 1, "{text}");
            } else {
                saw_yes = true;
                assert!(text.ends_with("YES") || text.contains("YES"), "{text}");
            }
        }
        assert!(saw_yes && saw_no);
    }

    #[test]
    fn rollouts_respect_the_turn_cap_and_train_only_answer_turns() {
        let tok = tokenizer();
        let varmap = VarMap::new();
        let mut config = ModelConfig::tiny(tok.vocab_size());
        config.max_seq_len = 200;
        let model = Decoder::new(config, &varmap, &Device::Cpu).unwrap();
        assert!(!sorted_vars(&varmap).is_empty());
        let svr = SelfVerification {
            enabled: true,
            max_turns: 3,
            max_verify_tokens: 3,
            ..SelfVerification::default()
        };
        let p = &problems(3, 4, &TaskConfig::default());
        let prompts: Vec<Vec<u32>> = p
            .iter()
            .map(|p| tok.prompt_ids(&p.prompt).unwrap())
            .collect();
        let options = RolloutOptions {
            max_new_tokens: 6,
            max_seq_len: 200,
            sampling: Sampling::Temperature(1.0),
            verification: Some(&svr),
        };
        let mut rng = SplitMix64::new(1);
        let out = rollouts(&model, &tok, &prompts, options, &mut rng, &Device::Cpu).unwrap();
        for (r, prompt) in out.iter().zip(&prompts) {
            assert!((1..=3).contains(&r.turns));
            assert!(r.replies.len() <= r.turns);
            assert!(r.sequence.ids.starts_with(prompt));
            let trained = r.sequence.trainable.iter().filter(|t| **t).count();
            assert!(trained >= r.final_answer.ids.len());
            assert!(r.sequence.ids.ends_with(&r.final_answer.ids));
            assert!(r.sequence.ids.len() <= 200);
        }
        // One turn allowed: a plain rollout, prompt then answer.
        let plain = RolloutOptions {
            verification: None,
            ..options
        };
        let out = rollouts(&model, &tok, &prompts, plain, &mut rng, &Device::Cpu).unwrap();
        for (r, prompt) in out.iter().zip(&prompts) {
            assert_eq!(r.turns, 1);
            assert_eq!(
                r.sequence,
                Sequence::prompt_response(prompt, &r.final_answer.ids)
            );
        }
    }
}
