//! Whole suites run against the embedded API server, with the real `kubectl` in command steps.

use std::path::Path;
use std::sync::{Arc, Mutex};

use kudo_kuttl::{EmbeddedOptions, Log, ReportFormat, RunOptions, TestSuite};

use crate::write_tree;

fn capture() -> (Log, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let log = Log::new(Arc::new(move |l: &str| {
        l2.lock().expect("lock").push(l.to_string())
    }));
    (log, lines)
}

fn options(root: &Path, timeout: u64) -> RunOptions {
    RunOptions {
        suite: TestSuite {
            test_dirs: vec!["tests".into()],
            start_control_plane: true,
            timeout,
            ..TestSuite::default()
        },
        base_dir: root.to_path_buf(),
        embedded: EmbeddedOptions {
            simulator: false,
            kudo: false,
        },
        ..RunOptions::default()
    }
}

const PASSING: &[(&str, &str)] = &[
    (
        "tests/configmaps/00-create.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n  labels:\n    app: demo\ndata:\n  key: value\n",
    ),
    (
        "tests/configmaps/00-assert.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  key: value\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    app: demo\ndata:\n  key: value\n",
    ),
    (
        "tests/configmaps/00-errors.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never-created\n",
    ),
    (
        "tests/configmaps/01-command.yaml",
        "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\ncommands:\n  - command: kubectl create configmap from-cmd --from-literal=ns=$NAMESPACE\n    namespaced: true\n  - script: kubectl get configmap from-cmd -n \"$NAMESPACE\" -o name\n  - command: sh -c 'exit 3'\n    ignoreFailure: true\n",
    ),
    (
        "tests/configmaps/01-assert.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-cmd\n",
    ),
    (
        "tests/configmaps/02-update.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  key: changed\n",
    ),
    (
        "tests/configmaps/02-assert.yaml",
        "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 5\ncommands:\n  - script: test \"$(kubectl get configmap first -n $NAMESPACE -o jsonpath='{.data.key}')\" = changed\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  key: changed\n",
    ),
    (
        "tests/configmaps/03-delete.yaml",
        "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\ndelete:\n  - apiVersion: v1\n    kind: ConfigMap\n    labels:\n      app: demo\n",
    ),
    (
        "tests/configmaps/03-errors.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\n",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passing_suite_creates_asserts_runs_commands_and_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(dir.path(), PASSING);
    let mut opts = options(dir.path(), 20);
    opts.report = Some(ReportFormat::Xml);
    let (log, lines) = capture();
    let summary = kudo_kuttl::run(opts, log).await.expect("run");
    let text = lines.lock().expect("lock").join("\n");
    assert!(summary.success(), "{text}");
    assert_eq!(summary.summary_line(), "1 passed, 0 failed");
    assert_eq!(text.lines().last(), Some("1 passed, 0 failed"));
    let ns = &summary.report.testsuites[0].testcases[0].namespace;
    assert!(ns.starts_with("kuttl-test-"), "{ns}");
    assert!(
        text.contains(&format!(
            "configmaps/00-create: applied ConfigMap {ns}/first (created)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("assert ConfigMap {ns}/first passed")),
        "{text}"
    );
    assert!(
        text.contains("assert ConfigMap (any with labels app=demo) passed"),
        "{text}"
    );
    assert!(
        text.contains(&format!("errors ConfigMap {ns}/never-created passed")),
        "{text}"
    );
    // kubectl's output of the script step is logged
    assert!(text.contains("| configmap/from-cmd"), "{text}");
    assert!(
        text.contains(&format!("applied ConfigMap {ns}/first (updated)")),
        "{text}"
    );
    assert!(text.contains(&format!("ConfigMap {ns}/first: deleted")), "{text}");
    assert!(text.contains(&format!("deleting namespace {ns}")), "{text}");
    let report = std::fs::read_to_string(dir.path().join("kuttl-report.xml")).expect("report written");
    assert!(
        report.contains("<testcase classname=") && report.contains("name=\"configmaps\""),
        "{report}"
    );
    assert!(report.contains("failures=\"0\""), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_assertion_fails_with_a_diff() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(
        dir.path(),
        &[
            (
                "tests/broken/00-create.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  key: actual\n  other: x\n",
            ),
            (
                "tests/broken/00-assert.yaml",
                "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 2\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  key: expected\n",
            ),
            (
                "tests/broken/01-never.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never\n",
            ),
        ],
    );
    let mut opts = options(dir.path(), 10);
    opts.report = Some(ReportFormat::Json);
    let (log, lines) = capture();
    let summary = kudo_kuttl::run(opts, log).await.expect("run");
    let text = lines.lock().expect("lock").join("\n");
    assert!(!summary.success());
    assert_eq!(summary.summary_line(), "0 passed, 1 failed");
    assert!(text.contains("1 field(s) differ"), "{text}");
    assert!(
        text.contains(".data.key: value mismatch: expected \"expected\", actual \"actual\""),
        "{text}"
    );
    assert!(
        text.contains("-  key: expected") && text.contains("+  key: actual"),
        "{text}"
    );
    assert!(
        !text.contains("01-never"),
        "steps after a failure do not run: {text}"
    );
    let case = &summary.report.testsuites[0].testcases[0];
    assert_eq!(case.failure.as_deref(), Some("failed in step 00-create"));
    let json = std::fs::read_to_string(dir.path().join("kuttl-report.json")).expect("json report");
    assert!(json.contains("failed in step 00-create"), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_file_fails_when_the_object_exists_and_test_filter_selects() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(
        dir.path(),
        &[
            (
                "tests/present/00-create.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: here\n",
            ),
            (
                "tests/present/00-assert.yaml",
                "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 1\n",
            ),
            (
                "tests/present/00-errors-cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: here\n",
            ),
            (
                "tests/other/00-create.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
            ),
        ],
    );
    let mut opts = options(dir.path(), 2);
    opts.tests = vec!["present".into()];
    let (log, lines) = capture();
    let summary = kudo_kuttl::run(opts, log).await.expect("run");
    let text = lines.lock().expect("lock").join("\n");
    assert_eq!(summary.summary_line(), "0 passed, 1 failed", "{text}");
    assert!(text.contains("ConfigMap here matched error assertion"), "{text}");
    assert!(!text.contains("other/"), "filtered out: {text}");
}

/// A Deployment and an assertion that it becomes available, plus a manifest of a kind the
/// embedded cluster does not serve (KUDO's own webhook configuration, v1beta1).
const MODES: &[(&str, &str)] = &[
    (
        "manifests/webhook.yaml",
        "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: kudo-manager-instance-admission-webhook-config\nwebhooks: []\n",
    ),
    (
        "tests/deploy/00-deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx\n",
    ),
    (
        "tests/deploy/00-assert.yaml",
        "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 3\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nstatus:\n  availableReplicas: 1\n",
    ),
];

async fn run_modes(edit: impl FnOnce(&mut TestSuite)) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(dir.path(), MODES);
    let mut suite = TestSuite {
        test_dirs: vec!["tests".into()],
        manifest_dirs: vec!["manifests".into()],
        kind_node_cache: true,
        kind_config: Some("kind.yaml".into()),
        ..TestSuite::default()
    };
    edit(&mut suite);
    let opts = RunOptions {
        suite,
        base_dir: dir.path().to_path_buf(),
        embedded: EmbeddedOptions {
            simulator: true,
            kudo: false,
        },
        ..RunOptions::default()
    };
    let (log, lines) = capture();
    let summary = kudo_kuttl::run(opts, log).await.expect("run");
    let text = lines.lock().expect("lock").join("\n");
    (summary.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_control_plane_runs_no_workloads_and_start_kind_does() {
    // kuttl's startControlPlane (envtest): no controllers, the Deployment never becomes available.
    let (ok, text) = run_modes(|s| s.start_control_plane = true).await;
    assert!(
        !ok,
        "a Deployment must not become available without workload controllers:\n{text}"
    );
    assert!(text.contains("no kubelet or workload controllers"), "{text}");
    // startKIND (a full cluster): it does.
    let (ok, text) = run_modes(|s| s.start_kind = true).await;
    assert!(ok, "{text}");
    assert!(
        text.contains("simulated nodes, kubelet and workload controllers"),
        "{text}"
    );
    // The extension opts a control plane into simulated workloads.
    let (ok, text) = run_modes(|s| {
        s.start_control_plane = true;
        s.simulate_workloads = true;
    })
    .await;
    assert!(ok, "{text}");
    // KIND-only settings: one notice; an unserved manifest kind: skipped with a notice.
    assert!(
        text.contains("notice: kindConfig, kindNodeCache ignored"),
        "{text}"
    );
    assert!(
        text.contains("(admissionregistration.k8s.io/v1beta1 MutatingWebhookConfiguration) skipped"),
        "{text}"
    );
}

/// A KUDO test written for Kubernetes < 1.22: its step applies, its assert names and its errors
/// file names `apiextensions.k8s.io/v1beta1` CRDs, which the server no longer serves.
const REMOVED_VERSION: &[(&str, &str)] = &[
    (
        "tests/old-crd/00-crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  version: v1\n  scope: Namespaced\n  names:\n    plural: widgets\n    kind: Widget\n",
    ),
    (
        "tests/old-crd/00-assert.yaml",
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n",
    ),
    (
        "tests/old-crd/00-errors.yaml",
        "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\n",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_api_versions_in_steps_asserts_and_errors_are_translated_as_the_manager_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_tree(dir.path(), REMOVED_VERSION);
    let (log, lines) = capture();
    let summary = kudo_kuttl::run(options(dir.path(), 20), log).await.expect("run");
    let text = lines.lock().expect("lock").join("\n");
    assert!(summary.success(), "{text}");
    for line in [
        "applied CustomResourceDefinition widgets.example.com (created)",
        "assert CustomResourceDefinition widgets.example.com passed",
        "errors CustomResourceDefinition gadgets.example.com passed",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
}
