//! Commands called in-process through the library (`kubectl_kudo::run` with `Vec<u8>` writers),
//! each compared byte for byte — stdout, stderr and exit code — with what the real binary prints
//! for the same command line, so the library and the binary cannot drift apart. The end-to-end
//! tests of the other test binaries keep going through the real binary and kubectl.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use kubectl_kudo::{Cli, CliError, Io};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a command line produced: exit code, stdout, stderr.
#[derive(Debug, PartialEq)]
struct Run {
    code: ExitCode,
    out: String,
    err: String,
}

/// Parses `args` as the binary does and runs them in-process; stderr gets the error report the
/// binary prints (`CliError::report`). The result is also returned for assertions on its kind.
async fn inprocess(args: &[&str]) -> (Run, Result<(), CliError>) {
    let cli = Cli::try_parse_from(std::iter::once("kubectl-kudo").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} does not parse: {e}"));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = {
        let mut io = Io::new(&mut out, &mut err);
        kubectl_kudo::run(cli, &mut io).await
    };
    let code = match &result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            e.report(&mut err).unwrap();
            e.exit_code()
        }
    };
    let run = Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    };
    (run, result)
}

/// The same command line through the real binary.
fn binary(args: &[&str]) -> Run {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let code = o.status.code().expect("exited, not killed");
    Run {
        code: ExitCode::from(u8::try_from(code).unwrap()),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    }
}

/// An in-process run and what `kubectl_kudo::run` returned.
struct Outcome {
    run: Run,
    result: Result<(), CliError>,
}

/// Runs an offline command both ways, asserts they agree, and returns the in-process outcome.
fn same_as_binary(args: &[&str]) -> Outcome {
    let (run, result) = futures::executor::block_on(inprocess(args));
    assert_eq!(run, binary(args), "in-process vs binary: {args:?}");
    Outcome { run, result }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn package_verify_valid_and_broken() {
    let good = repo().join("examples/first-operator");
    let Outcome { run, result } = same_as_binary(&["package", "verify", path(&good)]);
    assert!(result.is_ok());
    assert!(run.out.ends_with("package is valid\n"), "{}", run.out);

    // A broken package: a failure the binary reports as `Error: …` with exit code 1.
    let bad = repo().join("crates/kudo-package/tests/testdata/bad/duplicate-param");
    let Outcome { run, result } = same_as_binary(&["package", "verify", path(&bad)]);
    assert_eq!(run.code, ExitCode::from(1));
    let Err(CliError::Failed(e)) = result else {
        panic!("expected a failure: {result:?}")
    };
    assert_eq!(run.err, format!("Error: {e:#}\n"));
    assert!(
        run.err.starts_with("Error: package verification found"),
        "{}",
        run.err
    );

    let Outcome { run, .. } = same_as_binary(&["package", "verify", path(&bad), "-o", "json"]);
    let j: serde_json::Value = serde_json::from_str(&run.out).unwrap();
    assert_eq!(j["valid"], false);
}

#[test]
fn package_render_and_list() {
    let galera = repo().join("examples/galera");
    let Outcome { run, .. } = same_as_binary(&["package", "render", path(&galera), "-o", "yaml"]);
    assert!(run.out.starts_with("---\n# deploy/"), "{}", run.out);
    same_as_binary(&[
        "package",
        "render",
        path(&galera),
        "--plan",
        "deploy",
        "-p",
        "NODE_COUNT=5",
        "-o",
        "json",
    ]);
    same_as_binary(&["package", "list", "parameters", path(&galera)]);
    same_as_binary(&["package", "list", "plans", path(&galera), "-t"]);
    // A usage problem found by the command (not by clap): exit 1 with the binary's message.
    let Outcome { run, .. } = same_as_binary(&["package", "render", path(&galera), "-p", "NOPE"]);
    assert_eq!(run.code, ExitCode::from(1));
}

#[test]
fn package_argocd_health_prints_the_argocd_cm_patch() {
    let galera = repo().join("examples/galera");
    let Outcome { run, .. } = same_as_binary(&["package", "argocd-health", path(&galera)]);
    let patch: serde_json::Value = serde_saphyr::from_str(&run.out).expect("YAML");
    let data = patch["data"].as_object().expect("data");
    let checks = repo().join("deploy/argocd/resource_customizations");
    let script = |p: &str| std::fs::read_to_string(checks.join(p)).unwrap();
    assert_eq!(
        data["resource.customizations.health.kudo.dev_Instance"],
        script("kudo.dev/Instance/health.lua")
    );
    assert_eq!(
        data["resource.customizations.health.galera.kudo.dev_Galera"],
        script("_.kudo.dev/_/health.lua")
    );
    // Without a typed API: only the Instance's, and stderr says why.
    let plain = repo().join("examples/first-operator");
    let Outcome { run, .. } = same_as_binary(&["package", "argocd-health", path(&plain)]);
    assert!(run.err.contains("declares no typed API"), "{}", run.err);
    let patch: serde_json::Value = serde_saphyr::from_str(&run.out).expect("YAML");
    assert_eq!(patch["data"].as_object().unwrap().len(), 1);
}

/// [`same_as_binary`] for commands that need the tokio runtime (they read packages off it).
fn same_on_tokio(rt: &tokio::runtime::Runtime, args: &[&str]) -> Run {
    let (run, _) = rt.block_on(inprocess(args));
    assert_eq!(run, binary(args), "in-process vs binary: {args:?}");
    run
}

#[test]
fn install_and_upgrade_dry_run_print_manifests_without_a_cluster() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let galera = repo().join("examples/galera");
    // No kubeconfig anywhere: nothing is requested.
    let args = ["--kubeconfig", "/nonexistent/kubeconfig", "-n", "db-ns"];
    let install = [
        &["install", path(&galera), "--instance", "db", "--dry-run"][..],
        &args,
    ]
    .concat();
    let run = same_on_tokio(&rt, &install);
    assert_eq!(run.code, ExitCode::SUCCESS, "{run:?}");
    let docs: Vec<serde_json::Value> = run
        .out
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str(d).unwrap())
        .collect();
    let last = docs.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["metadata"]["namespace"].as_str()),
        (Some("Instance"), Some("db-ns"))
    );
    let json = [&install[..], &["-o", "json"]].concat();
    let list: serde_json::Value = serde_json::from_str(&same_on_tokio(&rt, &json).out).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), docs.len());
    // A sensitive value is refused, naming the parameter.
    let secret = [&install[..], &["-p", "MYSQL_ROOT_PASSWORD=s3cret"]].concat();
    let refused = same_on_tokio(&rt, &secret);
    assert_eq!(refused.code, ExitCode::from(1));
    assert!(
        refused.err.contains("MYSQL_ROOT_PASSWORD") && !refused.err.contains("s3cret"),
        "{}",
        refused.err
    );
    // A bad value is refused as install refuses it.
    let bad = [&install[..], &["-p", "NODE_COUNT=99"]].concat();
    assert_eq!(same_on_tokio(&rt, &bad).code, ExitCode::from(1));
    // upgrade: the new version's manifests, the Instance named by --instance.
    let upgrade = [
        &[
            "upgrade",
            path(&galera),
            "--instance",
            "db",
            "--dry-run",
            "-o",
            "manifests",
        ][..],
        &args,
    ]
    .concat();
    assert_eq!(
        same_on_tokio(&rt, &upgrade).out,
        run.out,
        "upgrade's manifests are install's"
    );
}

#[test]
fn template_render_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.tmpl");
    std::fs::write(
        &ok,
        "{{ range $i := .Params.N | int | until }}{{ $i }} {{ end }}{{ .Name }}\n",
    )
    .unwrap();
    let Outcome { run, result } = same_as_binary(&[
        "template",
        "render",
        path(&ok),
        "--set",
        "Params.N=3",
        "--set",
        "Name=x",
    ]);
    assert!(result.is_ok());
    assert_eq!(run.out, "0 1 2 x\n");

    // A template error: the command reports it on stderr itself and asks for exit code 1.
    let broken = dir.path().join("broken.tmpl");
    std::fs::write(&broken, "{{ .Missing.Key }}").unwrap();
    let Outcome { run, result } = same_as_binary(&["template", "render", path(&broken)]);
    assert!(matches!(result, Err(CliError::Exit(_))), "{result:?}");
    assert_eq!(run.code, ExitCode::from(1));
    assert!(run.out.is_empty());

    // Bad input: exit code 2.
    let Outcome { run, .. } = same_as_binary(&["template", "render", path(&ok), "--set", "novalue"]);
    assert_eq!(run.code, ExitCode::from(2));
}

#[test]
fn version_formats() {
    let Outcome { run, .. } = same_as_binary(&["version"]);
    assert!(
        run.out.starts_with("KUDO Version: version.Info{GitVersion:"),
        "{}",
        run.out
    );
    same_as_binary(&["version", "-o", "json"]);
    same_as_binary(&["version", "-o", "yaml"]);
}

#[test]
fn init_dry_run_manifests() {
    let Outcome { run, .. } = same_as_binary(&["init", "--dry-run", "-o", "yaml"]);
    assert!(run.out.starts_with("---\n"), "{}", run.out);
    same_as_binary(&[
        "init",
        "--dry-run",
        "-o",
        "json",
        "-n",
        "other",
        "--unsafe-self-signed-webhook-ca",
    ]);
}

#[test]
fn repo_and_completion() {
    let home = tempfile::tempdir().unwrap();
    let h = path(home.path());
    // A fresh home lists the default repository.
    let Outcome { run, .. } = same_as_binary(&["repo", "list", "--home", h]);
    assert!(run.out.starts_with("NAME"), "{}", run.out);
    let index_dir = tempfile::tempdir().unwrap();
    let (run, _) = futures::executor::block_on(inprocess(&[
        "package",
        "create",
        path(&repo().join("examples/first-operator")),
        "-d",
        path(index_dir.path()),
    ]));
    assert_eq!(run.code, ExitCode::SUCCESS, "{run:?}");
    // `repo index` writes a file and says so; run it twice (both ways) on the same directory.
    same_as_binary(&[
        "repo",
        "index",
        path(index_dir.path()),
        "--url",
        "http://localhost/",
        "--overwrite",
    ]);
    same_as_binary(&["completion", "bash"]);
}

/// Runs `args` in-process and through the binary, asserts both agree, and returns the run. The
/// binary blocks, so it runs off the runtime (a server in this process keeps serving).
async fn both(args: Vec<String>) -> Run {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (run, _) = inprocess(&refs).await;
    let bin = tokio::task::spawn_blocking({
        let args = args.clone();
        move || binary(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert_eq!(run, bin, "in-process vs binary: {args:?}");
    run
}

/// A cluster command against the embedded API server in this process: the CRDs and an operator
/// installed in-process, then `get` and `plan status` compared with the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_commands_against_the_embedded_api_server() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kc = path(&kubeconfig);
    let pkg = repo().join("examples/first-operator");

    let (run, _) = inprocess(&[
        "init",
        "--crd-only",
        "--kubeconfig",
        kc,
        "--home",
        path(dir.path()),
    ])
    .await;
    assert_eq!(run.code, ExitCode::SUCCESS, "{run:?}");
    assert!(run.out.contains("✅ installed"), "{}", run.out);
    let (run, _) = inprocess(&["install", path(&pkg), "--kubeconfig", kc]).await;
    assert_eq!(run.code, ExitCode::SUCCESS, "{run:?}");
    assert!(run.out.contains("first-operator-instance created"), "{}", run.out);

    let args = |a: &[&str]| {
        a.iter()
            .chain(&["--kubeconfig", kc])
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
    };
    let run = both(args(&["get", "all"])).await;
    assert!(run.out.contains("first-operator-instance"), "{}", run.out);
    both(args(&["get", "instances", "-o", "yaml"])).await;
    both(args(&[
        "plan",
        "history",
        "--instance",
        "first-operator-instance",
    ]))
    .await;
    let run = both(args(&["plan", "status", "--instance", "nope"])).await;
    assert_eq!(run.code, ExitCode::from(1));
    // No manager runs here, so nothing was recorded: a note, and a refused rollback.
    let run = both(args(&["history", "--instance", "first-operator-instance"])).await;
    assert!(run.err.starts_with("No revisions recorded"), "{run:?}");
    let run = both(args(&["rollback", "--instance", "first-operator-instance"])).await;
    assert_eq!(run.code, ExitCode::from(1));
    assert!(run.err.contains("has no recorded revisions"), "{run:?}");
    // No manager runs here, so no plan failed: `plan retry` refuses and writes nothing.
    let run = both(args(&["plan", "retry", "--instance", "first-operator-instance"])).await;
    assert_eq!(run.code, ExitCode::from(1));
    assert!(run.err.contains("nothing to retry"), "{run:?}");
    server.shutdown().await;
}

/// The registry commands against a real registry (TLS, no auth: nothing is read from the
/// environment's Docker config), compared with the real binary: a reproducible push prints the
/// same digest both ways, a signature already there, a pull, and the errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_commands_against_a_real_registry() {
    use kudo_testkit::registry::{Auth, Setup, TestRegistry};
    let Some(reg) = TestRegistry::start(Setup {
        tls: true,
        auth: Auth::None,
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = reg.ca_file().display().to_string();
    let target = format!("oci://{}/inproc/first-operator", reg.addr);
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let pkg = repo().join("examples/first-operator");
    let run = both(args(&["package", "push", path(&pkg), &target, "--ca-file", &ca])).await;
    assert!(
        run.out
            .starts_with(&format!("Pushed {target}:0.2.0\nDigest: sha256:")),
        "{run:?}"
    );
    let pinned = run.out.lines().last().unwrap().to_string();
    let keys = dir.path().join("keys");
    let (run, _) = inprocess(&["package", "keygen", "-d", path(&keys)]).await;
    assert_eq!(run.code, ExitCode::SUCCESS, "{run:?}");
    let run = both(args(&["package", "keygen", "-d", path(&keys)])).await;
    assert!(run.err.contains("kudo.key: file already exists"), "{run:?}");
    let key = keys.join("kudo.key");
    let sign = args(&["package", "sign", &pinned, "--key", path(&key), "--ca-file", &ca]);
    let (run, _) = inprocess(&sign.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(run.out.starts_with("Signed "), "{run:?}");
    let run = both(sign).await;
    assert!(run.out.contains("already has this signature"), "{run:?}");
    let public = keys.join("kudo.pub");
    let out_dir = dir.path().join("pulled");
    let pull = [
        &pinned,
        "-d",
        path(&out_dir),
        "-w",
        "--verify",
        "--key",
        path(&public),
        "--ca-file",
        &ca,
    ];
    let run = both(args(&[&["package", "pull"], &pull[..], &["-o", "yaml"]].concat())).await;
    assert!(run.out.contains("fingerprint: sha256:"), "{run:?}");
    let run = both(args(&["package", "pull", &pinned, "-d", path(&out_dir)])).await;
    assert!(run.err.contains("UnknownIssuer"), "{run:?}");
    let run = both(args(&[
        "registry",
        "logout",
        &reg.addr,
        "--home",
        path(dir.path()),
    ]))
    .await;
    assert_eq!(run.out, format!("Not logged in to {}\n", reg.addr), "{run:?}");
}
