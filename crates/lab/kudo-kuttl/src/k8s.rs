//! Dynamic access to arbitrary kinds: test files may name any built-in or custom resource, so
//! every object goes through discovery (`apiVersion` + `kind` → resource and scope) and is handled
//! as untyped JSON.

use kudo_api::kinds::GvkKey;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Scope;
use serde_json::Value;

use crate::Error;

/// A client plus a cache of resolved kinds.
pub struct Cluster {
    client: kube::Client,
    kinds: Mutex<HashMap<GvkKey, (ApiResource, bool)>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

/// How an apply went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The object did not exist.
    Created,
    /// An existing object was merge-patched.
    Updated,
}

/// `Kind namespace/name` style identity of a live or expected object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    /// `apiVersion`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn api_err(what: &str, e: kube::Error) -> Error {
    match &e {
        kube::Error::Api(s) => Error::Cluster(format!("{what}: {} ({})", s.message, s.code)),
        _ => Error::Cluster(format!("{what}: {e}")),
    }
}

/// `group/version` → (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

impl Cluster {
    /// Connects with a kubeconfig file, or kube's usual inference when `None`.
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Cluster, Error> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| Error::Cluster(format!("cannot read kubeconfig {}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| Error::Cluster(format!("invalid kubeconfig {}: {e}", path.display())))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                Error::Cluster(format!(
                    "no cluster configured (pass --kubeconfig or start the control plane): {e}"
                ))
            })?,
        };
        let client = kube::Client::try_from(config)
            .map_err(|e| Error::Cluster(format!("cannot build a client: {e}")))?;
        Ok(Cluster::new(client))
    }

    /// Wraps an existing client.
    pub fn new(client: kube::Client) -> Cluster {
        Cluster {
            client,
            kinds: Mutex::new(HashMap::new()),
        }
    }

    /// The underlying client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Resource and scope (`true` = namespaced) of a kind. Only successes are cached: a CRD may
    /// be installed by an earlier step.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<(ApiResource, bool), Error> {
        let key = GvkKey::new(api_version, kind);
        if let Some(hit) = self.kinds.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(hit);
        }
        let (group, version) = split_api_version(api_version);
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| Error::Cluster(format!("the server does not serve {kind} in {api_version}: {e}")))?;
        let namespaced = caps.scope == Scope::Namespaced;
        if let Ok(mut m) = self.kinds.lock() {
            m.insert(key, (ar.clone(), namespaced));
        }
        Ok((ar, namespaced))
    }

    /// `obj` as the server can take it. An object of an `apiVersion` Kubernetes has removed (a
    /// KUDO test's `apiextensions.k8s.io/v1beta1` CRD) is translated to its replacement with
    /// [`kudo_package::translate`], the rule the manager applies to packages, and likewise only
    /// when discovery does not serve the version; `pattern` says it is an assert or error file
    /// (a partial object, [`kudo_package::translate::translate_pattern`]).
    pub async fn served_form(&self, obj: &Value, pattern: bool) -> Result<Value, Error> {
        let av = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        if kudo_package::translate::mapping(av, kind).is_none() || self.resolve(av, kind).await.is_ok() {
            return Ok(obj.clone());
        }
        let translated = if pattern {
            kudo_package::translate::translate_pattern(obj).map(|p| p.unwrap_or_else(|| obj.clone()))
        } else {
            kudo_package::translate::translate(obj).map(|t| t.object)
        };
        translated.map_err(|e| Error::Cluster(e.to_string()))
    }

    fn api(&self, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// The object's identity with the namespace defaulted to `default_ns` for namespaced kinds
    /// (and dropped for cluster-scoped ones).
    pub async fn key_of(&self, obj: &Value, default_ns: &str) -> Result<(ObjectKey, ApiResource), Error> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let (ar, namespaced) = self.resolve(&api_version, &kind).await?;
        let namespace = if namespaced {
            Some(
                obj["metadata"]["namespace"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or(default_ns)
                    .to_string(),
            )
        } else {
            None
        };
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        Ok((
            ObjectKey {
                api_version,
                kind,
                namespace,
                name,
            },
            ar,
        ))
    }

    /// Creates the object, or merge-patches it when it exists (kuttl's create-or-update).
    pub async fn apply(&self, obj: &Value, default_ns: &str) -> Result<(ObjectKey, Applied), Error> {
        let mut body = self.served_form(obj, false).await?;
        let (mut key, ar) = self.key_of(&body, default_ns).await?;
        if let Some(ns) = &key.namespace {
            body["metadata"]["namespace"] = Value::String(ns.clone());
        }
        let api = self.api(&ar, key.namespace.as_deref());
        if !key.name.is_empty() {
            let existing = api
                .get_opt(&key.name)
                .await
                .map_err(|e| api_err(&format!("reading {key}"), e))?;
            if existing.is_some() {
                api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&body))
                    .await
                    .map_err(|e| api_err(&format!("updating {key}"), e))?;
                return Ok((key, Applied::Updated));
            }
        }
        let dynobj: DynamicObject = serde_json::from_value(body)
            .map_err(|e| Error::Cluster(format!("{key} is not a valid object: {e}")))?;
        let created = api
            .create(&PostParams::default(), &dynobj)
            .await
            .map_err(|e| api_err(&format!("creating {key}"), e))?;
        if key.name.is_empty() {
            key.name = created.metadata.name.unwrap_or_default();
        }
        Ok((key, Applied::Created))
    }

    /// The live object as JSON with `apiVersion`/`kind` filled in; `None` when absent.
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<Value>, Error> {
        let (ar, _) = self.resolve(&key.api_version, &key.kind).await?;
        let api = self.api(&ar, key.namespace.as_deref());
        match api.get_opt(&key.name).await {
            Ok(Some(o)) => Ok(Some(to_value(o, key))),
            Ok(None) => Ok(None),
            Err(e) => Err(api_err(&format!("reading {key}"), e)),
        }
    }

    /// Objects of a kind in a namespace (or cluster-wide) carrying all `labels`.
    pub async fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<Value>, Error> {
        let (ar, _) = self.resolve(api_version, kind).await?;
        let api = self.api(&ar, namespace);
        let mut lp = ListParams::default();
        if !labels.is_empty() {
            let sel: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            lp = lp.labels(&sel.join(","));
        }
        let key = ObjectKey {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: namespace.map(str::to_string),
            name: String::new(),
        };
        let list = api
            .list(&lp)
            .await
            .map_err(|e| api_err(&format!("listing {kind}"), e))?;
        Ok(list.items.into_iter().map(|o| to_value(o, &key)).collect())
    }

    /// Deletes an object; `Ok(false)` when it was already gone.
    pub async fn delete(&self, key: &ObjectKey) -> Result<bool, Error> {
        let (ar, _) = self.resolve(&key.api_version, &key.kind).await?;
        let api = self.api(&ar, key.namespace.as_deref());
        match api.delete(&key.name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(api_err(&format!("deleting {key}"), e)),
        }
    }

    /// Polls until every object is gone or `timeout` passes.
    pub async fn wait_gone(&self, keys: &[ObjectKey], timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        for key in keys {
            loop {
                if self.get(key).await?.is_none() {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(Error::Cluster(format!(
                        "{key} still exists after {} s",
                        timeout.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }
}

fn to_value(obj: DynamicObject, key: &ObjectKey) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.entry("apiVersion")
            .or_insert_with(|| Value::String(key.api_version.clone()));
        m.entry("kind").or_insert_with(|| Value::String(key.kind.clone()));
    }
    v
}
