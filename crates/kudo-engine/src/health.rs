//! When an object applied by a task counts as healthy (KUDO's `status.IsHealthy`), evaluated on the
//! JSON the API server returns from the create/patch call or a later GET.
//!
//! KUDO's rules, with these deliberate changes (each tested below):
//! * StatefulSet with `updateStrategy: OnDelete`: KUDO reused kubectl's status viewer, which
//!   refuses OnDelete, so such a StatefulSet was never healthy. We call it healthy once the
//!   current generation is observed and all replicas are ready.
//! * Job: healthy when `succeeded >= completions` (default 1) or a `Complete=True` condition; KUDO
//!   required `succeeded == 1` exactly, so Jobs with several completions never finished.
//! * Pod in phase Failed: a terminal failure (it will never run again); KUDO waited forever.
//! * KUDO Instance (dependency): healthy only when its current plan run is COMPLETE; a child in
//!   FATAL_ERROR/CANCELLED is a failure. KUDO looked only at "no plan scheduled", so a failed child
//!   let the parent continue.
//! * Kinds KUDO treated as healthy on sight but that have a well-defined readiness: DaemonSet
//!   (rollout complete), PersistentVolumeClaim (Bound), and custom resources following the
//!   usual conventions (`status.observedGeneration`, a `Ready` or `Available` condition).

use serde_json::Value;

/// Verdict on one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Healthy: a step waiting on the object may complete.
    Healthy,
    /// Not (yet) healthy; the message says what is awaited.
    Progressing(String),
    /// Will never become healthy by waiting: the task should fail fatally.
    Failed(String),
}

impl Health {
    /// Whether the verdict is [`Health::Healthy`].
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy)
    }
}

fn s<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    get(v, path)?.as_str()
}

fn i(v: &Value, path: &[&str]) -> Option<i64> {
    let x = get(v, path)?;
    x.as_i64()
        .or_else(|| x.as_f64().map(|f| f as i64))
        .or_else(|| x.as_str()?.parse().ok())
}

fn get<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
        if cur.is_null() {
            return None;
        }
    }
    Some(cur)
}

/// The condition of `type_` in `status.conditions`: (status, reason, message).
fn condition<'v>(v: &'v Value, type_: &str) -> Option<(&'v str, &'v str, &'v str)> {
    get(v, &["status", "conditions"])?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        .map(|c| {
            (
                c.get("status").and_then(Value::as_str).unwrap_or(""),
                c.get("reason").and_then(Value::as_str).unwrap_or(""),
                c.get("message").and_then(Value::as_str).unwrap_or(""),
            )
        })
}

fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((g, _)) => g,
        None => "",
    }
}

/// Evaluates an object as returned by the API server (`apiVersion`, `kind`, `metadata`, `spec`,
/// `status`). Objects of unknown kinds without status conventions are healthy (KUDO's default).
pub fn health(obj: &Value) -> Health {
    let api_version = s(obj, &["apiVersion"]).unwrap_or("");
    let kind = s(obj, &["kind"]).unwrap_or("");
    let group = group_of(api_version);
    match (group, kind) {
        ("apps" | "extensions", "Deployment") => deployment(obj),
        ("apps", "StatefulSet") => statefulset(obj),
        ("apps" | "extensions", "DaemonSet") => daemonset(obj),
        ("batch", "Job") => job(obj),
        ("", "Pod") => pod(obj),
        ("", "Namespace") => namespace(obj),
        ("", "Service") => service(obj),
        ("", "PersistentVolumeClaim") => pvc(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        ("kudo.dev", "Instance") => instance(obj),
        _ => generic(obj),
    }
}

fn name(obj: &Value) -> &str {
    s(obj, &["metadata", "name"]).unwrap_or("")
}

fn ns_name(obj: &Value) -> String {
    match s(obj, &["metadata", "namespace"]) {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", name(obj)),
        _ => name(obj).to_string(),
    }
}

/// `generation` not yet observed by the controller responsible for the object.
fn generation_pending(obj: &Value) -> bool {
    match (
        i(obj, &["metadata", "generation"]),
        i(obj, &["status", "observedGeneration"]),
    ) {
        (Some(g), Some(o)) => o < g,
        (Some(_), None) => true,
        _ => false,
    }
}

fn deployment(obj: &Value) -> Health {
    let n = name(obj);
    if generation_pending(obj) {
        return Health::Progressing(format!(
            "deployment {n:?} is not healthy: Waiting for deployment spec update to be observed..."
        ));
    }
    if let Some(("True" | "False", "ProgressDeadlineExceeded", _)) = condition(obj, "Progressing") {
        // KUDO treats this as "not healthy" (no failure); a step timeout is the way out.
        return Health::Progressing(format!(
            "deployment {n:?} is not healthy: deployment {n:?} exceeded its progress deadline"
        ));
    }
    let updated = i(obj, &["status", "updatedReplicas"]).unwrap_or(0);
    let replicas = i(obj, &["status", "replicas"]).unwrap_or(0);
    let available = i(obj, &["status", "availableReplicas"]).unwrap_or(0);
    if let Some(want) = i(obj, &["spec", "replicas"])
        && updated < want
    {
        return Health::Progressing(format!(
            "deployment {n:?} is not healthy: Waiting for deployment {n:?} rollout to finish: {updated} out of {want} new replicas have been updated..."
        ));
    }
    if replicas > updated {
        return Health::Progressing(format!(
            "deployment {n:?} is not healthy: Waiting for deployment {n:?} rollout to finish: {} old replicas are pending termination...",
            replicas - updated
        ));
    }
    if available < updated {
        return Health::Progressing(format!(
            "deployment {n:?} is not healthy: Waiting for deployment {n:?} rollout to finish: {available} of {updated} updated replicas are available..."
        ));
    }
    Health::Healthy
}

fn statefulset(obj: &Value) -> Health {
    let n = name(obj);
    let observed = i(obj, &["status", "observedGeneration"]).unwrap_or(0);
    let gen_ = i(obj, &["metadata", "generation"]).unwrap_or(0);
    if observed == 0 || gen_ > observed {
        return Health::Progressing(format!(
            "statefulset {n:?} is not healthy: Waiting for statefulset spec update to be observed..."
        ));
    }
    let ready = i(obj, &["status", "readyReplicas"]).unwrap_or(0);
    let want = i(obj, &["spec", "replicas"]);
    if let Some(want) = want
        && ready < want
    {
        return Health::Progressing(format!(
            "statefulset {n:?} is not healthy: Waiting for {} pods to be ready...",
            want - ready
        ));
    }
    let strategy = s(obj, &["spec", "updateStrategy", "type"]).unwrap_or("RollingUpdate");
    if strategy == "OnDelete" {
        // pods are replaced only when deleted by someone else: ready is all we can wait for
        return Health::Healthy;
    }
    if let (Some(partition), Some(want)) = (
        i(obj, &["spec", "updateStrategy", "rollingUpdate", "partition"]),
        want,
    ) {
        let updated = i(obj, &["status", "updatedReplicas"]).unwrap_or(0);
        if updated < want - partition {
            return Health::Progressing(format!(
                "statefulset {n:?} is not healthy: Waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated...",
                want - partition
            ));
        }
        return Health::Healthy;
    }
    let current = s(obj, &["status", "currentRevision"]).unwrap_or("");
    let update = s(obj, &["status", "updateRevision"]).unwrap_or("");
    if current != update {
        let updated = i(obj, &["status", "updatedReplicas"]).unwrap_or(0);
        return Health::Progressing(format!(
            "statefulset {n:?} is not healthy: waiting for statefulset rolling update to complete {updated} pods at revision {update}..."
        ));
    }
    Health::Healthy
}

fn daemonset(obj: &Value) -> Health {
    let n = name(obj);
    if generation_pending(obj) {
        return Health::Progressing(format!(
            "daemonset {n:?} is not healthy: Waiting for daemon set spec update to be observed..."
        ));
    }
    let desired = i(obj, &["status", "desiredNumberScheduled"]).unwrap_or(0);
    let updated = i(obj, &["status", "updatedNumberScheduled"]).unwrap_or(0);
    let available = i(obj, &["status", "numberAvailable"]).unwrap_or(0);
    let on_delete = s(obj, &["spec", "updateStrategy", "type"]) == Some("OnDelete");
    if !on_delete && updated < desired {
        return Health::Progressing(format!(
            "daemonset {n:?} is not healthy: Waiting for daemon set {n:?} rollout to finish: {updated} out of {desired} new pods have been updated..."
        ));
    }
    if available < desired {
        return Health::Progressing(format!(
            "daemonset {n:?} is not healthy: Waiting for daemon set {n:?} rollout to finish: {available} of {desired} updated pods are available..."
        ));
    }
    Health::Healthy
}

fn job(obj: &Value) -> Health {
    let n = name(obj);
    if let Some(("True", _, msg)) = condition(obj, "Failed") {
        return Health::Failed(format!("job {n:?} has failed terminally: {msg}"));
    }
    if let Some(("True", _, _)) = condition(obj, "Complete") {
        return Health::Healthy;
    }
    let succeeded = i(obj, &["status", "succeeded"]).unwrap_or(0);
    let completions = i(obj, &["spec", "completions"]).unwrap_or(1);
    if succeeded >= completions {
        return Health::Healthy;
    }
    Health::Progressing(format!(
        "job {n:?} still running: {succeeded} of {completions} completions succeeded"
    ))
}

fn pod(obj: &Value) -> Health {
    let phase = s(obj, &["status", "phase"]).unwrap_or("");
    let ready = matches!(condition(obj, "Ready"), Some(("True", _, _)));
    if phase == "Running" && ready {
        return Health::Healthy;
    }
    if phase == "Failed" {
        let why = s(obj, &["status", "message"])
            .or_else(|| s(obj, &["status", "reason"]))
            .unwrap_or("");
        return Health::Failed(format!("pod {} has failed: {why}", ns_name(obj)));
    }
    Health::Progressing(format!("pod {} is not running yet: {phase}", ns_name(obj)))
}

fn namespace(obj: &Value) -> Health {
    let phase = s(obj, &["status", "phase"]).unwrap_or("");
    if phase == "Active" {
        Health::Healthy
    } else {
        Health::Progressing(format!("namespace {} is not active: {phase}", name(obj)))
    }
}

fn service(obj: &Value) -> Health {
    let t = s(obj, &["spec", "type"]).unwrap_or("ClusterIP");
    if t == "ExternalName" {
        return Health::Healthy;
    }
    if s(obj, &["spec", "clusterIP"]).unwrap_or("").is_empty() {
        return Health::Progressing(format!(
            "service {} does not have cluster IP address",
            ns_name(obj)
        ));
    }
    if t == "LoadBalancer" {
        let has = |p: &[&str]| {
            get(obj, p)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        };
        if !has(&["spec", "externalIPs"]) && !has(&["status", "loadBalancer", "ingress"]) {
            return Health::Progressing(format!(
                "service {} does not have load balancer ingress IP address",
                ns_name(obj)
            ));
        }
    }
    Health::Healthy
}

fn pvc(obj: &Value) -> Health {
    match s(obj, &["status", "phase"]).unwrap_or("") {
        "Bound" => Health::Healthy,
        "Lost" => Health::Failed(format!("persistentvolumeclaim {} lost its volume", ns_name(obj))),
        other => Health::Progressing(format!(
            "persistentvolumeclaim {} is not bound: {other}",
            ns_name(obj)
        )),
    }
}

fn crd(obj: &Value) -> Health {
    if let Some(("True", _, _)) = condition(obj, "Established") {
        Health::Healthy
    } else {
        Health::Progressing(format!("CRD {} is not established yet", name(obj)))
    }
}

fn instance(obj: &Value) -> Health {
    let who = ns_name(obj);
    // The manager says which generation its status speaks of; a newer spec (e.g. just patched by
    // a KudoOperator task) has not been turned into a plan yet. A status without
    // `observedGeneration` (an older manager) says it in its conditions only.
    if let Some(g) = i(obj, &["metadata", "generation"]) {
        let pending = match i(obj, &["status", "observedGeneration"]) {
            Some(observed) => observed != g,
            None => get(obj, &["status", "conditions"])
                .and_then(Value::as_array)
                .is_some_and(|conds| {
                    conds.iter().any(|c| {
                        c.get("observedGeneration")
                            .and_then(Value::as_i64)
                            .is_some_and(|o| o < g)
                    })
                }),
        };
        if pending {
            return Health::Progressing(format!("instance {who}: spec change not yet processed"));
        }
    }
    let scheduled = s(obj, &["spec", "planExecution", "planName"]).unwrap_or("");
    let plans = get(obj, &["status", "planStatus"]).and_then(Value::as_object);
    let verdict = |plan: &str, status: &str, msg: &str| match status {
        "COMPLETE" => Health::Healthy,
        "FATAL_ERROR" | "CANCELLED" => {
            Health::Failed(format!("instance {who}: plan {plan} ended in {status}: {msg}"))
        }
        other => Health::Progressing(format!(
            "instance {who}: plan {plan} is {}",
            if other.is_empty() { "not started" } else { other }
        )),
    };
    if !scheduled.is_empty() {
        let uid = s(obj, &["spec", "planExecution", "uid"]).unwrap_or("");
        let Some(ps) = plans.and_then(|p| p.get(scheduled)) else {
            return Health::Progressing(format!("instance {who}: plan {scheduled} is scheduled"));
        };
        if !uid.is_empty() && ps.get("uid").and_then(Value::as_str) != Some(uid) {
            return Health::Progressing(format!("instance {who}: plan {scheduled} is scheduled"));
        }
        let status = s(ps, &["status"]).unwrap_or("");
        if status == "COMPLETE" {
            // KUDO: a child is healthy once no plan is scheduled. Until the unscheduling lands,
            // a spec change written meanwhile (by this parent) may not have been admitted yet,
            // although the status's observedGeneration already counts the unscheduling.
            return Health::Progressing(format!(
                "instance {who}: plan {scheduled} is COMPLETE, not unscheduled yet"
            ));
        }
        return verdict(scheduled, status, s(ps, &["message"]).unwrap_or(""));
    }
    // no plan scheduled: judge by the most recently updated plan run
    let latest = plans
        .into_iter()
        .flatten()
        .filter(|(_, ps)| !matches!(s(ps, &["status"]), None | Some("NEVER_RUN")))
        .max_by(|a, b| {
            let ta = s(a.1, &["lastUpdatedTimestamp"]).unwrap_or("");
            let tb = s(b.1, &["lastUpdatedTimestamp"]).unwrap_or("");
            ta.cmp(tb)
        });
    match latest {
        Some((plan, ps)) => verdict(
            plan,
            s(ps, &["status"]).unwrap_or(""),
            s(ps, &["message"]).unwrap_or(""),
        ),
        None => Health::Progressing(format!("instance {who}: no plan has run yet")),
    }
}

/// Convention-based health for everything else: a pending `observedGeneration`, or a `Ready`
/// (preferred) or `Available` condition that is not True, means progressing. No conditions and
/// no observedGeneration → healthy (KUDO's default for unknown kinds).
fn generic(obj: &Value) -> Health {
    let kind = s(obj, &["kind"]).unwrap_or("object");
    let who = ns_name(obj);
    if i(obj, &["status", "observedGeneration"]).is_some() && generation_pending(obj) {
        return Health::Progressing(format!("{kind} {who}: Waiting for spec update to be observed..."));
    }
    for t in ["Ready", "Available"] {
        if let Some((status, reason, msg)) = condition(obj, t) {
            return if status == "True" {
                Health::Healthy
            } else {
                Health::Progressing(
                    format!("{kind} {who} is not {}: {reason} {msg}", t.to_lowercase())
                        .trim_end()
                        .to_string(),
                )
            };
        }
    }
    Health::Healthy
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn progressing(h: Health) -> String {
        match h {
            Health::Progressing(m) => m,
            other => panic!("expected Progressing, got {other:?}"),
        }
    }

    fn failed(h: Health) -> String {
        match h {
            Health::Failed(m) => m,
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    fn deploy(spec_replicas: i64, gen_: i64, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "generation": gen_}, "spec": {"replicas": spec_replicas}, "status": status})
    }

    #[test]
    fn deployment_rollout_rules() {
        let ok = deploy(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
        );
        assert_eq!(health(&ok), Health::Healthy);
        let m = progressing(health(&deploy(
            3,
            3,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
        )));
        assert!(
            m.contains("Waiting for deployment spec update to be observed..."),
            "{m}"
        );
        let m = progressing(health(&deploy(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 3}),
        )));
        assert_eq!(
            m,
            "deployment \"x\" is not healthy: Waiting for deployment \"x\" rollout to finish: 1 out of 3 new replicas have been updated..."
        );
        let m = progressing(health(&deploy(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
        )));
        assert!(m.ends_with("1 old replicas are pending termination..."), "{m}");
        let m = progressing(health(&deploy(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1}),
        )));
        assert!(
            m.ends_with(
                "Waiting for deployment \"x\" rollout to finish: 1 of 3 updated replicas are available..."
            ),
            "{m}"
        );
        // freshly created: no status at all
        let fresh = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "generation": 1}, "spec": {"replicas": 1}});
        assert!(!health(&fresh).is_healthy());
        let dead = deploy(
            3,
            2,
            json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        assert!(progressing(health(&dead)).contains("exceeded its progress deadline"));
        // scaled to zero
        assert_eq!(
            health(&deploy(0, 1, json!({"observedGeneration": 1}))),
            Health::Healthy
        );
    }

    fn sts(spec: Value, gen_: i64, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": gen_}, "spec": spec, "status": status})
    }

    #[test]
    fn statefulset_rollout_rules() {
        let ok = sts(
            json!({"replicas": 3}),
            1,
            json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1"}),
        );
        assert_eq!(health(&ok), Health::Healthy);
        let m = progressing(health(&sts(json!({"replicas": 3}), 1, json!({}))));
        assert!(
            m.contains("Waiting for statefulset spec update to be observed"),
            "{m}"
        );
        let m = progressing(health(&sts(
            json!({"replicas": 3}),
            1,
            json!({"observedGeneration": 1, "readyReplicas": 1}),
        )));
        assert!(m.ends_with("Waiting for 2 pods to be ready..."), "{m}");
        let rolling = sts(
            json!({"replicas": 2}),
            2,
            json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 1, "currentRevision": "r1", "updateRevision": "r2"}),
        );
        assert!(progressing(health(&rolling)).contains("rolling update to complete 1 pods at revision r2"));
        // partition: only replicas >= partition need updating
        let part = |updated| {
            sts(
                json!({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}),
                2,
                json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": updated, "currentRevision": "r1", "updateRevision": "r2"}),
            )
        };
        assert!(progressing(health(&part(0))).contains("0 out of 1 new pods have been updated"));
        assert_eq!(health(&part(1)), Health::Healthy);
        // OnDelete: KUDO never finished; we accept once ready (documented improvement)
        let ondelete = sts(
            json!({"replicas": 2, "updateStrategy": {"type": "OnDelete"}}),
            2,
            json!({"observedGeneration": 2, "readyReplicas": 2, "currentRevision": "r1", "updateRevision": "r2"}),
        );
        assert_eq!(health(&ondelete), Health::Healthy);
        let ondelete_unready = sts(
            json!({"replicas": 2, "updateStrategy": {"type": "OnDelete"}}),
            2,
            json!({"observedGeneration": 2, "readyReplicas": 1}),
        );
        assert!(!health(&ondelete_unready).is_healthy());
    }

    #[test]
    fn daemonset_rules() {
        let ds = |gen_: i64, st: Value| json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "generation": gen_}, "status": st});
        assert_eq!(
            health(&ds(
                1,
                json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2})
            )),
            Health::Healthy
        );
        assert!(!health(&ds(2, json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}))).is_healthy());
        assert!(
            progressing(health(&ds(1, json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}))))
                .contains("1 out of 2 new pods have been updated")
        );
        assert!(
            progressing(health(&ds(1, json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 0}))))
                .contains("0 of 2 updated pods are available")
        );
    }

    #[test]
    fn job_rules() {
        let job = |spec: Value, st: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"}, "spec": spec, "status": st});
        assert_eq!(health(&job(json!({}), json!({"succeeded": 1}))), Health::Healthy);
        assert!(!health(&job(json!({}), json!({"active": 1}))).is_healthy());
        // completions > 1: KUDO required exactly 1 and never finished
        assert!(!health(&job(json!({"completions": 3}), json!({"succeeded": 2}))).is_healthy());
        assert_eq!(
            health(&job(json!({"completions": 3}), json!({"succeeded": 3}))),
            Health::Healthy
        );
        assert_eq!(
            health(&job(
                json!({"completions": 3}),
                json!({"conditions": [{"type": "Complete", "status": "True"}]})
            )),
            Health::Healthy
        );
        let m = failed(health(&job(
            json!({}),
            json!({"failed": 7, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}),
        )));
        assert_eq!(
            m,
            "job \"migrate\" has failed terminally: Job has reached the specified backoff limit"
        );
    }

    #[test]
    fn pod_namespace_service_pvc_crd() {
        let pod = |phase: &str, ready: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}})
        };
        assert_eq!(health(&pod("Running", "True")), Health::Healthy);
        assert_eq!(
            progressing(health(&pod("Running", "False"))),
            "pod ns/p is not running yet: Running"
        );
        assert_eq!(
            progressing(health(&pod("Pending", "False"))),
            "pod ns/p is not running yet: Pending"
        );
        assert!(matches!(health(&pod("Failed", "False")), Health::Failed(_)));

        let nsobj = |phase: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": phase}});
        assert_eq!(health(&nsobj("Active")), Health::Healthy);
        assert!(!health(&nsobj("Terminating")).is_healthy());

        let svc = |spec: Value, st: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}, "spec": spec, "status": st});
        assert_eq!(
            health(&svc(
                json!({"type": "ExternalName", "externalName": "x.example"}),
                json!({})
            )),
            Health::Healthy
        );
        assert_eq!(
            health(&svc(json!({"clusterIP": "10.0.0.1"}), json!({}))),
            Health::Healthy
        );
        assert_eq!(
            health(&svc(json!({"clusterIP": "None"}), json!({}))),
            Health::Healthy
        );
        assert_eq!(
            progressing(health(&svc(json!({}), json!({})))),
            "service ns/s does not have cluster IP address"
        );
        let lb = svc(
            json!({"type": "LoadBalancer", "clusterIP": "10.0.0.1"}),
            json!({"loadBalancer": {}}),
        );
        assert_eq!(
            progressing(health(&lb)),
            "service ns/s does not have load balancer ingress IP address"
        );
        assert_eq!(
            health(&svc(
                json!({"type": "LoadBalancer", "clusterIP": "10.0.0.1"}),
                json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}})
            )),
            Health::Healthy
        );
        assert_eq!(
            health(&svc(
                json!({"type": "LoadBalancer", "clusterIP": "10.0.0.1", "externalIPs": ["1.2.3.4"]}),
                json!({})
            )),
            Health::Healthy
        );

        let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ns"}, "status": {"phase": phase}});
        assert_eq!(health(&pvc("Bound")), Health::Healthy);
        assert!(!health(&pvc("Pending")).is_healthy());
        assert!(matches!(health(&pvc("Lost")), Health::Failed(_)));

        let crd = |st: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "foos.example.com"},
                "status": {"conditions": [{"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": st}]}})
        };
        assert_eq!(health(&crd("True")), Health::Healthy);
        assert!(!health(&crd("False")).is_healthy());
    }

    fn inst(plan_exec: Value, plan_status: Value) -> Value {
        json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "metadata": {"name": "child", "namespace": "ns", "generation": 2},
            "spec": {"planExecution": plan_exec}, "status": {"planStatus": plan_status}})
    }

    #[test]
    fn child_instance_rules() {
        let done = inst(
            json!({}),
            json!({"deploy": {"name": "deploy", "status": "COMPLETE", "uid": "u1", "lastUpdatedTimestamp": "2024-01-01T00:00:00Z"}}),
        );
        assert_eq!(health(&done), Health::Healthy);
        // a failed child is a failure (KUDO considered it healthy once unscheduled)
        let failed_child = inst(
            json!({}),
            json!({"deploy": {"status": "COMPLETE", "lastUpdatedTimestamp": "2024-01-01T00:00:00Z"},
                   "update": {"status": "FATAL_ERROR", "message": "boom", "lastUpdatedTimestamp": "2024-01-02T00:00:00Z"}}),
        );
        assert_eq!(
            failed(health(&failed_child)),
            "instance ns/child: plan update ended in FATAL_ERROR: boom"
        );
        let running = inst(
            json!({"planName": "deploy", "uid": "u2"}),
            json!({"deploy": {"status": "IN_PROGRESS", "uid": "u2"}}),
        );
        assert_eq!(
            progressing(health(&running)),
            "instance ns/child: plan deploy is IN_PROGRESS"
        );
        // scheduled but the status still belongs to the previous run
        let stale = inst(
            json!({"planName": "deploy", "uid": "u2"}),
            json!({"deploy": {"status": "COMPLETE", "uid": "u1"}}),
        );
        assert!(!health(&stale).is_healthy());
        let finished_scheduled = inst(
            json!({"planName": "deploy", "uid": "u2"}),
            json!({"deploy": {"status": "COMPLETE", "uid": "u2"}}),
        );
        assert_eq!(
            progressing(health(&finished_scheduled)),
            "instance ns/child: plan deploy is COMPLETE, not unscheduled yet"
        );
        assert!(!health(&inst(json!({}), json!({}))).is_healthy());
        // spec change not yet observed by the controller
        let mut unobserved = done.clone();
        unobserved["status"]["conditions"] =
            json!([{"type": "Ready", "status": "True", "observedGeneration": 1}]);
        assert!(!health(&unobserved).is_healthy());
        unobserved["status"]["conditions"][0]["observedGeneration"] = json!(2);
        assert_eq!(health(&unobserved), Health::Healthy);
        // status.observedGeneration decides when present: a Ready condition left on an older
        // generation (a refused change, a backup) does not hold the parent
        let mut observed = unobserved.clone();
        observed["status"]["conditions"][0]["observedGeneration"] = json!(1);
        observed["status"]["observedGeneration"] = json!(2);
        assert_eq!(health(&observed), Health::Healthy);
        observed["status"]["observedGeneration"] = json!(1);
        assert_eq!(
            progressing(health(&observed)),
            "instance ns/child: spec change not yet processed"
        );
    }

    #[test]
    fn custom_resources_and_unknown_kinds() {
        let cr = |meta: Value, st: Value| json!({"apiVersion": "example.com/v1", "kind": "Database", "metadata": meta, "status": st});
        assert_eq!(
            health(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}})),
            Health::Healthy
        );
        assert_eq!(health(&cr(json!({"name": "d"}), json!({}))), Health::Healthy);
        assert_eq!(
            health(&cr(
                json!({"name": "d", "generation": 2}),
                json!({"observedGeneration": 2})
            )),
            Health::Healthy
        );
        assert!(
            !health(&cr(
                json!({"name": "d", "generation": 3}),
                json!({"observedGeneration": 2})
            ))
            .is_healthy()
        );
        let m = progressing(health(&cr(
            json!({"name": "d", "namespace": "ns"}),
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning", "message": "creating volume"}]}),
        )));
        assert_eq!(m, "Database ns/d is not ready: Provisioning creating volume");
        assert_eq!(
            health(&cr(
                json!({"name": "d"}),
                json!({"conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Health::Healthy
        );
        assert!(
            !health(&cr(
                json!({"name": "d"}),
                json!({"conditions": [{"type": "Available", "status": "Unknown"}]})
            ))
            .is_healthy()
        );
        // Ready wins over Available
        assert_eq!(
            health(&cr(
                json!({"name": "d"}),
                json!({"conditions": [{"type": "Available", "status": "False"}, {"type": "Ready", "status": "True"}]})
            )),
            Health::Healthy
        );
        // other condition types are ignored
        assert_eq!(
            health(&cr(
                json!({"name": "d"}),
                json!({"conditions": [{"type": "Synced", "status": "False"}]})
            )),
            Health::Healthy
        );
        // a ReplicaSet or anything without status is healthy (KUDO default)
        assert_eq!(
            health(
                &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}})
            ),
            Health::Healthy
        );
        assert_eq!(health(&json!(null)), Health::Healthy);
    }
}
