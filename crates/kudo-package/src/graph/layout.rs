//! Where each node of a plan goes: a grid position (row and column) for the page's CSS grid and a
//! rectangle in pixels for the SVG, plus the arrows of [`super::flow`] as polylines.
//!
//! The phases of a serial plan are stacked top to bottom with an arrow between them; those of a
//! parallel plan stand side by side without one. In a phase the steps fill rows of at most
//! [`MAX_COLUMNS`], left to right: in a serial phase an arrow leads from each step to the next (down
//! and back to the left where a row wraps), in a parallel phase there is none (they run at once).

use super::{Node, PhaseNode, PlanGraph, StepNode, Strategy, flow};

/// Steps per row before a phase wraps (a row of galera's nine steps would not fit a page).
pub const MAX_COLUMNS: usize = 4;
/// A step's box width.
pub const STEP_W: i32 = 200;
/// The height of one line of text in a step's box.
pub const LINE_H: i32 = 16;
/// Padding inside a step's box.
pub const STEP_PAD: i32 = 8;
/// Room between the steps of a row (for an arrow) and between rows (for a wrapping arrow).
pub const GAP_X: i32 = 40;
/// See [`GAP_X`].
pub const GAP_Y: i32 = 32;
/// Padding inside a phase's box, and its title's height.
pub const PHASE_PAD: i32 = 12;
/// See [`PHASE_PAD`].
pub const PHASE_HEADER: i32 = 28;
/// Room between phases (for an arrow), and around them in the plan.
pub const PHASE_GAP: i32 = 36;
/// The plan title's height.
pub const PLAN_HEADER: i32 = 32;

/// A rectangle in pixels, from the plan's top left corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left.
    pub x: i32,
    /// Top.
    pub y: i32,
    /// Width.
    pub w: i32,
    /// Height.
    pub h: i32,
}

impl Rect {
    /// The bottom edge.
    pub fn bottom(&self) -> i32 {
        self.y + self.h
    }
    /// The right edge.
    pub fn right(&self) -> i32 {
        self.x + self.w
    }
    /// The horizontal centre.
    pub fn center_x(&self) -> i32 {
        self.x + self.w / 2
    }
}

/// A step's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepBox {
    /// Its row in the phase (from 0).
    pub row: usize,
    /// Its column in the phase (from 0).
    pub col: usize,
    /// Its box.
    pub rect: Rect,
}

/// A phase's place and its steps'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseBox {
    /// Its row in the plan (serial plans: one per phase).
    pub row: usize,
    /// Its column in the plan (parallel plans: one per phase).
    pub col: usize,
    /// The columns of its step grid.
    pub columns: usize,
    /// Its box.
    pub rect: Rect,
    /// Its steps, in order.
    pub steps: Vec<StepBox>,
}

/// An arrow from one node to the next one to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrow {
    /// Where it starts.
    pub from: Node,
    /// Where it points.
    pub to: Node,
    /// The polyline, from start to tip.
    pub points: Vec<(i32, i32)>,
}

/// A plan laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanLayout {
    /// Width of the whole drawing.
    pub width: i32,
    /// Height of the whole drawing.
    pub height: i32,
    /// The phases, in order.
    pub phases: Vec<PhaseBox>,
    /// The arrows of [`flow`].
    pub arrows: Vec<Arrow>,
}

/// The lines of text in a step's box: its name, its status when a run is shown, each task.
pub fn step_lines(step: &StepNode) -> usize {
    1 + usize::from(step.status.is_some()) + step.tasks.len()
}

fn step_height(step: &StepNode) -> i32 {
    2 * STEP_PAD + LINE_H * step_lines(step) as i32
}

/// Lays out `plan` (see the module docs).
pub fn layout(plan: &PlanGraph) -> PlanLayout {
    let serial = plan.strategy == Strategy::Serial;
    let (mut x, mut y) = (PHASE_GAP / 2, PLAN_HEADER);
    let mut phases = Vec::new();
    for (i, phase) in plan.phases.iter().enumerate() {
        let placed = place_phase(phase, x, y, if serial { (i, 0) } else { (0, i) });
        if serial {
            y = placed.rect.bottom() + PHASE_GAP;
        } else {
            x = placed.rect.right() + PHASE_GAP;
        }
        phases.push(placed);
    }
    let width = phases.iter().map(|p| p.rect.right()).max().unwrap_or(0) + PHASE_GAP / 2;
    let height = phases
        .iter()
        .map(|p| p.rect.bottom())
        .max()
        .unwrap_or(PLAN_HEADER)
        + PHASE_GAP / 2;
    let arrows = flow(plan)
        .into_iter()
        .map(|(from, to)| Arrow {
            from,
            to,
            points: route(&phases, from, to),
        })
        .collect();
    PlanLayout {
        width: width.max(STEP_W + 2 * PHASE_PAD + PHASE_GAP),
        height,
        phases,
        arrows,
    }
}

/// A phase's box at (`x`, `y`) with its steps in rows of at most [`MAX_COLUMNS`].
fn place_phase(phase: &PhaseNode, x: i32, y: i32, (row, col): (usize, usize)) -> PhaseBox {
    let columns = phase.steps.len().clamp(1, MAX_COLUMNS);
    let mut steps = Vec::new();
    let mut row_y = y + PHASE_HEADER;
    for chunk_start in (0..phase.steps.len()).step_by(columns) {
        let chunk = &phase.steps[chunk_start..(chunk_start + columns).min(phase.steps.len())];
        let row_h = chunk.iter().map(step_height).max().unwrap_or(0);
        for (c, step) in chunk.iter().enumerate() {
            steps.push(StepBox {
                row: chunk_start / columns,
                col: c,
                rect: Rect {
                    x: x + PHASE_PAD + c as i32 * (STEP_W + GAP_X),
                    y: row_y,
                    w: STEP_W,
                    h: step_height(step),
                },
            });
        }
        row_y += row_h + GAP_Y;
    }
    let inner_bottom = if steps.is_empty() {
        row_y + LINE_H
    } else {
        row_y - GAP_Y
    };
    let w = 2 * PHASE_PAD + columns as i32 * STEP_W + (columns as i32 - 1) * GAP_X;
    PhaseBox {
        row,
        col,
        columns,
        rect: Rect {
            x,
            y,
            w,
            h: inner_bottom + PHASE_PAD - y,
        },
        steps,
    }
}

/// The polyline of an arrow: along a row, down and back where a row wraps, down between phases.
fn route(phases: &[PhaseBox], from: Node, to: Node) -> Vec<(i32, i32)> {
    match (from, to) {
        (Node::Step(p, a), Node::Step(_, b)) => {
            let (a, b) = (&phases[p].steps[a], &phases[p].steps[b]);
            if a.row == b.row {
                let y = a.rect.y + STEP_PAD + LINE_H / 2;
                vec![(a.rect.right(), y), (b.rect.x, y)]
            } else {
                let mid = b.rect.y - GAP_Y / 2;
                vec![
                    (a.rect.center_x(), a.rect.bottom()),
                    (a.rect.center_x(), mid),
                    (b.rect.center_x(), mid),
                    (b.rect.center_x(), b.rect.y),
                ]
            }
        }
        (from, to) => {
            let (a, b) = (phase_rect(phases, from), phase_rect(phases, to));
            let x = a.x + a.w.min(b.w) / 2;
            vec![(x, a.bottom()), (x, b.y)]
        }
    }
}

fn phase_rect(phases: &[PhaseBox], node: Node) -> Rect {
    match node {
        Node::Phase(p) | Node::Step(p, _) => phases[p].rect,
    }
}
