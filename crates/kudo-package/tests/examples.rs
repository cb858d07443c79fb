//! The example operators in /examples: they verify cleanly and render to what the Galera blog
//! series shows on its cluster (expected values copied from the `kubectl describe` outputs in
//! /work/shared/seeds).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kudo_package::render::{Action, RenderContext, RenderError, RenderedObject, render_plan};
use kudo_package::resources::{ConvertOptions, to_resources};
use kudo_package::verify::{ParamChecks, verify};
use kudo_package::{Package, read_path};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn load(name: &str) -> Package {
    read_path(&example(name)).unwrap()
}

fn render(pkg: &Package, plan: &str, params: &[(&str, &str)]) -> Result<Vec<RenderedObject>, RenderError> {
    let res = to_resources(pkg, &ConvertOptions::default()).unwrap();
    let values: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ctx = RenderContext::offline(&res.instance.metadata.name, "default", values);
    render_plan(&res.operator_version, plan, &ctx)
}

fn find<'a>(objs: &'a [RenderedObject], step: &str, kind: &str, name: &str) -> &'a RenderedObject {
    objs.iter()
        .find(|o| o.step == step && o.object["kind"] == kind && o.object["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in step {step}"))
}

#[test]
fn examples_verify_without_errors_or_warnings() {
    for name in [
        "first-operator",
        "galera",
        "mysql",
        "wordpress",
        "wordpress-on-mysql",
    ] {
        let v = verify(&load(name), ParamChecks::default());
        assert!(v.errors.is_empty(), "{name}: {:?}", v.errors);
        assert!(v.warnings.is_empty(), "{name}: {:?}", v.warnings);
    }
}

#[test]
fn galera_names_follow_the_blog() {
    let pkg = load("galera");
    let res = to_resources(&pkg, &ConvertOptions::default()).unwrap();
    assert_eq!(res.instance.metadata.name, "galera-instance");
    assert_eq!(res.operator_version.metadata.name, "galera-10.5.3-0.1.0");
    assert_eq!(pkg.tarball_name(), "galera-10.5.3_0.1.0.tgz");
    let node_count = res
        .operator_version
        .spec
        .parameters
        .iter()
        .find(|p| p.name == "NODE_COUNT")
        .unwrap();
    assert_eq!(node_count.trigger, "node_update");
    // `default: False` is a YAML 1.1 boolean, stored as Go prints it.
    let aa = res
        .operator_version
        .spec
        .parameters
        .iter()
        .find(|p| p.name == "ANTI_AFFINITY")
        .unwrap();
    assert_eq!(aa.default.as_deref(), Some("false"));
}

#[test]
fn galera_deploy_renders_what_the_blog_shows() {
    let objs = render(&load("galera"), "deploy", &[]).unwrap();
    let steps: Vec<&str> = objs.iter().map(|o| o.step.as_str()).collect();
    // Plan order, one object per template, the cleanup step deleting the bootstrap objects.
    let mut dedup = steps.clone();
    dedup.dedup();
    assert_eq!(
        dedup,
        [
            "secrets",
            "bootstrap_config",
            "bootstrap_service",
            "bootstrap_deploy",
            "firstboot_config",
            "node_scripts",
            "cluster_services",
            "statefulset",
            "cleanup"
        ]
    );
    // galera-part1: labels and annotations of the bootstrap ConfigMap.
    let cm = &find(
        &objs,
        "bootstrap_config",
        "ConfigMap",
        "galera-instance-bootstrap",
    )
    .object;
    assert_eq!(cm["metadata"]["labels"]["heritage"], "kudo");
    assert_eq!(cm["metadata"]["labels"]["kudo.dev/instance"], "galera-instance");
    assert_eq!(cm["metadata"]["labels"]["kudo.dev/operator"], "galera");
    assert_eq!(cm["metadata"]["annotations"]["kudo.dev/plan"], "deploy");
    assert_eq!(cm["metadata"]["annotations"]["kudo.dev/phase"], "deploy");
    assert_eq!(cm["metadata"]["annotations"]["kudo.dev/step"], "bootstrap_config");
    assert_eq!(cm["metadata"]["namespace"], "default");
    assert_eq!(cm["metadata"]["ownerReferences"][0]["kind"], "Instance");
    // galera-part2: the first-boot node configuration.
    let node = &find(
        &objs,
        "firstboot_config",
        "ConfigMap",
        "galera-instance-nodeconfig",
    )
    .object;
    let cnf = node["data"]["galera.cnf"].as_str().unwrap();
    assert!(cnf.contains(
        "wsrep_cluster_address = gcomm://galera-instance-bootstrap-svc,galera-instance-galera-0.galera-instance-hs,galera-instance-galera-1.galera-instance-hs,galera-instance-galera-2.galera-instance-hs\n"
    ), "{cnf}");
    // galera-part3: after cleanup the same template lists only the StatefulSet nodes.
    let after = &find(&objs, "cleanup", "ConfigMap", "galera-instance-nodeconfig").object;
    let cnf = after["data"]["galera.cnf"].as_str().unwrap();
    assert!(cnf.contains(
        "wsrep_cluster_address = gcomm://galera-instance-galera-0.galera-instance-hs,galera-instance-galera-1.galera-instance-hs,galera-instance-galera-2.galera-instance-hs\n"
    ), "{cnf}");
    // The passwords are not in ConfigMaps or env values any more.
    for o in &objs {
        let text = serde_json::to_string(&o.object).unwrap();
        if o.object["kind"] != "Secret" {
            assert!(
                !text.contains("root:admin") && !text.contains("\"value\":\"admin\""),
                "{text}"
            );
        }
    }
    // Cleanup deletes the three bootstrap objects, in the task's resource order.
    let deleted: Vec<(&str, &str)> = objs
        .iter()
        .filter(|o| o.action == Action::Delete)
        .map(|o| {
            (
                o.object["kind"].as_str().unwrap(),
                o.object["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        deleted,
        [
            ("Deployment", "galera-instance-bootstrap"),
            ("Service", "galera-instance-bootstrap-svc"),
            ("ConfigMap", "galera-instance-bootstrap")
        ]
    );
    // StatefulSet: replicas from NODE_COUNT, pod template and PVC template labelled, no affinity by
    // default (ANTI_AFFINITY: False), the preStop hook waiting for sync, 0755 read as octal.
    let sts = &find(&objs, "statefulset", "StatefulSet", "galera-instance-galera").object;
    assert_eq!(sts["spec"]["replicas"], 3);
    assert_eq!(
        sts["spec"]["template"]["metadata"]["labels"]["kudo.dev/instance"],
        "galera-instance"
    );
    assert_eq!(
        sts["spec"]["template"]["metadata"]["annotations"]["kudo.dev/operator-version"],
        "0.1.0"
    );
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"]["heritage"],
        "kudo"
    );
    assert!(sts["spec"]["template"]["spec"].get("affinity").is_none());
    let c = &sts["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["lifecycle"]["preStop"]["exec"]["command"][1],
        "/etc/galera/wait-for-sync.sh"
    );
    assert_eq!(
        sts["spec"]["template"]["spec"]["volumes"][1]["configMap"]["defaultMode"],
        493
    );
    assert_eq!(
        sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
        "10M"
    );
}

#[test]
fn galera_parameters_change_the_render() {
    let pkg = load("galera");
    let objs = render(
        &pkg,
        "node_update",
        &[("NODE_COUNT", "1"), ("ANTI_AFFINITY", "true")],
    )
    .unwrap();
    assert_eq!(objs.len(), 2);
    let cnf = objs[0].object["data"]["galera.cnf"].as_str().unwrap();
    assert!(
        cnf.contains("wsrep_cluster_address = gcomm://galera-instance-galera-0.galera-instance-hs\n"),
        "{cnf}"
    );
    assert_eq!(objs[1].object["spec"]["replicas"], 1);
    assert_eq!(objs[1].step, "stateful");
    let aff = &objs[1].object["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
    assert_eq!(
        aff["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
        "kubernetes.io/hostname"
    );
}

#[test]
fn first_operator_renders_nginx_with_replicas() {
    let pkg = load("first-operator");
    let objs = render(&pkg, "deploy", &[("REPLICAS", "5")]).unwrap();
    assert_eq!(objs.len(), 1);
    let d = &objs[0].object;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.7.9"
    );
    // `default: 2` (an integer) is stored as the string "2".
    let objs = render(&pkg, "deploy", &[]).unwrap();
    assert_eq!(objs[0].object["spec"]["replicas"], 2);
    let err = render(&pkg, "deploy", &[("REPLICAS", "many")])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid parameters: parameter \"REPLICAS\" has an invalid value \"many\": type is \"integer\" but format of \"many\" is invalid: strconv.ParseInt: parsing \"many\": invalid syntax"
    );
}

#[test]
fn wordpress_requires_its_password_and_keeps_it_in_a_secret() {
    let pkg = load("wordpress");
    let err = render(&pkg, "deploy", &[]).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid parameters: parameter \"MYSQL_ROOT_PASSWORD\" is required but has no value set"
    );
    let err = render(
        &pkg,
        "deploy",
        &[("MYSQL_ROOT_PASSWORD", "s3cret"), ("SERVICE_TYPE", "Ingress")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("value is \"Ingress\", but only allowed values are [ClusterIP NodePort LoadBalancer]"),
        "{err}"
    );
    let objs = render(&pkg, "deploy", &[("MYSQL_ROOT_PASSWORD", "s3cret")]).unwrap();
    let kinds: Vec<&str> = objs.iter().map(|o| o.object["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Secret",
            "PersistentVolumeClaim",
            "Service",
            "Deployment",
            "PersistentVolumeClaim",
            "Service",
            "Deployment"
        ]
    );
    assert_eq!(objs[0].object["stringData"]["password"], "s3cret");
    let env = &objs[3].object["spec"]["template"]["spec"]["containers"][0]["env"][0];
    assert_eq!(
        env["valueFrom"]["secretKeyRef"]["name"],
        "wordpress-instance-mysql-pass"
    );
    assert_eq!(objs[5].object["spec"]["type"], "NodePort");
}

#[test]
fn rendering_is_deterministic() {
    let pkg = load("galera");
    let a = render(&pkg, "deploy", &[]).unwrap();
    let b = render(&pkg, "deploy", &[]).unwrap();
    assert_eq!(a, b);
}

#[test]
fn tarballs_are_reproducible_and_read_back() {
    let pkg = load("galera");
    let a = kudo_package::create::tarball_bytes(&pkg).unwrap();
    let b = kudo_package::create::tarball_bytes(&load("galera")).unwrap();
    assert_eq!(a, b);
    let back = kudo_package::reader::read_tgz(a.as_slice(), "galera.tgz").unwrap();
    assert_eq!(back.operator, pkg.operator);
    assert_eq!(back.params, pkg.params);
    assert_eq!(back.templates, pkg.templates);
    // Header fields that would make the archive machine-dependent.
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(a.as_slice()));
    let mut names = Vec::new();
    for e in ar.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        assert_eq!(h.mtime().unwrap(), 0);
        assert_eq!(h.uid().unwrap(), 0);
        assert_eq!(h.gid().unwrap(), 0);
        names.push(e.path().unwrap().display().to_string());
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    // gzip header: mtime bytes 4..8 are zero.
    assert_eq!(&a[4..8], &[0, 0, 0, 0]);
}
