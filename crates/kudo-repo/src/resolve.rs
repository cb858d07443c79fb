//! Turning what a user typed after `install`/`upgrade` into a package, in KUDO's order: a local
//! path, then an http(s) URL of a tarball, then an operator name looked up in a repository; before
//! all of them an `oci://` reference (kudo-rs extension). A repository is an index of tarballs or
//! an OCI repository namespace (`crate::oci`).

use std::path::Path;

use crate::config::RepositoryConfig;
use crate::error::RepoError;
use crate::fetch::{Fetcher, Location};
use crate::index::VersionFilter;

/// What to resolve.
#[derive(Clone, Copy, Debug, Default)]
pub struct Request<'a> {
    /// Path, URL or operator name.
    pub name_or_path: &'a str,
    /// `--repo`: repository name instead of the context.
    pub repo: Option<&'a str>,
    /// `--app-version`.
    pub app_version: Option<&'a str>,
    /// `--operator-version`.
    pub operator_version: Option<&'a str>,
}

/// Where a package came from, for messages (and, for OCI artifacts, for the OperatorVersion's
/// annotations: [`Source::operator_version_annotations`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A local package directory or tarball, by the path as given.
    Local(String),
    /// A tarball downloaded from an http(s) URL, as given.
    Url(String),
    /// A package looked up by operator name in a repository's index.
    Repository {
        /// Name of the repository.
        repo: String,
        /// URL of the tarball the package was downloaded from.
        url: String,
    },
    /// An OCI artifact.
    Oci {
        /// The reference as asked for (by tag or digest).
        requested: String,
        /// The same artifact by digest (`oci://HOST/REPO@sha256:…`).
        pinned: String,
        /// What the trust policy found.
        verification: kudo_oci::Verification,
    },
}

/// Refuses a package that cannot carry a signature when the trust policy asks for one.
fn require_unsigned_allowed(fetcher: &Fetcher, what: &str) -> Result<(), RepoError> {
    if fetcher.oci.policy.requires_signature() {
        return Err(RepoError::Config(format!(
            "{what} cannot be verified: a signature is required, and signatures are checked on OCI \
             artifacts (oci://…) only"
        )));
    }
    Ok(())
}

/// True when `arg` is meant as a local package: it contains a path separator, or it names an
/// existing `.tgz` file or a directory holding an `operator.yaml`. A bare operator name never
/// matches merely because an unrelated file or directory of that name exists.
pub fn looks_local(arg: &str) -> bool {
    if arg.contains('/') || arg.contains(std::path::MAIN_SEPARATOR) {
        return true;
    }
    is_package_at(Path::new(arg))
}

/// Whether `p` is a package tarball (`.tgz`/`.tar.gz` file) or a package directory (holding an
/// `operator.yaml`).
pub(crate) fn is_package_at(p: &Path) -> bool {
    let name = p.to_string_lossy();
    (p.is_file() && (name.ends_with(".tgz") || name.ends_with(".tar.gz")))
        || (p.is_dir() && p.join(kudo_package::model::OPERATOR_FILE).is_file())
}

fn is_http(arg: &str) -> bool {
    let l = arg.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://")
}

/// Resolves `req` using the repositories configured under `home`.
pub fn resolve(
    home: &Path,
    req: Request<'_>,
    fetcher: &Fetcher,
) -> Result<(kudo_package::Package, Source), RepoError> {
    let arg = req.name_or_path;
    if arg.is_empty() {
        return Err(RepoError::Config("no package given".into()));
    }
    if kudo_oci::is_oci(arg) {
        return crate::oci::pull(arg, fetcher);
    }
    if !is_http(arg) && looks_local(arg) {
        let path = Path::new(arg);
        if !path.exists() {
            return Err(RepoError::NotFound(format!(
                "package {arg} not found: no such file or directory (operator names contain no '/')"
            )));
        }
        require_unsigned_allowed(fetcher, &format!("the local package {arg}"))?;
        return Ok((kudo_package::read_path(path)?, Source::Local(arg.into())));
    }
    if is_http(arg) {
        require_unsigned_allowed(fetcher, arg)?;
        let loc = Location::parse(arg)?;
        let data = fetcher.bytes(&loc, fetcher.max_package_bytes)?;
        let pkg = kudo_package::reader::read_tgz(data.as_slice(), arg)?;
        return Ok((pkg, Source::Url(arg.into())));
    }
    let config = RepositoryConfig::load(home)?;
    let entry = config.current(req.repo)?;
    let filter = VersionFilter {
        app_version: req.app_version,
        operator_version: req.operator_version,
    };
    if kudo_oci::is_oci(&entry.url) {
        return crate::oci::resolve_in_registry(&entry.name, &entry.url, arg, filter, fetcher);
    }
    require_unsigned_allowed(
        fetcher,
        &format!("{arg} from the repository index {:?}", entry.name),
    )?;
    let base = Location::parse(&entry.url)?;
    let index = fetcher.index(&base).map_err(|e| match e {
        RepoError::Parse { .. } | RepoError::TooLarge { .. } => e,
        other => RepoError::NotFound(format!(
            "cannot read the index of repository {:?}: {other}",
            entry.name
        )),
    })?;
    let pv = index.find(arg, filter).map_err(|e| match e {
        RepoError::NotFound(m) => RepoError::NotFound(format!("{m} in repository {:?}", entry.name)),
        other => other,
    })?;
    let (data, from) = fetcher.package_bytes(&base, pv)?;
    let pkg = kudo_package::reader::read_tgz(data.as_slice(), &from)?;
    if pkg.operator.name != pv.name || pkg.operator.operator_version != pv.operator_version {
        return Err(RepoError::Config(format!(
            "{from} contains {} {} but the index of repository {:?} promised {} {}",
            pkg.operator.name, pkg.operator.operator_version, entry.name, pv.name, pv.operator_version
        )));
    }
    Ok((
        pkg,
        Source::Repository {
            repo: entry.name.clone(),
            url: from,
        },
    ))
}
