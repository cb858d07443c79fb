//! The plans of an operator as a graph: what `kubectl kudo package graph` draws (SVG, DOT,
//! mermaid) and what the Instance page of `kubectl kudo ui` lays out, from one model and one
//! layout, so a README's picture and the live page never disagree on what runs after what.
//!
//! [`plans_of`] builds the model from an OperatorVersion's spec (phases in order, their steps and
//! the tasks of each step); [`PlanGraph::with_status`] lays a run's status over it. [`flow`] says
//! which node follows which — the one place that reads KUDO's strategies: a `serial` phase runs
//! its steps one after another, any other strategy (`parallel`, or empty, as in KUDO's engine)
//! runs them at the same time; the same for the phases of a plan. [`layout`] places the nodes
//! (serial steps in a row, wrapped every [`layout::MAX_COLUMNS`]; parallel steps side by side
//! without arrows between them), and the writers ([`svg`], [`dot`], [`mermaid`]) only draw.
//!
//! Pure: no IO, table-tested here and by golden files of `package graph`.

pub mod dot;
pub mod layout;
pub mod mermaid;
pub mod palette;
pub mod svg;

use kudo_api::{ExecutionStatus, OperatorVersionSpec, Ordering, PlanStatus};

/// How the children of a plan or a phase run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// One after another, in order.
    Serial,
    /// All at the same time.
    Parallel,
}

impl Strategy {
    /// KUDO's reading of a strategy: `serial`, else parallel (an empty strategy included).
    pub fn of(ordering: &Ordering) -> Strategy {
        if ordering.is_serial() {
            Strategy::Serial
        } else {
            Strategy::Parallel
        }
    }

    /// `serial` or `parallel`, as a package writes it.
    pub fn word(self) -> &'static str {
        match self {
            Strategy::Serial => "serial",
            Strategy::Parallel => "parallel",
        }
    }
}

/// A task of a step: its name, kind and the template files it applies (or deletes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNode {
    /// The task's name.
    pub name: String,
    /// `Apply`, `Delete`, `Toggle`, `Pipe`, `KudoOperator`, `Dummy`; empty when the step names a
    /// task the OperatorVersion does not have.
    pub kind: String,
    /// The templates it renders (`spec.resources`).
    pub resources: Vec<String>,
}

/// A step: its tasks, and once a run is laid over it, its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepNode {
    /// The step's name.
    pub name: String,
    /// Its tasks, in order.
    pub tasks: Vec<TaskNode>,
    /// The status of the run shown; `None`: the plan is not active (or a package is drawn).
    pub status: Option<ExecutionStatus>,
    /// The status message (an error).
    pub message: String,
    /// What a running step waits for (`waitingFor`), one line per object.
    pub waiting_for: Vec<String>,
}

/// A phase: its strategy and steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseNode {
    /// The phase's name.
    pub name: String,
    /// How its steps run.
    pub strategy: Strategy,
    /// The status of the run shown.
    pub status: Option<ExecutionStatus>,
    /// Its steps, in order.
    pub steps: Vec<StepNode>,
}

/// A plan: its strategy and phases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanGraph {
    /// The plan's name.
    pub name: String,
    /// How its phases run.
    pub strategy: Strategy,
    /// The status of the run shown.
    pub status: Option<ExecutionStatus>,
    /// Its phases, in order.
    pub phases: Vec<PhaseNode>,
}

/// The plans of `spec`, by name (the order `plan status` prints them in), without status.
pub fn plans_of(spec: &OperatorVersionSpec) -> Vec<PlanGraph> {
    spec.plans
        .iter()
        .map(|(name, plan)| PlanGraph {
            name: name.clone(),
            strategy: Strategy::of(&plan.strategy),
            status: None,
            phases: plan
                .phases
                .iter()
                .map(|ph| PhaseNode {
                    name: ph.name.clone(),
                    strategy: Strategy::of(&ph.strategy),
                    status: None,
                    steps: ph
                        .steps
                        .iter()
                        .map(|st| StepNode {
                            name: st.name.clone(),
                            tasks: st.tasks.iter().map(|t| task_node(spec, t)).collect(),
                            status: None,
                            message: String::new(),
                            waiting_for: Vec::new(),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

fn task_node(spec: &OperatorVersionSpec, name: &str) -> TaskNode {
    let task = spec.tasks.iter().find(|t| t.name == name);
    TaskNode {
        name: name.to_string(),
        kind: task.map(|t| t.kind.to_string()).unwrap_or_default(),
        resources: task.map(|t| t.spec.resources.clone()).unwrap_or_default(),
    }
}

impl PlanGraph {
    /// The graph with the run `status` laid over it: each phase and step takes the status of
    /// the one of the same name (a step the status does not list stays without one).
    pub fn with_status(mut self, status: &PlanStatus) -> PlanGraph {
        self.status = Some(status.status);
        for phase in &mut self.phases {
            let Some(ps) = status.phases.iter().find(|p| p.name == phase.name) else {
                continue;
            };
            phase.status = Some(ps.status);
            for step in &mut phase.steps {
                if let Some(ss) = ps.steps.iter().find(|s| s.name == step.name) {
                    step.status = Some(ss.status);
                    step.message = ss.message.clone();
                    step.waiting_for = ss.waiting_for.clone();
                }
            }
        }
        self
    }
}

/// A node of a plan's graph: a phase (by index) or a step (phase index, step index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    /// A phase.
    Phase(usize),
    /// A step of a phase.
    Step(usize, usize),
}

/// Which node runs after which: between the phases of a serial plan, and between the steps of
/// each serial phase, in order. Parallel children have no edge between them.
pub fn flow(plan: &PlanGraph) -> Vec<(Node, Node)> {
    let mut edges = Vec::new();
    if plan.strategy == Strategy::Serial {
        for i in 1..plan.phases.len() {
            edges.push((Node::Phase(i - 1), Node::Phase(i)));
        }
    }
    for (p, phase) in plan.phases.iter().enumerate() {
        if phase.strategy == Strategy::Serial {
            for s in 1..phase.steps.len() {
                edges.push((Node::Step(p, s - 1), Node::Step(p, s)));
            }
        }
    }
    edges
}

/// The formats a graph is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A hand-written SVG picture ([`svg`]).
    Svg,
    /// Graphviz's DOT ([`dot`]).
    Dot,
    /// A mermaid flowchart ([`mermaid`]).
    Mermaid,
}

/// A plan asked for that the OperatorVersion does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan {plan:?} not found in {operator_version}; its plans: {}", known.join(", "))]
pub struct UnknownPlan {
    /// The plan asked for.
    pub plan: String,
    /// The OperatorVersion (or package) looked in.
    pub operator_version: String,
    /// The plans it has.
    pub known: Vec<String>,
}

/// `package graph`: the plans of `spec` (only `plan` when given) written as `format`, headed
/// `<title>`; `name` names the OperatorVersion in an error.
pub fn draw(
    spec: &OperatorVersionSpec,
    name: &str,
    plan: Option<&str>,
    format: Format,
) -> Result<String, UnknownPlan> {
    let mut plans = plans_of(spec);
    if let Some(wanted) = plan {
        if !plans.iter().any(|p| p.name == wanted) {
            return Err(UnknownPlan {
                plan: wanted.to_string(),
                operator_version: name.to_string(),
                known: plans.into_iter().map(|p| p.name).collect(),
            });
        }
        plans.retain(|p| p.name == wanted);
    }
    let title = match plan {
        Some(p) => format!("{name}: plan {p}"),
        None => format!("{name}: plans"),
    };
    Ok(match format {
        Format::Svg => svg::render(&title, &plans),
        Format::Dot => dot::render(&title, &plans),
        Format::Mermaid => mermaid::render(&plans),
    })
}

/// The word a status is shown with, everywhere: the status itself, or `NOT ACTIVE` (as `plan
/// status` prints a plan that is not the active one).
pub fn status_word(status: Option<ExecutionStatus>) -> &'static str {
    status.map_or("NOT ACTIVE", ExecutionStatus::as_str)
}

#[cfg(test)]
mod tests;
