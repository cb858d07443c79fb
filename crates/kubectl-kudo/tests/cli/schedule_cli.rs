//! Scheduled plans (a kudo-rs extension) through the real binary on the embedded
//! cluster: `package verify` and `install` refuse an unusable schedule naming the plan and the
//! expression (nothing applied), and `plan status` shows a scheduled plan's next run, in text and
//! in `-o yaml`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Dev, start_dev};

fn package(root: &Path, schedule: &str, default: &str) -> PathBuf {
    let dir = root.join(format!("sched-{}", root.read_dir().unwrap().count()));
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("operator.yaml"),
        format!(
            "apiVersion: kudo.dev/v1beta1\nname: sched\noperatorVersion: \"0.1.0\"\nkubernetesVersion: 1.15.0\ntasks:\n  - name: app\n    kind: Apply\n    spec:\n      resources:\n        - cm.yaml\nplans:\n  deploy:\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks: [app]\n  backup:\n    schedule: {schedule:?}\n    strategy: serial\n    phases:\n      - name: main\n        strategy: serial\n        steps:\n          - name: app\n            tasks: [app]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("params.yaml"),
        format!(
            "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: BACKUP_SCHEDULE\n    description: When to back up.\n    default: {default:?}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}-cm\ndata:\n  plan: {{ .PlanName }}\n",
    )
    .unwrap();
    dir
}

/// `kubectl-kudo ARGS`, against `dev` when given.
fn kudo(home: &Path, dev: Option<&Dev>, args: &[&str]) -> (i32, String) {
    common::kudo(home, dev.map(|d| d.kubeconfig.as_path()), args)
}

#[test]
fn verify_refuses_unusable_schedules_naming_plan_and_expression() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let ok = package(home, "{{ .Params.BACKUP_SCHEDULE }}", "");
    let (code, out) = kudo(home, None, &["package", "verify", ok.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("package is valid"), "{out}");

    let bad = package(home, "61 * * * *", "");
    let (code, out) = kudo(home, None, &["package", "verify", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("plan \"backup\": invalid schedule \"61 * * * *\""),
        "{out}"
    );

    // A templated schedule is checked as rendered with the defaults.
    let bad = package(home, "{{ .Params.BACKUP_SCHEDULE }}", "every night");
    let (code, out) = kudo(home, None, &["package", "verify", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("plan \"backup\": invalid schedule \"every night\": a cron expression has 5 fields")
            && out.contains("(rendered from \"{{ .Params.BACKUP_SCHEDULE }}\")"),
        "{out}"
    );
}

#[test]
fn install_checks_the_rendered_schedule_and_plan_status_shows_the_next_run() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let dev = start_dev(home, &[]);
    let pkg = package(home, "{{ .Params.BACKUP_SCHEDULE }}", "");
    let pkg = pkg.to_str().unwrap();

    // A bad value for the templated schedule: refused before anything is applied.
    let (code, out) = kudo(
        home,
        Some(&dev),
        &[
            "install",
            pkg,
            "--instance",
            "bad",
            "-p",
            "BACKUP_SCHEDULE=@every soon",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("plan \"backup\": invalid schedule \"@every soon\""),
        "{out}"
    );
    let (_, got) = kudo(home, Some(&dev), &["get", "instances"]);
    assert!(!got.contains("bad"), "nothing applied: {got}");
    let (_, got) = kudo(home, Some(&dev), &["get", "operatorversions"]);
    assert!(!got.contains("sched-0.1.0"), "nothing applied: {got}");

    let (code, out) = kudo(
        home,
        Some(&dev),
        &[
            "install",
            pkg,
            "--instance",
            "s",
            "-p",
            "BACKUP_SCHEDULE=@every 1h",
            "--wait",
            "--wait-time",
            "120",
        ],
    );
    assert_eq!(code, 0, "{out}");

    // The manager computes the next run (one hour after the Instance's creation).
    let start = Instant::now();
    let text = loop {
        let (code, text) = kudo(home, Some(&dev), &["plan", "status", "--instance", "s"]);
        assert_eq!(code, 0, "{text}");
        if text.contains("(next scheduled run ") {
            break text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no next run shown:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let line = text
        .lines()
        .find(|l| l.contains("Plan backup"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("Plan backup (serial strategy) [NOT ACTIVE] (next scheduled run 20"),
        "{text}"
    );
    let deploy = text.lines().find(|l| l.contains("Plan deploy")).unwrap();
    assert!(!deploy.contains("next scheduled run"), "{text}");

    let (code, yaml) = kudo(
        home,
        Some(&dev),
        &["plan", "status", "--instance", "s", "-o", "yaml"],
    );
    assert_eq!(code, 0, "{yaml}");
    assert!(yaml.contains("schedules:"), "{yaml}");
    assert!(yaml.contains("nextScheduleTime:"), "{yaml}");

    // update to a bad schedule is refused, the instance keeps its schedule.
    let (code, out) = kudo(
        home,
        Some(&dev),
        &["update", "--instance", "s", "-p", "BACKUP_SCHEDULE=* * *"],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("plan \"backup\": invalid schedule \"* * *\""),
        "{out}"
    );
}
