//! Expected results follow kuttl's documented subset rule: maps are matched key by key (extra
//! actual keys ignored), lists must have the same length and match element by element in order.

use kudo_kuttl::matching::{closest, is_subset, mismatches, prune_to_expected, unified_diff};
use serde_json::json;

#[test]
fn extra_actual_fields_are_ignored() {
    let exp = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let act = json!({"metadata": {"name": "a", "uid": "1", "labels": {"x": "y"}}, "data": {"k": "v", "other": "w"}});
    assert!(is_subset(&exp, &act));
}

#[test]
fn missing_and_different_fields_are_listed_with_paths() {
    let exp =
        json!({"data": {"k": "v", "gone": "x"}, "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
    let act = json!({"data": {"k": "w"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
    let m = mismatches(&exp, &act);
    let paths: Vec<&str> = m.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, vec![".data.k", ".data.gone", ".spec.containers[0].image"]);
    assert!(m[1].message.contains("missing"));
}

#[test]
fn lists_need_equal_length_and_order() {
    let act = json!({"l": [{"name": "a", "x": 1}, {"name": "b"}]});
    assert!(is_subset(&json!({"l": [{"name": "a"}, {"name": "b"}]}), &act));
    assert!(
        !is_subset(&json!({"l": [{"name": "a"}]}), &act),
        "a shorter list does not match"
    );
    assert!(
        !is_subset(&json!({"l": [{"name": "b"}, {"name": "a"}]}), &act),
        "order matters"
    );
    let m = mismatches(&json!({"l": [1]}), &json!({"l": [1, 2]}));
    assert!(m[0].message.contains("length"), "{:?}", m);
}

#[test]
fn scalars_compare_by_type_and_value() {
    assert!(
        !is_subset(&json!({"a": "1"}), &json!({"a": 1})),
        "string vs number"
    );
    assert!(
        is_subset(&json!({"a": 1}), &json!({"a": 1.0})),
        "numbers by value"
    );
    assert!(!is_subset(&json!({"a": 2}), &json!({"a": 1})));
    assert!(!is_subset(&json!({"a": true}), &json!({"a": "true"})));
    assert!(is_subset(&json!({"a": null}), &json!({"a": null})));
    assert!(
        !is_subset(&json!({"a": null}), &json!({})),
        "a null still needs the key"
    );
    assert!(
        is_subset(&json!({"a": {}}), &json!({"a": {"b": 1}})),
        "an empty map matches any map"
    );
    let m = mismatches(&json!({"a": "1"}), &json!({"a": 1}));
    assert!(m[0].message.contains("type mismatch"), "{:?}", m);
}

#[test]
fn diff_shows_expected_against_pruned_actual() {
    let exp = json!({"kind": "ConfigMap", "data": {"key": "expected"}});
    let act =
        json!({"kind": "ConfigMap", "metadata": {"uid": "noise"}, "data": {"key": "actual", "more": "x"}});
    assert_eq!(
        prune_to_expected(&exp, &act),
        json!({"kind": "ConfigMap", "data": {"key": "actual"}})
    );
    let d = unified_diff(&exp, &act);
    assert!(d.contains("--- expected") && d.contains("+++ actual"), "{d}");
    assert!(d.contains("-  key: expected"), "{d}");
    assert!(d.contains("+  key: actual"), "{d}");
    assert!(!d.contains("noise"), "{d}");
}

#[test]
fn closest_candidate_has_fewest_mismatches() {
    let exp = json!({"a": 1, "b": 2, "c": 3});
    let cands = vec![json!({"a": 0, "b": 0, "c": 3}), json!({"a": 1, "b": 0, "c": 3})];
    let (best, m) = closest(&exp, &cands).expect("non-empty");
    assert_eq!(best, &cands[1]);
    assert_eq!(m.len(), 1);
}
