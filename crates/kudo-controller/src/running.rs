//! Which Instances have a plan scheduled, as the Instance watch last showed them.
//!
//! While a plan runs, a pass looks at the objects it applied; the other children of an Instance
//! (the Pods of a Deployment or a StatefulSet; ReplicaSets are not watched) are read only for the
//! step's waiting lines (their problems) and, once idle, by readiness. Their events therefore wake
//! a running Instance only when a pod has a problem to show ([`crate::cache::Wakes`]): a rollout's
//! ordinary progress reaches the pass through the applied workload's own status. The reconcile
//! that follows the unscheduling computes readiness from the cache as it is then. At `scale 1000`
//! the Pod and ReplicaSet events were about a third of the reconciles otherwise.

use std::collections::HashSet;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde::Deserialize;

/// `(namespace, name)` of the Instances whose `spec.planExecution.planName` is set.
#[derive(Default)]
pub(crate) struct Running(Mutex<HashSet<(String, String)>>);

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    spec: ProbeSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ProbeSpec {
    #[serde(default)]
    plan_execution: ProbeRun,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ProbeRun {
    #[serde(default)]
    plan_name: String,
}

/// Whether the cached Instance (packed or not, see [`crate::cache::pack`]) has a plan scheduled.
fn scheduled(i: &DynamicObject) -> bool {
    let probe: Probe = match &i.data {
        serde_json::Value::String(packed) => serde_json::from_str(packed).unwrap_or_default(),
        other => serde_json::from_value(other.clone()).unwrap_or_default(),
    };
    !probe.spec.plan_execution.plan_name.is_empty()
}

impl Running {
    /// Follows an Instance as a watch event showed it (`present` false: deleted).
    pub fn observe(&self, i: &DynamicObject, present: bool) {
        let key = (i.namespace().unwrap_or_default(), i.name_any());
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if present && scheduled(i) {
            set.insert(key);
        } else {
            set.remove(&key);
        }
    }

    /// Whether the Instance `r` names has a plan scheduled.
    pub fn runs(&self, r: &ObjectRef<DynamicObject>) -> bool {
        let set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let ns = r.namespace.clone().unwrap_or_default();
        set.contains(&(ns, r.name.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(name: &str, plan: &str) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"planExecution": {"planName": plan, "uid": "u"}}
        }))
        .unwrap();
        crate::cache::pack(&mut o);
        o
    }

    fn at(name: &str) -> ObjectRef<DynamicObject> {
        ObjectRef::new_with(name, crate::resources::instance_resource()).within("ns")
    }

    #[test]
    fn an_instance_runs_from_its_scheduling_until_it_is_unscheduled_or_gone() {
        let r = Running::default();
        r.observe(&inst("a", "deploy"), true);
        assert!(r.runs(&at("a")));
        assert!(!r.runs(&at("b")));
        r.observe(&inst("a", ""), true);
        assert!(!r.runs(&at("a")));
        r.observe(&inst("a", "update"), true);
        r.observe(&inst("a", "update"), false);
        assert!(!r.runs(&at("a")));
    }
}
