//! `virtwork disruption`'s core (sans-IO): what a window (an upgrade, a drain, a churn) did to
//! each VM — its live migrations, its restarts, how long its workload was interrupted — and
//! the verdict against the user's budget, for the VM and for the fleet.
//!
//! Owns: the per-VM assessment ([`assess`]), the budget, the fleet's counts and migration
//! percentiles ([`fleet`]), and through its submodules the evidence ([`evidence`]), the
//! interruption measurement ([`interruption`]), the slim listings ([`listed`]) and the
//! text and JSON reports ([`report`]). The workload's expectations are verify's
//! ([`crate::verify::targets`], [`crate::signals::contract::checks`]): one contract.
//!
//! Must not: talk to the cluster, Prometheus or the audit database (commands/disruption.rs
//! does), read the clock or decide exit codes.

pub mod evidence;
pub mod interruption;
pub mod listed;
pub mod queries;
pub mod report;

use serde::Serialize;

use crate::model::AllowRestarts;
use evidence::{Migration, MigrationResult, Restart};
use interruption::Interruption;

/// The window, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub from: f64,
    pub to: f64,
}

impl Span {
    pub fn contains(&self, t: f64) -> bool {
        t >= self.from && t <= self.to
    }

    pub fn seconds(&self) -> f64 {
        self.to - self.from
    }
}

/// What the VMs may go through and still be within budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The longest interruption allowed (None: interruptions were not measured).
    pub max_interruption: Option<f64>,
    /// Where that limit came from (`--max-interruption`, two scrape intervals).
    pub max_interruption_from: String,
    pub allow_restarts: AllowRestarts,
}

/// Everything found about one VM, before judging.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    pub namespace: String,
    pub name: String,
    pub workload: String,
    pub run_id: Option<String>,
    /// The VMI at the end of the window (None: the VM has none).
    pub vmi: Option<evidence::VmiFacts>,
    pub migrations: Vec<Migration>,
    pub restarts: Vec<Restart>,
    /// None: not measured (no Prometheus, or no signal the contract can measure).
    pub interruption: Option<Interruption>,
    /// The signals the interruption was measured by.
    pub measured_by: Vec<String>,
}

/// How a VM came through the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Undisturbed,
    Migrated,
    Restarted,
    BeyondBudget,
    /// Prometheus was read but this VM could not be judged: nothing measured its workload
    /// (verify cannot judge it, a query for it was rejected). Not a pass.
    Unknown,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Undisturbed => "undisturbed",
            Outcome::Migrated => "migrated",
            Outcome::Restarted => "restarted",
            Outcome::BeyondBudget => "beyond-budget",
            Outcome::Unknown => "unknown",
        }
    }
}

/// One VM's findings and verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessed {
    pub findings: Findings,
    pub outcome: Outcome,
    /// Why it is beyond the budget (empty otherwise).
    pub reasons: Vec<String>,
    /// Why it could not be judged, each reason named (empty unless the outcome is unknown).
    pub unknown_because: Vec<String>,
}

/// Judges one VM against `budget`; `measured` says whether Prometheus was read.
pub fn assess(findings: Findings, budget: &Budget, measured: bool) -> Assessed {
    assess_with_gaps(findings, budget, measured, Vec::new())
}

/// [`assess`], with `gaps`: what could not be read for this VM although Prometheus was
/// (verify cannot judge it, Prometheus rejected one of its queries). Any gap, or no
/// interruption measured, makes the VM unknown unless it is beyond the budget anyway: a
/// verdict on part of the evidence would pass a VM nothing showed was fine.
pub fn assess_with_gaps(
    findings: Findings,
    budget: &Budget,
    measured: bool,
    gaps: Vec<String>,
) -> Assessed {
    let mut unknown = match measured {
        true => gaps,
        false => Vec::new(),
    };
    if measured && unknown.is_empty() && findings.interruption.is_none() {
        unknown.push(format!(
            "no expected signal of its workload ({}) could be measured",
            findings.workload
        ));
    }
    let mut reasons = Vec::new();
    let running = findings
        .vmi
        .as_ref()
        .is_some_and(|v| v.phase.as_deref() == Some("Running"));
    if !running {
        let state = match &findings.vmi {
            Some(v) => format!(
                "its VMI is {}",
                v.phase.as_deref().unwrap_or("without a phase")
            ),
            None => "it has no VMI".to_string(),
        };
        reasons.push(format!("not running at the end of the window ({state})"));
    }
    let may_restart = match budget.allow_restarts {
        AllowRestarts::None => false,
        AllowRestarts::NonMigratable => {
            findings.vmi.as_ref().and_then(|v| v.migratable) == Some(false)
        }
    };
    if let Some(first) = findings.restarts.first()
        && !may_restart
    {
        reasons.push(format!(
            "restarted {} time(s) (first at {}{})",
            findings.restarts.len(),
            report::time_text(first.at),
            first
                .cause
                .as_ref()
                .map_or(String::new(), |c| format!(", {c}"))
        ));
    }
    if let (Some(i), Some(max)) = (&findings.interruption, budget.max_interruption)
        && i.longest_seconds > max
    {
        reasons.push(format!(
            "workload interrupted for {} (longest; budget {})",
            report::seconds_text(i.longest_seconds),
            report::seconds_text(max)
        ));
    }
    let moved = findings
        .migrations
        .iter()
        .any(|m| m.result == MigrationResult::Succeeded);
    let outcome = match () {
        _ if !reasons.is_empty() => Outcome::BeyondBudget,
        _ if !unknown.is_empty() => Outcome::Unknown,
        _ if !findings.restarts.is_empty() => Outcome::Restarted,
        _ if moved => Outcome::Migrated,
        _ => Outcome::Undisturbed,
    };
    if outcome != Outcome::Unknown {
        unknown.clear();
    }
    Assessed {
        findings,
        outcome,
        reasons,
        unknown_because: unknown,
    }
}

/// The fleet's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fleet {
    pub vms: usize,
    pub undisturbed: usize,
    pub migrated: usize,
    pub restarted: usize,
    pub beyond_budget: usize,
    pub unknown: usize,
    pub migrations: usize,
    pub migrations_failed: usize,
    /// Durations of the succeeded migrations with both times: p50, p90, p99, max.
    pub migration_seconds: Option<[f64; 4]>,
    /// The longest interruption and its VM (`namespace/name`).
    pub longest_interruption: Option<(f64, String)>,
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Counts, migration percentiles and the longest interruption of `vms`.
pub fn fleet(vms: &[Assessed]) -> Fleet {
    let mut f = Fleet {
        vms: vms.len(),
        ..Fleet::default()
    };
    let mut durations = Vec::new();
    for vm in vms {
        match vm.outcome {
            Outcome::Undisturbed => f.undisturbed += 1,
            Outcome::Migrated => f.migrated += 1,
            Outcome::Restarted => f.restarted += 1,
            Outcome::BeyondBudget => f.beyond_budget += 1,
            Outcome::Unknown => f.unknown += 1,
        }
        for m in &vm.findings.migrations {
            f.migrations += 1;
            f.migrations_failed += usize::from(m.result == MigrationResult::Failed);
            if let (MigrationResult::Succeeded, Some(d)) = (m.result, m.duration()) {
                durations.push(d);
            }
        }
        if let Some(i) = &vm.findings.interruption
            && i.longest_seconds > f.longest_interruption.as_ref().map_or(0.0, |l| l.0)
        {
            let name = format!("{}/{}", vm.findings.namespace, vm.findings.name);
            f.longest_interruption = Some((i.longest_seconds, name));
        }
    }
    durations.sort_by(f64::total_cmp);
    if !durations.is_empty() {
        f.migration_seconds = Some([
            percentile(&durations, 50.0),
            percentile(&durations, 90.0),
            percentile(&durations, 99.0),
            *durations.last().expect("not empty"),
        ]);
    }
    f
}

/// Why the fleet did not pass, in one line (None: every VM judged and within the budget).
/// A VM beyond the budget is named first; VMs that could not be judged fail the fleet too
/// (as verify's unverifiable VMs do): an unknown is not a pass.
pub fn failure_message(vms: &[Assessed]) -> Option<String> {
    let of = |outcome: Outcome| -> Vec<&Assessed> {
        vms.iter().filter(|v| v.outcome == outcome).collect()
    };
    let (beyond, unknown) = (of(Outcome::BeyondBudget), of(Outcome::Unknown));
    let name = |a: &Assessed| {
        format!(
            "{}/{}",
            crate::terminal::safe(&a.findings.namespace, 64),
            crate::terminal::safe(&a.findings.name, 128)
        )
    };
    let more = |n: usize| match n {
        0 | 1 => String::new(),
        n => format!(" (and {} more VM(s))", n - 1),
    };
    if let Some(first) = beyond.first() {
        let also = match unknown.len() {
            0 => String::new(),
            n => format!("; {n} VM(s) could not be judged"),
        };
        return Some(format!(
            "VM {} is beyond the disruption budget: {}{}{also}",
            name(first),
            first.reasons.join("; "),
            more(beyond.len())
        ));
    }
    let first = unknown.first()?;
    Some(format!(
        "VM {} could not be judged: {}{}",
        name(first),
        crate::terminal::safe(&first.unknown_because.join("; "), 600),
        more(unknown.len())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use evidence::{RestartEvidence, Source, VmiFacts};
    use interruption::Interval;

    fn findings(name: &str) -> Findings {
        Findings {
            namespace: "ns".into(),
            name: name.into(),
            workload: "cpu".into(),
            run_id: None,
            vmi: Some(VmiFacts {
                phase: Some("Running".into()),
                migratable: Some(true),
                ..VmiFacts::default()
            }),
            migrations: Vec::new(),
            restarts: Vec::new(),
            interruption: Some(Interruption {
                intervals: Vec::new(),
                longest_seconds: 0.0,
                total_seconds: 0.0,
            }),
            measured_by: vec!["vcpu-busy".into()],
        }
    }

    fn migration(seconds: f64) -> Migration {
        Migration {
            name: None,
            start: Some(100.0),
            end: Some(100.0 + seconds),
            source_node: None,
            target_node: None,
            result: MigrationResult::Succeeded,
            from: Source::MigrationObject,
        }
    }

    const BUDGET: Budget = Budget {
        max_interruption: Some(20.0),
        max_interruption_from: String::new(),
        allow_restarts: AllowRestarts::None,
    };

    #[test]
    fn each_vm_gets_one_outcome_and_the_reasons_it_is_beyond_budget() {
        let quiet = assess(findings("a"), &BUDGET, true);
        assert_eq!(
            (quiet.outcome, quiet.reasons.len()),
            (Outcome::Undisturbed, 0)
        );
        let mut moved = findings("b");
        moved.migrations.push(migration(12.0));
        assert_eq!(assess(moved, &BUDGET, true).outcome, Outcome::Migrated);
        let mut restarted = findings("c");
        restarted.restarts.push(Restart {
            at: 0.0,
            evidence: RestartEvidence::NewVmi,
            vmi_uid: None,
            cause: Some("churn restart (execution r)".into()),
        });
        let judged = assess(restarted.clone(), &BUDGET, true);
        assert_eq!(judged.outcome, Outcome::BeyondBudget);
        assert!(
            judged.reasons[0].contains("churn restart"),
            "{:?}",
            judged.reasons
        );
        // Allowed only for VMs that cannot migrate.
        let lenient = Budget {
            allow_restarts: AllowRestarts::NonMigratable,
            ..BUDGET
        };
        assert_eq!(
            assess(restarted.clone(), &lenient, true).outcome,
            Outcome::BeyondBudget
        );
        restarted.vmi.as_mut().unwrap().migratable = Some(false);
        assert_eq!(
            assess(restarted, &lenient, true).outcome,
            Outcome::Restarted
        );
        let mut long = findings("d");
        long.interruption = Some(Interruption {
            intervals: vec![Interval {
                start: 0.0,
                end: 45.0,
                ongoing: false,
            }],
            longest_seconds: 45.0,
            total_seconds: 45.0,
        });
        let judged = assess(long, &BUDGET, true);
        assert!(judged.reasons[0].contains("45s"), "{:?}", judged.reasons);
        let mut unmeasured = findings("e");
        unmeasured.interruption = None;
        let unknown = assess(unmeasured.clone(), &BUDGET, true);
        assert_eq!(unknown.outcome, Outcome::Unknown);
        assert!(
            unknown.unknown_because[0].contains("no expected signal of its workload (cpu)"),
            "{:?}",
            unknown.unknown_because
        );
        assert_eq!(
            failure_message(std::slice::from_ref(&unknown)).unwrap(),
            "VM ns/e could not be judged: no expected signal of its workload (cpu) could be measured"
        );
        // A rejected query: unknown with that reason, even with an interruption measured.
        let gap = "Prometheus rejected its vcpu-busy query: bad_data".to_string();
        let judged = assess_with_gaps(findings("f"), &BUDGET, true, vec![gap.clone()]);
        assert_eq!(
            (judged.outcome, judged.unknown_because),
            (Outcome::Unknown, vec![gap.clone()])
        );
        // Without Prometheus nothing is measured for anyone: no gap makes a VM unknown.
        let judged = assess_with_gaps(findings("g"), &BUDGET, false, vec![gap]);
        assert_eq!(judged.outcome, Outcome::Undisturbed);
        assert_eq!(
            assess(unmeasured.clone(), &BUDGET, false).outcome,
            Outcome::Undisturbed
        );
        unmeasured.vmi = None;
        let stopped = assess(unmeasured, &BUDGET, false);
        assert!(stopped.reasons[0].contains("no VMI"));
    }

    #[test]
    fn the_fleet_counts_outcomes_and_ranks_migration_durations() {
        let mut vms = Vec::new();
        for (i, seconds) in [4.0, 8.0, 12.0, 30.0].into_iter().enumerate() {
            let mut f = findings(&format!("vm-{i}"));
            f.migrations.push(migration(seconds));
            f.interruption.as_mut().unwrap().longest_seconds = seconds * 0.75;
            vms.push(assess(f, &BUDGET, true));
        }
        let f = fleet(&vms);
        assert_eq!((f.vms, f.migrated, f.beyond_budget), (4, 3, 1));
        assert_eq!(f.migration_seconds, Some([8.0, 30.0, 30.0, 30.0]));
        assert_eq!(f.longest_interruption, Some((22.5, "ns/vm-3".to_string())));
        let failure = failure_message(&vms).unwrap();
        assert!(
            failure.starts_with(
                "VM ns/vm-3 is beyond the disruption budget: workload interrupted for 22.5s"
            ),
            "{failure}"
        );
    }
}
