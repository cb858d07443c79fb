//! Bounded property tests of the patch documents the API server applies: JSON Patch,
//! JSON merge patch, strategic merge patch and server-side apply, fed with generated JSON trees and
//! with mutated patch *text* (as it arrives in a request body). Properties: a result or an error
//! with an HTTP status, never a panic, bounded heap. `PROPTEST_CASES=N` for a longer local run.
//! (`tests/robustness.rs` keeps its own fixed-seed generator; this adds shrinking and text input.)

#[path = "../../../kudo-template/tests/support/bounded_fuzz.rs"]
mod bounded_fuzz;

use bounded_fuzz::{MAX_PEAK, bounded, config, mutated};
use kudo_patch::{Gvk, json_patch, merge, ssa, strategic};
use proptest::prelude::*;
use serde_json::{Value, json};

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "labels",
    "spec",
    "containers",
    "ports",
    "containerPort",
    "env",
    "value",
    "finalizers",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "managedFields",
    "fieldsV1",
    "f:spec",
    "k:{\"name\":\"a\"}",
    "op",
    "path",
    "from",
    "0",
    "-",
    "~1",
    "",
];

fn json_tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        prop::sample::select(KEYS).prop_map(|s| json!(s)),
        prop::sample::select(
            &[
                "add", "remove", "replace", "move", "copy", "test", "/spec", "/a/0", "/a/-", "/", "", "/~2"
            ][..]
        )
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn status_ok(code: u16) -> bool {
    matches!(code, 400 | 409 | 422 | 500)
}

fn apply_all(doc: &Value, patch: &Value) {
    let gvk = Gvk::new("apps", "v1", "Deployment");
    bounded("patches", MAX_PEAK, || {
        if let Err(e) = json_patch::apply(doc, patch) {
            assert!(
                status_ok(e.status_code()),
                "json patch status {}",
                e.status_code()
            );
        }
        let _ = merge::apply(doc, patch);
        if let Err(e) = strategic::apply(doc, patch, &gvk) {
            assert!(status_ok(e.status_code()), "strategic status {}", e.status_code());
        }
        let _ = ssa::apply(Some(doc), patch, "fuzz", false, &gvk, "2026-01-01T00:00:00Z");
        let _ = ssa::apply(None, patch, "fuzz", true, &gvk, "2026-01-01T00:00:00Z");
    });
}

const JSON_PATCH: &str = r#"[{"op":"add","path":"/metadata/labels/a","value":"b"},{"op":"replace","path":"/spec/replicas","value":3},{"op":"move","from":"/spec/a","path":"/spec/b"},{"op":"test","path":"/kind","value":"Deployment"},{"op":"remove","path":"/spec/template/spec/containers/0"}]"#;
const SMP: &str = r#"{"metadata":{"labels":{"x":null}},"spec":{"template":{"spec":{"containers":[{"name":"a","image":"b","$patch":"delete"}],"$setElementOrder/containers":[{"name":"a"}]}},"$retainKeys":["replicas"]}}"#;
const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "0",
    "-1",
    "1e999",
    "\"op\"",
    "\"path\"",
    "\"/\"",
    "\"$patch\"",
    "\"delete\"",
    "\"replace\"",
    "\\u0000",
    "\\",
    " ",
    "[[[[[[[[",
    "{\"a\":",
];

proptest! {
    #![proptest_config(config(600))]

    #[test]
    fn generated_documents_and_patches(doc in json_tree(), patch in json_tree()) {
        apply_all(&doc, &patch);
    }

    #[test]
    fn mutated_patch_text(jp in mutated(JSON_PATCH, JSON_TOKENS), smp in mutated(SMP, JSON_TOKENS), doc in json_tree()) {
        for text in [&jp, &smp] {
            if let Ok(patch) = serde_json::from_str::<Value>(text) {
                apply_all(&doc, &patch);
            }
        }
    }
}
