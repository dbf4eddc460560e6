//! The call arena over the system allocator, outside a component.

use super::*;
use std::alloc::System;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// The arena with safe calls for the tests: every block a test frees or
/// grows came from the same arena with the layout the test passes back.
struct Heap(CallArena<System>);

impl Heap {
    fn new() -> Self {
        Heap(CallArena::new(System))
    }

    /// `size` bytes (aligned to `align`) filled with `byte`.
    fn filled(&self, size: usize, align: usize, byte: u8) -> *mut u8 {
        // SAFETY: a non-zero size and a valid alignment.
        let block = unsafe { self.0.alloc(layout(size, align)) };
        assert!(!block.is_null());
        assert_eq!(block as usize % align, 0, "aligned");
        // SAFETY: the block holds `size` bytes.
        unsafe { block.write_bytes(byte, size) };
        block
    }

    fn free(&self, block: *mut u8, size: usize, align: usize) {
        // SAFETY: the tests pass back a live block of theirs and its layout.
        unsafe { self.0.dealloc(block, layout(size, align)) }
    }

    fn grow(&self, block: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
        // SAFETY: as in `free`; the new size is not zero.
        unsafe { self.0.realloc(block, layout(size, align), new_size) }
    }

    fn in_chunk(&self, block: *mut u8) -> bool {
        CallArena::<System>::in_chunk(self.0.state(), block)
    }
}

fn holds(block: *mut u8, size: usize, byte: u8) -> bool {
    // SAFETY: the tests ask only about bytes of live blocks they filled.
    (0..size).all(|i| unsafe { *block.add(i) } == byte)
}

#[test]
fn a_call_reuses_the_chunk_once_everything_came_back() {
    let heap = Heap::new();
    heap.0.begin();
    let a = heap.filled(100, 8, 1);
    let b = heap.filled(33, 64, 2);
    assert!(heap.in_chunk(a) && heap.in_chunk(b));
    assert!(holds(a, 100, 1) && holds(b, 33, 2), "disjoint");
    heap.free(a, 100, 8);
    heap.free(b, 33, 64);
    heap.0.end();
    heap.0.begin();
    let again = heap.filled(100, 8, 3);
    assert_eq!(again, a, "the next call starts the chunk afresh");
    heap.free(again, 100, 8);
    heap.0.end();
    assert!(!heap.0.is_off());
}

#[test]
fn a_block_that_outlives_its_call_is_never_handed_out_again() {
    let heap = Heap::new();
    heap.0.begin();
    let kept = heap.filled(64, 8, 7);
    heap.0.end();
    assert!(
        heap.0.is_off(),
        "a block is still alive: the arena turns off"
    );
    heap.0.begin();
    let next = heap.filled(64, 8, 9);
    assert!(!heap.in_chunk(next), "from the system now");
    assert!(holds(kept, 64, 7));
    // The kept block can still grow (it moves out) and be freed.
    let grown = heap.grow(kept, 64, 8, 4096);
    assert!(holds(grown, 64, 7));
    heap.free(grown, 4096, 8);
    heap.free(next, 64, 8);
    heap.0.end();
}

#[test]
fn blocks_grow_in_place_when_newest_and_keep_their_contents_when_moved() {
    let heap = Heap::new();
    heap.0.begin();
    let a = heap.filled(16, 1, 1);
    let same = heap.grow(a, 16, 1, 1000);
    assert_eq!(same, a, "the newest block grows where it is");
    let b = heap.filled(8, 1, 2);
    let moved = heap.grow(same, 1000, 1, 2000);
    assert_ne!(moved, a, "an older block moves");
    assert!(holds(moved, 16, 1) && holds(b, 8, 2));
    heap.free(moved, 2000, 1);
    heap.free(b, 8, 1);
    heap.0.end();
    // A system block stays a system block.
    let outside = heap.filled(10, 1, 5);
    heap.0.begin();
    let grown = heap.grow(outside, 10, 1, 50);
    assert!(!heap.in_chunk(grown));
    assert!(holds(grown, 10, 5));
    heap.free(grown, 50, 1);
    heap.0.end();
    assert!(!heap.0.is_off());
}

#[test]
fn a_call_larger_than_the_chunk_spills_and_the_next_chunk_is_larger() {
    let heap = Heap::new();
    heap.0.begin();
    let first = heap.0.state().capacity;
    let blocks: Vec<*mut u8> = (0..40u8).map(|i| heap.filled(16 << 10, 16, i)).collect();
    for (i, &block) in (0..40u8).zip(&blocks) {
        assert!(holds(block, 16 << 10, i));
    }
    assert!(blocks.iter().any(|&b| !heap.in_chunk(b)));
    for block in blocks {
        heap.free(block, 16 << 10, 16);
    }
    heap.0.end();
    heap.0.begin();
    assert_eq!(heap.0.state().capacity, 2 * first);
    heap.0.end();
    assert!(!heap.0.is_off());
}

#[test]
fn outside_a_call_everything_is_the_systems() {
    let heap = Heap::new();
    let block = heap.filled(32, 8, 4);
    assert!(!heap.in_chunk(block));
    heap.free(block, 32, 8);
    heap.0.end();
    assert!(!heap.0.is_off());
}
