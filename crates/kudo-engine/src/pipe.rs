//! The pure parts of a Pipe task (KEP-17): checking and rewriting the generator Pod, and turning
//! the files copied out of it into the Secret/ConfigMap artifacts. The controller does the IO
//! (apply the Pod, wait for it, `pods/exec` `stat` and `tar cf -`, apply the artifacts).
//!
//! KUDO's rules: the rendered Pod has no `containers`, exactly one init container, exactly one
//! volume, of type `emptyDir`, mounted by the init container; `restartPolicy` empty or
//! `OnFailure`; every pipe file lies under that mount path and its base name matches
//! `[-._a-zA-Z0-9]+`. Files may be at most [`MAX_PIPE_FILE_SIZE`] bytes.

use std::collections::BTreeMap;

use kudo_api::PipeSpec;
use serde_json::{Map, Value, json};

/// Largest pipe file KUDO copies: 1 MiB.
pub const MAX_PIPE_FILE_SIZE: u64 = 1024 * 1024;

/// Name of the main container added to the generator Pod; files are copied out through it.
pub const WAITER: &str = "waiter";

fn base_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// Why a rendered generator Pod breaks KUDO's constraints ([`validate_pod`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipePodError {
    /// The Pod declares `containers`; the manager adds its own waiter container.
    #[error("pipe pod should define no containers, only one init container")]
    HasContainers,
    /// The Pod does not have exactly one init container (holds how many it has).
    #[error("pipe pod should define exactly one init container, found {0}")]
    InitContainers(usize),
    /// The Pod does not have exactly one volume, or it is not an `emptyDir`.
    #[error("pipe pod should define exactly one volume of type emptyDir")]
    Volume,
    /// `restartPolicy` is neither empty nor `OnFailure` (holds the one given).
    #[error("pipe pod restartPolicy must be empty or OnFailure, found {0}")]
    RestartPolicy(String),
    /// The init container does not mount the `emptyDir` volume (holds the volume's name).
    #[error("pipe pod init container should mount the emptyDir volume {0:?}")]
    Mount(String),
    /// A pipe file lies outside the `emptyDir` mount path.
    #[error("pipe file {path} should be a sub-directory of the pipe pod's emptyDir mount path {mount}")]
    OutsideMount {
        /// The pipe file's path as the task gives it.
        path: String,
        /// The init container's mount path of the `emptyDir`.
        mount: String,
    },
    /// A pipe file's base name has characters other than `[-._a-zA-Z0-9]`.
    #[error("pipe file {path}: its name {base:?} must match [-._a-zA-Z0-9]+")]
    FileName {
        /// The pipe file's path as the task gives it.
        path: String,
        /// Its base name.
        base: String,
    },
}

/// Why an env file cannot be read ([`parse_env_file`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileError {
    /// The file's bytes are not UTF-8.
    #[error("env file is not valid UTF-8")]
    NotUtf8,
    /// A line's key is not a valid environment variable name.
    #[error("line {line}: {key:?} is not a valid environment variable name")]
    InvalidName {
        /// The line number, from 1.
        line: usize,
        /// The key as written.
        key: String,
    },
}

/// Why a pipe artifact cannot be built ([`artifact`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// An `envFile`'s content cannot be parsed.
    #[error("env file {file}: {source}")]
    EnvFile {
        /// The `envFile` path in the generator Pod.
        file: String,
        /// What is wrong with its content.
        source: EnvFileError,
    },
}

/// Checks the rendered generator Pod against KUDO's constraints; `Err` is the reason.
pub fn validate_pod(pod: &Value, pipes: &[PipeSpec]) -> Result<(), PipePodError> {
    let spec = &pod["spec"];
    let count = |k: &str| spec[k].as_array().map(Vec::len).unwrap_or(0);
    if count("containers") != 0 {
        return Err(PipePodError::HasContainers);
    }
    if count("initContainers") != 1 {
        return Err(PipePodError::InitContainers(count("initContainers")));
    }
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    if volumes.len() != 1 || volumes[0].get("emptyDir").is_none() {
        return Err(PipePodError::Volume);
    }
    let volume = volumes[0]["name"].as_str().unwrap_or("");
    match spec["restartPolicy"].as_str().unwrap_or("") {
        "" | "OnFailure" => {}
        other => {
            return Err(PipePodError::RestartPolicy(other.to_string()));
        }
    }
    let init = &spec["initContainers"][0];
    let mount = init["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == volume))
        .and_then(|m| m["mountPath"].as_str())
        .ok_or_else(|| PipePodError::Mount(volume.to_string()))?;
    let mount = mount.trim_end_matches('/');
    for p in pipes {
        let path = if p.file.is_empty() { &p.env_file } else { &p.file };
        if !path.starts_with(&format!("{mount}/")) {
            return Err(PipePodError::OutsideMount {
                path: path.to_string(),
                mount: mount.to_string(),
            });
        }
        let base = path.rsplit('/').next().unwrap_or("");
        if !base_name_ok(base) {
            return Err(PipePodError::FileName {
                path: path.to_string(),
                base: base.to_string(),
            });
        }
    }
    Ok(())
}

/// Rewrites a validated generator Pod as KUDO does: `restartPolicy: OnFailure` and a main
/// container [`WAITER`] (`sleep infinity`) mounting the emptyDir at the same path, so the files
/// outlive the init container and can be copied out. The name and the `kudo.dev/pipepod`
/// annotation are set when rendering.
///
/// The waiter runs the init container's own image with its pull policy, where KUDO used an
/// untagged `busybox`: that is an `Always` pull of a second image, which never starts on a cluster
/// without a registry (air-gapped, or images only loaded into the node) and needlessly pulls
/// `latest` elsewhere. The generator's image is on the node already; it needs `sh`, `sleep`,
/// `stat` and `tar` (the copy runs them by exec), as generator images (busybox, openssl, a JRE
/// distribution) have.
pub fn rewrite_pod(pod: &mut Value) {
    let volume = pod["spec"]["volumes"][0]["name"].clone();
    let mount = pod["spec"]["initContainers"][0]["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == volume))
        .cloned()
        .unwrap_or(Value::Null);
    let init = &pod["spec"]["initContainers"][0];
    let mut waiter = json!({
        "name": WAITER,
        "image": init["image"].clone(),
        "command": ["/bin/sh", "-c", "sleep infinity"],
        "volumeMounts": [{"name": volume, "mountPath": mount["mountPath"]}],
    });
    if let Some(policy) = init.get("imagePullPolicy") {
        waiter["imagePullPolicy"] = policy.clone();
    }
    pod["spec"]["restartPolicy"] = json!("OnFailure");
    pod["spec"]["containers"] = json!([waiter]);
}

/// The init container's command line, for messages.
pub fn init_command(pod: &Value) -> String {
    let c = &pod["spec"]["initContainers"][0];
    let words: Vec<String> = ["command", "args"]
        .iter()
        .flat_map(|k| c[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|w| w.as_str().map(String::from))
        .collect();
    if words.is_empty() {
        "(the image's entrypoint)".into()
    } else {
        words.join(" ")
    }
}

/// Parses an env file as `kubectl create … --from-env-file` does: UTF-8, a leading BOM removed,
/// blank lines and `#` comments skipped, `KEY=VALUE` (leading whitespace of the line trimmed),
/// a bare `KEY` is skipped (kubectl would take it from its own environment). `Err` names the line.
pub fn parse_env_file(data: &[u8]) -> Result<BTreeMap<String, String>, EnvFileError> {
    let text = std::str::from_utf8(data).map_err(|_| EnvFileError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let valid = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(EnvFileError::InvalidName {
                line: i + 1,
                key: key.to_string(),
            });
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

/// Builds the Secret or ConfigMap for one pipe entry from the copied file. `metadata` carries
/// name, namespace, labels, annotations and owner references already. `file` content goes under
/// the file's base name (Secret `data`, ConfigMap `binaryData`, both base64); `envFile` content
/// is parsed into keys (Secret `data` base64, ConfigMap `data` as text).
pub fn artifact(pipe: &PipeSpec, metadata: Value, content: &[u8]) -> Result<Value, ArtifactError> {
    use base64_lite::encode;
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": pipe.kind,
        "metadata": metadata,
    });
    if !pipe.file.is_empty() {
        let base = pipe.file.rsplit('/').next().unwrap_or(&pipe.file).to_string();
        let mut m = Map::new();
        m.insert(base, json!(encode(content)));
        if pipe.kind == "Secret" {
            obj["type"] = json!("Opaque");
            obj["data"] = Value::Object(m);
        } else {
            obj["binaryData"] = Value::Object(m);
        }
    } else {
        let vars = parse_env_file(content).map_err(|source| ArtifactError::EnvFile {
            file: pipe.env_file.clone(),
            source,
        })?;
        if pipe.kind == "Secret" {
            obj["type"] = json!("Opaque");
            obj["data"] = vars
                .into_iter()
                .map(|(k, v)| (k, json!(encode(v.as_bytes()))))
                .collect();
        } else {
            obj["data"] = vars.into_iter().map(|(k, v)| (k, json!(v))).collect();
        }
    }
    Ok(obj)
}

/// Standard base64 (with padding), enough for artifact data without another dependency.
mod base64_lite {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(data: &[u8]) -> String {
        let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
        for chunk in data.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe(file: &str, env: &str, kind: &str, key: &str) -> PipeSpec {
        PipeSpec {
            file: file.into(),
            env_file: env.into(),
            kind: kind.into(),
            key: key.into(),
        }
    }

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "out", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": "busybox", "command": ["/bin/sh", "-c"],
                "args": ["touch /tmp/a"], "volumeMounts": [{"name": "out", "mountPath": "/tmp"}]}],
        }})
    }

    #[test]
    fn validation_follows_kudo() {
        let ok = [pipe("/tmp/a", "", "Secret", "a")];
        assert_eq!(validate_pod(&pod(), &ok), Ok(()));
        let mut p = pod();
        p["spec"]["containers"] = json!([{"name": "x"}]);
        assert!(
            validate_pod(&p, &ok)
                .unwrap_err()
                .to_string()
                .contains("no containers")
        );
        let mut p = pod();
        p["spec"]["restartPolicy"] = json!("Always");
        assert!(
            validate_pod(&p, &ok)
                .unwrap_err()
                .to_string()
                .contains("restartPolicy")
        );
        let mut p = pod();
        p["spec"]["volumes"] = json!([{"name": "out", "hostPath": {"path": "/x"}}]);
        assert!(
            validate_pod(&p, &ok)
                .unwrap_err()
                .to_string()
                .contains("emptyDir")
        );
        let e = validate_pod(&pod(), &[pipe("/etc/a", "", "Secret", "a")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("/etc/a") && e.contains("/tmp"), "{e}");
        let e = validate_pod(&pod(), &[pipe("/tmp/a b", "", "Secret", "a")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[-._a-zA-Z0-9]+"), "{e}");
    }

    #[test]
    fn rewrite_adds_the_waiter() {
        let mut p = pod();
        rewrite_pod(&mut p);
        assert_eq!(p["spec"]["restartPolicy"], "OnFailure");
        assert_eq!(p["spec"]["containers"][0]["name"], WAITER);
        assert_eq!(
            p["spec"]["containers"][0]["volumeMounts"][0],
            json!({"name": "out", "mountPath": "/tmp"})
        );
        assert_eq!(init_command(&p), "/bin/sh -c touch /tmp/a");
    }

    #[test]
    fn the_waiter_runs_the_generators_image_with_its_pull_policy() {
        let mut p = pod();
        p["spec"]["initContainers"][0]["image"] = json!("mesosphere/kafka:1.1.0-2.4.0");
        rewrite_pod(&mut p);
        let waiter = &p["spec"]["containers"][0];
        assert_eq!(waiter["image"], "mesosphere/kafka:1.1.0-2.4.0");
        assert!(waiter.get("imagePullPolicy").is_none());
        let mut p = pod();
        p["spec"]["initContainers"][0]["imagePullPolicy"] = json!("Never");
        rewrite_pod(&mut p);
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(p["spec"]["containers"][0]["image"], "busybox");
    }

    #[test]
    fn artifacts() {
        let md = json!({"name": "n"});
        let s = artifact(&pipe("/tmp/tls.key", "", "Secret", "k"), md.clone(), b"abcd").unwrap();
        assert_eq!(s["data"]["tls.key"], "YWJjZA==");
        assert_eq!(s["type"], "Opaque");
        let c = artifact(&pipe("/tmp/f.bin", "", "ConfigMap", "k"), md.clone(), b"ab").unwrap();
        assert_eq!(c["binaryData"]["f.bin"], "YWI=");
        let env = b"\xef\xbb\xbf# comment\nA=1\n\n  B=x=y\nBARE\n";
        let c = artifact(&pipe("", "/tmp/v.env", "ConfigMap", "k"), md.clone(), env).unwrap();
        assert_eq!(c["data"], json!({"A": "1", "B": "x=y"}));
        let s = artifact(&pipe("", "/tmp/v.env", "Secret", "k"), md.clone(), b"A=abc\n").unwrap();
        assert_eq!(s["data"], json!({"A": "YWJj"}));
        let e = artifact(&pipe("", "/tmp/v.env", "Secret", "k"), md, b"1A=x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/tmp/v.env") && e.contains("line 1"), "{e}");
    }
}
