//! Pure formatting of cluster state in KUDO's CLI formats (no IO), so every format is unit-tested
//! against the seeds' and KUDO's golden outputs.

pub mod plan_status;
pub mod rollout_status;
pub mod tree;
