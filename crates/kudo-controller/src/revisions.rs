//! Records every admitted run as a revision of its Instance and its outcome when it ends — the
//! requests behind [`kudo_engine::revision`], which decides what is written.
//!
//! Revisions are the manager's own bookkeeping, so they are written with the manager's identity
//! (`Context::client`), never the Instance's ServiceAccount. A failed write is logged (warn) but
//! never fails the reconcile: history is a record of the plan runs, not a condition for running
//! them.

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::revision::{self, Outcome, Revision, StartedBy};
use tracing::{info, warn};

use crate::Context;
use crate::discovery::known_resource;

fn api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &known_resource("apps", "ControllerRevision"))
}

/// The revisions of Instance `ns/name` with uid `uid`, oldest first (selected by the instance
/// label, then by owner uid).
pub async fn list(
    client: &kube::Client,
    ns: &str,
    name: &str,
    uid: &str,
) -> Result<Vec<Revision>, kube::Error> {
    let selector = format!("{}={}", kudo_api::labels::INSTANCE, revision::label_value(name));
    let items = api(client, ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    let values: Vec<serde_json::Value> = items
        .items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    Ok(revision::history(&values, uid))
}

/// What a revision is recorded for: the Instance (and its uid, for the owner reference), the
/// admitted spec whose `planExecution` names the run, and the OperatorVersion it runs.
pub(crate) struct Run<'a> {
    pub(crate) inst: &'a Instance,
    pub(crate) uid: &'a str,
    pub(crate) spec: &'a InstanceSpec,
    pub(crate) ov: &'a OperatorVersion,
}

/// Records the run (just admitted and persisted) as the Instance's next revision, marks runs it
/// replaced, and prunes beyond the limit.
pub(crate) async fn record(ctx: &Context, run: &Run<'_>, by: StartedBy, now: Timestamp) {
    if let Err(e) = try_record(ctx, run, by, now).await {
        warn!(error = %e, "the run was not recorded in the instance's revision history");
    }
}

async fn try_record(ctx: &Context, run: &Run<'_>, by: StartedBy, now: Timestamp) -> Result<(), kube::Error> {
    let (inst, uid) = (run.inst, run.uid);
    let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
    let api = api(&ctx.client, ns);
    let mut revs = list(&ctx.client, ns, &inst.metadata.name, uid).await?;
    let data = revision::snapshot(run.spec, run.ov, by, revs.last().map(|r| &r.data));
    for old in revision::replaced(&revs, &data.plan_uid) {
        set_outcome(&api, &old.name, Outcome::Replaced, now).await?;
    }
    let number = revision::next_number(&revs);
    let cr: DynamicObject =
        serde_json::from_value(revision::manifest(ns, &inst.metadata.name, uid, number, &data))
            .map_err(kube::Error::SerdeError)?;
    let created = api.create(&PostParams::default(), &cr).await?;
    info!(revision = number, plan = %data.plan, change = %data.change, "revision recorded");
    if let Some(r) = serde_json::to_value(&created)
        .ok()
        .as_ref()
        .and_then(revision::parse)
    {
        revs.push(r);
    }
    for name in revision::to_prune(&revs, ctx.config.revision_history_limit) {
        match api.delete(&name, &DeleteParams::background()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Records the outcome of the run `uid` on its revision (the run's plan status just became
/// terminal in this reconcile's status write).
pub(crate) async fn finish(ctx: &Context, inst: &Instance, uid: &str, outcome: Outcome, now: Timestamp) {
    let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
    let api = api(&ctx.client, ns);
    let selector = format!("{}={}", revision::RUN_LABEL, revision::label_value(uid));
    let result = async {
        for cr in api.list(&ListParams::default().labels(&selector)).await?.items {
            if let Some(name) = cr.metadata.name.as_deref() {
                set_outcome(&api, name, outcome, now).await?;
            }
        }
        Ok::<(), kube::Error>(())
    }
    .await;
    if let Err(e) = result {
        warn!(error = %e, uid, "the run's outcome was not recorded on its revision");
    }
}

async fn set_outcome(
    api: &Api<DynamicObject>,
    name: &str,
    outcome: Outcome,
    now: Timestamp,
) -> Result<(), kube::Error> {
    let patch = revision::outcome_patch(outcome, &now.to_string());
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}
