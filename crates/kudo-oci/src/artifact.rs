//! The OCI artifact of a package: what `push` writes and what `pull` accepts.
//!
//! An OCI image manifest (`application/vnd.oci.image.manifest.v1+json`, schema 2) with
//!
//! * `artifactType` [`ARTIFACT_TYPE`];
//! * a config blob of media type [`CONFIG_MEDIA_TYPE`]: JSON naming the package (`name`,
//!   `operatorVersion`, and `appVersion`, `kudoVersion`, `kubernetesVersion` when set);
//! * exactly one layer of media type [`LAYER_MEDIA_TYPE`]: the reproducible `package create`
//!   tarball, byte for byte, annotated `org.opencontainers.image.title: <name>-<version>.tgz`
//!   (the file name `oras pull` writes);
//! * annotations `org.opencontainers.image.title` (the operator name), `.version` (its
//!   operatorVersion), `.created`, `.description` and `.source` (operator.yaml's `url`) when
//!   set, and [`APP_VERSION_ANNOTATION`] when the package has an appVersion.
//!
//! Everything is a function of the package, `created` included (a package has no date: the Unix
//! epoch, or `$SOURCE_DATE_EPOCH` when set, the reproducible-builds convention), and the JSON is
//! written with a fixed field order, so the same package pushed twice has the same digest.
//!
//! Pulling also accepts what other tools write for the same media types: a manifest without
//! `artifactType`, and one whose config is the OCI empty descriptor with `artifactType`
//! [`ARTIFACT_TYPE`] (`oras push --artifact-type`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{EpochError, OciError};
use crate::reference::{OciRef, check_digest};

/// `artifactType` of a package manifest.
pub const ARTIFACT_TYPE: &str = "application/vnd.kudo.package.v1";
/// Media type of the config blob.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.kudo.package.config.v1+json";
/// Media type of the one layer: the package tarball.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.kudo.package.content.v1.tar+gzip";
/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker's manifest list media type.
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker's image manifest media type.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// The OCI empty descriptor's media type (config of artifacts without a config).
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The manifest annotation holding the package's appVersion.
pub const APP_VERSION_ANNOTATION: &str = "dev.kudo.package.app-version";
/// The standard annotation names used.
pub const TITLE: &str = "org.opencontainers.image.title";
/// `org.opencontainers.image.version`.
pub const VERSION: &str = "org.opencontainers.image.version";
/// `org.opencontainers.image.created`.
pub const CREATED: &str = "org.opencontainers.image.created";
/// `org.opencontainers.image.source`.
pub const SOURCE: &str = "org.opencontainers.image.source";
/// `org.opencontainers.image.description`.
pub const DESCRIPTION: &str = "org.opencontainers.image.description";

/// Media types a manifest request accepts, so an index or another kind of manifest comes back
/// as itself and can be named in the error.
pub const ACCEPTED_MANIFESTS: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// A content descriptor (media type, digest, size, annotations).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// `mediaType` of the content, e.g. [`LAYER_MEDIA_TYPE`].
    pub media_type: String,
    /// `digest`: `sha256:<hex>` of the content's bytes, by which the registry stores the blob.
    pub digest: String,
    /// `size` of the content in bytes.
    pub size: u64,
    /// `annotations`, e.g. `org.opencontainers.image.title` on the package layer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The descriptor of `bytes` with `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: media_type.to_string(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }
}

/// An OCI image manifest, fields in the order they are written.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// `schemaVersion`, always 2.
    pub schema_version: u32,
    /// `mediaType` of the manifest itself ([`OCI_MANIFEST`]); optional on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// `artifactType`, [`ARTIFACT_TYPE`] for a package; absent in manifests some tools write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob: the JSON naming the package, or the OCI empty descriptor.
    pub config: Descriptor,
    /// The layers; a package has exactly one, its `package create` tarball.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Manifest annotations: title, version, created, description, source, app version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// The manifest's bytes as pushed (fixed field order, no whitespace).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest serialises")
    }
}

/// The config blob.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackageConfig<'a> {
    name: &'a str,
    operator_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    app_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kudo_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kubernetes_version: &'a str,
}

/// The three blobs of a package artifact, ready to push.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// The config blob.
    pub config: Vec<u8>,
    /// The layer: the package tarball.
    pub layer: Vec<u8>,
    /// The manifest.
    pub manifest: Manifest,
}

impl Artifact {
    /// Builds the artifact of `pkg` (its `package create` tarball) stamped `created` (RFC 3339).
    pub fn build(pkg: &kudo_package::Package, created: &str) -> Result<Artifact, kudo_package::PackageError> {
        let layer = kudo_package::create::tarball_bytes(pkg)?;
        let o = &pkg.operator;
        let config = serde_json::to_vec(&PackageConfig {
            name: &o.name,
            operator_version: &o.operator_version,
            app_version: &o.app_version,
            kudo_version: &o.kudo_version,
            kubernetes_version: &o.kubernetes_version,
        })
        .expect("the config serialises");
        let mut layer_desc = Descriptor::of(LAYER_MEDIA_TYPE, &layer);
        layer_desc.annotations.insert(TITLE.into(), pkg.tarball_name());
        let mut annotations = BTreeMap::from([
            (TITLE.to_string(), o.name.clone()),
            (VERSION.to_string(), o.operator_version.clone()),
            (CREATED.to_string(), created.to_string()),
        ]);
        for (key, value) in [
            (SOURCE, &o.url),
            (DESCRIPTION, &o.description),
            (APP_VERSION_ANNOTATION, &o.app_version),
        ] {
            if !value.trim().is_empty() {
                annotations.insert(key.to_string(), value.clone());
            }
        }
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            artifact_type: Some(ARTIFACT_TYPE.into()),
            config: Descriptor::of(CONFIG_MEDIA_TYPE, &config),
            layers: vec![layer_desc],
            annotations,
        };
        Ok(Artifact {
            config,
            layer,
            manifest,
        })
    }

    /// The manifest's digest: the artifact's identity.
    pub fn digest(&self) -> String {
        sha256_digest(&self.manifest.to_bytes())
    }
}

/// `created` for a push: `$SOURCE_DATE_EPOCH` (seconds) when set, else the Unix epoch, in RFC 3339.
pub fn created_timestamp() -> Result<String, EpochError> {
    created_from(std::env::var("SOURCE_DATE_EPOCH").ok().as_deref())
}

/// `created` for a `SOURCE_DATE_EPOCH` value (none or blank: the epoch).
fn created_from(source_date_epoch: Option<&str>) -> Result<String, EpochError> {
    let secs = match source_date_epoch.map(str::trim) {
        Some(v) if !v.is_empty() => v
            .parse::<i64>()
            .map_err(|_| EpochError::NotANumber(v.to_string()))?,
        _ => 0,
    };
    let t = chrono::DateTime::from_timestamp(secs, 0).ok_or(EpochError::OutOfRange(secs))?;
    Ok(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What a pulled package manifest says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageManifest {
    /// The tarball layer.
    pub layer: Descriptor,
    /// `org.opencontainers.image.version`, when annotated.
    pub version: Option<String>,
    /// [`APP_VERSION_ANNOTATION`], when annotated.
    pub app_version: Option<String>,
}

/// Checks that `raw` is a package manifest and returns its layer; the error says what it is
/// instead (an index, a container image, another layer count or media type).
pub fn parse_package_manifest(
    raw: &[u8],
    reference: &OciRef,
    max_layer: u64,
) -> Result<PackageManifest, OciError> {
    let not = |m: String| OciError::not_a_package(reference, m);
    let value: serde_json::Value =
        serde_json::from_slice(raw).map_err(|e| not(format!("its manifest is not JSON: {e}")))?;
    let media_type = value.get("mediaType").and_then(|m| m.as_str()).unwrap_or("");
    if media_type == OCI_INDEX || media_type == DOCKER_LIST || value.get("manifests").is_some() {
        let n = value
            .get("manifests")
            .and_then(|m| m.as_array())
            .map_or(0, Vec::len);
        return Err(not(format!(
            "it is an image index (manifest list, {media_type:?}) of {n} manifest(s), not an image \
             manifest; a package is a single manifest"
        )));
    }
    let m: Manifest =
        serde_json::from_value(value).map_err(|e| not(format!("its manifest is malformed: {e}")))?;
    if m.schema_version != 2 {
        return Err(not(format!(
            "its manifest has schemaVersion {}, not 2",
            m.schema_version
        )));
    }
    if let Some(mt) = m.media_type.as_deref().filter(|mt| *mt != OCI_MANIFEST) {
        return Err(not(format!(
            "its manifest media type is {mt}, not {OCI_MANIFEST}"
        )));
    }
    check_type(&m).map_err(not)?;
    let layer = match m.layers.as_slice() {
        [l] if l.media_type == LAYER_MEDIA_TYPE => l.clone(),
        [l] => {
            return Err(not(format!(
                "its layer has media type {}, not {LAYER_MEDIA_TYPE}",
                l.media_type
            )));
        }
        ls => {
            return Err(not(format!(
                "it has {} layers; a package has exactly one, of media type {LAYER_MEDIA_TYPE}",
                ls.len()
            )));
        }
    };
    check_digest(&layer.digest).map_err(|e| not(format!("its layer: {e}")))?;
    if layer.size > max_layer {
        return Err(OciError::TooLarge {
            reference: reference.to_string(),
            what: "package layer".into(),
            size: layer.size,
            limit: max_layer,
        });
    }
    Ok(PackageManifest {
        layer,
        version: m.annotations.get(VERSION).cloned(),
        app_version: m.annotations.get(APP_VERSION_ANNOTATION).cloned(),
    })
}

/// The artifact type: our config media type, or the empty config with our `artifactType`.
fn check_type(m: &Manifest) -> Result<(), String> {
    let artifact = m.artifact_type.as_deref();
    if let Some(a) = artifact.filter(|a| *a != ARTIFACT_TYPE) {
        return Err(format!("its artifactType is {a}, not {ARTIFACT_TYPE}"));
    }
    let config = m.config.media_type.as_str();
    if config == CONFIG_MEDIA_TYPE || (config == EMPTY_MEDIA_TYPE && artifact == Some(ARTIFACT_TYPE)) {
        return Ok(());
    }
    Err(format!(
        "its config media type is {config}, not {CONFIG_MEDIA_TYPE} (a container image or another \
         kind of artifact?)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(version: &str, url: &str) -> kudo_package::Package {
        let op = format!(
            "apiVersion: kudo.dev/v1beta1\nname: demo\noperatorVersion: {version}\nappVersion: 1.2.3\n\
             url: {url}\ntasks: []\nplans: {{}}\n"
        );
        let files = BTreeMap::from([
            ("operator.yaml".to_string(), op.into_bytes()),
            (
                "params.yaml".to_string(),
                b"apiVersion: kudo.dev/v1beta1\nparameters: []\n".to_vec(),
            ),
        ]);
        kudo_package::reader::from_files(files, "test").unwrap()
    }

    fn reference() -> OciRef {
        OciRef::parse("oci://h/demo:0.1.0").unwrap()
    }

    #[test]
    fn the_artifact_is_a_function_of_the_package() {
        let a = Artifact::build(
            &package("0.1.0", "https://example.org/demo"),
            "1970-01-01T00:00:00Z",
        )
        .unwrap();
        let b = Artifact::build(
            &package("0.1.0", "https://example.org/demo"),
            "1970-01-01T00:00:00Z",
        )
        .unwrap();
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.manifest.to_bytes(), b.manifest.to_bytes());
        let c = Artifact::build(
            &package("0.1.1", "https://example.org/demo"),
            "1970-01-01T00:00:00Z",
        )
        .unwrap();
        assert_ne!(a.digest(), c.digest());
        let m: serde_json::Value = serde_json::from_slice(&a.manifest.to_bytes()).unwrap();
        assert_eq!(m["artifactType"], ARTIFACT_TYPE);
        assert_eq!(m["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        assert_eq!(m["layers"][0]["annotations"][TITLE], "demo-1.2.3_0.1.0.tgz");
        assert_eq!(m["annotations"][VERSION], "0.1.0");
        assert_eq!(m["annotations"][SOURCE], "https://example.org/demo");
        assert_eq!(m["annotations"][APP_VERSION_ANNOTATION], "1.2.3");
        assert_eq!(m["annotations"][CREATED], "1970-01-01T00:00:00Z");
        let config: serde_json::Value = serde_json::from_slice(&a.config).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"name": "demo", "operatorVersion": "0.1.0", "appVersion": "1.2.3"})
        );
        // The layer is exactly the `package create` tarball.
        let pkg = package("0.1.0", "https://example.org/demo");
        assert_eq!(a.layer, kudo_package::create::tarball_bytes(&pkg).unwrap());
        let parsed = parse_package_manifest(&a.manifest.to_bytes(), &reference(), 1 << 20).unwrap();
        assert_eq!(parsed.layer, a.manifest.layers[0]);
        assert_eq!(parsed.app_version.as_deref(), Some("1.2.3"));
    }

    #[test]
    fn manifests_that_are_not_packages_are_named() {
        let a = Artifact::build(&package("0.1.0", ""), "1970-01-01T00:00:00Z").unwrap();
        let good = serde_json::to_value(&a.manifest).unwrap();
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            f(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"<html>".to_vec(), "its manifest is not JSON"),
            (
                br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{}]}"#
                    .to_vec(),
                "it is an image index (manifest list, \"application/vnd.oci.image.index.v1+json\") of 1",
            ),
            (
                with(&|v| {
                    v["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
                    v.as_object_mut().unwrap().remove("artifactType");
                }),
                "its config media type is application/vnd.oci.image.config.v1+json, not",
            ),
            (with(&|v| v["artifactType"] = "application/x-other".into()), "its artifactType is"),
            (
                with(&|v| v["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip".into()),
                "its layer has media type application/vnd.oci.image.layer.v1.tar+gzip, not",
            ),
            (with(&|v| v["layers"] = serde_json::json!([])), "it has 0 layers"),
            (with(&|v| v["schemaVersion"] = 1.into()), "schemaVersion 1"),
            (with(&|v| v["layers"][0]["digest"] = "sha256:zz".into()), "its layer: digest"),
            (with(&|v| v["layers"][0]["size"] = (64u64 << 20).into()), "more than the limit"),
        ];
        for (raw, needle) in cases {
            let e = parse_package_manifest(&raw, &reference(), 16 << 20)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(needle) && e.contains("oci://h/demo:0.1.0"),
                "{needle}: {e}"
            );
        }
        // What oras writes: the empty config with our artifactType.
        let oras = with(&|v| {
            v["config"] = serde_json::json!({"mediaType": EMPTY_MEDIA_TYPE, "digest":
                "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2});
        });
        assert!(parse_package_manifest(&oras, &reference(), 16 << 20).is_ok());
    }

    #[test]
    fn created_is_the_epoch_unless_source_date_epoch_says_otherwise() {
        assert_eq!(created_from(None).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(created_from(Some(" ")).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(created_from(Some("1700000000")).unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(
            created_from(Some("yesterday")).unwrap_err().to_string(),
            "SOURCE_DATE_EPOCH=\"yesterday\" is not a number of seconds"
        );
    }
}
