//! Cost of the patch paths the API server runs on every write: server-side apply of a
//! typical Deployment (create, no-op re-apply, changed re-apply), managedFields
//! bookkeeping of an update, and a strategic merge patch.

// `criterion_group!` defines a public function a doc comment cannot reach.
#![allow(missing_docs)]

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use kudo_patch::{Gvk, ssa, strategic};
use serde_json::{Value, json};

fn deployment(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default",
            "labels": {"app": "web", "kudo.dev/instance": "i"},
            "annotations": {"kudo.dev/plan": "deploy"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": image,
                         "ports": [{"containerPort": 80}, {"containerPort": 443}],
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
                                 {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                         "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                        {"name": "sidecar", "image": "envoy:1", "args": ["--x", "--y"]}
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        }
    })
}

fn bench(c: &mut Criterion) {
    let gvk = Gvk::new("apps", "v1", "Deployment");
    let now = "2026-11-21T10:00:00Z";
    let v1 = deployment("nginx:1.25");
    let v2 = deployment("nginx:1.27");
    let live = ssa::apply(None, &v1, "kudo", false, &gvk, now).expect("create");

    c.bench_function("ssa_apply_create_deployment", |b| {
        b.iter(|| ssa::apply(None, black_box(&v1), "kudo", false, &gvk, now))
    });
    c.bench_function("ssa_apply_noop_deployment", |b| {
        b.iter(|| ssa::apply(Some(black_box(&live)), black_box(&v1), "kudo", false, &gvk, now))
    });
    c.bench_function("ssa_apply_change_deployment", |b| {
        b.iter(|| ssa::apply(Some(black_box(&live)), black_box(&v2), "kudo", false, &gvk, now))
    });
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(5);
    c.bench_function("record_update_deployment", |b| {
        b.iter(|| {
            ssa::record_update(
                Some(black_box(&live)),
                black_box(&edited),
                "kubectl-edit",
                "Update",
                None,
                &gvk,
                now,
            )
        })
    });
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
        "containers": [{"name": "web", "image": "nginx:1.27"}]}}}});
    c.bench_function("strategic_patch_deployment", |b| {
        b.iter(|| strategic::apply(black_box(&live), black_box(&patch), &gvk))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
