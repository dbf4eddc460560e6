//! What one plugin instance may hold, in total: the bytes of all its linear
//! memories and tables count against one budget (`memory_mib`), and the
//! numbers of instances, memories and tables are capped, so a component
//! with many memories or a table grown to millions of elements is stopped
//! like a single growing memory.

use wasmtime::ResourceLimiter;

/// Bytes one table element is counted as (a function reference and its
/// bookkeeping, rounded up).
const TABLE_ELEMENT_BYTES: usize = 16;

/// Core and component instances one plugin may create.
pub const MAX_INSTANCES: usize = 100;
/// Linear memories one plugin may create.
pub const MAX_MEMORIES: usize = 10;
/// Tables one plugin may create.
pub const MAX_TABLES: usize = 100;

/// Counts every memory and table growth of one store against `budget` bytes.
#[derive(Debug)]
pub struct SandboxLimiter {
    budget: usize,
    used: usize,
}

impl SandboxLimiter {
    /// A limiter allowing `budget` bytes in all.
    pub fn new(budget: usize) -> Self {
        SandboxLimiter { budget, used: 0 }
    }

    /// Bytes held so far.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.used
    }

    fn grow(&mut self, extra: usize, what: &str) -> wasmtime::Result<bool> {
        match self.used.checked_add(extra) {
            Some(total) if total <= self.budget => {
                self.used = total;
                Ok(true)
            }
            _ => Err(wasmtime::format_err!(
                "plugin memory limit of {} MiB reached ({what} growth of {extra} bytes with {} bytes in use)",
                self.budget >> 20,
                self.used
            )),
        }
    }
}

impl ResourceLimiter for SandboxLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow(desired.saturating_sub(current), "memory")
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let extra = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        self.grow(extra, "table")
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_memories_and_tables_share_one_budget() {
        let mut limiter = SandboxLimiter::new(10 << 20);
        // Several memories of 4 MiB each: the third goes over 10 MiB.
        assert!(limiter.memory_growing(0, 4 << 20, None).unwrap());
        assert!(limiter.memory_growing(0, 4 << 20, None).unwrap());
        let err = limiter.memory_growing(0, 4 << 20, None).unwrap_err();
        assert!(err.to_string().contains("memory limit of 10 MiB"), "{err}");
        // A table of a million elements counts too.
        let err = limiter.table_growing(0, 1_000_000, None).unwrap_err();
        assert!(err.to_string().contains("table growth"), "{err}");
        assert!(limiter.table_growing(10, 1000, None).unwrap());
        assert_eq!(limiter.used(), (8 << 20) + 990 * TABLE_ELEMENT_BYTES);
    }

    /// A store's data with nothing but the limiter (a plugin's store holds
    /// it beside the rest of its host state).
    struct Limited {
        limits: SandboxLimiter,
    }

    /// Instantiates a component written in the text format in a store with
    /// the sandbox's limiter, as a plugin instance is.
    fn instantiate(wat: &str, budget: usize) -> (wasmtime::Result<()>, usize) {
        use wasmtime::component::{Component, Linker};
        let engine = crate::engine::SandboxEngine::shared().unwrap();
        let bytes = wat::parse_str(wat).unwrap();
        let component = Component::new(engine.engine(), &bytes).unwrap();
        let mut store = wasmtime::Store::new(
            engine.engine(),
            Limited {
                limits: SandboxLimiter::new(budget),
            },
        );
        store.limiter(|state| &mut state.limits);
        store.set_epoch_deadline(1000);
        let linker = Linker::<Limited>::new(engine.engine());
        let result = linker.instantiate(&mut store, &component).map(|_| ());
        (result, store.data().limits.used())
    }

    /// A component whose start function runs `body` in a core module that
    /// declares `declarations`.
    fn component(declarations: &str, body: &str) -> String {
        format!(
            "(component (core module $m {declarations} (func $start {body}) (start $start)) \
             (core instance (instantiate $m)))"
        )
    }

    #[test]
    fn a_hostile_component_cannot_exceed_the_budget_with_many_memories_or_a_huge_table() {
        let budget = 64 << 20;
        // Two memories of 40 MiB each: the second growth is over the budget.
        let (result, used) = instantiate(
            &component(
                "(memory $a 0) (memory $b 0)",
                "(drop (memory.grow $a (i32.const 640))) (drop (memory.grow $b (i32.const 640)))",
            ),
            budget,
        );
        let err = format!("{:#}", result.unwrap_err());
        assert!(err.contains("memory limit of 64 MiB"), "{err}");
        assert!(used <= budget, "{used}");

        // A table grown to ten million elements.
        let (result, used) = instantiate(
            &component(
                "(table $t 0 funcref)",
                "(drop (table.grow $t (ref.null func) (i32.const 10000000)))",
            ),
            budget,
        );
        let err = format!("{:#}", result.unwrap_err());
        assert!(err.contains("table growth"), "{err}");
        assert!(used <= budget, "{used}");

        // More memories than allowed, each tiny.
        let memories = "(memory 0) ".repeat(MAX_MEMORIES + 1);
        let (result, _) = instantiate(&component(&memories, ""), budget);
        assert!(
            result.is_err(),
            "{} memories were allowed",
            MAX_MEMORIES + 1
        );

        // More instances than allowed.
        let instances = "(core instance (instantiate $m)) ".repeat(MAX_INSTANCES + 1);
        let (result, _) = instantiate(&format!("(component (core module $m) {instances})"), budget);
        assert!(
            result.is_err(),
            "{} instances were allowed",
            MAX_INSTANCES + 1
        );

        // Within the limits, the same shapes instantiate.
        let (result, used) = instantiate(
            &component(
                "(memory $a 0) (memory $b 0) (table $t 0 funcref)",
                "(drop (memory.grow $a (i32.const 300))) (drop (memory.grow $b (i32.const 300))) \
                 (drop (table.grow $t (ref.null func) (i32.const 1000)))",
            ),
            budget,
        );
        result.unwrap();
        assert_eq!(used, 600 * 65536 + 1000 * TABLE_ELEMENT_BYTES);
    }
}
