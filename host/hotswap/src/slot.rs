//! The slots of a run: which role a live plugin fills.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;
use verifine_runtime::PluginKind;

/// A swappable role in a run. Training swaps its reward's two; the
/// co-evolution loop will add the curriculum and the trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Slot {
    /// The rubric that judges each sample.
    Rubric,
    /// The aggregator that turns a judgment into the reward.
    Aggregator,
}

impl Slot {
    /// Every slot, in the order requests are listed.
    pub const ALL: [Slot; 2] = [Slot::Rubric, Slot::Aggregator];

    /// The name in the inbox, events and commands.
    pub fn as_str(self) -> &'static str {
        match self {
            Slot::Rubric => "rubric",
            Slot::Aggregator => "aggregator",
        }
    }

    /// The kind of plugin that fills it.
    pub fn kind(self) -> PluginKind {
        match self {
            Slot::Rubric => PluginKind::Rubric,
            Slot::Aggregator => PluginKind::Aggregator,
        }
    }

    /// The slot whose live plugin completes the reward with this one's.
    pub fn partner(self) -> Slot {
        match self {
            Slot::Rubric => Slot::Aggregator,
            Slot::Aggregator => Slot::Rubric,
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A slot name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown slot {0:?}; a run's swappable slots are rubric, aggregator")]
pub struct UnknownSlot(pub String);

impl FromStr for Slot {
    type Err = UnknownSlot;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Slot::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| UnknownSlot(text.to_string()))
    }
}
