//! The files of a pod's ConfigMap, Secret and projected volumes, read from the API once, when its
//! containers start (as the kubelet mounts them then): every key a file (or the `items` listed,
//! at their paths), with `defaultMode`/`mode`. A ConfigMap or Secret that cannot be read leaves
//! its volume empty.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath, Pod, Secret};
use kube::Api;

use crate::engine::Sim;
use crate::shell::{Meta, Tree};

/// Whether the pod has volumes whose files come from ConfigMaps or Secrets.
pub(crate) fn has_file_volumes(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.config_map.is_some() || v.secret.is_some() || v.projected.is_some())
}

/// The files of one ConfigMap's or Secret's keys, as a volume presents them.
fn entries(
    data: Vec<(String, Vec<u8>)>,
    items: Option<&Vec<KeyToPath>>,
    mode: i32,
    out: &mut Vec<(String, Vec<u8>, u32)>,
) {
    let mode = |m: Option<i32>| u32::try_from(m.unwrap_or(mode)).unwrap_or(0o644);
    match items {
        None => out.extend(data.into_iter().map(|(k, v)| (k, v, mode(None)))),
        Some(items) => {
            for i in items {
                if let Some((_, v)) = data.iter().find(|(k, _)| *k == i.key) {
                    out.push((i.path.clone(), v.clone(), mode(i.mode)));
                }
            }
        }
    }
}

async fn config_map(api: &Api<ConfigMap>, name: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(Some(cm)) = api.get_opt(name).await else {
        return Vec::new();
    };
    let text = cm
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()));
    let binary = cm
        .binary_data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0));
    text.chain(binary).collect()
}

async fn secret(api: &Api<Secret>, name: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(Some(s)) = api.get_opt(name).await else {
        return Vec::new();
    };
    let data = s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0));
    let string = s
        .string_data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()));
    data.chain(string).collect()
}

/// The data of the ConfigMaps and Secrets a pod's volumes present, by `(kind, name)`.
pub type VolumeData = HashMap<(&'static str, String), Vec<(String, Vec<u8>)>>;

/// The `(kind, name)` of every ConfigMap and Secret the pod's volumes present.
fn sources(pod: &Pod) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        out.extend(v.config_map.as_ref().map(|c| ("ConfigMap", c.name.clone())));
        out.extend(
            v.secret
                .as_ref()
                .and_then(|s| s.secret_name.clone())
                .map(|n| ("Secret", n)),
        );
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            out.extend(src.config_map.as_ref().map(|c| ("ConfigMap", c.name.clone())));
            out.extend(src.secret.as_ref().map(|s| ("Secret", s.name.clone())));
        }
    }
    out
}

/// Volume name → its files, for the pod's ConfigMap, Secret and projected volumes, read from the
/// API.
pub(crate) async fn volume_files(sim: &Sim, pod: &Pod) -> HashMap<String, Tree> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let cms: Api<ConfigMap> = Api::namespaced(sim.client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(sim.client.clone(), &ns);
    let mut data = VolumeData::new();
    for (kind, name) in sources(pod) {
        let d = if kind == "ConfigMap" {
            config_map(&cms, &name).await
        } else {
            secret(&secrets, &name).await
        };
        data.insert((kind, name), d);
    }
    volume_trees(pod, &data)
}

/// Volume name → its files, for the pod's ConfigMap, Secret and projected volumes, from `data`
/// (what the API holds, or what a package renders).
pub fn volume_trees(pod: &Pod, data: &VolumeData) -> HashMap<String, Tree> {
    let get =
        |kind: &'static str, name: &str| data.get(&(kind, name.to_string())).cloned().unwrap_or_default();
    let mut out = HashMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let mut files = Vec::new();
        if let Some(c) = &v.config_map {
            entries(
                get("ConfigMap", &c.name),
                c.items.as_ref(),
                c.default_mode.unwrap_or(0o644),
                &mut files,
            );
        } else if let Some(s) = &v.secret {
            let data = get("Secret", s.secret_name.as_deref().unwrap_or_default());
            entries(
                data,
                s.items.as_ref(),
                s.default_mode.unwrap_or(0o644),
                &mut files,
            );
        } else if let Some(p) = &v.projected {
            let mode = p.default_mode.unwrap_or(0o644);
            for src in p.sources.iter().flatten() {
                if let Some(c) = &src.config_map {
                    entries(get("ConfigMap", &c.name), c.items.as_ref(), mode, &mut files);
                }
                if let Some(s) = &src.secret {
                    entries(get("Secret", &s.name), s.items.as_ref(), mode, &mut files);
                }
            }
        } else {
            continue;
        }
        out.insert(v.name.clone(), tree(files));
    }
    out
}

fn tree(files: Vec<(String, Vec<u8>, u32)>) -> Tree {
    let modes: Vec<(String, u32)> = files.iter().map(|(p, _, m)| (p.clone(), *m)).collect();
    let mut t = Tree::with_files(files.into_iter().map(|(p, d, _)| (p, d)));
    for (p, mode) in modes {
        t.set_meta(&p, Meta { mode, uid: 0, gid: 0 });
    }
    t
}
