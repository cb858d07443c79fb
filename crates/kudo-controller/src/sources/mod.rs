//! Package sources on the manager's side (a kudo-rs extension): every `OperatorSource`
//! (`kudo_api::source`) in the manager's scope is pulled from its registry through
//! `kudo_oci::Registry::pull_package`, verified, and stored as the Operator and OperatorVersion
//! (and typed API CRD) of its namespace; its status says what was found. The decisions are
//! [`kudo_engine::source`]'s; this module reads and writes:
//!
//! * [`access`]: the spec's Secrets as registry options and a trust policy;
//! * [`store`]: the package as cluster objects, written only when the engine admits them;
//! * [`typed_api`]: the CRD and ClusterRoles of a package with a typed API;
//! * [`policy`]: the `--require-verified-sources` check the Instance reconcile calls.
//!
//! kube-runtime's `Controller` over OperatorSources, apart from the Instance queue: a source is
//! not an Instance, and its own requeue (the interval) is its re-check. Writes are made with the
//! manager's identity (it is the manager's bookkeeping: what it may run), never an Instance's.

mod access;
pub(crate) mod policy;
mod store;
mod typed_api;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kudo_api::source::{OperatorSource, OperatorSourceStatus, SOURCE_LABEL};
use kudo_engine::Timestamp;
use kudo_engine::source::status::{self, Checking, Outcome};
use kudo_engine::source::{self as decide, Due, Failure, FailureKind, Pick, Verify, Wanted};
use kudo_oci::{OciRef, Registry};
use tracing::{info, warn};

use crate::gate::ShardGate;
use crate::incarnation::Incarnation;
use crate::resources::operator_version_resource;

/// Field manager of the manager's writes for sources (as for typed objects).
const FIELD_MANAGER: &str = "kudo-manager";

/// How soon a source of a shard held elsewhere is looked at again (it may come here).
const OTHER_SHARD_RECHECK: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("malformed object: {0}")]
    Decode(#[from] serde_json::Error),
    /// Writing the typed API through the client's code (e.g. its CRD not Established in time).
    #[error(transparent)]
    TypedApi(#[from] kudo_client::Error),
}

/// What every reconcile of a source shares.
struct Sources {
    client: kube::Client,
    require_verified: bool,
    /// A source is acted on by the replica holding its shard (namespace/name, as an Instance).
    shards: Arc<ShardGate>,
}

pub(crate) fn source_resource() -> ApiResource {
    kudo_kube::known_resource(kudo_api::source::GROUP, kudo_api::source::KIND)
}

/// The source controller of an incarnation: it stops with it.
pub(crate) fn start(inc: &mut Incarnation) -> BoxFuture<'static, ()> {
    let client = inc.client.clone();
    let api: Api<DynamicObject> = match &inc.config.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &source_resource()),
        None => Api::all_with(client.clone(), &source_resource()),
    };
    let ctx = Arc::new(Sources {
        client,
        require_verified: inc.config.require_verified_sources,
        shards: inc.sharding.gate.clone(),
    });
    let run = Controller::new_with(api, watcher::Config::default(), source_resource())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()));
    inc.until_stopped(run)
}

fn error_policy(obj: Arc<DynamicObject>, err: &SourceError, _: Arc<Sources>) -> Action {
    warn!(source = %obj.name_any(), error = %err, "operator source not synced");
    Action::requeue(Duration::from_secs(15))
}

fn now() -> Timestamp {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Timestamp::from_unix(secs)
}

/// One source: checked when due (the engine says), its status written, requeued for the next
/// check.
async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Sources>) -> Result<Action, SourceError> {
    if obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    if !ctx.shards.holds(&ns, &name) {
        return Ok(Action::requeue(OTHER_SHARD_RECHECK));
    }
    let src: OperatorSource = serde_json::from_value(serde_json::to_value(&*obj)?)?;
    let generation = src.generation();
    let old = src.status.as_ref();
    let wanted = match wanted(&src) {
        Ok(w) => w,
        Err(f) => {
            let st = status::checked(
                old,
                generation,
                &Outcome::Failed(f),
                Checking::Unknown,
                None,
                now(),
            );
            write_status(&ctx, &ns, &name, &st).await?;
            return Ok(Action::await_change());
        }
    };
    if let Due::After(secs) = decide::due(old, generation, wanted.interval_secs, now()) {
        return Ok(Action::requeue(Duration::from_secs(secs)));
    }
    if let Some(st) = status::reconciling(old, generation, &wanted.url, now()) {
        write_status(&ctx, &ns, &name, &st).await?;
    }
    let outcome = check(&ctx, &src, &wanted).await?;
    let existing = stored_names(&ctx, &ns, &name).await?;
    let checking = match wanted.verify {
        Verify::None => Checking::Nothing,
        Verify::Keys { .. } => Checking::Signatures,
    };
    let st = status::checked(old, generation, &outcome, checking, Some(&existing), now());
    log_outcome(&ns, &name, &outcome);
    write_status(&ctx, &ns, &name, &st).await?;
    let retry = match outcome {
        Outcome::Stored(_) => wanted.interval_secs,
        Outcome::Failed(_) => wanted.interval_secs.min(decide::FAILURE_RETRY_SECS),
    };
    Ok(Action::requeue(Duration::from_secs(retry)))
}

/// The spec as the engine reads it, with kudo-oci's grammar of the URL, tag and digest.
fn wanted(src: &OperatorSource) -> Result<Wanted, Failure> {
    let spec_error = |m: String| Failure::new(FailureKind::Spec, m);
    let w = decide::read_spec(&src.spec).map_err(spec_error)?;
    let repo = OciRef::parse(&w.url).map_err(|e| spec_error(format!("spec.url: {e}")))?;
    if repo.tag.is_some() || repo.digest.is_some() {
        return Err(spec_error(format!(
            "spec.url {} names a tag or digest: the URL is the repository, spec.ref says which artifact",
            w.url
        )));
    }
    let at = match &w.pick {
        Pick::Tag(t) => Some(format!("{}:{t}", w.url)),
        Pick::Digest(d) => Some(format!("{}@{d}", w.url)),
        Pick::Range(_) => None,
    };
    if let Some(at) = at {
        OciRef::parse(&at).map_err(|e| spec_error(format!("spec.ref: {e}")))?;
    }
    Ok(w)
}

/// One check: the policy, the Secrets, the tag, the pull (verified before the layer is read), then
/// storing what the engine admits. Every refusal is an [`Outcome::Failed`]; only an error writing
/// the cluster is an `Err` (retried).
async fn check(ctx: &Sources, src: &OperatorSource, w: &Wanted) -> Result<Outcome, SourceError> {
    if let Some(f) = decide::policy_refusal(ctx.require_verified, &w.verify) {
        return Ok(Outcome::Failed(f));
    }
    let ns = src.metadata.namespace.clone().unwrap_or_default();
    let access = match access::read(&ctx.client, &ns, &src.spec, &w.verify).await? {
        Ok(a) => a,
        Err(f) => return Ok(Outcome::Failed(f)),
    };
    let pulled = match pull(access, w).await {
        Ok(p) => p,
        Err(f) => return Ok(Outcome::Failed(f)),
    };
    let recorded = src
        .status
        .as_ref()
        .map(|s| s.operator_versions.as_slice())
        .unwrap_or_default();
    let at = store::Target {
        client: &ctx.client,
        namespace: &ns,
        source: &src.metadata.name,
    };
    Ok(match store::store(&at, &pulled, recorded).await? {
        Ok(stored) => Outcome::Stored(Box::new(stored)),
        Err(f) => Outcome::Failed(f),
    })
}

/// What a check pulled: the package, verified, and the tag a range picked.
pub(super) struct Pull {
    pub pulled: kudo_oci::Pulled,
    pub tag: Option<String>,
    pub range: bool,
}

/// Resolves the tag (a range: kudo-repo's order of the version tags, the engine's choice) and
/// pulls under the trust policy.
async fn pull(access: access::Access, w: &Wanted) -> Result<Pull, Failure> {
    let registry = Registry::new(access.options).map_err(access::failure)?;
    let repo = OciRef::parse(&w.url).map_err(access::failure)?;
    let (at, tag, range) = match &w.pick {
        Pick::Tag(t) => (repo.with_tag(t), Some(t.clone()), false),
        Pick::Digest(d) => (repo.with_digest(d), None, false),
        Pick::Range(r) => {
            let tags = registry.list_tags(&repo).await.map_err(access::failure)?;
            let newest_first = kudo_repo::oci::version_tags(&tags);
            let t = decide::choose_tag(&w.url, r, &newest_first)?;
            (repo.with_tag(&t), Some(t), true)
        }
    };
    let pulled = registry
        .pull_package(&at, &access.policy)
        .await
        .map_err(access::failure)?;
    Ok(Pull { pulled, tag, range })
}

/// The names of the OperatorVersions of the namespace labelled as this source's.
async fn stored_names(ctx: &Sources, ns: &str, name: &str) -> Result<Vec<String>, SourceError> {
    let ovs: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &operator_version_resource());
    let lp = ListParams::default().labels(&format!("{SOURCE_LABEL}={name}"));
    Ok(ovs
        .list_metadata(&lp)
        .await?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect())
}

fn log_outcome(ns: &str, name: &str, outcome: &Outcome) {
    match outcome {
        Outcome::Stored(s) => info!(
            source = %format!("{ns}/{name}"),
            operator_version = %s.artifact.operator_version,
            artifact = %s.artifact.url,
            "operator source checked"
        ),
        Outcome::Failed(f) => warn!(
            source = %format!("{ns}/{name}"),
            reason = f.kind.reason(),
            "operator source not stored: {}",
            f.message
        ),
    }
}

/// Writes the whole status (a merge patch: its empty fields are `null`, so they are removed).
async fn write_status(
    ctx: &Sources,
    ns: &str,
    name: &str,
    st: &OperatorSourceStatus,
) -> Result<(), SourceError> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &source_resource());
    let patch = serde_json::json!({"status": st});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.patch_status(name, &pp, &Patch::Merge(&patch)).await?;
    Ok(())
}
