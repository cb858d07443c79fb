//! Shared by the bounded fuzz/property tests, included by path from the property tests
//! of several crates (`#[path = ...] mod bounded_fuzz;`):
//! * the counting global allocator of `kudo-heap-meter` installed, and [`bounded`] over it: each
//!   test thread measures the peak of its own live heap while it runs one input;
//! * [`cases`]: the per-property case count (`PROPTEST_CASES` for longer local runs);
//! * [`mutated`]: structure-aware inputs made by mutating a real file of the format under test.

#![allow(dead_code)] // each including test binary uses a different part

pub use kudo_heap_meter::peak_during;

#[global_allocator]
static METER: kudo_heap_meter::Meter = kudo_heap_meter::Meter;

/// Default ceiling for one input: far above what any parser here needs for a few-KiB input,
/// far below what an unbounded expansion (alias bombs, decompression bombs) would reach.
pub const MAX_PEAK: usize = 64 * 1024 * 1024;

/// Runs `f` and panics if it held more than `limit` heap bytes at once.
#[track_caller]
pub fn bounded<T>(what: &str, limit: usize, f: impl FnOnce() -> T) -> T {
    let (r, peak) = peak_during(f);
    assert!(
        peak <= limit,
        "{what}: {peak} bytes of heap held at once (limit {limit})"
    );
    r
}

/// Number of cases per property: `PROPTEST_CASES` when set (long local runs, e.g.
/// `PROPTEST_CASES=100000`), else `default` (sized for CI).
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The proptest configuration of these tests: [`cases`] cases, and no regression files (an
/// integration test has no `lib.rs` for proptest to put them beside; a failure prints the
/// minimal input, which goes into a named test).
pub fn config(default_cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: cases(default_cases),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Structure-aware inputs: `base` (a real file of the format under test) changed 1–8 times by
/// inserting one of `tokens`, deleting a span or duplicating a span. Random bytes alone almost never
/// get past a YAML parser's first line; mutated real files reach the checks behind it.
pub fn mutated(
    base: &'static str,
    tokens: &'static [&'static str],
) -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let edit = (
        0usize..3,
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        1usize..24,
    );
    prop::collection::vec(edit, 1..8).prop_map(move |edits| {
        let mut s = base.to_string();
        for (op, at, tok, len) in edits {
            let pos = floor_boundary(&s, at.index(s.len() + 1));
            match op {
                0 => s.insert_str(pos, tokens[tok.index(tokens.len())]),
                1 => {
                    let end = floor_boundary(&s, pos + len);
                    s.replace_range(pos..end, "");
                }
                _ => {
                    let end = floor_boundary(&s, pos + len);
                    let piece = s[pos..end].to_string();
                    let to = floor_boundary(&s, tok.index(s.len() + 1));
                    s.insert_str(to, &piece);
                }
            }
        }
        s
    })
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// YAML fragments that change structure and typing when inserted into a YAML file.
pub const YAML_TOKENS: &[&str] = &[
    ":",
    ": ",
    "- ",
    "\n",
    "  ",
    "\n  - ",
    "&a ",
    "*a",
    "<<: *a",
    "~",
    "null",
    "!!str ",
    "!!int ",
    "!!map ",
    "!custom ",
    "\"",
    "'",
    "[",
    "]",
    "{",
    "}",
    ",",
    "|",
    ">-",
    "#",
    "? ",
    "---\n",
    "...\n",
    "0x1F",
    "0755",
    "1e309",
    ".nan",
    "-1",
    "99999999999999999999",
    "yes",
    "true",
    "é",
    "\t",
    "\\",
    "{{ .Params.X }}",
    "apiVersion: v1\n",
    "kind: Pod\n",
    "name: ",
    "",
    "\u{0}",
    "\u{feff}",
];
