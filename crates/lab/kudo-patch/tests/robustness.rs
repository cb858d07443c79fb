//! Malformed and random inputs must produce values or errors with a proper HTTP status,
//! never panics: the API server feeds these functions with whatever clients send.

use kudo_patch::{Gvk, json_patch, merge, ssa, strategic};
use serde_json::{Map, Value, json};

/// Small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "finalizers",
    "managedFields",
    "spec",
    "template",
    "containers",
    "ports",
    "containerPort",
    "protocol",
    "env",
    "value",
    "image",
    "status",
    "data",
    "selector",
    "strategy",
    "volumes",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/finalizers",
    "fieldsV1",
    "f:spec",
    "k:{\"name\":\"a\"}",
    "manager",
    "operation",
];

fn value(rng: &mut Rng, depth: u32) -> Value {
    let pick = if depth == 0 { rng.below(5) } else { rng.below(8) };
    match pick {
        0 => Value::Null,
        1 => json!(rng.below(3) == 0),
        2 => json!(rng.below(100)),
        3 => json!(["a", "b", "replace", "delete", "merge", "name"][rng.below(6) as usize]),
        4 => json!(KEYS[rng.below(KEYS.len() as u64) as usize]),
        5 | 6 => {
            let mut m = Map::new();
            for _ in 0..rng.below(5) {
                let k = KEYS[rng.below(KEYS.len() as u64) as usize];
                m.insert(k.to_string(), value(rng, depth - 1));
            }
            Value::Object(m)
        }
        _ => Value::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
    }
}

fn json_patch_op(rng: &mut Rng) -> Value {
    let ops = ["add", "remove", "replace", "move", "copy", "test", "bogus"];
    let paths = [
        "",
        "/",
        "/spec",
        "/spec/containers/0",
        "/spec/containers/-",
        "/a~1b",
        "/x/-1",
        "/metadata/finalizers",
        "/9/9",
    ];
    let mut op = json!({
        "op": ops[rng.below(ops.len() as u64) as usize],
        "path": paths[rng.below(paths.len() as u64) as usize],
        "from": paths[rng.below(paths.len() as u64) as usize],
    });
    if rng.below(4) != 0 {
        op["value"] = value(rng, 2);
    }
    op
}

fn allowed(code: u16) -> bool {
    matches!(code, 400 | 409 | 422 | 500)
}

#[test]
fn random_inputs_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let gvks = [
        Gvk::new("apps", "v1", "Deployment"),
        Gvk::new("", "v1", "ConfigMap"),
        Gvk::new("example.com", "v1", "Thing"),
    ];
    let mut outcomes = [0usize; 2];
    for i in 0..3000 {
        let gvk = &gvks[i % gvks.len()];
        let doc = value(&mut rng, 4);
        let patch = value(&mut rng, 4);

        let ops: Vec<Value> = (0..rng.below(4)).map(|_| json_patch_op(&mut rng)).collect();
        match json_patch::apply(&doc, &Value::Array(ops)) {
            Ok(_) => outcomes[0] += 1,
            Err(e) => {
                assert!(allowed(e.status_code()), "{e:?}");
                outcomes[1] += 1;
            }
        }
        let _merged: Value = merge::apply(&doc, &patch);
        match strategic::apply(&doc, &patch, gvk) {
            Ok(v) => assert!(v.is_object()),
            Err(e) => assert!(allowed(e.status_code()), "{e:?}"),
        }

        let mut applied = value(&mut rng, 4);
        if rng.below(3) != 0
            && let Some(m) = applied.as_object_mut()
        {
            m.insert("apiVersion".into(), json!(gvk.api_version()));
            m.insert("kind".into(), json!(gvk.kind));
        }
        let live = if rng.below(2) == 0 {
            None
        } else {
            Some(doc.clone())
        };
        match ssa::apply(
            live.as_ref(),
            &applied,
            "m",
            rng.below(2) == 0,
            gvk,
            "2026-01-01T00:00:00Z",
        ) {
            Ok(v) => assert!(v.is_object()),
            Err(e) => assert!(allowed(e.status_code()), "{e:?}"),
        }
        let new = value(&mut rng, 4);
        let _recorded = ssa::record_update(
            live.as_ref(),
            &new,
            "u",
            "Update",
            None,
            gvk,
            "2026-01-01T00:00:00Z",
        );
    }
    // The generator must exercise both outcomes, or the test proves little.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn malformed_managed_fields_are_reported_not_panicking() {
    let gvk = Gvk::new("", "v1", "ConfigMap");
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a",
        "managedFields": [{"manager": "x", "operation": "Apply", "fieldsType": "FieldsV1",
                           "fieldsV1": {"q:bad": {}}}]}});
    let applied =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let err = ssa::apply(Some(&live), &applied, "m", false, &gvk, "2026-01-01T00:00:00Z").unwrap_err();
    assert_eq!(err.status_code(), 500);
    assert!(err.to_string().starts_with("failed to decode managed fields"));
}
