//! A per-call arena for the owned path's allocations.
//!
//! A [`Rubric`](crate::Rubric) on the owned path allocates every verdict's
//! id, every explanation and every judgment's lists, and frees them all
//! once the answer is encoded. In a component those go through dlmalloc,
//! whose bookkeeping is most of the owned path's cost beyond the fast
//! path's. During a `judge-packed` call the component's allocator hands out
//! memory by bumping a pointer through one chunk, frees nothing, and starts
//! the chunk afresh when the call ends.
//!
//! Memory that outlives the call (a lazily built table in a `static`, a
//! cache) must never be handed out again, so the arena counts what it gave
//! and what came back: if anything is still alive when the call ends, the
//! chunk is left as it is for good and the arena turns itself off — the
//! plugin then runs on the system allocator, as it would without the arena.
//! A block keeps its home when it grows: a system block stays a system
//! block; an arena block grows in place when it is the newest, else moves.
//!
//! Only components use it (feature `call-arena`, on by default): they run
//! one thread. Plugins with their own global allocator turn the feature off.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

/// The first chunk; it doubles (up to [`LARGEST_CHUNK`]) after a call that
/// did not fit.
const FIRST_CHUNK: usize = 256 << 10;
const LARGEST_CHUNK: usize = 16 << 20;

/// An allocator that serves the calls it is told about from a chunk and
/// everything else from `backing`.
pub struct CallArena<B> {
    backing: B,
    state: UnsafeCell<State>,
}

struct State {
    chunk: *mut u8,
    capacity: usize,
    /// Bytes of the chunk handed out in this call.
    used: usize,
    /// Where the newest block starts (it may grow in place).
    newest: usize,
    /// Blocks handed out and not yet returned.
    live: usize,
    /// Inside a call.
    active: bool,
    /// A call's blocks outlived it: the chunk is theirs, the arena is off.
    off: bool,
    /// This call asked for more than the chunk held.
    overflowed: bool,
}

// SAFETY: a component has one thread; nothing else shares the allocator.
#[cfg(target_arch = "wasm32")]
unsafe impl<B: Sync> Sync for CallArena<B> {}

impl<B: GlobalAlloc> CallArena<B> {
    /// An arena over `backing`, inactive until [`CallArena::begin`].
    pub const fn new(backing: B) -> Self {
        CallArena {
            backing,
            state: UnsafeCell::new(State {
                chunk: ptr::null_mut(),
                capacity: FIRST_CHUNK,
                used: 0,
                newest: 0,
                live: 0,
                active: false,
                off: false,
                overflowed: false,
            }),
        }
    }

    #[allow(
        clippy::mut_from_ref,
        reason = "one thread, and no reference outlives a call below"
    )]
    fn state(&self) -> &mut State {
        // SAFETY: one thread (see `Sync`), and every method takes the
        // state once and lets it go before returning.
        unsafe { &mut *self.state.get() }
    }

    /// Allocations from now on come from the chunk (unless the arena is off).
    pub fn begin(&self) {
        let s = self.state();
        if s.off {
            return;
        }
        if s.chunk.is_null() {
            let layout = Layout::from_size_align(s.capacity, 16).expect("a valid chunk layout");
            // SAFETY: the layout's size is not zero.
            s.chunk = unsafe { self.backing.alloc(layout) };
            if s.chunk.is_null() {
                return;
            }
        }
        s.active = true;
        s.overflowed = false;
    }

    /// The call is over: the chunk is reused from its start, grown if the
    /// call overflowed it, or left to blocks that outlived the call.
    pub fn end(&self) {
        let s = self.state();
        if !s.active {
            return;
        }
        s.active = false;
        if s.live > 0 {
            s.off = true;
            return;
        }
        s.used = 0;
        s.newest = 0;
        if s.overflowed && s.capacity < LARGEST_CHUNK {
            let layout = Layout::from_size_align(s.capacity, 16).expect("a valid chunk layout");
            // SAFETY: the chunk came from `backing` with this layout, and
            // no block in it is alive.
            unsafe { self.backing.dealloc(s.chunk, layout) };
            s.chunk = ptr::null_mut();
            s.capacity *= 2;
        }
    }

    /// Whether the arena is off for good (a call's blocks outlived it).
    pub fn is_off(&self) -> bool {
        self.state().off
    }

    fn in_chunk(s: &State, block: *mut u8) -> bool {
        !s.chunk.is_null() && block >= s.chunk && (block as usize) < s.chunk as usize + s.capacity
    }

    /// A block from the chunk, or `None` when it does not fit.
    fn bump(s: &mut State, layout: Layout) -> Option<*mut u8> {
        let base = s.chunk as usize;
        let start = (base + s.used).checked_next_multiple_of(layout.align())? - base;
        let end = start.checked_add(layout.size())?;
        if end > s.capacity {
            s.overflowed = true;
            return None;
        }
        s.used = end;
        s.newest = start;
        s.live += 1;
        // SAFETY: `start` is inside the chunk.
        Some(unsafe { s.chunk.add(start) })
    }
}

// SAFETY: blocks from the chunk are aligned and disjoint, and none is handed
// out again while alive: a chunk is reused only when every block it gave
// was returned; everything else is `backing`'s.
unsafe impl<B: GlobalAlloc> GlobalAlloc for CallArena<B> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let s = self.state();
        if s.active
            && let Some(block) = Self::bump(s, layout)
        {
            return block;
        }
        // SAFETY: the caller's layout, passed on.
        unsafe { self.backing.alloc(layout) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let s = self.state();
        if Self::in_chunk(s, block) {
            s.live -= 1;
            if s.active && block as usize - s.chunk as usize == s.newest {
                s.used = s.newest;
            }
            return;
        }
        // SAFETY: a block of `backing`'s, as the caller guarantees.
        unsafe { self.backing.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let s = self.state();
        if !Self::in_chunk(s, block) {
            // SAFETY: a block of `backing`'s; it stays there.
            return unsafe { self.backing.realloc(block, layout, new_size) };
        }
        let offset = block as usize - s.chunk as usize;
        if s.active && offset == s.newest && offset + new_size <= s.capacity {
            s.used = offset + new_size;
            return block;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        // SAFETY: a valid, non-zero layout (the caller's size is not zero).
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks hold at least the smaller size; distinct.
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

/// Runs `f` with the component's allocations served by its call arena.
/// Whatever `f` returns must have been allocated before it (or be freed by
/// then): a block that outlives the call turns the arena off.
pub(crate) fn during_call<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(all(target_arch = "wasm32", feature = "call-arena"))]
    {
        ALLOCATOR.begin();
        let value = f();
        ALLOCATOR.end();
        value
    }
    #[cfg(not(all(target_arch = "wasm32", feature = "call-arena")))]
    f()
}

#[cfg(all(target_arch = "wasm32", feature = "call-arena"))]
#[global_allocator]
static ALLOCATOR: CallArena<std::alloc::System> = CallArena::new(std::alloc::System);

#[cfg(test)]
#[path = "call_arena_tests.rs"]
mod tests;
