//! The bad-input corpus: every broken package must produce a clear error naming the file or field
//! (the `EXPECT` file of each case holds the expected message, written by hand from KUDO's wording),
//! never a panic. Hostile archives and huge files are generated here in a temp dir.

use std::io::Write;
use std::path::{Path, PathBuf};

use kudo_package::reader::{Limits, read_path};
use kudo_package::verify::{ParamChecks, verify};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/bad");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Reads and verifies; returns every error message, or an empty list for a valid package.
fn problems(path: &Path) -> Vec<String> {
    match read_path(path) {
        Err(e) => vec![e.to_string()],
        Ok(pkg) => verify(&pkg, ParamChecks::default()).errors,
    }
}

#[test]
fn corpus_has_at_least_forty_cases() {
    assert!(corpus().len() >= 40, "only {} cases", corpus().len());
}

#[test]
fn every_bad_package_fails_with_its_expected_message() {
    let mut failures = Vec::new();
    for case in corpus() {
        let expect = std::fs::read_to_string(case.join("EXPECT")).unwrap();
        let expect = expect.trim_end_matches('\n');
        let got = problems(&case);
        if got.is_empty() {
            failures.push(format!("{}: accepted, expected error {expect:?}", case.display()));
        } else if !got.iter().any(|m| m.contains(expect)) {
            failures.push(format!("{}: expected {expect:?}, got {got:#?}", case.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ------------------------------------------------------------------ hostile archives

const OP: &str =
    "name: demo\noperatorVersion: 0.1.0\nkubernetesVersion: 1.17.0\ntasks: []\nplans:\n  deploy: {}\n";
const PARAMS: &str = "parameters: []\n";

/// Appends an entry with a raw (unvalidated) name, as an attacker's tar tool would.
fn raw_entry(
    b: &mut tar::Builder<impl Write>,
    name: &str,
    kind: tar::EntryType,
    data: &[u8],
    link: Option<&str>,
) {
    let mut h = tar::Header::new_old();
    {
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(l) = link {
            old.linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
    }
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append(&h, data).unwrap();
}

fn tgz(
    dir: &Path,
    name: &str,
    build: impl FnOnce(&mut tar::Builder<flate2::write::GzEncoder<std::fs::File>>),
) -> PathBuf {
    let path = dir.join(name);
    let f = std::fs::File::create(&path).unwrap();
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(f, flate2::Compression::fast()));
    raw_entry(
        &mut b,
        "operator.yaml",
        tar::EntryType::Regular,
        OP.as_bytes(),
        None,
    );
    raw_entry(
        &mut b,
        "params.yaml",
        tar::EntryType::Regular,
        PARAMS.as_bytes(),
        None,
    );
    build(&mut b);
    b.into_inner().unwrap().finish().unwrap();
    path
}

fn expect_rejected(path: &Path, needle: &str) {
    let err = read_path(path)
        .expect_err("hostile archive was accepted")
        .to_string();
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
}

#[test]
fn a_clean_archive_is_accepted() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "ok.tgz", |b| {
        raw_entry(b, "templates/a.yaml", tar::EntryType::Regular, b"kind: A\n", None);
    });
    let pkg = read_path(&p).unwrap();
    assert_eq!(pkg.templates.keys().collect::<Vec<_>>(), vec!["a.yaml"]);
}

#[test]
fn absolute_paths_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "abs.tgz", |b| {
        raw_entry(b, "/etc/cron.d/x", tar::EntryType::Regular, b"x", None)
    });
    expect_rejected(&p, "/etc/cron.d/x: rejected: absolute paths are not allowed");
}

#[test]
fn parent_directory_paths_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "dotdot.tgz", |b| {
        raw_entry(
            b,
            "templates/../../escape.yaml",
            tar::EntryType::Regular,
            b"x",
            None,
        )
    });
    expect_rejected(
        &p,
        "templates/../../escape.yaml: rejected: path escapes the package root",
    );
}

#[test]
fn symlinks_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "sym.tgz", |b| {
        raw_entry(
            b,
            "templates/a.yaml",
            tar::EntryType::Symlink,
            b"",
            Some("/etc/passwd"),
        )
    });
    expect_rejected(&p, "templates/a.yaml: rejected: symbolic links are not allowed");
}

#[test]
fn hardlinks_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "hard.tgz", |b| {
        raw_entry(
            b,
            "templates/a.yaml",
            tar::EntryType::Link,
            b"",
            Some("operator.yaml"),
        )
    });
    expect_rejected(&p, "templates/a.yaml: rejected: hard links are not allowed");
}

#[test]
fn devices_and_fifos_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "dev.tgz", |b| {
        raw_entry(b, "templates/zero", tar::EntryType::Char, b"", None)
    });
    expect_rejected(&p, "templates/zero: rejected: device files are not allowed");
    let p = tgz(d.path(), "fifo.tgz", |b| {
        raw_entry(b, "templates/pipe", tar::EntryType::Fifo, b"", None)
    });
    expect_rejected(&p, "templates/pipe: rejected: FIFOs are not allowed");
}

#[test]
fn oversized_entries_are_rejected_before_reading() {
    let d = tempfile::tempdir().unwrap();
    let big = vec![b'a'; 9 << 20];
    let p = tgz(d.path(), "big.tgz", |b| {
        raw_entry(b, "templates/big.yaml", tar::EntryType::Regular, &big, None)
    });
    expect_rejected(
        &p,
        "templates/big.yaml: rejected: file is larger than the limit of 8388608 bytes",
    );
}

#[test]
fn too_many_entries_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "many.tgz", |b| {
        for i in 0..4100 {
            raw_entry(
                b,
                &format!("templates/t{i}.yaml"),
                tar::EntryType::Regular,
                b"",
                None,
            );
        }
    });
    expect_rejected(&p, "archive has more than 4096 entries");
}

#[test]
fn gzip_bombs_are_stopped_by_the_total_size_limit() {
    let d = tempfile::tempdir().unwrap();
    // 6 files of 7 MiB of zeros: each under the per-file limit, 42 MiB in total, ~40 KiB compressed.
    let chunk = vec![0u8; 7 << 20];
    let p = tgz(d.path(), "bomb.tgz", |b| {
        for i in 0..6 {
            raw_entry(
                b,
                &format!("templates/z{i}.yaml"),
                tar::EntryType::Regular,
                &chunk,
                None,
            );
        }
    });
    assert!(std::fs::metadata(&p).unwrap().len() < 1 << 20);
    expect_rejected(&p, "package content exceeds the limit of 33554432 bytes in total");
}

#[test]
fn a_decompression_limit_applies_even_to_bogus_tar_streams() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("zeros.tgz");
    let f = std::fs::File::create(&path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    // A valid first header followed by 40 MiB of zeros (end-of-archive blocks are skipped only up
    // to the first pair; a hostile stream keeps going).
    let mut b = tar::Builder::new(Vec::new());
    raw_entry(
        &mut b,
        "operator.yaml",
        tar::EntryType::Regular,
        OP.as_bytes(),
        None,
    );
    gz.write_all(&b.into_inner().unwrap()).unwrap();
    let limits = Limits {
        max_total_size: 1 << 20,
        ..Limits::default()
    };
    for _ in 0..40 {
        gz.write_all(&vec![0u8; 1 << 20]).unwrap();
    }
    gz.finish().unwrap();
    // Either the archive ends at the zero blocks (then params.yaml is missing) or the bound trips.
    let err = kudo_package::reader::read_path_with(&path, &limits)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("params.yaml") || err.contains("decompresses to more than"),
        "{err}"
    );
}

#[test]
fn not_a_tarball() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.tgz");
    std::fs::write(&p, b"this is not gzip").unwrap();
    expect_rejected(&p, "x.tgz");
}

#[test]
fn a_truncated_tarball() {
    let d = tempfile::tempdir().unwrap();
    let p = tgz(d.path(), "t.tgz", |b| {
        raw_entry(
            b,
            "templates/a.yaml",
            tar::EntryType::Regular,
            &[b'x'; 100_000],
            None,
        )
    });
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let err = read_path(&p).unwrap_err().to_string();
    assert!(err.contains("t.tgz"), "{err}");
}

#[test]
fn a_100_mb_file_in_a_directory_is_rejected_without_reading_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("operator.yaml"), OP).unwrap();
    std::fs::write(d.path().join("params.yaml"), PARAMS).unwrap();
    std::fs::create_dir(d.path().join("templates")).unwrap();
    // Sparse: no 100 MB is written to disk.
    let f = std::fs::File::create(d.path().join("templates/huge.yaml")).unwrap();
    f.set_len(100 << 20).unwrap();
    let err = read_path(d.path()).unwrap_err().to_string();
    assert!(
        err.contains("templates/huge.yaml: rejected: file is larger than the limit"),
        "{err}"
    );
}

#[test]
fn an_oversized_archive_file_is_rejected_without_reading_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("huge.tgz");
    std::fs::File::create(&p).unwrap().set_len(100 << 20).unwrap();
    expect_rejected(&p, "archive is 104857600 bytes, more than the limit");
}

#[cfg(unix)]
#[test]
fn symlinks_in_directories_are_rejected() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("operator.yaml"), OP).unwrap();
    std::fs::write(d.path().join("params.yaml"), PARAMS).unwrap();
    std::fs::create_dir(d.path().join("templates")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", d.path().join("templates/a.yaml")).unwrap();
    let err = read_path(d.path()).unwrap_err().to_string();
    assert!(
        err.contains("templates/a.yaml: rejected: symbolic links are not allowed"),
        "{err}"
    );
}

#[test]
fn a_package_inside_one_top_level_folder_is_read() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("nested.tgz");
    let f = std::fs::File::create(&path).unwrap();
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(f, flate2::Compression::fast()));
    raw_entry(
        &mut b,
        "demo/operator.yaml",
        tar::EntryType::Regular,
        OP.as_bytes(),
        None,
    );
    raw_entry(
        &mut b,
        "demo/params.yaml",
        tar::EntryType::Regular,
        PARAMS.as_bytes(),
        None,
    );
    raw_entry(
        &mut b,
        "demo/templates/sub/a.yaml",
        tar::EntryType::Regular,
        b"kind: A\n",
        None,
    );
    b.into_inner().unwrap().finish().unwrap();
    let pkg = read_path(&path).unwrap();
    assert_eq!(pkg.operator.name, "demo");
    assert!(pkg.templates.contains_key("sub/a.yaml"));
}
