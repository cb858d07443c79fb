//! Autopilot rules (plan field `when`) through the real binary: every kind of
//! bad rule is a `package verify` error naming plan, rule and field, and `install` refuses the
//! package on the embedded cluster (`kubectl-kudo dev` as a child) before creating anything.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Dev, kudo, start_dev};

const GOOD_RULE: &str = r#"      - resource: {apiVersion: v1, kind: ConfigMap, name: "{{ .Name }}-signal"}
        condition: 'object.data.load == "high"'
        for: 30s
        cooldown: 5m
        setParameters: {NODES: '{{ add (atoi .Params.NODES) 1 }}'}
"#;

/// A package whose `scale` plan has the rules `when` (YAML list items, 6 spaces in).
fn package(root: &Path, name: &str, when: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("operator.yaml"),
        format!(
            "apiVersion: kudo.dev/v1beta1\nname: {name}\noperatorVersion: \"0.1.0\"\nkubernetesVersion: 1.15.0\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources:\n        - cm.yaml\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks:\n              - app\n  scale:\n    strategy: serial\n    when:\n{when}    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks:\n              - app\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: NODES\n    description: Nodes.\n    default: \"1\"\n  - name: DISK\n    description: Disk.\n    default: \"1Gi\"\n    immutable: true\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  nodes: \"{{ .Params.NODES }}\"\n  disk: {{ .Params.DISK }}\n",
    )
    .unwrap();
    dir
}

/// (package name, rules, what the error must say).
fn bad_cases() -> Vec<(&'static str, String, &'static str)> {
    let with = |from: &str, to: &str| GOOD_RULE.replace(from, to);
    vec![
        (
            "cel",
            with(r#"'object.data.load == "high"'"#, r#"'object.data.load == '"#),
            "plan \"scale\" when[0].condition: condition is not valid CEL",
        ),
        (
            "unknownparam",
            with("{NODES:", "{NOPE:"),
            "plan \"scale\" when[0].setParameters: parameter \"NOPE\" is not declared in params.yaml",
        ),
        (
            "immutable",
            with("{NODES: '{{ add (atoi .Params.NODES) 1 }}'}", "{DISK: 2Gi}"),
            "plan \"scale\" when[0].setParameters: parameter \"DISK\" is immutable",
        ),
        (
            "badfor",
            with("for: 30s", "for: soon"),
            "plan \"scale\" when[0].for: \"soon\" is not a Go duration",
        ),
        (
            "badcooldown",
            with("cooldown: 5m", "cooldown: -5m"),
            "plan \"scale\" when[0].cooldown: \"-5m\" is negative",
        ),
        (
            "badkind",
            with("kind: ConfigMap", "kind: config-map"),
            "plan \"scale\" when[0].resource.kind \"config-map\" is not a kind",
        ),
        (
            "badapiversion",
            with("apiVersion: v1,", "apiVersion: apps/,"),
            "plan \"scale\" when[0].resource.apiVersion \"apps/\" is not an API version",
        ),
        (
            "toomany",
            GOOD_RULE.repeat(17),
            "plan \"scale\" has 17 autopilot rules (when); at most 16 are allowed",
        ),
    ]
}

#[test]
fn package_verify_names_each_bad_rule_and_accepts_a_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let good = package(tmp.path(), "good", GOOD_RULE);
    let (code, out) = kudo(tmp.path(), None, &["package", "verify", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("package is valid"), "{out}");
    for (name, when, want) in bad_cases() {
        let dir = package(tmp.path(), name, &when);
        let (code, out) = kudo(tmp.path(), None, &["package", "verify", dir.to_str().unwrap()]);
        assert_ne!(code, 0, "{name}: {out}");
        assert!(out.contains(want), "{name}: want {want:?} in:\n{out}");
    }
}

#[test]
fn install_refuses_bad_rules_and_applies_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = start_dev(tmp.path(), &[]);
    let k = Some(dev.kubeconfig.as_path());
    for (name, when, want) in bad_cases() {
        let dir = package(tmp.path(), name, &when);
        let (code, out) = kudo(tmp.path(), k, &["install", dir.to_str().unwrap()]);
        assert_ne!(code, 0, "{name}: {out}");
        assert!(out.contains("has invalid autopilot rules"), "{name}: {out}");
        assert!(out.contains(want), "{name}: want {want:?} in:\n{out}");
    }
    // A kind the cluster does not serve: `package verify` cannot know, install asks discovery.
    let dir = package(
        tmp.path(),
        "unservedkind",
        &GOOD_RULE.replace("kind: ConfigMap", "kind: ConfigMapp"),
    );
    let (code, out) = kudo(tmp.path(), k, &["install", dir.to_str().unwrap()]);
    assert_ne!(code, 0, "unservedkind: {out}");
    assert!(
        out.contains("plan \"scale\" when[0].resource: no matches for kind \"ConfigMapp\" in version \"v1\""),
        "unservedkind: {out}"
    );
    let bad_names = || bad_cases().into_iter().map(|(n, _, _)| n).chain(["unservedkind"]);
    let (code, out) = kudo(tmp.path(), k, &["get", "operatorversions"]);
    assert_eq!(code, 0, "{out}");
    for name in bad_names() {
        assert!(
            !out.contains(&format!("{name}-0.1.0")),
            "{name} was applied:\n{out}"
        );
    }
    let (code, out) = kudo(tmp.path(), k, &["get", "instances"]);
    assert_eq!(code, 0, "{out}");
    for name in bad_names() {
        assert!(
            !out.contains(&format!("{name}-instance")),
            "{name} was applied:\n{out}"
        );
    }
    // The good package installs.
    let good = package(tmp.path(), "good", GOOD_RULE);
    let (code, out) = kudo(tmp.path(), k, &["install", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let (_, out) = kudo(tmp.path(), k, &["get", "instances"]);
    assert!(out.contains("good-instance"), "{out}");
}

fn kubectl(dev: &Dev, home: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&dev.kubeconfig)
        .args(args)
        .env("HOME", home)
        .output()
        .expect("run kubectl");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<String>) -> String {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Galera at level 5: the StatefulSet loses its readiness (a broken image set by hand, drift
/// repair off) and stays so for RECOVER_AFTER=1s; the autopilot rule runs the `recover` plan,
/// which applies the declared StatefulSet again, and the cluster is whole.
#[test]
fn galera_recover_plan_runs_when_the_statefulset_stays_unready() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = start_dev(tmp.path(), &[]);
    let k = Some(dev.kubeconfig.as_path());
    let galera = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/galera");
    let (code, out) = kudo(
        tmp.path(),
        k,
        &[
            "install",
            galera.to_str().unwrap(),
            "--instance",
            "g",
            "-p",
            "RECOVER_AFTER=1s",
            "-p",
            "NODE_COUNT=2",
            "--wait",
            "--wait-time",
            "180",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let (ok, out) = kubectl(
        &dev,
        tmp.path(),
        &["annotate", "instance", "g", "kudo.dev/drift-policy=ignore"],
    );
    assert!(ok, "{out}");
    let (ok, out) = kubectl(
        &dev,
        tmp.path(),
        &["set", "image", "statefulset/g-galera", "mariadb=busybox:fail"],
    );
    assert!(ok, "{out}");
    let status = wait_until("the recover plan to complete", Duration::from_secs(180), || {
        let (_, s) = kubectl(
            &dev,
            tmp.path(),
            &[
                "get",
                "instance",
                "g",
                "-o",
                "jsonpath={.status.planStatus.recover.status}",
            ],
        );
        (s.trim() == "COMPLETE").then_some(s)
    });
    assert_eq!(status.trim(), "COMPLETE");
    let (ok, image) = kubectl(
        &dev,
        tmp.path(),
        &[
            "get",
            "statefulset",
            "g-galera",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
    );
    assert!(ok, "{image}");
    assert_eq!(
        image.trim(),
        "mariadb:10.5.3",
        "recover applied the declared StatefulSet again"
    );
    let (ok, ready) = kubectl(
        &dev,
        tmp.path(),
        &[
            "get",
            "statefulset",
            "g-galera",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
    );
    assert!(ok && ready.trim() == "2", "{ready}");
    let (ok, events) = kubectl(
        &dev,
        tmp.path(),
        &[
            "get",
            "events",
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        ],
    );
    assert!(ok, "{events}");
    let events: Vec<&str> = events
        .lines()
        .filter(|l| l.starts_with("AutopilotTriggered: "))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let events = events[0];
    assert!(events.contains("rule recover/0 fired"), "{events}");
    assert!(events.contains("StatefulSet g-galera"), "{events}");
    assert!(events.contains("object.spec.replicas=2"), "{events}");
    assert!(events.contains("object.status.readyReplicas="), "{events}");
    // The plan ran all its steps: stop (the StatefulSet deleted) and start (created again).
    let (ok, steps) = kubectl(
        &dev,
        tmp.path(),
        &[
            "get",
            "instance",
            "g",
            "-o",
            "jsonpath={.status.planStatus.recover.phases[0].steps[*].status}",
        ],
    );
    assert!(ok, "{steps}");
    assert_eq!(steps.trim(), "COMPLETE COMPLETE COMPLETE COMPLETE");
}
