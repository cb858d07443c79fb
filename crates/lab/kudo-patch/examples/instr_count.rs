//! Runs each patch path a fixed number of times, for load-independent cost measurement
//! under `valgrind --tool=callgrind` (instructions per call = total / iterations):
//! `cargo build --release -p kudo-patch --example instr_count` then
//! `valgrind --tool=callgrind target/release/examples/instr_count <case> 200`.

use kudo_patch::{Gvk, ssa, strategic};
use serde_json::{Value, json};

fn deployment(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "web", "image": image, "ports": [{"containerPort": 80}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "resources": {"limits": {"cpu": "1"}}},
                {"name": "sidecar", "image": "envoy:1"}]}}}
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "create".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let gvk = Gvk::new("apps", "v1", "Deployment");
    let now = "2026-11-21T10:00:00Z";
    let v1 = deployment("nginx:1.25");
    let v2 = deployment("nginx:1.27");
    let live = ssa::apply(None, &v1, "kudo", false, &gvk, now).expect("create");
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(5);
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "x"}]}}}});
    let mut sink = 0usize;
    for _ in 0..n {
        let out = match case.as_str() {
            "create" => ssa::apply(None, &v1, "kudo", false, &gvk, now).expect("apply"),
            "noop" => ssa::apply(Some(&live), &v1, "kudo", false, &gvk, now).expect("apply"),
            "change" => ssa::apply(Some(&live), &v2, "kudo", false, &gvk, now).expect("apply"),
            "update" => ssa::record_update(Some(&live), &edited, "e", "Update", None, &gvk, now),
            "smp" => strategic::apply(&live, &patch, &gvk).expect("smp"),
            other => panic!("unknown case {other}"),
        };
        sink += out.as_object().map_or(0, |m| m.len());
    }
    println!("{case}: {n} iterations ({sink})");
}
