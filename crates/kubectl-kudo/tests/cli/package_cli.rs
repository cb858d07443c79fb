//! `kubectl kudo package …` through the real binary: seed outputs line for line, exit codes, the
//! bad-package corpus, reproducible tarballs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str], cwd: &Path) -> Output {
    bin().args(args).current_dir(cwd).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The block of a seed file that follows the line containing `command`, up to the first empty line.
fn seed_block(file: &str, command: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new("/work/shared/seeds").join(file)).unwrap();
    let mut lines = text.lines().skip_while(|l| !l.contains(command));
    lines.next().expect("command not in seed");
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim_end().to_string())
        .collect()
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(|l| l.trim_end().to_string()).collect()
}

fn part2() -> PathBuf {
    repo().join("crates/kudo-package/tests/testdata/galera-part2")
}

#[test]
fn list_plans_matches_the_seed_line_for_line() {
    let o = run(&["package", "list", "plans", "."], &part2());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lines(&stdout(&o)),
        seed_block("galera-part2.txt", "kubectl kudo package list plans .")
    );
}

#[test]
fn list_tasks_matches_the_seed_line_for_line() {
    let o = run(&["package", "list", "tasks", "."], &part2());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lines(&stdout(&o)),
        seed_block("galera-part2.txt", "kubectl kudo package list tasks .")
    );
}

#[test]
fn list_parameters_matches_the_seed_line_for_line_plus_the_immutable_column() {
    // The blog was written before KUDO 0.16 added the Immutable column; the other columns must be
    // identical, padding included.
    let o = run(&["package", "list", "parameters", "."], &part2());
    assert!(o.status.success(), "{}", stderr(&o));
    let ours: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            assert_eq!(cells.len(), 4, "{l:?}");
            assert!(cells[3].trim() == "Immutable" || cells[3].trim() == "false");
            cells[..3].join("\t").trim_end().to_string()
        })
        .collect();
    assert_eq!(
        ours,
        seed_block("galera-part2.txt", "kubectl kudo package list parameters .")
    );
}

#[test]
fn final_galera_keeps_every_seed_task_and_parameter_row() {
    let g = repo().join("examples/galera");
    let cells = |l: &str| l.split('\t').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let o = run(&["package", "list", "tasks", "."], &g);
    let ours: Vec<Vec<String>> = stdout(&o).lines().map(cells).collect();
    for l in seed_block("galera-part2.txt", "kubectl kudo package list tasks .") {
        assert!(ours.contains(&cells(&l)), "missing task row {l:?}");
    }
    let o = run(&["package", "list", "parameters", "."], &g);
    let ours: Vec<Vec<String>> = stdout(&o).lines().map(|l| cells(l)[..3].to_vec()).collect();
    for l in seed_block("galera-part2.txt", "kubectl kudo package list parameters .") {
        assert!(ours.contains(&cells(&l)), "missing parameter row {l:?}");
    }
    // Part 3: the node_update plan reusing the config and statefulset tasks (followed by the
    // example's own `recover` and `restore` plans, levels 5 and 3, so not the last one).
    let o = run(&["package", "list", "plans", "."], &g);
    let out = stdout(&o);
    assert!(
        out.contains(
            "├── node_update (serial)\n│   └── [phase]  deploy (serial)\n│       ├── [step]  config\n│       │   └── config\n│       └── [step]  stateful\n│           └── statefulset\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "│       └── [step]  cleanup\n│           ├── bootstrap_cleanup\n│           └── config\n"
        ),
        "{out}"
    );
}

#[test]
fn list_plans_with_tasks_shows_kinds_and_templates() {
    let o = run(
        &["package", "list", "plans", ".", "-t"],
        &repo().join("examples/galera"),
    );
    let out = stdout(&o);
    assert!(
        out.contains(
            "│           ├── [delete]  bootstrap_cleanup\n│           │   ├── bootstrap_deploy.yaml\n"
        ),
        "{out}"
    );
    assert!(out.contains("[apply]  cluster_services\n│       │       ├── hs-service.yaml\n│       │       └── cs-service.yaml\n"), "{out}");
}

#[test]
fn list_parameters_required_lists_what_must_be_given() {
    let o = run(
        &["package", "list", "parameters", "--required", "."],
        &repo().join("examples/wordpress"),
    );
    assert_eq!(stdout(&o), "Name               \nMYSQL_ROOT_PASSWORD\n");
    let o = run(
        &["package", "list", "parameters", "--required", "."],
        &repo().join("examples/galera"),
    );
    assert_eq!(
        stdout(&o),
        "no required parameters without default values found\n"
    );
    let o = run(
        &["package", "list", "parameters", "--required", "--names", "."],
        &repo().join("examples/galera"),
    );
    assert!(!o.status.success());
}

#[test]
fn examples_verify() {
    for name in [
        "first-operator",
        "galera",
        "mysql",
        "wordpress",
        "wordpress-on-mysql",
    ] {
        let o = run(&["package", "verify", "."], &repo().join("examples").join(name));
        assert!(o.status.success(), "{name}: {}{}", stdout(&o), stderr(&o));
        assert_eq!(stdout(&o), "package is valid\n");
    }
}

#[test]
fn verify_reports_kudo_style_tables_and_fails() {
    let d = repo().join("crates/kudo-package/tests/testdata/bad/duplicate-param");
    let o = run(&["package", "verify", d.to_str().unwrap()], &repo());
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert_eq!(out.lines().next().map(str::trim_end), Some("Errors"), "{out}");
    assert!(out.contains("parameter \"REPLICAS\" has a duplicate"), "{out}");
    assert!(!out.contains("package is valid"));
    assert!(
        stderr(&o).contains("package verification found"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn verify_param_checks_add_warnings_only() {
    let o = run(
        &["package", "verify", ".", "--param-checks", "all"],
        &repo().join("examples/galera"),
    );
    assert!(o.status.success());
    let out = stdout(&o);
    assert_eq!(out.lines().next().map(str::trim_end), Some("Warnings"), "{out}");
    assert!(out.contains("parameter \"SST_USER\" has no displayName"), "{out}");
    assert!(out.ends_with("package is valid\n"), "{out}");
}

#[test]
fn every_bad_package_fails_through_the_cli_without_panicking() {
    let dir = repo().join("crates/kudo-package/tests/testdata/bad");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let expect = std::fs::read_to_string(p.join("EXPECT")).unwrap();
        let o = run(&["package", "verify", p.to_str().unwrap()], &repo());
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert_eq!(o.status.code(), Some(1), "{}: {all}", p.display());
        assert!(
            all.contains(expect.trim_end()),
            "{}: expected {expect:?} in {all}",
            p.display()
        );
        assert!(!all.contains("panicked"), "{all}");
        n += 1;
    }
    assert!(n >= 40);
}

#[test]
fn new_scaffolds_the_layout_of_the_seed() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&["package", "new", "galera"], d.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let mut files: Vec<String> = walk(d.path());
    files.sort();
    assert_eq!(files, ["operator/operator.yaml", "operator/params.yaml"]);
    let op = std::fs::read_to_string(d.path().join("operator/operator.yaml")).unwrap();
    assert!(
        op.contains("name: galera\n") && op.contains("operatorVersion: 0.1.0\n"),
        "{op}"
    );
    // A second run refuses to overwrite, unless asked.
    let o = run(&["package", "new", "galera"], d.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--overwrite"), "{}", stderr(&o));
    let o = run(&["package", "new", "galera", "--overwrite"], d.path());
    assert!(o.status.success());
    // The scaffold parses and lists.
    let o = run(&["package", "list", "plans", "operator"], d.path());
    assert_eq!(
        stdout(&o),
        "plans\n└── deploy (serial)\n    └── [phase]  main (serial)\n        └── [step]  everything\n            └── app\n"
    );
}

fn walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}

#[test]
fn create_is_byte_reproducible() {
    let d = tempfile::tempdir().unwrap();
    let g = repo().join("examples/galera");
    let dest = d.path().to_str().unwrap();
    let o = run(&["package", "create", g.to_str().unwrap(), "-d", dest], &repo());
    assert!(o.status.success(), "{}", stderr(&o));
    let tgz = d.path().join("galera-10.5.3_0.1.0.tgz");
    assert_eq!(stdout(&o), format!("Package created: {}\n", tgz.display()));
    let first = std::fs::read(&tgz).unwrap();
    let o = run(&["package", "create", g.to_str().unwrap(), "-d", dest], &repo());
    assert_eq!(o.status.code(), Some(1), "refuses to overwrite");
    let o = run(
        &[
            "package",
            "create",
            g.to_str().unwrap(),
            "-d",
            dest,
            "--overwrite",
        ],
        &repo(),
    );
    assert!(o.status.success());
    assert_eq!(std::fs::read(&tgz).unwrap(), first);
    // The tarball is itself a package with the same listing.
    let a = run(&["package", "list", "tasks", tgz.to_str().unwrap()], &repo());
    let b = run(&["package", "list", "tasks", "."], &g);
    assert_eq!(stdout(&a), stdout(&b));
}

#[test]
fn create_refuses_invalid_packages() {
    let d = tempfile::tempdir().unwrap();
    let bad = repo().join("crates/kudo-package/tests/testdata/bad/no-deploy-plan");
    let o = run(
        &[
            "package",
            "create",
            bad.to_str().unwrap(),
            "-d",
            d.path().to_str().unwrap(),
        ],
        &repo(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("an operator is required to have 'deploy' plan"));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn render_yaml_has_a_comment_per_document_in_plan_order() {
    let o = run(
        &["package", "render", ".", "-n", "db"],
        &repo().join("examples/galera"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let comments: Vec<&str> = out.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(comments[0], "# deploy/deploy/secrets/secrets: secret.yaml");
    assert_eq!(
        comments[1],
        "# deploy/deploy/bootstrap_config/bootstrap_config: bootstrap_config.yaml"
    );
    assert!(comments.contains(&"# deploy/deploy/cleanup/bootstrap_cleanup: bootstrap_deploy.yaml (delete)"));
    assert_eq!(
        comments.last().unwrap(),
        &"# deploy/deploy/cleanup/config: galera_config.yaml"
    );
    assert_eq!(out.matches("\n---\n").count() + 1, comments.len());
    assert!(out.contains("namespace: db\n"));
    assert!(out.contains("kudo.dev/step: bootstrap_config\n"));
}

#[test]
fn render_json_with_parameter_file_and_overrides() {
    let d = tempfile::tempdir().unwrap();
    let vals = d.path().join("values.yaml");
    std::fs::write(&vals, "NODE_COUNT: 5\nANTI_AFFINITY: yes\n").unwrap();
    let o = run(
        &[
            "package",
            "render",
            ".",
            "--plan",
            "node_update",
            "-P",
            vals.to_str().unwrap(),
            "-p",
            "NODE_COUNT=2",
            "-o",
            "json",
        ],
        &repo().join("examples/galera"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[1]["object"]["spec"]["replicas"], 2);
    assert_eq!(v[1]["action"], "apply");
    // `yes` in a parameter file is YAML 1.1 true, passed on as "true".
    assert!(v[1]["object"]["spec"]["template"]["spec"]["affinity"].is_object());
}

#[test]
fn render_rejects_invalid_parameters_with_kudo_wording() {
    let o = run(
        &["package", "render", ".", "-p", "REPLICAS=lots"],
        &repo().join("examples/first-operator"),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("parameter \"REPLICAS\" has an invalid value \"lots\": type is \"integer\""),
        "{}",
        stderr(&o)
    );
    let o = run(
        &["package", "render", ".", "--plan", "nope"],
        &repo().join("examples/first-operator"),
    );
    assert!(
        stderr(&o).contains("plan \"nope\" does not exist"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn verify_output_formats_are_machine_readable_and_keep_the_exit_code() {
    let bad = repo().join("crates/kudo-package/tests/testdata/bad/duplicate-param");
    let o = run(
        &["package", "verify", bad.to_str().unwrap(), "-o", "json"],
        &repo(),
    );
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("stdout is JSON");
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0], "parameter \"REPLICAS\" has a duplicate");
    assert_eq!(v["warnings"], serde_json::json!([]));

    let o = run(
        &["package", "verify", ".", "-o", "yaml", "--param-checks", "all"],
        &repo().join("examples/mysql"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_saphyr::from_str(&stdout(&o)).expect("stdout is YAML");
    assert_eq!(v["valid"], true);
    assert_eq!(v["errors"], serde_json::json!([]));
    assert!(v["warnings"].is_array());
}
