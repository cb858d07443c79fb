//! The preview's reads: the parameter sources the manager would resolve, and the plan rendered
//! as the manager renders it ([`kudo_package::live::render_live`]) with the preview's side of the
//! cluster ([`PreviewReads`]: the CLI's identity, each dependency read once).

use std::collections::{BTreeMap, HashMap};

use kube::api::{Api, DynamicObject};
use kudo_kube::discovery::Cache;
use kudo_package::deps_hash::Dependency;
use kudo_package::live::{KindLookup, LiveCluster, LivePlan, OnTaskError, render_live};
use kudo_package::render::{RenderContext, RenderedObject};
use serde_json::Value;

use super::Change;
use crate::cluster::Cluster;
use crate::sensitive::Redactor;
use crate::{Error, Result};

/// The values of the sensitive parameters, before and after the change.
pub(super) struct Sources {
    /// The values the Instance's sources hold now (empty where they cannot be read).
    current: BTreeMap<String, String>,
    /// The values the proposed spec's sources would give, the command's own values winning.
    pub(super) proposed: BTreeMap<String, String>,
    /// Parameters whose value the command would change in their Secret (a rotation).
    pub(super) rotated: Vec<String>,
}

impl Sources {
    /// Every value to hide, before and after.
    pub(super) fn sensitive_values(&self) -> impl Iterator<Item = String> + '_ {
        self.current.values().chain(self.proposed.values()).cloned()
    }
}

/// Reads the sources of the stored and the proposed spec. `Err` names the parameter and the
/// Secret the proposed spec cannot be resolved from (the manager would wait for it).
pub(super) async fn sources(cluster: &Cluster, change: &Change<'_>) -> Result<Sources> {
    let stored = &change.instance.spec.parameter_sources;
    let current = read_sources(cluster, stored, &BTreeMap::new())
        .await
        .unwrap_or_default();
    let proposed = read_sources(
        cluster,
        &change.proposed.parameter_sources,
        &change.sensitive_values,
    )
    .await
    .map_err(|reason| Error::PreviewSources {
        instance: change.instance.metadata.name.clone(),
        reason,
    })?;
    let rotated = change
        .sensitive_values
        .iter()
        .filter(|(k, v)| {
            stored.get(*k) == change.proposed.parameter_sources.get(*k) && current.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect();
    Ok(Sources {
        current,
        proposed,
        rotated,
    })
}

/// The values of `sources` read from their Secrets (`overlay` wins: values the command would
/// store). Messages name the parameter and the Secret, never a value.
async fn read_sources(
    cluster: &Cluster,
    sources: &BTreeMap<String, kudo_api::ParameterSource>,
    overlay: &BTreeMap<String, String>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &cluster.namespace,
        &kudo_kube::known_resource("", "Secret"),
    );
    let mut out = overlay.clone();
    let mut read: HashMap<String, Option<Value>> = HashMap::new();
    for (param, source) in sources {
        if out.contains_key(param) {
            continue;
        }
        let Some(sel) = source.secret_key_ref.as_ref() else {
            return Err(format!(
                "parameter {param:?}: parameterSources supports only secretKeyRef"
            ));
        };
        if !read.contains_key(&sel.name) {
            let found = api
                .get_opt(&sel.name)
                .await
                .map_err(|e| format!("parameter {param:?}: reading Secret {}: {e}", sel.name))?;
            read.insert(sel.name.clone(), found.and_then(|o| serde_json::to_value(o).ok()));
        }
        let secret = read.get(&sel.name).and_then(Option::as_ref);
        let value = kudo_kube::param_sources::value_from_secret(param, &cluster.namespace, sel, secret)
            .map_err(|e| format!("{e} (the manager would wait for it)"))?;
        out.insert(param.clone(), value);
    }
    Ok(out)
}

/// Renders `plan` as the manager would: namespacedness from discovery, the live ConfigMaps and
/// Secrets of the dependencies hash, removed API versions translated when the server does not
/// serve them, the Instance's bucket label. A dependency that cannot be read fails the preview.
/// Errors are redacted.
pub(super) async fn render(
    cluster: &Cluster,
    discovery: &Cache,
    change: &Change<'_>,
    plan: &str,
    params: BTreeMap<String, String>,
    redactor: &Redactor,
) -> Result<Vec<RenderedObject>> {
    let name = &change.instance.metadata.name;
    let mut base = RenderContext::offline(name, &cluster.namespace, params);
    base.instance_uid = change
        .instance
        .metadata
        .other
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    base.plan_uid = uuid::Uuid::new_v4().to_string();
    if let Some(adjust) = change.adjust {
        adjust(&mut base);
    }
    let reads = PreviewReads {
        discovery: discovery.clone(),
        client: cluster.client.clone(),
    };
    let request = LivePlan {
        ov: change.new_ov,
        plan,
        context: base,
        // A sharded manager labels what it applies with the Instance's bucket: so does the preview.
        bucket: change
            .instance
            .metadata
            .labels
            .get(kudo_api::labels::BUCKET)
            .cloned(),
        on_task_error: OnTaskError::FailPlan,
    };
    let mut live = render_live(&reads, request)
        .await
        .map_err(|e| Error::PreviewRender(redactor.redact(&e.to_string())))?;
    if !live.unreadable.is_empty() {
        return Err(live.unreadable.remove(0));
    }
    if let Some((i, message)) = live.untranslatable.first() {
        let o = &live.objects[*i];
        return Err(Error::Untranslatable {
            task: format!("{}.{}.{}.{}", o.plan, o.phase, o.step, o.task),
            message: message.clone(),
        });
    }
    Ok(live.objects)
}

/// The preview's side of a live render: the CLI's identity, each dependency read once (a preview
/// that cannot read one fails, it does not wait).
#[derive(Clone)]
struct PreviewReads {
    discovery: Cache,
    client: kube::Client,
}

impl LiveCluster for PreviewReads {
    type Error = Error;

    fn cached_namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.discovery.cached_namespaced(api_version, kind)
    }

    async fn lookup_kind(&self, api_version: &str, kind: &str) -> KindLookup {
        self.discovery.lookup(api_version, kind).await
    }

    async fn read_dependency(&self, d: &Dependency) -> Result<Option<Value>> {
        let resource = kudo_kube::known_resource("", d.kind.as_str());
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &d.namespace, &resource);
        let found = api
            .get_opt(&d.name)
            .await
            .map_err(|source| Error::ReadDependency {
                kind: d.kind.as_str(),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                source: Box::new(source),
            })?;
        Ok(found.map(serde_json::to_value).transpose()?)
    }
}
