//! Whether a plan may write an object that already exists: an apply never takes over an object
//! that is not its Instance's unless adoption was asked for.
//!
//! Server-side apply with `force` takes any field from any manager, so without this check a
//! package rendering the name of a team's Deployment would silently rewrite it, label it and make
//! the Instance its owner (deleting the Instance would then delete it). KUDO 0.19 did exactly
//! that. An object is this Instance's when it has an owner reference to an Instance of its name
//! (owner references are namespace-local, so that is this Instance or an earlier one of the same
//! name), or carries kudo's labels naming this Instance: in this namespace for a namespaced
//! object, and for a cluster-scoped one only when the Instance recorded it (labels alone cannot
//! tell two namespaces' Instances of the same name apart). An object another Instance owns is
//! never adopted. Anything else is foreign: the step fails FATAL — the object will not change its
//! owner by itself, so retrying cannot help; the user removes the object or reinstalls with
//! `--take-ownership`, which [`TAKE_OWNERSHIP_ANNOTATION`] records for the Instance's first run.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kudo_api::{Instance, InstanceStatus, labels};
use serde_json::Value;

use crate::field_ownership::{self, BEFORE_FIRST_APPLY, FIELD_MANAGER};

/// Instance annotation `install --take-ownership` sets: the Instance's first run may adopt
/// objects another tool created. The manager removes it when that run ends ([`is_spent`]).
pub const TAKE_OWNERSHIP_ANNOTATION: &str = "kudo-rs.dev/take-ownership";

/// The Instance a plan writes for.
#[derive(Clone, Debug, Default)]
pub struct Claimant {
    /// The Instance's namespace.
    pub namespace: String,
    /// The Instance's name.
    pub name: String,
    /// Adoption was asked for and the run is the first one ([`may_adopt`]).
    pub adopt: bool,
    /// The field manager the plan applies with ([`FIELD_MANAGER`] unless configured).
    pub manager: String,
}

/// What to do before applying an object ([`claim`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// The object does not exist, or is this Instance's: apply.
    Apply,
    /// A foreign object adoption was asked for: move its field ownership
    /// ([`field_ownership::managed_fields_patch`] of `managed_fields`, guarded by
    /// `resource_version`; `None`: nothing to move), then apply (which sets kudo's labels and
    /// the owner reference).
    Adopt {
        /// The object's managedFields after the hand-over.
        managed_fields: Option<Vec<ManagedFieldsEntry>>,
        /// The object's resourceVersion as read.
        resource_version: String,
    },
    /// Not this Instance's: the step fails with this message.
    Refuse(String),
}

/// Whose the live object is, as far as kudo can tell.
#[derive(Debug, PartialEq)]
enum Owner {
    Me,
    /// Another Instance (`namespace/name` or `name` as known).
    OtherInstance(String),
    Foreign,
}

/// Decides what an apply of an object may do given the live object (`None`: absent).
/// `namespaced` is the kind's scope; `recorded` whether a cluster-scoped object is among those
/// the Instance recorded as applied by it.
pub fn claim(live: Option<&Value>, me: &Claimant, namespaced: bool, recorded: bool) -> Claim {
    let Some(live) = live else { return Claim::Apply };
    match owner(live, me, namespaced, recorded) {
        Owner::Me => Claim::Apply,
        Owner::OtherInstance(other) => Claim::Refuse(format!(
            "{} exists and belongs to Instance {other}: an Instance never adopts another \
             Instance's objects (not even with --take-ownership)",
            describe(live)
        )),
        Owner::Foreign if me.adopt => {
            let entries = field_ownership::managed_fields_of(live);
            let api_version = live["apiVersion"].as_str().unwrap_or_default();
            Claim::Adopt {
                managed_fields: field_ownership::take_over(
                    &entries,
                    is_foreign_writer,
                    FIELD_MANAGER,
                    api_version,
                ),
                resource_version: live["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            }
        }
        Owner::Foreign => {
            let managers = field_ownership::describe_managers(&field_ownership::managed_fields_of(live));
            let managers = if managers.is_empty() {
                "none recorded".to_string()
            } else {
                managers.join(", ")
            };
            Claim::Refuse(format!(
                "{} exists and is not managed by this Instance (managers: {managers}); nothing was \
                 changed. Delete it, or install with --take-ownership to adopt it",
                describe(live)
            ))
        }
    }
}

/// The entries an adoption takes: every writer of the main resource but kudo's own apply. The
/// fields of other managers that wrote with `Update` (kubectl's client-side apply, Helm, edits,
/// KUDO 0.19) and `before-first-apply` become kudo's; other `Apply` managers keep theirs (the
/// force-apply takes what kudo's templates set).
fn is_foreign_writer(e: &ManagedFieldsEntry) -> bool {
    e.operation.as_deref() == Some("Update") || e.manager.as_deref() == Some(BEFORE_FIRST_APPLY)
}

fn owner(live: &Value, me: &Claimant, namespaced: bool, recorded: bool) -> Owner {
    let meta = &live["metadata"];
    let ns = meta["namespace"].as_str().unwrap_or_default();
    let refs = meta["ownerReferences"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let instances: Vec<&str> = refs
        .iter()
        .filter(|r| {
            r["kind"] == "Instance"
                && r["apiVersion"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("kudo.dev/"))
        })
        .filter_map(|r| r["name"].as_str())
        .collect();
    if let Some(other) = instances.iter().find(|n| **n != me.name) {
        return Owner::OtherInstance(format!("{ns}/{other}"));
    }
    if let Some(name) = instances.first() {
        return if ns == me.namespace {
            Owner::Me
        } else {
            Owner::OtherInstance(format!("{ns}/{name}"))
        };
    }
    let l = &meta["labels"];
    let Some(labelled) = l[labels::INSTANCE]
        .as_str()
        .filter(|_| l[labels::HERITAGE] == "kudo")
    else {
        return Owner::Foreign;
    };
    match (labelled == me.name, namespaced) {
        (true, true) if ns == me.namespace => Owner::Me,
        (true, false) if recorded => Owner::Me,
        (true, false) => Owner::OtherInstance(format!("{labelled} (of another namespace)")),
        (_, true) => Owner::OtherInstance(format!("{ns}/{labelled}")),
        (false, false) => Owner::OtherInstance(labelled.to_string()),
    }
}

/// `Kind namespace/name` (or `Kind name` when cluster-scoped), for messages.
fn describe(live: &Value) -> String {
    let kind = live["kind"].as_str().unwrap_or("object");
    let name = live["metadata"]["name"].as_str().unwrap_or_default();
    match live["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Whether the Instance's current run may adopt: the annotation is set and the run it was set
/// for has not ended (once it ends the manager removes it, [`is_spent`]).
pub fn may_adopt(inst: &Instance) -> bool {
    inst.metadata.annotations.contains_key(TAKE_OWNERSHIP_ANNOTATION)
}

/// Whether the take-ownership annotation is used up: the Instance's current run ended in
/// `status`. The manager removes it with that status write, so an update, an upgrade or a retry
/// never adopts.
pub fn is_spent(inst: &Instance, status: &InstanceStatus) -> bool {
    let pe = &inst.spec.plan_execution;
    inst.metadata.annotations.contains_key(TAKE_OWNERSHIP_ANNOTATION)
        && status
            .plan_status
            .get(&pe.plan_name)
            .is_some_and(|ps| !pe.plan_name.is_empty() && ps.uid == pe.uid && ps.status.is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me(adopt: bool) -> Claimant {
        Claimant {
            namespace: "ns".into(),
            name: "other".into(),
            adopt,
            manager: FIELD_MANAGER.into(),
        }
    }

    fn deploy(ns: &str, meta: Value) -> Value {
        let mut m = json!({"name": "other-nginx", "namespace": ns, "resourceVersion": "7",
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
                 "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]});
        for (k, v) in meta.as_object().unwrap() {
            m[k] = v.clone();
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": m})
    }

    fn owner_ref(name: &str) -> Value {
        json!([{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": name, "uid": "u", "controller": true}])
    }

    fn kudo_labels(instance: &str) -> Value {
        json!({"heritage": "kudo", "kudo.dev/instance": instance, "kudo.dev/operator": "op"})
    }

    fn refused(c: &Claim) -> &str {
        match c {
            Claim::Refuse(m) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn absent_and_own_objects_are_applied() {
        let ours_by_ref = deploy("ns", json!({"ownerReferences": owner_ref("other")}));
        let ours_by_labels = deploy("ns", json!({"labels": kudo_labels("other")}));
        let cluster_recorded =
            json!({"kind": "ClusterRole", "metadata": {"name": "r", "labels": kudo_labels("other")}});
        for adopt in [false, true] {
            assert_eq!(claim(None, &me(adopt), true, false), Claim::Apply);
            assert_eq!(claim(Some(&ours_by_ref), &me(adopt), true, false), Claim::Apply);
            assert_eq!(
                claim(Some(&ours_by_labels), &me(adopt), true, false),
                Claim::Apply
            );
            assert_eq!(
                claim(Some(&cluster_recorded), &me(adopt), false, true),
                Claim::Apply
            );
        }
    }

    #[test]
    fn foreign_objects_are_refused_naming_object_managers_and_flag() {
        let kubectl = deploy("ns", json!({}));
        let msg = refused(&claim(Some(&kubectl), &me(false), true, false)).to_string();
        assert!(
            msg.starts_with("Deployment ns/other-nginx exists and is not managed by this Instance"),
            "{msg}"
        );
        assert!(
            msg.contains("kubectl-client-side-apply (Update), kube-controller-manager (Update, status)"),
            "{msg}"
        );
        assert!(msg.contains("--take-ownership"), "{msg}");
        // Helm's labels are not kudo's.
        let helm = deploy("ns", json!({"labels": {"app.kubernetes.io/managed-by": "Helm"}}));
        assert!(refused(&claim(Some(&helm), &me(false), true, false)).contains("--take-ownership"));
        // kudo's instance label without heritage=kudo is not kudo's either.
        let half = deploy("ns", json!({"labels": {"kudo.dev/instance": "other"}}));
        assert!(matches!(
            claim(Some(&half), &me(false), true, false),
            Claim::Refuse(_)
        ));
        let bare = json!({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}});
        assert!(refused(&claim(Some(&bare), &me(false), true, false)).contains("managers: none recorded"));
    }

    #[test]
    fn other_instances_objects_are_refused_even_with_the_flag() {
        let cases = [
            (
                deploy("ns", json!({"ownerReferences": owner_ref("db")})),
                true,
                false,
                "ns/db",
            ),
            (
                deploy("ns", json!({"labels": kudo_labels("db")})),
                true,
                false,
                "ns/db",
            ),
            // Same Instance name, other namespace (an owner reference cannot cross namespaces).
            (
                deploy("prod", json!({"labels": kudo_labels("other")})),
                true,
                false,
                "prod/other",
            ),
            (
                deploy("prod", json!({"ownerReferences": owner_ref("other")})),
                true,
                false,
                "prod/other",
            ),
            (
                json!({"kind": "ClusterRole", "metadata": {"name": "r", "labels": kudo_labels("other")}}),
                false,
                false,
                "of another namespace",
            ),
            (
                json!({"kind": "ClusterRole", "metadata": {"name": "r", "labels": kudo_labels("db")}}),
                false,
                true,
                "db",
            ),
        ];
        for (live, namespaced, recorded, names) in cases {
            for adopt in [false, true] {
                let c = claim(Some(&live), &me(adopt), namespaced, recorded);
                let Claim::Refuse(msg) = &c else {
                    panic!("{live} adopt={adopt}: {c:?}")
                };
                assert!(msg.contains(names) && msg.contains("never adopts"), "{msg}");
            }
        }
    }

    #[test]
    fn adoption_moves_update_writers_to_kudo_and_keeps_status() {
        let kubectl = deploy("ns", json!({}));
        let Claim::Adopt {
            managed_fields,
            resource_version,
        } = claim(Some(&kubectl), &me(true), true, false)
        else {
            panic!("expected adoption")
        };
        assert_eq!(resource_version, "7");
        let mf = managed_fields.unwrap();
        assert_eq!(mf.len(), 2);
        assert_eq!(mf[0].manager.as_deref(), Some("kudo"));
        assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
        assert_eq!(mf[1].subresource.as_deref(), Some("status"));
        // Nothing another manager wrote with Update: adopt without a managedFields patch.
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns",
            "resourceVersion": "3", "managedFields": [{"manager": "tool", "operation": "Apply", "apiVersion": "v1"}]}});
        assert_eq!(
            claim(Some(&applied), &me(true), true, false),
            Claim::Adopt {
                managed_fields: None,
                resource_version: "3".into()
            }
        );
    }

    #[test]
    fn the_annotation_is_spent_when_the_current_run_ends() {
        let mut inst: Instance = serde_json::from_value(json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "other", "namespace": "ns", "annotations": {TAKE_OWNERSHIP_ANNOTATION: "true"}},
            "spec": {"planExecution": {"planName": "deploy", "uid": "u1"}}}))
        .unwrap();
        let status = |uid: &str, st: &str| -> InstanceStatus {
            serde_json::from_value(
                json!({"planStatus": {"deploy": {"name": "deploy", "status": st, "uid": uid}}}),
            )
            .unwrap()
        };
        assert!(may_adopt(&inst));
        assert!(!is_spent(&inst, &status("u1", "IN_PROGRESS")));
        assert!(!is_spent(&inst, &status("u0", "COMPLETE")));
        assert!(is_spent(&inst, &status("u1", "COMPLETE")));
        assert!(is_spent(&inst, &status("u1", "FATAL_ERROR")));
        inst.metadata.annotations.clear();
        assert!(!may_adopt(&inst));
        assert!(!is_spent(&inst, &status("u1", "COMPLETE")));
    }
}
