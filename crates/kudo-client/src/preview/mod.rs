//! Previews (`--dry-run[=client|server]`): what a change of an Instance would do, without writing
//! anything. KUDO #1735 asked for `plan trigger --dry-run`, Helm #3156 for the same on upgrades.
//!
//! Every command that changes an Instance (`update`, `upgrade`, `plan trigger`, `rollback`)
//! builds a [`Change`] — the stored Instance, the spec it proposes, the old and new
//! OperatorVersion — and, asked for a preview, calls [`preview`] *instead of* writing. It judges
//! the change with KUDO's admission rules (`kudo_engine::triggers`, the same call the real command
//! makes, [`verdict`]), renders the plan that would run with the parameters the manager would see
//! (`spec.parameterSources` resolved from their Secrets) exactly as the manager renders it
//! ([`kudo_package::live::render_live`]), and, when asked, diffs each object against the live one
//! ([`diff`]). A caller that already knows the plan (rollback) sets [`Change::plan`]; one that adds
//! template data sets [`Change::adjust`], which sees the [`RenderContext`] just before rendering.
//!
//! # Nothing is written
//! [`Mode::Client`] makes only GETs (the parameter Secrets, the live objects of the dependencies
//! hash and of the diffs, discovery). [`Mode::Server`] adds one server-side apply per object with
//! `dryRun=All` and the manager's field manager ([`MANAGER_FIELD_MANAGER`]), `force` as the manager
//! applies, which the API server validates, defaults and merges but does not store.
//!
//! # Secrets
//! Sensitive values are resolved to render but never shown: the outcome's [`Masker`] masks every
//! data/stringData value of a Secret as `kubectl diff` masks it, and replaces every occurrence of a
//! sensitive value (4 characters or more) elsewhere by `(redacted)`; diffs and error texts are
//! masked already.

pub mod diff;
pub mod mask;
mod render;
pub mod verdict;

use std::collections::BTreeMap;

use kudo_api::{Instance, InstanceSpec, OperatorVersion};
use kudo_kube::discovery::Cache;
use kudo_package::render::{RenderContext, RenderedObject};

use crate::Result;
use crate::cluster::Cluster;
use crate::sensitive::Redactor;
pub use diff::ObjectDiff;
pub use mask::Masker;
pub use verdict::{Verdict, verdict};

/// The field manager the manager applies with (`ControllerConfig::field_manager`'s default), so
/// a server-side preview merges exactly as the manager's apply will.
pub const MANAGER_FIELD_MANAGER: &str = kudo_engine::field_ownership::FIELD_MANAGER;

/// Where a preview's diffs are computed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Locally: each rendered object against the fields it sets in the live object as read.
    Client,
    /// Against the result of a server-side apply of each object with dryRun=All: what the
    /// manager's apply would change, defaults and admission included.
    Server,
}

/// Adjusts the render context just before rendering (e.g. rollback's template data).
pub type AdjustFn<'a> = &'a (dyn Fn(&mut RenderContext) + Send + Sync);

/// A proposed change of an Instance, as the command would write it.
pub struct Change<'a> {
    /// The Instance as stored.
    pub instance: &'a Instance,
    /// The spec the command would write (for `plan trigger`: `planExecution.planName` set).
    pub proposed: &'a InstanceSpec,
    /// The OperatorVersion the Instance runs.
    pub old_ov: &'a OperatorVersion,
    /// The OperatorVersion `proposed` references (the same as `old_ov` unless upgrading).
    pub new_ov: &'a OperatorVersion,
    /// The plan that runs, when the caller knows it (rollback); `None`: the plan KUDO's admission
    /// chooses. Admission still judges the change (a refusal wins).
    pub plan: Option<&'a str>,
    /// Called with the render context before rendering.
    pub adjust: Option<AdjustFn<'a>>,
    /// Values of sensitive parameters the command would write into `<instance>-parameters`
    /// (update -p of a sensitive parameter): they win over the Secret's current data.
    pub sensitive_values: BTreeMap<String, String>,
}

impl<'a> Change<'a> {
    /// A change of `instance` to `proposed`, judged by admission, with nothing else.
    pub fn new(
        instance: &'a Instance,
        proposed: &'a InstanceSpec,
        old_ov: &'a OperatorVersion,
        new_ov: &'a OperatorVersion,
    ) -> Self {
        Change {
            instance,
            proposed,
            old_ov,
            new_ov,
            plan: None,
            adjust: None,
            sensitive_values: BTreeMap::new(),
        }
    }

    /// Runs `plan` (the caller knows it) instead of the one admission chooses.
    pub fn with_plan(mut self, plan: &'a str) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Adjusts the render context before rendering.
    pub fn with_adjust(mut self, adjust: AdjustFn<'a>) -> Self {
        self.adjust = Some(adjust);
        self
    }

    /// Sensitive values the command would store in `<instance>-parameters`.
    pub fn with_sensitive_values(mut self, values: BTreeMap<String, String>) -> Self {
        self.sensitive_values = values;
        self
    }
}

/// A preview asked for.
pub struct PreviewRequest<'a> {
    /// The change.
    pub change: &'a Change<'a>,
    /// Where diffs are computed.
    pub mode: Mode,
    /// Whether to diff each object (always with [`Mode::Server`]: its dry-run apply is the check).
    pub diffs: bool,
}

/// What the change would do.
#[derive(Debug)]
pub struct Preview {
    /// KUDO's decision.
    pub verdict: Verdict,
    /// The objects the plan would apply or delete, in plan order (empty unless a plan runs).
    pub objects: Vec<RenderedObject>,
    /// One diff per object, when asked for (and a plan runs).
    pub diffs: Option<Vec<ObjectDiff>>,
    /// What hides the sensitive values in anything printed of the objects.
    pub masker: Masker,
}

impl Preview {
    /// How many objects the API server refused to dry-run apply (the plan would fail on them).
    pub fn refused(&self) -> usize {
        self.diffs.iter().flatten().filter(|d| d.error.is_some()).count()
    }
}

/// Previews a change (see the module docs): KUDO's decision and, when a plan would run, its
/// objects and their diffs. Writes nothing. Errors: a parameter Secret cannot be read, the plan
/// does not render, a live dependency of the dependencies hash cannot be read.
pub async fn preview(cluster: &Cluster, request: &PreviewRequest<'_>) -> Result<Preview> {
    let change = request.change;
    let sources = render::sources(cluster, change).await?;
    let masker = Masker::new(Redactor::new(sources.sensitive_values()));
    let verdict = verdict(change, &sources.rotated);
    let Verdict::Run { plan, .. } = &verdict else {
        return Ok(Preview {
            verdict,
            objects: Vec::new(),
            diffs: None,
            masker,
        });
    };
    let mut params = change.proposed.parameters.clone();
    params.extend(sources.proposed);
    let discovery = Cache::new(cluster.client.clone());
    let objects = render::render(cluster, &discovery, change, plan, params, masker.redactor()).await?;
    let diffs = match (request.mode, request.diffs) {
        (Mode::Server, _) | (Mode::Client, true) => {
            let mut diffs = Vec::new();
            for o in &objects {
                diffs.push(diff::diff_object(cluster, &discovery, o, request.mode, &masker).await);
            }
            Some(diffs)
        }
        (Mode::Client, false) => None,
    };
    Ok(Preview {
        verdict,
        objects,
        diffs,
        masker,
    })
}
