//! Records every admitted run as a revision of its Instance and its outcome when it ends — the
//! requests behind [`kudo_engine::revision`], which decides what is written.
//!
//! Revisions are the manager's own bookkeeping, so they are written with the manager's identity
//! ([`Revisions`] holds its client), never the Instance's ServiceAccount. A failed write is logged
//! (warn) but never fails the reconcile: history is a record of the plan runs, not a condition for running
//! them.
//!
//! Each LIST of the history scans every ControllerRevision of the namespace on the API server, so
//! the common cases go without one: an Instance's first run is revision 1 with nothing before it
//! ([`revision::first_run`]), and the run's outcome is patched on the revision this manager
//! recorded for it ([`Recorded`]); only a run recorded by another manager (or before a restart)
//! and later runs read the history.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_engine::Timestamp;
use kudo_engine::revision::{self, Outcome, StartedBy};
use tracing::{info, warn};

use crate::lean::Lean;
use kudo_kube::discovery::known_resource;

/// The ControllerRevisions of `ns`, decoded as `K` (`DynamicObject`, or [`Lean`] where the answer
/// is decoded on a hot path).
fn api<K>(client: &kube::Client, ns: &str) -> Api<K>
where
    K: kube::Resource<DynamicType = kube::api::ApiResource, Scope = kube::core::DynamicResourceScope>,
{
    Api::namespaced_with(client.clone(), ns, &known_resource("apps", "ControllerRevision"))
}

pub use kudo_client::revisions::list;

/// The revision history as the reconciles write it: with the manager's own client, keeping
/// `limit` revisions per Instance.
pub(crate) struct Revisions {
    client: kube::Client,
    limit: usize,
    recorded: Recorded,
    /// Runs [`Revisions::resume`] looked up already (bounded like [`Recorded`]).
    resumed: Mutex<std::collections::HashSet<String>>,
}

/// The revision this manager recorded for each run still going, by the run's uid: where its
/// outcome goes without a LIST. Bounded: past [`Recorded::CAP`] runs (Instances deleted while
/// running never finish) it starts over, and the outcome is found by a LIST as after a restart.
#[derive(Default)]
struct Recorded(Mutex<HashMap<String, String>>);

impl Recorded {
    const CAP: usize = 100_000;

    fn remember(&self, run_uid: &str, revision: &str) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::CAP {
            map.clear();
        }
        map.insert(run_uid.to_string(), revision.to_string());
    }

    fn has(&self, run_uid: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(run_uid)
    }

    fn take(&self, run_uid: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(run_uid)
    }
}

/// What a revision is recorded for: the Instance (and its uid, for the owner reference), the
/// admitted spec whose `planExecution` names the run, and the OperatorVersion it runs.
pub(crate) struct Run<'a> {
    pub(crate) inst: &'a Instance,
    pub(crate) uid: &'a str,
    pub(crate) spec: &'a InstanceSpec,
    pub(crate) ov: &'a OperatorVersion,
}

impl Revisions {
    pub fn new(client: kube::Client, limit: usize) -> Revisions {
        Revisions {
            client,
            limit,
            recorded: Recorded::default(),
            resumed: Mutex::default(),
        }
    }

    /// Records the run (just admitted and persisted) as the Instance's next revision, marks runs it
    /// replaced, and prunes beyond the limit.
    pub async fn record(&self, run: &Run<'_>, by: StartedBy, now: Timestamp) {
        if let Err(e) = self.try_record(run, by, now).await {
            warn!(error = %e, "the run was not recorded in the instance's revision history");
        }
    }

    async fn try_record(&self, run: &Run<'_>, by: StartedBy, now: Timestamp) -> Result<(), kube::Error> {
        let (inst, uid) = (run.inst, run.uid);
        let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<DynamicObject> = api(&self.client, ns);
        if revision::first_run(inst.status.as_ref()) {
            let data = revision::snapshot(run.spec, run.ov, by.clone(), None);
            match self.create(run, 1, &data).await {
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                other => return other.map(|_| ()),
            }
        }
        let mut revs = list(&self.client, ns, &inst.metadata.name, uid).await?;
        let data = revision::snapshot(run.spec, run.ov, by, revs.last().map(|r| &r.data));
        for old in revision::replaced(&revs, &data.plan_uid) {
            set_outcome(&api, &old.name, Outcome::Replaced, now).await?;
        }
        let created = self.create(run, revision::next_number(&revs), &data).await?;
        revs.extend(
            serde_json::to_value(&created)
                .ok()
                .as_ref()
                .and_then(revision::parse),
        );
        for name in revision::to_prune(&revs, self.limit) {
            match api.delete(&name, &DeleteParams::background()).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// Creates revision `number` of the run and remembers it for the run's outcome; returns the
    /// created object. Built and decoded as [`Lean`] (one pass, no managedFields): every Instance's
    /// first run records one, and kube's own decoding of these was 4 % of the manager's CPU while
    /// `scale 10000` admitted its Instances.
    async fn create(
        &self,
        run: &Run<'_>,
        number: u64,
        data: &revision::RevisionData,
    ) -> Result<DynamicObject, kube::Error> {
        let (inst, uid) = (run.inst, run.uid);
        let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Lean> = api(&self.client, ns);
        let cr: Lean = serde_json::from_value(revision::manifest(ns, &inst.metadata.name, uid, number, data))
            .map_err(kube::Error::SerdeError)?;
        let created = api.create(&PostParams::default(), &cr).await?.0;
        info!(revision = number, plan = %data.plan, change = %data.change, "revision recorded");
        if let Some(name) = created.metadata.name.as_deref() {
            self.recorded.remember(&data.plan_uid, name);
        }
        Ok(created)
    }

    /// A run found going that this manager did not record: a manager killed between the run's
    /// admission write and its revision left it without one, which is recorded now (as started
    /// by a user: the origin is not stored in the Instance). One LIST per such run per process;
    /// a run whose revision exists is remembered for its outcome.
    pub async fn resume(&self, run: &Run<'_>, now: Timestamp) {
        let run_uid = run.spec.plan_execution.uid.as_str();
        if run_uid.is_empty() || self.recorded.has(run_uid) {
            return;
        }
        {
            let mut seen = self.resumed.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() >= Recorded::CAP {
                seen.clear();
            }
            if !seen.insert(run_uid.to_string()) {
                return;
            }
        }
        let ns = run.inst.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Lean> = api(&self.client, ns);
        let selector = format!("{}={}", revision::RUN_LABEL, revision::label_value(run_uid));
        match api.list(&ListParams::default().labels(&selector)).await {
            Ok(l) if l.items.is_empty() => self.record(run, StartedBy::User, now).await,
            Ok(l) => {
                if let Some(name) = l
                    .items
                    .first()
                    .and_then(|r| kube::Resource::meta(r).name.as_deref())
                {
                    self.recorded.remember(run_uid, name);
                }
            }
            Err(e) => warn!(error = %e, "cannot look up the revision of a resumed run"),
        }
    }

    /// Records the outcome of the run `uid` on its revision (the run's plan status just became
    /// terminal in this reconcile's status write).
    pub async fn finish(&self, inst: &Instance, uid: &str, outcome: Outcome, now: Timestamp) {
        let ns = inst.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<DynamicObject> = api(&self.client, ns);
        let result = async {
            let names = match self.recorded.take(uid) {
                Some(name) => vec![name],
                None => api
                    .list(&ListParams::default().labels(&format!(
                        "{}={}",
                        revision::RUN_LABEL,
                        revision::label_value(uid)
                    )))
                    .await?
                    .items
                    .into_iter()
                    .filter_map(|cr| cr.metadata.name)
                    .collect(),
            };
            for name in names {
                match set_outcome(&api, &name, outcome, now).await {
                    // Pruned or gone with its Instance meanwhile: nothing to record on.
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    other => other?,
                }
            }
            Ok::<(), kube::Error>(())
        }
        .await;
        if let Err(e) = result {
            warn!(error = %e, uid, "the run's outcome was not recorded on its revision");
        }
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
