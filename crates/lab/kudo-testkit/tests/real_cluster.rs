//! The kit itself: the real control plane comes up and is the version the tests assume.

#[tokio::test]
#[ignore = "real control plane: run by scripts/real-cluster-stage.sh"]
async fn real_cluster_is_kubernetes_1_28() {
    let client = kudo_testkit::real_cluster::client().await;
    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, "v1.28.7");
}
