//! Signatures in cosign's keyed format, and the trust policy that decides what is accepted.
//!
//! A signature of the manifest `sha256:HEX` in repository `HOST/REPO` is an OCI image manifest
//! tagged `sha256-HEX.sig` in the same repository. Each of its layers of media type
//! [`SIMPLE_SIGNING_MEDIA_TYPE`] is one signature: the layer's content is the "simple signing"
//! payload (`{"critical":{"identity":{"docker-reference":"HOST/REPO"},"image":
//! {"docker-manifest-digest":"sha256:HEX"},"type":"cosign container image signature"},
//! "optional":…}`), and its annotation [`SIGNATURE_ANNOTATION`] holds the base64 of the ASN.1 DER
//! ECDSA P-256 signature of the payload's SHA-256. Signing again adds a layer; cosign does the
//! same, so signatures made by either tool verify with the other.
//!
//! Keys are ECDSA P-256: private keys as PKCS#8 (`BEGIN PRIVATE KEY`) or SEC1 (`BEGIN EC
//! PRIVATE KEY`, what `openssl ecparam -genkey` writes) PEM, public keys as SubjectPublicKeyInfo
//! PEM (`BEGIN PUBLIC KEY`, what `cosign public-key` and `openssl ec -pubout` write). cosign's own
//! password-encrypted private key format is not read: make keys with `package keygen` or openssl,
//! and `cosign import-key-pair` takes them for cosign.
//!
//! RustCrypto's `p256`/`ecdsa` rather than the sigstore project's `sigstore` crate (0.15): it
//! requires a crypto backend feature, `native-tls` (OpenSSL) or `rustls-tls` (aws-lc-rs), where the
//! binary otherwise has one TLS stack, rustls with ring; its `cosign` feature brings the keyless
//! machinery along (OpenID Connect, a web browser launcher, protobuf specs, a second generation of
//! the RustCrypto crates beside the one kudo-template uses) although only keyed verification can
//! be used here — a minimal program doing one keyed verification builds 357 crates and 11.3 MB with
//! it against 213 crates and 6.1 MB with `oci-client` + `p256` (docs/benchmarks.md, "Binary
//! size"); and its verification reports unsatisfied constraints rather than *why* a signature was
//! refused (no signature, another key, a payload naming another digest), which `install --verify`
//! must say. The format is small and published; what is checked is written out in [`verify`].
//!
//! [`TrustPolicy`] is an enum so that keyless verification (a Fulcio certificate identity and a
//! Rekor inclusion proof) can be added as a variant where those services can be reached.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::error::{KeyError, OciError};
use crate::reference::OciRef;

/// Media type of a signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// Media type of the signature manifest's config (an image config, as cosign writes).
pub const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// A public key signatures are checked against, with the name it is shown by.
#[derive(Clone)]
pub struct TrustedKey {
    /// What messages call it (the file it came from).
    pub name: String,
    key: VerifyingKey,
}

impl fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrustedKey({})", self.describe())
    }
}

impl TrustedKey {
    /// Parses a SubjectPublicKeyInfo PEM P-256 key.
    pub fn from_pem(name: &str, pem: &str) -> Result<TrustedKey, KeyError> {
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
            if pem.contains("PRIVATE KEY") {
                KeyError::PrivateKeyGiven
            } else {
                KeyError::NotPublicKey(e.to_string())
            }
        })?;
        Ok(TrustedKey {
            name: name.to_string(),
            key,
        })
    }

    /// Reads a public key file.
    pub fn load(path: &Path) -> Result<TrustedKey, OciError> {
        read_key(path, TrustedKey::from_pem)
    }

    /// `sha256:` and the first 16 hex digits of the SHA-256 of the key's DER encoding.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.key)
    }

    /// `NAME (FINGERPRINT)`.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.name, self.fingerprint())
    }
}

/// Reads a PEM key file with `parse` (name, text); a refusal is an [`OciError::Key`] naming the
/// file.
fn read_key<T>(path: &Path, parse: impl FnOnce(&str, &str) -> Result<T, KeyError>) -> Result<T, OciError> {
    let pem = std::fs::read_to_string(path).map_err(|e| OciError::io(path, e))?;
    parse(&path.display().to_string(), &pem).map_err(|e| OciError::Key {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn fingerprint(key: &VerifyingKey) -> String {
    let der = key.to_public_key_der().expect("a P-256 key encodes");
    format!("sha256:{}", &hex::encode(Sha256::digest(der.as_bytes()))[..16])
}

/// A private key to sign with.
pub struct PrivateKey {
    /// The file it came from.
    pub name: String,
    key: SigningKey,
}

impl PrivateKey {
    /// Parses a PKCS#8 or SEC1 PEM P-256 private key.
    pub fn from_pem(name: &str, pem: &str) -> Result<PrivateKey, KeyError> {
        let pem = pem.trim();
        if pem.contains("ENCRYPTED SIGSTORE PRIVATE KEY") || pem.contains("ENCRYPTED COSIGN PRIVATE KEY") {
            return Err(KeyError::Encrypted);
        }
        let key = if pem.contains("BEGIN EC PRIVATE KEY") {
            p256::SecretKey::from_sec1_pem(pem)
                .map(SigningKey::from)
                .map_err(|e| e.to_string())
        } else {
            SigningKey::from_pkcs8_pem(pem).map_err(|e| e.to_string())
        };
        let key = key.map_err(KeyError::NotPrivateKey)?;
        Ok(PrivateKey {
            name: name.to_string(),
            key,
        })
    }

    /// Reads a private key file.
    pub fn load(path: &Path) -> Result<PrivateKey, OciError> {
        read_key(path, PrivateKey::from_pem)
    }

    /// A new random key.
    pub fn generate() -> PrivateKey {
        PrivateKey {
            name: "generated".into(),
            key: SigningKey::random(&mut rand_core_06::OsRng),
        }
    }

    /// The PKCS#8 PEM of the private key.
    pub fn private_pem(&self) -> String {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .expect("a P-256 key encodes")
            .to_string()
    }

    /// The SubjectPublicKeyInfo PEM of its public key.
    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 key encodes")
    }

    /// The fingerprint of its public key (as [`TrustedKey::fingerprint`]).
    pub fn fingerprint(&self) -> String {
        fingerprint(self.key.verifying_key())
    }

    /// The base64 DER signature of `payload` (deterministic, RFC 6979).
    pub fn sign(&self, payload: &[u8]) -> String {
        let sig: Signature = self.key.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(sig.to_der().as_bytes())
    }
}

/// What must hold before a pulled package is used.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum TrustPolicy {
    /// Nothing is checked beyond the content digests.
    #[default]
    None,
    /// A cosign keyed signature by one of these keys, for exactly this manifest digest.
    Keys(Vec<TrustedKey>),
}

impl TrustPolicy {
    /// Whether an artifact must carry a signature (and so must come from a registry).
    pub fn requires_signature(&self) -> bool {
        !matches!(self, TrustPolicy::None)
    }
}

/// The outcome of a check under a [`TrustPolicy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verification {
    /// The policy asks for nothing.
    NotRequired,
    /// A signature by this key names the artifact's digest.
    Verified {
        /// The key's name (the file it came from).
        key: String,
        /// The key's fingerprint ([`TrustedKey::fingerprint`]).
        fingerprint: String,
    },
}

/// A signature layer as read from the registry.
#[derive(Clone, Debug)]
pub struct SignatureLayer {
    /// The payload (the layer's content, digest-checked).
    pub payload: Vec<u8>,
    /// The [`SIGNATURE_ANNOTATION`] value, if present.
    pub signature: Option<String>,
}

#[derive(Serialize)]
struct Payload<'a> {
    critical: Critical<'a>,
    optional: Option<()>,
}

#[derive(Serialize)]
struct Critical<'a> {
    identity: Identity<'a>,
    image: Image<'a>,
    #[serde(rename = "type")]
    kind: &'a str,
}

#[derive(Serialize)]
struct Identity<'a> {
    #[serde(rename = "docker-reference")]
    docker_reference: &'a str,
}

#[derive(Serialize)]
struct Image<'a> {
    #[serde(rename = "docker-manifest-digest")]
    digest: &'a str,
}

/// The simple-signing payload for the manifest `digest` of `reference`'s repository.
pub fn payload(reference: &OciRef, digest: &str) -> Vec<u8> {
    let repo = reference.repository_name();
    serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: &repo,
            },
            image: Image { digest },
            kind: PAYLOAD_TYPE,
        },
        optional: None,
    })
    .expect("a payload serialises")
}

/// Checks the signatures of the manifest `digest` (named `reference`) against `keys`: accepted
/// when one layer's signature verifies with one key *and* its payload is a cosign payload naming
/// exactly `digest`. Otherwise the error says why: [`OciError::Unsigned`] (no layers),
/// [`OciError::WrongDigest`] (a trusted key signed another manifest), or [`OciError::Untrusted`]
/// with one line per layer (another key, or payload or signature altered; no or malformed
/// signature; a payload that is not cosign's).
pub fn verify(
    reference: &OciRef,
    digest: &str,
    layers: &[SignatureLayer],
    keys: &[TrustedKey],
) -> Result<Verification, OciError> {
    let shown = reference.with_digest(digest).to_string();
    if layers.is_empty() {
        return Err(OciError::Unsigned {
            reference: shown,
            signature_tag: crate::reference::signature_tag(digest),
        });
    }
    let mut details = Vec::new();
    let mut wrong_digest = None;
    for (i, layer) in layers.iter().enumerate() {
        match check_layer(layer, digest, keys) {
            Ok(key) => {
                return Ok(Verification::Verified {
                    key: key.name.clone(),
                    fingerprint: key.fingerprint(),
                });
            }
            Err(LayerRefusal::OtherDigest { key, signed }) => {
                details.push(format!(
                    "signature {}: by {}, for {signed}",
                    i + 1,
                    key.describe()
                ));
                wrong_digest.get_or_insert((key, signed));
            }
            Err(LayerRefusal::Other(why)) => details.push(format!("signature {}: {why}", i + 1)),
        }
    }
    if let Some((key, signed)) = wrong_digest {
        return Err(OciError::WrongDigest {
            reference: shown,
            key: key.describe(),
            signed,
            expected: digest.to_string(),
        });
    }
    Err(OciError::Untrusted {
        reference: shown,
        keys: keys
            .iter()
            .map(TrustedKey::describe)
            .collect::<Vec<_>>()
            .join(", "),
        details: details.join("; "),
    })
}

enum LayerRefusal<'k> {
    OtherDigest { key: &'k TrustedKey, signed: String },
    Other(String),
}

fn check_layer<'k>(
    layer: &SignatureLayer,
    digest: &str,
    keys: &'k [TrustedKey],
) -> Result<&'k TrustedKey, LayerRefusal<'k>> {
    let other = |s: &str| LayerRefusal::Other(s.to_string());
    let b64 = layer
        .signature
        .as_deref()
        .ok_or_else(|| other("no signature annotation"))?;
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| other("the signature annotation is not base64"))?;
    let sig = DerSignature::try_from(der.as_slice())
        .map_err(|_| other("the signature is not an ASN.1 DER ECDSA signature"))?;
    let key = keys
        .iter()
        .find(|k| k.key.verify(&layer.payload, &sig).is_ok())
        .ok_or_else(|| {
            other(
                "does not verify with the trusted key(s): made with another key, or its payload or \
                 signature was altered",
            )
        })?;
    let v: serde_json::Value =
        serde_json::from_slice(&layer.payload).map_err(|_| other("signed, but the payload is not JSON"))?;
    let critical = &v["critical"];
    if critical["type"].as_str() != Some(PAYLOAD_TYPE) {
        return Err(other(
            "signed, but the payload is not a cosign container image signature",
        ));
    }
    match critical["image"]["docker-manifest-digest"].as_str() {
        Some(d) if d == digest => Ok(key),
        Some(d) => Err(LayerRefusal::OtherDigest {
            key,
            signed: d.to_string(),
        }),
        None => Err(other("signed, but the payload names no docker-manifest-digest")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const E: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn r() -> OciRef {
        OciRef::parse("oci://h:5000/team/demo:0.1.0").unwrap()
    }

    fn trusted(k: &PrivateKey, name: &str) -> TrustedKey {
        TrustedKey::from_pem(name, &k.public_pem()).unwrap()
    }

    fn layer(k: &PrivateKey, payload: &[u8]) -> SignatureLayer {
        SignatureLayer {
            payload: payload.to_vec(),
            signature: Some(k.sign(payload)),
        }
    }

    #[test]
    fn the_payload_is_cosigns() {
        assert_eq!(
            String::from_utf8(payload(&r(), D)).unwrap(),
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"h:5000/team/demo"}},"image":{{"docker-manifest-digest":"{D}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
    }

    #[test]
    fn verification_accepts_only_a_trusted_signature_of_this_digest() {
        let (ours, theirs) = (PrivateKey::generate(), PrivateKey::generate());
        let keys = [trusted(&ours, "ours.pub")];
        let good = layer(&ours, &payload(&r(), D));
        let ok = verify(&r(), D, &[layer(&theirs, &payload(&r(), D)), good.clone()], &keys).unwrap();
        assert_eq!(
            ok,
            Verification::Verified {
                key: "ours.pub".into(),
                fingerprint: ours.fingerprint()
            }
        );

        let mut tampered = good.clone();
        tampered.payload = String::from_utf8(good.payload.clone())
            .unwrap()
            .replace("team", "evil")
            .into_bytes();
        let no_annotation = SignatureLayer {
            payload: good.payload.clone(),
            signature: None,
        };
        let not_cosign = layer(&ours, br#"{"critical":{"type":"something else"}}"#);
        let cases: Vec<(Vec<SignatureLayer>, &str)> = vec![
            (vec![], "is not signed: no cosign signature at sha256-1111"),
            (
                vec![layer(&theirs, &payload(&r(), D))],
                "signature 1: does not verify with the trusted key(s)",
            ),
            (
                vec![tampered],
                "made with another key, or its payload or signature was altered",
            ),
            (vec![no_annotation], "signature 1: no signature annotation"),
            (vec![not_cosign], "not a cosign container image signature"),
            (
                vec![layer(&ours, &payload(&r(), E))],
                "is for another artifact: its payload names sha256:2222",
            ),
        ];
        for (layers, needle) in cases {
            let e = verify(&r(), D, &layers, &keys).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
            assert!(e.contains(&format!("oci://h:5000/team/demo@{D}")), "{e}");
        }
    }

    #[test]
    fn signatures_with_a_high_s_value_verify_as_go_and_openssl_make_them() {
        let k = PrivateKey::generate();
        let p = payload(&r(), D);
        let sig: Signature = k.key.sign(&p);
        let (r_, s) = sig.split_scalars();
        let high = Signature::from_scalars(r_.to_bytes(), (-*s).to_bytes()).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(high.to_der().as_bytes());
        let l = SignatureLayer {
            payload: p,
            signature: Some(b64),
        };
        assert!(verify(&r(), D, &[l], &[trusted(&k, "k")]).is_ok());
    }

    #[test]
    fn keys_in_every_accepted_form() {
        let k = PrivateKey::generate();
        let again = PrivateKey::from_pem("k", &k.private_pem()).unwrap();
        assert_eq!(again.fingerprint(), k.fingerprint());
        assert!(k.fingerprint().starts_with("sha256:") && k.fingerprint().len() == 23);
        let sec1 = p256::SecretKey::from(k.key.as_nonzero_scalar())
            .to_sec1_pem(LineEnding::LF)
            .unwrap();
        assert_eq!(
            PrivateKey::from_pem("k", &sec1).unwrap().fingerprint(),
            k.fingerprint()
        );
        let e = TrustedKey::from_pem("k", &k.private_pem()).unwrap_err();
        assert_eq!(e, crate::KeyError::PrivateKeyGiven);
        assert!(e.to_string().contains("this is a private key"), "{e}");
        let e = PrivateKey::from_pem("k", "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nx\n")
            .err()
            .unwrap();
        assert_eq!(e, crate::KeyError::Encrypted);
        assert!(e.to_string().contains("password-encrypted"), "{e}");
        assert!(PrivateKey::from_pem("k", "garbage").is_err());
        assert!(matches!(
            TrustedKey::from_pem("k", "garbage"),
            Err(crate::KeyError::NotPublicKey(_))
        ));
    }
}
