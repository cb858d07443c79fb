//! What simulated containers see of their pod: the files of its ConfigMap and Secret volumes.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kudo_sim::SimConfig;

use super::{Env, phase, pod_when};

/// ConfigMap and Secret volumes hold their keys as files (with `items`, `subPath` and modes), so
/// a script a package keeps in a ConfigMap runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_and_files_of_config_map_and_secret_volumes_are_there() {
    let cfg = SimConfig::default();
    let runtime = cfg.runtime.clone();
    let env = Env::start(cfg).await;
    env.server
        .as_ref()
        .unwrap()
        .set_pod_runtime(std::sync::Arc::new(runtime));
    env.apply(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: scripts}
data:
  run.sh: |
    #!/bin/sh
    echo "from the configmap: $(cat /etc/app/password)"
    exit 3
  other: ignored
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: runner}
spec:
  restartPolicy: Never
  volumes:
    - {name: scripts, configMap: {name: scripts, defaultMode: 0755, items: [{key: run.sh, path: bin/run.sh}]}}
    - {name: creds, secret: {secretName: creds}}
  containers:
    - name: main
      image: debian:12
      command: ["sh", "-c", "ls /scripts/bin; /scripts/bin/run.sh"]
      volumeMounts:
        - {name: scripts, mountPath: /scripts}
        - {name: creds, mountPath: /etc/app/password, subPath: password}
"#,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let p = pod_when(&pods, "runner", |p| phase(p) == "Failed").await;
    let st = &p.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        st.state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code,
        3
    );
    let log = pods.logs("runner", &Default::default()).await.unwrap();
    assert_eq!(log, "run.sh\nfrom the configmap: s3cret\n");
    env.stop().await;
}
