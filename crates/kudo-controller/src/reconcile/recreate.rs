//! `plan retry` of a step whose objects failed terminally: before the retry's first pass, each
//! object the steps it runs again apply is read, and the ones [`retry::recreate_reason`] names (a
//! failed Job, a failed Pod, left by the failed run) are deleted, so the pass creates them anew
//! instead of applying over a failure that cannot change. The decision is the engine's; this
//! module reads and deletes, as the Instance's identity (the objects are the Instance's).

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Preconditions};
use kudo_api::PlanStatus;
use kudo_engine::retry;
use kudo_engine::waiting::describe;
use kudo_package::render::Action;
use tracing::{info, warn};

use super::Reconciler;
use crate::apply::api_for;
use crate::render::Rendered;

/// How long the retry waits for a deleted object to be gone before its pass applies it anew.
const GONE_WITHIN: Duration = Duration::from_secs(10);

impl Reconciler<'_> {
    /// Deletes the objects of the steps the retry run `run_uid` (status `ps`, just reset) runs
    /// again that must be created anew; returns them as `Kind namespace/name`.
    pub(super) async fn recreate_failed(
        &self,
        run_uid: &str,
        ps: &PlanStatus,
        rendered: &Rendered,
    ) -> Vec<String> {
        let mut recreated = Vec::new();
        let again = rendered
            .objects()
            .iter()
            .filter(|o| o.action == Action::Apply && retry::reruns(ps, &o.phase, &o.step));
        for o in again {
            let Ok((api, name, _)) = api_for(self.ctx, &o.object).await else {
                continue;
            };
            let live = match api.get_opt(&name).await {
                Ok(Some(live)) => live.0,
                Ok(None) => continue,
                Err(e) => {
                    warn!(object = %describe(&o.object), error = %e, "reading an object before the retry");
                    continue;
                }
            };
            let Some(why) = serde_json::to_value(&live)
                .ok()
                .and_then(|v| retry::recreate_reason(&v, run_uid))
            else {
                continue;
            };
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: live.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    warn!(object = %describe(&o.object), error = %e, "deleting a failed object for the retry");
                    continue;
                }
            }
            info!(object = %describe(&o.object), "{why}: deleted to be created anew by the retry");
            let deadline = Instant::now() + GONE_WITHIN;
            while Instant::now() < deadline
                && matches!(api.get_opt(&name).await, Ok(Some(l)) if l.0.metadata.uid == live.metadata.uid)
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            recreated.push(describe(&o.object));
        }
        recreated
    }
}
