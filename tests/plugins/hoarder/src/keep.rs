//! What both hoarders do with a response: keep it (across calls) when it
//! starts with "keep:", after churning through temporaries of many sizes.
use std::cell::RefCell;

thread_local! {
    static KEPT: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Whether `response` was kept, the bytes churned, and all that is kept.
pub fn keep(response: &str) -> (bool, usize, String) {
    let churn: Vec<String> = (0..8).map(|i| response.repeat(i)).collect();
    let churned = churn.iter().map(String::len).sum();
    let keep = response.starts_with("keep:");
    KEPT.with_borrow_mut(|kept| {
        if keep {
            kept.push(response.to_string());
        }
        (keep, churned, kept.join("|"))
    })
}
