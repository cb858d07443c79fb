//! The IO of a Pipe task (KEP-17): apply the generator Pod, wait until it is Running and Ready,
//! copy each pipe file out through `pods/exec` (`stat -c %s`, then `tar cf -`), apply the
//! Secret/ConfigMap artifacts and delete the Pod. The pure rules are in [`kudo_engine::pipe`].

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, DeleteParams};
use kudo_api::PipeSpec;
use kudo_engine::TaskOutcome;
use kudo_engine::pipe::{MAX_PIPE_FILE_SIZE, WAITER, artifact, init_command, rewrite_pod, validate_pod};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::apply::{Writer, apply_for_task};
use crate::context::Context;
use crate::reasons;

fn fatal(message: impl Into<String>) -> TaskOutcome {
    TaskOutcome::Fatal {
        reason: reasons::PIPE_TASK_ERROR.to_string(),
        message: message.into(),
    }
}

/// What one exec returned.
struct Exec {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// `None` on success, else the status message.
    failure: Option<String>,
}

/// Why an exec did not run at all.
enum ExecFailure {
    /// The cluster cannot exec into containers (no kubelet answers): retrying cannot help.
    Unavailable(String),
    /// Anything else (pod gone, network): retried.
    Other(String),
}

async fn exec(pods: &Api<Pod>, pod: &str, cmd: &[&str]) -> Result<Exec, ExecFailure> {
    let ap = AttachParams::default()
        .container(WAITER)
        .stdout(true)
        .stderr(true)
        .max_stdout_buf_size(64 * 1024)
        .max_stderr_buf_size(64 * 1024);
    let mut attached = match pods.exec(pod, cmd.iter().map(|s| s.to_string()), &ap).await {
        Ok(a) => a,
        Err(kube::Error::Api(s))
            if s.code >= 500
                && (s.message.contains("dialing backend") || s.message.contains("connection refused")) =>
        {
            return Err(ExecFailure::Unavailable(s.message.clone()));
        }
        Err(kube::Error::Api(s)) => return Err(ExecFailure::Other(s.message.clone())),
        Err(e) => return Err(ExecFailure::Other(e.to_string())),
    };
    let mut out = attached.stdout();
    let mut err = attached.stderr();
    let status = attached.take_status();
    let read_out = async {
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut b).await;
        }
        b
    };
    let read_err = async {
        let mut b = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut b).await;
        }
        b
    };
    let (stdout, stderr) = tokio::join!(read_out, read_err);
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    let _ = attached.join().await;
    let failure = match status {
        Some(s) if s.status.as_deref() == Some("Success") => None,
        Some(s) => Some(s.message.unwrap_or_else(|| "command failed".into())),
        None => Some("the exec stream ended without a status".into()),
    };
    Ok(Exec {
        stdout,
        stderr,
        failure,
    })
}

/// The first regular file in a tar archive.
fn untar_first(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut a = tar::Archive::new(data);
    for e in a.entries().map_err(|e| e.to_string())? {
        let mut e = e.map_err(|e| e.to_string())?;
        if e.header().entry_type().is_file() {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut buf).map_err(|e| e.to_string())?;
            return Ok(buf);
        }
    }
    Err("the archive holds no file".into())
}

/// Runs a Pipe task whose generator Pod was rendered (name, annotation, labels, owner set) as
/// `pod`; `artifact_names` maps each pipe key to its artifact name (`.Pipes`).
pub async fn run(
    ctx: &Context,
    task: &str,
    pipes: &[PipeSpec],
    pod: &Value,
    artifact_names: &std::collections::BTreeMap<String, String>,
    cluster: &Writer<'_>,
) -> TaskOutcome {
    if let Err(e) = validate_pod(pod, pipes) {
        return fatal(format!("task {task}: {e}"));
    }
    let mut pod = pod.clone();
    rewrite_pod(&mut pod);
    match apply_for_task(ctx, &pod, cluster).await {
        Ok(None) => {}
        Ok(Some(waiting)) => return TaskOutcome::InProgress(Some(format!("pipe pod: {waiting}"))),
        Err(o) => return o,
    }
    let ns = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let pods: Api<Pod> = Api::namespaced(ctx.acting_client(), &ns);
    let command = init_command(&pod);
    let mut artifacts = Vec::new();
    for p in pipes {
        let file = if p.file.is_empty() { &p.env_file } else { &p.file };
        let content = match copy_out(&pods, task, &ns, &name, file, &command).await {
            Ok(c) => c,
            Err(outcome) => return outcome,
        };
        let Some(artifact_name) = artifact_names.get(&p.key) else {
            return fatal(format!("task {task}: pipe key {} has no artifact name", p.key));
        };
        match artifact(p, artifact_metadata(&pod, artifact_name, &ns), &content) {
            Ok(a) => artifacts.push(a),
            Err(e) => return fatal(format!("task {task}: {e}")),
        }
    }
    crate::failpoint::hit(crate::failpoint::MID_PIPE);
    for a in &artifacts {
        match apply_for_task(ctx, a, cluster).await {
            Ok(_) => {}
            Err(o) => return o,
        }
    }
    // The files are copied: the Pod is done with. Its waiter (a shell's `sleep`, PID 1) ignores
    // SIGTERM, so the default 30 s grace period only kept it around; one second is enough.
    match pods.delete(&name, &DeleteParams::default().grace_period(1)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return TaskOutcome::Transient(format!("task {task}: deleting pipe pod {ns}/{name} failed: {e}"));
        }
    }
    TaskOutcome::Done
}

/// Copies pipe file `file` out of the generator pod `ns/name` (stat for its size, then tar):
/// its content, or the task's outcome when it cannot be had.
async fn copy_out(
    pods: &Api<Pod>,
    task: &str,
    ns: &str,
    name: &str,
    file: &str,
    command: &str,
) -> Result<Vec<u8>, TaskOutcome> {
    let unavailable = |e: String| {
        fatal(format!(
            "task {task}: cannot copy pipe file {file} out of pod {ns}/{name}: pods/exec is unavailable on this cluster ({e}); Pipe tasks need a kubelet that serves exec"
        ))
    };
    let stat = match exec(pods, name, &["stat", "-c", "%s", file]).await {
        Ok(x) => x,
        Err(ExecFailure::Unavailable(e)) => return Err(unavailable(e)),
        Err(ExecFailure::Other(e)) => {
            return Err(TaskOutcome::Transient(format!(
                "task {task}: exec of stat {file} in pod {ns}/{name} failed: {e}"
            )));
        }
    };
    if let Some(why) = stat.failure {
        return Err(fatal(format!(
            "task {task}: pipe file {file} could not be read in pod {ns}/{name} ({}{why}); the init container's command `{command}` did not produce it",
            String::from_utf8_lossy(&stat.stderr).trim_end().to_string()
                + if stat.stderr.is_empty() { "" } else { ": " },
        )));
    }
    let size_text = String::from_utf8_lossy(&stat.stdout).trim().to_string();
    let Ok(size) = size_text.parse::<u64>() else {
        return Err(fatal(format!(
            "task {task}: stat of pipe file {file} printed {size_text:?}, not a size"
        )));
    };
    if size > MAX_PIPE_FILE_SIZE {
        return Err(fatal(format!(
            "task {task}: pipe file {file} is {size} bytes, more than the maximum of {MAX_PIPE_FILE_SIZE} bytes (1 MiB)"
        )));
    }
    let tar = match exec(pods, name, &["tar", "cf", "-", file]).await {
        Ok(x) => x,
        Err(ExecFailure::Unavailable(e)) => return Err(unavailable(e)),
        Err(ExecFailure::Other(e)) => {
            return Err(TaskOutcome::Transient(format!(
                "task {task}: exec of tar {file} in pod {ns}/{name} failed: {e}"
            )));
        }
    };
    if let Some(why) = tar.failure {
        return Err(fatal(format!(
            "task {task}: copying pipe file {file} out of pod {ns}/{name} failed: {why}"
        )));
    }
    untar_first(&tar.stdout).map_err(|e| fatal(format!("task {task}: copying pipe file {file}: {e}")))
}

/// The metadata of an artifact: the generator pod's labels, owners and annotations (without the
/// pipe-pod marker), under the artifact's name.
fn artifact_metadata(pod: &Value, artifact_name: &str, ns: &str) -> Value {
    let mut md = json!({"name": artifact_name, "namespace": ns});
    for k in ["labels", "ownerReferences"] {
        if let Some(v) = pod["metadata"].get(k) {
            md[k] = v.clone();
        }
    }
    if let Some(a) = pod["metadata"]["annotations"].as_object() {
        let kept: serde_json::Map<String, Value> = a
            .iter()
            .filter(|(k, _)| k.as_str() != "kudo.dev/pipepod")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        md["annotations"] = Value::Object(kept);
    }
    md
}
