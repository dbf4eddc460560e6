//! Training's hooks made of plugins, for every host that trains with them
//! (`verifine train`, the co-evolution loop): one home for the adapters
//! between training's reward and curriculum traits and the plugin runtime.
//!
//! - [`FixedReward`]: plugins that never change during a run (evolve's
//!   rounds: the judge stays fixed inside a round).
//! - [`SwappingReward`]: the live revisions of hot-swap, decided at step
//!   boundaries (`verifine train`).
//! - [`PluginCurriculum`]: the SFT curriculum plugin.

#![warn(missing_docs)]

pub mod convert;
pub mod curriculum;
pub mod fixed;
pub mod live;

pub use convert::{SampleShape, answer_sample, reward_of};
pub use curriculum::{CurriculumError, PluginCurriculum, curriculum};
pub use fixed::FixedReward;
pub use live::{SwappingReward, judge_costs};
