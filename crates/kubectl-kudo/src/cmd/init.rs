//! `init`: installs (or prints, or removes) KUDO's server side: the three CRDs, the `kudo-system`
//! namespace, the manager's service account bound to cluster-admin, and the manager Deployment.
//! No admission webhook and no cert-manager: the manager decides which plan runs itself.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kudo_controller::known_resource;
use serde_json::{Value, json};

use super::cluster::{ClusterOpts, connect};

/// Field manager for everything `init` applies.
const FIELD_MANAGER: &str = "kubectl-kudo-init";

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum InitOutput {
    Yaml,
    Json,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
pub enum PullPolicy {
    #[value(name = "Always")]
    Always,
    #[value(name = "IfNotPresent")]
    IfNotPresent,
    #[value(name = "Never")]
    Never,
}

impl PullPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo init --wait\n  kubectl kudo init --dry-run -o yaml\n  kubectl kudo init --dry-run -o yaml | kubectl delete -f -\n  kubectl kudo init --uninstall"
)]
pub struct InitArgs {
    /// Only set up the local $KUDO_HOME, install nothing in the cluster.
    #[arg(short = 'c', long, conflicts_with_all = ["crd_only", "upgrade", "verify", "uninstall", "wait"])]
    pub client_only: bool,
    /// Print the manifests instead of installing them (needs -o).
    #[arg(long, requires = "output")]
    pub dry_run: bool,
    /// Output format for --dry-run.
    #[arg(short = 'o', long)]
    pub output: Option<InitOutput>,
    /// Install only the CRDs.
    #[arg(long, conflicts_with_all = ["wait", "upgrade"])]
    pub crd_only: bool,
    /// Re-apply an existing installation with this version's manifests.
    #[arg(long, conflicts_with = "verify")]
    pub upgrade: bool,
    /// Check that an installation is complete, change nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify: bool,
    /// Remove everything `init` installs (Instances are deleted with their CRDs).
    #[arg(long, conflicts_with_all = ["dry_run", "upgrade", "verify", "crd_only"])]
    pub uninstall: bool,
    /// Wait until the manager is ready.
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub wait_timeout: u64,
    /// Manager image (default: the image of this version).
    #[arg(short = 'i', long, value_name = "IMAGE", conflicts_with = "version")]
    pub kudo_image: Option<String>,
    /// Version of the manager to install: the tag of the default image (`kudo-rs/manager:v<VERSION>`).
    #[arg(long, value_name = "VERSION")]
    pub version: Option<String>,
    /// Accepted for KUDO v0.19 scripts: KUDO needed a certificate for its admission webhook;
    /// kudo-rs has no webhook, so there is nothing to sign.
    #[arg(long)]
    pub unsafe_self_signed_webhook_ca: bool,
    /// Accepted for older KUDO scripts (`--webhook InstanceValidation`): kudo-rs has no webhook,
    /// the manager admits Instance changes itself.
    #[arg(long, value_name = "WEBHOOK")]
    pub webhook: Option<String>,
    /// Image pull policy of the manager (KUDO's default: Always).
    #[arg(long, value_enum, default_value = "Always")]
    pub kudo_image_pull_policy: PullPolicy,
    /// Use this existing service account (must be bound to cluster-admin) instead of creating one.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,
    /// Manager replicas: one leads (holds the Lease and reconciles), the others stand by and take
    /// over within the lease duration when its pod goes.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(i32).range(1..))]
    pub replicas: i32,
}

/// The user the manager runs as: the image's `kudo` user (`scripts/manager-image.sh`, Dockerfile).
pub const MANAGER_UID: i64 = 65532;

/// The manifests of `--dry-run -o json` as one `v1` `List`.
fn dry_run_list(ms: &[Manifest]) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": ms.iter().map(|m| &m.object).collect::<Vec<_>>(),
    })
}

/// The manager image this CLI version deploys.
pub fn default_image() -> String {
    format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION"))
}

/// The manager image of another version (`--version 0.2.0` or `v0.2.0`).
pub fn image_for_version(version: &str) -> String {
    format!("kudo-rs/manager:v{}", version.trim_start_matches('v'))
}

/// Says, once per flag, that a flag only KUDO's admission webhook needed changes nothing here.
fn explain_webhook_flags(args: &InitArgs, io: &mut crate::Io<'_>) -> Result<()> {
    if args.unsafe_self_signed_webhook_ca {
        writeln!(
            io.err,
            "--unsafe-self-signed-webhook-ca: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself), so no certificate is needed"
        )?;
    }
    if let Some(w) = &args.webhook {
        writeln!(
            io.err,
            "--webhook {w}: nothing to do, kudo-rs has no admission webhook (the manager admits Instance changes itself)"
        )?;
    }
    Ok(())
}

/// One manifest and how to reach its API.
struct Manifest {
    resource: ApiResource,
    namespaced: bool,
    object: Value,
    /// What `init` reports once this group is installed.
    group: &'static str,
}

/// Every manifest `init` installs, in install order.
fn manifests(args: &InitArgs, namespace: &str) -> Result<Vec<Manifest>> {
    let mut out = Vec::new();
    for text in kudo_api::crd_manifests() {
        let object: Value = serde_saphyr::from_str(text).context("built-in CRD manifest")?;
        out.push(Manifest {
            resource: known_resource("apiextensions.k8s.io", "CustomResourceDefinition"),
            namespaced: false,
            object,
            group: "crds",
        });
    }
    if args.crd_only {
        return Ok(out);
    }
    let labels = json!({"app": "kudo-manager"});
    out.push(Manifest {
        resource: known_resource("", "Namespace"),
        namespaced: false,
        object: json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}}}),
        group: "namespace",
    });
    let sa = args
        .service_account
        .clone()
        .unwrap_or_else(|| "kudo-manager".to_string());
    if args.service_account.is_none() {
        out.push(Manifest {
            resource: known_resource("", "ServiceAccount"),
            namespaced: true,
            object: json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": sa, "namespace": namespace, "labels": labels}}),
            group: "service accounts and other requirements for controller to run",
        });
        out.push(Manifest {
            resource: known_resource("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            namespaced: false,
            object: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "kudo-manager-rolebinding", "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]}),
            group: "service accounts and other requirements for controller to run",
        });
    }
    let image = match (&args.kudo_image, &args.version) {
        (Some(image), _) => image.clone(),
        (None, Some(v)) => image_for_version(v),
        (None, None) => default_image(),
    };
    out.push(Manifest {
        resource: known_resource("apps", "Deployment"),
        namespaced: true,
        object: json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kudo-controller-manager", "namespace": namespace,
            "labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"app": "kudo-manager", "control-plane": "controller-manager"}},
                "spec": {
                    "serviceAccountName": sa,
                    "terminationGracePeriodSeconds": 10,
                    // The manager only talks to the API server and serves HTTP: it needs no
                    // root, no capability and no writable file (it logs to stderr).
                    "securityContext": {"runAsNonRoot": true, "runAsUser": MANAGER_UID,
                                        "runAsGroup": MANAGER_UID,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "manager",
                        "image": image,
                        "imagePullPolicy": args.kudo_image_pull_policy.as_str(),
                        // Probes reach the pod IP, so the metrics server listens on all
                        // addresses here (its own default is loopback).
                        "args": ["manager", "--metrics-address", "0.0.0.0:8080",
                                 "--leader-elect=true", "--lease-name", "kudo-manager"],
                        "env": [
                            {"name": "KUDO_POD_NAME",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "KUDO_POD_NAMESPACE",
                             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                        ],
                        "ports": [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                                          "initialDelaySeconds": 5, "periodSeconds": 10},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                                           "periodSeconds": 5},
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false,
                                            "readOnlyRootFilesystem": true,
                                            "capabilities": {"drop": ["ALL"]}}
                    }]
                }
            }
        }}),
        group: "kudo controller",
    });
    Ok(out)
}

fn api_for(client: &kube::Client, m: &Manifest) -> Api<DynamicObject> {
    if m.namespaced {
        let ns = m.object["metadata"]["namespace"].as_str().unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &m.resource)
    } else {
        Api::all_with(client.clone(), &m.resource)
    }
}

fn name_of(m: &Manifest) -> String {
    m.object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub async fn run(opts: &ClusterOpts, args: InitArgs, io: &mut crate::Io<'_>) -> Result<ExitCode> {
    let home = opts.home_dir();
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| "kudo-system".to_string());
    explain_webhook_flags(&args, io)?;
    if args.dry_run {
        let ms = manifests(&args, &namespace)?;
        match args.output.unwrap_or(InitOutput::Yaml) {
            InitOutput::Yaml => {
                for m in &ms {
                    writeln!(io.out, "---")?;
                    write!(io.out, "{}", serde_saphyr::to_string(&m.object)?)?;
                }
            }
            InitOutput::Json => {
                // A `v1` List, which `kubectl apply -f -` takes (a bare array it rejects).
                writeln!(io.out, "{}", serde_json::to_string_pretty(&dry_run_list(&ms))?)?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.verify && !args.uninstall {
        ensure_home(&home)?;
        writeln!(io.out, "$KUDO_HOME has been configured at {}", home.display())?;
    }
    if args.client_only {
        return Ok(ExitCode::SUCCESS);
    }
    let cluster = connect(opts).await?;
    let ms = manifests(&args, &namespace)?;
    if args.uninstall {
        for m in ms.iter().rev() {
            let name = name_of(m);
            match api_for(&cluster.client, m)
                .delete(&name, &DeleteParams::background())
                .await
            {
                Ok(_) => writeln!(
                    io.out,
                    "{} {name} deleted",
                    m.object["kind"].as_str().unwrap_or_default().to_lowercase()
                )?,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("cannot delete {name}")),
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut missing = Vec::new();
    for m in &ms {
        if api_for(&cluster.client, m).get_opt(&name_of(m)).await?.is_none() {
            missing.push(format!(
                "{} {}",
                m.object["kind"].as_str().unwrap_or_default(),
                name_of(m)
            ));
        }
    }
    if args.verify {
        if missing.is_empty() {
            writeln!(io.out, "✅ KUDO is installed in namespace {namespace}")?;
            return Ok(ExitCode::SUCCESS);
        }
        writeln!(
            io.err,
            "KUDO installation is incomplete; missing: {}",
            missing.join(", ")
        )?;
        return Ok(ExitCode::from(1));
    }
    if missing.is_empty() && !args.upgrade && !args.crd_only {
        bail!("KUDO is already installed in namespace {namespace}. Did you mean to use --upgrade?");
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut reported = Vec::new();
    for m in &ms {
        let name = name_of(m);
        api_for(&cluster.client, m)
            .patch(&name, &pp, &Patch::Apply(&m.object))
            .await
            .with_context(|| {
                format!(
                    "cannot install {} {name}",
                    m.object["kind"].as_str().unwrap_or_default()
                )
            })?;
        if !reported.contains(&m.group)
            && ms.iter().rev().find(|x| x.group == m.group).map(name_of) == Some(name)
        {
            writeln!(io.out, "✅ installed {}", m.group)?;
            reported.push(m.group);
        }
    }
    if args.wait && !args.crd_only {
        writeln!(io.out, "⌛Waiting for KUDO controller to be ready...")?;
        wait_ready(
            &cluster.client,
            &namespace,
            Duration::from_secs(args.wait_timeout),
        )
        .await?;
        writeln!(io.out, "✅ KUDO is ready!")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn ensure_home(home: &std::path::Path) -> Result<()> {
    let repo_dir = home.join("repository");
    std::fs::create_dir_all(&repo_dir).with_context(|| format!("cannot create {}", repo_dir.display()))?;
    let file = repo_dir.join("repositories.yaml");
    if !file.exists() {
        std::fs::write(&file, "repoVersion: v1\ncontext: \"\"\nrepositories: []\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}

async fn wait_ready(client: &kube::Client, namespace: &str, timeout: Duration) -> Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(d) = api.get_opt("kudo-controller-manager").await? {
            let want = d.spec.replicas.unwrap_or(1);
            let st = d.status.unwrap_or_default();
            if st.available_replicas.unwrap_or(0) >= want && st.updated_replicas.unwrap_or(0) >= want {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "timed out after {}s waiting for the KUDO manager to become available",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        init: InitArgs,
    }

    #[test]
    fn dry_run_manifests_reference_this_versions_image_and_no_webhook() {
        let t = T::parse_from(["init"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let kinds: Vec<&str> = ms.iter().map(|m| m.object["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Namespace",
                "ServiceAccount",
                "ClusterRoleBinding",
                "Deployment"
            ]
        );
        let image = ms[6].object["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap();
        assert_eq!(image, format!("kudo-rs/manager:v{}", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn manager_runs_as_non_root_read_only_without_capabilities_and_replicates() {
        let ms = manifests(&T::parse_from(["init"]).init, "kudo-system").unwrap();
        let pod = &ms[6].object["spec"]["template"]["spec"];
        assert_eq!(ms[6].object["spec"]["replicas"], 1);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], MANAGER_UID);
        let c = &pod["containers"][0]["securityContext"];
        assert_eq!(c["readOnlyRootFilesystem"], true);
        assert_eq!(c["allowPrivilegeEscalation"], false);
        assert_eq!(c["capabilities"]["drop"], json!(["ALL"]));
        let ms = manifests(&T::parse_from(["init", "--replicas", "2"]).init, "kudo-system").unwrap();
        assert_eq!(ms[6].object["spec"]["replicas"], 2);
        assert!(T::try_parse_from(["init", "--replicas", "0"]).is_err());
    }

    #[test]
    fn manager_deployment_serves_probes_on_all_addresses_and_knows_its_pod() {
        let t = T::parse_from(["init"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let c = &ms[6].object["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args[0], "manager");
        let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
        assert_eq!(after("--metrics-address"), Some("0.0.0.0:8080"));
        assert_eq!(after("--lease-name"), Some("kudo-manager"));
        assert!(args.contains(&"--leader-elect=true"));
        // Every flag the Deployment passes is one `kubectl kudo manager` accepts.
        #[derive(Parser)]
        struct M {
            #[command(flatten)]
            m: super::super::manager::ManagerArgs,
        }
        let parsed = M::try_parse_from(args.iter().copied()).expect("manager flags parse");
        assert!(parsed.m.leader_elect);
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
        assert_eq!(c["env"][1]["name"], "KUDO_POD_NAMESPACE");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], "metrics");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
    }

    #[test]
    fn pull_policy_takes_kubernetes_spelling() {
        // KUDO pulled `Always` by default.
        let t = T::parse_from(["init"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::Always);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        assert_eq!(
            ms[6].object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "Always"
        );
        let t = T::parse_from(["init", "--kudo-image-pull-policy", "IfNotPresent"]);
        assert_eq!(t.init.kudo_image_pull_policy, PullPolicy::IfNotPresent);
    }

    /// Issue 14, bug 4: `--dry-run -o json` is a `v1` List, not a bare array.
    #[test]
    fn dry_run_json_is_a_v1_list() {
        let t = T::parse_from(["init", "--dry-run", "-o", "json"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        let list = dry_run_list(&ms);
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().unwrap().len(), ms.len());
        assert_eq!(list["items"][6]["kind"], "Deployment");
    }

    #[test]
    fn version_chooses_the_image_tag_and_conflicts_with_an_image() {
        let image = |t: &T| {
            manifests(&t.init, "kudo-system").unwrap().last().unwrap().object["spec"]["template"]["spec"]
                ["containers"][0]["image"]
                .clone()
        };
        assert_eq!(
            image(&T::parse_from(["init", "--version", "0.2.0"])),
            "kudo-rs/manager:v0.2.0"
        );
        assert_eq!(
            image(&T::parse_from(["init", "--version", "v0.3.1"])),
            "kudo-rs/manager:v0.3.1"
        );
        assert!(T::try_parse_from(["init", "--version", "0.2.0", "-i", "x:y"]).is_err());
        // webhook flags change nothing in what is installed
        let plain = manifests(&T::parse_from(["init"]).init, "kudo-system").unwrap();
        let hooked = manifests(
            &T::parse_from([
                "init",
                "--unsafe-self-signed-webhook-ca",
                "--webhook",
                "InstanceValidation",
            ])
            .init,
            "kudo-system",
        )
        .unwrap();
        let objects = |ms: &[Manifest]| ms.iter().map(|m| m.object.clone()).collect::<Vec<_>>();
        assert_eq!(objects(&plain), objects(&hooked));
    }

    #[test]
    fn crd_only_and_custom_service_account() {
        let t = T::parse_from(["init", "--crd-only"]);
        assert_eq!(manifests(&t.init, "kudo-system").unwrap().len(), 3);
        let t = T::parse_from(["init", "--service-account", "mine"]);
        let ms = manifests(&t.init, "kudo-system").unwrap();
        assert!(ms.iter().all(|m| m.object["kind"] != "ServiceAccount"));
        assert_eq!(
            ms.last().unwrap().object["spec"]["template"]["spec"]["serviceAccountName"],
            "mine"
        );
    }
}
