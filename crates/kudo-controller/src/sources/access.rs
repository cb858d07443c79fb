//! A source's Secrets as registry access: the pull secret (`kubernetes.io/dockerconfigjson`,
//! read as the kubelet reads one: its `auths` only), the registry's CA (`ca.crt`), and the trusted
//! public keys (every key ending `.pub`); and how kudo-oci's errors become the status's failures.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kudo_api::source::OperatorSourceSpec;
use kudo_engine::source::{Failure, FailureKind, Verify};
use kudo_oci::{DockerConfig, OciError, RegistryOptions, TrustPolicy, TrustedKey};

/// Timeout of each registry request: a registry that stops answering fails the check (retried)
/// instead of holding it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the pull needs.
pub(super) struct Access {
    pub options: RegistryOptions,
    pub policy: TrustPolicy,
}

/// Reads the Secrets `spec` names in `ns`. `Ok(Err)`: one is missing or unusable (the status
/// says which); `Err`: the API server failed otherwise.
pub(super) async fn read(
    client: &kube::Client,
    ns: &str,
    spec: &OperatorSourceSpec,
    verify: &Verify,
) -> Result<Result<Access, Failure>, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut options = RegistryOptions {
        plain_http: spec.insecure,
        timeout: Some(REQUEST_TIMEOUT),
        ..Default::default()
    };
    if let Some(r) = &spec.secret_ref {
        let value = match key(&secrets, ns, "spec.secretRef", &r.name, ".dockerconfigjson").await? {
            Ok(v) => v,
            Err(f) => return Ok(Err(f)),
        };
        match DockerConfig::from_pull_secret(&value, &format!("Secret {ns}/{}", r.name)) {
            Ok(c) => options.docker_config = Some(c),
            Err(e) => {
                return Ok(Err(Failure::new(
                    FailureKind::Secret,
                    format!("spec.secretRef: {e}"),
                )));
            }
        }
    }
    if let Some(r) = &spec.cert_secret_ref {
        match key(&secrets, ns, "spec.certSecretRef", &r.name, "ca.crt").await? {
            Ok(v) => options.ca_pem = Some(v),
            Err(f) => return Ok(Err(f)),
        }
    }
    let policy = match verify {
        Verify::None => TrustPolicy::None,
        Verify::Keys { secret } => match keys(&secrets, ns, secret).await? {
            Ok(keys) => TrustPolicy::Keys(keys),
            Err(f) => return Ok(Err(f)),
        },
    };
    Ok(Ok(Access { options, policy }))
}

/// The Secret `name`, or why it cannot be used.
async fn secret(
    secrets: &Api<Secret>,
    ns: &str,
    field: &str,
    name: &str,
) -> Result<Result<Secret, Failure>, kube::Error> {
    Ok(secrets.get_opt(name).await?.ok_or_else(|| {
        Failure::new(
            FailureKind::Secret,
            format!("{field}: Secret {ns}/{name} does not exist"),
        )
    }))
}

/// The value of `key` in Secret `name`.
async fn key(
    secrets: &Api<Secret>,
    ns: &str,
    field: &str,
    name: &str,
    key: &str,
) -> Result<Result<Vec<u8>, Failure>, kube::Error> {
    let s = match secret(secrets, ns, field, name).await? {
        Ok(s) => s,
        Err(f) => return Ok(Err(f)),
    };
    Ok(s.data
        .and_then(|mut d| d.remove(key))
        .map(|b| b.0)
        .ok_or_else(|| {
            Failure::new(
                FailureKind::Secret,
                format!("{field}: Secret {ns}/{name} has no key {key}"),
            )
        }))
}

/// Every key ending `.pub` of Secret `name`, as a trusted key named `Secret NS/NAME:KEY`.
async fn keys(
    secrets: &Api<Secret>,
    ns: &str,
    name: &str,
) -> Result<Result<Vec<TrustedKey>, Failure>, kube::Error> {
    let field = "spec.verify.secretRef";
    let s = match secret(secrets, ns, field, name).await? {
        Ok(s) => s,
        Err(f) => return Ok(Err(f)),
    };
    let bad = |m: String| Ok(Err(Failure::new(FailureKind::Secret, format!("{field}: {m}"))));
    let mut out = Vec::new();
    for (k, v) in s.data.unwrap_or_default() {
        if !k.ends_with(".pub") {
            continue;
        }
        let shown = format!("Secret {ns}/{name}:{k}");
        let pem = String::from_utf8_lossy(&v.0);
        match TrustedKey::from_pem(&shown, &pem) {
            Ok(key) => out.push(key),
            Err(e) => return bad(format!("{shown}: {e}")),
        }
    }
    if out.is_empty() {
        return bad(format!(
            "Secret {ns}/{name} has no key ending .pub (a PEM public key, e.g. cosign.pub)"
        ));
    }
    Ok(Ok(out))
}

/// A registry refusal or an artifact that failed a check, as the status reports it.
pub(super) fn failure(e: OciError) -> Failure {
    let kind = match &e {
        OciError::Reference { .. } => FailureKind::Spec,
        OciError::Credentials(_) | OciError::Key { .. } | OciError::Io { .. } => FailureKind::Secret,
        OciError::Unreachable { .. }
        | OciError::Unauthorized { .. }
        | OciError::Denied { .. }
        | OciError::NotFound { .. }
        | OciError::Registry { .. } => FailureKind::Registry,
        OciError::NotAPackage { .. }
        | OciError::Digest { .. }
        | OciError::Truncated { .. }
        | OciError::TooLarge { .. }
        | OciError::Package { .. } => FailureKind::Artifact,
        OciError::Unsigned { .. } => FailureKind::Unsigned,
        OciError::Untrusted { .. } => FailureKind::Untrusted,
        OciError::WrongDigest { .. } => FailureKind::WrongDigest,
    };
    Failure::new(kind, chain(&e))
}

/// An error and its causes (the package reader's limits are the cause of `Package`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_errors_become_the_status_reasons() {
        let r = || "oci://h/r@sha256:00".to_string();
        let cases = [
            (
                OciError::Unsigned {
                    reference: r(),
                    signature_tag: "sha256-00.sig".into(),
                },
                "Unsigned",
            ),
            (
                OciError::Untrusted {
                    reference: r(),
                    keys: "k".into(),
                    details: "d".into(),
                },
                "UntrustedSignature",
            ),
            (
                OciError::WrongDigest {
                    reference: r(),
                    key: "k".into(),
                    signed: "a".into(),
                    expected: "b".into(),
                },
                "SignatureForAnotherArtifact",
            ),
            (
                OciError::Digest {
                    reference: r(),
                    what: "layer".into(),
                    expected: "a".into(),
                    actual: "b".into(),
                },
                "InvalidArtifact",
            ),
            (
                OciError::NotAPackage {
                    reference: r(),
                    message: "an image".into(),
                },
                "InvalidArtifact",
            ),
            (
                OciError::Unreachable {
                    reference: r(),
                    registry: "h".into(),
                    message: "refused".into(),
                },
                "RegistryError",
            ),
            (OciError::Credentials("bad".into()), "SecretUnavailable"),
        ];
        for (e, reason) in cases {
            let text = e.to_string();
            let f = failure(e);
            assert_eq!((f.kind.reason(), f.message.as_str()), (reason, text.as_str()));
        }
        let package = OciError::Package {
            reference: r(),
            source: kudo_package::PackageError::Invalid("too big".into()),
        };
        let f = failure(package);
        assert!(
            f.message
                .starts_with("the package in oci://h/r@sha256:00 is invalid: "),
            "{}",
            f.message
        );
        assert!(f.message.ends_with("too big"), "{}", f.message);
    }
}
