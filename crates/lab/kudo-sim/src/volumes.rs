//! A dynamic provisioner and PV binder: every unbound PVC gets its own PV `pvc-<uid>`.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use crate::engine::{InvolvedObject, Sim, Snapshot, ar};
use crate::util::merge_patch_changes;

const PROVISIONER: &str = "kudo.dev/sim-provisioner";
const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// Creates the default StorageClass if it does not exist yet.
pub async fn ensure_storage_class(sim: &mut Sim) {
    let obj = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": sim.cfg.storage_class,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": true,
    });
    sim.create(&ar::<StorageClass>(), None, obj).await;
}

fn without(finalizers: &Option<Vec<String>>, f: &str) -> Value {
    json!(
        finalizers
            .iter()
            .flatten()
            .filter(|x| x.as_str() != f)
            .collect::<Vec<_>>()
    )
}

pub async fn reconcile(sim: &mut Sim, snap: &Snapshot) {
    if !(snap.ready.pvcs && snap.ready.pvs && snap.ready.pods) {
        return;
    }
    for pvc in &snap.pvcs {
        let ns = pvc.metadata.namespace.clone().unwrap_or_default();
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let uid = pvc.metadata.uid.clone().unwrap_or_default();
        if pvc.metadata.deletion_timestamp.is_some() {
            // Storage object in use protection: release the claim once no live pod mounts it.
            let in_use = snap.pods.iter().any(|p| {
                p.metadata.namespace.as_deref() == Some(&ns)
                    && !matches!(crate::util::pod_phase(p), "Succeeded" | "Failed")
                    && p.spec.iter().flat_map(|s| s.volumes.iter().flatten()).any(|v| {
                        v.persistent_volume_claim
                            .as_ref()
                            .is_some_and(|c| c.claim_name == name)
                    })
            });
            if !in_use
                && pvc
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == PVC_PROTECTION)
            {
                let fins = without(&pvc.metadata.finalizers, PVC_PROTECTION);
                sim.merge(
                    &ar::<PersistentVolumeClaim>(),
                    Some(&ns),
                    &name,
                    false,
                    json!({"metadata": {"finalizers": fins}}),
                )
                .await;
            }
            continue;
        }
        let spec = pvc.spec.clone().unwrap_or_default();
        let phase = pvc
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let pv_name = spec
            .volume_name
            .clone()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| format!("pvc-{uid}"));
        let pv = snap
            .pvs
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&pv_name));
        if phase == "Bound" && pv.is_some() {
            continue;
        }
        let seen = sim.first_seen(&format!("pvc/{uid}"));
        if !sim.elapsed(seen, sim.cfg.delays.volume_binding) {
            continue;
        }
        let class = spec
            .storage_class_name
            .clone()
            .unwrap_or_else(|| sim.cfg.storage_class.clone());
        let storage = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".to_string());
        let modes = spec
            .access_modes
            .clone()
            .unwrap_or_else(|| vec!["ReadWriteOnce".to_string()]);
        if pv.is_none() {
            let obj = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": pv_name,
                    "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
                },
                "spec": {
                    "capacity": {"storage": storage},
                    "accessModes": modes,
                    "persistentVolumeReclaimPolicy": "Delete",
                    "storageClassName": class,
                    "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                    "hostPath": {"path": format!("/var/lib/kudo-sim/{pv_name}"), "type": ""},
                    "claimRef": {
                        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "namespace": ns, "name": name, "uid": uid,
                        "resourceVersion": pvc.metadata.resource_version,
                    },
                },
            });
            if sim.create(&ar::<PersistentVolume>(), None, obj).await {
                sim.event(
                    &InvolvedObject::of(pvc.as_ref()),
                    "Normal",
                    "ProvisioningSucceeded",
                    &format!("Successfully provisioned volume {pv_name}"),
                    PROVISIONER,
                    None,
                    None,
                )
                .await;
            }
            continue;
        }
        // Bind: claim points at the volume, both report Bound.
        let mut meta_patch = json!({"metadata": {"annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": PROVISIONER,
        }}});
        if spec.volume_name.as_deref().unwrap_or("").is_empty() {
            meta_patch["spec"] = json!({"volumeName": pv_name});
        }
        let cur = serde_json::to_value(pvc.as_ref()).unwrap_or_default();
        if merge_patch_changes(&cur, &meta_patch) {
            sim.merge(
                &ar::<PersistentVolumeClaim>(),
                Some(&ns),
                &name,
                false,
                meta_patch,
            )
            .await;
        }
        // Retroactive default class assignment (allowed by Kubernetes since 1.28); servers that
        // treat the class as immutable refuse it, which is harmless, so it is tried once.
        if spec.storage_class_name.is_none() && sim.mem.once.insert(format!("pvc-class/{uid}")) {
            sim.merge(
                &ar::<PersistentVolumeClaim>(),
                Some(&ns),
                &name,
                false,
                json!({"spec": {"storageClassName": class}}),
            )
            .await;
        }
        let capacity = pv
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or(storage);
        sim.merge(
            &ar::<PersistentVolumeClaim>(),
            Some(&ns),
            &name,
            true,
            json!({"status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": capacity}}}),
        )
        .await;
    }
    for pv in &snap.pvs {
        let name = pv.metadata.name.clone().unwrap_or_default();
        let ours = pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("pv.kubernetes.io/provisioned-by"))
            .is_some_and(|p| p == PROVISIONER);
        if pv.metadata.deletion_timestamp.is_some() {
            if ours
                && pv
                    .metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == PV_PROTECTION)
            {
                let fins = without(&pv.metadata.finalizers, PV_PROTECTION);
                sim.merge(
                    &ar::<PersistentVolume>(),
                    None,
                    &name,
                    false,
                    json!({"metadata": {"finalizers": fins}}),
                )
                .await;
            }
            continue;
        }
        let Some(claim) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            continue;
        };
        let bound = snap.pvcs.iter().find(|c| {
            c.metadata.namespace == claim.namespace
                && c.metadata.name == claim.name
                && (claim.uid.is_none() || c.metadata.uid == claim.uid)
        });
        let phase = pv
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        match bound {
            Some(_) => {
                if phase != "Bound" {
                    sim.merge(
                        &ar::<PersistentVolume>(),
                        None,
                        &name,
                        true,
                        json!({"status": {"phase": "Bound"}}),
                    )
                    .await;
                }
            }
            None => {
                let reclaim = pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.persistent_volume_reclaim_policy.clone())
                    .unwrap_or_else(|| "Delete".into());
                if ours && reclaim == "Delete" {
                    sim.delete(
                        &ar::<PersistentVolume>(),
                        None,
                        &name,
                        None,
                        pv.metadata.uid.as_deref(),
                        false,
                    )
                    .await;
                } else if phase != "Released" {
                    sim.merge(
                        &ar::<PersistentVolume>(),
                        None,
                        &name,
                        true,
                        json!({"status": {"phase": "Released"}}),
                    )
                    .await;
                }
            }
        }
    }
}
