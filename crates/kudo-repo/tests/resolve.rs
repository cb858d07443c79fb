//! Resolution end to end: repositories on disk (`file://` and plain paths) and over HTTP from a
//! loopback server started here, digest verification, and KUDO's resolution order.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use kudo_repo::{Fetcher, IndexFile, RepoEntry, RepositoryConfig, Request, Source, resolve};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Writes the tarball of an example (optionally with another operatorVersion) into `dir`.
fn tarball(dir: &Path, example: &str, operator_version: Option<&str>) -> PathBuf {
    let mut pkg = kudo_package::read_path(&examples().join(example)).unwrap();
    if let Some(v) = operator_version {
        let text = std::fs::read_to_string(examples().join(example).join("operator.yaml")).unwrap();
        let old = format!("operatorVersion: {}", pkg.operator.operator_version);
        assert!(text.contains(&old));
        let text = text.replace(&old, &format!("operatorVersion: {v}"));
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(&examples().join(example), tmp.path());
        std::fs::write(tmp.path().join("operator.yaml"), text).unwrap();
        pkg = kudo_package::read_path(tmp.path()).unwrap();
    }
    let path = dir.join(pkg.tarball_name());
    std::fs::write(&path, kudo_package::create::tarball_bytes(&pkg).unwrap()).unwrap();
    path
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A minimal HTTP/1.1 file server for `dir` on 127.0.0.1:0; the thread ends with the test process.
fn serve(dir: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).map(|n| n == 0).unwrap_or(true) || h == "\r\n" {
                    break;
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/')
                .to_string();
            let (status, body) = match std::fs::read(dir.join(&path)) {
                Ok(b) if !path.contains("..") => ("200 OK", b),
                _ => ("404 Not Found", b"not found".to_vec()),
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    format!("http://{addr}")
}

fn home_with(repos: &[(&str, &str)]) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let mut cfg = RepositoryConfig {
        repo_version: "v1".into(),
        context: repos[0].0.into(),
        repositories: vec![],
    };
    for (name, url) in repos {
        cfg.add(RepoEntry {
            name: (*name).into(),
            url: (*url).into(),
        })
        .unwrap();
    }
    cfg.save(home.path()).unwrap();
    home
}

fn write_index(dir: &Path, url: &str) {
    let (idx, warnings) = IndexFile::from_directory(dir, Some(url), None).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    std::fs::write(dir.join("index.yaml"), idx.to_yaml().unwrap()).unwrap();
}

fn req(name: &str) -> Request<'_> {
    Request {
        name_or_path: name,
        ..Default::default()
    }
}

#[test]
fn resolves_newest_and_filtered_versions_from_a_file_repository() {
    let repo = tempfile::tempdir().unwrap();
    tarball(repo.path(), "first-operator", None);
    tarball(repo.path(), "first-operator", Some("0.10.0"));
    tarball(repo.path(), "galera", None);
    let url = format!("file://{}", repo.path().display());
    write_index(repo.path(), &url);
    let home = home_with(&[("local", &url)]);
    let f = Fetcher::default();

    let (pkg, src) = resolve(home.path(), req("first-operator"), &f).unwrap();
    assert_eq!(pkg.operator.operator_version, "0.10.0");
    assert!(
        matches!(src, Source::Repository { ref repo, .. } if repo == "local"),
        "{src:?}"
    );
    let r = Request {
        operator_version: Some("0.2.0"),
        ..req("first-operator")
    };
    assert_eq!(
        resolve(home.path(), r, &f).unwrap().0.operator.operator_version,
        "0.2.0"
    );
    let r = Request {
        app_version: Some("0.0.1"),
        ..req("first-operator")
    };
    let e = resolve(home.path(), r, &f).unwrap_err().to_string();
    assert!(
        e.contains("no operator version found for first-operator with app version 0.0.1"),
        "{e}"
    );
    let e = resolve(home.path(), req("kafka"), &f).unwrap_err().to_string();
    assert!(e.contains("no operator found for: kafka"), "{e}");
    let r = Request {
        repo: Some("other"),
        ..req("galera")
    };
    assert!(
        resolve(home.path(), r, &f)
            .unwrap_err()
            .to_string()
            .contains("no repo named \"other\"")
    );
}

#[test]
fn a_tampered_tarball_is_refused() {
    let repo = tempfile::tempdir().unwrap();
    let tgz = tarball(repo.path(), "galera", None);
    write_index(repo.path(), &format!("file://{}", repo.path().display()));
    // Replace the tarball by another valid package after indexing.
    let other = tempfile::tempdir().unwrap();
    let wp = tarball(other.path(), "wordpress", None);
    std::fs::copy(wp, &tgz).unwrap();
    let home = home_with(&[("local", &repo.path().display().to_string())]);
    let e = resolve(home.path(), req("galera"), &Fetcher::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("digest mismatch"), "{e}");
}

#[test]
fn resolves_over_http_with_relative_and_absolute_urls() {
    let repo = tempfile::tempdir().unwrap();
    tarball(repo.path(), "wordpress", None);
    let base = serve(repo.path().to_path_buf());
    write_index(repo.path(), &base);
    let home = home_with(&[("web", &base)]);
    let f = Fetcher::default();
    let (pkg, src) = resolve(home.path(), req("wordpress"), &f).unwrap();
    assert_eq!(pkg.operator.name, "wordpress");
    assert!(
        matches!(src, Source::Repository { ref url, .. } if url.starts_with("http://127.0.0.1:")),
        "{src:?}"
    );

    // A direct URL to a tarball.
    let direct = format!("{base}/{}", pkg.tarball_name());
    let (pkg2, src) = resolve(home.path(), req(&direct), &f).unwrap();
    assert_eq!(pkg2.operator.name, "wordpress");
    assert_eq!(src, Source::Url(direct));

    // 404 is reported with the URL.
    let e = resolve(home.path(), req(&format!("{base}/missing.tgz")), &f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.tgz") && e.contains("404"), "{e}");

    // Download limits apply to HTTP bodies too.
    let mut small = Fetcher::default();
    small.max_package_bytes = 100;
    let e = resolve(home.path(), req("wordpress"), &small)
        .unwrap_err()
        .to_string();
    assert!(e.contains("larger than the limit"), "{e}");
}

#[test]
fn local_paths_come_first_and_bare_names_are_not_paths() {
    let dir = tempfile::tempdir().unwrap();
    let tgz = tarball(dir.path(), "galera", None);
    let home = home_with(&[("none", "file:///nonexistent-kudo-repo")]);
    let f = Fetcher::default();
    let (pkg, src) = resolve(home.path(), req(tgz.to_str().unwrap()), &f).unwrap();
    assert_eq!(pkg.operator.name, "galera");
    assert!(matches!(src, Source::Local(_)));
    let dir_arg = examples().join("first-operator");
    assert_eq!(
        resolve(home.path(), req(dir_arg.to_str().unwrap()), &f)
            .unwrap()
            .0
            .operator
            .name,
        "first-operator"
    );
    let e = resolve(home.path(), req("./does-not-exist"), &f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not found"), "{e}");
    // A bare name goes to the repository, whose index cannot be read here.
    let e = resolve(home.path(), req("galera"), &f).unwrap_err().to_string();
    assert!(e.contains("cannot read the index of repository \"none\""), "{e}");
}
