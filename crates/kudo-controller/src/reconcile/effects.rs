//! Effect: executing what the engine decided ([`Effect`]), in order. Events are published and
//! lines logged at once; a status change is applied to the status this reconcile writes and a
//! requeue folded into its [`super::Outcome`].

use kube::api::DynamicObject;
use kudo_engine::reconcile::{Effect, LogLevel};
use tracing::{debug, info, warn};

use super::{Outcome, Reconciler};

impl Reconciler<'_> {
    /// Executes `effects` in order into `out`.
    pub(super) async fn execute(&self, raw: &DynamicObject, effects: &[Effect], out: &mut Outcome) {
        for e in effects {
            match e {
                Effect::Status(change) => change.apply(&mut out.status, out.generation, out.now),
                Effect::Requeue(d) => out.requeue.within(Some(*d)),
                other => self.publish(raw, other).await,
            }
        }
    }

    /// Executes an Event or a log line.
    async fn publish(&self, raw: &DynamicObject, e: &Effect) {
        match e {
            Effect::Event {
                type_,
                reason,
                action,
                message,
                once,
            } => {
                let ev = crate::events::Event {
                    type_: *type_,
                    reason,
                    action,
                    note: message,
                    related: None,
                    once: once.as_deref(),
                };
                self.publish_event(raw, ev).await
            }
            Effect::Log { level, message } => match level {
                LogLevel::Debug => debug!("{message}"),
                LogLevel::Info => info!("{message}"),
                LogLevel::Warn => warn!("{message}"),
            },
            Effect::Status(_) | Effect::Requeue(_) => {}
        }
    }
}
