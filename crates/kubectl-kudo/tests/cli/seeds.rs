//! The seeds, replayed: the Galera walkthrough (`/work/shared/seeds/galera-part1.md`,
//! `galera-part2.txt`, `galera-part3-ko.txt`) driven command for command through the real `kubectl`
//! (which dispatches `kubectl kudo …` to our plugin found first on PATH) against
//! `kubectl-kudo dev`, our one-process cluster.
//!
//! The blog builds the operator in stages and re-installs after each one. Each stage here is a
//! reduced copy of `examples/galera` generated into a temp dir: the plan steps, tasks and
//! parameters the blog has at that point, with the example's own template files. Every check states
//! the seed output it stands for; `docs/tutorial.md` maps each seed command to its assertion.
//!
//! Cluster tests run one at a time (a global lock) because the machine is small and each starts
//! its own cluster; every started process is killed by a Drop guard, even on failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common;

use common::BIN;
/// How long a plan may take before the test gives up (a liveness bound, not a performance check).
const PLAN_TIMEOUT: Duration = Duration::from_secs(180);

static CLUSTER_LOCK: Mutex<()> = Mutex::new(());

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera")
}

/// PATH with the directory of the built plugin first, so `kubectl kudo` runs this build.
fn plugin_path() -> String {
    let bin_dir = Path::new(BIN).parent().expect("binary has a directory");
    format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Output of one shell command.
struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// A user's shell: a temp HOME, the plugin on PATH and (once a cluster runs) KUBECONFIG.
struct Shell {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Shell {
    fn new() -> Self {
        Shell {
            home: tempfile::tempdir().expect("temp HOME"),
            kubeconfig: None,
        }
    }

    /// Runs `line` with `sh -c` in `dir`, exactly as typed in the blog (pipes included).
    fn sh(&self, dir: &Path, line: &str) -> Out {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(line).current_dir(dir);
        cmd.env("HOME", self.home.path()).env("PATH", plugin_path());
        if let Some(k) = &self.kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run `{line}`: {e}"));
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Like [`Shell::sh`] but the command must succeed; returns stdout.
    fn ok(&self, dir: &Path, line: &str) -> String {
        let out = self.sh(dir, line);
        assert!(
            out.ok,
            "`{line}` failed\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        );
        out.stdout
    }
}

/// Starts the dev cluster in the shell's HOME and points the shell's KUBECONFIG at it.
fn start_dev(shell: &mut Shell) -> common::Dev {
    let dev = common::start_dev(shell.home.path(), &[]);
    shell.kubeconfig = Some(dev.kubeconfig.clone());
    dev
}

// ---------------------------------------------------------------------------------------------
// The blog's stages, generated from examples/galera.

/// One step of the deploy plan as the blog has it at some point.
struct Stage {
    steps: Vec<(&'static str, Vec<&'static str>)>,
    params: Vec<&'static str>,
    /// Part 3 added cs-service.yaml to the cluster_services task.
    client_service: bool,
    /// Part 3 added the node_update plan, triggered by NODE_COUNT.
    node_update: bool,
}

fn task_resources(task: &str, stage: &Stage) -> Vec<&'static str> {
    match task {
        "bootstrap_config" => vec!["bootstrap_config.yaml"],
        "bootstrap_service" => vec!["bootstrap_service.yaml"],
        "bootstrap_deploy" => vec!["bootstrap_deploy.yaml"],
        "firstboot_config" | "config" => vec!["galera_config.yaml"],
        "cluster_services" if stage.client_service => vec!["hs-service.yaml", "cs-service.yaml"],
        "cluster_services" => vec!["hs-service.yaml"],
        "statefulset" => vec!["statefulset.yaml"],
        "node_scripts" => vec!["node_scripts.yaml"],
        "bootstrap_cleanup" => vec![
            "bootstrap_deploy.yaml",
            "bootstrap_service.yaml",
            "bootstrap_config.yaml",
        ],
        other => panic!("no task {other} in the seeds"),
    }
}

/// The blog's stages, in order. Parameters the example's templates need earlier than the blog
/// declares them (ANTI_AFFINITY, used by the example's statefulset.yaml) come with the template.
fn stage(n: u32) -> Stage {
    let mut steps: Vec<(&'static str, Vec<&'static str>)> =
        vec![("bootstrap_config", vec!["bootstrap_config"])];
    let mut params = vec!["SST_USER", "SST_PASSWORD"];
    if n >= 2 {
        steps.push(("bootstrap_service", vec!["bootstrap_service"]));
        params.extend(["MYSQL_PORT", "SST_PORT", "REPLICATION_PORT", "IST_PORT"]);
    }
    if n >= 3 {
        steps.push(("bootstrap_deploy", vec!["bootstrap_deploy"]));
        params.push("MYSQL_ROOT_PASSWORD");
    }
    if n >= 4 {
        steps.push(("firstboot_config", vec!["firstboot_config"]));
        params.push("NODE_COUNT");
    }
    if n >= 5 {
        steps.push(("cluster_services", vec!["cluster_services"]));
    }
    if n >= 6 {
        steps.push(("statefulset", vec!["statefulset"]));
        params.extend(["VOLUME_SIZE", "ANTI_AFFINITY"]);
    }
    if n >= 7 {
        steps.push(("cleanup", vec!["bootstrap_cleanup", "config"]));
    }
    Stage {
        steps,
        params,
        client_service: n >= 8,
        node_update: n >= 9,
    }
}

/// Writes the stage's operator.yaml, params.yaml and templates into `dir`.
fn write_stage(dir: &Path, stage: &Stage) {
    let ex = example_dir();
    let example_operator = std::fs::read_to_string(ex.join("operator.yaml")).expect("example operator.yaml");
    // The seed's operator.yaml has no typed API (`api:`, a kudo-rs extension examples/galera opts
    // into, with its comment): its install prints KUDO's three lines.
    let mut in_api = false;
    let header: String = example_operator
        .lines()
        .take_while(|l| !l.starts_with("plans:"))
        .filter(|l| {
            in_api = l.starts_with("api:") || (in_api && l.starts_with(' '));
            !in_api
                && !l.starts_with("# kudo-rs extension")
                && !l.starts_with("# an Instance of the same name")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let mut op = header;
    op.push_str("plans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: deploy\n        strategy: serial\n        steps:\n");
    let mut tasks: Vec<&str> = Vec::new();
    for (step, step_tasks) in &stage.steps {
        op.push_str(&format!("          - name: {step}\n            tasks:\n"));
        for t in step_tasks {
            op.push_str(&format!("              - {t}\n"));
            if !tasks.contains(t) {
                tasks.push(t);
            }
        }
    }
    if stage.node_update {
        op.push_str("  node_update:\n    strategy: serial\n    phases:\n      - name: deploy\n        strategy: serial\n        steps:\n");
        op.push_str("          - name: config\n            tasks:\n              - config\n");
        op.push_str("          - name: stateful\n            tasks:\n              - statefulset\n");
    }
    op.push_str("tasks:\n");
    for t in &tasks {
        let kind = if *t == "bootstrap_cleanup" {
            "Delete"
        } else {
            "Apply"
        };
        op.push_str(&format!(
            "    - name: {t}\n      kind: {kind}\n      spec:\n        resources:\n"
        ));
        for r in task_resources(t, stage) {
            op.push_str(&format!("          - {r}\n"));
        }
    }
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("operator.yaml"), op).unwrap();

    // params.yaml: the example's entries for the parameters the blog has declared so far.
    let example_params = std::fs::read_to_string(ex.join("params.yaml")).expect("example params.yaml");
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in example_params.lines() {
        if let Some(name) = line.strip_prefix("  - name: ") {
            blocks.push((name.trim().to_string(), String::new()));
        }
        if let Some((_, text)) = blocks.last_mut() {
            // NODE_COUNT only triggers node_update once part 3 adds that plan.
            if !stage.node_update && line.trim_start().starts_with("trigger:") {
                continue;
            }
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut params = String::from("apiVersion: kudo.dev/v1beta1\nparameters:\n");
    for (name, text) in &blocks {
        if stage.params.contains(&name.as_str()) {
            params.push_str(text);
        }
    }
    std::fs::write(dir.join("params.yaml"), params).unwrap();

    let mut used: Vec<&str> = tasks.iter().flat_map(|t| task_resources(t, stage)).collect();
    used.dedup();
    for r in used {
        std::fs::copy(ex.join("templates").join(r), dir.join("templates").join(r))
            .unwrap_or_else(|e| panic!("example template {r}: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Output helpers.

/// Replaces the `last updated <date> <time>` timestamp, the only part of a plan tree that varies.
fn strip_timestamps(text: &str) -> String {
    text.lines()
        .map(|l| match l.find(", last updated ") {
            Some(i) => format!("{}, last updated <T>", &l[..i]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

/// The OperatorVersion name. The seeds show `galera-0.1.0` (KUDO 0.12); KUDO 0.19 names it
/// `<name>-<appVersion>-<operatorVersion>` when appVersion is set, as the seeds' operator.yaml does.
const OV: &str = "galera-10.5.3-0.1.0";

/// A plan-status tree as the seeds print it, for `steps` all in `state`.
fn tree(plan: &str, state: &str, steps: &[&str]) -> String {
    tree_of(plan, state, &[(plan, steps)])
}

/// The tree when the OperatorVersion has several plans: the active one with live `state`, the
/// others `[NOT ACTIVE]` (plans sorted by name, as KUDO does).
fn tree_of(active: &str, state: &str, plans: &[(&str, &[&str])]) -> String {
    let phased: Vec<(&str, &str, &[&str])> = plans.iter().map(|(p, s)| (*p, "deploy", *s)).collect();
    tree_of_phased(active, state, &phased)
}

/// [`tree_of`] for plans whose single phase is not named `deploy` (the full example's level-3
/// plans): `(plan, phase, steps)`.
fn tree_of_phased(active: &str, state: &str, plans: &[(&str, &str, &[&str])]) -> String {
    let mut t = String::from("Plan(s) for \"galera-instance\" in namespace \"default\":\n.\n");
    t.push_str(&format!(
        "└── galera-instance (Operator-Version: \"{OV}\" Active-Plan: \"{active}\")\n"
    ));
    for (pi, (plan, phase, steps)) in plans.iter().enumerate() {
        let last_plan = pi + 1 == plans.len();
        let (branch, indent) = if last_plan {
            ("└──", "    ")
        } else {
            ("├──", "│   ")
        };
        let st = if *plan == active { state } else { "NOT ACTIVE" };
        let stamp = if *plan == active { ", last updated <T>" } else { "" };
        t.push_str(&format!(
            "    {branch} Plan {plan} (serial strategy) [{st}]{stamp}\n"
        ));
        t.push_str(&format!(
            "    {indent}└── Phase {phase} (serial strategy) [{st}]\n"
        ));
        for (i, s) in steps.iter().enumerate() {
            let b = if i + 1 == steps.len() {
                "└──"
            } else {
                "├──"
            };
            t.push_str(&format!("    {indent}    {b} Step {s} [{st}]\n"));
        }
    }
    t.trim_end().to_string()
}

/// Polls `kubectl kudo plan status` until `plan` is COMPLETE, returning the last tree.
fn wait_complete(shell: &Shell, dir: &Path, plan: &str) -> String {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < PLAN_TIMEOUT {
        let out = shell.sh(dir, "kubectl kudo plan status --instance galera-instance");
        last = format!("{}{}", out.stdout, out.stderr);
        if out.ok && last.contains(&format!("Plan {plan} (serial strategy) [COMPLETE]")) {
            return strip_timestamps(&out.stdout);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "plan {plan} of galera-instance did not reach COMPLETE within {PLAN_TIMEOUT:?}; last `plan status`:\n{last}"
    );
}

/// Polls `check` until it returns Ok or the bound passes; panics with the last error.
fn eventually(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let start = Instant::now();
    loop {
        match check() {
            Ok(()) => return,
            Err(e) if start.elapsed() > PLAN_TIMEOUT => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// A `kubectl get` table: header columns and rows keyed by NAME, each row's cells by column.
fn table(text: &str) -> (Vec<String>, BTreeMap<String, BTreeMap<String, String>>) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut rows = BTreeMap::new();
    for l in lines {
        let cells: Vec<&str> = l.split_whitespace().collect();
        let row: BTreeMap<String, String> = header
            .iter()
            .cloned()
            .zip(cells.iter().map(|c| c.to_string()))
            .collect();
        rows.insert(cells[0].to_string(), row);
    }
    (header, rows)
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// The value of `Field:` in `kubectl describe` output, continuation lines included (one per line).
fn describe_field(text: &str, field: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&format!("{field}:")));
    if let Some(first) = lines.next() {
        let v = first[field.len() + 1..].trim();
        if !v.is_empty() {
            out.push(v.to_string());
        }
        for l in lines {
            if !l.starts_with(' ') || l.trim().is_empty() {
                break;
            }
            out.push(l.trim().to_string());
        }
    }
    out
}

/// The `Data` section of `kubectl describe configmap`: key → value text.
fn describe_data(text: &str) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    let Some(start) = text.find("\nData\n====\n") else {
        return data;
    };
    let body = &text[start + "\nData\n====\n".len()..];
    let end = ["\nBinaryData\n", "\nEvents:"]
        .iter()
        .filter_map(|m| body.find(m))
        .min()
        .unwrap_or(body.len());
    let body = &body[..end];
    let lines: Vec<&str> = body.lines().collect();
    let mut i = 0;
    while i + 1 < lines.len() {
        if lines[i].ends_with(':') && lines[i + 1] == "----" {
            let key = lines[i].trim_end_matches(':').to_string();
            let mut j = i + 2;
            let mut value = Vec::new();
            while j < lines.len()
                && !(j + 1 < lines.len() && lines[j].ends_with(':') && lines[j + 1] == "----")
            {
                value.push(lines[j]);
                j += 1;
            }
            data.insert(key, value.join("\n").trim_end().to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    data
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Labels and KUDO annotations the seeds show on every object KUDO applied (minus
/// `kudo.dev/last-applied-configuration`: we use server-side apply, see docs/tutorial.md).
fn assert_kudo_metadata(describe: &str, extra_labels: &[&str], plan: &str, step: &str) {
    let mut labels: Vec<String> = extra_labels.iter().map(|s| s.to_string()).collect();
    labels.extend(
        [
            "heritage=kudo",
            "kudo.dev/instance=galera-instance",
            "kudo.dev/operator=galera",
        ]
        .map(String::from),
    );
    labels.sort();
    assert_eq!(
        describe_field(describe, "Labels"),
        labels,
        "labels in:\n{describe}"
    );
    let ann = describe_field(describe, "Annotations");
    let get = |k: &str| {
        ann.iter()
            .find_map(|a| a.strip_prefix(&format!("{k}: ")).map(str::to_string))
    };
    assert_eq!(
        get("kudo.dev/plan").as_deref(),
        Some(plan),
        "annotations: {ann:?}"
    );
    assert_eq!(
        get("kudo.dev/phase").as_deref(),
        Some("deploy"),
        "annotations: {ann:?}"
    );
    assert_eq!(
        get("kudo.dev/step").as_deref(),
        Some(step),
        "annotations: {ann:?}"
    );
    let uid = get("kudo.dev/last-plan-execution-uid").unwrap_or_default();
    assert!(
        is_uuid(&uid),
        "kudo.dev/last-plan-execution-uid is a UUID, got {uid:?} in {ann:?}"
    );
    assert!(
        !ann.iter()
            .any(|a| a.starts_with("kudo.dev/last-applied-configuration")),
        "server-side apply leaves no last-applied annotation: {ann:?}"
    );
}

const SERVICE_COLUMNS: [&str; 6] = ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"];
const ALL_PORTS: &str = "3306/TCP,4444/TCP,4567/TCP,4568/TCP";

fn assert_headless_service(shell: &Shell, dir: &Path, name: &str) {
    let (header, rows) = table(&shell.ok(dir, "kubectl get services"));
    assert_eq!(header, cols(&SERVICE_COLUMNS));
    let row = rows
        .get(name)
        .unwrap_or_else(|| panic!("no service {name} in {rows:?}"));
    assert_eq!(row["TYPE"], "ClusterIP");
    assert_eq!(row["CLUSTER-IP"], "None");
    assert_eq!(row["EXTERNAL-IP"], "<none>");
    assert_eq!(row["PORT(S)"], ALL_PORTS);
}

/// The `Port:`/`TargetPort:` lines of `kubectl describe service` for the four Galera ports.
fn assert_described_ports(describe: &str) {
    let port_lines: Vec<String> = describe
        .lines()
        .filter(|l| l.starts_with("Port:") || l.starts_with("TargetPort:"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let mut want = Vec::new();
    for (n, p) in [
        ("mysql", 3306),
        ("sst", 4444),
        ("replication", 4567),
        ("ist", 4568),
    ] {
        want.push(format!("Port: {n} {p}/TCP"));
        want.push(format!("TargetPort: {p}/TCP"));
    }
    assert_eq!(port_lines, want, "in\n{describe}");
}

fn endpoints(describe: &str) -> Vec<String> {
    describe
        .lines()
        .filter_map(|l| l.strip_prefix("Endpoints:"))
        .map(|v| v.trim().to_string())
        .collect()
}

/// The plan-run UID KUDO stamped on the node ConfigMap.
fn run_uid(shell: &Shell, dir: &Path) -> String {
    shell.ok(
        dir,
        "kubectl get configmap galera-instance-nodeconfig -o jsonpath='{.metadata.annotations.kudo\\.dev/last-plan-execution-uid}'",
    )
}

/// The seeds' uninstall recipe between stages; afterwards no KUDO CRD is left.
fn remove_kudo(shell: &Shell, dir: &Path) {
    let out = shell.ok(
        dir,
        "kubectl kudo init --dry-run --output yaml | kubectl delete -f -",
    );
    for crd in [
        "operators.kudo.dev",
        "operatorversions.kudo.dev",
        "instances.kudo.dev",
    ] {
        assert!(
            out.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io \"{crd}\" deleted"
            )),
            "seed: `customresourcedefinition.apiextensions.k8s.io \"{crd}\" deleted`; got:\n{out}"
        );
    }
    eventually(
        "the instance's ConfigMaps are garbage-collected after the CRDs are deleted",
        || {
            let cms = shell.ok(dir, "kubectl get configmaps -o name");
            if cms.contains("galera-instance") {
                Err(cms)
            } else {
                Ok(())
            }
        },
    );
    // The next `kubectl kudo init` recreates kudo-system, so let its deletion finish first.
    eventually("namespace kudo-system is gone", || {
        let out = shell.sh(dir, "kubectl get namespace kudo-system");
        if out.ok { Err(out.stdout) } else { Ok(()) }
    });
}

/// Between stages: the seeds remove all of KUDO with
/// `kubectl kudo init --dry-run --output yaml | kubectl delete -f -` (checked separately in
/// `init_and_remove_kudo_recipe`); here `kubectl kudo uninstall` and deleting the Operator and
/// OperatorVersion, so the next stage's `install .` creates all three again.
fn reset(shell: &Shell, dir: &Path) {
    shell.ok(dir, "kubectl kudo uninstall --instance galera-instance");
    shell.ok(
        dir,
        "kubectl delete operatorversions.kudo.dev,operators.kudo.dev --all",
    );
    eventually("the instance's objects are gone after uninstall", || {
        let left = shell.ok(
            dir,
            "kubectl get deployments,statefulsets,services,configmaps,pods,instances.kudo.dev -o name",
        );
        if left.contains("galera-instance") {
            Err(left)
        } else {
            Ok(())
        }
    });
}

/// `kubectl kudo init` as in the seeds: the three ✅ lines.
fn init(shell: &Shell, dir: &Path) {
    let out = shell.sh(dir, "kubectl kudo init");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(out.ok, "kubectl kudo init failed:\n{all}");
    for line in [
        "✅ installed crds",
        "✅ installed service accounts and other requirements for controller to run",
        "✅ installed kudo controller",
    ] {
        assert!(all.contains(line), "seed prints `{line}`; got:\n{all}");
    }
}

/// `kubectl kudo install .` and its three seed lines.
fn install(shell: &Shell, dir: &Path, cmd: &str) {
    install_printing(shell, dir, cmd, "");
}

/// `kubectl kudo install .` printing the three seed lines with `extra` (lines ending in `\n`)
/// before the Instance's: what examples/galera's typed API (`api:`, a kudo-rs extension) adds.
fn install_printing(shell: &Shell, dir: &Path, cmd: &str, extra: &str) {
    let out = shell.sh(dir, cmd);
    assert!(out.ok, "`{cmd}` failed:\n{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.trim_end(),
        format!(
            "operator.kudo.dev/v1beta1/galera created\noperatorversion.kudo.dev/v1beta1/galera-10.5.3-0.1.0 created\n{extra}instance.kudo.dev/v1beta1/galera-instance created"
        ),
        "stderr: {}",
        out.stderr
    );
}

fn stage_dir(root: &Path, n: u32) -> PathBuf {
    let dir = root.join(format!("stage{n}")).join("operator");
    write_stage(&dir, &stage(n));
    dir
}

fn pods(shell: &Shell, dir: &Path) -> (Vec<String>, BTreeMap<String, BTreeMap<String, String>>) {
    table(&shell.ok(dir, "kubectl get pods"))
}

/// Waits until exactly `names` (plus one bootstrap pod when `bootstrap`) run 1/1 with no restarts.
fn wait_pods(shell: &Shell, dir: &Path, names: &[String], bootstrap: bool) {
    eventually("kubectl get pods shows the seed's pods Running", || {
        let (header, rows) = pods(shell, dir);
        if header != cols(&["NAME", "READY", "STATUS", "RESTARTS", "AGE"]) {
            return Err(format!("header {header:?}"));
        }
        let boot: Vec<&String> = rows
            .keys()
            .filter(|n| n.starts_with("galera-instance-bootstrap-"))
            .collect();
        let others: Vec<&String> = rows
            .keys()
            .filter(|n| !n.starts_with("galera-instance-bootstrap-"))
            .collect();
        if others != names.iter().collect::<Vec<_>>() || boot.len() != usize::from(bootstrap) {
            return Err(format!("pods {:?}", rows.keys().collect::<Vec<_>>()));
        }
        for b in &boot {
            // Deployment pods: <deployment>-<pod-template-hash>-<5 chars>, as in the seed.
            let suffix: Vec<&str> = b["galera-instance-bootstrap-".len()..].split('-').collect();
            if suffix.len() != 2 || suffix[1].len() != 5 {
                return Err(format!(
                    "bootstrap pod name {b} is not <deployment>-<hash>-<suffix>"
                ));
            }
        }
        for row in rows.values() {
            if (
                row["READY"].as_str(),
                row["STATUS"].as_str(),
                row["RESTARTS"].as_str(),
            ) != ("1/1", "Running", "0")
            {
                return Err(format!("pod not 1/1 Running 0: {row:?}"));
            }
        }
        Ok(())
    });
}

fn galera_pods(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("galera-instance-galera-{i}")).collect()
}

fn gcomm(bootstrap: bool, nodes: usize) -> String {
    let mut members: Vec<String> = Vec::new();
    if bootstrap {
        members.push("galera-instance-bootstrap-svc".into());
    }
    members.extend((0..nodes).map(|i| format!("galera-instance-galera-{i}.galera-instance-hs")));
    format!("wsrep_cluster_address = gcomm://{}", members.join(","))
}

/// The node ConfigMap's galera.cnf as the seeds show it, minus `wsrep_sst_auth` (see the
/// example's secret.yaml: the SST credentials moved into a Secret).
fn node_cnf(bootstrap: bool, nodes: usize) -> String {
    format!(
        "[galera]\nwsrep_on = ON\nwsrep_provider = /usr/lib/galera/libgalera_smm.so\nwsrep_sst_method = mariabackup\n{}\nbinlog_format = ROW",
        gcomm(bootstrap, nodes)
    )
}

const INNODB_CNF: &str = "[innodb]\ninnodb_autoinc_lock_mode = 2\ninnodb_flush_log_at_trx_commit = 0\ninnodb_buffer_pool_size = 122M";

// ---------------------------------------------------------------------------------------------
// Offline commands (no cluster).

/// Part 1: `kubectl kudo package new galera` then `ls` / `tree` / `cat`.
#[test]
fn part1_package_new_layout() {
    let shell = Shell::new();
    let work = tempfile::tempdir().unwrap();
    let galera = work.path().join("galera");
    std::fs::create_dir(&galera).unwrap();
    shell.ok(&galera, "kubectl kudo package new galera");
    // seed: `ls` → operator; `tree` → operator/{operator.yaml,params.yaml}, "1 directory, 2 files".
    let mut top: Vec<String> = std::fs::read_dir(&galera)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["operator"]);
    let mut files: Vec<String> = std::fs::read_dir(galera.join("operator"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["operator.yaml", "params.yaml"]);
    // seed: operator.yaml has apiVersion, name: galera, operatorVersion: 0.1.0 (the seed's
    // `plans: {}`/`tasks: []` skeleton is KUDO 0.12's; 0.19 scaffolds a deploy plan); params.yaml
    // is `parameters: []`.
    let op: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(galera.join("operator/operator.yaml")).unwrap())
            .unwrap();
    assert_eq!(op["apiVersion"], "kudo.dev/v1beta1");
    assert_eq!(op["name"], "galera");
    assert_eq!(op["operatorVersion"], "0.1.0");
    let params_text = std::fs::read_to_string(galera.join("operator/params.yaml")).unwrap();
    let params: serde_json::Value = serde_saphyr::from_str(&params_text).unwrap();
    assert_eq!(params["apiVersion"], "kudo.dev/v1beta1");
    assert_eq!(
        params["parameters"],
        serde_json::json!([]),
        "params.yaml:\n{params_text}"
    );
}

/// Part 2: `kubectl kudo package list plans|tasks|parameters .` on the firstboot_config stage.
#[test]
fn part2_package_list() {
    let shell = Shell::new();
    let work = tempfile::tempdir().unwrap();
    let dir = stage_dir(work.path(), 4);

    let plans = shell.ok(&dir, "kubectl kudo package list plans .");
    assert_eq!(
        plans.trim_end(),
        "plans\n└── deploy (serial)\n    └── [phase]  deploy (serial)\n        ├── [step]  bootstrap_config\n        │   └── bootstrap_config\n        ├── [step]  bootstrap_service\n        │   └── bootstrap_service\n        ├── [step]  bootstrap_deploy\n        │   └── bootstrap_deploy\n        └── [step]  firstboot_config\n            └── firstboot_config"
    );

    // The seed's tables are tab-separated and padded; compare cell by cell.
    let cells = |t: &str| -> Vec<Vec<String>> {
        t.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    };
    let tasks = shell.ok(&dir, "kubectl kudo package list tasks .");
    assert_eq!(
        cells(&tasks),
        cells(
            "Name Kind Resources\nbootstrap_config Apply [bootstrap_config.yaml]\nbootstrap_service Apply [bootstrap_service.yaml]\nbootstrap_deploy Apply [bootstrap_deploy.yaml]\nfirstboot_config Apply [galera_config.yaml]"
        ),
        "got:\n{tasks}"
    );
    // KUDO 0.19 (immutable parameters, 0.17+) prints a fourth column, Immutable; the seed's three
    // columns must come first, unchanged.
    let params = shell.ok(&dir, "kubectl kudo package list parameters .");
    let got = cells(&params);
    let seed = cells(
        "Name Default Required\nIST_PORT 4568 true\nMYSQL_PORT 3306 true\nMYSQL_ROOT_PASSWORD admin true\nNODE_COUNT 3 true\nREPLICATION_PORT 4567 true\nSST_PASSWORD admin true\nSST_PORT 4444 true\nSST_USER root true",
    );
    assert_eq!(
        got.iter()
            .map(|r| r[..3.min(r.len())].to_vec())
            .collect::<Vec<_>>(),
        seed,
        "got:\n{params}"
    );
    for (i, row) in got.iter().enumerate() {
        assert_eq!(
            row.get(3).map(String::as_str),
            Some(if i == 0 { "Immutable" } else { "false" }),
            "got:\n{params}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Against `kubectl-kudo dev`.

/// Part 1: bootstrap_config, bootstrap_service, bootstrap_deploy — each stage installed, checked
/// and removed with the seeds' recipe.
#[test]
fn part1_bootstrap_node() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);

    // --- First test: bootstrap_config only.
    let dir = stage_dir(work.path(), 1);
    install(&shell, &dir, "kubectl kudo install .");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &["bootstrap_config"])
    );
    let out = shell.ok(&dir, "kubectl kudo plan status --instance=galera-instance");
    assert_eq!(
        strip_timestamps(&out),
        tree("deploy", "COMPLETE", &["bootstrap_config"]),
        "`--instance=` form"
    );

    let (header, rows) = table(&shell.ok(&dir, "kubectl get configmaps"));
    assert_eq!(header, cols(&["NAME", "DATA", "AGE"]));
    assert_eq!(
        rows.get("galera-instance-bootstrap").map(|r| r["DATA"].as_str()),
        Some("1"),
        "rows {rows:?}"
    );

    let describe = shell.ok(&dir, "kubectl describe configmap galera-instance-bootstrap");
    assert_eq!(describe_field(&describe, "Name"), ["galera-instance-bootstrap"]);
    assert_eq!(describe_field(&describe, "Namespace"), ["default"]);
    assert_kudo_metadata(&describe, &[], "deploy", "bootstrap_config");
    let data = describe_data(&describe);
    assert_eq!(
        data.get("galera.cnf").map(String::as_str),
        Some(
            "[galera]\nwsrep_on = ON\nwsrep_provider = /usr/lib/galera/libgalera_smm.so\nwsrep_sst_method = mariabackup\nwsrep_cluster_address = gcomm://\nbinlog_format = ROW"
        ),
        "describe:\n{describe}"
    );
    reset(&shell, &dir);

    // --- Bootstrap service.
    let dir = stage_dir(work.path(), 2);
    install(&shell, &dir, "kubectl kudo install .");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &["bootstrap_config", "bootstrap_service"])
    );
    assert_headless_service(&shell, &dir, "galera-instance-bootstrap-svc");
    let describe = shell.ok(&dir, "kubectl describe service galera-instance-bootstrap-svc");
    assert_kudo_metadata(
        &describe,
        &["app=galera-bootstrap"],
        "deploy",
        "bootstrap_service",
    );
    assert_eq!(
        describe_field(&describe, "Selector"),
        ["app=galera-bootstrap,instance=galera-instance"]
    );
    assert_eq!(describe_field(&describe, "Type"), ["ClusterIP"]);
    assert_eq!(describe_field(&describe, "IP"), ["None"]);
    assert_described_ports(&describe);
    assert_eq!(
        endpoints(&describe),
        ["<none>"; 4],
        "no bootstrap pod yet:\n{describe}"
    );
    reset(&shell, &dir);

    // --- Deploy the bootstrap node.
    let dir = stage_dir(work.path(), 3);
    install(&shell, &dir, "kubectl kudo install .");
    let steps = ["bootstrap_config", "bootstrap_service", "bootstrap_deploy"];
    // The seed caught the plan IN_PROGRESS; we check the tree once it finished.
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    wait_pods(&shell, &dir, &[], true);
    reset(&shell, &dir);
}

/// Part 2: firstboot_config, cluster_services, statefulset.
#[test]
fn part2_cluster_nodes() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);

    // --- firstboot_config.
    let dir = stage_dir(work.path(), 4);
    install(&shell, &dir, "kubectl kudo install .");
    let mut steps = vec![
        "bootstrap_config",
        "bootstrap_service",
        "bootstrap_deploy",
        "firstboot_config",
    ];
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    let (header, rows) = table(&shell.ok(&dir, "kubectl get configmaps"));
    assert_eq!(header, cols(&["NAME", "DATA", "AGE"]));
    assert_eq!(
        rows.get("galera-instance-bootstrap").map(|r| r["DATA"].as_str()),
        Some("1")
    );
    assert_eq!(
        rows.get("galera-instance-nodeconfig").map(|r| r["DATA"].as_str()),
        Some("2")
    );
    let describe = shell.ok(&dir, "kubectl describe configmap galera-instance-nodeconfig");
    assert_kudo_metadata(&describe, &[], "deploy", "firstboot_config");
    let data = describe_data(&describe);
    assert_eq!(
        data.get("galera.cnf"),
        Some(&node_cnf(true, 3)),
        "describe:\n{describe}"
    );
    assert_eq!(data.get("innodb.cnf").map(String::as_str), Some(INNODB_CNF));
    reset(&shell, &dir);

    // --- cluster_services (headless service).
    let dir = stage_dir(work.path(), 5);
    install(&shell, &dir, "kubectl kudo install .");
    steps.push("cluster_services");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    assert_headless_service(&shell, &dir, "galera-instance-bootstrap-svc");
    assert_headless_service(&shell, &dir, "galera-instance-hs");
    let describe = shell.ok(&dir, "kubectl describe service galera-instance-hs");
    assert_kudo_metadata(
        &describe,
        &["app=galera", "galera=galera-instance"],
        "deploy",
        "cluster_services",
    );
    assert_eq!(
        describe_field(&describe, "Selector"),
        ["app=galera,instance=galera-instance"]
    );
    assert_eq!(describe_field(&describe, "IP"), ["None"]);
    assert_described_ports(&describe);
    assert_eq!(endpoints(&describe), ["<none>"; 4], "no nodes yet:\n{describe}");
    reset(&shell, &dir);

    // --- statefulset.
    let dir = stage_dir(work.path(), 6);
    install(&shell, &dir, "kubectl kudo install .");
    steps.push("statefulset");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    wait_pods(&shell, &dir, &galera_pods(3), true);
    reset(&shell, &dir);
}

/// Part 3: cleanup of the bootstrap node, the client service, scaling through NODE_COUNT.
#[test]
fn part3_cleanup_client_service_scaling() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);
    let steps = [
        "bootstrap_config",
        "bootstrap_service",
        "bootstrap_deploy",
        "firstboot_config",
        "cluster_services",
        "statefulset",
        "cleanup",
    ];

    // --- Cleanup bootstrap node.
    let dir = stage_dir(work.path(), 7);
    install(&shell, &dir, "kubectl kudo install ./");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    let describe = shell.ok(&dir, "kubectl describe configmap galera-instance-nodeconfig");
    assert_kudo_metadata(&describe, &[], "deploy", "cleanup");
    let data = describe_data(&describe);
    assert_eq!(
        data.get("galera.cnf"),
        Some(&node_cnf(false, 3)),
        "gcomm:// without the bootstrap service:\n{describe}"
    );
    assert_eq!(data.get("innodb.cnf").map(String::as_str), Some(INNODB_CNF));
    wait_pods(&shell, &dir, &galera_pods(3), false);
    let cms = shell.ok(&dir, "kubectl get configmaps -o name");
    assert!(
        !cms.contains("galera-instance-bootstrap"),
        "bootstrap ConfigMap deleted: {cms}"
    );
    reset(&shell, &dir);

    // --- Client service.
    let dir = stage_dir(work.path(), 8);
    install(&shell, &dir, "kubectl kudo install ./");
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree("deploy", "COMPLETE", &steps)
    );
    let (header, rows) = table(&shell.ok(&dir, "kubectl get services"));
    assert_eq!(header, cols(&SERVICE_COLUMNS));
    assert!(
        !rows.contains_key("galera-instance-bootstrap-svc"),
        "bootstrap service deleted: {rows:?}"
    );
    let cs = rows
        .get("galera-instance-cs")
        .unwrap_or_else(|| panic!("no galera-instance-cs in {rows:?}"));
    assert_eq!(cs["TYPE"], "ClusterIP");
    assert!(
        cs["CLUSTER-IP"].parse::<std::net::Ipv4Addr>().is_ok(),
        "cs has a cluster IP: {cs:?}"
    );
    assert_eq!(cs["PORT(S)"], "3306/TCP");
    assert_headless_service(&shell, &dir, "galera-instance-hs");
    let describe = shell.ok(&dir, "kubectl describe service galera-instance-cs");
    assert_kudo_metadata(
        &describe,
        &["app=galera", "galera=galera-instance"],
        "deploy",
        "cluster_services",
    );
    assert_eq!(
        describe_field(&describe, "Selector"),
        ["app=galera,instance=galera-instance"]
    );
    assert_eq!(describe_field(&describe, "IP"), [cs["CLUSTER-IP"].clone()]);
    reset(&shell, &dir);

    // --- Scale up/down: node_update triggered by NODE_COUNT.
    let dir = stage_dir(work.path(), 9);
    install(&shell, &dir, "kubectl kudo install ./");
    let plans: [(&str, &[&str]); 2] = [("deploy", &steps), ("node_update", &["config", "stateful"])];
    assert_eq!(
        wait_complete(&shell, &dir, "deploy"),
        tree_of("deploy", "COMPLETE", &plans)
    );
    wait_pods(&shell, &dir, &galera_pods(3), false);
    for (count, label) in [(5usize, "scale up"), (2, "scale down")] {
        let before = run_uid(&shell, &dir);
        shell.ok(
            &dir,
            &format!("kubectl kudo update --instance galera-instance -p NODE_COUNT={count}"),
        );
        eventually("node_update re-applies the node ConfigMap", || {
            let now = run_uid(&shell, &dir);
            if now != before {
                Ok(())
            } else {
                Err(format!("still run {now}"))
            }
        });
        let status = wait_complete(&shell, &dir, "node_update");
        assert_eq!(status, tree_of("node_update", "COMPLETE", &plans), "{label}");
        wait_pods(&shell, &dir, &galera_pods(count), false);
        eventually("kubectl get statefulsets shows READY n/n", || {
            let (header, sts) = table(&shell.ok(&dir, "kubectl get statefulsets"));
            if header != cols(&["NAME", "READY", "AGE"]) {
                return Err(format!("header {header:?}"));
            }
            let ready = sts.get("galera-instance-galera").map(|r| r["READY"].clone());
            if ready == Some(format!("{count}/{count}")) {
                Ok(())
            } else {
                Err(format!("{label}: {sts:?}"))
            }
        });
        let describe = shell.ok(&dir, "kubectl describe configmap galera-instance-nodeconfig");
        assert_kudo_metadata(&describe, &[], "node_update", "config");
        assert_eq!(
            describe_data(&describe).get("galera.cnf"),
            Some(&node_cnf(false, count)),
            "{label}"
        );
    }
    // The seed's literal command: NODE_COUNT=3.
    let before = run_uid(&shell, &dir);
    shell.ok(
        &dir,
        "kubectl kudo update --instance galera-instance -p NODE_COUNT=3",
    );
    eventually("node_update runs again", || {
        if run_uid(&shell, &dir) != before {
            Ok(())
        } else {
            Err("same run".into())
        }
    });
    wait_complete(&shell, &dir, "node_update");
    wait_pods(&shell, &dir, &galera_pods(3), false);
    reset(&shell, &dir);
}

/// The whole example as shipped (with its `secrets` and `node_scripts` steps): install, the final
/// state the seeds end with, scaling, and `kubectl kudo uninstall`.
#[test]
fn full_example_install_scale_uninstall() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);
    let dir = example_dir();
    let crd = "customresourcedefinition.apiextensions.k8s.io/galeras.galera.kudo.dev created\n";
    install_printing(&shell, &dir, "kubectl kudo install .", crd);
    let status = wait_complete(&shell, &dir, "deploy");
    let steps = [
        "secrets",
        "bootstrap_config",
        "bootstrap_service",
        "bootstrap_deploy",
        "firstboot_config",
        "node_scripts",
        "cluster_services",
        "statefulset",
        "cleanup",
    ];
    // The seeds' plans plus the example's own: level 3 (backup, cleanup, restore), level 5
    // (recover, run by an autopilot rule) and rollback (kubectl kudo rollback); docs/tutorial.md.
    let plans: [(&str, &str, &[&str]); 7] = [
        ("backup", "backup", &["remove-previous", "dump"]),
        ("cleanup", "final-backup", &["remove-previous", "dump"]),
        ("deploy", "deploy", &steps),
        ("node_update", "deploy", &["config", "stateful"]),
        ("recover", "recover", &["config", "node_scripts", "stop", "start"]),
        ("restore", "restore", &["remove-previous", "load"]),
        (
            "rollback",
            "rollback",
            &["bootstrap_cleanup", "config", "node_scripts", "stop", "start"],
        ),
    ];
    assert_eq!(status, tree_of_phased("deploy", "COMPLETE", &plans));
    wait_pods(&shell, &dir, &galera_pods(3), false);
    let describe = shell.ok(&dir, "kubectl describe configmap galera-instance-nodeconfig");
    assert_eq!(
        describe_data(&describe).get("galera.cnf"),
        Some(&node_cnf(false, 3))
    );
    // The SST credentials the seeds keep in galera.cnf live in the Secret.
    let sst = shell.ok(
        &dir,
        "kubectl get secret galera-instance-secret -o jsonpath='{.data.sst-auth\\.cnf}' | base64 -d",
    );
    assert!(
        sst.contains("wsrep_sst_auth = \"root:admin\""),
        "sst-auth.cnf: {sst}"
    );

    let before = run_uid(&shell, &dir);
    shell.ok(
        &dir,
        "kubectl kudo update --instance galera-instance -p NODE_COUNT=4",
    );
    eventually("node_update runs", || {
        if run_uid(&shell, &dir) != before {
            Ok(())
        } else {
            Err("same run".into())
        }
    });
    wait_complete(&shell, &dir, "node_update");
    wait_pods(&shell, &dir, &galera_pods(4), false);

    let out = shell.sh(&dir, "kubectl kudo uninstall --instance galera-instance");
    assert!(out.ok, "uninstall: {}{}", out.stdout, out.stderr);
    eventually("uninstall removes the instance's objects", || {
        let left = shell.ok(
            &dir,
            "kubectl get statefulsets,services,configmaps,secrets,pods -o name",
        );
        if left.contains("galera-instance") {
            Err(left)
        } else {
            Ok(())
        }
    });
}

/// Part 1 and 3: `kubectl describe service` lists the pods' endpoints once they run.
#[test]
fn service_endpoints_as_in_seeds() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);

    // Part 1, after bootstrap_deploy: one endpoint per port.
    let dir = stage_dir(work.path(), 3);
    install(&shell, &dir, "kubectl kudo install .");
    wait_complete(&shell, &dir, "deploy");
    wait_pods(&shell, &dir, &[], true);
    eventually("bootstrap service gets endpoints", || {
        let describe = shell.ok(&dir, "kubectl describe service galera-instance-bootstrap-svc");
        let eps = endpoints(&describe);
        let ports = ["3306", "4444", "4567", "4568"];
        if eps.len() == 4
            && eps
                .iter()
                .zip(ports)
                .all(|(e, p)| e.ends_with(&format!(":{p}")) && !e.contains(','))
        {
            Ok(())
        } else {
            Err(format!("endpoints {eps:?} in\n{describe}"))
        }
    });
    reset(&shell, &dir);

    // Part 3, client service: one :3306 endpoint per node.
    let dir = stage_dir(work.path(), 8);
    install(&shell, &dir, "kubectl kudo install ./");
    wait_complete(&shell, &dir, "deploy");
    wait_pods(&shell, &dir, &galera_pods(3), false);
    eventually("the client service has one endpoint per node", || {
        let describe = shell.ok(&dir, "kubectl describe service galera-instance-cs");
        let eps = endpoints(&describe);
        if eps.len() == 1 && eps[0].split(',').filter(|e| e.ends_with(":3306")).count() == 3 {
            Ok(())
        } else {
            Err(format!("{eps:?}"))
        }
    });
}

/// Parts 1–3: `kubectl kudo init`, then the seeds' removal recipe
/// `kubectl kudo init --dry-run --output yaml | kubectl delete -f -`, then init and install again.
#[test]
fn init_and_remove_kudo_recipe() {
    let _lock = CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let work = tempfile::tempdir().unwrap();
    let mut shell = Shell::new();
    let _dev = start_dev(&mut shell);
    for n in [1, 2] {
        let dir = stage_dir(work.path(), n);
        init(&shell, &dir);
        install(&shell, &dir, "kubectl kudo install .");
        wait_complete(&shell, &dir, "deploy");
        remove_kudo(&shell, &dir);
    }
}
