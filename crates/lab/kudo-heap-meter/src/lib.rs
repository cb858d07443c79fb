//! A counting global allocator for the bounded fuzz and property tests, so "no unbounded memory"
//! is an assertion, not a hope: each test thread measures the peak of its own live heap while it
//! runs one input (per-thread counters, because the test harness runs tests on several threads
//! at once).
//!
//! Why a crate of its own: a global allocator can only be written with `unsafe impl GlobalAlloc`,
//! and every other crate of the workspace forbids unsafe code. The tests install [`Meter`] and
//! call [`peak_during`]; none of them writes `unsafe`. The allocator crates of the field
//! (`stats_alloc`, `dhat`) count for the whole process, not per thread.
//!
//! ```
//! #[global_allocator]
//! static METER: kudo_heap_meter::Meter = kudo_heap_meter::Meter;
//!
//! fn main() {
//!     let (v, peak) = kudo_heap_meter::peak_during(|| vec![0u8; 4096]);
//!     assert_eq!(v.len(), 4096);
//!     assert!(peak >= 4096, "the vector's buffer was live inside the closure");
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards every call to the system allocator and counts, per thread, the bytes live and
/// their peak. Install it with `#[global_allocator] static METER: Meter = Meter;`.
pub struct Meter;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(n: isize) {
    // `try_with`: during thread teardown the counters may be gone; allocation must still work.
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v);
            }
        });
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are only
// bookkeeping in const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the peak number of heap bytes this thread held at once
/// beyond what it held when `f` started.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    let saved_peak = PEAK.with(|p| p.replace(base));
    let r = f();
    let peak = PEAK.with(|p| p.replace(saved_peak.max(p.get())));
    (r, (peak - base).max(0) as usize)
}
