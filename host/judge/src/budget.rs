//! Calls taken from a judge's budget before they are sent. Checking the
//! budget and then sending after the lock is released lets concurrent
//! scoring threads all pass the same check (three threads, `max_calls =
//! 1`: three calls); so every attempt, retries included, takes its call
//! under the ledger's lock first, and a call once taken is never given
//! back for a failure (a sent request is paid for whatever came back).

use crate::config::Budget;
use crate::cost::Ledger;
use std::sync::{Arc, Mutex};

/// A judge's ledger and budget, shared with its request tasks so that each
/// attempt can take its call.
#[derive(Debug, Clone)]
pub struct CallAllowance {
    ledger: Arc<Mutex<Ledger>>,
    budget: Budget,
}

impl CallAllowance {
    /// An allowance that counts into `ledger` and stops at `budget`.
    pub fn new(ledger: Arc<Mutex<Ledger>>, budget: Budget) -> Self {
        CallAllowance { ledger, budget }
    }

    /// Takes one call for an attempt about to be sent, or says which limit
    /// is reached (tokens and USD are as spent so far).
    pub fn take(&self) -> Result<(), String> {
        take(&mut self.lock(), &self.budget)
    }

    /// The ledger, locked (for admitting a batch under one lock).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().expect("ledger lock")
    }

    /// The budget it enforces.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}

/// Takes one call from `ledger` unless `budget` is exhausted; for callers
/// already holding the lock.
pub fn take(ledger: &mut Ledger, budget: &Budget) -> Result<(), String> {
    match ledger.exhausted(budget) {
        Some(reason) => Err(reason),
        None => {
            ledger.calls += 1;
            Ok(())
        }
    }
}
