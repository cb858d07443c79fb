//! Every flag of every KUDO v0.19 command (kudo-behaviour.md §5 and the global flags) parses:
//! scripts and CI configurations written for KUDO, such as the community catalog's own kuttl
//! suite, keep working unchanged.

use clap::Parser;

use crate::Cli;

/// Each entry: one command line of KUDO v0.19 (without the `kubectl kudo` prefix) using one flag.
const KUDO_V019: &[&[&str]] = &[
    // global flags
    &["version", "--home", "/tmp/kudo-home"],
    &["version", "--kubeconfig", "/tmp/kubeconfig"],
    &["version", "-n", "ns"],
    &["version", "--namespace", "ns"],
    &["version", "--request-timeout", "30"],
    &["version", "--validate-install=false"],
    &["version", "--validate-install"],
    &["version", "-v", "3"],
    &["version", "--v", "3"],
    // init
    &["init", "-c"],
    &["init", "--client-only"],
    &["init", "-i", "kudobuilder/controller:v0.19.0"],
    &["init", "--kudo-image", "kudobuilder/controller:v0.19.0"],
    &["init", "--version", "0.19.0"],
    &["init", "--kudo-image-pull-policy", "Always"],
    &["init", "--kudo-image-pull-policy", "IfNotPresent"],
    &["init", "--kudo-image-pull-policy", "Never"],
    &["init", "--dry-run", "-o", "yaml"],
    &["init", "--dry-run", "--output", "json"],
    &["init", "--upgrade"],
    &["init", "--verify"],
    &["init", "--crd-only"],
    &["init", "-w"],
    &["init", "--wait"],
    &["init", "--wait", "--wait-timeout", "120"],
    &["init", "--service-account", "kudo"],
    &["init", "--unsafe-self-signed-webhook-ca"],
    &["init", "--unsafe-self-signed-webhook-ca", "--wait"],
    &["init", "--webhook", "InstanceValidation"],
    // install
    &["install", "./op", "--instance", "i"],
    &["install", "./op", "-p", "A=1"],
    &["install", "./op", "--parameter", "A=1"],
    &["install", "./op", "-P", "values.yaml"],
    &["install", "./op", "--parameter-file", "values.yaml"],
    &["install", "op", "--repo", "community"],
    &["install", "op", "--app-version", "1.0.0"],
    &["install", "op", "--operator-version", "0.1.0"],
    &["install", "./op", "--skip-instance"],
    &["install", "./op", "--wait"],
    &["install", "./op", "--wait", "--wait-time", "60"],
    &["install", "./op", "--create-namespace"],
    &["install", "op", "--in-cluster"],
    // upgrade
    &["upgrade", "./op", "--instance", "i"],
    &["upgrade", "./op", "--instance", "i", "-p", "A=1"],
    &["upgrade", "./op", "--instance", "i", "--parameter", "A=1"],
    &["upgrade", "./op", "--instance", "i", "-P", "v.yaml"],
    &["upgrade", "./op", "--instance", "i", "--parameter-file", "v.yaml"],
    &["upgrade", "op", "--instance", "i", "--repo", "community"],
    &["upgrade", "op", "--instance", "i", "--app-version", "1.0.0"],
    &["upgrade", "op", "--instance", "i", "--operator-version", "0.2.0"],
    // update
    &["update", "--instance", "i", "-p", "A=1"],
    &["update", "--instance", "i", "--parameter", "A=1"],
    &["update", "--instance", "i", "-P", "v.yaml"],
    &["update", "--instance", "i", "--parameter-file", "v.yaml"],
    &["update", "--instance", "i", "-p", "A=1", "--wait"],
    &[
        "update",
        "--instance",
        "i",
        "-p",
        "A=1",
        "--wait",
        "--wait-time",
        "60",
    ],
    // uninstall
    &["uninstall", "--instance", "i"],
    &["uninstall", "--instance", "i", "--wait"],
    &["uninstall", "--instance", "i", "--wait", "--wait-time", "60"],
    // plan
    &["plan", "status", "--instance", "i"],
    &["plan", "status", "--instance", "i", "--wait"],
    &["plan", "status", "--instance", "i", "-o", "yaml"],
    &["plan", "status", "--instance", "i", "--output", "json"],
    &["plan", "history", "--instance", "i"],
    &["plan", "trigger", "--name", "deploy", "--instance", "i"],
    &["plan", "trigger", "--name", "deploy", "--instance", "i", "--wait"],
    &[
        "plan",
        "trigger",
        "--name",
        "deploy",
        "--instance",
        "i",
        "--wait",
        "--wait-time",
        "60",
    ],
    // get
    &["get", "instances"],
    &["get", "operators", "-o", "yaml"],
    &["get", "operatorversions", "--output", "json"],
    &["get", "all"],
    // search
    &["search"],
    &["search", "kafka", "--repo", "community"],
    &["search", "kafka", "-a"],
    &["search", "kafka", "--all-versions"],
    // repo
    &["repo", "add", "local", "http://127.0.0.1/v1"],
    &["repo", "add", "local", "http://127.0.0.1/v1", "-f"],
    &["repo", "add", "local", "http://127.0.0.1/v1", "--skip-check"],
    &["repo", "remove", "local"],
    &["repo", "rm", "local"],
    &["repo", "list"],
    &["repo", "context", "local"],
    &["repo", "index", "dir", "--url", "http://127.0.0.1/v1"],
    &["repo", "index", "dir", "--url-repo", "community"],
    &[
        "repo",
        "index",
        "dir",
        "--merge",
        "http://127.0.0.1/v1/index.yaml",
    ],
    &["repo", "index", "dir", "--merge-repo", "community"],
    &["repo", "index", "dir", "-w"],
    &["repo", "index", "dir", "--overwrite"],
    // package
    &["package", "new", "op"],
    &["package", "new", "op", "-i"],
    &["package", "new", "op", "--interactive"],
    &["package", "new", "op", "-w"],
    &["package", "new", "op", "--overwrite"],
    &["package", "create", "./op"],
    &["package", "create", "./op", "-d", "out"],
    &["package", "create", "./op", "--destination", "out"],
    &["package", "create", "./op", "-w"],
    &["package", "create", "./op", "--overwrite"],
    &["package", "create", "./op", "-o", "yaml"],
    &["package", "verify", "./op"],
    &["package", "verify", "./op", "-o", "json"],
    &["package", "verify", "./op", "--output", "yaml"],
    &[
        "package",
        "verify",
        "./op",
        "--param-checks",
        "display,hint,desc,type,hasgroup,groups",
    ],
    &["package", "verify", "./op", "--param-checks", "all"],
    &["package", "list", "parameters", "./op"],
    &["package", "list", "parameters", "./op", "-d"],
    &["package", "list", "parameters", "./op", "--descriptions"],
    &["package", "list", "parameters", "./op", "-r"],
    &["package", "list", "parameters", "./op", "--required"],
    &["package", "list", "parameters", "./op", "--names"],
    &["package", "list", "parameters", "op", "--repo", "community"],
    &["package", "list", "parameters", "op", "--app-version", "1.0.0"],
    &[
        "package",
        "list",
        "parameters",
        "op",
        "--operator-version",
        "0.1.0",
    ],
    &["package", "list", "plans", "./op"],
    &["package", "list", "plans", "./op", "-t"],
    &["package", "list", "plans", "./op", "--with-tasks"],
    &["package", "list", "plans", "op", "--repo", "community"],
    &["package", "list", "plans", "op", "--app-version", "1.0.0"],
    &["package", "list", "plans", "op", "--operator-version", "0.1.0"],
    &["package", "list", "tasks", "./op"],
    &["package", "list", "tasks", "op", "--repo", "community"],
    &["package", "list", "tasks", "op", "--app-version", "1.0.0"],
    &["package", "list", "tasks", "op", "--operator-version", "0.1.0"],
    // test
    &["test", "--config", "kuttl-test.yaml"],
    &["test", "--crd-dir", "crds"],
    &["test", "--manifest-dir", "manifests"],
    &["test", "--test", "upgrade"],
    &["test", "--start-control-plane"],
    &["test", "--start-kind"],
    &["test", "--kind-config", "kind.yaml"],
    &["test", "--kind-context", "kind"],
    &["test", "--artifacts-dir", "artifacts"],
    &["test", "--report", "JSON"],
    &["test", "--report", "XML"],
    &["test", "--start-kudo"],
    &["test", "--skip-delete"],
    &["test", "--skip-cluster-delete"],
    &["test", "--parallel", "8"],
    &["test", "tests/e2e", "tests/upgrade"],
    // version
    &["version", "-o", "yaml"],
    &["version", "--output", "json"],
    // diagnostics
    &["diagnostics", "collect", "--instance", "i"],
    &["diagnostics", "collect", "--instance", "i", "-O", "out"],
    &[
        "diagnostics",
        "collect",
        "--instance",
        "i",
        "--output-directory",
        "out",
    ],
    &["diagnostics", "collect", "--instance", "i", "--log-since", "1h"],
];

#[test]
fn every_kudo_v019_flag_parses() {
    let mut failures = Vec::new();
    for line in KUDO_V019 {
        let argv = std::iter::once("kubectl-kudo").chain(line.iter().copied());
        if let Err(e) = Cli::try_parse_from(argv) {
            failures.push(format!("kubectl kudo {}: {}", line.join(" "), e.kind()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} KUDO v0.19 command lines do not parse:\n{}",
        failures.len(),
        KUDO_V019.len(),
        failures.join("\n")
    );
}

#[test]
fn the_list_covers_every_global_flag_and_command() {
    let seen = |flag: &str| KUDO_V019.iter().any(|l| l.contains(&flag));
    for flag in [
        "--home",
        "--kubeconfig",
        "--namespace",
        "--request-timeout",
        "--v",
    ] {
        assert!(seen(flag), "{flag}");
    }
    for cmd in [
        "init",
        "install",
        "upgrade",
        "update",
        "uninstall",
        "plan",
        "get",
        "search",
        "repo",
        "package",
        "test",
        "version",
        "diagnostics",
    ] {
        assert!(KUDO_V019.iter().any(|l| l[0] == cmd), "{cmd}");
    }
}
