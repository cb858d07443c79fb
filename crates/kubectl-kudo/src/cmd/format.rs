//! `-o yaml|json` of the commands that print data (package, OCI and repository commands).

use clap::ValueEnum;

/// The data formats `-o` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}
