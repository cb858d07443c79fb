//! The initiators of one reconcile run as a pull-based state machine ([`Initiating`]).

use kudo_api::InstanceSpec;

use super::admitted::Admitted;
use super::admitted::Uids;
use super::effect;
use super::initiators::INITIATORS;
use super::observed::{Admitting, Needs, Observation, Observed, Provided};

/// The initiators of one reconcile as a pull-based state machine (like [`crate::PlanPass`]): the
/// manager calls [`Self::advance`] until it returns `None`, reading what an initiator needs in
/// between ([`Self::provide`]), then takes the result with [`Self::finish`].
///
/// ```
/// # use kudo_engine::reconcile::*;
/// # use kudo_api::{Instance, OperatorVersion};
/// # fn demo(inst: &Instance, ov: &OperatorVersion, now: kudo_engine::Timestamp) {
/// let mut uids = || "a-fresh-uid".to_string();
/// let mut run = Initiating::new(Observed::new(inst, ov, None, false, now));
/// while let Some(needs) = run.advance(&mut uids) {
///     for need in &needs {
///         // The manager reads what `need` names (Secrets, the objects of autopilot rules)…
///         let read = match need {
///             Observation::Sensitive => Provided::Sensitive(Sensitive::NoSources),
///             Observation::Autopilot(_) => Provided::Autopilot(Autopilot::NotEvaluated),
///         };
///         run.provide(read);
///     }
/// }
/// let admitting = run.finish();
/// // …stores `admitting.admitted`, then executes `admitting.effects` and `admitting.stored`.
/// # let _ = admitting; }
/// ```
pub struct Initiating<'a> {
    obs: Observed<'a>,
    adm: Admitting,
    next: usize,
}

impl<'a> Initiating<'a> {
    /// Starts the initiators on `obs`, with nothing admitted yet.
    pub fn new(obs: Observed<'a>) -> Self {
        Initiating {
            obs,
            adm: Admitting::default(),
            next: 0,
        }
    }

    /// Runs initiators in order until one needs something not read yet (returned: read all of it,
    /// [`Self::provide`] it and call again) or all ran (`None`).
    pub fn advance(&mut self, uids: Uids<'_>) -> Option<Needs> {
        while let Some(init) = INITIATORS.get(self.next) {
            let unread: Needs = init
                .needs(&self.obs)
                .into_iter()
                .filter(|o| !self.obs.has(o))
                .collect();
            if !unread.is_empty() {
                return Some(unread);
            }
            init.initiate(&self.obs, &mut self.adm, uids);
            self.next += 1;
        }
        None
    }

    /// The spec admitted so far: the one whose sensitive parameters [`Observation::Sensitive`]
    /// asks about.
    pub fn exec(&self) -> Option<&InstanceSpec> {
        self.adm.admitted.as_ref().and_then(|a| a.exec.as_ref())
    }

    /// What the manager read for one of the [`Needs`] last returned.
    pub fn provide(&mut self, read: Provided) {
        match read {
            Provided::Sensitive(s) => self.obs.sensitive = s,
            Provided::Autopilot(a) => self.obs.autopilot = a,
        }
    }

    /// The admission, and its effects: the Events and the `ChangeAccepted` condition of a
    /// denial come first among those executed once it is stored.
    pub fn finish(self) -> Admitting {
        let Initiating { obs, mut adm, .. } = self;
        let admitted = adm
            .admitted
            .get_or_insert_with(|| Admitted::keeping(obs.inst, None, None));
        let mut stored = effect::admission_effects(admitted.denial.as_deref());
        stored.append(&mut adm.stored);
        adm.stored = stored;
        adm
    }
}

/// Drives [`Initiating`] to the end with a synchronous `observe` of each [`Observation`] (tests;
/// the manager's reads are async and drive it themselves). `observe` gets the spec admitted so
/// far.
pub fn initiate_all(
    obs: Observed<'_>,
    mut observe: impl FnMut(&Observation, Option<&InstanceSpec>) -> Provided,
    uids: Uids<'_>,
) -> Admitting {
    let mut run = Initiating::new(obs);
    while let Some(needs) = run.advance(uids) {
        for need in &needs {
            let read = observe(need, run.exec());
            run.provide(read);
        }
    }
    run.finish()
}
