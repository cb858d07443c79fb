//! Packages from OCI registries: an `oci://…` argument, and repositories configured as
//! `oci://HOST/NAMESPACE`, where operator `NAME` is the repository `NAMESPACE/NAME` and its
//! versions are its tags.
//!
//! A repository's tags are read through the registry's tag list; tags that are not versions
//! (`latest`, cosign's `sha256-….sig`) are ignored, and the highest operatorVersion by
//! [`crate::index::cmp_version`] is taken (a tag is the operatorVersion, `+` written `_`).
//! `--operator-version` names the tag; `--app-version` reads the candidates' manifests, newest
//! first, for the appVersion annotation `package push` writes.

use std::collections::BTreeMap;

use kudo_oci::{OciRef, Pulled, Registry, TrustPolicy, Verification};

use crate::error::RepoError;
use crate::fetch::Fetcher;
use crate::index::{VersionFilter, cmp_version, lenient_semver};
use crate::resolve::Source;

/// The annotation recording where an OperatorVersion's package came from: the artifact by digest.
pub const SOURCE_ANNOTATION: &str = "kudo-rs.dev/source";
/// The annotation recording the key whose signature was verified (its fingerprint).
pub const SIGNATURE_ANNOTATION: &str = "kudo-rs.dev/signature";

/// How packages are fetched from registries, and what must hold for them.
#[derive(Clone, Debug, Default)]
pub struct OciSettings {
    /// TLS, credentials, timeouts.
    pub registry: kudo_oci::RegistryOptions,
    /// What a pulled package must satisfy.
    pub policy: TrustPolicy,
}

impl Source {
    /// What an OperatorVersion installed from this source records about it (nothing for local
    /// and index sources).
    pub fn operator_version_annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Source::Oci {
            pinned, verification, ..
        } = self
        {
            out.insert(SOURCE_ANNOTATION.to_string(), pinned.clone());
            if let Verification::Verified { fingerprint, .. } = verification {
                out.insert(
                    SIGNATURE_ANNOTATION.to_string(),
                    format!("cosign key {fingerprint}"),
                );
            }
        }
        out
    }
}

fn oci_error(e: kudo_oci::OciError) -> RepoError {
    RepoError::Oci(Box::new(e))
}

/// Pulls the package at `reference` under the fetcher's settings.
pub(crate) fn pull(reference: &str, fetcher: &Fetcher) -> Result<(kudo_package::Package, Source), RepoError> {
    let r = OciRef::parse(reference).map_err(oci_error)?;
    let settings = fetcher.oci.clone();
    let pulled = kudo_oci::block_on(async move {
        let registry = Registry::new(settings.registry)?;
        registry.pull_package(&r, &settings.policy).await
    })
    .map_err(oci_error)?;
    Ok(into_source(pulled, reference))
}

fn into_source(p: Pulled, requested: &str) -> (kudo_package::Package, Source) {
    let source = Source::Oci {
        requested: requested.to_string(),
        pinned: p.pinned.to_string(),
        verification: p.verification,
    };
    (p.package, source)
}

/// Resolves operator `name` in the OCI repository namespace `base` (`oci://HOST/NAMESPACE`).
pub(crate) fn resolve_in_registry(
    repo_name: &str,
    base: &str,
    name: &str,
    filter: VersionFilter<'_>,
    fetcher: &Fetcher,
) -> Result<(kudo_package::Package, Source), RepoError> {
    let ns = OciRef::parse(base).map_err(oci_error)?;
    let repo = ns.child(name).map_err(oci_error)?;
    let settings = fetcher.oci.clone();
    let (operator_version, app_version) = (
        filter
            .operator_version
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        filter.app_version.filter(|v| !v.is_empty()).map(str::to_string),
    );
    let found = kudo_oci::block_on(async move {
        let registry = Registry::new(settings.registry)?;
        let tags = match registry.list_tags(&repo).await {
            Ok(tags) => tags,
            Err(kudo_oci::OciError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut candidates = version_tags(&tags);
        if let Some(v) = &operator_version {
            let want = kudo_oci::reference::version_tag(v).unwrap_or_default();
            candidates.retain(|t| *t == want);
        }
        for tag in candidates {
            let at = repo.with_tag(&tag);
            if let Some(app) = &app_version {
                let (m, _) = registry.package_manifest(&at).await?;
                if m.app_version.as_deref() != Some(app.as_str()) {
                    continue;
                }
            }
            let pulled = registry.pull_package(&at, &settings.policy).await?;
            return Ok(Some((pulled, at.to_string(), tag)));
        }
        Ok(None)
    })
    .map_err(oci_error)?;
    let Some((pulled, requested, tag)) = found else {
        return Err(not_found(repo_name, name, filter));
    };
    let pkg_version = kudo_oci::reference::version_tag(&pulled.package.operator.operator_version);
    if pulled.package.operator.name != name || pkg_version.as_deref() != Ok(tag.as_str()) {
        return Err(RepoError::Config(format!(
            "{requested} contains {} {}, not operator {name} version {tag}",
            pulled.package.operator.name, pulled.package.operator.operator_version
        )));
    }
    Ok(into_source(pulled, &requested))
}

/// The tags that are versions (`+` written `_`), newest first by [`cmp_version`]: how a registry
/// repository's versions are ordered, here and for an in-cluster OperatorSource's range.
pub fn version_tags(tags: &[String]) -> Vec<String> {
    let mut out: Vec<String> = tags
        .iter()
        .filter(|t| lenient_semver(&t.replace('_', "+")).is_some())
        .cloned()
        .collect();
    out.sort_by(|a, b| cmp_version(&b.replace('_', "+"), &a.replace('_', "+")));
    out
}

fn not_found(repo_name: &str, name: &str, filter: VersionFilter<'_>) -> RepoError {
    let mut wanted = Vec::new();
    if let Some(a) = filter.app_version.filter(|a| !a.is_empty()) {
        wanted.push(format!("app version {a}"));
    }
    if let Some(o) = filter.operator_version.filter(|o| !o.is_empty()) {
        wanted.push(format!("operator version {o}"));
    }
    let what = if wanted.is_empty() {
        String::new()
    } else {
        format!(" with {}", wanted.join(" and "))
    };
    RepoError::NotFound(format!(
        "no operator version found for {name}{what} in repository {repo_name:?}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tags_newest_first_without_other_tags() {
        let tags: Vec<String> = [
            "0.2.0",
            "latest",
            "0.10.0",
            "sha256-ab.sig",
            "1.0.0_build.1",
            "0.9",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(version_tags(&tags), ["1.0.0_build.1", "0.10.0", "0.9", "0.2.0"]);
    }

    #[test]
    fn oci_sources_record_the_digest_and_the_verifying_key() {
        let pinned = "oci://h/r@sha256:00".to_string();
        let s = Source::Oci {
            requested: "oci://h/r:1".into(),
            pinned: pinned.clone(),
            verification: Verification::Verified {
                key: "k.pub".into(),
                fingerprint: "sha256:abcd".into(),
            },
        };
        let a = s.operator_version_annotations();
        assert_eq!(a[SOURCE_ANNOTATION], pinned);
        assert_eq!(a[SIGNATURE_ANNOTATION], "cosign key sha256:abcd");
        assert!(
            Source::Local("x".into())
                .operator_version_annotations()
                .is_empty()
        );
    }
}
