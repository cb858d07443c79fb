//! Storing a pulled, verified package as its Operator and OperatorVersion (and typed API CRD) in
//! the source's namespace — only what [`kudo_engine::source::admit`] admits, and everything checked
//! before the first write.
//!
//! The OperatorVersion carries the provenance annotations `install oci://…` writes
//! (`kudo_repo::Source::operator_version_annotations`: the artifact by digest, the verifying key)
//! and the label [`SOURCE_LABEL`] naming the source. No owner reference: deleting the source
//! leaves the Operator, its OperatorVersions and the Instances running them alone.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kudo_api::source::{SOURCE_LABEL, SourceArtifact, StoredOperatorVersion};
use kudo_api::{Operator, OperatorVersion};
use kudo_engine::source::status::Stored;
use kudo_engine::source::{Admission, Candidate, Existing, Failure, FailureKind, admit, spec_digest};
use kudo_oci::Verification;
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_repo::oci::SOURCE_ANNOTATION;
use serde_json::json;

use super::{FIELD_MANAGER, Pull, SourceError, typed_api};
use crate::resources::operator_version_resource;

/// Where a source stores.
pub(super) struct Target<'a> {
    pub client: &'a kube::Client,
    pub namespace: &'a str,
    /// The source's name.
    pub source: &'a str,
}

/// The package's objects as this source stores them.
struct Objects {
    operator: Operator,
    ov: OperatorVersion,
    signature: Option<String>,
}

fn objects(at: &Target<'_>, p: &Pull) -> Result<Objects, Failure> {
    let pulled = &p.pulled;
    let opts = ConvertOptions {
        namespace: Some(at.namespace.to_string()),
        ..Default::default()
    };
    let res = to_resources(&pulled.package, &opts).map_err(|e| {
        Failure::new(
            FailureKind::Artifact,
            format!("the package in {} is invalid: {e}", pulled.pinned),
        )
    })?;
    let source = kudo_repo::Source::Oci {
        requested: pulled.pinned.to_string(),
        pinned: pulled.pinned.to_string(),
        verification: pulled.verification.clone(),
    };
    let (mut operator, mut ov) = (res.operator, res.operator_version);
    ov.metadata
        .annotations
        .extend(source.operator_version_annotations());
    for labels in [&mut operator.metadata.labels, &mut ov.metadata.labels] {
        labels.insert(SOURCE_LABEL.into(), at.source.to_string());
    }
    let signature = match &pulled.verification {
        Verification::Verified { fingerprint, .. } => Some(format!("cosign key {fingerprint}")),
        Verification::NotRequired => None,
    };
    Ok(Objects {
        operator,
        ov,
        signature,
    })
}

/// Stores the pulled package unless the engine refuses (`Ok(Err)`: nothing was written).
pub(super) async fn store(
    at: &Target<'_>,
    p: &Pull,
    recorded: &[StoredOperatorVersion],
) -> Result<Result<Stored, Failure>, SourceError> {
    let objs = match objects(at, p) {
        Ok(o) => o,
        Err(f) => return Ok(Err(f)),
    };
    let ovs: Api<DynamicObject> =
        Api::namespaced_with(at.client.clone(), at.namespace, &operator_version_resource());
    let name = objs.ov.metadata.name.clone();
    let existing = match ovs.get_opt(&name).await? {
        Some(o) => Some(serde_json::from_value::<OperatorVersion>(serde_json::to_value(
            o,
        )?)?),
        None => None,
    };
    let desired = spec_digest(&objs.ov.spec);
    let pinned = p.pulled.pinned.to_string();
    let cand = Candidate {
        url: &pinned,
        range_tag: p.range.then_some(p.tag.as_deref()).flatten(),
        package_version: &p.pulled.package.operator.operator_version,
        operator_version: &name,
        spec_digest: &desired,
        signature: objs.signature.as_deref(),
    };
    let existing_digest = existing.as_ref().map(|e| spec_digest(&e.spec));
    let seen = existing
        .as_ref()
        .zip(existing_digest.as_deref())
        .map(|(e, d)| Existing {
            spec_digest: d,
            source: e.metadata.annotations.get(SOURCE_ANNOTATION).map(String::as_str),
        });
    let stored_digest = match admit(&cand, seen.as_ref(), recorded) {
        Admission::Refuse(f) => return Ok(Err(f)),
        Admission::Keep => existing_digest.unwrap_or(desired),
        admission => {
            let planned = match typed_api::check(at.client, &objs.ov).await? {
                Ok(planned) => planned,
                Err(mut f) => {
                    f.signature = objs.signature.clone();
                    return Ok(Err(f));
                }
            };
            typed_api::apply(at.client, &objs.ov, planned).await?;
            ensure_operator(at, &objs.operator).await?;
            if admission == Admission::Create {
                create(&ovs, &objs.ov).await?
            } else {
                adopt(&ovs, &objs.ov).await?;
                existing_digest.unwrap_or(desired)
            }
        }
    };
    Ok(Ok(stored(p, &objs, stored_digest)))
}

fn stored(p: &Pull, objs: &Objects, spec_digest: String) -> Stored {
    let pkg = &p.pulled.package.operator;
    let url = p.pulled.pinned.to_string();
    Stored {
        artifact: SourceArtifact {
            url: url.clone(),
            digest: p.pulled.digest.clone(),
            tag: p.tag.clone(),
            operator: pkg.name.clone(),
            version: pkg.operator_version.clone(),
            app_version: Some(pkg.app_version.clone()).filter(|a| !a.is_empty()),
            operator_version: objs.ov.metadata.name.clone(),
            signature: objs.signature.clone(),
        },
        entry: StoredOperatorVersion {
            name: objs.ov.metadata.name.clone(),
            url,
            spec_digest,
            signature: objs.signature.clone(),
        },
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// The package's Operator, unless one of that name exists (it is shared by every version).
async fn ensure_operator(at: &Target<'_>, operator: &Operator) -> Result<(), SourceError> {
    let ar = kudo_kube::known_resource(kudo_api::GROUP, "Operator");
    let api: Api<DynamicObject> = Api::namespaced_with(at.client.clone(), at.namespace, &ar);
    if api.get_opt(&operator.metadata.name).await?.is_some() {
        return Ok(());
    }
    let obj: DynamicObject = serde_json::from_value(serde_json::to_value(operator)?)?;
    match api.create(&post_params(), &obj).await {
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// Creates the OperatorVersion; the digest of its spec as the API server stored it.
async fn create(ovs: &Api<DynamicObject>, ov: &OperatorVersion) -> Result<String, SourceError> {
    let obj: DynamicObject = serde_json::from_value(serde_json::to_value(ov)?)?;
    let created = ovs.create(&post_params(), &obj).await?;
    let back: OperatorVersion = serde_json::from_value(serde_json::to_value(created)?)?;
    Ok(spec_digest(&back.spec))
}

/// Labels and annotates an OperatorVersion that already holds exactly the package's content.
async fn adopt(ovs: &Api<DynamicObject>, ov: &OperatorVersion) -> Result<(), SourceError> {
    let patch = json!({"metadata": {"labels": ov.metadata.labels, "annotations": ov.metadata.annotations}});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    ovs.patch(&ov.metadata.name, &pp, &Patch::Merge(&patch)).await?;
    Ok(())
}
