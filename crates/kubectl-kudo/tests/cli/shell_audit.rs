//! The audit of what the packages run: every container, init container, Job and Pipe pod of the
//! KUDO community catalog (`../shared/community-operators`) and of `examples/`, in every plan,
//! rendered by `package render` as the manager would apply it (the default parameters, the
//! required ones given, and the parameter sets below that switch to other commands), is a
//! command line the simulated shell knows: each program it names is a builtin, a program
//! kudo-sim implements, a server it stands in for, or one it deliberately refuses with a reason.
//! The scripts of ConfigMap and Secret volumes a container runs are audited as well, with what
//! the package renders into them. A program the shell has never heard of fails this test, naming
//! package, object, container and program; so does a script a shell would refuse.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::{Container, Pod};
use kudo_sim::shell::{Handling, audit};

use crate::common;

/// Parameter sets rendered besides the defaults, for the commands they switch to.
const VARIANTS: &[(&str, &[&str])] = &[("kafka", &["USE_AUTO_TLS_CERTIFICATE=true"])];

fn packages() -> Vec<PathBuf> {
    let catalog = common::shared_dir().join("community-operators");
    let mut dirs: Vec<PathBuf> = ["cassandra", "elastic", "kafka", "redis", "zookeeper"]
        .iter()
        .map(|n| catalog.join(n).join("operator"))
        .collect();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut ex: Vec<PathBuf> = std::fs::read_dir(examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    ex.sort();
    dirs.extend(ex);
    dirs
}

/// The rendered objects of every plan of `dir` with `params`.
fn rendered(dir: &Path, params: &[String]) -> Vec<serde_json::Value> {
    let pkg = kudo_package::read_path(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut args: Vec<String> = params
        .iter()
        .flat_map(|p| ["-p".to_string(), p.clone()])
        .collect();
    for p in pkg.params.parameters.iter().filter(|p| p.needs_value()) {
        args.extend(["-p".to_string(), format!("{}=x", p.name)]);
    }
    let mut out = Vec::new();
    for plan in pkg.operator.plans.keys() {
        let o = Command::new(common::BIN)
            .args(["package", "render", "-o", "json", "--plan", plan])
            .args(&args)
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{} {plan}: {}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        let list: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
        out.extend(list.into_iter().map(|e| e["object"].clone()));
    }
    out
}

/// The pods an object runs: a Pod, or the pod template of a workload (CronJobs' nested one).
fn pods_of(obj: &serde_json::Value) -> Option<(Pod, bool)> {
    let kind = obj["kind"].as_str()?;
    let template = match kind {
        "Pod" => obj.clone(),
        "CronJob" => obj["spec"]["jobTemplate"]["spec"]["template"].clone(),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => obj["spec"]["template"].clone(),
        _ => return None,
    };
    let pod: Pod = serde_json::from_value(template).ok()?;
    let always = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
        == "Always";
    Some((pod, always && !matches!(kind, "Job" | "CronJob")))
}

/// The data of the ConfigMaps and Secrets among `objects`, as volumes present them.
fn volume_data(objects: &[serde_json::Value]) -> kudo_sim::VolumeData {
    use base64::Engine as _;
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or(""))
            .unwrap_or_default()
    };
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").as_bytes().to_vec();
    let mut out = kudo_sim::VolumeData::new();
    for o in objects {
        let (kind, decoded, plain): (&'static str, &str, &str) = match o["kind"].as_str() {
            Some("ConfigMap") => ("ConfigMap", "binaryData", "data"),
            Some("Secret") => ("Secret", "data", "stringData"),
            _ => continue,
        };
        let mut files = Vec::new();
        for (k, v) in o[plain].as_object().into_iter().flatten() {
            files.push((k.clone(), text(v)));
        }
        for (k, v) in o[decoded].as_object().into_iter().flatten() {
            files.push((k.clone(), b64(v)));
        }
        out.insert(
            (kind, o["metadata"]["name"].as_str().unwrap_or("").to_string()),
            files,
        );
    }
    out
}

/// The programs of a container the shell does not know; the others go to `seen`.
fn audit_container(
    pod: &Pod,
    c: &Container,
    long_running: bool,
    data: &kudo_sim::VolumeData,
    seen: &mut std::collections::BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let view = kudo_sim::container_view(pod, c, long_running, 0);
    let argv = kudo_sim::command_line(c);
    let uses = audit(&view, &argv, &kudo_sim::volume_trees(pod, data))?;
    let (unknown, known): (Vec<_>, Vec<_>) = uses.into_iter().partition(|u| u.handling == Handling::Unknown);
    for u in known {
        let name = u.program.rsplit('/').next().unwrap_or(&u.program).to_string();
        seen.insert(match u.handling {
            Handling::StandIn(server) => format!("{name} (stand-in for {server})"),
            Handling::Refused(_) => format!("{name} (refused)"),
            _ => name,
        });
    }
    Ok(unknown.into_iter().map(|u| u.program).collect())
}

#[test]
fn every_command_of_the_catalog_and_the_examples_is_known_to_the_simulated_shell() {
    let mut problems = Vec::new();
    let mut containers = 0;
    let mut seen = std::collections::BTreeSet::new();
    for dir in packages() {
        let name = dir.display().to_string();
        let mut sets: Vec<Vec<String>> = vec![Vec::new()];
        for (pkg, params) in VARIANTS {
            if name.contains(&format!("/{pkg}/")) {
                sets.push(params.iter().map(|p| p.to_string()).collect());
            }
        }
        for params in sets {
            let objects = rendered(&dir, &params);
            let data = volume_data(&objects);
            for obj in &objects {
                let Some((pod, long)) = pods_of(obj) else {
                    continue;
                };
                let what = format!("{name} {params:?} {} {}", obj["kind"], obj["metadata"]["name"]);
                let spec = pod.spec.clone().unwrap_or_default();
                for c in spec.init_containers.iter().flatten() {
                    containers += 1;
                    match audit_container(&pod, c, false, &data, &mut seen) {
                        Ok(unknown) if unknown.is_empty() => {}
                        Ok(unknown) => {
                            problems.push(format!("{what} init container {}: {unknown:?}", c.name))
                        }
                        Err(e) => problems.push(format!("{what} init container {}: {e}", c.name)),
                    }
                }
                for c in &spec.containers {
                    containers += 1;
                    match audit_container(&pod, c, long, &data, &mut seen) {
                        Ok(unknown) if unknown.is_empty() => {}
                        Ok(unknown) => problems.push(format!("{what} container {}: {unknown:?}", c.name)),
                        Err(e) => problems.push(format!("{what} container {}: {e}", c.name)),
                    }
                }
            }
        }
    }
    assert!(containers > 40, "the audit saw only {containers} containers");
    // What the packages' Jobs, init containers and Pipe pods run is implemented, not stood in for.
    for program in [
        "openssl",
        "touch",
        "redis-cli",
        "nslookup",
        "grep",
        "awk",
        "printf",
        "zkCli.sh",
        "sysctl",
        "chown",
        "mysql",
        "mysqldump",
        "xargs",
        "date",
        "mkdir",
        "nc",
        "sleep",
    ] {
        assert!(seen.contains(program), "{program} not among {seen:?}");
    }
    assert!(
        problems.is_empty(),
        "programs the simulated shell does not know:\n{}",
        problems.join("\n")
    );
}
