//! Watch-based readiness: one label-selected watch over a run's VirtualMachineInstances
//! decides when every VM is ready, which failed, and which were still pending at the timeout.
//!
//! The decision logic is the sans-IO [`ReadinessTracker`]: it is fed VMI snapshots and says
//! what changed ([`Transition`]). [`wait_for_ready`] is the thin async shell: one
//! `kube::runtime::watcher` stream selected by `virtwork/run-id=<id>` (LIST once, then WATCH;
//! the watcher resumes from the last resourceVersion when the server drops the stream and
//! relists on 410 Gone), transient stream errors retried with jittered backoff, permanent
//! ones (401/403) ending the wait with the server's message. Each watch request asks the
//! server to end it after [`WATCH_TIMEOUT_SECS`], and a stream silent for longer is dropped
//! and resumed, so a dead connection cannot hold the wait until the deadline. The API cost is therefore a
//! handful of requests per run, independent of the number of VMs, and a VMI that reaches
//! the wanted state is noticed as soon as its watch event arrives (no poll interval).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::k8s::retry::{Backoff, Failure, classify};
use crate::kubevirt::VirtualMachineInstance;
use crate::labels;
use crate::model::ReadyCondition;

/// Phase shown for a VM whose VMI does not exist (yet).
pub const NO_VMI_PHASE: &str = "NoVMI";

/// What we know about one VM's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmReadiness {
    pub name: String,
    /// Last observed VMI phase, or [`NO_VMI_PHASE`].
    pub phase: String,
    /// When its VMI was first seen scheduled to a node (phase Scheduled, or already Running).
    pub scheduled_at: Option<jiff::Timestamp>,
    /// When its VMI was first seen Running.
    pub running_at: Option<jiff::Timestamp>,
    /// When the VM met the ready condition (first time; readiness does not regress).
    pub ready_at: Option<jiff::Timestamp>,
    /// Why the VM failed (VMI phase Failed), if it did.
    pub failure: Option<String>,
}

impl VmReadiness {
    pub fn is_ready(&self) -> bool {
        self.ready_at.is_some()
    }
}

/// A change worth reporting, produced by [`ReadinessTracker::observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The VMI's phase changed.
    Phase {
        vm: String,
        from: String,
        to: String,
    },
    /// The VM met the ready condition.
    Ready { vm: String, phase: String },
    /// The VMI reached phase Failed.
    Failed { vm: String, reason: String },
}

/// Sans-IO readiness state of a set of VMs under one ready condition.
#[derive(Debug, Clone)]
pub struct ReadinessTracker {
    condition: ReadyCondition,
    vms: BTreeMap<String, VmReadiness>,
    // Kept up to date on every change, so each watch event costs O(log n) however large
    // the fleet (these are read after every event).
    ready: usize,
    phases: BTreeMap<String, usize>,
    failures: usize,
}

impl ReadinessTracker {
    /// Tracks `names` (VMI names equal VM names), all starting without a VMI.
    pub fn new<I, S>(names: I, condition: ReadyCondition) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let vms = names
            .into_iter()
            .map(|n| {
                let name = n.into();
                let state = VmReadiness {
                    name: name.clone(),
                    phase: NO_VMI_PHASE.to_string(),
                    scheduled_at: None,
                    running_at: None,
                    ready_at: None,
                    failure: None,
                };
                (name, state)
            })
            .collect::<BTreeMap<_, _>>();
        let phases = if vms.is_empty() {
            BTreeMap::new()
        } else {
            BTreeMap::from([(NO_VMI_PHASE.to_string(), vms.len())])
        };
        ReadinessTracker {
            condition,
            vms,
            ready: 0,
            phases,
            failures: 0,
        }
    }

    fn count_phase_change(phases: &mut BTreeMap<String, usize>, from: &str, to: &str) {
        if let Some(n) = phases.get_mut(from) {
            *n -= 1;
            if *n == 0 {
                phases.remove(from);
            }
        }
        *phases.entry(to.to_string()).or_insert(0) += 1;
    }

    /// Whether `vmi` satisfies `condition`.
    pub fn meets(condition: ReadyCondition, vmi: &VirtualMachineInstance) -> bool {
        let Some(status) = vmi.status.as_ref() else {
            return false;
        };
        let running = status.phase.as_deref() == Some("Running");
        let condition_true = |t: &str| status.condition(t).is_some_and(|c| c.is_true());
        match condition {
            ReadyCondition::Running => running,
            ReadyCondition::Ready => running && condition_true("Ready"),
            ReadyCondition::AgentConnected => running && condition_true("AgentConnected"),
            // Ready=True means "the workload runs" only when the readiness probe decided it
            // (a VMI without one is Ready as soon as it boots).
            ReadyCondition::Workload => {
                let probed = vmi
                    .spec
                    .as_ref()
                    .and_then(|spec| spec.pointer("/readinessProbe/exec"))
                    .is_some();
                running && probed && condition_true("Ready")
            }
        }
    }

    /// Feeds one VMI snapshot observed at `now`; returns what changed, in order.
    /// VMIs of VMs we do not track are ignored.
    pub fn observe(
        &mut self,
        vmi: &VirtualMachineInstance,
        now: jiff::Timestamp,
    ) -> Vec<Transition> {
        let mut changes = Vec::new();
        let Some(name) = vmi.metadata.name.as_deref() else {
            return changes;
        };
        let condition = self.condition;
        let Some(state) = self.vms.get_mut(name) else {
            return changes;
        };
        let phase = vmi
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "Pending".to_string());
        if phase != state.phase {
            Self::count_phase_change(&mut self.phases, &state.phase, &phase);
            changes.push(Transition::Phase {
                vm: name.to_string(),
                from: std::mem::replace(&mut state.phase, phase.clone()),
                to: phase.clone(),
            });
        }
        // First sightings only: a VMI restarted by its VM keeps its first times.
        if matches!(phase.as_str(), "Scheduled" | "Running") && state.scheduled_at.is_none() {
            state.scheduled_at = Some(now);
        }
        if phase == "Running" && state.running_at.is_none() {
            state.running_at = Some(now);
        }
        if state.ready_at.is_none() && Self::meets(condition, vmi) {
            state.ready_at = Some(now);
            self.ready += 1;
            changes.push(Transition::Ready {
                vm: name.to_string(),
                phase: phase.clone(),
            });
        }
        if phase == "Failed" && state.failure.is_none() && state.ready_at.is_none() {
            let reason = vmi
                .status
                .as_ref()
                .and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| !c.is_true() && c.message.is_some())
                        .and_then(|c| c.message.clone())
                })
                .unwrap_or_else(|| "the VMI reached phase Failed".to_string());
            state.failure = Some(reason.clone());
            self.failures += 1;
            changes.push(Transition::Failed {
                vm: name.to_string(),
                reason,
            });
        }
        changes
    }

    /// Records that a VMI disappeared (e.g. being restarted by its VM).
    pub fn observe_deleted(&mut self, name: &str) -> Vec<Transition> {
        match self.vms.get_mut(name) {
            Some(state) if state.phase != NO_VMI_PHASE => {
                Self::count_phase_change(&mut self.phases, &state.phase, NO_VMI_PHASE);
                vec![Transition::Phase {
                    vm: name.to_string(),
                    from: std::mem::replace(&mut state.phase, NO_VMI_PHASE.to_string()),
                    to: NO_VMI_PHASE.to_string(),
                }]
            }
            _ => Vec::new(),
        }
    }

    /// Every tracked VM is ready.
    pub fn all_ready(&self) -> bool {
        self.ready == self.vms.len()
    }

    /// The first (by name) VM that failed, if any.
    pub fn first_failure(&self) -> Option<&VmReadiness> {
        if self.failures == 0 {
            return None;
        }
        self.vms.values().find(|v| v.failure.is_some())
    }

    /// Number of VMs ready.
    pub fn ready_count(&self) -> usize {
        self.ready
    }

    /// Number of VMs tracked.
    pub fn total(&self) -> usize {
        self.vms.len()
    }

    /// VMs per last phase, sorted by phase name.
    pub fn phase_counts(&self) -> BTreeMap<String, usize> {
        self.phases.clone()
    }

    /// VMs not ready, sorted by name.
    pub fn not_ready(&self) -> Vec<&VmReadiness> {
        self.vms.values().filter(|v| !v.is_ready()).collect()
    }

    /// Every VM's state, sorted by name.
    pub fn vms(&self) -> impl Iterator<Item = &VmReadiness> {
        self.vms.values()
    }
}

/// How a readiness wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    AllReady,
    /// A VMI reached phase Failed (the first one, by name).
    Failed {
        vm: String,
        reason: String,
    },
    /// The timeout passed with VMs still not ready.
    TimedOut,
    /// Ctrl-C / SIGTERM.
    Cancelled,
    /// The watch failed permanently (e.g. 403 on watch); the message is the server's.
    WatchFailed(String),
}

/// Receives readiness progress; report.rs renders it (live view on a TTY, log lines otherwise).
pub trait ReadinessObserver {
    /// Called after each batch of transitions, with the tracker's new state.
    fn changed(&mut self, tracker: &ReadinessTracker, transitions: &[Transition]);
}

/// Statistics of a wait, for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Times the watch stream failed and was resumed.
    pub reconnects: u32,
}

/// `timeoutSeconds` of every watch: the server ends the stream after this long and the
/// watcher resumes it. kube abandons a stream that stays silent for this plus 5 s, so a
/// connection that died without a FIN (a lost NAT entry, a proxy that stopped forwarding)
/// is noticed within about a minute instead of kube's default of almost five.
pub const WATCH_TIMEOUT_SECS: u32 = 60;

/// Waits until every VM in `tracker` meets its condition, one fails, `timeout` passes or
/// `cancel` fires. Watches VMIs in `namespace` labelled `virtwork/run-id=<run_id>`, each
/// watch request lasting [`WATCH_TIMEOUT_SECS`].
pub async fn wait_for_ready(
    client: kube::Client,
    namespace: &str,
    run_id: &str,
    tracker: &mut ReadinessTracker,
    timeout: Duration,
    cancel: &CancellationToken,
    observer: &mut dyn ReadinessObserver,
) -> (WaitOutcome, WatchStats) {
    let watch = ReadinessWatch {
        namespace,
        run_id,
        watch_timeout_secs: WATCH_TIMEOUT_SECS,
    };
    wait_for_ready_with(client, &watch, tracker, timeout, cancel, observer).await
}

/// Which VMIs [`wait_for_ready_with`] watches, and the `timeoutSeconds` of each watch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessWatch<'a> {
    pub namespace: &'a str,
    pub run_id: &'a str,
    pub watch_timeout_secs: u32,
}

/// [`wait_for_ready`] with the watch spelled out (tests shorten the watch timeout to see a
/// silent stream abandoned and resumed).
pub async fn wait_for_ready_with(
    client: kube::Client,
    watch: &ReadinessWatch<'_>,
    tracker: &mut ReadinessTracker,
    timeout: Duration,
    cancel: &CancellationToken,
    observer: &mut dyn ReadinessObserver,
) -> (WaitOutcome, WatchStats) {
    let mut stats = WatchStats::default();
    if tracker.all_ready() {
        return (WaitOutcome::AllReady, stats);
    }
    let api: Api<VirtualMachineInstance> = Api::namespaced(client, watch.namespace);
    let selector = format!("{}={}", labels::RUN_ID, watch.run_id);
    let config = watcher::Config::default()
        .labels(&selector)
        .timeout(watch.watch_timeout_secs);
    let stream = watcher::watcher(api, config);
    let mut stream = std::pin::pin!(stream);
    let deadline = Instant::now() + timeout;
    let backoff = Backoff::default();
    let mut consecutive_errors: u32 = 0;
    loop {
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => return (WaitOutcome::Cancelled, stats),
            () = tokio::time::sleep_until(deadline) => return (WaitOutcome::TimedOut, stats),
            item = stream.next() => item,
        };
        let transitions = match item {
            // The watcher never ends on its own; treat an end like a drop and keep polling.
            None => Vec::new(),
            Some(Ok(event)) => {
                consecutive_errors = 0;
                let now = jiff::Timestamp::now();
                match event {
                    watcher::Event::Apply(vmi) | watcher::Event::InitApply(vmi) => {
                        tracker.observe(&vmi, now)
                    }
                    watcher::Event::Delete(vmi) => {
                        let name = vmi.metadata.name.unwrap_or_default();
                        tracker.observe_deleted(&name)
                    }
                    watcher::Event::Init | watcher::Event::InitDone => Vec::new(),
                }
            }
            Some(Err(error)) => {
                stats.reconnects += 1;
                if let Some(message) = permanent_watch_error(&error) {
                    return (WaitOutcome::WatchFailed(message), stats);
                }
                tracing::debug!(error = %error, "VMI watch interrupted, resuming");
                let delay = backoff.delay(consecutive_errors, fastrand::f64());
                consecutive_errors = consecutive_errors.saturating_add(1);
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return (WaitOutcome::Cancelled, stats),
                    () = tokio::time::sleep_until(deadline) => return (WaitOutcome::TimedOut, stats),
                    () = tokio::time::sleep(delay) => {}
                }
                Vec::new()
            }
        };
        if !transitions.is_empty() {
            observer.changed(tracker, &transitions);
        }
        if let Some(failed) = tracker.first_failure() {
            return (
                WaitOutcome::Failed {
                    vm: failed.name.clone(),
                    reason: failed.failure.clone().unwrap_or_default(),
                },
                stats,
            );
        }
        if tracker.all_ready() {
            return (WaitOutcome::AllReady, stats);
        }
    }
}

/// The server's message when a watch error cannot be cured by retrying (401, 403, 404...).
fn permanent_watch_error(error: &watcher::Error) -> Option<String> {
    let inner = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        // 410 Gone and friends inside the stream: the watcher relists by itself.
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => return None,
    };
    match classify(inner) {
        Failure::Transient { .. } => None,
        Failure::Permanent | Failure::NotFound | Failure::AlreadyExists => Some(format!(
            "watching VirtualMachineInstances: {}",
            crate::error::kube_text(inner)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubevirt::{Condition, VirtualMachineInstanceStatus};

    fn vmi(name: &str, phase: Option<&str>, conditions: &[(&str, &str)]) -> VirtualMachineInstance {
        VirtualMachineInstance {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: None,
            status: Some(VirtualMachineInstanceStatus {
                phase: phase.map(str::to_string),
                conditions: conditions
                    .iter()
                    .map(|(t, s)| Condition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn running_condition_tracks_phases_and_records_ready_once() {
        let mut t = ReadinessTracker::new(["a", "b"], ReadyCondition::Running);
        assert_eq!(
            t.observe(&vmi("a", Some("Scheduling"), &[]), at(1)),
            vec![Transition::Phase {
                vm: "a".into(),
                from: NO_VMI_PHASE.into(),
                to: "Scheduling".into()
            }]
        );
        let changes = t.observe(&vmi("a", Some("Running"), &[]), at(2));
        assert_eq!(changes.len(), 2);
        assert_eq!(
            changes[1],
            Transition::Ready {
                vm: "a".into(),
                phase: "Running".into()
            }
        );
        // The same snapshot again changes nothing, and readiness keeps its first time.
        assert!(t.observe(&vmi("a", Some("Running"), &[]), at(3)).is_empty());
        assert_eq!(t.vms().next().unwrap().ready_at, Some(at(2)));
        // Scheduling was seen at 1, but Scheduled never: the first Running sighting counts.
        assert_eq!(t.vms().next().unwrap().scheduled_at, Some(at(2)));
        assert_eq!(t.vms().next().unwrap().running_at, Some(at(2)));
        assert!(!t.all_ready());
        assert_eq!(t.ready_count(), 1);
        assert_eq!(
            t.phase_counts(),
            BTreeMap::from([(NO_VMI_PHASE.to_string(), 1), ("Running".to_string(), 1)])
        );
        t.observe(&vmi("b", Some("Running"), &[]), at(4));
        assert!(t.all_ready());
    }

    #[test]
    fn ready_and_agent_conditions_need_the_vmi_condition() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Ready);
        t.observe(&vmi("a", Some("Scheduled"), &[]), at(0));
        t.observe(&vmi("a", Some("Running"), &[("Ready", "False")]), at(1));
        assert!(!t.all_ready());
        t.observe(&vmi("a", Some("Running"), &[("Ready", "True")]), at(2));
        assert!(t.all_ready());
        let a = t.vms().next().unwrap();
        assert_eq!(
            (a.scheduled_at, a.running_at, a.ready_at),
            (Some(at(0)), Some(at(1)), Some(at(2)))
        );

        let mut t = ReadinessTracker::new(["a"], ReadyCondition::AgentConnected);
        t.observe(&vmi("a", Some("Running"), &[("Ready", "True")]), at(1));
        assert!(!t.all_ready());
        t.observe(
            &vmi(
                "a",
                Some("Running"),
                &[("Ready", "True"), ("AgentConnected", "True")],
            ),
            at(2),
        );
        assert!(t.all_ready());
    }

    #[test]
    fn workload_condition_needs_ready_decided_by_a_probe() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Workload);
        // Ready without a probe only means the guest booted.
        t.observe(&vmi("a", Some("Running"), &[("Ready", "True")]), at(1));
        assert!(!t.all_ready());
        let mut probed = vmi("a", Some("Running"), &[("Ready", "False")]);
        probed.spec = Some(serde_json::json!({"readinessProbe": {"exec": {"command": ["true"]}}}));
        t.observe(&probed, at(2));
        assert!(!t.all_ready());
        probed.status.as_mut().unwrap().conditions[0].status = "True".into();
        t.observe(&probed, at(3));
        assert!(t.all_ready());
    }

    #[test]
    fn failed_vmi_is_reported_with_its_name_and_reason() {
        let mut t = ReadinessTracker::new(["a", "b"], ReadyCondition::Running);
        let mut failed = vmi("b", Some("Failed"), &[]);
        failed.status.as_mut().unwrap().conditions.push(Condition {
            type_: "Ready".into(),
            status: "False".into(),
            message: Some("guest crashed".into()),
            ..Default::default()
        });
        let changes = t.observe(&failed, at(1));
        assert!(changes.contains(&Transition::Failed {
            vm: "b".into(),
            reason: "guest crashed".into()
        }));
        assert_eq!(t.first_failure().unwrap().name, "b");
    }

    #[test]
    fn unknown_vmis_are_ignored_and_deletions_reset_the_phase() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running);
        assert!(
            t.observe(&vmi("other", Some("Running"), &[]), at(1))
                .is_empty()
        );
        t.observe(&vmi("a", Some("Scheduled"), &[]), at(1));
        assert_eq!(t.observe_deleted("a").len(), 1);
        assert_eq!(t.not_ready()[0].phase, NO_VMI_PHASE);
        assert!(t.observe_deleted("a").is_empty());
        // A VMI without status is Pending.
        let mut bare = vmi("a", None, &[]);
        bare.status = None;
        t.observe(&bare, at(2));
        assert_eq!(t.not_ready()[0].phase, "Pending");
    }

    #[test]
    fn ready_vm_does_not_regress_or_fail() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running);
        t.observe(&vmi("a", Some("Running"), &[]), at(1));
        let changes = t.observe(&vmi("a", Some("Failed"), &[]), at(2));
        assert_eq!(changes.len(), 1, "only the phase change: {changes:?}");
        assert!(t.all_ready());
        assert!(t.first_failure().is_none());
    }
}
