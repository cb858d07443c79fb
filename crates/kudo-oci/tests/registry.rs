//! The library calls an in-cluster package source makes, against a real registry
//! (`kudo_testkit::registry`: Debian's docker-registry with htpasswd and a test CA): push, then
//! one `pull_package` that resolves, verifies and reads; credentials from a Docker config document
//! (what a `kubernetes.io/dockerconfigjson` pull secret holds).

use std::path::Path;

use kudo_oci::{
    DockerConfig, OciError, OciRef, PrivateKey, Registry, RegistryOptions, TrustPolicy, TrustedKey,
    Verification,
};
use kudo_testkit::registry::{Auth, Setup, TestRegistry};

fn first_operator() -> kudo_package::Package {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-operator");
    kudo_package::read_path(&dir).unwrap()
}

fn options(reg: &TestRegistry, with_credentials: bool) -> RegistryOptions {
    let auth = base64_auth(&reg.creds());
    let doc = format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, reg.addr);
    RegistryOptions {
        ca_file: Some(reg.ca_file()),
        docker_config: with_credentials.then(|| DockerConfig::parse(doc.as_bytes(), None).unwrap()),
        ..Default::default()
    }
}

fn base64_auth(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test]
async fn pull_package_resolves_verifies_and_reads_in_one_call() {
    let Some(reg) = TestRegistry::start(Setup::default()) else {
        return;
    };
    let client = Registry::new(options(&reg, true)).unwrap();
    let target = OciRef::parse(&format!("oci://{}/lib/first-operator:0.2.0", reg.addr)).unwrap();
    let pkg = first_operator();
    let pushed = client
        .push_package(&pkg, &target, "1970-01-01T00:00:00Z")
        .await
        .unwrap();
    let pinned = target.with_digest(&pushed.digest);

    let pulled = client.pull_package(&target, &TrustPolicy::None).await.unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(pulled.pinned, pinned);
    assert_eq!(pulled.verification, Verification::NotRequired);
    assert_eq!(pulled.package.files, pkg.files);
    assert_eq!(pulled.tarball, kudo_package::create::tarball_bytes(&pkg).unwrap());

    let key = PrivateKey::generate();
    let trusted = TrustedKey::from_pem("release.pub", &key.public_pem()).unwrap();
    let policy = TrustPolicy::Keys(vec![trusted]);
    let e = client.pull_package(&target, &policy).await.unwrap_err();
    assert!(matches!(e, OciError::Unsigned { .. }), "{e}");
    let signed = client.sign(&pinned, &key).await.unwrap();
    assert!(signed.added && signed.signatures == 1);
    let other = PrivateKey::generate();
    assert_eq!(
        client.sign(&pinned, &other).await.unwrap().signatures,
        2,
        "a second signature is added"
    );
    let pulled = client.pull_package(&target, &policy).await.unwrap();
    assert_eq!(
        pulled.verification,
        Verification::Verified {
            key: "release.pub".into(),
            fingerprint: key.fingerprint()
        }
    );
    let tags = client.list_tags(&target).await.unwrap();
    assert!(
        tags.contains(&"0.2.0".to_string())
            && tags.contains(&kudo_oci::reference::signature_tag(&pushed.digest))
    );

    // Without the pull secret's credentials the registry refuses, naming the reference.
    let anonymous = Registry::new(options(&reg, false)).unwrap();
    let e = anonymous
        .pull_package(&target, &TrustPolicy::None)
        .await
        .unwrap_err();
    assert!(matches!(e, OciError::Unauthorized { .. }), "{e}");
    assert!(e.to_string().contains(&target.to_string()), "{e}");
}

#[tokio::test]
async fn plain_http_only_when_asked() {
    let Some(reg) = TestRegistry::start(Setup {
        tls: false,
        auth: Auth::None,
    }) else {
        return;
    };
    let target = OciRef::parse(&format!("oci://{}/plain/first-operator:0.2.0", reg.addr)).unwrap();
    let https = Registry::new(RegistryOptions::default()).unwrap();
    let e = https
        .push_package(&first_operator(), &target, "1970-01-01T00:00:00Z")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("--plain-http"), "{e}");
    let plain = Registry::new(RegistryOptions {
        plain_http: true,
        ..Default::default()
    })
    .unwrap();
    let pushed = plain
        .push_package(&first_operator(), &target, "1970-01-01T00:00:00Z")
        .await
        .unwrap();
    let pulled = plain.pull_package(&target, &TrustPolicy::None).await.unwrap();
    assert_eq!(pulled.digest, pushed.digest);
}

/// The distribution token flow: `401` with `WWW-Authenticate: Bearer`, a token from the token
/// service for the user's credentials, the request again with it; wrong credentials are refused
/// by the token service, and the error says so.
#[tokio::test]
async fn the_token_flow_gets_a_token_for_the_credentials() {
    let Some(reg) = TestRegistry::start(Setup {
        tls: true,
        auth: Auth::Token,
    }) else {
        return;
    };
    let client = Registry::new(options(&reg, true)).unwrap();
    let target = OciRef::parse(&format!("oci://{}/token/first-operator:0.2.0", reg.addr)).unwrap();
    let pushed = client
        .push_package(&first_operator(), &target, "1970-01-01T00:00:00Z")
        .await
        .unwrap();
    let pulled = client.pull_package(&target, &TrustPolicy::None).await.unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    client.check_access(&reg.addr).await.unwrap();

    let stale = format!(
        r#"{{"auths": {{"{}": {{"auth": "{}"}}}}}}"#,
        reg.addr,
        base64_auth("kudo:old")
    );
    let wrong = Registry::new(RegistryOptions {
        docker_config: Some(DockerConfig::parse(stale.as_bytes(), None).unwrap()),
        ..options(&reg, false)
    })
    .unwrap();
    let e = wrong
        .pull_package(&target, &TrustPolicy::None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("401 Unauthorized (user \"kudo\" from the Docker config; the token service said:"),
        "{e}"
    );
    assert!(wrong.check_access(&reg.addr).await.is_err());
}
