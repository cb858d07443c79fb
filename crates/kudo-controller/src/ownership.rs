//! Before a plan applies an object that exists: is it this Instance's? The decision is
//! [`kudo_engine::ownership::claim`]'s; this module reads the live object (from the watch cache
//! when that copy already shows the object is ours, else a GET with its managedFields) and, when
//! adoption was asked for, moves its field ownership to kudo's manager before the apply.

use kube::api::{DynamicObject, Patch, PatchParams};
use kudo_engine::TaskOutcome;
use kudo_engine::field_ownership::managed_fields_patch;
use kudo_engine::ownership::{Claim, Claimant, claim as decide};
use serde_json::Value;

use crate::apply::{api_as, api_error};
use crate::context::Context;
use crate::reasons::{self, fatal};

/// `Ok(())`: the apply may go ahead (the object is absent, ours, or was just adopted).
pub(crate) async fn claim(
    ctx: &Context,
    obj: &Value,
    name: &str,
    me: &Claimant,
    namespaced: bool,
    recorded: bool,
) -> Result<(), TaskOutcome> {
    let av = obj["apiVersion"].as_str().unwrap_or("");
    let kind = obj["kind"].as_str().unwrap_or("");
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    if let Some(Some(cached)) = ctx.caches.child(av, kind, ns, name)
        && decide(Some(&cached), me, namespaced, recorded) == Claim::Apply
    {
        return Ok(());
    }
    let (api, _, _) = api_as::<DynamicObject>(ctx, obj).await?;
    let live = match api.get_opt(name).await {
        Ok(live) => live,
        Err(e) => return Err(api_error("get of", obj, e)),
    };
    let live = live
        .map(|l| serde_json::to_value(&l))
        .transpose()
        .map_err(|e| TaskOutcome::Transient(e.to_string()))?;
    match decide(live.as_ref(), me, namespaced, recorded) {
        Claim::Apply => Ok(()),
        Claim::Refuse(msg) => Err(fatal(reasons::OWNERSHIP_CONFLICT, msg)),
        Claim::Adopt {
            managed_fields,
            resource_version,
        } => {
            if let Some(entries) = managed_fields {
                let patch: json_patch::Patch =
                    serde_json::from_value(managed_fields_patch(&entries, &resource_version))
                        .map_err(|e| TaskOutcome::Transient(e.to_string()))?;
                api.patch(
                    name,
                    &PatchParams {
                        field_manager: Some(me.manager.clone()),
                        ..Default::default()
                    },
                    &Patch::<()>::Json(patch),
                )
                .await
                .map_err(|e| transfer_failed(obj, e))?;
            }
            tracing::info!(object = %kudo_engine::waiting::describe(obj), "adopting (--take-ownership)");
            Ok(())
        }
    }
}

/// The hand-over's patch failed. Its `test` of the resourceVersion fails (422) whenever anyone
/// wrote the object since it was read (a controller updating a Deployment's status does, all the
/// time), and a conflict is the same race: the next pass reads the object again. Anything else
/// is judged as any apply error.
fn transfer_failed(obj: &Value, e: kube::Error) -> TaskOutcome {
    match e {
        kube::Error::Api(s) if s.code == 422 || s.code == 409 => TaskOutcome::Transient(format!(
            "field ownership transfer of {} raced with another write ({}); it is read again",
            kudo_engine::waiting::describe(obj),
            s.message
        )),
        other => api_error("field ownership transfer of", obj, other),
    }
}
