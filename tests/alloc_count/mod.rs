//! The counting global allocator of the no-allocation tests (`mod alloc_count;`). It counts
//! per thread: libtest's own threads (and other tests running in parallel) allocate at times
//! of their choosing, which made a process-wide count fail at random under load.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // try_with: a thread being torn down has no counter left (a const Cell has no
        // destructor, so this never fails in practice).
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made so far by the calling thread (reallocations included: the default
/// `realloc` allocates).
pub fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}
