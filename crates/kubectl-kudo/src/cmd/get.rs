//! `get instances|operators|operatorversions|all`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use kudo_api::{Instance, Operator, OperatorVersion};

use super::cluster::{ClusterOpts, KudoKind, connect};
use crate::Io;
use crate::output::tree::{self, Node};

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum What {
    Instances,
    Operators,
    Operatorversions,
    All,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
pub enum GetOutput {
    Yaml,
    Json,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo get instances\n  kubectl kudo get all -n databases\n  kubectl kudo get operatorversions -o yaml"
)]
pub struct GetArgs {
    /// What to list.
    pub what: What,
    /// Print the objects as YAML or JSON instead of a tree.
    #[arg(short = 'o', long)]
    pub output: Option<GetOutput>,
}

pub async fn run(opts: &ClusterOpts, args: GetArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    let cluster = connect(opts).await?;
    let ns = cluster.namespace.clone();
    let mut operators: Vec<Operator> = Vec::new();
    let mut ovs: Vec<OperatorVersion> = Vec::new();
    let mut instances: Vec<Instance> = Vec::new();
    if matches!(args.what, What::Operators | What::All) {
        operators = cluster.list(KudoKind::Operator).await?;
    }
    if matches!(args.what, What::Operatorversions | What::All) {
        ovs = cluster.list(KudoKind::OperatorVersion).await?;
    }
    if matches!(args.what, What::Instances | What::All) {
        instances = cluster.list(KudoKind::Instance).await?;
    }
    operators.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    ovs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    instances.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    if let Some(fmt) = args.output {
        let mut items: Vec<serde_json::Value> = Vec::new();
        for o in &operators {
            items.push(serde_json::to_value(o)?);
        }
        for o in &ovs {
            items.push(serde_json::to_value(o)?);
        }
        for i in &instances {
            items.push(serde_json::to_value(i)?);
        }
        match fmt {
            GetOutput::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(&items)?)?,
            GetOutput::Yaml => {
                for item in &items {
                    writeln!(io.out, "---")?;
                    write!(io.out, "{}", serde_saphyr::to_string(item)?)?;
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    let (title, roots): (&str, Vec<Node>) = match args.what {
        What::Instances => (
            "instances",
            instances.iter().map(|i| Node::new(&i.metadata.name)).collect(),
        ),
        What::Operators => (
            "operators",
            operators.iter().map(|o| Node::new(&o.metadata.name)).collect(),
        ),
        What::Operatorversions => (
            "operatorversions",
            ovs.iter().map(|o| Node::new(&o.metadata.name)).collect(),
        ),
        What::All => {
            let roots = operators
                .iter()
                .map(|op| {
                    let mut node = Node::new(&op.metadata.name);
                    for ov in ovs.iter().filter(|ov| ov.spec.operator.name == op.metadata.name) {
                        let ov_node = node.push(Node::new(&ov.metadata.name));
                        for inst in instances.iter().filter(|i| {
                            i.spec.operator_version.name == ov.metadata.name
                                && i.spec.operator_version_namespace(&ns) == ns
                        }) {
                            ov_node.push(Node::new(&inst.metadata.name));
                        }
                    }
                    node
                })
                .collect();
            ("operators including versions and instances", roots)
        }
    };
    writeln!(io.out, "List of current installed {title} in namespace \"{ns}\":")?;
    write!(io.out, "{}", tree::render(&roots))?;
    Ok(ExitCode::SUCCESS)
}
