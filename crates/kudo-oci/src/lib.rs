//! Operator packages as OCI artifacts: `package push`/`pull`, `install oci://…`, cosign keyed
//! signatures (`package sign`, `install --verify --key`), and registry credentials.
//!
//! * [`reference`] — `oci://HOST[:PORT]/REPO[:TAG][@sha256:…]`.
//! * [`artifact`] — the artifact's media types and manifest (pure: building, and judging what was
//!   pulled).
//! * [`signature`] — cosign's simple-signing payload, keys, [`TrustPolicy`] and the verification
//!   decision (pure).
//! * [`credentials`] — Docker's `config.json` and credential helpers.
//! * [`registry`] — the IO, through `oci-client`.
//!
//! The one call an in-cluster package source needs is [`Registry::pull_package`]: resolve a tag
//! or digest, check the manifest is a package, apply the trust policy, fetch the layer and read it
//! with the package reader's limits; it returns the package files, the resolved digest and the
//! verification outcome, and writes nothing.
//!
//! `oci-client` (the ORAS project's distribution client) does the protocol: the token flow,
//! basic auth, chunked uploads, digest checks. It is built on reqwest with rustls and without a
//! crypto provider of its own, and [`Registry::new`] installs ring, the provider kube already
//! brings, so the binary has one TLS stack and no OpenSSL. One limit of it: a manifest's body is
//! read whole (distribution registries cap manifests at 4 MiB themselves); blobs are streamed and
//! bounded here ([`registry::Limits`]).
//!
//! Async, for the CLI's runtime and the manager's; [`block_on`] runs one call from blocking code
//! (kudo-repo's resolution).

pub mod artifact;
pub mod credentials;
pub mod error;
pub mod reference;
pub mod registry;
pub mod signature;

pub use credentials::{Credential, DockerConfig};
pub use error::{EpochError, KeyError, OciError, TagError};
pub use reference::{OciRef, is_oci};
pub use registry::{Pulled, Pushed, Registry, RegistryOptions, Signed};
pub use signature::{PrivateKey, TrustPolicy, TrustedKey, Verification};

/// Runs `f` to completion on a runtime of its own, from blocking code (not from inside an async
/// task: call it in `spawn_blocking` there). The registry client must be created inside `f`, since
/// its connections belong to the runtime.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime starts")
        .block_on(f)
}
