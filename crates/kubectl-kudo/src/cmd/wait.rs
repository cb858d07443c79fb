//! Waiting for a plan run to finish, shared by `--wait` flags.

use std::time::Duration;

use anyhow::{Result, bail};
use kudo_api::{ExecutionStatus, Instance};

use super::cluster::Cluster;

/// How a waited-for run ended.
pub enum WaitOutcome {
    Finished { plan: String, status: ExecutionStatus },
}

/// The run a wait should follow: the scheduled plan, or the most recently updated one.
fn current_run(instance: &Instance) -> Option<(String, String, ExecutionStatus)> {
    let status = instance.status.as_ref()?;
    let pe = &instance.spec.plan_execution;
    if !pe.plan_name.is_empty() {
        let s = status.plan_status.get(&pe.plan_name);
        let st = match s {
            Some(p) if p.uid == pe.uid => p.status,
            _ => ExecutionStatus::Pending,
        };
        return Some((pe.plan_name.clone(), pe.uid.clone(), st));
    }
    status
        .plan_status
        .values()
        .filter(|p| p.last_updated_timestamp.is_some())
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp))
        .map(|p| (p.name.clone(), p.uid.clone(), p.status))
}

/// Polls the Instance until a run whose uid differs from `previous_uid` reaches a terminal status.
pub async fn wait_for_plan(
    cluster: &Cluster,
    name: &str,
    previous_uid: Option<String>,
    timeout: Duration,
) -> Result<WaitOutcome> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let instance = cluster.instance(name).await?;
        if let Some((plan, uid, status)) = current_run(&instance) {
            let new_run = previous_uid
                .as_deref()
                .is_none_or(|p| p != uid && !uid.is_empty());
            if new_run && status.is_terminal() {
                return Ok(WaitOutcome::Finished { plan, status });
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "timed out after {}s waiting for instance {name}'s plan to finish",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
