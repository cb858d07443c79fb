//! The Events about an Instance (`events.k8s.io/v1` whose `regarding` is the Instance: what the
//! manager reports as plans start, finish or fail), newest first, as `kubectl events` lists them.
//! The page shows them at load and the live updates keep them current through one watch.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp, Unit};
use kube::api::{Api, ListParams};
use kudo_client::cluster::Cluster;
use maud::{Markup, html};

/// One Event as a row of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// Why (`PlanStarted`, `PlanFinished`…).
    pub reason: String,
    /// The human-readable note.
    pub note: String,
    /// How many times it happened (its series' count, else 1).
    pub count: i32,
    /// When it happened last (RFC 3339), empty when the Event carries no time.
    pub last: String,
    /// How long ago that was (`12s`, `3m`, `2h`, `5d`).
    pub age: String,
}

/// The Events API of the Instance's namespace and the field selector naming the Instance.
pub(crate) fn api(cluster: &Cluster, instance: &str) -> (Api<Event>, String) {
    let api = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    (api, format!("regarding.kind=Instance,regarding.name={instance}"))
}

/// The Events about Instance `instance`, as rows (`now`: for their ages).
pub(crate) async fn read(cluster: &Cluster, instance: &str) -> Result<Vec<EventRow>, kube::Error> {
    let (api, fields) = api(cluster, instance);
    let list = api.list(&ListParams::default().fields(&fields)).await?;
    Ok(rows(&list.items, Timestamp::now()))
}

/// The rows of `events`, newest first (ties: by reason, so the order is stable).
pub fn rows(events: &[Event], now: Timestamp) -> Vec<EventRow> {
    let mut rows: Vec<EventRow> = events
        .iter()
        .map(|e| {
            let last = last_time(e);
            EventRow {
                type_: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                note: e.note.clone().unwrap_or_default(),
                count: e
                    .series
                    .as_ref()
                    .map(|s| s.count)
                    .or(e.deprecated_count)
                    .unwrap_or(1),
                age: last.map(|t| age(now.duration_since(t))).unwrap_or_default(),
                last: last
                    .map(|t| t.round(Unit::Second).unwrap_or(t).to_string())
                    .unwrap_or_default(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.last.cmp(&a.last).then_with(|| a.reason.cmp(&b.reason)));
    rows
}

/// When `e` happened last: its series' last observation, else its event time, else the
/// deprecated timestamps, else its creation.
fn last_time(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// An age as `kubectl get` prints one, in its largest whole unit (a clock running behind the
/// server's reads as `0s`). Written here: four lines, not worth a crate.
pub fn age(d: SignedDuration) -> String {
    let s = d.as_secs().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The list: the fragment the live updates replace.
pub fn list(rows: &Result<Vec<EventRow>, String>) -> Markup {
    html! {
        @match rows {
            Err(e) => p.message { "Cannot list the Events: " (e) },
            Ok(rows) if rows.is_empty() => p { "No Events." },
            Ok(rows) => div.scroll { table.events {
                thead { tr {
                    th scope="col" { "Type" } th scope="col" { "Reason" } th scope="col" { "Note" }
                    th scope="col" { "Count" } th scope="col" { "Age" }
                } }
                tbody {
                    @for r in rows {
                        tr data-reason=(r.reason) {
                            td { (r.type_) } td { (r.reason) } td { (r.note) } td { (r.count) }
                            td { time datetime=(r.last) title=(r.last) { (r.age) } }
                        }
                    }
                }
            } },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_are_newest_first_with_the_series_count() {
        let ev = |reason: &str, v: serde_json::Value| -> Event {
            let mut e = json!({"metadata": {"name": reason}, "eventTime": "2026-01-01T00:00:00.000000Z",
                               "reason": reason, "type": "Normal", "note": format!("{reason} note")});
            e.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
            serde_json::from_value(e).unwrap()
        };
        let events = [
            ev("PlanStarted", json!({})),
            ev(
                "PlanFinished",
                json!({"type": "Warning", "series": {"count": 3,
                       "lastObservedTime": "2026-01-01T01:00:00.000000Z"}}),
            ),
            ev(
                "Old",
                json!({"eventTime": null, "deprecatedCount": 2,
                             "deprecatedLastTimestamp": "2025-12-30T00:00:00Z"}),
            ),
        ];
        let now: Timestamp = "2026-01-01T01:00:30Z".parse().unwrap();
        let got: Vec<(String, String, i32, String)> = rows(&events, now)
            .into_iter()
            .map(|r| (r.reason, r.type_, r.count, r.age))
            .collect();
        let want = [
            ("PlanFinished", "Warning", 3, "30s"),
            ("PlanStarted", "Normal", 1, "60m"),
            ("Old", "Normal", 2, "2d"),
        ]
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c, d.to_string()));
        assert_eq!(got, want);
        assert_eq!(rows(&events, now)[0].last, "2026-01-01T01:00:00Z");
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let cases = [
            (-5, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (7199, "119m"),
            (7200, "2h"),
        ];
        for (secs, want) in cases {
            assert_eq!(age(SignedDuration::from_secs(secs)), want, "{secs}");
        }
        assert_eq!(age(SignedDuration::from_hours(72)), "3d");
    }
}
