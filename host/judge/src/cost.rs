//! What a judge has spent: calls, tokens, USD by its price table and
//! seconds, with the budget that stops it. Answers served from the disk
//! cache cost nothing and are counted apart.

use crate::config::{Budget, Price};
use serde::{Deserialize, Serialize};
use verifine_runtime::judge_models::TokenUsage;

/// One judge's spending so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Requests sent (retries of one query count once each).
    pub calls: u64,
    /// Queries answered from the disk cache.
    pub cache_hits: u64,
    /// Queries that failed (after retries, or refused by the budget).
    pub failures: u64,
    /// Tokens.
    pub usage: TokenUsage,
    /// USD by the price table.
    pub usd: f64,
    /// Seconds spent waiting for answers (summed over concurrent requests).
    pub seconds: f64,
    /// Seconds of this machine's CPU or GPU spent answering (local
    /// backends only; a hosted judge's device time is in its price).
    #[serde(default)]
    pub device_seconds: f64,
}

impl Price {
    /// USD of `usage`.
    pub fn usd(&self, usage: TokenUsage) -> f64 {
        let fresh = usage.input.saturating_sub(usage.cached_input);
        (fresh as f64 * self.input
            + usage.cached_input as f64 * self.cached_input
            + usage.output as f64 * self.output)
            / 1e6
    }
}

impl Ledger {
    /// Why the budget allows no further request, if it does not.
    pub fn exhausted(&self, budget: &Budget) -> Option<String> {
        let tokens = self.usage.input + self.usage.output;
        if let Some(max) = budget.max_calls.filter(|&m| self.calls >= m) {
            return Some(format!(
                "budget exhausted: {} calls of max_calls {max}",
                self.calls
            ));
        }
        if let Some(max) = budget.max_tokens.filter(|&m| tokens >= m) {
            return Some(format!(
                "budget exhausted: {tokens} tokens of max_tokens {max}"
            ));
        }
        if let Some(max) = budget.max_usd.filter(|&m| self.usd >= m) {
            return Some(format!(
                "budget exhausted: {:.4} USD of max_usd {max}",
                self.usd
            ));
        }
        None
    }

    /// Counts one answered request.
    pub fn record(&mut self, usage: TokenUsage, seconds: f64, price: &Price) {
        self.usage += usage;
        self.usd += price.usd(usage);
        self.seconds += seconds;
    }

    /// What was spent since `earlier` (a snapshot of the same ledger).
    pub fn since(&self, earlier: &Ledger) -> Ledger {
        Ledger {
            calls: self.calls.saturating_sub(earlier.calls),
            cache_hits: self.cache_hits.saturating_sub(earlier.cache_hits),
            failures: self.failures.saturating_sub(earlier.failures),
            usage: TokenUsage {
                input: self.usage.input.saturating_sub(earlier.usage.input),
                cached_input: self
                    .usage
                    .cached_input
                    .saturating_sub(earlier.usage.cached_input),
                output: self.usage.output.saturating_sub(earlier.usage.output),
            },
            usd: (self.usd - earlier.usd).max(0.0),
            seconds: (self.seconds - earlier.seconds).max(0.0),
            device_seconds: (self.device_seconds - earlier.device_seconds).max(0.0),
        }
    }

    /// The spending scaled to 1 000 tasks, given how many tasks it served.
    pub fn per_thousand(&self, tasks: usize) -> Ledger {
        let k = 1000.0 / tasks.max(1) as f64;
        let scale = |v: u64| (v as f64 * k).round() as u64;
        Ledger {
            calls: scale(self.calls),
            cache_hits: scale(self.cache_hits),
            failures: scale(self.failures),
            usage: TokenUsage {
                input: scale(self.usage.input),
                cached_input: scale(self.usage.cached_input),
                output: scale(self.usage.output),
            },
            usd: self.usd * k,
            seconds: self.seconds * k,
            device_seconds: self.device_seconds * k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_follows_the_price_table_with_cached_input_apart() {
        let price = Price {
            input: 2.0,
            cached_input: 0.5,
            output: 8.0,
        };
        let usage = TokenUsage {
            input: 1_000_000,
            cached_input: 400_000,
            output: 250_000,
        };
        // 600k fresh × 2 + 400k cached × 0.5 + 250k out × 8, per million.
        assert!((price.usd(usage) - (1.2 + 0.2 + 2.0)).abs() < 1e-12);
    }

    #[test]
    fn each_budget_stops_asking_with_its_reason() {
        let price = Price {
            input: 1.0,
            cached_input: 1.0,
            output: 1.0,
        };
        let mut ledger = Ledger::default();
        let calls = Budget {
            max_calls: Some(1),
            ..Budget::default()
        };
        assert_eq!(ledger.exhausted(&calls), None);
        ledger.calls = 1;
        assert!(ledger.exhausted(&calls).unwrap().contains("max_calls 1"));
        ledger.record(
            TokenUsage {
                input: 600,
                cached_input: 0,
                output: 400,
            },
            0.5,
            &price,
        );
        let tokens = Budget {
            max_tokens: Some(1000),
            ..Budget::default()
        };
        assert!(ledger.exhausted(&tokens).unwrap().contains("1000 tokens"));
        let usd = Budget {
            max_usd: Some(0.002),
            ..Budget::default()
        };
        assert_eq!(ledger.exhausted(&usd), None);
        let usd = Budget {
            max_usd: Some(0.001),
            ..Budget::default()
        };
        assert!(ledger.exhausted(&usd).unwrap().contains("max_usd"));
        let thousand = ledger.per_thousand(10);
        assert_eq!((thousand.calls, thousand.usage.input), (100, 60_000));
    }
}
