//! Registry credentials as users already have them: Docker's `config.json`
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`; also the content of a
//! `kubernetes.io/dockerconfigjson` pull secret), its credential helpers (`credHelpers` per
//! registry, `credsStore` for all, run as `docker-credential-<name> get|store|erase`), and `auths`
//! entries (`auth`: base64 `user:password`, or `username`/`password`).
//!
//! Written here rather than taken from a crate: `registry login`/`logout` must also *write* the
//! file (keeping every field it does not own) and call the helpers' `store`/`erase`, and the
//! crates that read the format only read it; one module holds both directions, so reading and
//! writing agree on how a registry is matched (`host[:port]`, with or without `https://` and
//! a path, as Docker writes `https://index.docker.io/v1/`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::error::OciError;

/// A user name and secret for one registry, and where they came from (for messages).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub secret: String,
    /// `FILE` or `credential helper docker-credential-NAME`.
    pub origin: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({:?} from {})", self.username, self.origin)
    }
}

impl Credential {
    /// `user "NAME" from ORIGIN`: what messages say, never the secret.
    pub fn describe(&self) -> String {
        format!("user {:?} from {}", self.username, self.origin)
    }
}

/// A Docker config file's content (unknown fields kept as they are).
#[derive(Clone, Debug, Default)]
pub struct DockerConfig {
    /// Where it was read from (`None`: built in memory, e.g. from a pull secret).
    pub path: Option<PathBuf>,
    doc: Map<String, Value>,
}

/// `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
pub fn default_config_path() -> PathBuf {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("config.json");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".docker").join("config.json")
}

/// `host[:port]` of a config key: scheme and path removed, lower-cased.
fn registry_key(key: &str) -> String {
    let k = key.trim();
    let k = k.split_once("://").map_or(k, |(_, rest)| rest);
    k.split('/').next().unwrap_or("").to_ascii_lowercase()
}

impl DockerConfig {
    /// Reads the file at `path`; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<DockerConfig, OciError> {
        match std::fs::read(path) {
            Ok(bytes) => DockerConfig::parse(&bytes, Some(path.to_path_buf())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DockerConfig {
                path: Some(path.to_path_buf()),
                doc: Map::new(),
            }),
            Err(e) => Err(OciError::io(path, e)),
        }
    }

    /// Reads the default file ([`default_config_path`]).
    pub fn load_default() -> Result<DockerConfig, OciError> {
        DockerConfig::load(&default_config_path())
    }

    /// Parses a config document (a file's bytes, or a `.dockerconfigjson` Secret value).
    pub fn parse(bytes: &[u8], path: Option<PathBuf>) -> Result<DockerConfig, OciError> {
        let label = path
            .as_ref()
            .map_or("the Docker config".to_string(), |p| p.display().to_string());
        let doc = match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(OciError::Credentials(format!("{label}: not a JSON object"))),
            Err(e) => return Err(OciError::Credentials(format!("{label}: {e}"))),
        };
        Ok(DockerConfig { path, doc })
    }

    /// The content of a `kubernetes.io/dockerconfigjson` Secret (`.dockerconfigjson`), named
    /// `origin` in messages (`Secret NS/NAME`). Only `auths` is read, as the kubelet reads a pull
    /// secret: `credHelpers` and `credsStore` are dropped, since a Secret's content must not choose a
    /// program for the manager to run.
    pub fn from_pull_secret(bytes: &[u8], origin: &str) -> Result<DockerConfig, OciError> {
        let mut config = DockerConfig::parse(bytes, Some(PathBuf::from(origin)))?;
        config.doc.remove("credHelpers");
        config.doc.remove("credsStore");
        Ok(config)
    }

    fn label(&self) -> String {
        self.path
            .as_ref()
            .map_or("the Docker config".to_string(), |p| p.display().to_string())
    }

    fn object(&self, key: &str) -> Option<&Map<String, Value>> {
        self.doc.get(key).and_then(Value::as_object)
    }

    /// The credential helper for `registry`: `credHelpers[registry]`, else `credsStore`.
    pub fn helper_for(&self, registry: &str) -> Option<String> {
        let want = registry_key(registry);
        let per_registry = self.object("credHelpers").and_then(|m| {
            m.iter()
                .find(|(k, _)| registry_key(k) == want)
                .and_then(|(_, v)| v.as_str())
        });
        per_registry
            .or_else(|| self.doc.get("credsStore").and_then(Value::as_str))
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    }

    /// The credentials for `registry` (`host[:port]`): its helper's, else its `auths` entry;
    /// `None` when there are none (anonymous access).
    pub fn credentials_for(&self, registry: &str) -> Result<Option<Credential>, OciError> {
        if let Some(helper) = self.helper_for(registry)
            && let Some(c) = helper_get(&helper, registry)?
        {
            return Ok(Some(c));
        }
        let want = registry_key(registry);
        let Some((_, entry)) = self
            .object("auths")
            .and_then(|m| m.iter().find(|(k, _)| registry_key(k) == want))
        else {
            return Ok(None);
        };
        self.decode_entry(registry, entry)
    }

    fn decode_entry(&self, registry: &str, entry: &Value) -> Result<Option<Credential>, OciError> {
        let bad =
            |why: &str| OciError::Credentials(format!("{}: auths entry of {registry}: {why}", self.label()));
        let field = |k: &str| entry.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let (username, secret) = if let Some(auth) = field("auth") {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| bad("`auth` is not base64"))?;
            let text = String::from_utf8(raw).map_err(|_| bad("`auth` is not UTF-8"))?;
            let (u, p) = text
                .split_once(':')
                .ok_or_else(|| bad("`auth` is not user:password"))?;
            (u.to_string(), p.to_string())
        } else if let (Some(u), Some(p)) = (field("username"), field("password")) {
            (u.to_string(), p.to_string())
        } else if field("identitytoken").is_some() {
            return Err(bad(
                "it holds an identity token (OAuth refresh token), which kudo-rs cannot use; log in \
                 with a user name and password or token: kubectl kudo registry login",
            ));
        } else {
            return Ok(None);
        };
        Ok(Some(Credential {
            username,
            secret,
            origin: self.label(),
        }))
    }

    /// Stores `username`/`secret` for `registry`: through its credential helper when one is
    /// configured, else as an `auths` entry. Returns where they went. Call [`DockerConfig::save`]
    /// afterwards.
    pub fn store(&mut self, registry: &str, username: &str, secret: &str) -> Result<String, OciError> {
        self.remove_auths(registry);
        if let Some(helper) = self.helper_for(registry) {
            let input = json!({"ServerURL": registry, "Username": username, "Secret": secret});
            run_helper(&helper, "store", &input.to_string())?;
            return Ok(format!("credential helper docker-credential-{helper}"));
        }
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{secret}"));
        let auths = self
            .doc
            .entry("auths")
            .or_insert_with(|| Value::Object(Map::new()));
        if !auths.is_object() {
            *auths = Value::Object(Map::new());
        }
        if let Some(m) = auths.as_object_mut() {
            m.insert(registry.to_string(), json!({ "auth": auth }));
        }
        Ok(self.label())
    }

    /// Forgets the credentials of `registry` (its `auths` entries and, with a helper, the
    /// helper's). Returns whether anything was there.
    pub fn erase(&mut self, registry: &str) -> Result<bool, OciError> {
        let mut found = self.remove_auths(registry);
        if let Some(helper) = self.helper_for(registry) {
            found |= helper_get(&helper, registry)?.is_some();
            if found {
                run_helper(&helper, "erase", registry)?;
            }
        }
        Ok(found)
    }

    fn remove_auths(&mut self, registry: &str) -> bool {
        let want = registry_key(registry);
        let Some(m) = self.doc.get_mut("auths").and_then(Value::as_object_mut) else {
            return false;
        };
        let before = m.len();
        m.retain(|k, _| registry_key(k) != want);
        before != m.len()
    }

    /// Writes the file back (directory `0700`, file `0600`, as Docker does), atomically.
    pub fn save(&self) -> Result<PathBuf, OciError> {
        let path = self.path.clone().unwrap_or_else(default_config_path);
        let dir = path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir)?;
        let text = serde_json::to_string_pretty(&Value::Object(self.doc.clone())).expect("JSON serialises");
        let tmp = dir.join(".config.json.kudo-tmp");
        write_private(&tmp, format!("{text}\n").as_bytes())?;
        std::fs::rename(&tmp, &path).map_err(|e| OciError::io(&path, e))?;
        Ok(path)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), OciError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).map_err(|e| OciError::io(dir, e))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path).map_err(|e| OciError::io(path, e))?;
    f.write_all(bytes).map_err(|e| OciError::io(path, e))
}

/// Runs `docker-credential-<helper> <verb>` with `input` on stdin; its stdout, or the error
/// naming the helper and what it printed.
fn run_helper(helper: &str, verb: &str, input: &str) -> Result<String, OciError> {
    let program = format!("docker-credential-{helper}");
    let mut child = Command::new(&program)
        .arg(verb)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| OciError::Credentials(format!("cannot run the credential helper {program}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading gives a broken pipe; its exit status says more.
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| OciError::Credentials(format!("credential helper {program}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let said = format!("{}{}", stdout.trim(), String::from_utf8_lossy(&out.stderr).trim());
        return Err(OciError::Credentials(format!(
            "{program} {verb} failed ({}): {said}",
            out.status
        )));
    }
    Ok(stdout)
}

/// `docker-credential-<helper> get`: `None` when it has nothing for the registry.
fn helper_get(helper: &str, registry: &str) -> Result<Option<Credential>, OciError> {
    let program = format!("docker-credential-{helper}");
    let out = match run_helper(helper, "get", registry) {
        Ok(out) => out,
        // The helpers' protocol: "credentials not found" on a miss.
        Err(OciError::Credentials(m)) if m.to_ascii_lowercase().contains("credentials not found") => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let v: Value = serde_json::from_str(&out)
        .map_err(|e| OciError::Credentials(format!("{program} get printed no JSON object: {e}")))?;
    let field = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (username, secret) = (field("Username"), field("Secret"));
    if username == "<token>" {
        return Err(OciError::Credentials(format!(
            "{program} holds an identity token for {registry}, which kudo-rs cannot use"
        )));
    }
    if secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(Credential {
        username,
        secret,
        origin: format!("credential helper {program}"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> DockerConfig {
        DockerConfig::parse(text.as_bytes(), Some("/c/config.json".into())).unwrap()
    }

    #[test]
    fn auths_entries_match_the_registry_however_written() {
        let c = config(
            r#"{"auths": {"https://reg.example:5000/v1/": {"auth": "dTpw"},
                "other.example": {"username": "a", "password": "b"},
                "empty.example": {}, "tok.example": {"identitytoken": "x"}},
                "HttpHeaders": {"X": "y"}}"#,
        );
        let got = c.credentials_for("reg.example:5000").unwrap().unwrap();
        assert_eq!((got.username.as_str(), got.secret.as_str()), ("u", "p"));
        assert_eq!(got.describe(), "user \"u\" from /c/config.json");
        assert_eq!(c.credentials_for("other.example").unwrap().unwrap().secret, "b");
        assert!(c.credentials_for("reg.example").unwrap().is_none());
        assert!(c.credentials_for("empty.example").unwrap().is_none());
        let e = c.credentials_for("tok.example").unwrap_err().to_string();
        assert!(
            e.contains("identity token") && e.contains("/c/config.json"),
            "{e}"
        );
        let bad = config(r#"{"auths": {"h": {"auth": "!!"}}}"#);
        assert!(
            bad.credentials_for("h")
                .unwrap_err()
                .to_string()
                .contains("not base64")
        );
    }

    #[test]
    fn store_and_erase_keep_other_fields_and_write_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docker/config.json");
        let mut c = DockerConfig::load(&path).unwrap();
        assert!(c.credentials_for("h:1").unwrap().is_none());
        c.doc.insert("HttpHeaders".into(), json!({"X": "y"}));
        assert_eq!(
            c.store("h:1", "me", "s3cret").unwrap(),
            path.display().to_string()
        );
        c.save().unwrap();
        let mut back = DockerConfig::load(&path).unwrap();
        assert_eq!(back.credentials_for("h:1").unwrap().unwrap().secret, "s3cret");
        assert_eq!(back.doc["HttpHeaders"], json!({"X": "y"}));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(back.erase("https://h:1").unwrap());
        assert!(!back.erase("h:1").unwrap());
        back.save().unwrap();
        assert!(
            DockerConfig::load(&path)
                .unwrap()
                .credentials_for("h:1")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_pull_secret_names_no_helper() {
        let doc =
            r#"{"auths": {"h:1": {"auth": "dTpw"}}, "credsStore": "evil", "credHelpers": {"h:1": "x"}}"#;
        let c = DockerConfig::from_pull_secret(doc.as_bytes(), "Secret ns/regcred").unwrap();
        assert_eq!(c.helper_for("h:1"), None);
        let got = c.credentials_for("h:1").unwrap().unwrap();
        assert_eq!(got.describe(), "user \"u\" from Secret ns/regcred");
        let e = DockerConfig::from_pull_secret(b"[]", "Secret ns/regcred").unwrap_err();
        assert_eq!(e.to_string(), "credentials: Secret ns/regcred: not a JSON object");
    }

    #[test]
    fn helpers_are_chosen_per_registry_then_for_all() {
        let c = config(r#"{"credHelpers": {"a.example": "pass"}, "credsStore": "secretservice"}"#);
        assert_eq!(c.helper_for("a.example").as_deref(), Some("pass"));
        assert_eq!(c.helper_for("b.example").as_deref(), Some("secretservice"));
        assert_eq!(config("{}").helper_for("a.example"), None);
        // A helper that is not installed is an error naming it, not anonymous access.
        let e = config(r#"{"credsStore": "kudo-test-missing"}"#)
            .credentials_for("h")
            .unwrap_err()
            .to_string();
        assert!(e.contains("docker-credential-kudo-test-missing"), "{e}");
    }
}
