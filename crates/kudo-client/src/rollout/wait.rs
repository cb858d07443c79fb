//! `rollout status --wait`: polls the Rollout until it settles, reporting every poll so the caller
//! can redraw.

use std::time::Duration;

use kudo_api::rollout::Rollout;
use kudo_engine::rollout::phase;

use super::get;
use crate::cluster::Cluster;
use crate::{Error, Result};

/// Whether a rollout in `p` goes on without anyone: not over, not waiting for a person.
pub fn settled(p: &str) -> bool {
    kudo_engine::rollout::is_final(p)
        || matches!(
            p,
            phase::HALTED | phase::INVALID | phase::PAUSED | phase::WAITING_FOR_APPROVAL
        )
}

/// Polls Rollout `name` until [`settled`] for its current spec (or `timeout` passes: an error),
/// calling `observe` with each poll (`true` for the last one). Returns it as it settled.
pub async fn wait(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
    observe: &mut dyn FnMut(&Rollout, bool) -> std::io::Result<()>,
) -> Result<Rollout> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let r = get(cluster, name).await?;
        let status = r.status.clone().unwrap_or_default();
        let current = status.observed_generation.is_some() && status.observed_generation == r.generation();
        let done = current && settled(&status.phase);
        let late = tokio::time::Instant::now() > deadline;
        observe(&r, done || late)?;
        if done {
            return Ok(r);
        }
        if late {
            return Err(Error::RolloutTimeout {
                seconds: timeout.as_secs(),
                name: name.to_string(),
                phase: status.phase,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
