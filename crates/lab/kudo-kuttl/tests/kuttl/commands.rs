use std::collections::BTreeMap;

use kudo_kuttl::command::{build_argv, expand_env, split_args};
use kudo_kuttl::config::Command;

fn vars() -> BTreeMap<String, String> {
    BTreeMap::from([("NAMESPACE".to_string(), "kuttl-test-x".to_string())])
}

#[test]
fn variables_expand_in_both_forms() {
    assert_eq!(expand_env("-n $NAMESPACE", &vars()), "-n kuttl-test-x");
    assert_eq!(expand_env("${NAMESPACE}-suffix", &vars()), "kuttl-test-x-suffix");
    assert_eq!(expand_env("$KUTTL_SURELY_UNSET_VAR.", &vars()), ".");
    assert_eq!(expand_env("cost $5", &vars()), "cost $5");
}

#[test]
fn words_split_like_a_shell() {
    assert_eq!(
        split_args("a  'b c' \"d \\\"e\\\"\" f\\ g").unwrap(),
        vec!["a", "b c", "d \"e\"", "f g"]
    );
    assert_eq!(split_args("x ''").unwrap(), vec!["x", ""]);
    assert!(split_args("a 'b").is_err());
}

#[test]
fn namespaced_commands_get_a_namespace_unless_they_have_one() {
    let c = Command {
        command: "kubectl get pods".into(),
        namespaced: true,
        ..Command::default()
    };
    assert_eq!(
        build_argv(&c, "ns1", &vars()).unwrap(),
        vec!["kubectl", "get", "pods", "--namespace", "ns1"]
    );
    let c = Command {
        command: "kubectl get pods -n other".into(),
        namespaced: true,
        ..Command::default()
    };
    assert_eq!(
        build_argv(&c, "ns1", &vars()).unwrap(),
        vec!["kubectl", "get", "pods", "-n", "other"]
    );
    let c = Command {
        command: "kubectl get pods --namespace=$NAMESPACE".into(),
        ..Command::default()
    };
    assert_eq!(
        build_argv(&c, "ns1", &vars()).unwrap(),
        vec!["kubectl", "get", "pods", "--namespace=kuttl-test-x"]
    );
}

#[test]
fn scripts_and_invalid_combinations() {
    let c = Command {
        script: "echo $NAMESPACE | wc -c".into(),
        ..Command::default()
    };
    assert_eq!(
        build_argv(&c, "ns", &vars()).unwrap(),
        vec!["sh", "-c", "echo $NAMESPACE | wc -c"]
    );
    let both = Command {
        script: "x".into(),
        command: "y".into(),
        ..Command::default()
    };
    assert!(build_argv(&both, "ns", &vars()).is_err());
    assert!(build_argv(&Command::default(), "ns", &vars()).is_err());
    let ns_script = Command {
        script: "x".into(),
        namespaced: true,
        ..Command::default()
    };
    assert!(build_argv(&ns_script, "ns", &vars()).is_err());
}
