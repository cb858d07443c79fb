//! The kuttl configuration objects: `TestSuite`, `TestStep`, `TestAssert` and their commands.
//!
//! Field names and defaults follow kuttl's `kuttl.dev/v1beta1` API so existing suites load
//! unchanged; the older `kudo.dev/v1alpha1` group (the test harness as it shipped inside KUDO) is
//! accepted too, because operator repositories still carry suites written against it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// The API group/versions a harness object may be written in.
pub const API_VERSIONS: [&str; 2] = ["kuttl.dev/v1beta1", "kudo.dev/v1alpha1"];

/// Default step/assert timeout in seconds when the suite does not set one (kuttl's default).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

/// Default number of test cases run at the same time (kuttl's default).
pub const DEFAULT_PARALLEL: usize = 8;

/// Whether `apiVersion`/`kind` name one of the harness's own objects (they configure the harness
/// and are never sent to the cluster).
pub fn is_harness_kind(api_version: &str, kind: &str, wanted: &str) -> bool {
    API_VERSIONS.contains(&api_version) && kind == wanted
}

/// `kuttl-test.yaml`: which tests to run and how to prepare the cluster for them.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TestSuite {
    /// Object type; must be `TestSuite`.
    pub kind: String,
    /// `kuttl.dev/v1beta1` or legacy `kudo.dev/v1alpha1`.
    pub api_version: String,
    /// Directory of CRDs installed (and waited for) before anything else.
    pub crd_dir: Option<String>,
    /// Directories of manifests applied before the tests.
    pub manifest_dirs: Vec<String>,
    /// Directories whose subdirectories are test cases.
    pub test_dirs: Vec<String>,
    /// Start a control plane instead of using a kubeconfig's cluster: as in kuttl (envtest), an
    /// API server with **no** workload controllers and no kubelet — Deployments never become
    /// available — plus, here, the KUDO manager. See [`TestSuite::simulate_workloads`].
    pub start_control_plane: bool,
    /// kuttl starts a KIND cluster (a full cluster); here: the embedded API server with simulated
    /// nodes, kubelet and workload controllers, plus the KUDO manager.
    #[serde(rename = "startKIND")]
    pub start_kind: bool,
    /// kudo-rs extension: with `startControlPlane`, run the simulated nodes, kubelet and workload
    /// controllers too (what `startKIND` gives). Unknown to kuttl, which ignores it.
    pub simulate_workloads: bool,
    /// Images kuttl loads into KIND nodes; meaningless for the embedded cluster (ignored with a
    /// notice).
    #[serde(rename = "kindContainers")]
    pub kind_containers: Vec<String>,
    /// KIND configuration file (ignored with a notice).
    #[serde(rename = "kindConfig")]
    pub kind_config: Option<String>,
    /// kuttl's KIND node image cache (ignored with a notice).
    #[serde(rename = "kindNodeCache")]
    pub kind_node_cache: bool,
    /// Keep test namespaces and created objects after the run.
    pub skip_delete: bool,
    /// Step timeout in seconds; 0 or absent means [`DEFAULT_TIMEOUT_SECS`].
    pub timeout: u64,
    /// Maximum concurrent test cases; 0 or absent means [`DEFAULT_PARALLEL`].
    pub parallel: usize,
    /// Where reports go (the current directory when absent).
    pub artifacts_dir: Option<String>,
    /// Commands run once before the tests (background ones live until the suite ends).
    pub commands: Vec<Command>,
    /// `xml` or `json`: write a report.
    pub report_format: Option<String>,
    /// Report file name without extension (default `kuttl-report`).
    pub report_name: Option<String>,
    /// Use this namespace for every test instead of a fresh one per test.
    pub namespace: Option<String>,
}

impl Default for TestSuite {
    fn default() -> Self {
        TestSuite {
            kind: "TestSuite".into(),
            api_version: API_VERSIONS[0].into(),
            crd_dir: None,
            manifest_dirs: Vec::new(),
            test_dirs: Vec::new(),
            start_control_plane: false,
            start_kind: false,
            simulate_workloads: false,
            kind_containers: Vec::new(),
            kind_config: None,
            kind_node_cache: false,
            skip_delete: false,
            timeout: 0,
            parallel: 0,
            artifacts_dir: None,
            commands: Vec::new(),
            report_format: None,
            report_name: None,
            namespace: None,
        }
    }
}

impl TestSuite {
    /// Parses a suite file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<TestSuite, Error> {
        let docs = crate::load::parse_documents(text, origin)?;
        let doc = match docs.as_slice() {
            [one] => one,
            [] => {
                return Err(Error::Invalid {
                    path: origin.into(),
                    message: "the file is empty".into(),
                });
            }
            _ => {
                return Err(Error::Invalid {
                    path: origin.into(),
                    message: "a test suite file must hold exactly one TestSuite document".into(),
                });
            }
        };
        let suite: TestSuite = serde_json::from_value(doc.clone()).map_err(|e| Error::Invalid {
            path: origin.into(),
            message: format!("not a valid TestSuite: {e}"),
        })?;
        if !is_harness_kind(&suite.api_version, &suite.kind, "TestSuite") {
            return Err(Error::Invalid {
                path: origin.into(),
                message: format!(
                    "expected kind TestSuite in {} or {}, found {} {}",
                    API_VERSIONS[0], API_VERSIONS[1], suite.api_version, suite.kind
                ),
            });
        }
        Ok(suite)
    }

    /// Reads and parses a suite file.
    pub fn from_file(path: &Path) -> Result<TestSuite, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// The effective step timeout.
    pub fn timeout_secs(&self) -> u64 {
        if self.timeout == 0 {
            DEFAULT_TIMEOUT_SECS
        } else {
            self.timeout
        }
    }

    /// The effective parallelism.
    pub fn parallelism(&self) -> usize {
        if self.parallel == 0 {
            DEFAULT_PARALLEL
        } else {
            self.parallel
        }
    }

    /// Whether the suite asks for a cluster of its own.
    pub fn wants_embedded_cluster(&self) -> bool {
        self.start_control_plane || self.start_kind
    }

    /// Whether the embedded cluster runs workloads (simulated nodes, kubelet, controllers):
    /// `startKIND`, or `startControlPlane` with the `simulateWorkloads` extension.
    pub fn simulates_workloads(&self) -> bool {
        self.start_kind || self.simulate_workloads
    }

    /// The KIND-only settings this suite sets, which the embedded cluster ignores.
    pub fn ignored_kind_settings(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if !self.kind_containers.is_empty() {
            v.push("kindContainers");
        }
        if self.kind_config.is_some() {
            v.push("kindConfig");
        }
        if self.kind_node_cache {
            v.push("kindNodeCache");
        }
        v
    }
}

/// A command run by a suite or a step.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Command {
    /// Program and arguments, split like a shell would (quotes respected), after `$VAR` expansion.
    pub command: String,
    /// Append `--namespace <test namespace>` unless the command already sets one.
    pub namespaced: bool,
    /// A script run with `sh -c` (mutually exclusive with `command`).
    pub script: String,
    /// A non-zero exit status does not fail the step.
    pub ignore_failure: bool,
    /// Run without waiting (suite commands only; steps run them in the foreground).
    pub background: bool,
    /// Seconds before the command is killed: 0 = the suite timeout, negative = no limit.
    pub timeout: i64,
    /// Do not copy the command's output into the log.
    pub skip_log_output: bool,
}

impl Command {
    /// A short human-readable form for logs.
    pub fn display(&self) -> String {
        if self.script.is_empty() {
            self.command.clone()
        } else {
            format!("script: {}", self.script.trim())
        }
    }
}

/// A reference to objects deleted at the start of a step: by name, or every object of the kind
/// carrying `labels` when the name is empty.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectRef {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Object name; empty selects by labels.
    pub name: String,
    /// Namespace; empty means the test namespace for namespaced kinds.
    pub namespace: String,
    /// Label selector (equality) used when `name` is empty.
    pub labels: BTreeMap<String, String>,
}

/// Metadata of a `TestStep` (only the name matters: it renames the step).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct StepMeta {
    /// Overrides the step name taken from the file name.
    pub name: String,
}

/// `kind: TestStep` inside a step file.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TestStep {
    /// Name override.
    pub metadata: StepMeta,
    /// Extra files or directories (relative to the test case) whose objects are applied.
    pub apply: Vec<String>,
    /// Extra files or directories whose objects are asserted.
    pub assert: Vec<String>,
    /// Extra files or directories whose objects must not exist.
    pub error: Vec<String>,
    /// Objects deleted (and waited for) before anything else in the step.
    pub delete: Vec<ObjectRef>,
    /// Commands run before the step's objects are applied.
    pub commands: Vec<Command>,
    /// kuttl's marker for tests that need no cluster; accepted and ignored.
    pub unit_test: bool,
}

/// A command run as part of an assertion: it passes when it exits 0.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AssertCommand {
    /// See [`Command::command`].
    pub command: String,
    /// See [`Command::namespaced`].
    pub namespaced: bool,
    /// See [`Command::script`].
    pub script: String,
    /// See [`Command::skip_log_output`].
    pub skip_log_output: bool,
}

/// `kind: TestAssert` inside an assert file.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct TestAssert {
    /// Seconds the assertions may take; 0 means the suite timeout.
    pub timeout: u64,
    /// Commands that must succeed for the assertion to pass (retried like object asserts).
    pub commands: Vec<AssertCommand>,
    /// kuttl's log collectors; accepted, not run (a warning is logged).
    pub collectors: Vec<Value>,
}
