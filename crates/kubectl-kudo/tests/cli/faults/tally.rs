//! The count of every fault: where the manager died (a named fail point or a random delay),
//! whether the plan was before, during or after its run at that moment, and how long the next
//! manager took to write the Instance again (the recovery), printed as the table
//! docs/benchmarks.md shows.

use std::collections::BTreeMap;
use std::time::Duration;

/// Where a plan was when the manager died, as the Instance tells after the kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// The change was not admitted yet (no new run in the status).
    Before,
    /// A new run was admitted and had not ended.
    During,
    /// The new run had ended (or, for an uninstall, the Instance was gone).
    After,
}

/// A small deterministic generator (xorshift64*): the seed in the table reproduces a run; no
/// statistical quality is needed to spread delays and visit counts.
pub struct Rng(u64);

impl Rng {
    /// From `seed` (never zero inside).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % n.max(1)
    }
}

#[derive(Default)]
struct Row {
    kills: u64,
    fired: u64,
    before: u64,
    during: u64,
    after: u64,
    recovery: Vec<Duration>,
}

/// Rows per (shape, fault).
#[derive(Default)]
pub struct Tally {
    rows: BTreeMap<(String, String), Row>,
}

impl Tally {
    /// Counts one kill.
    pub fn kill(&mut self, shape: &str, fault: &str, fired: bool, when: When) {
        let row = self.rows.entry((shape.into(), fault.into())).or_default();
        row.kills += 1;
        row.fired += u64::from(fired);
        match when {
            When::Before => row.before += 1,
            When::During => row.during += 1,
            When::After => row.after += 1,
        }
    }

    /// Keeps one recovery time of a kill of `fault` in `shape`.
    pub fn recovered(&mut self, shape: &str, fault: &str, took: Duration) {
        let row = self.rows.entry((shape.into(), fault.into())).or_default();
        row.recovery.push(took);
    }

    /// How many kills of `fault` in `shape` died at their armed fail point.
    pub fn fired(&self, shape: &str, fault: &str) -> u64 {
        self.rows
            .get(&(shape.to_string(), fault.to_string()))
            .map_or(0, |r| r.fired)
    }

    /// Kills in all, and of those mid-plan.
    pub fn totals(&self) -> (u64, u64) {
        let kills = self.rows.values().map(|r| r.kills).sum();
        let during = self.rows.values().map(|r| r.during).sum();
        (kills, during)
    }

    /// The markdown table.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| plan shape | fault | kills | fail point fired | before | mid-plan | after | recovery p50 | recovery p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for ((shape, fault), r) in &self.rows {
            let (p50, p99) = percentiles(&r.recovery);
            out.push_str(&format!(
                "| {shape} | {fault} | {} | {} | {} | {} | {} | {p50} | {p99} |\n",
                r.kills, r.fired, r.before, r.during, r.after
            ));
        }
        let (kills, during) = self.totals();
        out.push_str(&format!("| **all** | | **{kills}** | | | **{during}** | | | |\n"));
        out
    }
}

fn percentiles(samples: &[Duration]) -> (String, String) {
    if samples.is_empty() {
        return ("–".into(), "–".into());
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| format!("{} ms", d.as_millis());
    (ms(at(0.5)), ms(at(0.99)))
}
