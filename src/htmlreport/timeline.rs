//! One run's timeline (pure): the churn actions the audit database recorded and what the
//! disruption analysis ([`crate::disruption`]) found over the run's window — migrations,
//! restarts, interruptions — as events per VM, in seconds since the run started, and which
//! VMs get a row when there are too many to draw.
//!
//! Owns: turning the records and the analysis into events and choosing the rows (the most
//! disturbed VMs first, at most [`MAX_ROWS`]; the rest counted). Must not: judge anything
//! (the analysis did), render, or read the database, the cluster or Prometheus.

use std::collections::BTreeMap;

use super::data::{Fetched, RunRecord, churn_marks};
use crate::disruption::evidence::{MigrationResult, RestartEvidence};
use crate::disruption::{Assessed, Outcome};

/// Most VMs drawn as rows; the others are counted under the chart and listed in its tables.
pub const MAX_ROWS: usize = 40;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A churn action as the audit database recorded it (at its end).
    Churn {
        action: String,
        failed: bool,
        error: Option<String>,
    },
    Migration {
        name: Option<String>,
        source: Option<String>,
        target: Option<String>,
        result: MigrationResult,
        /// Where it was read from (`migration-object`, `prometheus-node-change`, ...).
        from: &'static str,
    },
    Restart {
        evidence: RestartEvidence,
        cause: Option<String>,
    },
    Interruption {
        ongoing: bool,
    },
}

impl What {
    /// The kind's name, as the legend and the table say it.
    pub fn kind(&self) -> &'static str {
        match self {
            What::Churn { failed: true, .. } => "churn action failed",
            What::Churn { .. } => "churn action",
            What::Migration { .. } => "migration",
            What::Restart { .. } => "restart",
            What::Interruption { .. } => "interruption",
        }
    }
}

/// One event of one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `<namespace>/<name>`.
    pub vm: String,
    /// Seconds since the run started (None: the cluster gave no time).
    pub at: Option<f64>,
    /// When it ended, for what lasts (None: a moment, or not over at the end of the window).
    pub until: Option<f64>,
    pub what: What,
}

/// A VM with a row: its name and verdict (None: the analysis did not cover it).
#[derive(Debug, Clone, PartialEq)]
pub struct RowVm {
    pub vm: String,
    pub outcome: Option<Outcome>,
}

/// The run's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Every event, by time (those without one last).
    pub events: Vec<Event>,
    /// The VMs drawn, most disturbed first.
    pub rows: Vec<RowVm>,
    /// VMs with events that got no row.
    pub not_drawn: usize,
    /// VMs without any event (of the analysis' VMs, else of the run's recorded VMs).
    pub undisturbed: usize,
    /// The end of the axis: the last event's end, or the run's end when later.
    pub x_max: f64,
}

fn unix(text: &str) -> Option<f64> {
    text.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond() as f64 / 1000.0)
}

/// The events of one analysed VM, as offsets from `start` (Unix seconds).
fn analysed_events(vm: &Assessed, start: f64, out: &mut Vec<Event>) {
    let f = &vm.findings;
    let name = format!("{}/{}", f.namespace, f.name);
    let off = |t: f64| t - start;
    for m in &f.migrations {
        out.push(Event {
            vm: name.clone(),
            at: m.start.or(m.end).map(off),
            until: m.end.map(off),
            what: What::Migration {
                name: m.name.clone(),
                source: m.source_node.clone(),
                target: m.target_node.clone(),
                result: m.result,
                from: m.from.as_str(),
            },
        });
    }
    for r in &f.restarts {
        out.push(Event {
            vm: name.clone(),
            at: Some(off(r.at)),
            until: None,
            what: What::Restart {
                evidence: r.evidence,
                cause: r.cause.clone(),
            },
        });
    }
    for i in f.interruption.iter().flat_map(|i| i.intervals.iter()) {
        out.push(Event {
            vm: name.clone(),
            at: Some(off(i.start)),
            until: (!i.ongoing).then(|| off(i.end)),
            what: What::Interruption { ongoing: i.ongoing },
        });
    }
}

/// How disturbed a VM is, for the row order: beyond the budget first, then restarted,
/// migrated, only churned.
fn severity(outcome: Option<Outcome>) -> u8 {
    match outcome {
        Some(Outcome::BeyondBudget) => 0,
        Some(Outcome::Restarted) => 1,
        Some(Outcome::Migrated) => 2,
        Some(Outcome::Unknown) => 3,
        _ => 4,
    }
}

/// The timeline of `run`: its churn actions, and the disruption analysis when there is one.
pub fn timeline(run: &RunRecord) -> Timeline {
    let start = unix(&run.detail.execution.started_at).unwrap_or(0.0);
    let mut events: Vec<Event> = churn_marks(run)
        .into_iter()
        .map(|m| Event {
            vm: m.vm,
            at: Some(m.at as f64),
            until: None,
            what: What::Churn {
                action: m.action,
                failed: m.failed,
                error: m.error,
            },
        })
        .collect();
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let analysed = match &run.disruption {
        Fetched::Data(d) => Some(&d.vms),
        Fetched::Missing(_) => None,
    };
    for vm in analysed.into_iter().flatten() {
        analysed_events(vm, start, &mut events);
        let name = format!("{}/{}", vm.findings.namespace, vm.findings.name);
        outcomes.insert(name, vm.outcome);
    }
    events.sort_by(|a, b| {
        let key = |e: &Event| e.at.unwrap_or(f64::INFINITY);
        key(a).total_cmp(&key(b)).then_with(|| a.vm.cmp(&b.vm))
    });
    // Each VM with events, by severity, then its first event, then name.
    let mut first: BTreeMap<&str, f64> = BTreeMap::new();
    for e in &events {
        let at = e.at.unwrap_or(f64::INFINITY);
        let seen = first.entry(e.vm.as_str()).or_insert(at);
        *seen = seen.min(at);
    }
    let mut disturbed: Vec<RowVm> = first
        .keys()
        .map(|vm| RowVm {
            vm: vm.to_string(),
            outcome: outcomes.get(*vm).copied(),
        })
        .collect();
    disturbed.sort_by(|a, b| {
        severity(a.outcome)
            .cmp(&severity(b.outcome))
            .then_with(|| first[a.vm.as_str()].total_cmp(&first[b.vm.as_str()]))
            .then_with(|| a.vm.cmp(&b.vm))
    });
    let total = match analysed {
        Some(vms) => vms.len(),
        None => run.detail.vms.len(),
    };
    let undisturbed = total.saturating_sub(disturbed.len());
    let not_drawn = disturbed.len().saturating_sub(MAX_ROWS);
    disturbed.truncate(MAX_ROWS);
    let run_end = run
        .detail
        .execution
        .completed_at
        .as_deref()
        .and_then(unix)
        .map_or(0.0, |t| t - start);
    let x_max = events
        .iter()
        .flat_map(|e| [e.at, e.until])
        .flatten()
        .fold(run_end, f64::max);
    Timeline {
        events,
        rows: disturbed,
        not_drawn,
        undisturbed,
        x_max,
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::tests::{context, detail};
    use super::*;
    use crate::audit::query::EventRow;
    use crate::disruption::evidence::{Migration, Restart, Source, VmiFacts};
    use crate::disruption::interruption::{Interruption, Interval};
    use crate::disruption::{Budget, Findings, assess};

    const T0: f64 = 1_772_359_200.0; // 2026-03-01T10:00:00Z

    fn findings(name: &str) -> Findings {
        Findings {
            namespace: "ns".into(),
            name: name.into(),
            workload: "cpu".into(),
            run_id: Some("r".into()),
            vmi: Some(VmiFacts {
                phase: Some("Running".into()),
                ..VmiFacts::default()
            }),
            migrations: Vec::new(),
            restarts: Vec::new(),
            interruption: None,
            measured_by: Vec::new(),
        }
    }

    #[test]
    fn events_are_offsets_from_the_run_and_rows_put_the_most_disturbed_first() {
        let churn_event = EventRow {
            occurred_at: "2026-03-01T10:02:00Z".into(),
            event_type: "churn_action".into(),
            message: Some("restart ns/b: succeeded".into()),
            error_detail: None,
            vm_name: None,
            workload: None,
        };
        let mut churn = detail("2026-03-01T10:01:00Z", vec![churn_event]);
        churn.execution.command = "churn".into();
        let mut moved = findings("a");
        moved.migrations.push(Migration {
            name: Some("m".into()),
            start: Some(T0 + 30.0),
            end: Some(T0 + 42.0),
            source_node: Some("n1".into()),
            target_node: Some("n2".into()),
            result: MigrationResult::Succeeded,
            from: Source::MigrationObject,
        });
        let mut restarted = findings("b");
        restarted.restarts.push(Restart {
            at: T0 + 110.0,
            evidence: RestartEvidence::NewVmi,
            vmi_uid: None,
            cause: Some("churn restart".into()),
        });
        restarted.interruption = Some(Interruption {
            intervals: vec![Interval {
                start: T0 + 100.0,
                end: T0 + 130.0,
                ongoing: false,
            }],
            longest_seconds: 30.0,
            total_seconds: 30.0,
        });
        let budget = Budget {
            max_interruption: Some(20.0),
            max_interruption_from: "--max-interruption".into(),
            allow_restarts: crate::model::AllowRestarts::None,
        };
        let vms = ["a", "quiet"]
            .into_iter()
            .map(|n| if n == "a" { moved.clone() } else { findings(n) })
            .chain([restarted])
            .map(|f| assess(f, &budget, false))
            .collect();
        let run = RunRecord {
            detail: detail("2026-03-01T10:00:00Z", Vec::new()),
            churns: vec![churn],
            load: Fetched::Missing(String::new()),
            alerts: Fetched::Missing(String::new()),
            disruption: Fetched::Data(super::super::data::Disruption {
                vms,
                context: context(),
            }),
        };
        let t = timeline(&run);
        let kinds: Vec<(&str, Option<f64>, Option<f64>)> = t
            .events
            .iter()
            .map(|e| (e.what.kind(), e.at, e.until))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("migration", Some(30.0), Some(42.0)),
                ("interruption", Some(100.0), Some(130.0)),
                ("restart", Some(110.0), None),
                ("churn action", Some(120.0), None),
            ]
        );
        // b is beyond the budget (restarted), a only migrated, "quiet" has no row.
        let rows: Vec<&str> = t.rows.iter().map(|r| r.vm.as_str()).collect();
        assert_eq!(rows, vec!["ns/b", "ns/a"]);
        assert_eq!((t.not_drawn, t.undisturbed, t.x_max), (0, 1, 130.0));
    }

    #[test]
    fn beyond_forty_disturbed_vms_the_rest_are_counted_not_drawn() {
        let vms: Vec<Assessed> = (0..100)
            .map(|i| {
                let mut f = findings(&format!("vm-{i:03}"));
                if i < 60 {
                    f.restarts.push(Restart {
                        at: T0 + i as f64,
                        evidence: RestartEvidence::VcpuCounterReset,
                        vmi_uid: None,
                        cause: None,
                    });
                }
                assess(
                    f,
                    &Budget {
                        max_interruption: None,
                        max_interruption_from: String::new(),
                        allow_restarts: crate::model::AllowRestarts::None,
                    },
                    false,
                )
            })
            .collect();
        let run = RunRecord {
            detail: detail("2026-03-01T10:00:00Z", Vec::new()),
            churns: Vec::new(),
            load: Fetched::Missing(String::new()),
            alerts: Fetched::Missing(String::new()),
            disruption: Fetched::Data(super::super::data::Disruption {
                vms,
                context: context(),
            }),
        };
        let t = timeline(&run);
        assert_eq!(t.rows.len(), MAX_ROWS);
        assert_eq!((t.not_drawn, t.undisturbed), (20, 40));
        assert_eq!(t.rows[0].vm, "ns/vm-000", "the earliest first among equals");
    }
}
