//! `migrate`: moves a cluster from KUDO v0.19's manager to kudo-rs's without recreating an
//! object. [`inspect`] reads what KUDO left (its manager, webhook, Instances and the objects they
//! applied); [`run`] executes the remaining steps of `kudo_engine::migrate::Step`, recording each
//! in the ConfigMap `kudo_engine::migrate::RECORD_CONFIGMAP` of KUDO's namespace, so a migration
//! killed midway resumes; [`rollback`] gives the cluster back to KUDO's manager.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope, verbs};
use kudo_engine::migrate::{self as decide, Record, Step};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::init::{InitRequest, Setup};
use crate::{Error, Quiet, Result};

/// The field manager of migrate's own writes (the record, the Instances' admitted spec).
pub const FIELD_MANAGER: &str = "kubectl-kudo-migrate";

/// Where KUDO runs and where kudo-rs goes.
pub struct MigrateRequest<'a> {
    /// KUDO's namespace (`kudo init`'s, default `kudo-system`).
    pub kudo_namespace: &'a str,
    /// The namespace of kudo-rs's manager (the same or a new one).
    pub namespace: &'a str,
    /// What `init` installs.
    pub setup: &'a Setup,
    /// How long to wait for KUDO's manager pods to go.
    pub timeout: Duration,
}

/// An object an Instance applied, as the migration sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObject {
    /// `Kind/name` (namespaced objects are in the Instance's namespace).
    pub object: String,
    /// Its field managers, `manager (operation[, subresource])`.
    pub managers: Vec<String>,
    /// Whether KUDO's manager still owns fields of it (the ownership step moves them).
    pub kudo_owned: bool,
    /// Whether it still carries `kudo.dev/last-applied-configuration`.
    pub last_applied: bool,
}

/// An Instance KUDO ran.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceFacts {
    /// `namespace/name`.
    pub instance: String,
    /// The scheduled run (`plan uid status`), empty when none.
    pub plan_execution: String,
    /// Whether kudo-rs's admitted spec is recorded on it already.
    pub converted: bool,
    /// The objects it applied (never Pods).
    pub objects: Vec<AppliedObject>,
}

/// What the cluster holds of KUDO and how far a migration got.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inspection {
    /// KUDO's namespace.
    pub kudo_namespace: String,
    /// KUDO's manager StatefulSet's replicas (`None`: no such StatefulSet).
    pub manager_replicas: Option<i32>,
    /// KUDO's manager pods still there.
    pub manager_pods: usize,
    /// KUDO's webhook configurations.
    pub webhooks: Vec<String>,
    /// Whether the webhook's Secret exists.
    pub webhook_secret: bool,
    /// Steps done (from the record).
    pub done: Vec<String>,
    /// Steps still to run.
    pub remaining: Vec<String>,
    /// The Instances and their objects.
    pub instances: Vec<InstanceFacts>,
}

fn mwc_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
    );
    ApiResource::from_gvk_with_plural(&gvk, "mutatingwebhookconfigurations")
}

fn instance_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(kudo_api::GROUP, kudo_api::VERSION, "Instance");
    ApiResource::from_gvk_with_plural(&gvk, "instances")
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

async fn read_record(cluster: &Cluster, ns: &str) -> Result<Record> {
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let data = match cms.get_opt(decide::RECORD_CONFIGMAP).await? {
        Some(cm) => cm.data.unwrap_or_default(),
        None => BTreeMap::new(),
    };
    Record::from_data(&data)
        .map_err(|e| Error::Refused(format!("ConfigMap {ns}/{}: {e}", decide::RECORD_CONFIGMAP)))
}

async fn write_record(cluster: &Cluster, ns: &str, record: &Record) -> Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": decide::RECORD_CONFIGMAP, "namespace": ns}, "data": record.to_data()});
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    cms.patch(decide::RECORD_CONFIGMAP, &pp, &Patch::Apply(&cm))
        .await?;
    Ok(())
}

async fn kudo_webhooks(cluster: &Cluster, kudo_ns: &str) -> Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &mwc_resource());
    let mut out = Vec::new();
    let list = match api.list(&ListParams::default()).await {
        // A cluster without admission webhooks (kudo-rs's embedded one) has none of KUDO's.
        Err(e) if not_found(&e) => return Ok(out),
        list => list?,
    };
    for o in list {
        let v = serde_json::to_value(&o)?;
        if decide::is_kudo_webhook(&v, kudo_ns) {
            out.push(v);
        }
    }
    Ok(out)
}

async fn manager_pods(cluster: &Cluster, kudo_ns: &str) -> Result<usize> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), kudo_ns);
    let prefix = format!("{}-", decide::KUDO_MANAGER);
    let list = pods.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&prefix)))
        .count())
}

/// Every object carrying `heritage=kudo`, namespaced (in `ns`) and cluster-scoped, as JSON with
/// whether it is namespaced. Pods, Events and ReplicaSets are not listed: their labels are copied
/// from a template, they are not what KUDO applied.
async fn kudo_labelled(cluster: &Cluster, ns: &str) -> Result<Vec<(Value, bool)>> {
    let discovery = Discovery::new(cluster.client.clone()).run().await?;
    let lp = ListParams::default().labels("heritage=kudo");
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || !caps.supports_operation(verbs::PATCH) {
                continue;
            }
            if matches!(
                ar.kind.as_str(),
                "Pod" | "Event" | "ReplicaSet" | "ControllerRevision"
            ) {
                continue;
            }
            let namespaced = caps.scope == Scope::Namespaced;
            let api: Api<DynamicObject> = if namespaced {
                Api::namespaced_with(cluster.client.clone(), ns, &ar)
            } else {
                Api::all_with(cluster.client.clone(), &ar)
            };
            let Ok(list) = api.list(&lp).await else { continue };
            for o in list {
                let mut v = serde_json::to_value(&o)?;
                v["apiVersion"] = json!(ar.api_version);
                v["kind"] = json!(ar.kind);
                out.push((v, namespaced));
            }
        }
    }
    Ok(out)
}

/// The Instances of the cluster with the objects each applied.
async fn instances(cluster: &Cluster) -> Result<Vec<(Value, Vec<(Value, bool)>)>> {
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &instance_resource());
    let mut by_ns: BTreeMap<String, Vec<(Value, bool)>> = BTreeMap::new();
    let mut out = Vec::new();
    for i in api.list(&ListParams::default()).await? {
        let inst = serde_json::to_value(&i)?;
        let ns = inst["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        if !by_ns.contains_key(&ns) {
            by_ns.insert(ns.clone(), kudo_labelled(cluster, &ns).await?);
        }
        let name = inst["metadata"]["name"].as_str().unwrap_or_default();
        let uid = inst["metadata"]["uid"].as_str().unwrap_or_default();
        let objs = by_ns[&ns]
            .iter()
            .filter(|(o, namespaced)| decide::applied_by(o, name, uid, *namespaced))
            .cloned()
            .collect();
        out.push((inst, objs));
    }
    Ok(out)
}

fn facts(inst: &Value, objs: &[(Value, bool)]) -> InstanceFacts {
    let pe = &inst["spec"]["planExecution"];
    let plan = [&pe["planName"], &pe["uid"], &pe["status"]]
        .iter()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    InstanceFacts {
        instance: format!(
            "{}/{}",
            inst["metadata"]["namespace"].as_str().unwrap_or_default(),
            inst["metadata"]["name"].as_str().unwrap_or_default()
        ),
        plan_execution: plan,
        converted: decide::instance_patch(inst).is_none(),
        objects: objs
            .iter()
            .map(|(o, _)| AppliedObject {
                object: format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or("?"),
                    o["metadata"]["name"].as_str().unwrap_or("?")
                ),
                managers: kudo_engine::field_ownership::describe_managers(
                    &kudo_engine::field_ownership::managed_fields_of(o),
                ),
                kudo_owned: decide::kudo_owns_fields(o),
                last_applied: o["metadata"]["annotations"]
                    .get(decide::LAST_APPLIED_ANNOTATION)
                    .is_some(),
            })
            .collect(),
    }
}

/// Reads what KUDO left in the cluster and how far a migration got; writes nothing.
pub async fn inspect(cluster: &Cluster, req: &MigrateRequest<'_>) -> Result<Inspection> {
    let ns = req.kudo_namespace;
    let record = read_record(cluster, ns).await?;
    let sts: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), ns);
    let replicas = sts
        .get_opt(decide::KUDO_MANAGER)
        .await?
        .map(|s| s.spec.replicas.unwrap_or(1));
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    let webhooks = kudo_webhooks(cluster, ns).await?;
    Ok(Inspection {
        kudo_namespace: ns.to_string(),
        manager_replicas: replicas,
        manager_pods: manager_pods(cluster, ns).await?,
        webhooks: webhooks
            .iter()
            .map(|w| w["metadata"]["name"].as_str().unwrap_or_default().to_string())
            .collect(),
        webhook_secret: secrets.get_opt(decide::KUDO_WEBHOOK_SECRET).await?.is_some(),
        done: record.done.iter().map(|s| s.name().to_string()).collect(),
        remaining: record.remaining().iter().map(|s| s.name().to_string()).collect(),
        instances: instances(cluster)
            .await?
            .iter()
            .map(|(i, o)| facts(i, o))
            .collect(),
    })
}

/// Runs the steps the record does not list as done, recording each once it finished; `say`
/// gets one line per step and per wait.
pub async fn run(cluster: &Cluster, req: &MigrateRequest<'_>, say: &mut dyn FnMut(&str)) -> Result<()> {
    let ns = req.kudo_namespace;
    let mut record = read_record(cluster, ns).await?;
    for step in record.remaining() {
        match step {
            Step::Save => save(cluster, ns, &mut record).await?,
            Step::StopKudo => scale_kudo(cluster, ns, 0, req.timeout, say).await?,
            Step::RemoveWebhook => remove_webhook(cluster, ns, say).await?,
            Step::Install => install(cluster, req, say).await?,
            Step::ConvertStatus => convert(cluster, say).await?,
            Step::TakeOwnership => take_ownership(cluster, say).await?,
            Step::DropLastApplied => drop_last_applied(cluster, ns, &mut record, say).await?,
        }
        kudo_kube::failpoint::hit(kudo_kube::failpoint::MIGRATE_STEP_DONE);
        record.finish(step);
        write_record(cluster, ns, &record).await?;
        say(&format!("✓ {}", step.name()));
    }
    Ok(())
}

async fn save(cluster: &Cluster, ns: &str, record: &mut Record) -> Result<()> {
    let sts: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), ns);
    let Some(s) = sts.get_opt(decide::KUDO_MANAGER).await? else {
        return Err(Error::Refused(format!(
            "no KUDO manager in namespace {ns}: StatefulSet {} not found (pass --kudo-namespace)",
            decide::KUDO_MANAGER
        )));
    };
    record.replicas = Some(s.spec.replicas.unwrap_or(1));
    record.webhooks = kudo_webhooks(cluster, ns)
        .await?
        .iter()
        .map(decide::restorable)
        .collect();
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    if let Some(s) = secrets.get_opt(decide::KUDO_WEBHOOK_SECRET).await? {
        record.secret = Some(decide::restorable(&serde_json::to_value(&s)?));
    }
    Ok(())
}

async fn scale_kudo(
    cluster: &Cluster,
    ns: &str,
    replicas: i32,
    timeout: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<()> {
    let sts: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), ns);
    let patch = json!({"spec": {"replicas": replicas}});
    sts.patch(
        decide::KUDO_MANAGER,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    if replicas > 0 {
        return Ok(());
    }
    let start = Instant::now();
    loop {
        let left = manager_pods(cluster, ns).await?;
        if left == 0 {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(Error::Refused(format!(
                "KUDO's manager still has {left} pod(s) in {ns} after {}s; run migrate again",
                timeout.as_secs()
            )));
        }
        say(&format!(
            "⌛ waiting for {left} pod(s) of KUDO's manager to go ({}s)",
            start.elapsed().as_secs()
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn remove_webhook(cluster: &Cluster, ns: &str, say: &mut dyn FnMut(&str)) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &mwc_resource());
    for w in kudo_webhooks(cluster, ns).await? {
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        api.delete(name, &DeleteParams::default()).await?;
        say(&format!("deleted MutatingWebhookConfiguration {name}"));
    }
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), ns);
    match secrets
        .delete(decide::KUDO_WEBHOOK_SECRET, &DeleteParams::default())
        .await
    {
        Ok(_) => say(&format!("deleted Secret {ns}/{}", decide::KUDO_WEBHOOK_SECRET)),
        Err(e) if not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    for (kind, name) in decide::KUDO_CERT_OBJECTS {
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), ns, &ar);
        // cert-manager may not be installed: a kind not served is nothing to delete.
        if api.delete(name, &DeleteParams::default()).await.is_ok() {
            say(&format!("deleted {kind} {ns}/{name}"));
        }
    }
    Ok(())
}

async fn install(cluster: &Cluster, req: &MigrateRequest<'_>, say: &mut dyn FnMut(&str)) -> Result<()> {
    let init = InitRequest {
        setup: req.setup,
        namespace: req.namespace,
        upgrade: true,
    };
    crate::init::install(cluster, &init, &mut Quiet).await?;
    say(&format!("installed the kudo-rs manager in {}", req.namespace));
    Ok(())
}

async fn convert(cluster: &Cluster, say: &mut dyn FnMut(&str)) -> Result<()> {
    for (inst, _) in instances(cluster).await? {
        let Some(patch) = decide::instance_patch(&inst) else {
            continue;
        };
        let ns = inst["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = inst["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), ns, &instance_resource());
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        say(&format!(
            "Instance {ns}/{name}: spec admitted for kudo-rs, its run continues"
        ));
    }
    Ok(())
}

fn api_of(cluster: &Cluster, obj: &Value, namespaced: bool) -> Api<DynamicObject> {
    let (group, version) = match obj["apiVersion"].as_str().unwrap_or("v1").split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            obj["apiVersion"].as_str().unwrap_or("v1").to_string(),
        ),
    };
    let kind = obj["kind"].as_str().unwrap_or_default();
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, kind));
    match obj["metadata"]["namespace"].as_str().filter(|_| namespaced) {
        Some(ns) => Api::namespaced_with(cluster.client.clone(), ns, &ar),
        None => Api::all_with(cluster.client.clone(), &ar),
    }
}

async fn take_ownership(cluster: &Cluster, say: &mut dyn FnMut(&str)) -> Result<()> {
    for (_, objs) in instances(cluster).await? {
        for (obj, namespaced) in objs {
            let Some(patch) = decide::ownership_patch(&obj) else {
                continue;
            };
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let api = api_of(cluster, &obj, namespaced);
            let p: json_patch::Patch = serde_json::from_value(patch)?;
            api.patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
                .await?;
            let back = serde_json::to_value(api.get(name).await?)?;
            if decide::kudo_owns_fields(&back) {
                return Err(Error::Refused(format!(
                    "{} {name}: KUDO's manager still owns fields after the hand-over; run migrate again",
                    obj["kind"].as_str().unwrap_or_default()
                )));
            }
            say(&format!(
                "{} {name}: fields now owned by kudo",
                obj["kind"].as_str().unwrap_or_default()
            ));
        }
    }
    Ok(())
}

async fn drop_last_applied(
    cluster: &Cluster,
    kudo_ns: &str,
    record: &mut Record,
    say: &mut dyn FnMut(&str),
) -> Result<()> {
    for (_, objs) in instances(cluster).await? {
        for (obj, namespaced) in objs {
            let Some(patch) = decide::drop_last_applied_patch(&obj) else {
                continue;
            };
            let kind = obj["kind"].as_str().unwrap_or_default();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let ns = obj["metadata"]["namespace"].as_str().filter(|_| namespaced);
            let text = obj["metadata"]["annotations"][decide::LAST_APPLIED_ANNOTATION]
                .as_str()
                .unwrap_or_default();
            record
                .last_applied
                .insert(decide::object_key(kind, ns, name), text.to_string());
            // Saved first: a rollback gives KUDO back the annotation its next apply needs.
            write_record(cluster, kudo_ns, record).await?;
            let p: json_patch::Patch = serde_json::from_value(patch)?;
            api_of(cluster, &obj, namespaced)
                .patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
                .await?;
            say(&format!(
                "{kind} {name}: {} removed",
                decide::LAST_APPLIED_ANNOTATION
            ));
        }
    }
    Ok(())
}

/// Gives the cluster back to KUDO's manager: kudo-rs's manager Deployment scaled to zero, the
/// saved Secret and webhook configurations created again, the saved last-applied annotations put
/// back, KUDO's manager scaled to its saved replicas, the record deleted. The objects are left
/// as they are.
pub async fn rollback(cluster: &Cluster, req: &MigrateRequest<'_>, say: &mut dyn FnMut(&str)) -> Result<()> {
    let ns = req.kudo_namespace;
    let record = read_record(cluster, ns).await?;
    if record.done.is_empty() {
        return Err(Error::Refused(format!(
            "no migration recorded in ConfigMap {ns}/{}: nothing to roll back",
            decide::RECORD_CONFIGMAP
        )));
    }
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), req.namespace);
    let zero = json!({"spec": {"replicas": 0}});
    match deployments
        .patch(
            decide::KUDO_MANAGER,
            &PatchParams::default(),
            &Patch::Merge(&zero),
        )
        .await
    {
        Ok(_) => say(&format!("scaled the kudo-rs manager in {} to 0", req.namespace)),
        Err(e) if not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    restore_objects(cluster, ns, &record, say).await?;
    restore_last_applied(cluster, &record, say).await?;
    scale_kudo(cluster, ns, record.replicas.unwrap_or(1), req.timeout, say).await?;
    say(&format!(
        "scaled KUDO's manager to {}",
        record.replicas.unwrap_or(1)
    ));
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    cms.delete(decide::RECORD_CONFIGMAP, &DeleteParams::default())
        .await?;
    Ok(())
}

async fn create_if_absent(api: &Api<DynamicObject>, obj: &Value) -> Result<bool> {
    let o: DynamicObject = serde_json::from_value(obj.clone())?;
    match api.create(&PostParams::default(), &o).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn restore_objects(
    cluster: &Cluster,
    ns: &str,
    record: &Record,
    say: &mut dyn FnMut(&str),
) -> Result<()> {
    if let Some(secret) = &record.secret {
        let ar = ApiResource::erase::<Secret>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(cluster.client.clone(), ns, &ar);
        if create_if_absent(&api, secret).await? {
            say(&format!("restored Secret {ns}/{}", decide::KUDO_WEBHOOK_SECRET));
        }
    }
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &mwc_resource());
    for w in &record.webhooks {
        if create_if_absent(&api, w).await? {
            say(&format!(
                "restored MutatingWebhookConfiguration {}",
                w["metadata"]["name"].as_str().unwrap_or("")
            ));
        }
    }
    Ok(())
}

async fn restore_last_applied(cluster: &Cluster, record: &Record, say: &mut dyn FnMut(&str)) -> Result<()> {
    if record.last_applied.is_empty() {
        return Ok(());
    }
    for (_, objs) in instances(cluster).await? {
        for (obj, namespaced) in objs {
            let kind = obj["kind"].as_str().unwrap_or_default();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let ns = obj["metadata"]["namespace"].as_str().filter(|_| namespaced);
            let Some(text) = record.last_applied.get(&decide::object_key(kind, ns, name)) else {
                continue;
            };
            if obj["metadata"]["annotations"]
                .get(decide::LAST_APPLIED_ANNOTATION)
                .is_some()
            {
                continue;
            }
            let patch = json!({"metadata": {"annotations": {decide::LAST_APPLIED_ANNOTATION: text}}});
            api_of(cluster, &obj, namespaced)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            say(&format!(
                "{kind} {name}: {} restored",
                decide::LAST_APPLIED_ANNOTATION
            ));
        }
    }
    Ok(())
}
