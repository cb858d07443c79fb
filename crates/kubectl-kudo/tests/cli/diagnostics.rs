//! `diagnostics collect` against the embedded API server, with the objects created through kube-rs.
//!
//! The collector is driven in-process on the test's tokio runtime through the `kubectl_kudo`
//! library.

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubectl_kudo::Io;
use kubectl_kudo::cmd::cluster::ClusterOpts;
use kubectl_kudo::cmd::diagnostics::{self, CollectArgs, DiagnosticsArgs, DiagnosticsCommand};
use serde_json::{Value, json};

fn res(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn create(client: &kube::Client, ns: Option<&str>, r: &ApiResource, obj: Value) -> DynamicObject {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, r),
        None => Api::all_with(client.clone(), r),
    };
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    // A CRD's resource can take a moment to be served after the CRD is created.
    for _ in 0..50 {
        match api.create(&PostParams::default(), &obj).await {
            Ok(o) => return o,
            Err(kube::Error::Api(s)) if s.code == 404 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("creating {:?}: {e}", obj.metadata.name),
        }
    }
    panic!("{} never became available", r.plural)
}

fn pod(name: &str, ns: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}, {"name": "sidecar", "image": "busybox"}]}})
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collects_instance_children_and_kudo_namespace() {
    let server = kudo_apiserver::ApiServer::start(kudo_apiserver::Config::default())
        .await
        .unwrap();
    let kc = Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();

    let crd = res(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    for text in kudo_api::crd_manifests() {
        let v: Value = serde_saphyr::from_str(text).unwrap();
        create(&client, None, &crd, v).await;
    }
    let kudo = |kind: &str, plural: &str| res("kudo.dev", "v1beta1", kind, plural);
    let (op, ov, inst) = (
        kudo("Operator", "operators"),
        kudo("OperatorVersion", "operatorversions"),
        kudo("Instance", "instances"),
    );
    let ns = "default";
    for (name, version) in [("zk", "0.3.0"), ("child", "1.0.0")] {
        create(
            &client,
            Some(ns),
            &op,
            json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Operator",
            "metadata": {"name": name, "namespace": ns}, "spec": {}}),
        )
        .await;
        create(
            &client,
            Some(ns),
            &ov,
            json!({"apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": format!("{name}-{version}"), "namespace": ns},
            "spec": {"operator": {"name": name, "kind": "Operator"}, "version": version}}),
        )
        .await;
    }
    let parent = create(
        &client,
        Some(ns),
        &inst,
        json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "zk-instance", "namespace": ns, "labels": {"kudo.dev/operator": "zk"}},
        "spec": {"operatorVersion": {"name": "zk-0.3.0"}}}),
    )
    .await;
    let uid = parent.metadata.uid.clone().unwrap();
    create(&client, Some(ns), &inst, json!({"apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
        "metadata": {"name": "child-instance", "namespace": ns, "labels": {"kudo.dev/operator": "child"},
            "ownerReferences": [{"apiVersion": "kudo.dev/v1beta1", "kind": "Instance", "name": "zk-instance", "uid": uid}]},
        "spec": {"operatorVersion": {"name": "child-1.0.0"}}})).await;

    let pods = res("", "v1", "Pod", "pods");
    let svcs = res("", "v1", "Service", "services");
    create(
        &client,
        Some(ns),
        &pods,
        pod(
            "zk-instance-zookeeper-0",
            ns,
            json!({"kudo.dev/instance": "zk-instance"}),
        ),
    )
    .await;
    create(
        &client,
        Some(ns),
        &pods,
        pod(
            "child-instance-0",
            ns,
            json!({"kudo.dev/instance": "child-instance"}),
        ),
    )
    .await;
    create(&client, Some(ns), &pods, pod("cowsay", ns, json!({"app": "cow"}))).await;
    create(
        &client,
        Some(ns),
        &svcs,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "zk-cs", "namespace": ns, "labels": {"kudo.dev/instance": "zk-instance"}},
        "spec": {"ports": [{"port": 2181}]}}),
    )
    .await;
    create(
        &client,
        Some(ns),
        &svcs,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "unrelated", "namespace": ns}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    create(
        &client,
        None,
        &res("", "v1", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kudo-system"}}),
    )
    .await;
    create(
        &client,
        Some("kudo-system"),
        &pods,
        pod(
            "kudo-controller-manager-0",
            "kudo-system",
            json!({"app": "kudo-manager"}),
        ),
    )
    .await;

    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let opts = ClusterOpts {
        kubeconfig: Some(kubeconfig),
        home: Some(tmp.path().join("home")),
        ..Default::default()
    };
    let out = tmp.path().join("diag");
    let args = |instance: &str, dir: &Path| DiagnosticsArgs {
        command: DiagnosticsCommand::Collect(CollectArgs {
            instance: instance.into(),
            output_directory: dir.to_path_buf(),
            log_since: Some(3600),
        }),
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    diagnostics::run(
        &opts,
        args("zk-instance", &out),
        &mut Io::new(&mut stdout, &mut stderr),
    )
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8(stdout).unwrap(),
        format!("Diagnostics written to {}\n", out.display())
    );

    let inst_dir = "operator_zk/instance_zk-instance";
    assert!(read(&out, "operator_zk/zk.yaml").contains("kind: Operator"));
    let ov_yaml = read(&out, "operator_zk/operatorversion_zk-0.3.0/zk-0.3.0.yaml");
    assert!(
        ov_yaml.contains("kind: OperatorVersion") && ov_yaml.contains("0.3.0"),
        "{ov_yaml}"
    );
    assert!(read(&out, &format!("{inst_dir}/zk-instance.yaml")).contains("kind: Instance"));
    let pod_yaml = read(
        &out,
        &format!("{inst_dir}/pod_zk-instance-zookeeper-0/zk-instance-zookeeper-0.yaml"),
    );
    assert!(
        pod_yaml.contains("kind: Pod") && pod_yaml.contains("apiVersion: v1"),
        "{pod_yaml}"
    );
    for c in ["main", "sidecar"] {
        let base = out.join(format!("{inst_dir}/pod_zk-instance-zookeeper-0/{c}"));
        let gz = base.with_extension("log.gz");
        let er = base.with_extension("log.err");
        assert!(
            gz.exists() || er.exists(),
            "neither log nor error file for container {c}"
        );
    }
    let services = read(&out, &format!("{inst_dir}/servicelist.yaml"));
    assert!(
        services.contains("kind: ServiceList")
            && services.contains("zk-cs")
            && !services.contains("unrelated"),
        "{services}"
    );
    assert!(!out.join(format!("{inst_dir}/pod_cowsay")).exists());
    assert!(read(&out, "operator_child/instance_child-instance/child-instance.yaml").contains("child-1.0.0"));
    assert!(
        out.join("operator_child/instance_child-instance/pod_child-instance-0/child-instance-0.yaml")
            .exists()
    );
    assert!(
        out.join("kudo/pod_kudo-controller-manager-0/kudo-controller-manager-0.yaml")
            .exists()
    );
    assert!(!out.join("kudo/pod_cowsay").exists());
    assert!(read(&out, "version.yaml").contains("kubernetesVersion"));
    assert!(read(&out, "settings.yaml").contains("namespace: default"));

    // The output directory must not exist.
    let e = diagnostics::run(
        &opts,
        args("zk-instance", &out),
        &mut Io::new(&mut std::io::sink(), &mut std::io::sink()),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("already exists"), "{e}");

    // A missing instance is fatal and leaves instance.err behind.
    let missing = tmp.path().join("missing");
    let e = diagnostics::run(
        &opts,
        args("nope", &missing),
        &mut Io::new(&mut std::io::sink(), &mut std::io::sink()),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("not found"), "{e}");
    assert!(read(&missing, "instance.err").contains("nope"));

    server.shutdown().await;
}
