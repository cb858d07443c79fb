//! `oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:HEX]`: what users type to name a package in a
//! registry.
//!
//! The registry host is always explicit (no `docker.io` default, unlike image names), so a
//! reference means the same on every machine. The grammar is the distribution specification's: repository
//! components of lower-case letters and digits joined by `.`, `_`, `__` or dashes; a tag of at most
//! 128 characters `[A-Za-z0-9_][A-Za-z0-9._-]*`; a digest `sha256:` and 64 lower-case hex digits.

use std::fmt;

use crate::error::{OciError, TagError};

/// The scheme every reference starts with.
pub const SCHEME: &str = "oci://";

/// A parsed `oci://` reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OciRef {
    /// `host[:port]` (an IPv6 address in brackets).
    pub registry: String,
    /// The repository path inside the registry (`team/galera`).
    pub repository: String,
    /// The tag, when one was given.
    pub tag: Option<String>,
    /// The manifest digest (`sha256:…`), when one was given.
    pub digest: Option<String>,
}

/// True when `s` is meant as an OCI reference (starts with `oci://`, any case).
pub fn is_oci(s: &str) -> bool {
    s.len() >= SCHEME.len() && s[..SCHEME.len()].eq_ignore_ascii_case(SCHEME)
}

impl OciRef {
    /// Parses `oci://HOST/REPO[:TAG][@sha256:HEX]`; the error says which part is wrong.
    pub fn parse(s: &str) -> Result<OciRef, OciError> {
        let bad = |why: String| OciError::Reference {
            reference: s.to_string(),
            message: why,
        };
        if !is_oci(s) {
            return Err(bad(format!("an OCI reference starts with {SCHEME}")));
        }
        let rest = &s[SCHEME.len()..];
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the registry host (oci://HOST/REPOSITORY)".into()))?;
        check_registry(registry).map_err(bad)?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(d)),
            None => (path, None),
        };
        // A colon after the last slash starts the tag.
        let (repository, tag) = match path.rfind(':') {
            Some(i) if !path[i..].contains('/') => (&path[..i], Some(&path[i + 1..])),
            _ => (path, None),
        };
        check_repository(repository).map_err(bad)?;
        if let Some(t) = tag {
            check_tag(t).map_err(bad)?;
        }
        if let Some(d) = digest {
            check_digest(d).map_err(bad)?;
        }
        Ok(OciRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
        })
    }

    /// The same repository at `tag` (no digest).
    pub fn with_tag(&self, tag: &str) -> OciRef {
        OciRef {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        }
    }

    /// The same repository pinned to `digest`, the tag dropped: what is recorded and signed.
    pub fn with_digest(&self, digest: &str) -> OciRef {
        OciRef {
            tag: None,
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// `REPO/NAME` appended to this reference's repository (a repository namespace of
    /// `repo add NAME oci://HOST/NAMESPACE`), no tag or digest.
    pub fn child(&self, name: &str) -> Result<OciRef, OciError> {
        let repository = format!("{}/{name}", self.repository.trim_end_matches('/'));
        check_repository(&repository).map_err(|message| OciError::Reference {
            reference: format!("{SCHEME}{}/{repository}", self.registry),
            message,
        })?;
        Ok(OciRef {
            registry: self.registry.clone(),
            repository,
            tag: None,
            digest: None,
        })
    }

    /// `HOST/REPO`: the repository without tag or digest (cosign's `docker-reference`).
    pub fn repository_name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The tag or digest requests go to (a digest wins over a tag).
    pub(crate) fn to_client(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => {
                oci_client::Reference::with_digest(self.registry.clone(), self.repository.clone(), d.clone())
            }
            (None, Some(t)) => {
                oci_client::Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone())
            }
            (None, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".to_string(),
            ),
        }
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The tag a package version is pushed under: its operatorVersion, with `+` (build metadata,
/// which tags cannot hold) written `_`, as Helm does for charts.
pub fn version_tag(operator_version: &str) -> Result<String, TagError> {
    let tag = operator_version.replace('+', "_");
    check_tag(&tag).map_err(|_| TagError { tag: tag.clone() })?;
    Ok(tag)
}

/// The cosign signature tag of a manifest digest: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

fn check_registry(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("the registry host is empty".into());
    }
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("registry host {host:?}: unclosed '['"))?;
        if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return Err(format!("registry host {host:?} is not an IPv6 address"));
        }
        (None, after.strip_prefix(':'))
    } else {
        match host.split_once(':') {
            Some((n, p)) => (Some(n), Some(p)),
            None => (Some(host), None),
        }
    };
    if let Some(n) = name {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if !n.split('.').all(label_ok) {
            return Err(format!("registry host {host:?} is not a host name or address"));
        }
    }
    if let Some(p) = port
        && p.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(format!("registry port {p:?} is not a port number"));
    }
    Ok(())
}

fn check_repository(repo: &str) -> Result<(), String> {
    if repo.is_empty() {
        return Err("the repository is empty".into());
    }
    if repo.len() > 255 {
        return Err("the repository is longer than 255 characters".into());
    }
    for component in repo.split('/') {
        if !component_ok(component) {
            return Err(format!(
                "repository component {component:?} is not lower-case letters and digits joined by \
                 '.', '_', '__' or '-'"
            ));
        }
    }
    Ok(())
}

fn component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: '.', '_', '__', or any number of '-'.
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn check_tag(tag: &str) -> Result<(), String> {
    let b = tag.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tag {tag:?} is not 1-128 characters of letters, digits, '_', '.' and '-' (not starting with \
             '.' or '-')"
        ))
    }
}

/// A `sha256:` digest of 64 lower-case hex digits.
pub(crate) fn check_digest(d: &str) -> Result<(), String> {
    match d.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "digest {d:?} is not sha256: followed by 64 lower-case hex digits"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_and_prints_references() {
        type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, Option<&'a str>);
        let cases: &[Case] = &[
            (
                "oci://127.0.0.1:5000/galera",
                "127.0.0.1:5000",
                "galera",
                None,
                None,
            ),
            (
                "oci://reg.example/team/galera:0.1.0",
                "reg.example",
                "team/galera",
                Some("0.1.0"),
                None,
            ),
            ("OCI://localhost/a/b", "localhost", "a/b", None, None),
            (
                "oci://[::1]:5000/x_y/a--b:v1",
                "[::1]:5000",
                "x_y/a--b",
                Some("v1"),
                None,
            ),
        ];
        for (s, reg, repo, tag, digest) in cases {
            let r = OciRef::parse(s).unwrap();
            assert_eq!(
                (
                    r.registry.as_str(),
                    r.repository.as_str(),
                    r.tag.as_deref(),
                    r.digest.as_deref()
                ),
                (*reg, *repo, *tag, *digest),
                "{s}"
            );
        }
        let r = OciRef::parse(&format!("oci://h:5000/team/galera:1.0@{D}")).unwrap();
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert_eq!(r.digest.as_deref(), Some(D));
        assert_eq!(r.to_string(), format!("oci://h:5000/team/galera:1.0@{D}"));
        assert_eq!(
            r.with_digest(D).to_string(),
            format!("oci://h:5000/team/galera@{D}")
        );
        assert_eq!(r.repository_name(), "h:5000/team/galera");
        assert_eq!(r.to_client().to_string(), format!("h:5000/team/galera@{D}"));
    }

    #[test]
    fn refuses_malformed_references_saying_why() {
        let cases: &[(&str, &str)] = &[
            ("https://h/x", "starts with oci://"),
            ("oci://h", "no repository"),
            ("oci:///x", "registry host is empty"),
            ("oci://h:0/x", "not a port number"),
            ("oci://h:port/x", "not a port number"),
            ("oci://bad_host/x", "not a host name"),
            ("oci://h/Galera", "repository component \"Galera\""),
            ("oci://h/a//b", "repository component \"\""),
            ("oci://h/a..b", "repository component"),
            ("oci://h/x:", "tag \"\""),
            ("oci://h/x:.v1", "tag \".v1\""),
            ("oci://h/x@sha256:abc", "is not sha256: followed by 64"),
            ("oci://h/x@md5:00", "is not sha256:"),
        ];
        for (s, needle) in cases {
            let e = OciRef::parse(s).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains(s), "{s}: {e}");
        }
    }

    #[test]
    fn tags_of_versions_and_signatures() {
        assert_eq!(version_tag("0.1.0").unwrap(), "0.1.0");
        assert_eq!(version_tag("1.0.0+build.5").unwrap(), "1.0.0_build.5");
        assert!(version_tag("").is_err());
        assert_eq!(signature_tag("sha256:ab12"), "sha256-ab12.sig");
        let ns = OciRef::parse("oci://h/team").unwrap();
        assert_eq!(ns.child("galera").unwrap().to_string(), "oci://h/team/galera");
        assert!(ns.child("Galera").is_err());
    }
}
