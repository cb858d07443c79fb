//! The package every fault round runs: two phases (two ConfigMap steps in parallel, then a
//! Deployment and a Job of the round, whose pod sleeps `JOB_SECONDS` on the fake kubelet so a
//! plan lasts long enough to be hit; a Job's pod template cannot change, so each version and
//! round has a Job of its own), and a cleanup plan that applies one ConfigMap before the
//! Instance goes. Version 0.2.0 differs in one label: an upgrade and a rollback each change
//! every object of the plan.

use std::path::{Path, PathBuf};

const OPERATOR: &str = r#"apiVersion: kudo.dev/v1beta1
name: faulty
operatorVersion: "@VERSION@"
tasks:
  - name: config
    kind: Apply
    spec:
      resources: [config.yaml]
  - name: settings
    kind: Apply
    spec:
      resources: [settings.yaml]
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml]
  - name: job
    kind: Apply
    spec:
      resources: [job.yaml]
  - name: goodbye
    kind: Apply
    spec:
      resources: [goodbye.yaml]
plans:
  deploy:
    strategy: serial
    phases:
      - name: config
        strategy: parallel
        steps:
          - name: config
            tasks: [config]
          - name: settings
            tasks: [settings]
      - name: app
        strategy: serial
        steps:
          - name: app
            tasks: [app]
          - name: job
            tasks: [job]
  cleanup:
    strategy: serial
    phases:
      - name: goodbye
        strategy: serial
        steps:
          - name: goodbye
            tasks: [goodbye]
"#;

const PARAMS: &str = "apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: ROUND\n    default: \"0\"\n  - name: REPLICAS\n    default: \"1\"\n  - name: JOB_SECONDS\n    default: \"0.6\"\n";

fn config(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Name }}}}-{name}\n  labels:\n    faulty/version: \"VERSION\"\ndata:\n  round: \"{{{{ .Params.ROUND }}}}\"\n"
    )
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Name }}-app\n  labels:\n    faulty/version: \"VERSION\"\nspec:\n  replicas: {{ .Params.REPLICAS }}\n  selector:\n    matchLabels:\n      app: {{ .Name }}-app\n  template:\n    metadata:\n      labels:\n        app: {{ .Name }}-app\n      annotations:\n        faulty/round: \"{{ .Params.ROUND }}\"\n    spec:\n      containers:\n        - name: app\n          image: busybox:1.36\n          command: [\"sleep\", \"infinity\"]\n";

const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Name }}-job-{{ .OperatorVersion | replace \".\" \"-\" }}-{{ .Params.ROUND }}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: job\n          image: busybox:1.36\n          command: [\"sleep\", \"{{ .Params.JOB_SECONDS }}\"]\n";

/// Writes versions 0.1.0 and 0.2.0 of the package under `dir`; their directories.
pub fn write(dir: &Path) -> (PathBuf, PathBuf) {
    (version(dir, "0.1.0"), version(dir, "0.2.0"))
}

fn version(dir: &Path, v: &str) -> PathBuf {
    let root = dir.join(format!("faulty-{v}"));
    std::fs::create_dir_all(root.join("templates")).unwrap();
    let put = |file: &str, text: &str| std::fs::write(root.join(file), text.replace("@VERSION@", v)).unwrap();
    put("operator.yaml", OPERATOR);
    put("params.yaml", PARAMS);
    put("templates/config.yaml", &config("config"));
    put("templates/settings.yaml", &config("settings"));
    put("templates/goodbye.yaml", &config("goodbye"));
    put("templates/deployment.yaml", DEPLOYMENT);
    put("templates/job.yaml", JOB);
    root
}
