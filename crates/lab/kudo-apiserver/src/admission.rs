//! Mutating admission a real kube-apiserver runs on create that our storage must mirror, so
//! objects read back look as they do on a real cluster (kuttl asserts compare whole lists).
//!
//! **ServiceAccount admission** (pods): `spec.serviceAccountName` defaults to `default` (and the
//! deprecated `spec.serviceAccount` mirrors it); unless the pod sets
//! `automountServiceAccountToken: false`, a projected volume `kube-api-access-<5 chars>` (token,
//! `kube-root-ca.crt`, namespace — the v1.28 layout) is added and mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container and init container that
//! does not mount something there already. The suffix is derived from the pod's name and
//! namespace (the real server draws it at random) so the embedded cluster stays deterministic.

use serde_json::{Value, json};

/// Where the token volume is mounted.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The alphabet of Kubernetes' random name suffixes (no vowels, no confusable digits).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn suffix(seed: &str) -> String {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (0..5)
        .map(|i| ALPHABET[((h >> (i * 8)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// Applies ServiceAccount admission to a pod being created.
pub fn service_account(pod: &mut Value) {
    let seed = format!(
        "{}/{}",
        pod.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        pod.pointer("/metadata/name")
            .or_else(|| pod.pointer("/metadata/generateName"))
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| {
            spec.get("serviceAccount")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    if spec.get("automountServiceAccountToken") == Some(&json!(false)) {
        return;
    }
    let mounted = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .is_some_and(|ms| ms.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH))
    };
    let containers = ["containers", "initContainers"];
    let needs = containers.iter().any(|list| {
        spec.get(*list)
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| !mounted(c)))
    });
    if !needs {
        return;
    }
    let name = format!("kube-api-access-{}", suffix(&seed));
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(vs) = volumes.as_array_mut() {
        vs.push(json!({
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}}
                ]
            }
        }));
    }
    for list in containers {
        let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut() {
            if mounted(c) {
                continue;
            }
            let Some(cm) = c.as_object_mut() else { continue };
            let mounts = cm.entry("volumeMounts").or_insert_with(|| json!([]));
            if let Some(ms) = mounts.as_array_mut() {
                ms.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_the_token_volume_in_every_container_once() {
        let mut pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"name": "a", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}, {"name": "b"}],
                "initContainers": [{"name": "i"}],
                "volumes": [{"name": "data", "emptyDir": {}}]
            }
        });
        service_account(&mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        let vol = spec["volumes"][1]["name"].as_str().unwrap().to_string();
        assert!(vol.starts_with("kube-api-access-") && vol.len() == "kube-api-access-".len() + 5);
        for c in ["/containers/0", "/containers/1", "/initContainers/0"] {
            let ms = spec
                .pointer(&format!("{c}/volumeMounts"))
                .unwrap()
                .as_array()
                .unwrap();
            let last = ms.last().unwrap();
            assert_eq!(last["mountPath"], TOKEN_MOUNT_PATH);
            assert_eq!(last["name"], vol.as_str());
            assert_eq!(last["readOnly"], true);
        }
        assert_eq!(spec["containers"][0]["volumeMounts"][0]["name"], "data");
        // Idempotent: a second pass (an update) adds nothing.
        let before = pod.clone();
        service_account(&mut pod);
        assert_eq!(pod, before);
    }

    #[test]
    fn opt_out_and_named_service_account() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "serviceAccountName": "builder", "automountServiceAccountToken": false,
            "containers": [{"name": "a"}]}});
        service_account(&mut pod);
        assert_eq!(pod["spec"]["serviceAccount"], "builder");
        assert!(pod["spec"].get("volumes").is_none());
        assert!(pod["spec"]["containers"][0].get("volumeMounts").is_none());
    }
}
