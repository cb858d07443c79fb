//! The cluster operations of `kubectl kudo` as a library: connecting ([`cluster`]), `init`
//! ([`init`]), `install` (and its objects as manifests for Git, [`manifests`]), `update`, `upgrade`,
//! `uninstall`, `plan trigger`/`plan retry` ([`plan`]), `rollback` and the revisions it reads
//! ([`rollback`], [`revisions`]), fleet rollouts ([`rollout`]), previews of a change (`--dry-run`,
//! [`preview`]) and waiting for plan runs ([`wait`]). Each operation takes a typed request and
//! returns a typed outcome; it prints nothing; what it writes while it runs is reported through
//! [`Progress`], so a caller can show each object as soon as it exists (and a failure later on does
//! not hide what was written). The CLI (`kubectl-kudo`) parses flags, calls these and prints.
//!
//! Errors are one [`Error`] enum whose `Display` is the wording users see (KUDO's where KUDO had
//! one), pinned by the CLI's tests.

pub mod checks;
pub mod cluster;
pub mod diagnostics;
mod error;
pub mod init;
pub mod install;
pub mod manifests;
pub mod migrate;
pub mod plan;
pub mod preview;
mod provenance;
pub mod revisions;
pub mod rollback;
pub mod rollout;
pub mod sensitive;
pub mod typed_api;
pub mod uninstall;
pub mod update;
pub mod upgrade;
pub mod wait;

pub use error::{Error, Result};

use cluster::KudoKind;

/// An object an operation wrote (or found already there), reported as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A KUDO object was created.
    Created {
        /// Its kind.
        kind: KudoKind,
        /// Its name.
        name: &'a str,
    },
    /// The object existed already and was left as it is (an OperatorVersion of that name).
    AlreadyInstalled {
        /// Its kind.
        kind: KudoKind,
        /// Its name.
        name: &'a str,
    },
    /// `install --create-namespace` created the namespace.
    NamespaceCreated {
        /// The namespace.
        name: &'a str,
    },
    /// The typed API's CRD was created or (`existed`) updated.
    CrdApplied {
        /// The CRD's name.
        name: &'a str,
        /// Whether it existed before.
        existed: bool,
    },
    /// `init` applied the last manifest of a group (`crds`, `namespace`, …).
    Installed {
        /// The group.
        group: &'a str,
    },
    /// `init --uninstall` deleted an object.
    Deleted {
        /// Its kind.
        kind: &'a str,
        /// Its name.
        name: &'a str,
    },
    /// `init` deleted an object an earlier installation left and this one does not use.
    Unused {
        /// Its kind.
        kind: &'a str,
        /// Its name.
        name: &'a str,
    },
}

/// Where an operation reports what it wrote while it runs (the CLI prints each event as KUDO did).
/// A failure to report (e.g. a closed stdout) stops the operation with [`Error::Report`].
pub trait Progress {
    /// Called once per event, in the order the objects were written.
    fn report(&mut self, event: Event<'_>) -> std::io::Result<()>;
}

/// A [`Progress`] that reports nothing: for callers with no one to tell (`migrate`'s server-side
/// install, the manager storing a package source's typed API).
pub struct Quiet;

impl Progress for Quiet {
    fn report(&mut self, _: Event<'_>) -> std::io::Result<()> {
        Ok(())
    }
}
