//! Tree drawing in the style KUDO's CLI printed (Go's treeprint): a `.` root, `├── `/`└── ` branches
//! and `│   `/`    ` continuation, one trailing newline per line.
//!
//! Written here instead of using `termtree` because treeprint's exact layout (the `.` root line and
//! the blank line KUDO printed after it) is part of the output users and scripts match against, and
//! the whole renderer is twenty lines.

/// A labelled node with ordered children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub label: String,
    pub children: Vec<Node>,
}

impl Node {
    pub fn new(label: impl Into<String>) -> Node {
        Node {
            label: label.into(),
            children: Vec::new(),
        }
    }

    pub fn push(&mut self, child: Node) -> &mut Node {
        self.children.push(child);
        self.children.last_mut().expect("just pushed")
    }
}

/// Renders `roots` under a `.` line, exactly as treeprint's `String()`.
pub fn render(roots: &[Node]) -> String {
    let mut out = String::from(".\n");
    render_children(roots, "", &mut out);
    out
}

fn render_children(children: &[Node], prefix: &str, out: &mut String) {
    for (i, child) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        out.push_str(prefix);
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&child.label);
        out.push('\n');
        let next = format!("{prefix}{}", if last { "    " } else { "│   " });
        render_children(&child.children, &next, out);
    }
}

/// A text redrawn in place on a terminal as it changes (cursor up, clear), or printed once at the
/// end on a pipe, so the output of a `--wait` is never garbled: `plan status --wait`,
/// `rollout status --wait`.
#[derive(Debug, Default)]
pub struct Redraw {
    last: String,
}

impl Redraw {
    /// Shows `text` (the current state); `last_poll`: the wait is over.
    pub fn show(
        &mut self,
        out: &mut dyn std::io::Write,
        text: String,
        tty: bool,
        last_poll: bool,
    ) -> std::io::Result<()> {
        if tty && text != self.last {
            let previous_lines = self.last.lines().count() + usize::from(self.last.ends_with("\n\n"));
            if previous_lines > 0 {
                write!(out, "\x1b[{previous_lines}A\x1b[J")?;
            }
            write!(out, "{text}")?;
            out.flush()?;
            self.last = text.clone();
        }
        if last_poll && !tty {
            write!(out, "{text}")?;
        }
        Ok(())
    }
}
