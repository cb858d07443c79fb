//! Diffs of a preview, like `kubectl diff`: `diff -u -N LIVE/<id> MERGED/<id>` per object that
//! changes, YAML with sorted keys, managedFields left out; KUDO's per-run annotations
//! (`kudo.dev/plan`, `phase`, `step`, `last-plan-execution-uid`), which every run rewrites, are left
//! out too. [`Mode::Server`] diffs against a dry-run server-side apply as the manager, [`Mode::Client`]
//! against the fields each rendered object sets in the live one.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kudo_kube::discovery::{Cache, Resolved};
use kudo_package::render::{Action, RenderedObject};
use serde_json::Value;

use super::{MANAGER_FIELD_MANAGER, Masker, Mode};
use crate::cluster::Cluster;

fn type_of(obj: &Value) -> (&str, &str) {
    (
        obj["apiVersion"].as_str().unwrap_or_default(),
        obj["kind"].as_str().unwrap_or_default(),
    )
}

/// One object's diff, or the reason there is none.
#[derive(Debug, Clone)]
pub struct ObjectDiff {
    /// `kubectl diff`'s file name: `[group.]version.Kind.namespace.name`.
    pub id: String,
    /// The object as rendered (where it comes from in the plan, what the plan does with it).
    pub rendered: RenderedObject,
    /// The unified diff (empty: no change).
    pub diff: String,
    /// Why no diff could be computed (the server refused the dry-run apply…).
    pub error: Option<String>,
    /// A note instead of a diff (a Pipe task's generator pod).
    pub note: Option<String>,
}

/// `kubectl diff`'s name of an object: `[group.]version.Kind.namespace.name`.
pub fn object_id(obj: &Value) -> String {
    let (av, kind) = type_of(obj);
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let av = match av.split_once('/') {
        Some((g, v)) => format!("{g}.{v}"),
        None => av.to_string(),
    };
    format!("{av}.{kind}.{ns}.{name}")
}

/// The diff of one rendered object: against the dry-run apply's result (`Server`) or the
/// rendered object against the live fields it sets (`Client`).
pub(super) async fn diff_object(
    cluster: &Cluster,
    discovery: &Cache,
    o: &RenderedObject,
    mode: Mode,
    masker: &Masker,
) -> ObjectDiff {
    let mut out = ObjectDiff {
        id: object_id(&o.object),
        rendered: o.clone(),
        diff: String::new(),
        error: None,
        note: None,
    };
    if o.action == Action::PipePod {
        out.note =
            Some("a Pipe task's generator pod: created and deleted during the plan, not diffed".into());
        return out;
    }
    match live_and_merged(cluster, discovery, o, mode).await {
        Ok((mut live, mut merged)) => {
            live.iter_mut()
                .chain(merged.iter_mut())
                .for_each(without_run_annotations);
            generation_only_from_run_annotations(live.as_ref(), merged.as_mut());
            let (live, merged) = masker.pair(live.as_ref(), merged.as_ref());
            out.diff = unified_diff(&out.id, live.as_ref(), merged.as_ref());
        }
        Err(e) => out.error = Some(masker.redactor().redact(&e)),
    }
    out
}

/// The live object and what it would become (`None`: absent), managedFields removed.
async fn live_and_merged(
    cluster: &Cluster,
    discovery: &Cache,
    o: &RenderedObject,
    mode: Mode,
) -> Result<(Option<Value>, Option<Value>), String> {
    let (av, kind) = type_of(&o.object);
    let name = o.object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match discovery.resolve(av, kind).await {
        Ok(Resolved::Found {
            resource,
            namespaced: true,
        }) => {
            let ns = o.object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&cluster.namespace);
            Api::namespaced_with(cluster.client.clone(), ns, &resource)
        }
        Ok(Resolved::Found { resource, .. }) => Api::all_with(cluster.client.clone(), &resource),
        Ok(Resolved::Unknown(msg)) => return Err(msg),
        Err(e) => return Err(format!("discovery of {av}/{kind} failed: {e}")),
    };
    let live = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading the live object: {e}"))?
        .map(|l| clean(serde_json::to_value(l).unwrap_or_default(), &o.object));
    let merged = match (o.action, mode) {
        (Action::Delete, _) => None,
        (_, Mode::Client) => Some(o.object.clone()),
        (_, Mode::Server) => {
            let pp = PatchParams::apply(MANAGER_FIELD_MANAGER).force().dry_run();
            let merged = api
                .patch(name, &pp, &Patch::Apply(&o.object))
                .await
                .map_err(|e| match e {
                    kube::Error::Api(s) => format!("the server refused it: {}", s.message),
                    other => format!("dry-run apply failed: {other}"),
                })?;
            Some(clean(serde_json::to_value(merged).unwrap_or_default(), &o.object))
        }
    };
    let live = match mode {
        Mode::Client => live.map(|l| project(&l, &o.object)),
        Mode::Server => live,
    };
    Ok((live, merged))
}

/// An object as the server returned it, without managedFields (as `kubectl diff` shows it) and
/// with apiVersion/kind filled in from what was sent.
fn clean(mut obj: Value, sent: &Value) -> Value {
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("managedFields");
    }
    for f in ["apiVersion", "kind"] {
        if obj.get(f).is_none() {
            obj[f] = sent[f].clone();
        }
    }
    obj
}

/// KUDO's per-run bookkeeping annotations (plan, phase, step, plan run uid), which every run
/// rewrites on every object, are left out of both sides of a diff (as kubectl diff leaves out
/// managedFields), so that a diff shows what the change itself changes.
fn without_run_annotations(obj: &mut Value) {
    use kudo_api::labels::{PHASE, PLAN, PLAN_UID, STEP};
    let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(a) = md.get_mut("annotations").and_then(Value::as_object_mut) {
        for k in [PLAN, PHASE, STEP, PLAN_UID] {
            a.remove(k);
        }
        if a.is_empty() {
            md.remove("annotations");
        }
    }
}

/// A Deployment's generation also rises when only its annotations change (kube-apiserver's
/// deployment strategy): when the run annotations were all that changed, so is the generation
/// taken back, and the object shows no diff.
fn generation_only_from_run_annotations(live: Option<&Value>, merged: Option<&mut Value>) {
    let (Some(live), Some(merged)) = (live, merged) else {
        return;
    };
    let gen_of = |v: &Value| v.pointer("/metadata/generation").cloned();
    let mut same = merged.clone();
    if let (Some(g), Some(md)) = (
        gen_of(live),
        same.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        md.insert("generation".into(), g);
    }
    if &same == live {
        *merged = same;
    }
}

/// The part of `live` at the fields `rendered` sets (maps by key, lists element by element,
/// extra live elements kept): what a client-side diff compares without the server's merge.
pub fn project(live: &Value, rendered: &Value) -> Value {
    match (live, rendered) {
        (Value::Object(l), Value::Object(r)) => Value::Object(
            r.keys()
                .filter_map(|k| Some((k.clone(), project(l.get(k)?, &r[k]))))
                .collect(),
        ),
        (Value::Array(l), Value::Array(r)) => Value::Array(
            l.iter()
                .enumerate()
                .map(|(i, x)| r.get(i).map_or_else(|| x.clone(), |y| project(x, y)))
                .collect(),
        ),
        _ => live.clone(),
    }
}

/// Keys sorted at every level, as kubectl prints YAML.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `v` as YAML with sorted keys, as kubectl prints it.
pub fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(&sorted(v)).unwrap_or_else(|e| format!("# cannot print as YAML: {e}\n"))
}

/// `diff -u -N LIVE/<id> MERGED/<id>` of the two sides as YAML, as `kubectl diff` prints it;
/// empty when they are equal.
pub fn unified_diff(id: &str, live: Option<&Value>, merged: Option<&Value>) -> String {
    let a = live.map(to_yaml).unwrap_or_default();
    let b = merged.map(to_yaml).unwrap_or_default();
    if a == b {
        return String::new();
    }
    let (from, to) = (format!("LIVE/{id}"), format!("MERGED/{id}"));
    let diff = similar::TextDiff::from_lines(&a, &b);
    let body = diff
        .unified_diff()
        .context_radius(3)
        .header(&from, &to)
        .to_string();
    let mut out = format!("diff -u -N {from} {to}\n{body}");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diffs_are_unified_with_kubectl_headers_and_empty_when_equal() {
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 3, "a": 1}});
        let mut merged = live.clone();
        merged["spec"]["replicas"] = json!(5);
        let id = object_id(&live);
        assert_eq!(id, "apps.v1.Deployment.ns.web");
        let d = unified_diff(&id, Some(&live), Some(&merged));
        assert!(
            d.starts_with(
                "diff -u -N LIVE/apps.v1.Deployment.ns.web MERGED/apps.v1.Deployment.ns.web\n\
                 --- LIVE/apps.v1.Deployment.ns.web\n+++ MERGED/apps.v1.Deployment.ns.web\n@@"
            ),
            "{d}"
        );
        assert!(d.contains("\n-  replicas: 3\n+  replicas: 5\n"), "{d}");
        assert_eq!(unified_diff(&id, Some(&live), Some(&live)), "");
        // A new object: everything added; a cluster-scoped one has an empty namespace part.
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
        assert_eq!(object_id(&ns), "v1.Namespace..x");
        let d = unified_diff(&object_id(&ns), None, Some(&ns));
        assert!(d.contains("@@ -0,0 +1,"), "{d}");
    }

    #[test]
    fn a_client_diff_sees_only_the_fields_the_object_sets() {
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1", "y": "2"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 81}], "clusterIP": "10.0.0.1"}});
        let rendered = json!({"metadata": {"name": "a", "labels": {"x": "3"}},
            "spec": {"ports": [{"port": 80}]}});
        assert_eq!(
            project(&live, &rendered),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                "spec": {"ports": [{"port": 80}, {"port": 81}]}})
        );
    }
}
