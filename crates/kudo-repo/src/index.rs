//! The `index.yaml` of an operator repository (KUDO's Helm-like index format).
//!
//! Field names and order follow what KUDO writes (keys sorted, as Go's YAML-through-JSON marshaller
//! does), so an index we write reads back in KUDO and vice versa. Entries of one operator are kept
//! sorted newest first so "the latest" is always the first entry that matches.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;

use kudo_api::Maintainer;
use kudo_package::lenient::de as lenient;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::RepoError;

/// The only index format version there is.
pub const INDEX_API_VERSION: &str = "v1";
/// File name of the index inside a repository.
pub const INDEX_FILE: &str = "index.yaml";
/// Base URL used by `repo index` when none is given (KUDO's default).
pub const DEFAULT_INDEX_URL: &str = "http://localhost/";

/// One published version of an operator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageVersion {
    /// `appVersion` of the package; empty when it declares none.
    #[serde(
        default,
        deserialize_with = "lenient::string_keeping_numbers",
        skip_serializing_if = "String::is_empty"
    )]
    pub app_version: String,
    /// `description` from the package's `operator.yaml`.
    #[serde(
        default,
        deserialize_with = "lenient::string_keeping_numbers",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    /// sha256 (hex) of the tarball; empty in very old indexes, in which case nothing is verified.
    #[serde(
        default,
        deserialize_with = "lenient::string_keeping_numbers",
        skip_serializing_if = "String::is_empty"
    )]
    pub digest: String,
    /// `maintainers` from the package's `operator.yaml`.
    #[serde(
        default,
        deserialize_with = "lenient::maintainers",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub maintainers: Vec<Maintainer>,
    /// The operator's name; filled from the entry's key when absent.
    #[serde(default, deserialize_with = "lenient::string_keeping_numbers")]
    pub name: String,
    /// `operatorVersion` of the package.
    #[serde(default, deserialize_with = "lenient::string_keeping_numbers")]
    pub operator_version: String,
    /// Withdrawn versions stay listed (indexes are append-only) but are never resolved.
    #[serde(
        default,
        deserialize_with = "lenient::or_default",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub removed: bool,
    /// Download locations, tried in order; relative ones are resolved against the repository URL.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub urls: Vec<String>,
}

impl PackageVersion {
    /// The entry `repo index` writes for a package read from a tarball.
    pub fn from_package(pkg: &kudo_package::Package, digest: String, url: String) -> PackageVersion {
        let o = &pkg.operator;
        PackageVersion {
            app_version: o.app_version.clone(),
            description: o.description.clone(),
            digest,
            maintainers: o.maintainers.clone(),
            name: o.name.clone(),
            operator_version: o.operator_version.clone(),
            removed: false,
            urls: vec![url],
        }
    }

    /// True when both name the same package (same name, app version and operator version).
    pub fn same_version(&self, other: &PackageVersion) -> bool {
        self.name == other.name
            && self.app_version == other.app_version
            && self.operator_version == other.operator_version
    }

    /// `appVersion_operatorVersion`, or the operator version alone, as in tarball names.
    pub fn version_label(&self) -> String {
        if self.app_version.is_empty() {
            self.operator_version.clone()
        } else {
            format!("{}_{}", self.app_version, self.operator_version)
        }
    }
}

/// A repository index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexFile {
    /// `apiVersion` of the index file ([`INDEX_API_VERSION`] when written); required.
    #[serde(default, deserialize_with = "lenient::string_keeping_numbers")]
    pub api_version: String,
    /// The published versions, by operator name.
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub entries: BTreeMap<String, Vec<PackageVersion>>,
    /// RFC 3339 time the index was written.
    #[serde(
        default,
        deserialize_with = "lenient::opt_string_keeping_numbers",
        skip_serializing_if = "Option::is_none"
    )]
    pub generated: Option<String>,
}

/// Filters of a lookup; `None` or an empty string matches anything.
#[derive(Clone, Copy, Debug, Default)]
pub struct VersionFilter<'a> {
    /// `--app-version`: the wanted `appVersion`.
    pub app_version: Option<&'a str>,
    /// `--operator-version`: the wanted `operatorVersion`.
    pub operator_version: Option<&'a str>,
}

impl VersionFilter<'_> {
    fn matches(&self, pv: &PackageVersion) -> bool {
        let ok = |want: Option<&str>, have: &str| want.is_none_or(|w| w.is_empty() || w == have);
        ok(self.app_version, &pv.app_version) && ok(self.operator_version, &pv.operator_version)
    }
}

impl IndexFile {
    /// An empty index stamped with `generated`.
    pub fn new(generated: Option<String>) -> IndexFile {
        IndexFile {
            api_version: INDEX_API_VERSION.into(),
            entries: BTreeMap::new(),
            generated,
        }
    }

    /// Parses and validates an index, then sorts it. `what` names the source in errors.
    pub fn parse(data: &[u8], what: &str) -> Result<IndexFile, RepoError> {
        let text = std::str::from_utf8(data).map_err(|_| RepoError::Parse {
            what: what.into(),
            message: "not UTF-8 text".into(),
        })?;
        let mut index: IndexFile =
            serde_saphyr::from_str_with_options(text, kudo_template::data::go_yaml_options()).map_err(
                |e| RepoError::Parse {
                    what: what.into(),
                    message: kudo_template::data::yaml_error_message(&e),
                },
            )?;
        if index.api_version.is_empty() {
            return Err(RepoError::Parse {
                what: what.into(),
                message: "no API version specified".into(),
            });
        }
        for (name, versions) in &mut index.entries {
            for pv in versions.iter_mut() {
                if pv.name.is_empty() {
                    pv.name = name.clone();
                }
                if pv.operator_version.is_empty() {
                    return Err(RepoError::Parse {
                        what: what.into(),
                        message: format!("an entry of operator {name} has no operatorVersion"),
                    });
                }
            }
        }
        index.sort();
        Ok(index)
    }

    /// Serialises (sorted first, so the file is canonical), every mapping's keys in order as Go's
    /// marshaller writes them (a maintainer's `email` before its `name`).
    pub fn to_yaml(&self) -> Result<String, RepoError> {
        let mut sorted = self.clone();
        sorted.sort();
        let failed = |message: String| RepoError::Parse {
            what: "index".into(),
            message,
        };
        let value = serde_json::to_value(&sorted).map_err(|e| failed(e.to_string()))?;
        serde_saphyr::to_string(&sorted_keys(value)).map_err(|e| failed(e.to_string()))
    }

    /// Sorts every operator's versions newest first (see [`compare_versions`]).
    pub fn sort(&mut self) {
        for versions in self.entries.values_mut() {
            versions.sort_by(compare_versions);
        }
    }

    /// Adds an entry; refuses a second entry with the same name, app and operator version.
    pub fn add(&mut self, pv: PackageVersion) -> Result<(), RepoError> {
        if pv.operator_version.is_empty() {
            return Err(RepoError::Config(format!(
                "operator '{}' is missing an operatorVersion",
                pv.name
            )));
        }
        let versions = self.entries.entry(pv.name.clone()).or_default();
        if versions.iter().any(|v| v.same_version(&pv)) {
            return Err(RepoError::Config(format!(
                "operator '{}' version {} already exists",
                pv.name,
                pv.version_label()
            )));
        }
        versions.push(pv);
        versions.sort_by(compare_versions);
        Ok(())
    }

    /// Adds every entry of `other` that this index does not already have; returns how many.
    pub fn merge(&mut self, other: &IndexFile) -> usize {
        let mut added = 0;
        for versions in other.entries.values() {
            for pv in versions {
                if self.add(pv.clone()).is_ok() {
                    added += 1;
                }
            }
        }
        added
    }

    /// The newest non-removed version of `name` matching `filter`.
    pub fn find(&self, name: &str, filter: VersionFilter<'_>) -> Result<&PackageVersion, RepoError> {
        let versions = self
            .entries
            .get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| RepoError::NotFound(format!("no operator found for: {name}")))?;
        versions
            .iter()
            .filter(|pv| !pv.removed)
            .find(|pv| filter.matches(pv))
            .ok_or_else(|| {
                let mut wanted = Vec::new();
                if let Some(a) = filter.app_version.filter(|a| !a.is_empty()) {
                    wanted.push(format!("app version {a}"));
                }
                if let Some(o) = filter.operator_version.filter(|o| !o.is_empty()) {
                    wanted.push(format!("operator version {o}"));
                }
                if wanted.is_empty() {
                    RepoError::NotFound(format!("no operator version found for {name}"))
                } else {
                    RepoError::NotFound(format!(
                        "no operator version found for {name} with {}",
                        wanted.join(" and ")
                    ))
                }
            })
    }

    /// Operators whose name contains `criteria`: the newest version of each, or every version with
    /// `all_versions`. Ordered by name, then newest first. Removed versions are left out.
    pub fn search(&self, criteria: &str, all_versions: bool) -> Vec<&PackageVersion> {
        let mut found = Vec::new();
        for (name, versions) in &self.entries {
            if !name.contains(criteria) {
                continue;
            }
            let mut live = versions.iter().filter(|pv| !pv.removed);
            if all_versions {
                found.extend(live);
            } else if let Some(first) = live.next() {
                found.push(first);
            }
        }
        found
    }

    /// Builds the index of every `*.tgz` directly inside `dir`. Each URL is `base_url` (default
    /// [`DEFAULT_INDEX_URL`]) followed by the tarball's file name. Tarballs that cannot be read and
    /// duplicate versions are skipped and reported in the returned warnings, as KUDO does.
    pub fn from_directory(
        dir: &Path,
        base_url: Option<&str>,
        generated: Option<String>,
    ) -> Result<(IndexFile, Vec<String>), RepoError> {
        let mut archives = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| RepoError::io(dir, e))? {
            let entry = entry.map_err(|e| RepoError::io(dir, e))?;
            let path = entry.path();
            if path.is_file() && path.extension().is_some_and(|e| e == "tgz") {
                archives.push(path);
            }
        }
        if archives.is_empty() {
            return Err(RepoError::NotFound(format!(
                "no packages discovered in {}",
                dir.display()
            )));
        }
        archives.sort();
        let mut base = base_url
            .filter(|u| !u.is_empty())
            .unwrap_or(DEFAULT_INDEX_URL)
            .to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        let mut index = IndexFile::new(generated);
        let mut warnings = Vec::new();
        for path in archives {
            let file_name = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let meta = std::fs::metadata(&path).map_err(|e| RepoError::io(&path, e))?;
            if meta.len() > crate::fetch::DEFAULT_MAX_PACKAGE_BYTES {
                warnings.push(format!(
                    "{file_name}: larger than {} bytes, skipped",
                    crate::fetch::DEFAULT_MAX_PACKAGE_BYTES
                ));
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|e| RepoError::io(&path, e))?;
            let pkg = match kudo_package::reader::read_tgz(bytes.as_slice(), &path.display().to_string()) {
                Ok(p) => p,
                Err(e) => {
                    warnings.push(format!("{file_name}: {e}, skipped"));
                    continue;
                }
            };
            let pv = PackageVersion::from_package(&pkg, sha256_hex(&bytes), format!("{base}{file_name}"));
            if let Err(e) = index.add(pv) {
                warnings.push(format!("{file_name}: {e}, skipped"));
            }
        }
        Ok((index, warnings))
    }
}

/// Hex sha256, the digest format of `index.yaml`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Checks `data` against an index digest; an empty expected digest accepts anything (old indexes
/// carried none).
pub fn verify_digest(data: &[u8], expected: &str, url: &str) -> Result<(), RepoError> {
    if expected.is_empty() {
        return Ok(());
    }
    let actual = sha256_hex(data);
    if actual.eq_ignore_ascii_case(expected.trim()) {
        Ok(())
    } else {
        Err(RepoError::Digest {
            url: url.into(),
            expected: expected.into(),
            actual,
        })
    }
}

/// Semver as KUDO's semver library reads it: an optional `v`, and missing minor/patch parts
/// count as 0 (`1.2` is `1.2.0`).
pub fn lenient_semver(s: &str) -> Option<semver::Version> {
    let s = s.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    if let Ok(v) = semver::Version::parse(s) {
        return Some(v);
    }
    // Split off pre-release/build, pad the numeric core to three parts.
    let cut = s.find(['-', '+']).unwrap_or(s.len());
    let (core, rest) = s.split_at(cut);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let mut padded: Vec<&str> = parts.clone();
    while padded.len() < 3 {
        padded.push("0");
    }
    semver::Version::parse(&format!("{}{rest}", padded.join("."))).ok()
}

fn compare_semver(a: &str, b: &str) -> Ordering {
    // Descending: greater versions first; unparsable ones after all parsable ones.
    match (lenient_semver(a), lenient_semver(b)) {
        (Some(x), Some(y)) => y.cmp_precedence(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Ascending order of two version strings by KUDO's lenient semver ([`lenient_semver`]); an
/// unparsable version sorts below every parsable one. `10.5` < `10.10`.
pub fn cmp_version(a: &str, b: &str) -> Ordering {
    compare_semver(b, a)
}

/// KUDO's order of package versions, ascending: by `appVersion`, then by `operatorVersion`
/// (each by [`cmp_version`]). The newest is the greatest; the one rule for the repository index,
/// `install --in-cluster` and anything else that picks "the latest".
pub fn cmp_app_then_operator(a: (&str, &str), b: (&str, &str)) -> Ordering {
    cmp_version(a.0, b.0).then_with(|| cmp_version(a.1, b.1))
}

/// The index order: newest first ([`cmp_app_then_operator`] reversed).
pub fn compare_versions(a: &PackageVersion, b: &PackageVersion) -> Ordering {
    cmp_app_then_operator(
        (&b.app_version, &b.operator_version),
        (&a.app_version, &a.operator_version),
    )
}

/// `v` with the keys of every mapping in it sorted.
fn sorted_keys(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted_keys(v))).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(name: &str, app: &str, ov: &str) -> PackageVersion {
        PackageVersion {
            name: name.into(),
            app_version: app.into(),
            operator_version: ov.into(),
            urls: vec![format!("http://localhost/{name}.tgz")],
            ..Default::default()
        }
    }

    const SAMPLE: &str = r#"apiVersion: v1
entries:
  mysql:
  - appVersion: "5.7"
    digest: 0123
    maintainers:
    - email: a@example.org
      name: A
    name: mysql
    operatorVersion: 0.1.0
    urls:
    - https://example.org/mysql-5.7_0.1.0.tgz
  - appVersion: "8.0"
    name: mysql
    operatorVersion: 0.2.0
    urls:
    - https://example.org/mysql-8.0_0.2.0.tgz
  - appVersion: "8.0"
    name: mysql
    operatorVersion: 0.10.0
    removed: true
    urls:
    - https://example.org/mysql-8.0_0.10.0.tgz
  kafka:
  - name: kafka
    operatorVersion: 1.0
    urls: [kafka-1.0.tgz]
generated: "2019-09-12T15:04:34.675941-05:00"
"#;

    #[test]
    fn parse_sorts_newest_first_by_app_then_operator_version() {
        let idx = IndexFile::parse(SAMPLE.as_bytes(), "sample").unwrap();
        let order: Vec<_> = idx.entries["mysql"].iter().map(|p| p.version_label()).collect();
        assert_eq!(order, ["8.0_0.10.0", "8.0_0.2.0", "5.7_0.1.0"]);
        assert_eq!(idx.entries["kafka"][0].operator_version, "1.0");
        assert_eq!(idx.entries["mysql"][2].maintainers[0].email, "a@example.org");
        assert_eq!(idx.generated.as_deref(), Some("2019-09-12T15:04:34.675941-05:00"));
    }

    #[test]
    fn unparsable_versions_sort_last() {
        let mut idx = IndexFile::new(None);
        for (a, o) in [
            ("latest", "1.0.0"),
            ("2.0", "0.1.0"),
            ("", "0.3.0"),
            ("2.0", "garbage"),
            ("2.0", "0.9.0"),
        ] {
            idx.add(pv("x", a, o)).unwrap();
        }
        let order: Vec<_> = idx.entries["x"].iter().map(|p| p.version_label()).collect();
        // "latest" and "" are both unparsable app versions, so the operator version decides.
        assert_eq!(
            order,
            ["2.0_0.9.0", "2.0_0.1.0", "2.0_garbage", "latest_1.0.0", "0.3.0"]
        );
    }

    #[test]
    fn missing_api_version_or_operator_version_is_rejected() {
        let e = IndexFile::parse(b"entries: {}\n", "x").unwrap_err();
        assert!(e.to_string().contains("no API version specified"), "{e}");
        let e = IndexFile::parse(b"apiVersion: v1\nentries:\n  a:\n  - name: a\n", "x").unwrap_err();
        assert!(e.to_string().contains("has no operatorVersion"), "{e}");
        assert!(IndexFile::parse(b"apiVersion: [v1\n", "x").is_err());
        assert!(IndexFile::parse(&[0xff, 0xfe], "x").is_err());
    }

    #[test]
    fn serialise_round_trips_with_kudo_field_names() {
        let idx = IndexFile::parse(SAMPLE.as_bytes(), "sample").unwrap();
        let text = idx.to_yaml().unwrap();
        for key in [
            "apiVersion: v1",
            "operatorVersion:",
            "appVersion:",
            "urls:",
            "removed: true",
            "digest:",
            "generated:",
        ] {
            assert!(text.contains(key), "{key} missing in\n{text}");
        }
        assert!(!text.contains("removed: false"), "{text}");
        assert_eq!(IndexFile::parse(text.as_bytes(), "round trip").unwrap(), idx);
    }

    #[test]
    fn maintainers_are_read_as_operator_yaml_reads_them_and_written_email_first() {
        let text = "apiVersion: v1\nentries:\n  a:\n  - operatorVersion: 1.0\n    maintainers:\n    \
                    - name: 7\n      email: null\n    - name: B\n      email: b@example.org\n";
        let idx = IndexFile::parse(text.as_bytes(), "t").unwrap();
        let pv = &idx.entries["a"][0];
        assert_eq!(pv.operator_version, "1.0", "index numbers are kept as decoded");
        assert_eq!(
            pv.maintainers[0],
            Maintainer {
                name: "7".into(),
                email: String::new()
            }
        );
        let out = idx.to_yaml().unwrap();
        assert!(out.contains("  - email: b@example.org\n      name: B\n"), "{out}");
        assert!(
            out.contains("  - name: \"7\"\n") || out.contains("  - name: '7'\n"),
            "{out}"
        );
    }

    #[test]
    fn find_honours_filters_and_skips_removed() {
        let idx = IndexFile::parse(SAMPLE.as_bytes(), "sample").unwrap();
        let any = VersionFilter::default();
        assert_eq!(idx.find("mysql", any).unwrap().operator_version, "0.2.0");
        let f = VersionFilter {
            app_version: Some("5.7"),
            operator_version: None,
        };
        assert_eq!(idx.find("mysql", f).unwrap().operator_version, "0.1.0");
        let f = VersionFilter {
            app_version: Some(""),
            operator_version: Some("0.1.0"),
        };
        assert_eq!(idx.find("mysql", f).unwrap().app_version, "5.7");
        let f = VersionFilter {
            app_version: Some("8.0"),
            operator_version: Some("0.10.0"),
        };
        let e = idx.find("mysql", f).unwrap_err().to_string();
        assert_eq!(
            e,
            "no operator version found for mysql with app version 8.0 and operator version 0.10.0"
        );
        assert_eq!(
            idx.find("nope", any).unwrap_err().to_string(),
            "no operator found for: nope"
        );
    }

    #[test]
    fn add_rejects_duplicates_and_merge_adds_only_new() {
        let mut a = IndexFile::new(None);
        a.add(pv("x", "1", "0.1.0")).unwrap();
        let e = a.add(pv("x", "1", "0.1.0")).unwrap_err().to_string();
        assert_eq!(e, "operator 'x' version 1_0.1.0 already exists");
        let mut b = IndexFile::new(None);
        b.add(pv("x", "1", "0.1.0")).unwrap();
        b.add(pv("x", "1", "0.2.0")).unwrap();
        b.add(pv("y", "", "1.0.0")).unwrap();
        assert_eq!(a.merge(&b), 2);
        assert_eq!(a.entries["x"].len(), 2);
        assert_eq!(a.entries["x"][0].operator_version, "0.2.0");
    }

    #[test]
    fn search_is_a_substring_match() {
        let idx = IndexFile::parse(SAMPLE.as_bytes(), "sample").unwrap();
        let names: Vec<_> = idx
            .search("sq", false)
            .iter()
            .map(|p| p.version_label())
            .collect();
        assert_eq!(names, ["8.0_0.2.0"]);
        let all: Vec<_> = idx
            .search("", true)
            .iter()
            .map(|p| format!("{} {}", p.name, p.version_label()))
            .collect();
        assert_eq!(all, ["kafka 1.0", "mysql 8.0_0.2.0", "mysql 5.7_0.1.0"]);
        assert!(idx.search("zzz", true).is_empty());
    }

    #[test]
    fn digest_check() {
        // sha256("abc") from FIPS 180-2, appendix B.1.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        verify_digest(b"abc", abc, "u").unwrap();
        verify_digest(b"abc", &abc.to_uppercase(), "u").unwrap();
        verify_digest(b"abc", "", "u").unwrap();
        let e = verify_digest(b"abd", abc, "http://x/a.tgz").unwrap_err();
        assert!(matches!(e, RepoError::Digest { .. }), "{e}");
    }

    #[test]
    fn lenient_semver_pads_like_kudo() {
        assert_eq!(lenient_semver("1.2").unwrap(), semver::Version::new(1, 2, 0));
        assert_eq!(lenient_semver("v3").unwrap(), semver::Version::new(3, 0, 0));
        assert_eq!(lenient_semver("1.0-rc1").unwrap().pre.as_str(), "rc1");
        assert!(lenient_semver("latest").is_none());
        assert!(lenient_semver("").is_none());
        assert!(lenient_semver("1.2.3.4").is_none());
    }
}
