//! Least privilege: the manager performs the requests it makes *for* an Instance as
//! that Instance's ServiceAccount, so an Instance can do no more in the cluster than the account
//! may, whatever its package's templates say.
//!
//! The account is `spec.serviceAccountName`, else the manager's `--default-service-account`, in
//! the Instance's own namespace; with neither, the manager's own identity (KUDO's behaviour).
//! Requests carry only `Impersonate-User: system:serviceaccount:NS:NAME`: kube-apiserver then
//! adds the account's groups itself (`system:serviceaccounts`, `system:serviceaccounts:NS`,
//! `system:authenticated`), and the manager needs `impersonate` on `serviceaccounts` only, not
//! on `groups`.
//!
//! **Why a task-local and not a parameter.** The identity is a property of one Instance's
//! reconcile, established once, right after the reconcile read the Instance ([`scope`], [`establish`]); every path underneath — apply,
//! delete, the health GETs that miss the cache, Pipe pods and exec, Secret reads of parameter
//! sources, KudoOperator children — asks [`crate::context::Context::acting_client`], which cannot
//! forget it. The manager's own identity stays explicit (`ctx.cluster.client`) and is used only for the
//! manager's bookkeeping: the Instance itself and its status, OperatorVersions, Events, Leases,
//! discovery and the watch caches.
//!
//! **Missing accounts.** Kubernetes authorizes an impersonated account by its name whether or
//! not the ServiceAccount exists, so the manager checks it: a missing one fails the running step
//! with [`missing_message`] rather than applying anything. Found accounts are remembered for
//! [`FOUND_TTL`] so the check costs one GET per account per minute, not one per reconcile.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderValue;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;

/// How long a ServiceAccount seen to exist is not looked up again.
pub const FOUND_TTL: Duration = Duration::from_secs(60);

/// The identity requests for the current Instance are made with.
#[derive(Clone)]
pub(crate) struct Acting {
    /// The impersonating client (or the manager's own, when no account applies).
    pub client: kube::Client,
    /// Set when the account does not exist: the message every step fails with.
    pub missing: Option<String>,
    /// The Instance's own `spec.serviceAccountName` (not the manager default): what its
    /// KudoOperator children inherit.
    pub inherited: Option<String>,
}

tokio::task_local! {
    static ACTING: RefCell<Option<Acting>>;
}

/// The account an Instance is applied as: its own, else the manager's default, else none.
pub fn account<'a>(spec_account: &'a str, default: Option<&'a str>) -> Option<&'a str> {
    Some(spec_account)
        .filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
}

/// The Kubernetes user name of a ServiceAccount.
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The plan error of an Instance whose account does not exist.
pub fn missing_message(namespace: &str, name: &str) -> String {
    format!("ServiceAccount {namespace}/{name} not found: the Instance's objects are applied as this account")
}

/// Runs `f` (the reconcile of one Instance) with a slot for the identity of its requests,
/// filled by [`establish`] once the Instance is read.
pub(crate) async fn scope<F: Future>(f: F) -> F::Output {
    ACTING.scope(RefCell::new(None), f).await
}

/// Makes `acting` the identity of the rest of the current reconcile (outside [`scope`]: nothing).
pub(crate) fn establish(acting: Acting) {
    let _ = ACTING.try_with(|slot| *slot.borrow_mut() = Some(acting));
}

/// The identity of the reconcile running on this task, once established.
pub(crate) fn current() -> Option<Acting> {
    ACTING.try_with(|slot| slot.borrow().clone()).ok().flatten()
}

/// A KudoOperator child Instance as it is applied: without an account of its own it gets its
/// parent's `spec.serviceAccountName` (a child may not do more than its parent).
pub(crate) fn inherit(child: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
    let own = child["spec"]["serviceAccountName"].as_str().unwrap_or("");
    match current().and_then(|a| a.inherited) {
        Some(parent) if own.is_empty() => {
            let mut child = child.clone();
            child["spec"]["serviceAccountName"] = serde_json::Value::String(parent);
            std::borrow::Cow::Owned(child)
        }
        _ => std::borrow::Cow::Borrowed(child),
    }
}

/// Impersonating clients by account, and which accounts were recently seen to exist.
pub(crate) struct Identities {
    base: kube::Client,
    clients: Mutex<HashMap<String, kube::Client>>,
    found: Mutex<HashMap<String, Instant>>,
}

impl Identities {
    pub fn new(base: kube::Client) -> Identities {
        Identities {
            base,
            clients: Mutex::default(),
            found: Mutex::default(),
        }
    }

    /// The identity for an Instance of namespace `ns` whose spec names `spec_account`.
    pub async fn acting(&self, ns: &str, spec_account: &str, default: Option<&str>) -> Acting {
        let inherited = Some(spec_account.to_string()).filter(|s| !s.is_empty());
        let Some(name) = account(spec_account, default) else {
            return Acting {
                client: self.base.clone(),
                missing: None,
                inherited,
            };
        };
        let missing = match self.exists(ns, name).await {
            Ok(true) => None,
            Ok(false) => Some(missing_message(ns, name)),
            // Unknown: the requests themselves will tell (a 403 names the account).
            Err(e) => {
                tracing::debug!(account = %username(ns, name), error = %e, "cannot look up the service account");
                None
            }
        };
        Acting {
            client: self.client_for(&username(ns, name)),
            missing,
            inherited,
        }
    }

    async fn exists(&self, ns: &str, name: &str) -> Result<bool, kube::Error> {
        let key = username(ns, name);
        let fresh = |at: &Instant| at.elapsed() < FOUND_TTL;
        if self
            .found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .is_some_and(fresh)
        {
            return Ok(true);
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.base.clone(), ns);
        let found = api.get_metadata_opt(name).await?.is_some();
        let mut seen = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if found {
            seen.insert(key, Instant::now());
        } else {
            seen.remove(&key);
        }
        Ok(found)
    }

    /// A client sending every request of `base` as `user` (one per user, kept).
    fn client_for(&self, user: &str) -> kube::Client {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(user.to_string())
            .or_insert_with(|| impersonating(self.base.clone(), user))
            .clone()
    }
}

/// `inner` with the `Impersonate-User` header on every request.
fn impersonating(inner: kube::Client, user: &str) -> kube::Client {
    let value = HeaderValue::from_str(user).unwrap_or_else(|_| HeaderValue::from_static("system:anonymous"));
    crate::hook::with_request_hook(inner, move |req| {
        req.headers_mut().insert("Impersonate-User", value.clone());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_account_wins_over_the_default_and_empty_means_unset() {
        let cases = [
            ("app", Some("kudo-instance"), Some("app")),
            ("", Some("kudo-instance"), Some("kudo-instance")),
            ("", Some(""), None),
            ("", None, None),
            ("app", None, Some("app")),
        ];
        for (spec, default, want) in cases {
            assert_eq!(account(spec, default), want, "{spec:?} {default:?}");
        }
    }

    #[test]
    fn user_names_and_messages_name_the_account() {
        assert_eq!(username("tenant-a", "app"), "system:serviceaccount:tenant-a:app");
        assert_eq!(
            missing_message("tenant-a", "kudo-instance"),
            "ServiceAccount tenant-a/kudo-instance not found: the Instance's objects are applied as this account"
        );
    }
}
