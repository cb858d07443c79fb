//! Packages in OCI registries: `package push`, `pull`, `sign`, `keygen`, and the flags every
//! command reaching a registry shares (`--ca-file`, `--plain-http`, `--verify --key`). The work
//! is `kudo_oci`'s; these parse, call and print.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use kudo_oci::{
    DockerConfig, OciRef, PrivateKey, Registry, RegistryOptions, TrustPolicy, TrustedKey, Verification,
};
use kudo_package::verify::ParamChecks;

use super::cluster::ClusterOpts;
use super::format::Output;
use crate::Io;

/// How to reach a registry.
#[derive(Args, Debug, Clone, Default)]
pub struct RegistryOpts {
    /// PEM file of CA certificates to trust for registries, beside the system roots.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Talk to registries over plain HTTP instead of HTTPS (never chosen on its own, loopback
    /// included).
    #[arg(long)]
    pub plain_http: bool,
}

/// `--verify --key`: cosign keyed signatures required of OCI packages.
#[derive(Args, Debug, Clone, Default)]
pub struct VerifyOpts {
    /// Refuse an OCI package without a cosign signature by one of the --key public keys for its
    /// digest (and any package that is not an OCI artifact, dependencies included).
    #[arg(long, requires = "keys")]
    pub verify: bool,
    /// Public key (SubjectPublicKeyInfo PEM, ECDSA P-256) a signature must verify with; repeatable.
    #[arg(long = "key", value_name = "PUB", requires = "verify")]
    pub keys: Vec<PathBuf>,
}

impl VerifyOpts {
    /// The trust policy the flags ask for.
    pub fn policy(&self) -> Result<TrustPolicy> {
        if !self.verify {
            return Ok(TrustPolicy::None);
        }
        let keys = self
            .keys
            .iter()
            .map(|k| TrustedKey::load(k))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TrustPolicy::Keys(keys))
    }
}

/// The registry options of the flags: the user's Docker config for credentials, the request
/// timeout for each request.
pub fn registry_options(opts: &ClusterOpts, registry: &RegistryOpts) -> Result<RegistryOptions> {
    Ok(RegistryOptions {
        ca_file: registry.ca_file.clone(),
        plain_http: registry.plain_http,
        timeout: (opts.request_timeout > 0).then(|| std::time::Duration::from_secs(opts.request_timeout)),
        docker_config: Some(DockerConfig::load_default()?),
        ..Default::default()
    })
}

/// Everything kudo-repo needs to fetch from registries.
pub fn settings(
    opts: &ClusterOpts,
    registry: &RegistryOpts,
    verify: &VerifyOpts,
) -> Result<kudo_repo::OciSettings> {
    Ok(kudo_repo::OciSettings {
        registry: registry_options(opts, registry)?,
        policy: verify.policy()?,
    })
}

/// One line about a pulled artifact: its digest and what verification found.
pub fn describe_pull(requested: &str, pinned: &str, verification: &Verification) -> String {
    let mut line = format!("{requested}: {pinned}");
    if let Verification::Verified { key, fingerprint } = verification {
        line.push_str(&format!(" (signature verified with {key}, {fingerprint})"));
    }
    line
}

fn parse_ref(s: &str) -> Result<OciRef> {
    Ok(OciRef::parse(s)?)
}

/// `package push PKG oci://…[:TAG]`.
pub async fn push(
    opts: &ClusterOpts,
    package: &Path,
    target: &str,
    registry: &RegistryOpts,
    output: Option<Output>,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let mut target = parse_ref(target)?;
    if target.digest.is_some() {
        bail!(
            "{target}: push to a tag (oci://HOST/REPO[:TAG]), not a digest: the digest is the push's result"
        );
    }
    let pkg = kudo_package::read_path(package)
        .with_context(|| format!("failed to read package {}", package.display()))?;
    let v = kudo_client::checks::verify_package(&pkg, ParamChecks::default());
    if !v.is_valid() {
        bail!(
            "package verification found {} error(s); not pushing: {}",
            v.errors.len(),
            v.errors.join("; ")
        );
    }
    if target.tag.is_none() {
        let tag = kudo_oci::reference::version_tag(&pkg.operator.operator_version).map_err(|e| {
            anyhow::anyhow!(
                "operatorVersion {:?} cannot be a tag: {e}",
                pkg.operator.operator_version
            )
        })?;
        target = target.with_tag(&tag);
    }
    let created = kudo_oci::artifact::created_timestamp()?;
    let client = Registry::new(registry_options(opts, registry)?)?;
    let pushed = client.push_package(&pkg, &target, &created).await?;
    let pinned = pushed.reference.with_digest(&pushed.digest);
    let data = serde_json::json!({
        "reference": pushed.reference.to_string(), "digest": pushed.digest,
        "pinned": pinned.to_string(), "size": pushed.layer_size,
    });
    match output {
        Some(fmt) => print_data(&data, fmt, io)?,
        None => {
            writeln!(io.out, "Pushed {}", pushed.reference)?;
            writeln!(io.out, "Digest: {}", pushed.digest)?;
            writeln!(io.out, "{pinned}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_data(data: &serde_json::Value, fmt: Output, io: &mut Io<'_>) -> Result<()> {
    match fmt {
        Output::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(data)?)?,
        Output::Yaml => write!(
            io.out,
            "{}",
            serde_saphyr::to_string(data).context("cannot serialise to YAML")?
        )?,
    }
    Ok(())
}

/// What `package pull` is asked for.
pub struct PullArgs<'a> {
    pub reference: &'a str,
    pub destination: &'a Path,
    pub overwrite: bool,
    pub registry: &'a RegistryOpts,
    pub verify: &'a VerifyOpts,
    pub output: Option<Output>,
}

/// `package pull oci://…[:TAG|@sha256:…]`: writes the tarball once everything checked out.
pub async fn pull(opts: &ClusterOpts, a: PullArgs<'_>, io: &mut Io<'_>) -> Result<ExitCode> {
    let r = parse_ref(a.reference)?;
    let client = Registry::new(registry_options(opts, a.registry)?)?;
    let pulled = client.pull_package(&r, &a.verify.policy()?).await?;
    let target = a.destination.join(pulled.package.tarball_name());
    if target.exists() && !a.overwrite {
        bail!(
            "{}: file already exists, use --overwrite to replace it",
            target.display()
        );
    }
    std::fs::create_dir_all(a.destination)
        .with_context(|| format!("cannot create {}", a.destination.display()))?;
    // Written beside the target and renamed: no half-written tarball under the final name.
    let tmp = a
        .destination
        .join(format!(".{}.part", pulled.package.tarball_name()));
    std::fs::write(&tmp, &pulled.tarball).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &target).with_context(|| format!("cannot write {}", target.display()))?;
    let verified = match &pulled.verification {
        Verification::Verified { key, fingerprint } => {
            serde_json::json!({"key": key, "fingerprint": fingerprint})
        }
        _ => serde_json::Value::Null,
    };
    let data = serde_json::json!({
        "reference": r.to_string(), "digest": pulled.digest, "pinned": pulled.pinned.to_string(),
        "file": target.display().to_string(), "verified": verified,
    });
    match a.output {
        Some(fmt) => print_data(&data, fmt, io)?,
        None => {
            writeln!(
                io.out,
                "Pulled {}",
                describe_pull(a.reference, &pulled.pinned.to_string(), &pulled.verification)
            )?;
            writeln!(io.out, "Package written: {}", target.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `package sign oci://…@sha256:… --key KEY`.
pub async fn sign(
    opts: &ClusterOpts,
    reference: &str,
    key: &Path,
    registry: &RegistryOpts,
    output: Option<Output>,
    io: &mut Io<'_>,
) -> Result<ExitCode> {
    let r = parse_ref(reference)?;
    let key = PrivateKey::load(key)?;
    let client = Registry::new(registry_options(opts, registry)?)?;
    let signed = client.sign(&r, &key).await?;
    let data = serde_json::json!({
        "reference": r.to_string(), "signature": signed.signature.to_string(),
        "key": key.name, "fingerprint": key.fingerprint(), "added": signed.added,
        "signatures": signed.signatures,
    });
    match output {
        Some(fmt) => print_data(&data, fmt, io)?,
        None if signed.added => writeln!(
            io.out,
            "Signed {r} with {} ({}): {}",
            key.name,
            key.fingerprint(),
            signed.signature
        )?,
        None => writeln!(
            io.out,
            "{r} already has this signature by {} ({}): {}",
            key.name,
            key.fingerprint(),
            signed.signature
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `package keygen`: a new P-256 key pair, `NAME.key` (mode 0600) and `NAME.pub`.
pub fn keygen(dir: &Path, name: &str, overwrite: bool, io: &mut Io<'_>) -> Result<ExitCode> {
    let (private, public) = (dir.join(format!("{name}.key")), dir.join(format!("{name}.pub")));
    for p in [&private, &public] {
        if p.exists() && !overwrite {
            bail!(
                "{}: file already exists, use --overwrite to replace it",
                p.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let key = PrivateKey::generate();
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(&private)
        .and_then(|mut f| f.write_all(key.private_pem().as_bytes()))
        .with_context(|| format!("cannot write {}", private.display()))?;
    std::fs::write(&public, key.public_pem())
        .with_context(|| format!("cannot write {}", public.display()))?;
    writeln!(
        io.out,
        "Private key written: {} (keep it secret)",
        private.display()
    )?;
    writeln!(io.out, "Public key written: {}", public.display())?;
    writeln!(io.out, "Fingerprint: {}", key.fingerprint())?;
    Ok(ExitCode::SUCCESS)
}
