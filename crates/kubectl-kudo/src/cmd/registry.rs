//! `kubectl kudo registry login|logout`: credentials for OCI registries, kept where Docker, skopeo,
//! oras and Helm read them (the Docker config file, or its credential helper).

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kudo_oci::{Credential, DockerConfig, Registry};

use super::cluster::ClusterOpts;
use super::oci::{RegistryOpts, registry_options};
use crate::Io;

#[derive(Args, Debug)]
pub struct RegistryArgs {
    #[command(subcommand)]
    pub command: RegistryCommand,
}

#[derive(Subcommand, Debug)]
pub enum RegistryCommand {
    /// Check credentials against a registry and store them in the Docker config file.
    #[command(
        long_about = "Check a user name and password (or token) against an OCI registry, then store them \
where Docker, skopeo, oras and Helm read them: through the credential helper the Docker config names \
for the registry (credHelpers, credsStore), else in the config's auths ($DOCKER_CONFIG/config.json, \
else ~/.docker/config.json, written with mode 0600). The password is read from stdin.",
        after_help = "Examples:\n  echo \"$TOKEN\" | kubectl kudo registry login registry.example.com -u ci --password-stdin\n  kubectl kudo registry login 127.0.0.1:5000 -u kudo --password-stdin --ca-file ca.crt < password.txt"
    )]
    Login(LoginArgs),
    /// Remove a registry's credentials from the Docker config file (or its credential helper).
    #[command(after_help = "Examples:\n  kubectl kudo registry logout registry.example.com")]
    Logout(LogoutArgs),
}

#[derive(Args, Debug)]
pub struct LoginArgs {
    /// The registry: HOST[:PORT].
    pub registry: String,
    /// The user name.
    #[arg(short = 'u', long)]
    pub username: String,
    /// Read the password or token from stdin (required: a password on the command line ends up in
    /// shell history and process lists).
    #[arg(long, required = true)]
    pub password_stdin: bool,
    #[command(flatten)]
    pub registry_opts: RegistryOpts,
}

#[derive(Args, Debug)]
pub struct LogoutArgs {
    /// The registry: HOST[:PORT].
    pub registry: String,
}

pub async fn run(opts: &ClusterOpts, args: RegistryArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    match args.command {
        RegistryCommand::Login(a) => login(opts, a, io).await,
        RegistryCommand::Logout(a) => logout(&a.registry, io),
    }
}

/// The registry argument: `HOST[:PORT]`, as a reference's registry part.
fn registry_host(s: &str) -> Result<String> {
    let host = s.trim().trim_end_matches('/');
    let host = host.split_once("://").map_or(host, |(_, h)| h);
    let r = kudo_oci::OciRef::parse(&format!("oci://{host}/x")).with_context(|| format!("registry {s:?}"))?;
    Ok(r.registry)
}

async fn login(opts: &ClusterOpts, a: LoginArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let registry = registry_host(&a.registry)?;
    let mut password = String::new();
    std::io::stdin()
        .read_to_string(&mut password)
        .context("cannot read the password from stdin")?;
    let password = password.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        bail!("no password on stdin");
    }
    let mut options = registry_options(opts, &a.registry_opts)?;
    options.credential = Some(Credential {
        username: a.username.clone(),
        secret: password.clone(),
        origin: "the command line".into(),
    });
    Registry::new(options)?
        .check_access(&registry)
        .await
        .with_context(|| format!("login to {registry} failed"))?;
    let mut config = DockerConfig::load_default()?;
    let stored_in = config.store(&registry, &a.username, &password)?;
    config.save()?;
    writeln!(
        io.out,
        "Login Succeeded: credentials for {registry} stored in {stored_in}"
    )?;
    Ok(ExitCode::SUCCESS)
}

fn logout(registry: &str, io: &mut Io<'_>) -> Result<ExitCode> {
    let registry = registry_host(registry)?;
    let mut config = DockerConfig::load_default()?;
    if config.erase(&registry)? {
        let path = config.save()?;
        writeln!(
            io.out,
            "Removed the credentials for {registry} ({})",
            path.display()
        )?;
    } else {
        writeln!(io.out, "Not logged in to {registry}")?;
    }
    Ok(ExitCode::SUCCESS)
}
