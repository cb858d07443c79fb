//! `package list parameters|plans|tasks` output, in KUDO's formats: uitable-style tables (every
//! cell padded to its column's width, columns joined by a tab) and box-drawing trees.

use crate::model::Package;

/// A uitable-like table. Columns are padded to the widest cell; cells longer than `max_col_width`
/// are word-wrapped onto continuation lines (as KUDO's parameter table does at 35 characters).
#[derive(Clone, Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    /// Widest a cell may be before it is word-wrapped; `None` never wraps.
    pub max_col_width: Option<usize>,
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Greedy word wrap at `max` characters (a single longer word stays whole).
fn wrap(s: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in s.split('\n') {
        let mut cur = String::new();
        for word in para.split(' ') {
            if cur.is_empty() {
                cur = word.to_string();
            } else if width(&cur) + 1 + width(word) <= max {
                cur.push(' ');
                cur.push_str(word);
            } else {
                lines.push(std::mem::take(&mut cur));
                cur = word.to_string();
            }
        }
        lines.push(cur);
    }
    lines
}

impl Table {
    /// An empty table with no wrapping.
    pub fn new() -> Table {
        Table::default()
    }

    /// Appends one row; rows may have different numbers of cells.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Renders without a trailing newline.
    pub fn render(&self) -> String {
        let split: Vec<Vec<Vec<String>>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| match self.max_col_width {
                        Some(m) if width(c) > m || c.contains('\n') => wrap(c, m),
                        _ => vec![c.clone()],
                    })
                    .collect()
            })
            .collect();
        let ncols = split.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; ncols];
        for r in &split {
            for (i, c) in r.iter().enumerate() {
                for l in c {
                    widths[i] = widths[i].max(width(l));
                }
            }
        }
        let mut lines = Vec::new();
        for r in &split {
            let height = r.iter().map(Vec::len).max().unwrap_or(1);
            for h in 0..height {
                let cells: Vec<String> = (0..r.len())
                    .map(|i| {
                        let s = r[i].get(h).map(String::as_str).unwrap_or("");
                        format!("{s}{}", " ".repeat(widths[i] - width(s)))
                    })
                    .collect();
                lines.push(cells.join("\t"));
            }
        }
        lines.join("\n")
    }
}

/// Options of `package list parameters`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ParamListOptions {
    /// `--descriptions`: add a `Descriptions` column to the table.
    pub descriptions: bool,
    /// `--required`: list only the names of parameters that are required and have no default.
    pub required_only: bool,
    /// `--names`: list only the parameter names.
    pub names_only: bool,
}

/// `package list parameters` (sorted by name). `--required` lists the parameters a user must set
/// (required and without default) — the check KUDO meant to make.
pub fn parameters(pkg: &Package, o: ParamListOptions) -> String {
    let mut params: Vec<&crate::model::DeclaredParameter> = pkg.params.parameters.iter().collect();
    params.sort_by(|a, b| a.name.cmp(&b.name));
    let mut t = Table::new();
    if o.required_only {
        let req: Vec<_> = params.iter().filter(|p| p.needs_value()).collect();
        if req.is_empty() {
            return "no required parameters without default values found\n".into();
        }
        t.row(["Name"]);
        for p in req {
            t.row([p.name.as_str()]);
        }
        return t.render() + "\n";
    }
    if o.names_only {
        t.row(["Name"]);
        for p in params {
            t.row([p.name.as_str()]);
        }
        return t.render() + "\n";
    }
    t.max_col_width = Some(35);
    if o.descriptions {
        t.row(["Name", "Default", "Required", "Immutable", "Descriptions"]);
    } else {
        t.row(["Name", "Default", "Required", "Immutable"]);
    }
    for p in params {
        let mut row = vec![
            p.name.clone(),
            p.default.clone().unwrap_or_default(),
            p.is_required().to_string(),
            p.is_immutable().to_string(),
        ];
        if o.descriptions {
            row.push(p.description.clone());
        }
        t.row(row);
    }
    t.render() + "\n"
}

/// `package list tasks`: `Name  Kind  Resources`, in declaration order.
pub fn tasks(pkg: &Package) -> String {
    let mut t = Table::new();
    t.row(["Name", "Kind", "Resources"]);
    for task in &pkg.operator.tasks {
        let res = crate::verify::task_templates(task);
        t.row([
            task.name.clone(),
            task.kind.to_string(),
            format!("[{}]", res.join(" ")),
        ]);
    }
    t.render() + "\n"
}

/// A tree node for box-drawing output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeNode {
    /// The text shown for this node (a plan, phase, step or task name).
    pub label: String,
    /// The nodes drawn below this one, in order.
    pub children: Vec<TreeNode>,
}

impl TreeNode {
    /// A leaf node with `label` and no children.
    pub fn new(label: impl Into<String>) -> TreeNode {
        TreeNode {
            label: label.into(),
            children: Vec::new(),
        }
    }

    /// Renders with `├── `/`└── ` branches, ending in a newline.
    pub fn render(&self) -> String {
        let mut out = format!("{}\n", self.label);
        Self::render_children(&self.children, "", &mut out);
        out
    }

    fn render_children(children: &[TreeNode], prefix: &str, out: &mut String) {
        for (i, c) in children.iter().enumerate() {
            let last = i + 1 == children.len();
            out.push_str(prefix);
            out.push_str(if last { "└── " } else { "├── " });
            out.push_str(&c.label);
            out.push('\n');
            let next = format!("{prefix}{}", if last { "    " } else { "│   " });
            Self::render_children(&c.children, &next, out);
        }
    }
}

fn strategy(s: &str) -> String {
    format!("({s})")
}

/// `package list plans [-t]`: plans sorted by name → phases → steps → tasks (with `-t`, tasks as
/// `[kind]  name` with their templates below).
pub fn plans(pkg: &Package, with_tasks: bool) -> String {
    let mut root = TreeNode::new("plans");
    for (name, plan) in &pkg.operator.plans {
        let mut pn = TreeNode::new(format!("{name} {}", strategy(&plan.strategy.0)));
        for phase in &plan.phases {
            let mut ph = TreeNode::new(format!("[phase]  {} {}", phase.name, strategy(&phase.strategy.0)));
            for step in &phase.steps {
                let mut st = TreeNode::new(format!("[step]  {}", step.name));
                for tname in &step.tasks {
                    let node = match (with_tasks, pkg.operator.task(tname)) {
                        (true, Some(task)) => {
                            let mut tn = TreeNode::new(format!(
                                "[{}]  {}",
                                task.kind.as_str().to_lowercase(),
                                task.name
                            ));
                            tn.children = crate::verify::task_templates(task)
                                .into_iter()
                                .map(TreeNode::new)
                                .collect();
                            tn
                        }
                        _ => TreeNode::new(tname.clone()),
                    };
                    st.children.push(node);
                }
                ph.children.push(st);
            }
            pn.children.push(ph);
        }
        root.children.push(pn);
    }
    root.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_every_cell_and_joins_with_tabs() {
        let mut t = Table::new();
        t.row(["Name", "Default"]);
        t.row(["cpus", "0.25"]);
        t.row(["memory", "1Gi"]);
        assert_eq!(t.render(), "Name  \tDefault\ncpus  \t0.25   \nmemory\t1Gi    ");
    }

    #[test]
    fn tree_drawing() {
        let mut r = TreeNode::new("plans");
        let mut a = TreeNode::new("a");
        a.children.push(TreeNode::new("x"));
        r.children.push(a);
        r.children.push(TreeNode::new("b"));
        assert_eq!(r.render(), "plans\n├── a\n│   └── x\n└── b\n");
    }
}
