//! `events.k8s.io/v1` Events are a second view of core `v1` Events, as on a real server: both are
//! stored once (in the core shape), so an event written by kube-rs's `Recorder` (events.k8s.io) shows in
//! `kubectl describe` (which reads core events), and the other way round.

use serde_json::{Map, Value};

/// Field renames between the two shapes: (events.k8s.io/v1 name, core v1 name).
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: &Value, to_core: bool) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let mapped = RENAMES.iter().find_map(|(new, core)| {
            if to_core && k == new {
                Some(*core)
            } else if !to_core && k == core {
                Some(*new)
            } else {
                None
            }
        });
        out.insert(mapped.unwrap_or(k).to_string(), v.clone());
    }
    Value::Object(out)
}

/// events.k8s.io/v1 shape → stored core shape.
pub fn to_core(obj: &Value) -> Value {
    let mut v = rename(obj, true);
    v["apiVersion"] = Value::from("v1");
    v
}

/// Stored core shape → events.k8s.io/v1 shape.
pub fn from_core(obj: &Value) -> Value {
    let mut v = rename(obj, false);
    v["apiVersion"] = Value::from("events.k8s.io/v1");
    v
}
