//! `get instances|operators|operatorversions|all`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use kudo_api::{Instance, Operator, OperatorVersion};
use kudo_client::cluster::KudoKind;

use super::cluster::{ClusterOpts, connect};
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
    /// A table with more columns (`get instances` only): NAME, OPERATOR-VERSION, SERVICE-ACCOUNT.
    Wide,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  kubectl kudo get instances\n  kubectl kudo get all -n databases\n  kubectl kudo get operatorversions -o yaml\n  kubectl kudo get instances -o wide   # with the ServiceAccount each Instance runs as"
)]
pub struct GetArgs {
    /// What to list.
    pub what: What,
    /// Print the objects as YAML or JSON instead of a tree, or (instances) a wide table.
    #[arg(short = 'o', long)]
    pub output: Option<GetOutput>,
}

/// `get instances -o wide`: one row per Instance, columns padded as kubectl pads them (three
/// spaces between columns). An Instance without `spec.serviceAccountName` shows `<none>`.
fn wide_table(instances: &[Instance]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "OPERATOR-VERSION".to_string(),
        "SERVICE-ACCOUNT".to_string(),
    ]];
    for i in instances {
        let sa = match i.spec.service_account_name.as_str() {
            "" => "<none>",
            sa => sa,
        };
        rows.push([
            i.metadata.name.clone(),
            i.spec.operator_version.name.clone(),
            sa.to_string(),
        ]);
    }
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let (w0, w1) = (width(0), width(1));
    rows.iter()
        .map(|r| format!("{:w0$}   {:w1$}   {}\n", r[0], r[1], r[2]))
        .collect()
}

/// `-o yaml|json|wide`: the objects as YAML documents or one JSON array, or the wide table of
/// the Instances.
fn print_objects(
    fmt: GetOutput,
    operators: &[Operator],
    ovs: &[OperatorVersion],
    instances: &[Instance],
    io: &mut Io<'_>,
) -> Result<()> {
    let mut items: Vec<serde_json::Value> = Vec::new();
    for o in operators {
        items.push(serde_json::to_value(o)?);
    }
    for o in ovs {
        items.push(serde_json::to_value(o)?);
    }
    for i in instances {
        items.push(serde_json::to_value(i)?);
    }
    match fmt {
        GetOutput::Json => writeln!(io.out, "{}", serde_json::to_string_pretty(&items)?)?,
        GetOutput::Wide => write!(io.out, "{}", wide_table(instances))?,
        GetOutput::Yaml => {
            for item in &items {
                writeln!(io.out, "---")?;
                write!(io.out, "{}", serde_saphyr::to_string(item)?)?;
            }
        }
    }
    Ok(())
}

pub async fn run(opts: &ClusterOpts, args: GetArgs, io: &mut Io<'_>) -> Result<ExitCode> {
    if matches!(args.output, Some(GetOutput::Wide)) && !matches!(args.what, What::Instances) {
        bail!("-o wide is only supported for `get instances`");
    }
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
        print_objects(fmt, &operators, &ovs, &instances, io)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_table_shows_the_service_account_or_none() {
        let mut a: Instance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kudo.dev/v1beta1", "kind": "Instance",
            "metadata": {"name": "galera-instance"},
            "spec": {"operatorVersion": {"name": "galera-10.5.3-0.1.0"}}
        }))
        .unwrap();
        let mut b = a.clone();
        b.metadata.name = "db".into();
        b.spec.service_account_name = "db-deployer".into();
        a.spec.service_account_name.clear();
        assert_eq!(
            wide_table(&[a, b]),
            "NAME              OPERATOR-VERSION      SERVICE-ACCOUNT\n\
             galera-instance   galera-10.5.3-0.1.0   <none>\n\
             db                galera-10.5.3-0.1.0   db-deployer\n"
        );
    }
}
