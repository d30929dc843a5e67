//! Migrations and restarts of one VM over the window, from what the API server holds
//! (VirtualMachineInstanceMigration objects, the VMI's `status.migrationState`, its uid and
//! creation time) and, when KubeVirt has garbage-collected the migration objects (it keeps
//! the last five finalized ones per VMI), from Prometheus' `kubevirt_vmi_migration_*_time_seconds`
//! series and the node changes of `kubevirt_vmi_info`. Each migration says which of these
//! it came from. Restarts are a VMI created in the window after the VM's first start, or a
//! vCPU counter reset no migration from any source explains (a migration's target is a new
//! QEMU, so its counter starts afresh); their cause is the churn action the audit
//! database recorded for the VM at that time, when there is one.
//!
//! Pure: facts in, findings out. Must not: query anything or read the clock.

use serde::Serialize;

use super::Span;

/// A VMI's or a migration's `migrationState`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MigrationState {
    pub uid: Option<String>,
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub source: Option<String>,
    pub target: Option<String>,
    pub completed: bool,
    pub failed: bool,
}

/// What the API says about a VM's current VMI.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmiFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub created: Option<f64>,
    pub phase: Option<String>,
    pub node: Option<String>,
    /// The LiveMigratable condition (None: not stated).
    pub migratable: Option<bool>,
    pub migration: Option<MigrationState>,
}

/// A VirtualMachineInstanceMigration the API still holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MigrationObject {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub vmi_name: String,
    pub created: Option<f64>,
    pub phase: Option<String>,
    /// `status.phaseTransitionTimestamps`: phase → when it was entered.
    pub phase_times: Vec<(String, f64)>,
    pub state: Option<MigrationState>,
}

/// Where a migration was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A VirtualMachineInstanceMigration object.
    MigrationObject,
    /// The VMI's `status.migrationState` (its last migration).
    VmiStatus,
    /// `kubevirt_vmi_migration_start_time_seconds` / `_end_time_seconds`.
    PrometheusMigrationMetrics,
    /// The `node` label of `kubevirt_vmi_info` changed (times bounded by the query step).
    PrometheusNodeChange,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::MigrationObject => "migration-object",
            Source::VmiStatus => "vmi-status",
            Source::PrometheusMigrationMetrics => "prometheus-migration-metrics",
            Source::PrometheusNodeChange => "prometheus-node-change",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationResult {
    Succeeded,
    Failed,
    /// Not over at the end of the window.
    Running,
    Unknown,
}

impl MigrationResult {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrationResult::Succeeded => "succeeded",
            MigrationResult::Failed => "failed",
            MigrationResult::Running => "running",
            MigrationResult::Unknown => "unknown",
        }
    }
}

/// One live migration of a VM.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Migration {
    /// The migration object's name, when known.
    pub name: Option<String>,
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub source_node: Option<String>,
    pub target_node: Option<String>,
    pub result: MigrationResult,
    pub from: Source,
}

impl Migration {
    pub fn duration(&self) -> Option<f64> {
        Some((self.end? - self.start?).max(0.0))
    }

    /// Whether it happened (at least in part) inside `span`; a migration with no time at
    /// all is kept (the API still shows it, so it is recent).
    fn touches(&self, span: Span) -> bool {
        match (self.start, self.end) {
            (None, None) => true,
            (start, end) => {
                let s = start.or(end).unwrap_or(span.from);
                let e = end.unwrap_or(span.to);
                e >= span.from && s <= span.to
            }
        }
    }

    /// Whether `at` falls within this migration, give or take `slack` seconds.
    pub fn covers(&self, at: f64, slack: f64) -> bool {
        let start = self.start.or(self.end).unwrap_or(f64::NEG_INFINITY);
        let end = self.end.or(self.start).unwrap_or(f64::INFINITY);
        at >= start - slack && at <= end + slack
    }
}

fn result_of(phase: Option<&str>, state: Option<&MigrationState>) -> MigrationResult {
    match (phase, state) {
        (Some("Succeeded"), _) => MigrationResult::Succeeded,
        (Some("Failed"), _) => MigrationResult::Failed,
        (Some(_), _) => MigrationResult::Running,
        (None, Some(s)) if s.failed => MigrationResult::Failed,
        (None, Some(s)) if s.completed => MigrationResult::Succeeded,
        (None, Some(_)) => MigrationResult::Running,
        (None, None) => MigrationResult::Unknown,
    }
}

/// The migrations of VMI `vmi` (its current one, if any) the API shows: its migration
/// objects, then its `migrationState` when no object is that migration. Each object takes
/// source, target and times from its own `migrationState`, else from the VMI's when they
/// are the same migration (same uid), else from its phase transition times.
pub fn api_migrations(
    vmi: Option<&VmiFacts>,
    objects: &[&MigrationObject],
    span: Span,
) -> Vec<Migration> {
    let vmi_state = vmi.and_then(|v| v.migration.as_ref());
    let mut out: Vec<Migration> = objects
        .iter()
        .map(|m| {
            let state = m
                .state
                .as_ref()
                .or_else(|| vmi_state.filter(|s| s.uid.as_deref() == Some(m.uid.as_str())));
            let phase_time = |phases: &[&str]| {
                m.phase_times
                    .iter()
                    .find(|(p, _)| phases.contains(&p.as_str()))
                    .map(|(_, t)| *t)
            };
            let start = state
                .and_then(|s| s.start)
                .or_else(|| phase_time(&["Running", "Scheduled", "PreparingTarget"]))
                .or(m.created);
            let end = state
                .and_then(|s| s.end)
                .or_else(|| phase_time(&["Succeeded", "Failed"]));
            Migration {
                name: Some(m.name.clone()),
                start,
                end,
                source_node: state.and_then(|s| s.source.clone()),
                target_node: state.and_then(|s| s.target.clone()),
                result: result_of(m.phase.as_deref(), state),
                from: Source::MigrationObject,
            }
        })
        .collect();
    if let Some(state) = vmi_state {
        let known = objects
            .iter()
            .any(|m| state.uid.as_deref() == Some(m.uid.as_str()));
        if !known {
            out.push(Migration {
                name: None,
                start: state.start,
                end: state.end,
                source_node: state.source.clone(),
                target_node: state.target.clone(),
                result: result_of(None, Some(state)),
                from: Source::VmiStatus,
            });
        }
    }
    out.retain(|m| m.touches(span));
    out
}

/// One VM's series in Prometheus over the window (range queries at one step), kept per node:
/// a VMI on a new node is a new series, and the old one may still answer for Prometheus'
/// lookback (5 minutes) when no staleness marker ended it (backfilled or federated data), so
/// series are compared by when each began, never sample by sample across nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricFacts {
    /// `kubevirt_vmi_info`: per node, its sample times.
    pub nodes: Vec<(String, Vec<f64>)>,
    /// `kubevirt_vmi_migration_start_time_seconds`: (migration name, start), each once.
    pub starts: Vec<(String, f64)>,
    /// `kubevirt_vmi_migration_end_time_seconds`: (migration name, end, status), each once.
    pub ends: Vec<(String, f64, String)>,
    /// The sum of the VM's vCPU counters per node: (sample time, value).
    pub vcpu: Vec<(String, Vec<(f64, f64)>)>,
}

/// A stretch of one node's series without a gap longer than two steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub node: String,
    pub start: f64,
    pub end: f64,
    /// The first and last values (the vCPU counter; 1 for `kubevirt_vmi_info`).
    pub first: f64,
    pub last: f64,
    /// Times inside it where the value went down.
    pub drops: Vec<f64>,
}

/// The segments of per-node series, in the order they began.
pub fn segments(series: &[(String, Vec<(f64, f64)>)], step: f64) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for (node, samples) in series {
        let mut current: Option<Segment> = None;
        for &(t, v) in samples {
            match current.as_mut() {
                Some(seg) if t - seg.end <= 2.0 * step => {
                    if v < seg.last {
                        seg.drops.push(t);
                    }
                    seg.end = t;
                    seg.last = v;
                }
                _ => {
                    out.extend(current.take());
                    current = Some(Segment {
                        node: node.clone(),
                        start: t,
                        end: t,
                        first: v,
                        last: v,
                        drops: Vec::new(),
                    });
                }
            }
        }
        out.extend(current);
    }
    out.sort_by(|a, b| a.start.total_cmp(&b.start));
    out
}

/// Node changes: each segment on another node than the one before it (in start order), as
/// (last time on the old node, first time on the new, old node, new node).
pub fn node_changes(nodes: &[(String, Vec<f64>)], step: f64) -> Vec<(f64, f64, String, String)> {
    let series: Vec<(String, Vec<(f64, f64)>)> = nodes
        .iter()
        .map(|(n, times)| (n.clone(), times.iter().map(|t| (*t, 1.0)).collect()))
        .collect();
    segments(&series, step)
        .windows(2)
        .filter(|pair| pair[0].node != pair[1].node)
        .map(|pair| {
            let (old, new) = (&pair[0], &pair[1]);
            let before = match old.end < new.start {
                true => old.end,
                false => new.start - step,
            };
            (before, new.start, old.node.clone(), new.node.clone())
        })
        .collect()
}

/// Migrations Prometheus saw that the API no longer shows: the migration time series
/// first, then node changes of `kubevirt_vmi_info` that none of the migrations known so far
/// and no restart of the current VMI (`restarts`, its creation) explains. A node change is a
/// migration even where the vCPU counter reset (`resets`): a migration's target is a new
/// QEMU, so its counter starts afresh; only a change across a gap in the VM's series (over
/// two steps without a node: the VM was down) that also reset the counter is a restart on
/// another node, left to [`restarts`]. `step` is the query step (the resolution of a node
/// change).
pub fn metric_migrations(
    facts: &MetricFacts,
    known: &[Migration],
    restarts: &[f64],
    resets: &[f64],
    span: Span,
    step: f64,
) -> Vec<Migration> {
    let mut out: Vec<Migration> = Vec::new();
    for (name, start) in &facts.starts {
        let named = |m: &Migration| m.name.as_deref() == Some(name.as_str());
        let same_start = |m: &Migration| m.start.is_some_and(|s| (s - start).abs() < 2.0);
        if known.iter().any(|m| named(m) || same_start(m)) {
            continue;
        }
        let end = facts.ends.iter().find(|(n, _, _)| n == name);
        let result = match end.map(|(_, _, status)| status.as_str()) {
            Some("succeeded") => MigrationResult::Succeeded,
            Some("failed") => MigrationResult::Failed,
            _ => MigrationResult::Running,
        };
        out.push(Migration {
            name: (!name.is_empty()).then(|| name.clone()),
            start: Some(*start),
            end: end.map(|(_, e, _)| *e),
            source_node: None,
            target_node: None,
            result,
            from: Source::PrometheusMigrationMetrics,
        });
    }
    for (before, after, from, to) in node_changes(&facts.nodes, step) {
        let explained = |at: f64| {
            known
                .iter()
                .chain(out.iter())
                .any(|m| m.covers(at, 2.0 * step))
                || restarts.iter().any(|r| (r - at).abs() <= 2.0 * step)
        };
        let down_and_reset =
            after - before > 2.0 * step && resets.iter().any(|r| (r - after).abs() <= 2.0 * step);
        if explained(before) || explained(after) || down_and_reset {
            continue;
        }
        out.push(Migration {
            name: None,
            start: Some(before),
            end: Some(after),
            source_node: Some(from),
            target_node: Some(to),
            result: MigrationResult::Succeeded,
            from: Source::PrometheusNodeChange,
        });
    }
    out.retain(|m| m.touches(span));
    out
}

/// When the VM's vCPU counter started afresh (a new QEMU: a new VMI, or a migration's
/// target): it went down within one node's series, or a series began lower than the one
/// before it ended.
pub fn counter_resets(vcpu: &[(String, Vec<(f64, f64)>)], step: f64) -> Vec<f64> {
    let segs = segments(vcpu, step);
    let mut out: Vec<f64> = segs.iter().flat_map(|s| s.drops.iter().copied()).collect();
    out.extend(
        segs.windows(2)
            .filter(|pair| pair[1].first < pair[0].last)
            .map(|pair| pair[1].start),
    );
    out.sort_by(f64::total_cmp);
    out
}

/// A churn action the audit database recorded (`churn_action` events).
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnRecord {
    pub namespace: String,
    pub vm: String,
    /// `restart`, `stop-start` or `migrate`.
    pub action: String,
    /// When the action ended (Unix seconds).
    pub at: f64,
    /// The churn execution's run id.
    pub run_id: String,
}

/// How long after a restart the churn action that caused it may end: churn records an
/// action once its GETs saw it over (the VMI back, or running again).
const CAUSE_AFTER_SECS: f64 = 900.0;
/// How long before: the VMI's creation and the record's time come from different clocks.
const CAUSE_BEFORE_SECS: f64 = 60.0;

/// What the evidence of one restart was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartEvidence {
    /// The VMI (its uid) was created in the window, after the VM's first start.
    NewVmi,
    /// The VM's vCPU counter went down, and no migration explains it.
    VcpuCounterReset,
    /// Both.
    NewVmiAndCounterReset,
}

/// One restart of a VM.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Restart {
    pub at: f64,
    pub evidence: RestartEvidence,
    /// The new VMI's uid, when the API shows it.
    pub vmi_uid: Option<String>,
    /// Why, when the cluster or the audit database says so.
    pub cause: Option<String>,
}

/// Seconds between a VM's creation and its first VMI's within which that VMI is its first
/// start, not a restart.
pub const FIRST_START_SLACK_SECS: f64 = 60.0;

/// The restart the VM's current VMI is, when it was created in `span` and is not the VM's
/// first (the VM was created over [`FIRST_START_SLACK_SECS`] before it, Prometheus saw the
/// VM before it (`seen_before`: the VM's first sample), or the vCPU counter reset then, or a
/// churn action restarted it then), without its cause. The API alone decides it, so it is
/// known before any migration Prometheus shows.
pub fn vmi_restart(
    vm_created: Option<f64>,
    seen_before: Option<f64>,
    vmi: Option<&VmiFacts>,
    resets: &[f64],
    churn: &[&ChurnRecord],
    span: Span,
    slack: f64,
) -> Option<Restart> {
    let vmi = vmi?;
    let created = vmi.created.filter(|c| span.contains(*c))?;
    let reset_too = resets.iter().any(|r| (r - created).abs() <= slack);
    let restarted = vm_created.is_none_or(|vm| created - vm > FIRST_START_SLACK_SECS)
        || seen_before.is_some_and(|first| first < created - slack)
        || reset_too
        || caused_by(churn, created).is_some();
    restarted.then(|| Restart {
        at: created,
        evidence: match reset_too {
            true => RestartEvidence::NewVmiAndCounterReset,
            false => RestartEvidence::NewVmi,
        },
        vmi_uid: Some(vmi.uid.clone()),
        cause: None,
    })
}

/// The restarts of one VM in `span`: its current VMI when it is one ([`vmi_restart`]), and
/// every counter reset that no migration and no such VMI explains (within `slack` seconds).
/// `migrations` must hold every migration known from any source (the API's and those only
/// Prometheus shows): a migration's target is a new QEMU whose counter starts afresh, so a
/// reset a migration explains is that migration, not a restart. Each gets the cause `churn`
/// records for the VM.
#[allow(clippy::too_many_arguments)]
pub fn restarts(
    vm_created: Option<f64>,
    seen_before: Option<f64>,
    vmi: Option<&VmiFacts>,
    resets: &[f64],
    migrations: &[Migration],
    churn: &[&ChurnRecord],
    span: Span,
    slack: f64,
) -> Vec<Restart> {
    let mut out: Vec<Restart> =
        vmi_restart(vm_created, seen_before, vmi, resets, churn, span, slack)
            .into_iter()
            .collect();
    for &at in resets {
        let explained = migrations.iter().any(|m| m.covers(at, slack))
            || out.iter().any(|r: &Restart| (r.at - at).abs() <= slack);
        if !explained && span.contains(at) {
            out.push(Restart {
                at,
                evidence: RestartEvidence::VcpuCounterReset,
                vmi_uid: None,
                cause: None,
            });
        }
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    for restart in &mut out {
        restart.cause = caused_by(churn, restart.at);
    }
    out
}

/// The recorded churn action (not a migration) that ended soon after `at`, as a cause.
fn caused_by(churn: &[&ChurnRecord], at: f64) -> Option<String> {
    churn
        .iter()
        .filter(|c| c.action != "migrate")
        .find(|c| c.at >= at - CAUSE_BEFORE_SECS && c.at <= at + CAUSE_AFTER_SECS)
        .map(|c| format!("churn {} (execution {})", c.action, c.run_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPAN: Span = Span {
        from: 1000.0,
        to: 8200.0,
    };

    fn vmi(created: f64, state: Option<MigrationState>) -> VmiFacts {
        VmiFacts {
            namespace: "ns".into(),
            name: "vm".into(),
            uid: "vmi-2".into(),
            created: Some(created),
            phase: Some("Running".into()),
            node: Some("n1".into()),
            migratable: Some(true),
            migration: state,
        }
    }

    fn object(uid: &str, phase: &str, times: &[(&str, f64)]) -> MigrationObject {
        MigrationObject {
            namespace: "ns".into(),
            name: format!("mig-{uid}"),
            uid: uid.into(),
            vmi_name: "vm".into(),
            created: Some(times.first().map_or(1500.0, |t| t.1 - 1.0)),
            phase: Some(phase.into()),
            phase_times: times.iter().map(|(p, t)| (p.to_string(), *t)).collect(),
            state: None,
        }
    }

    #[test]
    fn an_object_takes_nodes_and_times_from_the_vmi_state_of_the_same_migration() {
        let state = MigrationState {
            uid: Some("m2".into()),
            start: Some(3000.0),
            end: Some(3012.5),
            source: Some("n0".into()),
            target: Some("n1".into()),
            completed: true,
            failed: false,
        };
        let v = vmi(0.0, Some(state));
        let first = object(
            "m1",
            "Succeeded",
            &[("Running", 2000.0), ("Succeeded", 2009.0)],
        );
        let second = object(
            "m2",
            "Succeeded",
            &[("Running", 2999.0), ("Succeeded", 3013.0)],
        );
        let old = object("m0", "Succeeded", &[("Running", 10.0), ("Succeeded", 20.0)]);
        let found = api_migrations(Some(&v), &[&first, &second, &old], SPAN);
        assert_eq!(
            found.len(),
            2,
            "the migration before the window is left out: {found:?}"
        );
        assert_eq!(found[0].duration(), Some(9.0));
        assert_eq!(found[0].source_node, None);
        assert_eq!(found[1].duration(), Some(12.5));
        assert_eq!(found[1].target_node.as_deref(), Some("n1"));
        assert!(found.iter().all(|m| m.from == Source::MigrationObject));
        // Garbage-collected: only the VMI's state is left.
        let found = api_migrations(Some(&v), &[], SPAN);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].from, found[0].result),
            (Source::VmiStatus, MigrationResult::Succeeded)
        );
    }

    #[test]
    fn prometheus_fills_in_collected_migrations_and_node_changes_no_restart_explains() {
        let times = |from: f64, to: f64| {
            (0..)
                .map(|k| from + 15.0 * k as f64)
                .take_while(|t| *t <= to)
                .collect::<Vec<f64>>()
        };
        // Series overlap where Prometheus' lookback keeps an ended one answering.
        let facts = MetricFacts {
            nodes: vec![
                (
                    "n0".into(),
                    [times(1000.0, 1315.0), times(6015.0, 6100.0)].concat(),
                ),
                ("n1".into(), times(1030.0, 4300.0)),
                ("n2".into(), times(4015.0, 6300.0)),
            ],
            starts: vec![("m9".into(), 1020.0)],
            ends: vec![("m9".into(), 1026.0, "succeeded".into())],
            vcpu: Vec::new(),
        };
        // 4000 → 4015 is a restart elsewhere; 6000 → 6015 a migration nothing else saw.
        let found = metric_migrations(&facts, &[], &[4010.0], &[], SPAN, 15.0);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].from, Source::PrometheusMigrationMetrics);
        assert_eq!(found[0].duration(), Some(6.0));
        assert_eq!(found[1].from, Source::PrometheusNodeChange);
        assert_eq!(found[1].source_node.as_deref(), Some("n2"));
        // Known from the API already: not repeated.
        let known = vec![Migration {
            name: Some("m9".into()),
            start: Some(1020.0),
            end: Some(1026.0),
            source_node: Some("n0".into()),
            target_node: Some("n1".into()),
            result: MigrationResult::Succeeded,
            from: Source::MigrationObject,
        }];
        let found = metric_migrations(&facts, &known, &[4010.0], &[], SPAN, 15.0);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].start, Some(6000.0));
    }

    #[test]
    fn restarts_come_from_new_vmis_and_unexplained_counter_resets_with_their_churn_cause() {
        let resets = counter_resets(
            &[
                (
                    "n0".into(),
                    vec![
                        (1000.0, 50.0),
                        (1015.0, 60.0),
                        (1030.0, 2.0),
                        (5000.0, 900.0),
                    ],
                ),
                // A new series that began lower (the old one lingering in the lookback).
                ("n1".into(), vec![(5015.0, 1.0), (5030.0, 15.0)]),
                ("n2".into(), vec![(5100.0, 30.0)]),
            ],
            15.0,
        );
        assert_eq!(resets, vec![1030.0, 5015.0]);
        let migration = Migration {
            name: None,
            start: Some(5005.0),
            end: Some(5012.0),
            source_node: None,
            target_node: None,
            result: MigrationResult::Succeeded,
            from: Source::MigrationObject,
        };
        let churn = ChurnRecord {
            namespace: "ns".into(),
            vm: "vm".into(),
            action: "restart".into(),
            at: 1090.0,
            run_id: "r1".into(),
        };
        let v = vmi(1025.0, None);
        let found = restarts(
            Some(0.0),
            None,
            Some(&v),
            &resets,
            &[migration],
            &[&churn],
            SPAN,
            30.0,
        );
        assert_eq!(
            found.len(),
            1,
            "the reset at 5015 is the migration's: {found:?}"
        );
        assert_eq!(found[0].evidence, RestartEvidence::NewVmiAndCounterReset);
        assert_eq!(
            found[0].cause.as_deref(),
            Some("churn restart (execution r1)")
        );
        // A VM created with its VMI in the window started; it did not restart.
        let found = restarts(Some(1020.0), None, Some(&v), &[], &[], &[], SPAN, 30.0);
        assert!(found.is_empty());
        // Unless Prometheus saw the VM before its VMI was created: an eviction soon after.
        let found = restarts(
            Some(1020.0),
            Some(1001.0),
            Some(&v),
            &[],
            &[],
            &[],
            SPAN,
            10.0,
        );
        assert_eq!(found[0].evidence, RestartEvidence::NewVmi);
        // A reset alone (the VMI recreated between two lists) is a restart without a cause.
        let found = restarts(
            Some(0.0),
            None,
            Some(&vmi(10.0, None)),
            &[1030.0],
            &[],
            &[],
            SPAN,
            30.0,
        );
        assert_eq!(found[0].evidence, RestartEvidence::VcpuCounterReset);
        assert_eq!(found[0].cause, None);
    }

    /// One VM's facts over 1000..2000 s at a 15 s step: on n0 until `left`, on n1 from
    /// `arrived`, its vCPU counter afresh on n1 (a new QEMU).
    fn moved(left: f64, arrived: f64) -> MetricFacts {
        let times = |from: f64, to: f64| {
            (0..)
                .map(|k| from + 15.0 * k as f64)
                .take_while(|t| *t <= to)
                .collect::<Vec<f64>>()
        };
        let counter = |from: f64, to: f64, base: f64| {
            times(from, to)
                .into_iter()
                .map(|t| (t, base + 0.9 * (t - from)))
                .collect::<Vec<_>>()
        };
        MetricFacts {
            nodes: vec![
                ("n0".into(), times(1000.0, left)),
                ("n1".into(), times(arrived, 2000.0)),
            ],
            starts: Vec::new(),
            ends: Vec::new(),
            vcpu: vec![
                ("n0".into(), counter(1000.0, left, 5000.0)),
                ("n1".into(), counter(arrived, 2000.0, 0.0)),
            ],
        }
    }

    #[test]
    fn a_counter_reset_at_a_migration_only_prometheus_shows_is_that_migration() {
        // Migration objects and the VMI's state long gone: only the node change is left.
        let facts = moved(1300.0, 1315.0);
        let resets = counter_resets(&facts.vcpu, 15.0);
        assert_eq!(resets, vec![1315.0], "the target's counter starts afresh");
        let v = vmi(0.0, None);
        let found = metric_migrations(&facts, &[], &[], &resets, SPAN, 15.0);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].from, Source::PrometheusNodeChange);
        assert_eq!(
            (
                found[0].source_node.as_deref(),
                found[0].target_node.as_deref()
            ),
            (Some("n0"), Some("n1"))
        );
        let restarted = restarts(
            Some(0.0),
            Some(1000.0),
            Some(&v),
            &resets,
            &found,
            &[],
            SPAN,
            30.0,
        );
        assert!(restarted.is_empty(), "{restarted:?}");
        // Known from the migration series instead: the same.
        let mut facts = moved(1300.0, 1315.0);
        facts.starts = vec![("m1".into(), 1302.0)];
        facts.ends = vec![("m1".into(), 1310.0, "succeeded".into())];
        let found = metric_migrations(&facts, &[], &[], &resets, SPAN, 15.0);
        assert_eq!(
            found.len(),
            1,
            "the node change is that migration: {found:?}"
        );
        assert_eq!(found[0].from, Source::PrometheusMigrationMetrics);
        let restarted = restarts(
            Some(0.0),
            Some(1000.0),
            Some(&v),
            &resets,
            &found,
            &[],
            SPAN,
            30.0,
        );
        assert!(restarted.is_empty(), "{restarted:?}");
        // Down for two minutes, back elsewhere with a fresh counter, no migration series: an
        // earlier VMI restarted on another node, not a migration.
        let facts = moved(1300.0, 1420.0);
        let resets = counter_resets(&facts.vcpu, 15.0);
        let found = metric_migrations(&facts, &[], &[], &resets, SPAN, 15.0);
        assert!(found.is_empty(), "{found:?}");
        let restarted = restarts(
            Some(0.0),
            Some(1000.0),
            Some(&v),
            &resets,
            &found,
            &[],
            SPAN,
            30.0,
        );
        assert_eq!(restarted.len(), 1, "{restarted:?}");
        assert_eq!(restarted[0].evidence, RestartEvidence::VcpuCounterReset);
    }
}
