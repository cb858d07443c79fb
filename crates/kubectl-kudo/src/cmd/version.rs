//! `version`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::Io;

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum VersionOutput {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
pub struct VersionArgs {
    /// Print as YAML or JSON.
    #[arg(short = 'o', long)]
    pub output: Option<VersionOutput>,
}

/// Version facts of this build.
pub fn info() -> serde_json::Value {
    serde_json::json!({
        "gitVersion": env!("CARGO_PKG_VERSION"),
        "gitCommit": option_env!("KUDO_GIT_COMMIT").unwrap_or("unknown"),
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

pub fn run(args: VersionArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let v = info();
    match args.output {
        Some(VersionOutput::Json) => writeln!(io.out, "{}", serde_json::to_string_pretty(&v)?)?,
        Some(VersionOutput::Yaml) => write!(io.out, "{}", serde_saphyr::to_string(&v)?)?,
        None => writeln!(
            io.out,
            "KUDO Version: version.Info{{GitVersion:\"{}\", GitCommit:\"{}\", Compiler:\"{}\", Platform:\"{}\"}}",
            v["gitVersion"].as_str().unwrap_or_default(),
            v["gitCommit"].as_str().unwrap_or_default(),
            v["compiler"].as_str().unwrap_or_default(),
            v["platform"].as_str().unwrap_or_default()
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
