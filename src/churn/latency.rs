//! The latencies churn measures, in the form users compare across clusters (as kube-burner's
//! vmiLatency and vmimLatency do): per action kind, the time from churn's first request to
//! the VM running again (restart, stop-start) or to the migration's Succeeded, and per
//! migration the time from its creation to each phase KubeVirt stamps in
//! `status.phaseTransitionTimestamps`; each summarised as p50/p90/p99/max.
//!
//! Owns: the samples ([`Latencies`]), the percentiles ([`Stats`]) and the reading of phase
//! timestamps ([`phase_offsets`]). Must not: read the clock (the shell passes durations).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::model::ChurnAction;

/// The migration phases measured, in KubeVirt's order, with their report keys.
pub const MIGRATION_PHASES: [(&str, &str); 5] = [
    ("Scheduling", "scheduling"),
    ("Scheduled", "scheduled"),
    ("TargetReady", "target_ready"),
    ("Running", "running"),
    ("Succeeded", "succeeded"),
];

/// p50/p90/p99/max (nearest rank) of a set of samples, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    pub count: usize,
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
}

impl Stats {
    /// `None` without samples.
    pub fn of(samples: &[Duration]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = |p: usize| {
            // Nearest rank: the smallest sample with at least p % of samples at or below it.
            let index = (sorted.len() * p).div_ceil(100).max(1) - 1;
            round_ms(sorted[index])
        };
        Some(Stats {
            count: sorted.len(),
            p50_seconds: rank(50),
            p90_seconds: rank(90),
            p99_seconds: rank(99),
            max_seconds: round_ms(sorted[sorted.len() - 1]),
        })
    }
}

fn round_ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Every measured latency of one churn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latencies {
    /// Per action kind: first request to over (VM running again; migration Succeeded).
    pub actions: BTreeMap<ChurnAction, Vec<Duration>>,
    /// Per migration phase key: creation to that phase.
    pub migration_phases: BTreeMap<&'static str, Vec<Duration>>,
}

impl Latencies {
    pub fn action(&mut self, action: ChurnAction, took: Duration) {
        self.actions.entry(action).or_default().push(took);
    }

    /// The phase offsets of one succeeded migration (see [`phase_offsets`]).
    pub fn migration(&mut self, offsets: &[(&'static str, Duration)]) {
        for (key, offset) in offsets {
            self.migration_phases.entry(key).or_default().push(*offset);
        }
    }

    pub fn action_stats(&self, action: ChurnAction) -> Option<Stats> {
        self.actions.get(&action).and_then(|s| Stats::of(s))
    }

    /// The `latency` object of the reports and the audit record: per action kind (its JSON
    /// key), and per migration phase; `null` for a kind without samples.
    pub fn json(&self) -> serde_json::Value {
        let actions: serde_json::Map<String, serde_json::Value> = ChurnAction::ALL
            .iter()
            .map(|a| {
                let stats = self.action_stats(*a);
                (a.key().to_string(), serde_json::json!(stats))
            })
            .collect();
        let phases: serde_json::Map<String, serde_json::Value> = self
            .phase_stats()
            .into_iter()
            .map(|(key, stats)| (key.to_string(), serde_json::json!(stats)))
            .collect();
        serde_json::json!({ "actions": actions, "migration_phases": phases })
    }

    /// Per phase key, in phase order, those with samples.
    pub fn phase_stats(&self) -> Vec<(&'static str, Stats)> {
        MIGRATION_PHASES
            .iter()
            .filter_map(|(_, key)| {
                let stats = Stats::of(self.migration_phases.get(key)?)?;
                Some((*key, stats))
            })
            .collect()
    }
}

/// From a migration's creation time and its `(phase, timestamp)` transitions (RFC 3339), the
/// time to each measured phase it reached; phases missing or unreadable are left out. Both
/// times are whole seconds on a real cluster (metav1.Time), written by different clocks (the
/// API server's and virt-controller's), so a phase stamped before the creation counts as 0.
pub fn phase_offsets(
    created: &str,
    transitions: &[(String, String)],
) -> Vec<(&'static str, Duration)> {
    let Ok(created) = created.parse::<jiff::Timestamp>() else {
        return Vec::new();
    };
    MIGRATION_PHASES
        .iter()
        .filter_map(|(phase, key)| {
            let (_, at) = transitions.iter().find(|(p, _)| p == phase)?;
            let at = at.parse::<jiff::Timestamp>().ok()?;
            let offset = at.duration_since(created);
            let offset = Duration::try_from(offset).unwrap_or(Duration::ZERO);
            Some((*key, offset))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_secs).collect();
        let stats = Stats::of(&samples).unwrap();
        assert_eq!(
            (
                stats.p50_seconds,
                stats.p90_seconds,
                stats.p99_seconds,
                stats.max_seconds
            ),
            (50.0, 90.0, 99.0, 100.0)
        );
        let one = Stats::of(&[Duration::from_millis(1234)]).unwrap();
        assert_eq!(
            (one.p50_seconds, one.max_seconds, one.count),
            (1.234, 1.234, 1)
        );
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn phase_offsets_count_from_the_creation() {
        let transitions = vec![
            ("Pending".to_string(), "2026-01-01T00:00:00Z".to_string()),
            (
                "Scheduling".to_string(),
                "2026-01-01T00:00:01.5Z".to_string(),
            ),
            (
                "TargetReady".to_string(),
                "2026-01-01T00:00:04Z".to_string(),
            ),
            ("Succeeded".to_string(), "2026-01-01T00:00:09Z".to_string()),
            ("Running".to_string(), "not a time".to_string()),
        ];
        let offsets = phase_offsets("2026-01-01T00:00:00Z", &transitions);
        assert_eq!(
            offsets,
            vec![
                ("scheduling", Duration::from_millis(1500)),
                ("target_ready", Duration::from_secs(4)),
                ("succeeded", Duration::from_secs(9)),
            ]
        );
        assert!(phase_offsets("garbage", &transitions).is_empty());
        // Stamped before the creation (another clock): zero.
        assert_eq!(
            phase_offsets("2026-01-01T00:00:05Z", &transitions),
            vec![
                ("scheduling", Duration::ZERO),
                ("target_ready", Duration::ZERO),
                ("succeeded", Duration::from_secs(4)),
            ]
        );
    }
}
