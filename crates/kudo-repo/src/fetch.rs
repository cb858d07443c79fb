//! Reading indexes and tarballs from `http(s)://` URLs, `file://` URLs and plain paths, with size
//! limits so a hostile or broken server cannot exhaust memory.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::RepoError;
use crate::index::{INDEX_FILE, IndexFile, PackageVersion, verify_digest};

/// Largest index we read. The community index with every version of every operator is ~30 KiB.
pub const DEFAULT_MAX_INDEX_BYTES: u64 = 16 << 20;
/// Largest package tarball we read (compressed). Real packages are well under 1 MiB.
pub const DEFAULT_MAX_PACKAGE_BYTES: u64 = 16 << 20;

/// Where a repository or file lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// `http://` or `https://`.
    Http(String),
    /// A local path (from a `file://` URL or given as is).
    File(PathBuf),
}

impl Location {
    /// Classifies `s`. `file://` URLs must be absolute; anything without a scheme is a path.
    pub fn parse(s: &str) -> Result<Location, RepoError> {
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            url::Url::parse(s).map_err(|e| RepoError::Config(format!("invalid URL {s:?}: {e}")))?;
            return Ok(Location::Http(s.to_string()));
        }
        if lower.starts_with("file:") {
            let u = url::Url::parse(s).map_err(|e| RepoError::Config(format!("invalid URL {s:?}: {e}")))?;
            let path = u
                .to_file_path()
                .map_err(|_| RepoError::Config(format!("{s:?} is not a local file URL")))?;
            return Ok(Location::File(path));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(RepoError::Config(format!(
                "unsupported URL scheme {scheme:?} in {s:?}"
            )));
        }
        Ok(Location::File(PathBuf::from(s)))
    }

    /// `self/child`, where `self` is a directory-like location (a repository base).
    pub fn join(&self, child: &str) -> Location {
        match self {
            Location::Http(base) => Location::Http(format!("{}/{}", base.trim_end_matches('/'), child)),
            Location::File(dir) => Location::File(dir.join(child)),
        }
    }

    /// Resolves an index URL entry: absolute URLs and absolute paths as they are, anything else
    /// relative to this repository base.
    pub fn resolve(&self, reference: &str) -> Result<Location, RepoError> {
        let lower = reference.to_ascii_lowercase();
        if lower.contains("://")
            || lower.starts_with("file:")
            || std::path::Path::new(reference).is_absolute()
        {
            return Location::parse(reference);
        }
        Ok(self.join(reference))
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Http(u) => f.write_str(u),
            Location::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Downloads with limits and a timeout. Cheap to build; one per command.
pub struct Fetcher {
    agent: ureq::Agent,
    /// Largest repository index read, in bytes ([`DEFAULT_MAX_INDEX_BYTES`] by default).
    pub max_index_bytes: u64,
    /// Largest package tarball read, in bytes ([`DEFAULT_MAX_PACKAGE_BYTES`] by default).
    pub max_package_bytes: u64,
    /// How OCI registries are reached and what their packages must satisfy.
    pub oci: crate::oci::OciSettings,
}

impl Default for Fetcher {
    fn default() -> Fetcher {
        Fetcher::new(Duration::from_secs(60))
    }
}

impl Fetcher {
    /// A fetcher whose HTTP requests give up after `timeout`.
    pub fn new(timeout: Duration) -> Fetcher {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Fetcher {
            agent: config.into(),
            max_index_bytes: DEFAULT_MAX_INDEX_BYTES,
            max_package_bytes: DEFAULT_MAX_PACKAGE_BYTES,
            oci: crate::oci::OciSettings {
                registry: kudo_oci::RegistryOptions {
                    timeout: Some(timeout),
                    ..Default::default()
                },
                policy: Default::default(),
            },
        }
    }

    /// The bytes at `loc`, refusing more than `limit`.
    pub fn bytes(&self, loc: &Location, limit: u64) -> Result<Vec<u8>, RepoError> {
        match loc {
            Location::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| RepoError::io(path, e))?;
                let mut data = Vec::new();
                file.take(limit + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| RepoError::io(path, e))?;
                if data.len() as u64 > limit {
                    return Err(RepoError::TooLarge {
                        what: path.display().to_string(),
                        limit,
                    });
                }
                Ok(data)
            }
            Location::Http(url) => {
                let http_err = |message: String| RepoError::Http {
                    url: url.clone(),
                    message,
                };
                let mut resp = self.agent.get(url).call().map_err(|e| http_err(e.to_string()))?;
                let status = resp.status();
                if !status.is_success() {
                    return Err(http_err(format!("server answered {status}")));
                }
                match resp.body_mut().with_config().limit(limit).read_to_vec() {
                    Ok(data) => Ok(data),
                    Err(ureq::Error::BodyExceedsLimit(_)) => Err(RepoError::TooLarge {
                        what: url.clone(),
                        limit,
                    }),
                    Err(e) => Err(http_err(e.to_string())),
                }
            }
        }
    }

    /// The index of the repository at `base` (`base/index.yaml`).
    pub fn index(&self, base: &Location) -> Result<IndexFile, RepoError> {
        let loc = base.join(INDEX_FILE);
        let data = self.bytes(&loc, self.max_index_bytes)?;
        IndexFile::parse(&data, &format!("index {loc}"))
    }

    /// An index from a location that names the file itself (`repo index --merge`). A directory is
    /// taken to mean its `index.yaml`.
    pub fn index_file(&self, loc: &Location) -> Result<IndexFile, RepoError> {
        let loc = match loc {
            Location::File(p) if p.is_dir() => loc.join(INDEX_FILE),
            _ => loc.clone(),
        };
        let data = self.bytes(&loc, self.max_index_bytes)?;
        IndexFile::parse(&data, &format!("index {loc}"))
    }

    /// The tarball of `pv`, trying its URLs in order, checked against its digest. Fails with every
    /// URL's error when none works.
    pub fn package_bytes(
        &self,
        base: &Location,
        pv: &PackageVersion,
    ) -> Result<(Vec<u8>, String), RepoError> {
        if pv.urls.is_empty() {
            return Err(RepoError::NotFound(format!(
                "operator {} version {} has no download URL in the index",
                pv.name,
                pv.version_label()
            )));
        }
        let mut errors = Vec::new();
        for reference in &pv.urls {
            let attempt = base.resolve(reference).and_then(|loc| {
                let data = self.bytes(&loc, self.max_package_bytes)?;
                verify_digest(&data, &pv.digest, &loc.to_string())?;
                Ok((data, loc.to_string()))
            });
            match attempt {
                Ok(found) => return Ok(found),
                Err(e) => errors.push(e),
            }
        }
        if errors.len() == 1 {
            return Err(errors.remove(0));
        }
        Err(RepoError::NotFound(format!(
            "cannot fetch {} {}: {}",
            pv.name,
            pv.version_label(),
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )))
    }

    /// Fetches, verifies and reads the package of `pv`.
    pub fn package(&self, base: &Location, pv: &PackageVersion) -> Result<kudo_package::Package, RepoError> {
        let (data, from) = self.package_bytes(base, pv)?;
        Ok(kudo_package::reader::read_tgz(data.as_slice(), &from)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(
            Location::parse("https://x/v1").unwrap(),
            Location::Http("https://x/v1".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/r").unwrap(),
            Location::File("/tmp/r".into())
        );
        assert_eq!(Location::parse("./r").unwrap(), Location::File("./r".into()));
        assert!(Location::parse("ftp://x/r").is_err());
        assert!(Location::parse("file://remote-host/r").is_err());
        let base = Location::parse("http://h/v1/").unwrap();
        assert_eq!(
            base.join("index.yaml"),
            Location::Http("http://h/v1/index.yaml".into())
        );
        assert_eq!(
            base.resolve("a.tgz").unwrap(),
            Location::Http("http://h/v1/a.tgz".into())
        );
        assert_eq!(
            base.resolve("https://o/a.tgz").unwrap(),
            Location::Http("https://o/a.tgz".into())
        );
        let dir = Location::File("/r".into());
        assert_eq!(dir.resolve("a.tgz").unwrap(), Location::File("/r/a.tgz".into()));
    }

    #[test]
    fn file_reads_are_limited_and_digests_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.tgz"), b"0123456789").unwrap();
        let f = Fetcher::default();
        let loc = Location::File(dir.path().join("a.tgz"));
        assert_eq!(f.bytes(&loc, 10).unwrap().len(), 10);
        assert!(matches!(f.bytes(&loc, 9), Err(RepoError::TooLarge { .. })));
        let base = Location::File(dir.path().to_path_buf());
        let mut pv = PackageVersion {
            name: "a".into(),
            operator_version: "1.0.0".into(),
            urls: vec!["missing.tgz".into(), "a.tgz".into()],
            digest: crate::index::sha256_hex(b"0123456789"),
            ..Default::default()
        };
        assert_eq!(f.package_bytes(&base, &pv).unwrap().0, b"0123456789");
        pv.digest = crate::index::sha256_hex(b"other");
        let e = f.package_bytes(&base, &pv).unwrap_err().to_string();
        assert!(e.contains("digest mismatch") && e.contains("missing.tgz"), "{e}");
    }

    #[test]
    fn missing_index_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = Fetcher::default()
            .index(&Location::File(dir.path().into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("index.yaml"), "{e}");
    }
}
