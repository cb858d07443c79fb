//! Where an OperatorVersion's package came from, recorded on it: a package pulled from an OCI
//! registry annotates its OperatorVersion with the artifact by digest (and, when a signature was
//! verified, the key's fingerprint); see `kudo_repo::Source::operator_version_annotations`.
//!
//! An OperatorVersion is installed once and then reused by name, so a *verified* package whose
//! OperatorVersion already exists is accepted only when that OperatorVersion records the same
//! artifact: otherwise the Instance would run content that was never verified.

use kudo_api::OperatorVersion;
use kudo_repo::Source;
use kudo_repo::oci::SOURCE_ANNOTATION;

use crate::{Error, Result};

/// Adds `source`'s annotations to the OperatorVersion about to be created.
pub(crate) fn annotate(ov: &mut OperatorVersion, source: &Source) {
    let extra = source.operator_version_annotations();
    if extra.is_empty() {
        return;
    }
    ov.metadata.annotations.extend(extra);
}

/// Refuses reusing `existing` for a verified package from another (or an unrecorded) source.
pub(crate) fn check_existing(existing: &OperatorVersion, source: &Source) -> Result<()> {
    let Source::Oci {
        pinned,
        verification: kudo_oci::Verification::Verified { .. },
        ..
    } = source
    else {
        return Ok(());
    };
    let recorded = existing.metadata.annotations.get(SOURCE_ANNOTATION);
    if recorded == Some(pinned) {
        return Ok(());
    }
    let from = recorded.map_or_else(
        || format!("has no {SOURCE_ANNOTATION} annotation"),
        |r| format!("was installed from {r}"),
    );
    Err(Error::Refused(format!(
        "operator version {} already exists and {from}, not from the verified {pinned}: the cluster \
         would run a package that was not verified; delete that OperatorVersion or publish a new version",
        existing.metadata.name
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(annotations: Option<&[(&str, &str)]>) -> OperatorVersion {
        let mut ov: OperatorVersion = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "OperatorVersion",
            "metadata": {"name": "demo-0.1.0"}, "spec": {"operator": {"name": "demo"}, "version": "0.1.0"}
        }))
        .expect("operator version");
        ov.metadata.annotations = annotations
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ov
    }

    fn oci(verified: bool) -> Source {
        Source::Oci {
            requested: "oci://h/demo:0.1.0".into(),
            pinned: "oci://h/demo@sha256:aa".into(),
            verification: if verified {
                kudo_oci::Verification::Verified {
                    key: "k.pub".into(),
                    fingerprint: "sha256:0f".into(),
                }
            } else {
                kudo_oci::Verification::NotRequired
            },
        }
    }

    #[test]
    fn a_verified_package_reuses_only_an_operator_version_of_the_same_artifact() {
        let same = ov(Some(&[(SOURCE_ANNOTATION, "oci://h/demo@sha256:aa")]));
        assert!(check_existing(&same, &oci(true)).is_ok());
        let e = check_existing(&ov(None), &oci(true)).unwrap_err().to_string();
        assert!(
            e.contains("demo-0.1.0 already exists and has no kudo-rs.dev/source"),
            "{e}"
        );
        let other = ov(Some(&[(SOURCE_ANNOTATION, "oci://h/demo@sha256:bb")]));
        let e = check_existing(&other, &oci(true)).unwrap_err().to_string();
        assert!(
            e.contains("was installed from oci://h/demo@sha256:bb, not from the verified"),
            "{e}"
        );
        // Without verification, and for local packages, an existing OperatorVersion is reused.
        assert!(check_existing(&other, &oci(false)).is_ok());
        assert!(check_existing(&ov(None), &Source::Local("./demo".into())).is_ok());
    }

    #[test]
    fn annotations_are_added_to_the_new_operator_version() {
        let mut new = ov(None);
        annotate(&mut new, &oci(true));
        let a = new.metadata.annotations;
        assert_eq!(a[SOURCE_ANNOTATION], "oci://h/demo@sha256:aa");
        assert_eq!(a[kudo_repo::oci::SIGNATURE_ANNOTATION], "cosign key sha256:0f");
        let mut local = ov(None);
        annotate(&mut local, &Source::Local("./demo".into()));
        assert!(local.metadata.annotations.is_empty());
    }
}
