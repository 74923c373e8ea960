//! A memory budget for work on untrusted input that bounds time but not memory: an organisation's
//! Rego policies from a pull request (regorus stops an evaluation after its time limit, not after
//! a number of bytes). The binary's allocator ([`Budgeted`], installed in `main.rs`) counts what
//! the current thread allocates while a budget is active ([`with_budget`]); past the budget gpuctl
//! stops at once with exit 1 and says which budget and what to do, instead of growing until the
//! machine or the CI runner kills it. Outside a budget, and in test binaries that do not install
//! the allocator, nothing is counted.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

/// An allocator that counts the current thread's allocations against [`with_budget`]'s limit.
pub struct Budgeted<A>(pub A);

thread_local! {
    /// The budget's limit in bytes; 0: no budget.
    static LIMIT: Cell<usize> = const { Cell::new(0) };
    /// Bytes allocated and not freed since the budget started.
    static USED: Cell<usize> = const { Cell::new(0) };
    /// What the budget is for, for the message.
    static WHAT: Cell<&'static str> = const { Cell::new("") };
}

fn charge(bytes: usize) {
    let Ok(limit) = LIMIT.try_with(Cell::get) else {
        return;
    };
    if limit == 0 {
        return;
    }
    let used = USED.with(Cell::get).saturating_add(bytes);
    USED.with(|u| u.set(used));
    if used > limit {
        exceeded(limit);
    }
}

fn refund(bytes: usize) {
    if LIMIT.try_with(Cell::get).unwrap_or(0) == 0 {
        return;
    }
    USED.with(|u| u.set(u.get().saturating_sub(bytes)));
}

#[cold]
fn exceeded(limit: usize) -> ! {
    // The message may allocate: no budget from here on.
    LIMIT.with(|l| l.set(0));
    let what = WHAT.with(Cell::get);
    eprintln!(
        "error: {what} needed more than its memory budget of {} MiB and was stopped; the run fails (a gate never passes on what it could not finish). Look for a comprehension or a data file that grows without bound",
        limit >> 20
    );
    std::process::exit(1);
}

// SAFETY: every call is passed on unchanged to the wrapped allocator; the counting touches only
// const-initialised thread-locals without destructors, which never allocate.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Budgeted<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        refund(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            charge(new_size - layout.size());
        } else {
            refund(layout.size() - new_size);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` with a budget of `limit` bytes on this thread for `what` (named in the message when
/// it is exceeded). Budgets do not nest: an inner one replaces the outer until it ends.
pub fn with_budget<T>(what: &'static str, limit: usize, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LIMIT.with(|l| l.set(0));
        }
    }
    WHAT.with(|w| w.set(what));
    USED.with(|u| u.set(0));
    LIMIT.with(|l| l.set(limit.max(1)));
    let _reset = Reset;
    f()
}
