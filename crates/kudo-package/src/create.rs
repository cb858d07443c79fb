//! `package create`: a reproducible tarball of a package.
//!
//! Same input → byte-identical output, so a repository digest only changes when content does:
//! entries are sorted by path, there are no directory entries, every header has mtime 0, uid/gid 0,
//! empty owner names and mode 0644, and the gzip header has no file name and mtime 0.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::PackageError;
use crate::model::Package;

/// Builds the `.tgz` bytes of `pkg` from the files it was read from.
pub fn tarball_bytes(pkg: &Package) -> Result<Vec<u8>, PackageError> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    builder.mode(tar::HeaderMode::Deterministic);
    // BTreeMap iteration is sorted by path.
    for (path, data) in &pkg.files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        builder
            .append_data(&mut h, path, data.as_slice())
            .map_err(|e| PackageError::io(path, format!("cannot add to archive: {e}")))?;
    }
    let gz = builder.into_inner().map_err(|e| PackageError::io("archive", e))?;
    let mut out = gz.finish().map_err(|e| PackageError::io("archive", e))?;
    out.flush().map_err(|e| PackageError::io("archive", e))?;
    Ok(out)
}

/// Writes the tarball into `dest_dir` under [`Package::tarball_name`]; refuses to replace an
/// existing file unless `overwrite`. Returns the path written.
pub fn write_tarball(pkg: &Package, dest_dir: &Path, overwrite: bool) -> Result<PathBuf, PackageError> {
    let target = dest_dir.join(pkg.tarball_name());
    if target.exists() && !overwrite {
        return Err(PackageError::io(
            target.display(),
            "file already exists, use --overwrite to replace it",
        ));
    }
    let bytes = tarball_bytes(pkg)?;
    std::fs::create_dir_all(dest_dir).map_err(|e| PackageError::io(dest_dir.display(), e))?;
    std::fs::write(&target, bytes).map_err(|e| PackageError::io(target.display(), e))?;
    Ok(target)
}
