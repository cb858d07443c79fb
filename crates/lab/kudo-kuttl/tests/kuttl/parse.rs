use kudo_kuttl::config::{DEFAULT_PARALLEL, DEFAULT_TIMEOUT_SECS, TestSuite};
use kudo_kuttl::load::{FileType, load_case, parse_file_name};
use std::path::Path;

use crate::write_tree;

#[test]
fn suite_with_all_fields() {
    let text = r#"
apiVersion: kuttl.dev/v1beta1
kind: TestSuite
crdDir: ./crds
manifestDirs: [./manifests]
testDirs:
  - ./tests/integration
commands:
  - command: kubectl kudo init --wait
    background: false
  - script: echo hi
    background: true
    timeout: -1
startControlPlane: true
simulateWorkloads: true
kindContainers: [kudobuilder/controller:test]
kindNodeCache: true
timeout: 120
parallel: 4
skipDelete: true
artifactsDir: out
"#;
    let s = TestSuite::parse(text, Path::new("kuttl-test.yaml")).expect("parses");
    assert_eq!(s.crd_dir.as_deref(), Some("./crds"));
    assert_eq!(s.manifest_dirs, vec!["./manifests"]);
    assert_eq!(s.test_dirs, vec!["./tests/integration"]);
    assert_eq!(s.commands.len(), 2);
    assert_eq!(s.commands[0].command, "kubectl kudo init --wait");
    assert!(s.commands[1].background);
    assert_eq!(s.commands[1].timeout, -1);
    assert!(s.start_control_plane && s.wants_embedded_cluster());
    assert!(s.simulate_workloads && s.simulates_workloads());
    assert_eq!(s.kind_containers, vec!["kudobuilder/controller:test"]);
    assert_eq!(s.ignored_kind_settings(), ["kindContainers", "kindNodeCache"]);
    assert_eq!((s.timeout_secs(), s.parallelism()), (120, 4));
    assert!(s.skip_delete);
    assert_eq!(s.artifacts_dir.as_deref(), Some("out"));
}

#[test]
fn suite_defaults_and_legacy_group() {
    let text = "apiVersion: kudo.dev/v1alpha1\nkind: TestSuite\nstartKIND: true\ntestDirs: [a]\n";
    let s = TestSuite::parse(text, Path::new("x.yaml")).expect("legacy kind parses");
    assert_eq!(s.timeout_secs(), DEFAULT_TIMEOUT_SECS);
    assert_eq!(s.timeout_secs(), 30);
    assert_eq!(s.parallelism(), DEFAULT_PARALLEL);
    assert!(s.start_kind && s.wants_embedded_cluster() && s.simulates_workloads());
    let plain = TestSuite::parse(
        "kind: TestSuite
startControlPlane: true
",
        Path::new("y.yaml"),
    )
    .unwrap();
    assert!(plain.wants_embedded_cluster() && !plain.simulates_workloads());
}

#[test]
fn suite_of_wrong_kind_is_rejected() {
    let err = TestSuite::parse("apiVersion: v1\nkind: ConfigMap\n", Path::new("x.yaml")).unwrap_err();
    assert!(err.to_string().contains("expected kind TestSuite"), "{err}");
    let err = TestSuite::parse("", Path::new("x.yaml")).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let err = TestSuite::parse("kind: [", Path::new("x.yaml")).unwrap_err();
    assert!(err.to_string().contains("invalid YAML"), "{err}");
}

#[test]
fn file_names_follow_kuttls_pattern() {
    let f = parse_file_name("00-install.yaml").expect("valid");
    assert_eq!(
        (f.index, f.file_type, f.step_name.as_str()),
        (Some(0), FileType::Apply, "install")
    );
    let f = parse_file_name("01-assert.yaml").expect("valid");
    assert_eq!((f.index, f.file_type), (Some(1), FileType::Assert));
    let f = parse_file_name("12-errors-pods.yaml").expect("valid");
    assert_eq!((f.index, f.file_type), (Some(12), FileType::Errors));
    let f = parse_file_name("03-create-the-thing.yaml").expect("valid");
    assert_eq!(f.step_name, "create-the-thing");
    let f = parse_file_name("notes.yaml").expect("valid without index");
    assert_eq!(f.index, None);
    assert_eq!(parse_file_name("00-bad.name.yaml"), None);
    assert_eq!(parse_file_name("00-.yaml"), None);
}

#[test]
fn case_directory_becomes_ordered_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(
        dir.path(),
        &[
            (
                "case/00-create.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
            ),
            (
                "case/00-assert.yaml",
                "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 5\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
            ),
            (
                "case/00-errors.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
            ),
            (
                "case/10-cleanup.yaml",
                "apiVersion: kudo.dev/v1alpha1\nkind: TestStep\nmetadata:\n  name: tidy\ndelete:\n  - apiVersion: v1\n    kind: ConfigMap\n    labels:\n      app: x\ncommands:\n  - command: kubectl get cm\n    namespaced: true\n    ignoreFailure: true\n  - script: echo $NAMESPACE\n    skipLogOutput: true\napply: [shared/extra.yaml]\nassert: [shared]\n",
            ),
            (
                "case/2-second.yaml",
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
            ),
            (
                "case/shared/extra.yaml",
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa\n",
            ),
            ("case/README.md", "not yaml"),
            (
                "case/notes.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ignored\n",
            ),
        ],
    );
    let case = load_case(&dir.path().join("case")).expect("loads");
    assert_eq!(case.name, "case");
    let labels: Vec<String> = case.steps.iter().map(|s| s.label()).collect();
    assert_eq!(labels, vec!["00-create", "02-second", "10-tidy"]);
    let s0 = &case.steps[0];
    assert_eq!(s0.apply.len(), 2);
    assert_eq!(s0.asserts.len(), 1, "the TestAssert is not an object to assert");
    assert_eq!(s0.test_assert.as_ref().map(|a| a.timeout), Some(5));
    assert_eq!(s0.errors.len(), 1);
    let s10 = &case.steps[2];
    let ts = s10.test_step.as_ref().expect("TestStep loaded");
    assert_eq!(ts.delete[0].labels.get("app").map(String::as_str), Some("x"));
    assert!(ts.commands[0].namespaced && ts.commands[0].ignore_failure);
    assert!(ts.commands[1].skip_log_output);
    assert_eq!(s10.apply.len(), 1, "apply list loads the referenced file");
    assert_eq!(s10.apply[0].object["kind"], "ServiceAccount");
    assert_eq!(s10.asserts.len(), 1, "assert list loads the directory's files");
}

#[test]
fn two_test_steps_in_one_step_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ts = "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\n";
    write_tree(dir.path(), &[("c/00-a.yaml", ts), ("c/00-b.yaml", ts)]);
    let err = load_case(&dir.path().join("c")).unwrap_err();
    assert!(err.to_string().contains("more than one TestStep"), "{err}");
}

#[test]
fn documents_without_kind_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(dir.path(), &[("c/00-a.yaml", "metadata:\n  name: x\n")]);
    let err = load_case(&dir.path().join("c")).unwrap_err();
    assert!(err.to_string().contains("needs apiVersion and kind"), "{err}");
}
