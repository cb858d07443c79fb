//! `rollout start --dry-run`: the Instances a rollout would take, the wave each would be in and
//! what its change would be judged, without writing anything. The waves come from the manager's
//! own first decision ([`kudo_engine::rollout::decide`] over the Instances as they are now).

use std::collections::HashMap;

use kudo_api::rollout::{Rollout, RolloutSpec};
use kudo_api::{Instance, OperatorVersion};
use kudo_engine::rollout::{Observed, Seen};

use super::selected;
use crate::Result;
use crate::cluster::Cluster;

/// One Instance of the preview.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The Instance as read now.
    pub instance: Instance,
    /// Its wave (`""`: none, it has the target already).
    pub wave: String,
    /// The OperatorVersion it runs and the one the change gives it (`None`: missing).
    pub current_ov: Option<OperatorVersion>,
    /// The OperatorVersion the change would give it, where the Instance looks up its own.
    pub target_ov: Option<OperatorVersion>,
    /// The spec the change would write.
    pub proposed: kudo_api::InstanceSpec,
}

/// The waves (in order) and the Instances of each, as the rollout would start.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The names of the waves, in the order they would run.
    pub waves: Vec<String>,
    /// Every Instance the rollout would take, with its wave.
    pub instances: Vec<Planned>,
}

/// The OperatorVersions the Instances run and would run, by (namespace, name); `None`: missing.
type Ovs = HashMap<(String, String), Option<OperatorVersion>>;

/// Reads every OperatorVersion `instances` run and would run once `spec` changed them.
async fn read_ovs(cluster: &Cluster, instances: &[Instance], spec: &RolloutSpec) -> Result<Ovs> {
    let mut ovs = Ovs::new();
    for inst in instances {
        let proposed = kudo_engine::rollout::proposed(inst, &spec.target);
        for s in [&inst.spec, &proposed] {
            let ns = s
                .operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or_default())
                .to_string();
            let key = (ns.clone(), s.operator_version.name.clone());
            if let std::collections::hash_map::Entry::Vacant(slot) = ovs.entry(key) {
                let c = Cluster {
                    client: cluster.client.clone(),
                    namespace: ns,
                };
                let name = slot.key().1.clone();
                slot.insert(c.get(crate::cluster::KudoKind::OperatorVersion, &name).await?);
            }
        }
    }
    Ok(ovs)
}

/// Lists what `spec` selects in `namespaces` (empty: every namespace) and places it into waves.
pub async fn preview(
    cluster: &Cluster,
    name: &str,
    spec: &RolloutSpec,
    namespaces: &[String],
) -> Result<Preview> {
    let instances = selected(cluster, spec, namespaces).await?;
    let ovs = read_ovs(cluster, &instances, spec).await?;
    let ov_of = |inst: &Instance, s: &kudo_api::InstanceSpec| {
        let ns = s.operator_version_namespace(inst.metadata.namespace.as_deref().unwrap_or_default());
        ovs.get(&(ns.to_string(), s.operator_version.name.clone()))
            .cloned()
            .flatten()
    };
    let planned: Vec<Planned> = instances
        .iter()
        .map(|i| {
            let proposed = kudo_engine::rollout::proposed(i, &spec.target);
            Planned {
                instance: i.clone(),
                wave: String::new(),
                current_ov: ov_of(i, &i.spec),
                target_ov: ov_of(i, &proposed),
                proposed,
            }
        })
        .collect();
    Ok(place(name, spec, planned))
}

/// The manager's first decision over `planned`: the waves, and the wave of each Instance.
fn place(name: &str, spec: &RolloutSpec, planned: Vec<Planned>) -> Preview {
    let rollout = Rollout {
        api_version: kudo_api::rollout::API_VERSION.into(),
        kind: kudo_api::rollout::KIND.into(),
        metadata: kudo_api::ObjectMeta {
            name: name.to_string(),
            ..Default::default()
        },
        spec: spec.clone(),
        status: None,
    };
    let seen = planned
        .iter()
        .map(|p| Seen {
            instance: &p.instance,
            current_ov: p.current_ov.as_ref(),
            target_ov: p.target_ov.as_ref(),
            revisions: None,
        })
        .collect();
    let d = kudo_engine::rollout::decide(&Observed {
        rollout: &rollout,
        instances: seen,
        now: kudo_engine::Timestamp::from_unix(0),
    });
    let wave_of: HashMap<&str, &str> = d
        .status
        .instances
        .iter()
        .map(|e| (e.name.as_str(), e.wave.as_str()))
        .collect();
    let order: HashMap<&str, usize> = d
        .status
        .waves
        .iter()
        .enumerate()
        .map(|(i, w)| (w.name.as_str(), i))
        .collect();
    let mut out: Vec<Planned> = planned
        .into_iter()
        .map(|mut p| {
            let key = kudo_engine::rollout::key(&p.instance);
            p.wave = wave_of.get(key.as_str()).unwrap_or(&"").to_string();
            p
        })
        .collect();
    out.sort_by_key(|p| {
        (
            order.get(p.wave.as_str()).copied(),
            kudo_engine::rollout::key(&p.instance),
        )
    });
    Preview {
        waves: d.status.waves.iter().map(|w| w.name.clone()).collect(),
        instances: out,
    }
}
