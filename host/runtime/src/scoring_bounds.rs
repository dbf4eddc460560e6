//! The bounds of the scoring work a thread is doing for someone: when it
//! must be done (a server request's deadline) and whether anyone still waits
//! for it (the client may have gone). A plugin's judge-model calls run on
//! the thread that called the plugin, so the host functions read the bounds
//! set around that call: a judge query is not sent for a caller that is
//! gone, and ends by the caller's deadline (see [`crate::JudgeModels`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// When the work must end and whether it is still wanted.
#[derive(Debug, Clone, Default)]
pub struct ScoringBounds {
    /// Judge queries end by then.
    pub deadline: Option<Instant>,
    /// Set when the caller has gone: nothing more is asked for it.
    pub abandoned: Option<Arc<AtomicBool>>,
}

impl ScoringBounds {
    /// Whether the caller has gone or its deadline has passed.
    pub fn is_over(&self) -> bool {
        self.abandoned
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Acquire))
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

thread_local! {
    static CURRENT: RefCell<ScoringBounds> = RefCell::new(ScoringBounds::default());
}

/// Runs `work` on this thread under `bounds` (restoring the previous ones
/// afterwards, even if `work` panics).
pub fn within<T>(bounds: ScoringBounds, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<ScoringBounds>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(previous) = self.0.take() {
                CURRENT.with(|current| *current.borrow_mut() = previous);
            }
        }
    }
    let previous = CURRENT.with(|current| current.replace(bounds));
    let _restore = Restore(Some(previous));
    work()
}

/// The bounds this thread works under now (none set: no deadline, wanted).
pub fn current() -> ScoringBounds {
    CURRENT.with(|current| current.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold_inside_and_are_restored_after() {
        let flag = Arc::new(AtomicBool::new(false));
        let bounds = ScoringBounds {
            deadline: None,
            abandoned: Some(flag.clone()),
        };
        assert!(!current().is_over());
        within(bounds, || {
            assert!(!current().is_over());
            flag.store(true, Ordering::Release);
            assert!(current().is_over());
        });
        assert!(!current().is_over());
        let past = ScoringBounds {
            deadline: Some(Instant::now()),
            abandoned: None,
        };
        assert!(within(past, || current().is_over()));
    }
}
