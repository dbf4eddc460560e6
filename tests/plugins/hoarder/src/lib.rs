//! Keeps, across calls, every response that starts with "keep:" (in a
//! thread-local that lives as long as the instance), and churns through
//! temporary allocations on every sample. Memory that outlives the call it
//! was allocated in must never be handed out again by the owned path's
//! call arena: every judgment spells out all that is kept, so a block
//! reused under it would show as changed text.
use std::cell::RefCell;
use verifine_plugin_api::*;

thread_local! {
    static KEPT: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

pub struct Hoarder;

impl Rubric for Hoarder {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-hoarder", "0.1.0").criterion(Criterion::new("kept", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        // Temporaries of many sizes, freed before the call ends.
        let churn: Vec<String> = (0..8).map(|i| sample.response.repeat(i)).collect();
        let churned: usize = churn.iter().map(String::len).sum();
        let keep = sample.response.starts_with("keep:");
        KEPT.with_borrow_mut(|kept| {
            if keep {
                kept.push(sample.response.clone());
            }
            Ok(Judgment::from_verdicts(vec![Verdict::met("kept", keep)])
                .with_sub_score("churned", churned as f64)
                .because(kept.join("|")))
        })
    }
}

export_plugin!(rubric: Hoarder);
