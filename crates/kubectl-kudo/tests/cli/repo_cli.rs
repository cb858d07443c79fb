//! `kubectl kudo repo …` and `search` through the real binary with a temporary `--home`:
//! repositories built with `repo index` from tarballs made by `package create`, served from disk
//! (`file://`) and over HTTP from a loopback server started by the test.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn kudo(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-kudo"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("KUDO_HOME")
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Lines with trailing padding removed and cell separators collapsed to single spaces.
fn cells(s: &str) -> Vec<String> {
    s.lines()
        .map(|l| {
            l.split('\t')
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join(" ")
                .trim_end()
                .to_string()
        })
        .collect()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        out(o),
        err(o)
    );
    out(o)
}

#[track_caller]
fn fails(o: &Output, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        out(o),
        err(o)
    );
    assert!(err(o).contains(needle), "{needle:?} not in stderr:\n{}", err(o));
}

/// `package create` of each example into `dir`, plus first-operator with operatorVersion 0.3.0.
fn build_tarballs(home: &Path, dir: &Path) {
    let d = dir.to_str().unwrap();
    for ex in ["first-operator", "galera", "wordpress"] {
        ok(&kudo(
            home,
            &[
                "package",
                "create",
                examples().join(ex).to_str().unwrap(),
                "-d",
                d,
            ],
        ));
    }
    let v2 = tempfile::tempdir().unwrap();
    super::common::copy_dir(&examples().join("first-operator"), v2.path());
    let op = v2.path().join("operator.yaml");
    let text = std::fs::read_to_string(&op).unwrap();
    assert!(text.contains("operatorVersion: 0.2.0"));
    std::fs::write(
        &op,
        text.replace("operatorVersion: 0.2.0", "operatorVersion: 0.3.0"),
    )
    .unwrap();
    ok(&kudo(
        home,
        &["package", "create", v2.path().to_str().unwrap(), "-d", d],
    ));
}

fn sha256sum(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    out(&o).split_whitespace().next().unwrap().to_string()
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

#[test]
fn file_repository_lifecycle_and_search() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let repo = tempfile::tempdir().unwrap();
    build_tarballs(h, repo.path());
    let url = format!("file://{}", repo.path().display());

    let o = ok(&kudo(
        h,
        &["repo", "index", repo.path().to_str().unwrap(), "--url", &url],
    ));
    assert!(o.contains("4 package version(s)"), "{o}");
    let index = std::fs::read_to_string(repo.path().join("index.yaml")).unwrap();
    let galera = repo.path().join("galera-10.5.3_0.1.0.tgz");
    assert!(
        index.contains(&sha256sum(&galera)),
        "digest of galera missing:\n{index}"
    );
    assert!(
        index.contains(&format!("{url}/galera-10.5.3_0.1.0.tgz")),
        "{index}"
    );
    fails(
        &kudo(h, &["repo", "index", repo.path().to_str().unwrap()]),
        "already exists",
    );

    // Without a repositories file, the community repository is configured and current.
    assert_eq!(
        cells(&ok(&kudo(h, &["repo", "list"]))),
        [
            "NAME URL",
            "*community https://kudo-repository.storage.googleapis.com/v1"
        ]
    );
    let o = ok(&kudo(h, &["repo", "add", "local", &url]));
    assert_eq!(o, "\"local\" has been added to your repositories\n");
    fails(
        &kudo(h, &["repo", "add", "local", &url]),
        "repository name (local) already exists",
    );
    fails(
        &kudo(h, &["repo", "add", "broken", "file:///nonexistent-kudo-repo"]),
        "is not a valid operator repository",
    );
    ok(&kudo(
        h,
        &[
            "repo",
            "add",
            "unchecked",
            "file:///nonexistent-kudo-repo",
            "--skip-check",
        ],
    ));
    ok(&kudo(h, &["repo", "context", "local"]));
    fails(
        &kudo(h, &["repo", "context", "nope"]),
        "no repo named \"nope\" found",
    );
    assert_eq!(
        cells(&ok(&kudo(h, &["repo", "list"]))),
        [
            "NAME URL".to_string(),
            "community https://kudo-repository.storage.googleapis.com/v1".to_string(),
            format!("*local {url}"),
            "unchecked file:///nonexistent-kudo-repo".to_string(),
        ]
    );
    let cfg = std::fs::read_to_string(h.join("repository/repositories.yaml")).unwrap();
    assert!(
        cfg.contains("repoVersion: v1") && cfg.contains("context: local"),
        "{cfg}"
    );

    assert_eq!(
        cells(&ok(&kudo(h, &["search"]))),
        [
            "Name Operator Version App Version",
            "first-operator 0.3.0 1.7.9",
            "galera 0.1.0 10.5.3",
            "wordpress 0.1.0 4.8.0"
        ]
    );
    assert_eq!(
        cells(&ok(&kudo(h, &["search", "first", "-a"]))),
        // Further versions of the same operator have an empty Name cell.
        [
            "Name Operator Version App Version",
            "first-operator 0.3.0 1.7.9",
            " 0.2.0 1.7.9"
        ]
    );
    assert_eq!(cells(&ok(&kudo(h, &["search", "gal"])))[1], "galera 0.1.0 10.5.3");
    assert_eq!(ok(&kudo(h, &["search", "zzz"])), "no operators found\n");
    fails(
        &kudo(h, &["search", "--repo", "unchecked"]),
        "cannot read the index of repository \"unchecked\"",
    );

    let o = ok(&kudo(h, &["repo", "rm", "unchecked", "local"]));
    assert!(
        o.contains("\"local\" has been removed from your repositories"),
        "{o}"
    );
    fails(
        &kudo(h, &["repo", "remove", "local"]),
        "no repo named \"local\" found",
    );
    // The context was removed: commands needing a repository ask for one.
    fails(&kudo(h, &["search"]), "no current repository");
    assert_eq!(
        cells(&ok(&kudo(h, &["repo", "list"]))),
        [
            "NAME URL",
            "community https://kudo-repository.storage.googleapis.com/v1"
        ]
    );
}

#[test]
fn index_reports_duplicates_and_merges() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let a = tempfile::tempdir().unwrap();
    build_tarballs(h, a.path());
    // The same package under a second file name is a duplicate.
    std::fs::copy(
        a.path().join("galera-10.5.3_0.1.0.tgz"),
        a.path().join("zz-copy.tgz"),
    )
    .unwrap();
    std::fs::write(a.path().join("broken.tgz"), b"not a tarball").unwrap();
    let o = kudo(h, &["repo", "index", a.path().to_str().unwrap()]);
    ok(&o);
    assert!(
        err(&o).contains("zz-copy.tgz: operator 'galera' version 10.5.3_0.1.0 already exists, skipped"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("broken.tgz:"), "{}", err(&o));
    let index = std::fs::read_to_string(a.path().join("index.yaml")).unwrap();
    assert!(
        index.contains("http://localhost/galera-10.5.3_0.1.0.tgz") && !index.contains("zz-copy"),
        "{index}"
    );

    let b = tempfile::tempdir().unwrap();
    std::fs::copy(
        a.path().join("wordpress-4.8.0_0.1.0.tgz"),
        b.path().join("wordpress-4.8.0_0.1.0.tgz"),
    )
    .unwrap();
    let o = ok(&kudo(
        h,
        &[
            "repo",
            "index",
            b.path().to_str().unwrap(),
            "--url",
            "https://b.example/",
            "--merge",
            a.path().join("index.yaml").to_str().unwrap(),
        ],
    ));
    assert!(o.contains("4 package version(s)"), "{o}");
    let merged = std::fs::read_to_string(b.path().join("index.yaml")).unwrap();
    // DIR's own entry wins over the merged one.
    assert!(
        merged.contains("https://b.example/wordpress-4.8.0_0.1.0.tgz"),
        "{merged}"
    );
    assert!(!merged.contains("http://localhost/wordpress"), "{merged}");
    assert!(
        merged.contains("http://localhost/galera-10.5.3_0.1.0.tgz"),
        "{merged}"
    );

    let empty = tempfile::tempdir().unwrap();
    fails(
        &kudo(h, &["repo", "index", empty.path().to_str().unwrap()]),
        "no packages discovered",
    );
}

#[test]
fn http_repository_and_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let repo = tempfile::tempdir().unwrap();
    build_tarballs(h, repo.path());
    let base = serve(repo.path().to_path_buf());
    ok(&kudo(
        h,
        &["repo", "index", repo.path().to_str().unwrap(), "--url", &base],
    ));
    ok(&kudo(h, &["repo", "add", "web", &base]));
    let found = cells(&ok(&kudo(h, &["search", "wordpress", "--repo", "web"])));
    assert_eq!(
        found,
        ["Name Operator Version App Version", "wordpress 0.1.0 4.8.0"]
    );
    fails(
        &kudo(h, &["repo", "add", "nowhere", &format!("{base}/sub")]),
        "404",
    );

    // Usage errors exit with 2.
    assert_eq!(kudo(h, &["repo", "add", "only-a-name"]).status.code(), Some(2));
    assert_eq!(kudo(h, &["repo", "frobnicate"]).status.code(), Some(2));
}
