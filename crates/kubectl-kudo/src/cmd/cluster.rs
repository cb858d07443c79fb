//! The global flags of commands that talk to a cluster, and connecting with them. The connection
//! and typed access to the `kudo.dev` objects are `kudo_client::cluster`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use kudo_client::cluster::{Cluster, ConnectOptions};

/// Flags shared by every command that talks to a cluster (KUDO's global flags).
#[derive(Args, Debug, Clone, Default)]
pub struct ClusterOpts {
    /// Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config; for `dev`, where to
    /// write the embedded cluster's kubeconfig).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace (default: the kubeconfig context's namespace, else "default").
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Seconds to wait for one API request before giving up (0 = no limit).
    #[arg(long, global = true, default_value_t = 0, value_name = "SECONDS")]
    pub request_timeout: u64,
    /// KUDO home directory for local settings such as repositories.
    #[arg(long, global = true, env = "KUDO_HOME", value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Accepted for KUDO scripts (KUDO checked that its CRDs are served before each command):
    /// kudo-rs commands name a missing CRD in their own error, with or without it.
    #[arg(long, global = true, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub validate_install: Option<bool>,
}

impl ClusterOpts {
    /// `$KUDO_HOME`, else `~/.kudo`.
    pub fn home_dir(&self) -> PathBuf {
        self.home.clone().unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".kudo")
        })
    }

    /// What `kudo_client::cluster::connect` needs of the flags.
    pub fn connect_options(&self) -> ConnectOptions {
        ConnectOptions {
            kubeconfig: self.kubeconfig.clone(),
            namespace: self.namespace.clone(),
            request_timeout: self.request_timeout,
        }
    }
}

/// Connects with the global flags (see `kudo_client::cluster::connect`).
pub async fn connect(opts: &ClusterOpts) -> Result<Cluster> {
    Ok(kudo_client::cluster::connect(&opts.connect_options()).await?)
}
