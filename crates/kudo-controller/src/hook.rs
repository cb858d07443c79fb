//! Requests the manager sends pass through hooks: counted by verb ([`crate::metrics`]) and, for
//! an Instance with a ServiceAccount, impersonating it ([`crate::impersonation`]).

/// `inner` (keeping its authentication, base URL and timeouts) with `hook` run on every request
/// before it is sent: how the manager counts its requests and impersonates accounts.
pub(crate) fn with_request_hook(
    inner: kube::Client,
    hook: impl Fn(&mut http::Request<kube::client::Body>) + Clone + Send + Sync + 'static,
) -> kube::Client {
    let ns = inner.default_namespace().to_string();
    let svc = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        hook(&mut req);
        let inner = inner.clone();
        async move { inner.send(req).await }
    });
    kube::Client::new(svc, ns)
}
