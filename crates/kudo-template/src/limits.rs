//! Documented resource limits for rendering. A template cannot hang the controller or exhaust its
//! memory: each limit, when hit, fails the render with a message naming the limit.

/// Maximum number of elements one function call may produce (`until`, `untilStep`, `repeat` count…).
pub const MAX_ITEMS: usize = 1_000_000;
/// Maximum rendered output of one template, in bytes.
pub const MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// Maximum nesting of `template`/`block` calls (Go's own limit is 100,000 on 64-bit; we stop far
/// earlier, before the native stack is at risk).
pub const MAX_TEMPLATE_DEPTH: usize = 1_000;
/// Maximum number of loop iterations (all `range` bodies together) in one render.
pub const MAX_RANGE_ITERATIONS: usize = 10_000_000;
