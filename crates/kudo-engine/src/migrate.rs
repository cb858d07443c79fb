//! `kubectl kudo migrate`: the decisions of moving a cluster from KUDO v0.19's manager to kudo-rs
//! without recreating anything — which objects are KUDO's, which steps remain, what each Instance
//! needs so that kudo-rs continues its plan where KUDO left it, and what the migration recorded.
//!
//! The client reads the cluster, calls these functions and writes what they return; a step it
//! finished is recorded in the migration's ConfigMap ([`Record`]), so a migration killed midway
//! and run again skips what is done and redoes at most the step it was in (every step is
//! idempotent on its own: it compares the cluster with its goal before writing).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::reconcile::ADMITTED_SPEC_ANNOTATION;

/// The field manager KUDO v0.19's writes carry: client-go names a client after its binary, and
/// KUDO's manager binary is `manager` (its Dockerfile builds `cmd/manager` as `manager`).
pub const KUDO_FIELD_MANAGER: &str = "manager";

/// KUDO's annotation holding the object as KUDO last applied it (its three-way merge's original).
pub const LAST_APPLIED_ANNOTATION: &str = "kudo.dev/last-applied-configuration";

/// KUDO's manager StatefulSet (`kudo init`).
pub const KUDO_MANAGER: &str = "kudo-controller-manager";

/// The Service KUDO's webhook configuration points at (`kudo init`).
pub const KUDO_WEBHOOK_SERVICE: &str = "kudo-controller-manager-service";

/// The Secret holding the webhook's certificate (`kudo init --unsafe-self-signed-webhook-ca`, and
/// cert-manager's Certificate writes the same name).
pub const KUDO_WEBHOOK_SECRET: &str = "kudo-webhook-server-secret";

/// cert-manager's Issuer and Certificate of KUDO's webhook (`kudo init` without the flag).
pub const KUDO_CERT_OBJECTS: [(&str, &str); 2] = [
    ("Issuer", "selfsigned-issuer"),
    ("Certificate", "kudo-webhook-server-certificate"),
];

/// The ConfigMap (in KUDO's namespace) recording a migration: what it saved and what it did.
pub const RECORD_CONFIGMAP: &str = "kudo-migration";

/// The steps of a migration, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Save KUDO's webhook configuration, its Secret and the manager's replicas in the record.
    Save,
    /// Scale KUDO's manager to zero and wait until its pods are gone.
    StopKudo,
    /// Delete KUDO's webhook configuration, then its certificate objects.
    RemoveWebhook,
    /// Install the kudo-rs manager (`init`).
    Install,
    /// Mark each Instance's spec as admitted, so kudo-rs continues its run instead of starting one.
    ConvertStatus,
    /// Move the field ownership of each Instance's objects from KUDO's manager to `kudo`.
    TakeOwnership,
    /// Remove `kudo.dev/last-applied-configuration` from the objects whose ownership moved.
    DropLastApplied,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 7] = [
        Step::Save,
        Step::StopKudo,
        Step::RemoveWebhook,
        Step::Install,
        Step::ConvertStatus,
        Step::TakeOwnership,
        Step::DropLastApplied,
    ];

    /// The step's name in the record and the output.
    pub fn name(self) -> &'static str {
        match self {
            Step::Save => "save",
            Step::StopKudo => "stop-kudo",
            Step::RemoveWebhook => "remove-webhook",
            Step::Install => "install",
            Step::ConvertStatus => "convert-status",
            Step::TakeOwnership => "take-ownership",
            Step::DropLastApplied => "drop-last-applied",
        }
    }

    /// The step named `name`, if any.
    pub fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What the migration's ConfigMap holds: the steps done and what was saved to roll back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    /// Steps finished, in order.
    pub done: Vec<Step>,
    /// KUDO's manager replicas before it was stopped.
    pub replicas: Option<i32>,
    /// KUDO's webhook configurations as they were (JSON objects, server fields removed).
    pub webhooks: Vec<Value>,
    /// The webhook's Secret as it was (JSON, server fields removed).
    pub secret: Option<Value>,
    /// Each object's `kudo.dev/last-applied-configuration` before it was removed, keyed by
    /// [`object_key`].
    pub last_applied: BTreeMap<String, String>,
}

/// The ConfigMap data keys of a [`Record`].
const DONE_KEY: &str = "done";
const REPLICAS_KEY: &str = "replicas";
const WEBHOOKS_KEY: &str = "webhooks";
const SECRET_KEY: &str = "secret";
const LAST_APPLIED_PREFIX: &str = "last-applied.";

impl Record {
    /// The record in a ConfigMap's `data` (absent keys: nothing recorded). A step name it does
    /// not know is an error: the ConfigMap was written by another version or by hand.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Record, String> {
        let mut r = Record::default();
        for name in data.get(DONE_KEY).map(String::as_str).unwrap_or("").split(',') {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let step = Step::from_name(name)
                .ok_or_else(|| format!("unknown migration step {name:?} in key {DONE_KEY}"))?;
            r.done.push(step);
        }
        if let Some(n) = data.get(REPLICAS_KEY) {
            r.replicas = Some(
                n.parse()
                    .map_err(|_| format!("key {REPLICAS_KEY}: not a number: {n}"))?,
            );
        }
        if let Some(w) = data.get(WEBHOOKS_KEY) {
            r.webhooks = serde_json::from_str(w).map_err(|e| format!("key {WEBHOOKS_KEY}: {e}"))?;
        }
        if let Some(s) = data.get(SECRET_KEY) {
            r.secret = Some(serde_json::from_str(s).map_err(|e| format!("key {SECRET_KEY}: {e}"))?);
        }
        for (k, v) in data {
            if let Some(obj) = k.strip_prefix(LAST_APPLIED_PREFIX) {
                r.last_applied.insert(obj.to_string(), v.clone());
            }
        }
        Ok(r)
    }

    /// The ConfigMap `data` of the record.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::new();
        let done: Vec<&str> = self.done.iter().map(|s| s.name()).collect();
        d.insert(DONE_KEY.to_string(), done.join(","));
        if let Some(n) = self.replicas {
            d.insert(REPLICAS_KEY.to_string(), n.to_string());
        }
        if !self.webhooks.is_empty() {
            d.insert(
                WEBHOOKS_KEY.to_string(),
                Value::Array(self.webhooks.clone()).to_string(),
            );
        }
        if let Some(s) = &self.secret {
            d.insert(SECRET_KEY.to_string(), s.to_string());
        }
        for (k, v) in &self.last_applied {
            d.insert(format!("{LAST_APPLIED_PREFIX}{k}"), v.clone());
        }
        d
    }

    /// The steps still to run, in order.
    pub fn remaining(&self) -> Vec<Step> {
        Step::ALL.into_iter().filter(|s| !self.done.contains(s)).collect()
    }

    /// Marks `step` done (once).
    pub fn finish(&mut self, step: Step) {
        if !self.done.contains(&step) {
            self.done.push(step);
        }
    }
}

/// The key of an object in [`Record::last_applied`]: `kind.namespace.name` (`_` for a
/// cluster-scoped object), lower-cased kind; valid as a ConfigMap key since names are DNS names.
pub fn object_key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!(
        "{}.{}.{name}",
        kind.to_ascii_lowercase(),
        namespace.unwrap_or("_")
    )
}

/// Whether a MutatingWebhookConfiguration is KUDO's: one of its webhooks calls the Service
/// [`KUDO_WEBHOOK_SERVICE`] in `kudo_namespace`. Matched by where it points, not by its name, so
/// a renamed configuration is found and another tool's is never touched.
pub fn is_kudo_webhook(config: &Value, kudo_namespace: &str) -> bool {
    let hooks = config["webhooks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    hooks.iter().any(|h| {
        let svc = &h["clientConfig"]["service"];
        svc["name"] == KUDO_WEBHOOK_SERVICE && svc["namespace"] == kudo_namespace
    })
}

/// An object as it can be created again: without the fields the API server sets.
pub fn restorable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            m.remove(k);
        }
    }
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    o
}

/// Whether `obj` is one of the objects the Instance `(name, uid)` applied: it carries KUDO's
/// labels naming the Instance and, if namespaced, an owner reference to it (KUDO gives every
/// namespaced object one; cluster-scoped ones get none). Pods never are: they belong to their
/// controllers, and a migration leaves them alone.
pub fn applied_by(obj: &Value, instance: &str, instance_uid: &str, namespaced: bool) -> bool {
    let labels = &obj["metadata"]["labels"];
    if obj["kind"] == "Pod"
        || labels[kudo_api::labels::HERITAGE] != "kudo"
        || labels[kudo_api::labels::INSTANCE] != instance
    {
        return false;
    }
    if !namespaced {
        return true;
    }
    let owners = obj["metadata"]["ownerReferences"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    owners
        .iter()
        .any(|o| o["uid"] == instance_uid && o["kind"] == "Instance")
}

/// The merge patch that lets kudo-rs continue an Instance KUDO ran, or `None` when it needs none
/// (already converted, or nothing to do). kudo-rs reads the same status layout as KUDO
/// (`status.planStatus` keyed by plan, each run with its `uid`; a run's steps COMPLETE,
/// IN_PROGRESS or PENDING), so the status stays as it is; what differs is admission: KUDO's
/// webhook judged each change against the old object it was handed, kudo-rs judges against the
/// spec it last admitted (annotation [`ADMITTED_SPEC_ANNOTATION`]). Without that annotation the
/// first reconcile would admit the Instance as new and start `deploy` with a fresh uid; with
/// the current spec recorded, the scheduled run keeps its uid and the pass resumes at its first
/// step that is not COMPLETE. A run KUDO finished whose `planExecution` its webhook had not
/// cleared yet (the manager stopped between its two writes) is cleared here, as the webhook would
/// have. An Instance KUDO's manager never wrote ([`run_by_kudo`]) gets nothing: it has no run
/// to continue, and marking its spec admitted would keep kudo-rs from ever starting its
/// `deploy` (an Instance created with kudo-rs while the migration runs is one).
pub fn instance_patch(inst: &Value) -> Option<Value> {
    if !run_by_kudo(inst) {
        return None;
    }
    let annotations = &inst["metadata"]["annotations"];
    let mut patch = json!({});
    if annotations.get(ADMITTED_SPEC_ANNOTATION).is_none() {
        let mut spec = inst["spec"].clone();
        if terminal(&spec["planExecution"]["status"]) {
            spec["planExecution"] = json!({});
        }
        let spec: kudo_api::InstanceSpec = serde_json::from_value(spec).ok()?;
        let text = serde_json::to_string(&spec).ok()?;
        patch["metadata"] = json!({"annotations": {ADMITTED_SPEC_ANNOTATION: text}});
    }
    if terminal(&inst["spec"]["planExecution"]["status"]) {
        patch["spec"] = json!({"planExecution": {"planName": null, "uid": null, "status": null}});
    }
    (patch != json!({})).then_some(patch)
}

fn terminal(status: &Value) -> bool {
    matches!(status.as_str(), Some("COMPLETE" | "FATAL_ERROR"))
}

/// The JSON patch removing [`LAST_APPLIED_ANNOTATION`] from `obj`, guarded by its
/// resourceVersion; `None` when it has none.
pub fn drop_last_applied_patch(obj: &Value) -> Option<Value> {
    obj["metadata"]["annotations"].get(LAST_APPLIED_ANNOTATION)?;
    let path = format!(
        "/metadata/annotations/{}",
        LAST_APPLIED_ANNOTATION.replace('/', "~1")
    );
    Some(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
        {"op": "remove", "path": path},
    ]))
}

/// The JSON patch moving the fields KUDO's manager wrote into `obj` to kudo's apply manager
/// (`field_ownership::take_over`, guarded by the resourceVersion); `None` when KUDO's manager
/// owns nothing of it (done already, or never written by KUDO).
pub fn ownership_patch(obj: &Value) -> Option<Value> {
    use crate::field_ownership::{FIELD_MANAGER, managed_fields_of, managed_fields_patch, take_over};
    let entries = managed_fields_of(obj);
    let api_version = obj["apiVersion"].as_str()?;
    let by_kudo = |e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.manager.as_deref() == Some(KUDO_FIELD_MANAGER)
    };
    let moved = take_over(&entries, by_kudo, FIELD_MANAGER, api_version)?;
    let rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or_default();
    Some(managed_fields_patch(&moved, rv))
}

/// Whether KUDO's manager ever wrote the Instance `inst`: it writes every Instance's status
/// (and its spec, to unschedule a finished run), so its managedFields name [`KUDO_FIELD_MANAGER`].
pub fn run_by_kudo(inst: &Value) -> bool {
    let entries = inst["metadata"]["managedFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    entries.iter().any(|e| e["manager"] == KUDO_FIELD_MANAGER)
}

/// Whether KUDO's manager still owns any field of `obj` outside the status (what the ownership
/// step moves; its status entries belong to the controllers that write status).
pub fn kudo_owns_fields(obj: &Value) -> bool {
    let entries = obj["metadata"]["managedFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    entries.iter().any(|e| {
        e["manager"] == KUDO_FIELD_MANAGER && e["operation"] == "Update" && e.get("subresource").is_none()
    })
}
