//! Talking to a registry: push and pull package artifacts, list tags, write and check
//! signatures, check a login. One [`Registry`] per command (or per reconcile); requests go
//! through `oci-client`, which does the distribution protocol (the token flow after a `401` with
//! `WWW-Authenticate: Bearer`, basic auth after `WWW-Authenticate: Basic`, digest checks of
//! manifests and blobs). What is decided about the bytes (is this a package, is this signature
//! trusted) is in [`crate::artifact`] and [`crate::signature`], without IO.

use std::path::PathBuf;
use std::time::Duration;

use futures::TryStreamExt as _;
use oci_client::RegistryOperation;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;

use crate::artifact::{
    ACCEPTED_MANIFESTS, Artifact, Descriptor, Manifest, OCI_MANIFEST, PackageManifest,
    parse_package_manifest, sha256_digest,
};
use crate::credentials::{Credential, DockerConfig};
use crate::error::OciError;
use crate::reference::{OciRef, signature_tag};
use crate::signature::{
    self, PrivateKey, SIGNATURE_ANNOTATION, SIGNATURE_CONFIG_MEDIA_TYPE, SIMPLE_SIGNING_MEDIA_TYPE,
    SignatureLayer, TrustPolicy, Verification,
};

/// Bounds on what is read from a registry.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest package layer (compressed); the package reader bounds what it decompresses to.
    pub max_layer: u64,
    /// Most signature layers checked.
    pub max_signatures: usize,
    /// Largest signature payload.
    pub max_payload: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_layer: 16 << 20,
            max_signatures: 32,
            max_payload: 64 << 10,
        }
    }
}

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// A PEM file of CA certificates trusted beside the system roots (`--ca-file`).
    pub ca_file: Option<PathBuf>,
    /// CA certificates (PEM) trusted beside the system roots, given as content (an in-cluster
    /// source's Secret); with `ca_file`, both are trusted.
    pub ca_pem: Option<Vec<u8>>,
    /// Plain HTTP instead of HTTPS (`--plain-http`); never chosen on its own.
    pub plain_http: bool,
    /// Connect and read timeout of each request (none: 30 s to connect, no read limit).
    pub timeout: Option<Duration>,
    /// Where credentials come from (the user's file, or a pull secret's content); `None`:
    /// anonymous.
    pub docker_config: Option<DockerConfig>,
    /// Credentials to use instead of the config's (`registry login` checking new ones).
    pub credential: Option<Credential>,
    /// Read limits.
    pub limits: Limits,
}

/// A pushed artifact.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// The reference pushed to, by tag.
    pub reference: OciRef,
    /// The manifest digest.
    pub digest: String,
    /// The layer's size in bytes.
    pub layer_size: u64,
}

/// A pulled, checked and read package: what `install`, `package pull` and an in-cluster package
/// source all need.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The package read from the layer, with the package reader's limits.
    pub package: kudo_package::Package,
    /// The layer's bytes: the `package create` tarball.
    pub tarball: Vec<u8>,
    /// The manifest digest.
    pub digest: String,
    /// The reference pinned to the digest (`oci://HOST/REPO@sha256:…`).
    pub pinned: OciRef,
    /// What the trust policy found.
    pub verification: Verification,
}

/// A signature written by [`Registry::sign`].
#[derive(Clone, Debug)]
pub struct Signed {
    /// `oci://HOST/REPO:sha256-HEX.sig`.
    pub signature: OciRef,
    /// False when the same signature was already there (nothing written).
    pub added: bool,
    /// The signature layers now in the signature manifest.
    pub signatures: usize,
}

/// A client for registries with one set of options.
pub struct Registry {
    client: oci_client::Client,
    options: RegistryOptions,
}

/// Installs ring as rustls' process-wide provider (oci-client is built without one of its own,
/// so that the binary carries one TLS implementation: kube's rustls with ring).
fn install_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Registry {
    /// A client for `options`; fails on an unreadable `--ca-file`.
    pub fn new(options: RegistryOptions) -> Result<Registry, OciError> {
        install_ring();
        let mut config = ClientConfig {
            protocol: if options.plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(options.timeout.unwrap_or(Duration::from_secs(30))),
            read_timeout: options.timeout,
            user_agent: concat!("kubectl-kudo/", env!("CARGO_PKG_VERSION")),
            platform_resolver: None,
            ..Default::default()
        };
        let file = match &options.ca_file {
            Some(path) => Some((
                std::fs::read(path).map_err(|e| OciError::io(path, e))?,
                format!("--ca-file {}", path.display()),
            )),
            None => None,
        };
        let given = options
            .ca_pem
            .clone()
            .map(|d| (d, "the CA certificates".to_string()));
        for (data, what) in file.into_iter().chain(given) {
            if !String::from_utf8_lossy(&data).contains("BEGIN CERTIFICATE") {
                return Err(OciError::Credentials(format!(
                    "{what}: no PEM certificate (BEGIN CERTIFICATE) in it"
                )));
            }
            config.extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        let client = oci_client::Client::try_from(config).map_err(|e| {
            OciError::Credentials(format!("cannot set up the registry client: {}", chain(&e)))
        })?;
        Ok(Registry { client, options })
    }

    /// The credentials for `r`'s registry and how messages describe them.
    fn credential(&self, r: &OciRef) -> Result<Option<Credential>, OciError> {
        if let Some(c) = &self.options.credential {
            return Ok(Some(c.clone()));
        }
        match &self.options.docker_config {
            Some(cfg) => cfg.credentials_for(&r.registry),
            None => Ok(None),
        }
    }

    /// Authenticates for `op` on `r` (fetching a token when the registry asks for one).
    async fn authenticate(&self, r: &OciRef, op: RegistryOperation) -> Result<Context, OciError> {
        let cred = self.credential(r)?;
        let auth = cred.as_ref().map_or(RegistryAuth::Anonymous, |c| {
            RegistryAuth::Basic(c.username.clone(), c.secret.clone())
        });
        let ctx = Context {
            reference: r.clone(),
            credentials: cred
                .as_ref()
                .map_or("no credentials".into(), Credential::describe),
            bearer: false,
        };
        let token = self
            .client
            .auth(&r.to_client(), &auth, op)
            .await
            .map_err(|e| ctx.error(e))?;
        Ok(Context {
            bearer: token.is_some(),
            ..ctx
        })
    }

    /// Pushes `pkg` to `target` (which has a tag): config, layer, then the manifest.
    pub async fn push_package(
        &self,
        pkg: &kudo_package::Package,
        target: &OciRef,
        created: &str,
    ) -> Result<Pushed, OciError> {
        let artifact = Artifact::build(pkg, created).map_err(|source| OciError::Package {
            reference: target.to_string(),
            source,
        })?;
        let ctx = self.authenticate(target, RegistryOperation::Push).await?;
        let cref = target.to_client();
        let m = &artifact.manifest;
        for (bytes, desc) in [(&artifact.config, &m.config), (&artifact.layer, &m.layers[0])] {
            self.client
                .push_blob(&cref, bytes.clone(), &desc.digest)
                .await
                .map_err(|e| ctx.error(e))?;
        }
        self.put_manifest(&ctx, target, m).await?;
        Ok(Pushed {
            reference: target.clone(),
            digest: artifact.digest(),
            layer_size: artifact.layer.len() as u64,
        })
    }

    async fn put_manifest(&self, ctx: &Context, at: &OciRef, m: &Manifest) -> Result<(), OciError> {
        let content_type = http::HeaderValue::from_static(OCI_MANIFEST);
        self.client
            .push_manifest_raw(&at.to_client(), m.to_bytes(), content_type)
            .await
            .map_err(|e| ctx.error(e))?;
        Ok(())
    }

    /// The raw manifest at `r` (by tag or digest) and its digest, checked against `r`'s digest.
    async fn manifest(&self, ctx: &Context, r: &OciRef) -> Result<(Vec<u8>, String), OciError> {
        let (raw, digest) = self
            .client
            .pull_manifest_raw(&r.to_client(), &RegistryAuth::Anonymous, ACCEPTED_MANIFESTS)
            .await
            .map_err(|e| ctx.error(e))?;
        let actual = sha256_digest(&raw);
        if let Some(expected) = &r.digest
            && *expected != actual
        {
            return Err(OciError::Digest {
                reference: r.to_string(),
                what: "manifest".into(),
                expected: expected.clone(),
                actual,
            });
        }
        Ok((raw.to_vec(), digest))
    }

    /// The package manifest at `r` and its digest, without its layer.
    pub async fn package_manifest(&self, r: &OciRef) -> Result<(PackageManifest, String), OciError> {
        let ctx = self.authenticate(r, RegistryOperation::Pull).await?;
        let (raw, digest) = self.manifest(&ctx, r).await?;
        Ok((
            parse_package_manifest(&raw, r, self.options.limits.max_layer)?,
            digest,
        ))
    }

    /// Pulls the package at `r`: resolves the manifest, checks it is a package, applies `policy`
    /// (before the layer is fetched), then fetches the layer and reads it with the package reader's
    /// limits. Nothing is written anywhere; a failure at any step returns its error.
    pub async fn pull_package(&self, r: &OciRef, policy: &TrustPolicy) -> Result<Pulled, OciError> {
        let ctx = self.authenticate(r, RegistryOperation::Pull).await?;
        let (raw, digest) = self.manifest(&ctx, r).await?;
        let manifest = parse_package_manifest(&raw, r, self.options.limits.max_layer)?;
        let pinned = r.with_digest(&digest);
        let verification = self.check_policy(&ctx, &pinned, policy).await?;
        let tarball = self
            .blob(
                &ctx,
                &manifest.layer,
                self.options.limits.max_layer,
                "package layer",
            )
            .await?;
        let package = kudo_package::reader::read_tgz(tarball.as_slice(), "its layer").map_err(|source| {
            OciError::Package {
                reference: pinned.to_string(),
                source,
            }
        })?;
        Ok(Pulled {
            package,
            tarball,
            digest,
            pinned,
            verification,
        })
    }

    async fn check_policy(
        &self,
        ctx: &Context,
        pinned: &OciRef,
        policy: &TrustPolicy,
    ) -> Result<Verification, OciError> {
        match policy {
            TrustPolicy::None => Ok(Verification::NotRequired),
            TrustPolicy::Keys(keys) => {
                let digest = pinned.digest.clone().unwrap_or_default();
                let layers = self.signature_layers(ctx, pinned).await?;
                signature::verify(pinned, &digest, &layers, keys)
            }
        }
    }

    /// Checks the signatures of `r` (by tag or digest) under `policy`; returns the digest too.
    pub async fn verify(&self, r: &OciRef, policy: &TrustPolicy) -> Result<(String, Verification), OciError> {
        let ctx = self.authenticate(r, RegistryOperation::Pull).await?;
        let (raw, digest) = self.manifest(&ctx, r).await?;
        parse_package_manifest(&raw, r, self.options.limits.max_layer)?;
        let v = self.check_policy(&ctx, &r.with_digest(&digest), policy).await?;
        Ok((digest, v))
    }

    /// The signature manifest of `pinned` (`None`: not signed) .
    async fn signature_manifest(&self, ctx: &Context, pinned: &OciRef) -> Result<Option<Manifest>, OciError> {
        let digest = pinned.digest.as_deref().unwrap_or_default();
        let at = pinned.with_tag(&signature_tag(digest));
        let raw = match self.manifest(ctx, &at).await {
            Ok((raw, _)) => raw,
            Err(OciError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let m: Manifest = serde_json::from_slice(&raw)
            .map_err(|e| OciError::not_a_package(&at, format!("its signature manifest is malformed: {e}")))?;
        Ok(Some(m))
    }

    async fn signature_layers(
        &self,
        ctx: &Context,
        pinned: &OciRef,
    ) -> Result<Vec<SignatureLayer>, OciError> {
        let Some(m) = self.signature_manifest(ctx, pinned).await? else {
            return Ok(Vec::new());
        };
        let limits = self.options.limits;
        let mut layers = Vec::new();
        for desc in m
            .layers
            .iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .take(limits.max_signatures)
        {
            let payload = self
                .blob(ctx, desc, limits.max_payload, "signature payload")
                .await?;
            layers.push(SignatureLayer {
                payload,
                signature: desc.annotations.get(SIGNATURE_ANNOTATION).cloned(),
            });
        }
        Ok(layers)
    }

    /// Signs the package manifest `pinned` (which names a digest) with `key`, adding the
    /// signature to its `sha256-HEX.sig` manifest.
    pub async fn sign(&self, pinned: &OciRef, key: &PrivateKey) -> Result<Signed, OciError> {
        let digest = pinned.digest.clone().ok_or_else(|| OciError::Reference {
            reference: pinned.to_string(),
            message: "signing needs the artifact's digest (oci://HOST/REPO@sha256:…): a tag can move; \
                      `package push` prints the digest"
                .into(),
        })?;
        let ctx = self.authenticate(pinned, RegistryOperation::Push).await?;
        let (raw, _) = self.manifest(&ctx, pinned).await?;
        parse_package_manifest(&raw, pinned, self.options.limits.max_layer)?;
        let payload = signature::payload(pinned, &digest);
        let mut layer = Descriptor::of(SIMPLE_SIGNING_MEDIA_TYPE, &payload);
        layer
            .annotations
            .insert(SIGNATURE_ANNOTATION.into(), key.sign(&payload));
        let mut layers = match self.signature_manifest(&ctx, pinned).await? {
            Some(m) => m.layers,
            None => Vec::new(),
        };
        let at = pinned.with_tag(&signature_tag(&digest));
        if layers.contains(&layer) {
            return Ok(Signed {
                signature: at,
                added: false,
                signatures: layers.len(),
            });
        }
        let cref = pinned.to_client();
        self.client
            .push_blob(&cref, payload.clone(), &layer.digest)
            .await
            .map_err(|e| ctx.error(e))?;
        layers.push(layer);
        let config = signature_config(&layers);
        let config_desc = Descriptor::of(SIGNATURE_CONFIG_MEDIA_TYPE, &config);
        self.client
            .push_blob(&cref, config, &config_desc.digest)
            .await
            .map_err(|e| ctx.error(e))?;
        let m = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            artifact_type: None,
            config: config_desc,
            layers,
            annotations: Default::default(),
        };
        self.put_manifest(&ctx, &at, &m).await?;
        Ok(Signed {
            signature: at,
            added: true,
            signatures: m.layers.len(),
        })
    }

    /// The tags of `repo`'s repository, as the registry lists them.
    pub async fn list_tags(&self, repo: &OciRef) -> Result<Vec<String>, OciError> {
        let ctx = self.authenticate(repo, RegistryOperation::Pull).await?;
        let resp = self
            .client
            .list_tags(&repo.to_client(), &RegistryAuth::Anonymous, None, None)
            .await
            .map_err(|e| ctx.error(e))?;
        Ok(resp.tags)
    }

    /// Checks that `registry` answers and accepts the credentials (`registry login`, `repo add`): a
    /// token when the registry issues them, else an authenticated request that must not be 401.
    pub async fn check_access(&self, registry: &str) -> Result<(), OciError> {
        let probe = OciRef::parse(&format!("oci://{registry}/kudo-rs/login-check"))?;
        let ctx = self.authenticate(&probe, RegistryOperation::Pull).await?;
        if ctx.bearer {
            return Ok(());
        }
        match self.list_tags(&probe).await {
            Ok(_) | Err(OciError::NotFound { .. }) | Err(OciError::Denied { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A blob, bounded by `limit`, its size and sha256 checked against `desc`.
    async fn blob(
        &self,
        ctx: &Context,
        desc: &Descriptor,
        limit: u64,
        what: &str,
    ) -> Result<Vec<u8>, OciError> {
        let reference = ctx.reference.to_string();
        if desc.size > limit {
            return Err(OciError::TooLarge {
                reference,
                what: what.into(),
                size: desc.size,
                limit,
            });
        }
        let oci_desc = OciDescriptor {
            media_type: desc.media_type.clone(),
            digest: desc.digest.clone(),
            size: desc.size as i64,
            ..Default::default()
        };
        let mut stream = self
            .client
            .pull_blob_stream(&ctx.reference.to_client(), &oci_desc)
            .await
            .map_err(|e| ctx.error(e))?;
        let mut out = Vec::with_capacity(desc.size as usize);
        let mut failure = None;
        loop {
            match stream.try_next().await {
                Ok(Some(chunk)) => {
                    out.extend_from_slice(&chunk);
                    if out.len() as u64 > desc.size {
                        failure = Some(format!("more than the {} bytes announced", desc.size));
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    failure = Some(chain(&e));
                    break;
                }
            }
        }
        check_blob((&reference, &ctx.reference.registry), what, desc, &out, failure)?;
        Ok(out)
    }
}

/// Judges a received blob: truncated, digest mismatch, or another failure of the transfer.
fn check_blob(
    (reference, registry): (&str, &str),
    what: &str,
    desc: &Descriptor,
    received: &[u8],
    failure: Option<String>,
) -> Result<(), OciError> {
    let n = received.len() as u64;
    if n < desc.size {
        return Err(OciError::Truncated {
            reference: reference.into(),
            what: what.into(),
            received: n,
            size: desc.size,
        });
    }
    let actual = sha256_digest(received);
    if n == desc.size && actual != desc.digest {
        return Err(OciError::Digest {
            reference: reference.into(),
            what: what.into(),
            expected: desc.digest.clone(),
            actual,
        });
    }
    match failure {
        Some(message) => Err(OciError::Registry {
            reference: reference.into(),
            registry: registry.into(),
            message: format!("reading the {what}: {message}"),
        }),
        None => Ok(()),
    }
}

/// The image config of a signature manifest, as cosign writes it: no platform, one diff id per
/// layer.
fn signature_config(layers: &[Descriptor]) -> Vec<u8> {
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "config": {},
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .expect("JSON serialises")
}

/// What error mapping needs to know about a request.
struct Context {
    reference: OciRef,
    credentials: String,
    bearer: bool,
}

impl Context {
    /// An `oci-client` error as ours, naming the reference and the credentials sent.
    fn error(&self, e: OciDistributionError) -> OciError {
        let (reference, registry) = (self.reference.to_string(), self.reference.registry.clone());
        match e {
            OciDistributionError::UnauthorizedError { .. } => {
                self.refusal(Refusal::Unauthorized, String::new())
            }
            OciDistributionError::AuthenticationFailure(why) => self.refusal(
                Refusal::Unauthorized,
                format!("; the token service said: {}", why.trim()),
            ),
            OciDistributionError::RegistryError { envelope, .. } => {
                let message = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                let kind = match envelope.errors.first().map(|e| &e.code) {
                    Some(OciErrorCode::Unauthorized) => Refusal::Unauthorized,
                    Some(OciErrorCode::Denied) => Refusal::Denied,
                    Some(
                        OciErrorCode::NameUnknown
                        | OciErrorCode::ManifestUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound,
                    ) => Refusal::NotFound,
                    _ => Refusal::Other,
                };
                let detail = match kind {
                    Refusal::Unauthorized => String::new(),
                    _ => message,
                };
                self.refusal(kind, detail)
            }
            OciDistributionError::ServerError { code, message, .. } => {
                let kind = match code {
                    401 => Refusal::Unauthorized,
                    403 => Refusal::Denied,
                    404 => Refusal::NotFound,
                    _ => Refusal::Other,
                };
                let detail = match kind {
                    Refusal::Unauthorized => String::new(),
                    _ => format!("HTTP {code}: {}", message.trim()),
                };
                self.refusal(kind, detail)
            }
            OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
                expected,
                actual,
            }) => OciError::Digest {
                reference,
                what: "content".into(),
                expected,
                actual,
            },
            OciDistributionError::RequestError(req) if req.is_connect() || req.is_timeout() => {
                OciError::Unreachable {
                    reference,
                    registry,
                    message: with_hint(chain(&req)),
                }
            }
            other => OciError::Registry {
                reference,
                registry,
                message: with_hint(chain(&other)),
            },
        }
    }

    /// A refusal of the registry as ours; `detail` is the registry's words (for a 401, what is
    /// added after the credentials).
    fn refusal(&self, kind: Refusal, detail: String) -> OciError {
        let (reference, registry) = (self.reference.to_string(), self.reference.registry.clone());
        match kind {
            Refusal::Unauthorized => OciError::Unauthorized {
                reference,
                registry,
                credentials: format!("{}{detail}", self.credentials),
            },
            Refusal::Denied => OciError::Denied {
                reference,
                registry,
                credentials: self.credentials.clone(),
                message: detail,
            },
            Refusal::NotFound => OciError::NotFound {
                reference,
                message: detail,
            },
            Refusal::Other => OciError::Registry {
                reference,
                registry,
                message: detail,
            },
        }
    }
}

/// How the registry refused a request.
enum Refusal {
    Unauthorized,
    Denied,
    NotFound,
    Other,
}

/// The error and its causes on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// Adds what to try for the usual TLS mistakes.
fn with_hint(message: String) -> String {
    let lower = message.to_ascii_lowercase();
    if lower.contains("certificate") || lower.contains("unknownissuer") {
        format!("{message} (a registry whose certificate is signed by its own CA needs --ca-file FILE)")
    } else if lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
        || lower.contains("http2")
    {
        format!("{message} (a registry serving plain HTTP needs --plain-http)")
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_blobs_are_judged_by_size_then_digest() {
        let data = b"0123456789".to_vec();
        let desc = Descriptor::of("x", &data);
        assert!(check_blob(("r", "h"), "layer", &desc, &data, None).is_ok());
        let e = check_blob(("r", "h"), "layer", &desc, &data[..4], Some("eof".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the layer of r is truncated: received 4 of 10 bytes"
        );
        let e = check_blob(("r", "h"), "layer", &desc, b"0123456780", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("digest mismatch for layer of r: expected sha256:84d8"),
            "{e}"
        );
        let e = check_blob(("r", "h"), "layer", &desc, &data, Some("reset".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("reading the layer: reset"), "{e}");
    }

    #[test]
    fn the_signature_config_lists_every_layer() {
        let l = [Descriptor::of("a", b"1"), Descriptor::of("a", b"2")];
        let v: serde_json::Value = serde_json::from_slice(&signature_config(&l)).unwrap();
        assert_eq!(v["rootfs"]["diff_ids"][1], sha256_digest(b"2"));
    }
}
