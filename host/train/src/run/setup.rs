//! Building a run: a fresh one (trained tokenizer, a finished run's
//! weights, or a pretrained base) or one restored from its checkpoint, and
//! what both share ([`Run::assemble`]).

use super::*;

/// Mixed into the run's seed for its sampling generator (SFT draws, prompt
/// draws, rollouts), so it draws a stream apart from the task generator's,
/// which takes the seed as it is.
const SAMPLING_STREAM: u64 = 0xA11CE;

impl Run {
    pub(super) fn start(config: TrainConfig, run_dir: &Path, host: Host) -> Result<Self> {
        let tokenizer_path = run_dir.join("tokenizer.json");
        if let Some(base) = pretrained::Base::load(&config, &crate::model::device()?)? {
            let tokenizer = ChatTokenizer::pretrained(&base.model)?;
            // A record of what the policy read; a resume reads the base again.
            tokenizer.save(&tokenizer_path)?;
            let log = MetricsLog::create(&run_dir.join("metrics.jsonl"))?;
            return Run::assemble(config, run_dir, tokenizer, log, host, Some(base));
        }
        let Some(base) = config.init_from.clone() else {
            let tokenizer = Run::train_tokenizer(&config)?;
            tokenizer.save(&tokenizer_path)?;
            let log = MetricsLog::create(&run_dir.join("metrics.jsonl"))?;
            let run = Run::assemble(config, run_dir, tokenizer, log, host, None)?;
            run.model.reseed(&run.varmap, run.config.seed)?;
            return Ok(run);
        };
        // A finished run's tokenizer and weights.
        let weights = base.join("model.safetensors");
        for file in [&base.join("tokenizer.json"), &weights] {
            ensure!(
                file.is_file(),
                "init_from {}: not a finished run (no {})",
                base.display(),
                file.display()
            );
        }
        let bytes = std::fs::read(base.join("tokenizer.json"))
            .map_err(|e| TrainError::io("reading", &base.join("tokenizer.json"), e))?;
        write_atomically(&tokenizer_path, |w| w.write_all(&bytes))?;
        let tokenizer = ChatTokenizer::load(&tokenizer_path)?;
        let log = MetricsLog::create(&run_dir.join("metrics.jsonl"))?;
        let run = Run::assemble(config, run_dir, tokenizer, log, host, None)?;
        load_matching_weights(&run.varmap, &weights, &run.device)?;
        Ok(run)
    }

    /// A tokenizer trained on the training problems (and the
    /// self-verification turns when they are on).
    fn train_tokenizer(config: &TrainConfig) -> Result<ChatTokenizer> {
        let (mut train_set, _) = problems(config.seed, config.train_problems, 0, &config.task)?;
        if let Some(task) = &config.sft.task {
            train_set.extend(sft_problems(config.seed, config.train_problems, task, &[])?);
        }
        let mut corpus: Vec<&str> = train_set
            .iter()
            .flat_map(|p| [p.prompt.as_str(), p.solution.as_str()])
            .collect();
        let svr = &config.self_verification;
        if svr.enabled {
            corpus.extend([
                svr.verify_prompt.as_str(),
                svr.rethink_prompt.as_str(),
                "YES",
                "NO",
            ]);
        }
        ChatTokenizer::train(&corpus, config.vocab_size)
    }

    pub(super) fn restore(run_dir: &Path, checkpoint_dir: &Path, host: Host) -> Result<Self> {
        let saved: RunState = checkpoint::read_state(checkpoint_dir)?;
        let state = &saved.state;
        let base = pretrained::Base::load(&saved.config, &crate::model::device()?)?;
        let fingerprint = base.as_ref().map(|b| b.fingerprint.clone());
        ensure!(
            fingerprint == saved.base_model,
            "the pretrained model changed since the checkpoint: its fingerprint was {}, now {}; \
             an exact resume needs the same base",
            saved.base_model.as_deref().unwrap_or("none"),
            fingerprint.as_deref().unwrap_or("none")
        );
        let tokenizer = match &base {
            Some(base) => ChatTokenizer::pretrained(&base.model)?,
            None => ChatTokenizer::load(&run_dir.join("tokenizer.json"))?,
        };
        let log = MetricsLog::resume(&run_dir.join("metrics.jsonl"), saved.metrics_lines)?;
        let mut run = Run::assemble(saved.config.clone(), run_dir, tokenizer, log, host, base)?;
        if let (Some(now), Some(then)) = (&run.pool.curriculum, &saved.curriculum) {
            ensure!(
                now.sha256 == then.sha256,
                "the SFT curriculum changed since the checkpoint: it was {} {} (sha256 {}), \
                 now {} {} (sha256 {}); an exact resume needs the same revision",
                then.name,
                then.version,
                then.sha256,
                now.name,
                now.version,
                now.sha256
            );
        }
        ensure!(
            run.state.prompt_pool == state.prompt_pool,
            "the GRPO prompt pool changed since the checkpoint: its fingerprint was {}, now {}; \
             an exact resume needs the same pool",
            state.prompt_pool.as_deref().unwrap_or("none (no pool)"),
            run.state.prompt_pool.as_deref().unwrap_or("none (no pool)")
        );
        ensure!(
            run.state.sft_targets == state.sft_targets,
            "the host's SFT targets changed since the checkpoint: their fingerprint was {}, now {}; \
             an exact resume needs the same targets",
            state.sft_targets.as_deref().unwrap_or("none"),
            run.state.sft_targets.as_deref().unwrap_or("none")
        );
        run.host
            .reward
            .restore(&saved.live, state.step)
            .map_err(|error| TrainError::Hook {
                context: "restoring the step hook's state".to_string(),
                error,
            })?;
        run.refresh_plugins();
        let (moments, _): (_, serde_json::Value) =
            checkpoint::load(checkpoint_dir, &mut run.varmap, &run.device)?;
        if state.accuracy_sft.is_some() {
            run.enter_grpo()?;
        }
        run.optimizer.restore(&moments, saved.optimizer_steps)?;
        run.rng = SplitMix64::new(saved.rng);
        run.wall_before = saved.wall_seconds;
        run.resumed_from = Some(state.step);
        run.state = saved.state.clone();
        tracing::info!(step = state.step, checkpoint = %checkpoint_dir.display(), "resuming");
        Ok(run)
    }

    /// Everything both a fresh and a resumed run need.
    fn assemble(
        config: TrainConfig,
        run_dir: &Path,
        tokenizer: ChatTokenizer,
        log: MetricsLog,
        mut host: Host,
        base: Option<pretrained::Base>,
    ) -> Result<Self> {
        let prompt_pool = match &host.prompts {
            Some(pool) => {
                pool.validate()?;
                Some(pool.fingerprint())
            }
            None => None,
        };
        let device = crate::model::device()?;
        let (train_set, heldout) = problems(
            config.seed,
            config.train_problems,
            config.heldout_problems,
            &config.task,
        )?;
        let varmap = VarMap::new();
        let model = match &base {
            Some(base) => base.decoder(&config, &varmap)?,
            None => Decoder::new(
                config.model.model_config(tokenizer.vocab_size()),
                &varmap,
                &device,
            )?,
        };
        let (pool, sft_problems, sft_targets) = match host.sft_targets.take() {
            Some(targets) => {
                ensure!(
                    host.curriculum.is_none(),
                    "the host gave both SFT targets and an SFT curriculum; the targets carry their own decisions"
                );
                targets.validate()?;
                let fingerprint = targets.fingerprint();
                let pool = SftPool::from_targets(targets.items)?;
                (pool, targets.problems, Some(fingerprint))
            }
            None => {
                let sft_set = match &config.sft.task {
                    Some(task) => sft_problems(config.seed, config.train_problems, task, &heldout)?,
                    None => train_set.clone(),
                };
                let pool = SftPool::build(
                    &sft_set,
                    config.sft.noisy_target_share,
                    host.curriculum
                        .as_mut()
                        .map(|c| c.as_mut() as &mut dyn SftCurriculum),
                    host.reward.as_mut(),
                    &config.reward,
                    config.seed,
                )?;
                (pool, sft_set, None)
            }
        };
        write_jsonl(&run_dir.join("sft_selection.jsonl"), &pool.items)?;
        let optimizer = AdamW::new(sorted_vars(&varmap), config.sft.optim.clone())?;
        let rng = SplitMix64::new(config.effective_sampling_seed() ^ SAMPLING_STREAM);
        let mut run = Run {
            run_dir: run_dir.to_path_buf(),
            device,
            varmap,
            model,
            base,
            reference: None,
            tokenizer,
            train_set,
            sft_problems,
            heldout,
            pool,
            host,
            plugins: Vec::new(),
            rng,
            optimizer,
            log,
            state: TrainingState {
                prompt_pool,
                sft_targets,
                ..TrainingState::default()
            },
            wall_before: 0.0,
            started: Instant::now(),
            resumed_from: None,
            final_eval: None,
            sft_end_eval: None,
            config,
        };
        run.refresh_plugins();
        Ok(run)
    }
}
