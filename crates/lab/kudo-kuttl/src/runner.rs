//! Running a suite: cluster setup, test cases (in parallel), steps, cleanup and the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::Error;
use crate::command::{self, Background};
use crate::config::{Command, TestSuite};
use crate::embedded::{EmbeddedCluster, EmbeddedOptions, wait_for_kinds};
use crate::k8s::{Applied, Cluster, ObjectKey};
use crate::load::{self, SourcedObject, Step, TestCase, describe_object};
use crate::log::Log;
use crate::matching;
use crate::report::{CaseReport, DirReport, ReportFormat, SuiteReport};

/// Everything a run needs besides the suite file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The suite (from `kuttl-test.yaml`, or defaults).
    pub suite: TestSuite,
    /// Directory relative suite paths resolve against and suite commands run in.
    pub base_dir: PathBuf,
    /// Test directories given on the command line; they replace the suite's `testDirs`.
    pub test_dirs: Vec<PathBuf>,
    /// Only run test cases with these names (all when empty).
    pub tests: Vec<String>,
    /// Use this kubeconfig's cluster (ignored when the embedded cluster is started).
    pub kubeconfig: Option<PathBuf>,
    /// Write a report in this format (overrides the suite's `reportFormat`).
    pub report: Option<ReportFormat>,
    /// Directories put in front of `PATH` for commands (the harness binary's directory, so that
    /// `kubectl kudo` finds this build's plugin).
    pub path_prepend: Vec<PathBuf>,
    /// Components of the embedded cluster.
    pub embedded: EmbeddedOptions,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Per-case outcomes.
    pub report: SuiteReport,
    /// Where the report was written, if one was requested.
    pub report_path: Option<PathBuf>,
}

impl RunSummary {
    /// Whether every test case passed.
    pub fn success(&self) -> bool {
        self.report.failed() == 0
    }

    /// `N passed, N failed`.
    pub fn summary_line(&self) -> String {
        format!("{} passed, {} failed", self.report.passed(), self.report.failed())
    }
}

/// State shared by all cases of a run.
struct Ctx {
    cluster: Cluster,
    kubeconfig: Option<PathBuf>,
    timeout: u64,
    skip_delete: bool,
    namespace: Option<String>,
    path_var: String,
}

impl Ctx {
    fn vars(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut v = BTreeMap::new();
        v.insert("NAMESPACE".to_string(), namespace.to_string());
        if let Some(k) = &self.kubeconfig {
            v.insert("KUBECONFIG".to_string(), k.display().to_string());
        }
        v.insert("PATH".to_string(), self.path_var.clone());
        v
    }
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    if p.is_absolute() { p } else { base.join(p) }
}

/// Runs the suite and writes the report. Test failures are part of the summary; `Err` means the
/// run itself could not happen (bad suite, unreachable cluster, failed setup command…).
pub async fn run(opts: RunOptions, log: Log) -> Result<RunSummary, Error> {
    let start = Instant::now();
    let suite = &opts.suite;
    let test_dirs: Vec<PathBuf> = if opts.test_dirs.is_empty() {
        suite
            .test_dirs
            .iter()
            .map(|d| resolve(&opts.base_dir, d))
            .collect()
    } else {
        opts.test_dirs.clone()
    };
    if test_dirs.is_empty() {
        return Err(Error::Config(
            "no test directories: give them as arguments or in the suite's testDirs".into(),
        ));
    }
    // Load everything before touching a cluster: a typo in a test file should not cost a cluster start.
    let mut dirs: Vec<(String, Vec<TestCase>)> = Vec::new();
    for d in &test_dirs {
        let mut cases = load::discover_cases(d)?;
        if !opts.tests.is_empty() {
            cases.retain(|c| opts.tests.contains(&c.name));
        }
        dirs.push((d.display().to_string(), cases));
    }
    if !opts.tests.is_empty() && dirs.iter().all(|(_, c)| c.is_empty()) {
        return Err(Error::Config(format!(
            "no test case named {}",
            opts.tests.join(", ")
        )));
    }
    let ignored = suite.ignored_kind_settings();
    if !ignored.is_empty() && suite.wants_embedded_cluster() {
        log.line(format!(
            "notice: {} ignored: the embedded cluster has no KIND nodes and runs no container images",
            ignored.join(", ")
        ));
    }

    let embedded = if suite.wants_embedded_cluster() {
        let mut eo = opts.embedded.clone();
        eo.simulator &= suite.simulates_workloads();
        if eo.simulator {
            log.line("starting the embedded cluster (API server, simulated nodes, kubelet and workload controllers, KUDO manager)");
        } else {
            log.line("starting the embedded control plane (API server and KUDO manager; no kubelet or workload controllers, so Deployments never become available: use startKIND: true, or simulateWorkloads: true, for a full cluster)");
        }
        let c = EmbeddedCluster::start(eo).await?;
        log.line(format!(
            "embedded control plane at {} (kubeconfig {})",
            c.url(),
            c.kubeconfig().display()
        ));
        Some(c)
    } else {
        None
    };
    let kubeconfig = match &embedded {
        Some(c) => Some(c.kubeconfig().to_path_buf()),
        None => opts
            .kubeconfig
            .clone()
            .map(|p| std::path::absolute(&p).unwrap_or(p)),
    };
    let result = run_with_cluster(&opts, kubeconfig, embedded.is_some(), &dirs, &log).await;
    if let Some(c) = embedded {
        c.shutdown().await;
    }
    let mut report = SuiteReport {
        name: suite.report_name.clone().unwrap_or_else(|| "kuttl-report".into()),
        time: 0.0,
        testsuites: result?,
    };
    report.time = start.elapsed().as_secs_f64();
    let format = opts
        .report
        .or_else(|| suite.report_format.as_deref().and_then(ReportFormat::parse));
    let report_path = match format {
        None => None,
        Some(f) => {
            let dir = suite
                .artifacts_dir
                .as_deref()
                .map(|d| resolve(&opts.base_dir, d))
                .unwrap_or(opts.base_dir.clone());
            std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
            let path = dir.join(format!("{}.{}", report.name, f.extension()));
            let text = match f {
                ReportFormat::Xml => report.to_junit_xml(),
                ReportFormat::Json => report.to_json(),
            };
            std::fs::write(&path, text).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
            Some(path)
        }
    };
    let summary = RunSummary { report, report_path };
    log.line(summary.summary_line());
    Ok(summary)
}

async fn run_with_cluster(
    opts: &RunOptions,
    kubeconfig: Option<PathBuf>,
    embedded: bool,
    dirs: &[(String, Vec<TestCase>)],
    log: &Log,
) -> Result<Vec<DirReport>, Error> {
    let suite = &opts.suite;
    let cluster = Cluster::connect(kubeconfig.as_deref()).await?;
    let mut path_parts: Vec<PathBuf> = opts.path_prepend.clone();
    path_parts.push(opts.base_dir.join("bin"));
    if let Some(p) = std::env::var_os("PATH") {
        path_parts.extend(std::env::split_paths(&p));
    }
    let path_var = std::env::join_paths(path_parts)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| std::env::var("PATH").unwrap_or_default());
    let ctx = Arc::new(Ctx {
        cluster,
        kubeconfig: kubeconfig.or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from)),
        timeout: suite.timeout_secs(),
        skip_delete: suite.skip_delete,
        namespace: suite.namespace.clone().filter(|n| !n.is_empty()),
        path_var,
    });

    // Suite setup: CRDs, manifests, commands.
    if let Some(crd_dir) = &suite.crd_dir {
        let dir = resolve(&opts.base_dir, crd_dir);
        let mut kinds = Vec::new();
        for f in load::yaml_files(&dir)? {
            for obj in load::read_objects(&f)? {
                let (key, how) = ctx.cluster.apply(&obj.object, "default").await?;
                log.line(format!("CRD {}: {}", key.name, applied_word(how)));
                kinds.extend(crd_kinds(&obj.object));
            }
        }
        let refs: Vec<(&str, &str)> = kinds.iter().map(|(a, k)| (a.as_str(), k.as_str())).collect();
        wait_for_kinds(&ctx.cluster, &refs, Duration::from_secs(ctx.timeout)).await?;
    }
    for m in &suite.manifest_dirs {
        let dir = resolve(&opts.base_dir, m);
        for f in load::yaml_files(&dir)? {
            for obj in load::read_objects(&f)? {
                let av = obj.object["apiVersion"].as_str().unwrap_or_default();
                let kind = obj.object["kind"].as_str().unwrap_or_default();
                if embedded && ctx.cluster.resolve(av, kind).await.is_err() {
                    // E.g. KUDO's own admission webhook configuration (admissionregistration
                    // v1beta1): the embedded cluster does not serve it, and kudo-rs needs none.
                    log.line(format!(
                        "notice: manifest {} ({av} {kind}) skipped: the embedded cluster does not serve that kind",
                        f.display()
                    ));
                    continue;
                }
                let (key, how) = ctx.cluster.apply(&obj.object, "default").await?;
                log.line(format!("manifest {key}: {}", applied_word(how)));
            }
        }
    }
    let mut background: Vec<Background> = Vec::new();
    let setup_log = log.child("setup");
    for c in &suite.commands {
        match command::run_command(c, "", &opts.base_dir, &ctx.vars(""), ctx.timeout, &setup_log).await {
            Ok(Some(bg)) => background.push(bg),
            Ok(None) => {}
            Err(e) => {
                for bg in background {
                    bg.stop().await;
                }
                return Err(Error::Setup(e.to_string()));
            }
        }
    }

    let parallel = suite.parallelism().max(1);
    let mut jobs = Vec::new();
    for (di, (dir_name, cases)) in dirs.iter().enumerate() {
        for (ci, case) in cases.iter().enumerate() {
            jobs.push((di, ci, dir_name.clone(), case.clone()));
        }
    }
    let results: Vec<(usize, usize, CaseReport)> = futures::stream::iter(jobs)
        .map(|(di, ci, dir_name, case)| {
            let ctx = ctx.clone();
            let log = log.capturing(&case.name);
            async move {
                let r = run_case(&ctx, &case, &dir_name, &log).await;
                (di, ci, r)
            }
        })
        .buffer_unordered(parallel)
        .collect()
        .await;
    for bg in background {
        log.line(format!("stopping background command {:?}", bg.display));
        bg.stop().await;
    }
    let mut out: Vec<DirReport> = dirs
        .iter()
        .map(|(name, _)| DirReport {
            name: name.clone(),
            testcases: Vec::new(),
        })
        .collect();
    let mut sorted = results;
    sorted.sort_by_key(|(d, c, _)| (*d, *c));
    for (di, _, r) in sorted {
        out[di].testcases.push(r);
    }
    Ok(out)
}

fn applied_word(a: Applied) -> &'static str {
    match a {
        Applied::Created => "created",
        Applied::Updated => "updated",
    }
}

/// The served (apiVersion, kind) pairs a CRD object defines.
fn crd_kinds(obj: &Value) -> Vec<(String, String)> {
    if obj["kind"] != "CustomResourceDefinition" {
        return Vec::new();
    }
    let group = obj["spec"]["group"].as_str().unwrap_or_default();
    let kind = obj["spec"]["names"]["kind"].as_str().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(vs) = obj["spec"]["versions"].as_array() {
        for v in vs {
            if v["served"].as_bool() != Some(false)
                && let Some(name) = v["name"].as_str()
            {
                out.push((format!("{group}/{name}"), kind.to_string()));
            }
        }
    } else if let Some(v) = obj["spec"]["version"].as_str() {
        out.push((format!("{group}/{v}"), kind.to_string()));
    }
    out
}

/// A random `kuttl-test-<adjective>-<animal>` namespace name.
pub fn random_namespace() -> String {
    const ADJ: [&str; 24] = [
        "amber", "bold", "brave", "calm", "clever", "crisp", "eager", "fair", "gentle", "glad", "happy",
        "keen", "lively", "lucid", "merry", "neat", "noble", "proud", "quick", "quiet", "sharp", "steady",
        "swift", "witty",
    ];
    const ANIMAL: [&str; 24] = [
        "badger", "beaver", "bison", "condor", "crane", "dingo", "eagle", "falcon", "ferret", "gecko",
        "heron", "ibex", "jackal", "koala", "lemur", "lynx", "marten", "newt", "otter", "panda", "quail",
        "raven", "stoat", "walrus",
    ];
    use rand::Rng;
    let mut rng = rand::rng();
    format!(
        "kuttl-test-{}-{}-{:04x}",
        ADJ[rng.random_range(0..ADJ.len())],
        ANIMAL[rng.random_range(0..ANIMAL.len())],
        rng.random_range(0..0x10000u32)
    )
}

async fn run_case(ctx: &Ctx, case: &TestCase, dir_name: &str, log: &Log) -> CaseReport {
    let start = Instant::now();
    let (namespace, user_ns) = match &ctx.namespace {
        Some(ns) => (ns.clone(), true),
        None => (random_namespace(), false),
    };
    let mut failure: Option<(String, String)> = None;
    let mut created: Vec<ObjectKey> = Vec::new();
    let ns_key = ObjectKey {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: namespace.clone(),
    };
    let mut ns_created = false;
    log.line(format!("creating namespace {namespace}"));
    let ns_obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    match ctx.cluster.get(&ns_key).await {
        Ok(Some(_)) if user_ns => log.line(format!("namespace {namespace} already exists")),
        _ => match ctx.cluster.apply(&ns_obj, "").await {
            Ok(_) => ns_created = true,
            Err(e) => failure = Some((format!("setup: {e}"), e.to_string())),
        },
    }
    if failure.is_none() {
        for step in &case.steps {
            let slog = log.child(&step.label());
            if let Err(errors) = run_step(ctx, case, step, &namespace, &slog, &mut created).await {
                let summary = format!("failed in step {}", step.label());
                slog.line(format!("step {} failed", step.label()));
                failure = Some((summary, errors.join("\n")));
                break;
            }
            slog.line(format!("step {} passed", step.label()));
        }
    }
    if ctx.skip_delete {
        log.line(format!(
            "skipDelete: keeping namespace {namespace} and the objects created"
        ));
    } else {
        for key in created.iter().rev() {
            if let Err(e) = ctx.cluster.delete(key).await {
                log.line(format!("cleanup: {e}"));
            }
        }
        if ns_created {
            log.line(format!("deleting namespace {namespace}"));
            let r = match ctx.cluster.delete(&ns_key).await {
                Ok(_) => {
                    ctx.cluster
                        .wait_gone(std::slice::from_ref(&ns_key), Duration::from_secs(ctx.timeout))
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                log.line(format!("cleanup: {e}"));
                if failure.is_none() {
                    failure = Some((format!("cleanup: {e}"), e.to_string()));
                }
            }
        }
    }
    match &failure {
        None => log.line(format!(
            "--- PASS: {} ({:.2}s)",
            case.name,
            start.elapsed().as_secs_f64()
        )),
        Some((msg, _)) => log.line(format!(
            "--- FAIL: {} ({:.2}s): {msg}",
            case.name,
            start.elapsed().as_secs_f64()
        )),
    }
    CaseReport {
        name: case.name.clone(),
        classname: dir_name.to_string(),
        time: start.elapsed().as_secs_f64(),
        namespace,
        failure: failure.as_ref().map(|(m, _)| m.clone()),
        failure_detail: failure.map(|(_, d)| d),
    }
}

/// Runs one step: delete, commands, apply, then assert/error checks until they pass or time out.
async fn run_step(
    ctx: &Ctx,
    case: &TestCase,
    step: &Step,
    namespace: &str,
    log: &Log,
    created: &mut Vec<ObjectKey>,
) -> Result<(), Vec<String>> {
    let timeout = step
        .test_assert
        .as_ref()
        .map(|a| a.timeout)
        .filter(|t| *t > 0)
        .unwrap_or(ctx.timeout);
    if let Some(ts) = &step.test_step {
        // 1. deletes
        let mut gone = Vec::new();
        for r in &ts.delete {
            let ns_default = if r.namespace.is_empty() {
                namespace
            } else {
                r.namespace.as_str()
            };
            let probe = json!({"apiVersion": r.api_version, "kind": r.kind, "metadata": {"name": r.name, "namespace": ns_default}});
            let (key, _) = ctx
                .cluster
                .key_of(&probe, ns_default)
                .await
                .map_err(|e| vec![e.to_string()])?;
            let targets = if r.name.is_empty() {
                let items = ctx
                    .cluster
                    .list(&r.api_version, &r.kind, key.namespace.as_deref(), &r.labels)
                    .await
                    .map_err(|e| vec![e.to_string()])?;
                items
                    .iter()
                    .map(|o| ObjectKey {
                        name: o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                        ..key.clone()
                    })
                    .collect()
            } else {
                vec![key]
            };
            for k in targets {
                let existed = ctx.cluster.delete(&k).await.map_err(|e| vec![e.to_string()])?;
                log.line(format!(
                    "{k}: {}",
                    if existed { "deleted" } else { "already gone" }
                ));
                gone.push(k);
            }
        }
        ctx.cluster
            .wait_gone(&gone, Duration::from_secs(timeout))
            .await
            .map_err(|e| vec![e.to_string()])?;
        // 2. commands
        let vars = ctx.vars(namespace);
        for c in &ts.commands {
            let mut c: Command = c.clone();
            if c.background {
                log.line("background commands are not allowed in steps; running in the foreground");
                c.background = false;
            }
            command::run_command(&c, namespace, &case.dir, &vars, ctx.timeout, log)
                .await
                .map_err(|e| vec![e.to_string()])?;
        }
    }
    // 3. apply
    let mut errors = Vec::new();
    for obj in &step.apply {
        match ctx.cluster.apply(&obj.object, namespace).await {
            Ok((key, how)) => {
                log.line(format!("applied {key} ({})", applied_word(how)));
                if how == Applied::Created {
                    created.push(key);
                }
            }
            Err(e) => errors.push(format!(
                "applying {} from {}: {e}",
                obj.describe(),
                obj.source.display()
            )),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if step.asserts.is_empty()
        && step.errors.is_empty()
        && step.test_assert.as_ref().is_none_or(|a| a.commands.is_empty())
    {
        return Ok(());
    }
    if let Some(a) = &step.test_assert
        && !a.collectors.is_empty()
    {
        log.line("warning: TestAssert collectors are not supported and are ignored");
    }
    // 4. check until everything holds or the timeout passes (always at least once).
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let quiet = log.child("assert-command");
    loop {
        let outcome = check(ctx, case, step, namespace, &quiet, false).await;
        if outcome.iter().all(|c| c.failure.is_none()) {
            for c in &outcome {
                log.line(&c.passed);
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            // One more check with command output logged, so the failure shows why.
            let outcome = check(ctx, case, step, namespace, log, true).await;
            let mut errs = Vec::new();
            for c in outcome {
                match c.failure {
                    None => log.line(&c.passed),
                    Some(f) => {
                        log.line(&f);
                        errs.push(f);
                    }
                }
            }
            if errs.is_empty() {
                return Ok(());
            }
            return Err(errs);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

struct CheckResult {
    passed: String,
    failure: Option<String>,
}

async fn check(
    ctx: &Ctx,
    case: &TestCase,
    step: &Step,
    namespace: &str,
    log: &Log,
    verbose: bool,
) -> Vec<CheckResult> {
    let mut out = Vec::new();
    for exp in &step.asserts {
        out.push(check_assert(ctx, exp, namespace).await);
    }
    if let Some(ta) = &step.test_assert {
        let vars = ctx.vars(namespace);
        for ac in &ta.commands {
            let c = Command {
                command: ac.command.clone(),
                namespaced: ac.namespaced,
                script: ac.script.clone(),
                skip_log_output: ac.skip_log_output || !verbose,
                ..Command::default()
            };
            let r = command::run_command(&c, namespace, &case.dir, &vars, ctx.timeout, log).await;
            out.push(CheckResult {
                passed: format!("assert command {:?} passed", c.display()),
                failure: r.err().map(|e| format!("assert {e}")),
            });
        }
    }
    for exp in &step.errors {
        out.push(check_absent(ctx, exp, namespace).await);
    }
    out
}

fn mismatch_report(what: &str, expected: &Value, actual: &Value) -> String {
    let mism = matching::mismatches(expected, actual);
    let mut s = format!("assert {what} failed: {} field(s) differ:\n", mism.len());
    for m in &mism {
        s.push_str(&format!("  {m}\n"));
    }
    s.push_str(&matching::unified_diff(expected, actual));
    s
}

/// The identity and the expected object of an assert or error file, in a version the server
/// serves ([`crate::k8s::Cluster::served_form`]); `Err` is the check's failure (`word` names the
/// file's role in the message).
async fn expected_in_served_version(
    ctx: &Ctx,
    exp: &SourcedObject,
    namespace: &str,
    word: &str,
) -> Result<(ObjectKey, Value), CheckResult> {
    let what = describe_object(&exp.object);
    let failed = |e: Error| CheckResult {
        passed: String::new(),
        failure: Some(format!("{word} {what} failed: {e}")),
    };
    let expected = ctx.cluster.served_form(&exp.object, true).await.map_err(failed)?;
    let (key, _) = ctx.cluster.key_of(&expected, namespace).await.map_err(failed)?;
    Ok((key, expected))
}

async fn check_assert(ctx: &Ctx, exp: &SourcedObject, namespace: &str) -> CheckResult {
    let (key, mut expected) = match expected_in_served_version(ctx, exp, namespace, "assert").await {
        Ok(k) => k,
        Err(failed) => return failed,
    };
    if let Some(ns) = &key.namespace {
        expected["metadata"]["namespace"] = Value::String(ns.clone());
    }
    let passed = format!("assert {key} passed");
    if !key.name.is_empty() {
        return match ctx.cluster.get(&key).await {
            Err(e) => CheckResult {
                passed,
                failure: Some(format!("assert {key} failed: {e}")),
            },
            Ok(None) => CheckResult {
                passed,
                failure: Some(format!("assert {key} failed: not found")),
            },
            Ok(Some(actual)) => {
                if matching::is_subset(&expected, &actual) {
                    CheckResult {
                        passed,
                        failure: None,
                    }
                } else {
                    CheckResult {
                        passed,
                        failure: Some(mismatch_report(&key.to_string(), &expected, &actual)),
                    }
                }
            }
        };
    }
    let labels = labels_of(&expected);
    let shown = format!("{} (any{})", key.kind, selector_text(&labels));
    let passed = format!("assert {shown} passed");
    match ctx
        .cluster
        .list(&key.api_version, &key.kind, key.namespace.as_deref(), &labels)
        .await
    {
        Err(e) => CheckResult {
            passed,
            failure: Some(format!("assert {shown} failed: {e}")),
        },
        Ok(items) if items.is_empty() => CheckResult {
            passed,
            failure: Some(format!(
                "assert {shown} failed: no resources matched of kind {}",
                key.kind
            )),
        },
        Ok(items) => {
            if items.iter().any(|a| matching::is_subset(&expected, a)) {
                return CheckResult {
                    passed,
                    failure: None,
                };
            }
            let Some((closest, _)) = matching::closest(&expected, &items) else {
                return CheckResult {
                    passed,
                    failure: Some(format!("assert {shown} failed: no resources matched")),
                };
            };
            let name = closest["metadata"]["name"].as_str().unwrap_or("");
            let what = format!(
                "{shown}: none of {} object(s) match; closest is {name}",
                items.len()
            );
            CheckResult {
                passed,
                failure: Some(mismatch_report(&what, &expected, closest)),
            }
        }
    }
}

fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn selector_text(labels: &BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        String::new()
    } else {
        let sel: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(" with labels {}", sel.join(","))
    }
}

async fn check_absent(ctx: &Ctx, exp: &SourcedObject, namespace: &str) -> CheckResult {
    let (key, mut expected) = match expected_in_served_version(ctx, exp, namespace, "errors").await {
        Ok(k) => k,
        Err(failed) => return failed,
    };
    if let Some(ns) = &key.namespace {
        expected["metadata"]["namespace"] = Value::String(ns.clone());
    }
    let actuals = if key.name.is_empty() {
        ctx.cluster
            .list(
                &key.api_version,
                &key.kind,
                key.namespace.as_deref(),
                &labels_of(&expected),
            )
            .await
    } else {
        ctx.cluster.get(&key).await.map(|o| o.into_iter().collect())
    };
    let shown = if key.name.is_empty() {
        format!("{} (any)", key.kind)
    } else {
        key.to_string()
    };
    let passed = format!("errors {shown} passed (no matching object)");
    match actuals {
        Err(e) => CheckResult {
            passed,
            failure: Some(format!("errors {shown} failed: {e}")),
        },
        Ok(items) => {
            let matched: Vec<&Value> = items
                .iter()
                .filter(|a| matching::is_subset(&expected, a))
                .collect();
            match matched.as_slice() {
                [] => CheckResult {
                    passed,
                    failure: None,
                },
                [one] => CheckResult {
                    passed,
                    failure: Some(format!(
                        "errors {shown} failed: {} {} matched error assertion",
                        key.kind,
                        one["metadata"]["name"].as_str().unwrap_or("")
                    )),
                },
                [first, rest @ ..] => CheckResult {
                    passed,
                    failure: Some(format!(
                        "errors {shown} failed: {} {} (and {} other resources) matched error assertion",
                        key.kind,
                        first["metadata"]["name"].as_str().unwrap_or(""),
                        rest.len()
                    )),
                },
            }
        }
    }
}
