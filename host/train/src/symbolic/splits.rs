//! GSM-Symbolic as a run's task (`[task.symbolic]`): training problems are
//! variants of some templates, held-out problems variants of the others,
//! so a held-out problem is never a template the policy trained on.

use super::{SymbolicError, Template, load_dir_skipping, variants};
use crate::problem::Problem;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::PathBuf;
use verifine_base::SplitMix64;

/// Mixed into the run's seed for which templates are held out.
const TEMPLATE_SHUFFLE_STREAM: u64 = 0x5_7E3F_1A7E;
/// Mixed into the run's seed for the held-out variants' draws.
const HELDOUT_VARIANT_STREAM: u64 = 0x5_7E3F_4E1D;

/// `[task.symbolic]`: where the templates are and how many are held out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SymbolicConfig {
    /// A directory of templates (`models/fetch.sh gsm-symbolic` writes
    /// `models/gsm-symbolic/eng`).
    pub dir: PathBuf,
    /// Templates whose variants are only ever held out (chosen by a seeded
    /// shuffle); the rest give the training problems.
    pub heldout_templates: usize,
}

/// `train` training and `heldout` held-out variants, each set drawn round
/// robin over its templates. A template that cannot be used is skipped
/// with a warning naming it and why; too few usable templates for the
/// split is an error.
pub fn splits(
    config: &SymbolicConfig,
    seed: u64,
    train: usize,
    heldout: usize,
) -> Result<(Vec<Problem>, Vec<Problem>), SymbolicError> {
    let loaded = load_dir_skipping(&config.dir)?;
    for (file, reason) in &loaded.refused {
        tracing::warn!(template = %file, %reason, "GSM-Symbolic template skipped");
    }
    let mut templates = loaded.templates;
    if templates.len() <= config.heldout_templates || config.heldout_templates == 0 {
        return Err(SymbolicError::Split(format!(
            "{} has {} usable templates ({} refused); holding out {} leaves {} to train on \
             (both sides need at least one)",
            config.dir.display(),
            templates.len(),
            loaded.refused.len(),
            config.heldout_templates,
            templates.len().saturating_sub(config.heldout_templates)
        )));
    }
    let mut shuffle = SplitMix64::new(seed ^ TEMPLATE_SHUFFLE_STREAM);
    for i in (1..templates.len()).rev() {
        templates.swap(i, shuffle.below(i + 1));
    }
    let held = templates.split_off(templates.len() - config.heldout_templates);
    let train_set = round_robin(&templates, train, &mut SplitMix64::new(seed))?;
    let heldout_set = round_robin(
        &held,
        heldout,
        &mut SplitMix64::new(seed ^ HELDOUT_VARIANT_STREAM),
    )?;
    Ok((train_set, heldout_set))
}

/// `n` distinct variants, one template after another; a template that
/// yields only repeats is not asked forever.
fn round_robin(
    templates: &[Template],
    n: usize,
    rng: &mut SplitMix64,
) -> Result<Vec<Problem>, SymbolicError> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut draws = 0;
    while out.len() < n && draws < n * 20 {
        let template = &templates[draws % templates.len()];
        draws += 1;
        let problem = variants(template, rng, 1)?.remove(0);
        if seen.insert(problem.prompt.clone()) {
            out.push(problem);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolic::tests::template;

    /// Five templates, one of them unusable (its condition never holds).
    fn directory() -> verifine_test_support::ScratchDir {
        let dir = verifine_test_support::scratch_dir("symbolic-splits");
        for t in 0..4 {
            let text = template(
                &format!("Shelf {t} holds {{a,2}} and {{b,3}} books. How many?"),
                "- $a = range(1, 40)\n- $b = range(1, 40)",
                "",
                "a + b",
                "5",
            );
            std::fs::write(dir.join(format!("000{t}.toml")), text).unwrap();
        }
        let never = template("{a,1} x", "- $a = range(1, 5)", "- a > 9", "a", "1");
        std::fs::write(dir.join("0009.toml"), never).unwrap();
        dir
    }

    fn shelf(problem: &Problem) -> &str {
        &problem.prompt[..7]
    }

    #[test]
    fn held_out_variants_come_from_templates_never_trained_on() {
        let dir = directory();
        let config = SymbolicConfig {
            dir: dir.to_path_buf(),
            heldout_templates: 1,
        };
        let (train, heldout) = splits(&config, 3, 60, 20).unwrap();
        assert_eq!((train.len(), heldout.len()), (60, 20));
        let trained: HashSet<&str> = train.iter().map(shelf).collect();
        let held: HashSet<&str> = heldout.iter().map(shelf).collect();
        assert_eq!((trained.len(), held.len()), (3, 1));
        assert!(trained.is_disjoint(&held));
        for p in train.iter().chain(&heldout) {
            assert_eq!(p.solution, format!("#### {}", p.answer));
        }
        // The seed chooses which template is held out, and draws the same again.
        assert_eq!(splits(&config, 3, 60, 20).unwrap(), (train, heldout));
        let others: HashSet<String> = (0..8)
            .map(|seed| shelf(&splits(&config, seed, 4, 1).unwrap().1[0]).to_string())
            .collect();
        assert!(others.len() > 1, "{others:?}");
    }

    #[test]
    fn a_split_with_no_template_on_one_side_is_refused() {
        let dir = directory();
        for heldout_templates in [0, 4, 9] {
            let config = SymbolicConfig {
                dir: dir.to_path_buf(),
                heldout_templates,
            };
            let error = splits(&config, 0, 10, 10).unwrap_err().to_string();
            assert!(error.contains("4 usable templates (1 refused)"), "{error}");
        }
    }
}
