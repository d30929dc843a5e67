//! Watch-based readiness: label-selected watches over a run's VirtualMachineInstances,
//! VirtualMachines and DataVolumes decide when every VM is ready, which failed, which sit in a
//! state that needs someone to act (and for how long), and which were still pending at the
//! timeout.
//!
//! The decision logic is the sans-IO [`ReadinessTracker`]: it is fed VMI, VM and DataVolume
//! snapshots and says what changed ([`Transition`]). A VMI's phase and conditions decide
//! readiness; the VM's `printableStatus` (what `kubectl get vm` shows: `ErrImagePull`,
//! `ErrorUnschedulable`, `DataVolumeError`, ...) with the condition message that explains it
//! (or the failing DataVolume's) is what the user is shown; [`ReadinessTracker::with_fail_fast`]
//! ends the wait once a VM stayed in such a state longer than a grace period.
//! [`wait_for_ready_with`] is the thin async shell: one `kube::runtime::watcher` stream per kind
//! selected by `virtwork/run-id=<id>` (LIST once, then WATCH; the watcher resumes from the
//! last resourceVersion when the server drops the stream and relists on 410 Gone), transient
//! stream errors retried with jittered backoff, permanent ones (401/403) ending the wait with
//! the server's message. Each watch request asks the server to end it after
//! [`WATCH_TIMEOUT_SECS`], and a stream silent for longer is dropped and resumed, so a dead
//! connection cannot hold the wait until the deadline. The API cost is therefore a handful of
//! requests per run, independent of the number of VMs, and a change is noticed as soon as its
//! watch event arrives (no poll interval).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::k8s::retry::{Backoff, Failure, classify};
use crate::kubevirt::{
    Condition, DataVolume, VirtualMachine, VirtualMachineInstance, VirtualMachineStatus,
};
use crate::labels;
use crate::model::ReadyCondition;

/// Phase shown for a VM whose VMI does not exist (yet).
pub const NO_VMI_PHASE: &str = "NoVMI";

/// KubeVirt's `printableStatus` values for a VM that cannot start or run until something
/// changes (kubevirt pkg/virt-controller/watch/vm/vm.go, setPrintableStatus): an image that
/// cannot be pulled, no node that fits, a DataVolume or PVC in error, a launcher that keeps
/// crashing, a guest paused by an I/O error (`Paused`: its storage is full or gone). They can
/// clear (a registry comes back, a node is added), which is why `--fail-fast` waits a grace
/// period before giving up. (`ErrorDataVolumeNotFound` is gone since KubeVirt v0.57: a
/// missing DataVolume now reads `Provisioning` or `ErrorPvcNotFound`.)
pub const STUCK_STATUSES: [&str; 7] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrorUnschedulable",
    "DataVolumeError",
    "ErrorPvcNotFound",
    "CrashLoopBackOff",
    "Paused",
];

/// Statuses of a VM whose volumes are not ready yet (`Provisioning`: a DataVolume is being
/// populated; `WaitingForVolumeBinding`: a PVC is unbound). Normal for a while; stuck when
/// CDI states a reason that needs someone to act ([`data_volume_pending`]).
pub const VOLUME_STATUSES: [&str; 2] = ["Provisioning", "WaitingForVolumeBinding"];

/// Whether `status` (a VM's printableStatus) is one of [`STUCK_STATUSES`].
pub fn is_stuck_status(status: &str) -> bool {
    STUCK_STATUSES.contains(&status)
}

/// What we know about one VM's readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmReadiness {
    pub name: String,
    /// Last observed VMI phase, or [`NO_VMI_PHASE`].
    pub phase: String,
    /// The VM's last `printableStatus` (None until the VM watch saw it).
    pub status: Option<String>,
    /// Why the VM is in a stuck status: the condition message KubeVirt gives (or the failing
    /// DataVolume's); None in other statuses.
    pub message: Option<String>,
    /// Since when the VM has been in a stuck status (one of [`STUCK_STATUSES`]) without a break.
    pub stuck_since: Option<jiff::Timestamp>,
    /// When its VMI was first seen scheduled to a node (phase Scheduled, or already Running).
    pub scheduled_at: Option<jiff::Timestamp>,
    /// When its VMI was first seen Running.
    pub running_at: Option<jiff::Timestamp>,
    /// When the VM met the ready condition (first time; readiness does not regress).
    pub ready_at: Option<jiff::Timestamp>,
    /// Why the VM failed (VMI phase Failed), if it did and KubeVirt will not retry it.
    pub failure: Option<String>,
    /// Its run strategy restarts a failed VMI (`Always`, `RerunOnFailure`, `Once`, as KubeVirt's
    /// CrashLoopBackOff counts them): a failure is then stuck-with-grace, not the end.
    pub retried: bool,
    /// What explains a VM that is not doing well; boxed, and absent for the many VMs that
    /// are, so a 10,000-VM fleet does not carry 100 empty bytes per VM.
    explained: Option<Box<Explanations>>,
}

/// The messages that can explain a VM's state, kept apart from [`VmReadiness`] (see there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Explanations {
    /// Why its last VMI failed, while KubeVirt is retrying it.
    crashed: Option<String>,
    /// The message of the VM's own conditions, of its failing DataVolume, and of a
    /// DataVolume pending for a reason CDI states (with whether that reason is stuck).
    vm_message: Option<String>,
    dv_problem: Option<String>,
    dv_pending: Option<(String, bool)>,
}

const UNEXPLAINED: Explanations = Explanations {
    crashed: None,
    vm_message: None,
    dv_problem: None,
    dv_pending: None,
};

impl VmReadiness {
    pub fn is_ready(&self) -> bool {
        self.ready_at.is_some()
    }

    fn explanations(&self) -> &Explanations {
        self.explained.as_deref().unwrap_or(&UNEXPLAINED)
    }

    /// Changes the explanations, keeping no box when nothing explains anything.
    fn explain(&mut self, change: impl FnOnce(&mut Explanations)) {
        let mut explained = self.explained.take().unwrap_or_default();
        change(&mut explained);
        if *explained != UNEXPLAINED {
            self.explained = Some(explained);
        }
    }

    /// In a state that needs someone to act: a stuck status, a volume status CDI explains
    /// with a reason that does not clear by itself, or a failed VMI KubeVirt keeps retrying.
    pub fn is_stuck(&self) -> bool {
        if self.is_ready() {
            return false;
        }
        let status = self.status.as_deref().unwrap_or_default();
        is_stuck_status(status)
            || (VOLUME_STATUSES.contains(&status)
                && self
                    .explanations()
                    .dv_pending
                    .as_ref()
                    .is_some_and(|(_, stuck)| *stuck))
            || self.explanations().crashed.is_some()
    }

    /// The state shown to the user: the VM's printableStatus, else its VMI's phase.
    pub fn shown(&self) -> &str {
        self.status.as_deref().unwrap_or(&self.phase)
    }

    /// `ErrImagePull: <message>`, or just the shown state when there is no message.
    pub fn describe(&self) -> String {
        match &self.message {
            Some(message) => format!("{}: {message}", self.shown()),
            None => self.shown().to_string(),
        }
    }

    /// Recomputes the message from the VM's, the DataVolume's and a retried failure's; true
    /// when it changed.
    fn refresh_message(&mut self) -> bool {
        let e = self.explanations();
        let message = match self.status.as_deref() {
            Some("DataVolumeError") => e.dv_problem.clone().or(e.vm_message.clone()),
            Some(status) if VOLUME_STATUSES.contains(&status) => {
                e.dv_pending.as_ref().map(|(message, _)| message.clone())
            }
            Some(status) if is_stuck_status(status) => e.vm_message.clone().or(e.crashed.clone()),
            _ => e.crashed.clone(),
        };
        let changed = message != self.message;
        self.message = message;
        changed
    }
}

/// A change worth reporting, produced by [`ReadinessTracker::observe`] and its siblings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The VMI's phase changed.
    Phase {
        vm: String,
        from: String,
        to: String,
    },
    /// The VM's printableStatus (or the message explaining it) changed.
    Status {
        vm: String,
        from: Option<String>,
        to: String,
        message: Option<String>,
        /// The VM is now in a state that needs someone to act ([`VmReadiness::is_stuck`]).
        stuck: bool,
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
    /// VMs per shown state.
    shown: BTreeMap<String, usize>,
    failures: usize,
    /// `--fail-fast`: how long a VM may stay in a stuck status.
    fail_fast: Option<Duration>,
    /// Stuck VMs by the time they got stuck.
    stuck: BTreeSet<(jiff::Timestamp, String)>,
}

impl ReadinessTracker {
    /// Tracks `names` (VMI names equal VM names), all starting without a VMI.
    pub fn new<I, S>(names: I, condition: ReadyCondition) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        // Inserted one by one: collecting would first gather every entry in a Vec to sort
        // (3.5 MB beside the map's 3.5 MB at 10,000 VMs, the run's peak heap).
        let mut vms = BTreeMap::new();
        for n in names {
            let name: String = n.into();
            let state = VmReadiness {
                name: name.clone(),
                phase: NO_VMI_PHASE.to_string(),
                status: None,
                message: None,
                stuck_since: None,
                scheduled_at: None,
                running_at: None,
                ready_at: None,
                failure: None,
                // virtwork's VMs run with strategy Always; the VM watch corrects it.
                retried: true,
                explained: None,
            };
            vms.insert(name, state);
        }
        let shown = if vms.is_empty() {
            BTreeMap::new()
        } else {
            BTreeMap::from([(NO_VMI_PHASE.to_string(), vms.len())])
        };
        ReadinessTracker {
            condition,
            vms,
            ready: 0,
            shown,
            failures: 0,
            fail_fast: None,
            stuck: BTreeSet::new(),
        }
    }

    /// Gives up on the wait once a VM has been in a stuck status for `grace` (None: never).
    pub fn with_fail_fast(mut self, grace: Option<Duration>) -> Self {
        self.fail_fast = grace;
        self
    }

    fn count_change(counts: &mut BTreeMap<String, usize>, from: &str, to: &str) {
        if from == to {
            return;
        }
        if let Some(n) = counts.get_mut(from) {
            *n -= 1;
            if *n == 0 {
                counts.remove(from);
            }
        }
        *counts.entry(to.to_string()).or_insert(0) += 1;
    }

    /// Applies `change` to VM `name` (if tracked), keeping the counts and the stuck set in
    /// step; `now` dates a VM that just got stuck.
    fn update<T>(
        &mut self,
        name: &str,
        now: jiff::Timestamp,
        change: impl FnOnce(&mut VmReadiness) -> T,
    ) -> Option<T> {
        let state = self.vms.get_mut(name)?;
        let shown_before = state.shown().to_string();
        let out = change(state);
        Self::count_change(&mut self.shown, &shown_before, state.shown());
        let stuck = state.is_stuck();
        match (stuck, state.stuck_since) {
            (true, None) => {
                state.stuck_since = Some(now);
                self.stuck.insert((now, name.to_string()));
            }
            (false, Some(since)) => {
                state.stuck_since = None;
                self.stuck.remove(&(since, name.to_string()));
            }
            _ => {}
        }
        Some(out)
    }

    /// Whether `vmi` satisfies `condition`.
    pub fn meets(condition: ReadyCondition, vmi: &VirtualMachineInstance) -> bool {
        let Some(status) = vmi.status.as_ref() else {
            return false;
        };
        // A guest paused by an I/O error (or by hand) runs nothing, whatever else it reports
        // (kubevirt pkg/virt-handler/vm.go sets Paused=True, reason PausedIOError).
        let running = status.phase.as_deref() == Some("Running")
            && !status.condition("Paused").is_some_and(|c| c.is_true());
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
                    .and_then(|spec| spec.pointer("/readinessProbe"))
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
        let Some(name) = vmi.metadata.name.as_deref() else {
            return Vec::new();
        };
        let condition = self.condition;
        let phase = vmi
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "Pending".to_string());
        let meets = Self::meets(condition, vmi);
        let (changes, became_ready, failed) = self
            .update(name, now, |state| {
                Self::apply_vmi(state, vmi, phase, meets, now)
            })
            .unwrap_or_default();
        self.ready += usize::from(became_ready);
        self.failures += usize::from(failed);
        changes
    }

    /// A VMI snapshot into one VM's state: the transitions, whether it became ready, whether
    /// it failed.
    fn apply_vmi(
        state: &mut VmReadiness,
        vmi: &VirtualMachineInstance,
        phase: String,
        meets: bool,
        now: jiff::Timestamp,
    ) -> (Vec<Transition>, bool, bool) {
        let mut changes = Vec::new();
        let name = state.name.clone();
        if phase != state.phase {
            changes.push(Transition::Phase {
                vm: name.clone(),
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
        let became_ready = state.ready_at.is_none() && meets;
        if became_ready {
            state.ready_at = Some(now);
            changes.push(Transition::Ready {
                vm: name.clone(),
                phase: phase.clone(),
            });
        }
        let reason = || {
            vmi.status
                .as_ref()
                .and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| !c.is_true() && c.message.is_some())
                        .and_then(|c| c.message.clone())
                })
                .unwrap_or_else(|| "the VMI reached phase Failed".to_string())
        };
        let unready = state.failure.is_none() && state.ready_at.is_none();
        // Under a run strategy that restarts it, KubeVirt retries a failed VMI with a
        // growing back-off (the VM reads CrashLoopBackOff meanwhile): stuck, given the
        // fail-fast grace, rather than the end of the wait. It stays stuck through the
        // retries (a new VMI Pending, Scheduling) until one runs, so the grace counts from
        // the first failure rather than restarting with every attempt.
        let before = (state.status.clone(), state.message.clone());
        if phase == "Failed" && unready && state.retried {
            let crashed = reason();
            state.explain(|e| e.crashed = Some(crashed));
        } else if phase == "Running" {
            state.explain(|e| e.crashed = None);
        }
        if state.refresh_message()
            && let Some(change) = status_transition(state, before)
        {
            changes.push(change);
        }
        let failed = phase == "Failed" && unready && !state.retried;
        if failed {
            let reason = reason();
            state.failure = Some(reason.clone());
            changes.push(Transition::Failed { vm: name, reason });
        }
        (changes, became_ready, failed)
    }

    /// Feeds one VirtualMachine snapshot: its printableStatus and the condition message
    /// explaining a stuck one. VMs we do not track are ignored.
    pub fn observe_vm(&mut self, vm: &VirtualMachine, now: jiff::Timestamp) -> Vec<Transition> {
        let Some(name) = vm.metadata.name.as_deref() else {
            return Vec::new();
        };
        let status = vm
            .status
            .as_ref()
            .and_then(|s| s.printable_status.clone())
            .filter(|s| !s.is_empty());
        let message = vm.status.as_ref().and_then(condition_message);
        // kubevirt pkg/virt-controller/watch/vm/vm.go, isVirtualMachineStatusCrashLoopBackOff:
        // the strategies under which a failed start is retried.
        let retried = vm
            .spec
            .run_strategy
            .as_deref()
            .is_none_or(|s| matches!(s, "Always" | "RerunOnFailure" | "Once"));
        self.update(name, now, |state| {
            let before = (state.status.clone(), state.message.clone());
            state.retried = retried;
            state.explain(|e| e.vm_message = message);
            state.status = status.or(state.status.take());
            state.refresh_message();
            status_transition(state, before)
        })
        .flatten()
        .into_iter()
        .collect()
    }

    /// Feeds one DataVolume snapshot: a failing one explains its VM's `DataVolumeError`.
    /// DataVolumes not owned by a tracked VM are ignored.
    pub fn observe_dv(&mut self, dv: &DataVolume, now: jiff::Timestamp) -> Vec<Transition> {
        let problem = data_volume_problem(dv);
        let pending = data_volume_pending(dv);
        self.dv_changed(dv, problem, pending, now)
    }

    /// A DataVolume disappeared: it no longer explains anything.
    pub fn observe_dv_deleted(&mut self, dv: &DataVolume, now: jiff::Timestamp) -> Vec<Transition> {
        self.dv_changed(dv, None, None, now)
    }

    fn dv_changed(
        &mut self,
        dv: &DataVolume,
        problem: Option<String>,
        pending: Option<(String, bool)>,
        now: jiff::Timestamp,
    ) -> Vec<Transition> {
        let Some(owner) = owning_vm(dv) else {
            return Vec::new();
        };
        self.update(&owner, now, |state| {
            let before = (state.status.clone(), state.message.clone());
            state.explain(|e| {
                e.dv_problem = problem;
                e.dv_pending = pending;
            });
            state.refresh_message();
            status_transition(state, before)
        })
        .flatten()
        .into_iter()
        .collect()
    }

    /// Records that a VMI disappeared (e.g. being restarted by its VM).
    pub fn observe_deleted(&mut self, name: &str) -> Vec<Transition> {
        let now = jiff::Timestamp::now();
        self.update(name, now, |state| {
            if state.phase == NO_VMI_PHASE {
                return Vec::new();
            }
            vec![Transition::Phase {
                vm: name.to_string(),
                from: std::mem::replace(&mut state.phase, NO_VMI_PHASE.to_string()),
                to: NO_VMI_PHASE.to_string(),
            }]
        })
        .unwrap_or_default()
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

    /// With `--fail-fast`: when the VM stuck longest reaches its grace period.
    pub fn fail_fast_due(&self) -> Option<jiff::Timestamp> {
        let grace = self.fail_fast?;
        let (since, _) = self.stuck.first()?;
        since
            .checked_add(jiff::SignedDuration::try_from(grace).ok()?)
            .ok()
    }

    /// With `--fail-fast`: the VM stuck longest, once it has been stuck for the grace period
    /// at `now`.
    pub fn stuck_too_long(&self, now: jiff::Timestamp) -> Option<&VmReadiness> {
        let due = self.fail_fast_due()?;
        if now < due {
            return None;
        }
        let (_, name) = self.stuck.first()?;
        self.vms.get(name)
    }

    /// VMs in a stuck status now.
    pub fn stuck_count(&self) -> usize {
        self.stuck.len()
    }

    /// Number of VMs ready.
    pub fn ready_count(&self) -> usize {
        self.ready
    }

    /// Number of VMs tracked.
    pub fn total(&self) -> usize {
        self.vms.len()
    }

    /// VMs per shown state (printableStatus, else VMI phase), sorted by state name.
    pub fn phase_counts(&self) -> BTreeMap<String, usize> {
        self.shown.clone()
    }

    /// One VM's state.
    pub fn get(&self, name: &str) -> Option<&VmReadiness> {
        self.vms.get(name)
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

/// The `Status` transition when the status or its message changed since `before`.
fn status_transition(
    state: &VmReadiness,
    before: (Option<String>, Option<String>),
) -> Option<Transition> {
    let to = state.status.clone()?;
    (before != (state.status.clone(), state.message.clone())).then(|| Transition::Status {
        vm: state.name.clone(),
        from: before.0,
        to,
        message: state.message.clone(),
        stuck: state.is_stuck(),
    })
}

/// The message of the condition that explains a stuck printableStatus, as KubeVirt sets
/// them: the launcher pod's image pull error on `Synchronized`, the scheduler's on
/// `PodScheduled`, a start failure on `Failure`, a crash on `Ready`.
pub fn condition_message(status: &VirtualMachineStatus) -> Option<String> {
    let printable = status.printable_status.as_deref()?;
    let explaining: &[&str] = match printable {
        "ErrImagePull" | "ImagePullBackOff" | "ErrorPvcNotFound" => &["Synchronized", "Failure"],
        "ErrorUnschedulable" => &["PodScheduled", "Failure"],
        "CrashLoopBackOff" => &["Failure", "Ready"],
        "DataVolumeError" => &["Failure", "DataVolumesReady"],
        "Paused" => &["Paused"],
        _ => return None,
    };
    let text = |c: &Condition| c.message.clone().filter(|m| !m.trim().is_empty());
    // Failure and Paused explain while True, the others while False.
    let explains = |c: &Condition| matches!(c.type_.as_str(), "Failure" | "Paused") == c.is_true();
    explaining.iter().find_map(|wanted| {
        status
            .conditions
            .iter()
            .filter(|c| c.type_ == *wanted && explains(c))
            .find_map(text)
    })
}

/// What is wrong with a DataVolume, as KubeVirt judges it for `DataVolumeError`: phase Failed,
/// or its importer stopped (`Running=False`, reason `Error` or `ImagePullFailed`).
pub fn data_volume_problem(dv: &DataVolume) -> Option<String> {
    let name = dv.metadata.name.as_deref().unwrap_or_default();
    let status = dv.status.as_ref()?;
    let running = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Running" && !c.is_true());
    let stopped = running.filter(|c| {
        matches!(c.reason.as_deref(), Some("Error" | "ImagePullFailed")) && c.status == "False"
    });
    let detail = running.and_then(|c| c.message.clone()).unwrap_or_default();
    if status.phase.as_deref() == Some("Failed") {
        return Some(if detail.is_empty() {
            format!("DataVolume {name} is in phase Failed")
        } else {
            format!("DataVolume {name} is in phase Failed: {detail}")
        });
    }
    stopped.map(|_| format!("DataVolume {name}: {detail}"))
}

/// Why a DataVolume is not populated yet, as CDI states it on its `Bound` condition
/// (containerized-data-importer pkg/controller/datavolume/conditions.go,
/// updateBoundCondition): `DataVolume <name>: <message>`, and whether the reason needs someone
/// to act. `Pending` (the claim waits for its volume) and `WaitForFirstConsumer` clear by
/// themselves; any other reason CDI gives on an unbound DataVolume does not: `ErrClaimNotValid`
/// (e.g. "no accessMode specified in StorageProfile …"), `ErrExceededQuota`, a provisioning
/// failure copied from the claim. `None` once bound, or without a message.
pub fn data_volume_pending(dv: &DataVolume) -> Option<(String, bool)> {
    let name = dv.metadata.name.as_deref().unwrap_or_default();
    let status = dv.status.as_ref()?;
    let bound = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Bound" && !c.is_true())?;
    let message = bound.message.as_deref().filter(|m| !m.trim().is_empty())?;
    let clears = matches!(
        bound.reason.as_deref().unwrap_or_default(),
        "" | "Pending" | "WaitForFirstConsumer"
    );
    Some((format!("DataVolume {name}: {message}"), !clears))
}

/// The VM owning a DataVolume (its dataVolumeTemplates made it).
fn owning_vm(dv: &DataVolume) -> Option<String> {
    dv.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.kind == "VirtualMachine")
        .map(|r| r.name.clone())
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
    /// `--fail-fast`: a VM stayed in a stuck status (the one stuck longest) for the grace
    /// period.
    Stuck {
        vm: String,
        status: String,
        message: Option<String>,
        grace: Duration,
    },
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

/// Which objects [`wait_for_ready_with`] watches (the run's, in one namespace), and the `timeoutSeconds` of each watch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessWatch<'a> {
    pub namespace: &'a str,
    pub run_id: &'a str,
    /// Whether the run has DataVolumes to watch (without data disks CDI may be absent).
    pub data_volumes: bool,
    pub watch_timeout_secs: u32,
}

impl<'a> ReadinessWatch<'a> {
    /// The run's objects in `namespace`, each watch request lasting [`WATCH_TIMEOUT_SECS`].
    pub fn new(namespace: &'a str, run_id: &'a str, data_volumes: bool) -> Self {
        ReadinessWatch {
            namespace,
            run_id,
            data_volumes,
            watch_timeout_secs: WATCH_TIMEOUT_SECS,
        }
    }
}

/// What one of the three watches saw.
enum Seen {
    Vmi(Box<watcher::Event<VirtualMachineInstance>>),
    Vm(Box<watcher::Event<VirtualMachine>>),
    Dv(Box<watcher::Event<DataVolume>>),
}

/// A watch error with the kind whose watch failed.
type SeenResult = Result<Seen, (&'static str, watcher::Error)>;

/// One label-selected watch per kind, merged into one stream.
fn watch_streams(
    client: kube::Client,
    watch: &ReadinessWatch<'_>,
) -> futures::stream::SelectAll<Pin<Box<dyn Stream<Item = SeenResult> + Send>>> {
    let selector = format!("{}={}", labels::RUN_ID, watch.run_id);
    let config = watcher::Config::default()
        .labels(&selector)
        .timeout(watch.watch_timeout_secs);
    let vmis: Api<VirtualMachineInstance> = Api::namespaced(client.clone(), watch.namespace);
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), watch.namespace);
    let dvs: Api<DataVolume> = Api::namespaced(client, watch.namespace);
    let mut streams: Vec<Pin<Box<dyn Stream<Item = SeenResult> + Send>>> = vec![
        Box::pin(watcher::watcher(vmis, config.clone()).map(|r| {
            r.map(|e| Seen::Vmi(Box::new(e)))
                .map_err(|e| ("VirtualMachineInstances", e))
        })),
        Box::pin(watcher::watcher(vms, config.clone()).map(|r| {
            r.map(|e| Seen::Vm(Box::new(e)))
                .map_err(|e| ("VirtualMachines", e))
        })),
    ];
    if watch.data_volumes {
        streams.push(Box::pin(watcher::watcher(dvs, config).map(|r| {
            r.map(|e| Seen::Dv(Box::new(e)))
                .map_err(|e| ("DataVolumes", e))
        })));
    }
    futures::stream::select_all(streams)
}

/// One watch event into the tracker.
fn feed(tracker: &mut ReadinessTracker, seen: Seen) -> Vec<Transition> {
    let now = jiff::Timestamp::now();
    match seen {
        Seen::Vmi(event) => feed_vmi(tracker, *event, now),
        Seen::Vm(event) => match *event {
            watcher::Event::Apply(vm) | watcher::Event::InitApply(vm) => {
                tracker.observe_vm(&vm, now)
            }
            _ => Vec::new(),
        },
        Seen::Dv(event) => match *event {
            watcher::Event::Apply(dv) | watcher::Event::InitApply(dv) => {
                tracker.observe_dv(&dv, now)
            }
            watcher::Event::Delete(dv) => tracker.observe_dv_deleted(&dv, now),
            _ => Vec::new(),
        },
    }
}

fn feed_vmi(
    tracker: &mut ReadinessTracker,
    event: watcher::Event<VirtualMachineInstance>,
    now: jiff::Timestamp,
) -> Vec<Transition> {
    match event {
        watcher::Event::Apply(vmi) | watcher::Event::InitApply(vmi) => tracker.observe(&vmi, now),
        watcher::Event::Delete(vmi) => {
            tracker.observe_deleted(vmi.metadata.name.as_deref().unwrap_or_default())
        }
        watcher::Event::Init | watcher::Event::InitDone => Vec::new(),
    }
}

/// How the wait ends after the tracker changed, if it does.
fn decided(tracker: &ReadinessTracker) -> Option<WaitOutcome> {
    if let Some(failed) = tracker.first_failure() {
        return Some(WaitOutcome::Failed {
            vm: failed.name.clone(),
            reason: failed.failure.clone().unwrap_or_default(),
        });
    }
    if let Some(stuck) = tracker.stuck_too_long(jiff::Timestamp::now()) {
        return Some(WaitOutcome::Stuck {
            vm: stuck.name.clone(),
            status: stuck.shown().to_string(),
            message: stuck.message.clone(),
            grace: tracker.fail_fast.unwrap_or_default(),
        });
    }
    tracker.all_ready().then_some(WaitOutcome::AllReady)
}

/// When `--fail-fast` must look again (the stuck VM's grace ends), as a tokio instant.
fn fail_fast_check(tracker: &ReadinessTracker, deadline: Instant) -> Instant {
    let Some(due) = tracker.fail_fast_due() else {
        return deadline;
    };
    let left = jiff::Timestamp::now().duration_until(due);
    let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
    (Instant::now() + left).min(deadline)
}

/// Waits until every VM in `tracker` meets its condition, one fails, one stays stuck past
/// the tracker's `--fail-fast` grace, `timeout` passes or `cancel` fires, watching the VMIs,
/// VMs and (with `watch.data_volumes`) DataVolumes labelled `virtwork/run-id=<run_id>` in
/// `watch.namespace` (tests shorten the watch timeout to see a silent stream abandoned and
/// resumed).
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
    let mut stream = watch_streams(client, watch);
    let deadline = Instant::now() + timeout;
    let backoff = Backoff::default();
    let mut consecutive_errors: u32 = 0;
    loop {
        let check = fail_fast_check(tracker, deadline);
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => return (WaitOutcome::Cancelled, stats),
            () = tokio::time::sleep_until(deadline) => return (WaitOutcome::TimedOut, stats),
            () = tokio::time::sleep_until(check), if check < deadline => None,
            item = stream.next() => item,
        };
        let transitions = match item {
            // A fail-fast check (the watchers never end on their own).
            None => Vec::new(),
            Some(Ok(seen)) => {
                consecutive_errors = 0;
                feed(tracker, seen)
            }
            Some(Err((kind, error))) => {
                stats.reconnects += 1;
                if let Some(message) = permanent_watch_error(kind, &error) {
                    return (WaitOutcome::WatchFailed(message), stats);
                }
                tracing::debug!(error = %error, kind, "watch interrupted, resuming");
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
        if let Some(outcome) = decided(tracker) {
            return (outcome, stats);
        }
    }
}

/// The server's message when a watch error cannot be cured by retrying (401, 403, 404...).
fn permanent_watch_error(kind: &str, error: &watcher::Error) -> Option<String> {
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
            "watching {kind}: {}",
            crate::error::kube_text(inner)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubevirt::VirtualMachineInstanceStatus;

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
        // Under a run strategy that does not restart it, a failure ends the wait.
        let mut halted = vm("b", "Stopped", &[]);
        halted.spec.run_strategy = Some("Halted".into());
        t.observe_vm(&halted, at(0));
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

    fn vm(name: &str, printable: &str, conditions: &[(&str, &str, &str)]) -> VirtualMachine {
        VirtualMachine {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            status: Some(VirtualMachineStatus {
                printable_status: Some(printable.to_string()),
                conditions: conditions
                    .iter()
                    .map(|(t, s, m)| Condition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        message: Some(m.to_string()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const PULL: &str = "Back-off pulling image \"quay.io/x/unpullable:1\"";

    const IO_ERROR: &str = "VMI was paused, low-level IO error detected";

    #[test]
    fn a_paused_vmi_is_never_ready_and_is_stuck() {
        let paused = vmi(
            "a",
            Some("Running"),
            &[
                ("Paused", "True"),
                ("Ready", "True"),
                ("AgentConnected", "True"),
            ],
        );
        for condition in [
            ReadyCondition::Running,
            ReadyCondition::Ready,
            ReadyCondition::AgentConnected,
        ] {
            assert!(
                !ReadinessTracker::meets(condition, &paused),
                "{condition:?}"
            );
        }
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running)
            .with_fail_fast(Some(Duration::from_secs(30)));
        t.observe(&paused, at(0));
        let changes = t.observe_vm(&vm("a", "Paused", &[("Paused", "True", IO_ERROR)]), at(1));
        assert!(
            matches!(&changes[..], [Transition::Status { stuck: true, .. }]),
            "{changes:?}"
        );
        assert_eq!(
            t.get("a").unwrap().describe(),
            format!("Paused: {IO_ERROR}")
        );
        assert_eq!(t.stuck_too_long(at(31)).map(|v| v.name.as_str()), Some("a"));
    }

    fn dv(name: &str, owner: &str, bound: (&str, &str)) -> DataVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "ownerReferences": [
                {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": owner, "uid": "u"}
            ]},
            "status": {"phase": "", "conditions": [
                {"type": "Bound", "status": "False", "reason": bound.0, "message": bound.1}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn provisioning_is_named_with_cdis_message_and_stuck_only_for_a_reason_to_act() {
        let mut t = ReadinessTracker::new(["a", "b"], ReadyCondition::Running)
            .with_fail_fast(Some(Duration::from_secs(30)));
        t.observe_vm(&vm("a", "Provisioning", &[]), at(0));
        t.observe_vm(&vm("b", "Provisioning", &[]), at(0));
        let refused = "no accessMode specified in StorageProfile standard";
        t.observe_dv(&dv("data-a", "a", ("ErrClaimNotValid", refused)), at(1));
        t.observe_dv(&dv("data-b", "b", ("Pending", "PVC data-b Pending")), at(1));
        let a = t.get("a").unwrap();
        assert_eq!(
            a.describe(),
            format!("Provisioning: DataVolume data-a: {refused}")
        );
        assert!(a.is_stuck());
        let b = t.get("b").unwrap();
        assert_eq!(
            b.describe(),
            "Provisioning: DataVolume data-b: PVC data-b Pending"
        );
        assert!(
            !b.is_stuck(),
            "a claim waiting for its volume clears by itself"
        );
        assert_eq!(t.stuck_count(), 1);
        assert_eq!(t.stuck_too_long(at(31)).map(|v| v.name.as_str()), Some("a"));
    }

    #[test]
    fn a_failed_vmi_kubevirt_retries_gets_the_grace_others_end_the_wait() {
        let crash = "virt-launcher crashed";
        let failed = || {
            let mut v = vmi("a", Some("Failed"), &[("Ready", "False")]);
            v.status.as_mut().unwrap().conditions[0].message = Some(crash.into());
            v
        };
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running)
            .with_fail_fast(Some(Duration::from_secs(30)));
        let mut always = vm("a", "Starting", &[]);
        always.spec.run_strategy = Some("Always".into());
        t.observe_vm(&always, at(0));
        t.observe(&failed(), at(1));
        assert!(t.first_failure().is_none(), "KubeVirt starts it again");
        assert_eq!(t.get("a").unwrap().describe(), format!("Starting: {crash}"));
        assert!(t.stuck_too_long(at(30)).is_none());
        assert_eq!(t.stuck_too_long(at(31)).map(|v| v.name.as_str()), Some("a"));
        // A retry on its way is still the same crash loop; one that runs ends it.
        t.observe(&vmi("a", Some("Scheduling"), &[]), at(32));
        assert_eq!(t.stuck_count(), 1);
        t.observe(&vmi("a", Some("Running"), &[("Paused", "True")]), at(33));
        assert_eq!(t.stuck_count(), 0);

        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running);
        let mut manual = vm("a", "Starting", &[]);
        manual.spec.run_strategy = Some("Manual".into());
        t.observe_vm(&manual, at(0));
        t.observe(&failed(), at(1));
        assert_eq!(
            t.first_failure().map(|v| v.failure.clone()),
            Some(Some(crash.into()))
        );
    }

    #[test]
    fn the_vm_status_is_shown_with_the_condition_explaining_it() {
        let mut t = ReadinessTracker::new(["a", "b"], ReadyCondition::Running);
        t.observe(&vmi("a", Some("Scheduling"), &[]), at(0));
        assert_eq!(t.get("a").unwrap().shown(), "Scheduling");
        let changes = t.observe_vm(
            &vm(
                "a",
                "ImagePullBackOff",
                &[
                    ("Ready", "False", "VMI not ready"),
                    ("Synchronized", "False", PULL),
                ],
            ),
            at(1),
        );
        assert_eq!(
            changes,
            vec![Transition::Status {
                vm: "a".into(),
                from: None,
                to: "ImagePullBackOff".into(),
                message: Some(PULL.into()),
                stuck: true,
            }]
        );
        let a = t.get("a").unwrap();
        assert_eq!(a.describe(), format!("ImagePullBackOff: {PULL}"));
        assert_eq!(a.phase, "Scheduling", "the VMI phase is kept apart");
        assert_eq!(
            t.phase_counts(),
            BTreeMap::from([("ImagePullBackOff".into(), 1), (NO_VMI_PHASE.into(), 1)])
        );
        // The same snapshot again is no change; a status without a problem has no message.
        assert!(
            t.observe_vm(
                &vm("a", "ImagePullBackOff", &[("Synchronized", "False", PULL)]),
                at(2)
            )
            .is_empty()
        );
        t.observe_vm(
            &vm(
                "b",
                "ErrorUnschedulable",
                &[("PodScheduled", "False", "0/3 nodes are available")],
            ),
            at(2),
        );
        assert_eq!(
            t.get("b").unwrap().message.as_deref(),
            Some("0/3 nodes are available")
        );
        t.observe_vm(
            &vm("b", "Starting", &[("Ready", "False", "VMI does not exist")]),
            at(3),
        );
        assert_eq!(t.get("b").unwrap().describe(), "Starting");
    }

    fn data_volume(
        name: &str,
        owner: &str,
        phase: &str,
        running: (&str, &str, &str),
    ) -> DataVolume {
        let (status, reason, message) = running;
        DataVolume {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        kind: "VirtualMachine".into(),
                        name: owner.into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            },
            status: Some(crate::kubevirt::DataVolumeStatus {
                phase: Some(phase.into()),
                conditions: vec![Condition {
                    type_: "Running".into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_data_volume_error_is_explained_by_the_failing_data_volume() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running);
        let failing = data_volume(
            "datadisk-a",
            "a",
            "ImportInProgress",
            ("False", "Error", "No space left on device"),
        );
        assert_eq!(
            data_volume_problem(&failing).as_deref(),
            Some("DataVolume datadisk-a: No space left on device")
        );
        // Seen before the VM says DataVolumeError: kept until it does.
        assert!(t.observe_dv(&failing, at(1)).is_empty());
        let changes = t.observe_vm(&vm("a", "DataVolumeError", &[]), at(2));
        assert_eq!(changes.len(), 1);
        assert_eq!(
            t.get("a").unwrap().describe(),
            "DataVolumeError: DataVolume datadisk-a: No space left on device"
        );
        // An importer that is merely running, or a DataVolume of another VM, explains nothing.
        let running = data_volume(
            "datadisk-a",
            "a",
            "ImportInProgress",
            ("True", "Pod is running", ""),
        );
        assert_eq!(data_volume_problem(&running), None);
        t.observe_dv(&running, at(3));
        assert_eq!(t.get("a").unwrap().describe(), "DataVolumeError");
        assert!(
            t.observe_dv(
                &data_volume("x", "other", "Failed", ("False", "Error", "e")),
                at(4)
            )
            .is_empty()
        );
        let failed = data_volume("datadisk-a", "a", "Failed", ("False", "Error", "gone"));
        assert_eq!(
            data_volume_problem(&failed).as_deref(),
            Some("DataVolume datadisk-a is in phase Failed: gone")
        );
    }

    #[test]
    fn fail_fast_gives_up_on_the_vm_stuck_longest_after_the_grace_period() {
        let grace = Duration::from_secs(60);
        let mut t = ReadinessTracker::new(["a", "b", "c"], ReadyCondition::Running)
            .with_fail_fast(Some(grace));
        t.observe_vm(
            &vm(
                "a",
                "ErrImagePull",
                &[("Synchronized", "False", "not found")],
            ),
            at(10),
        );
        t.observe_vm(&vm("b", "ErrorUnschedulable", &[]), at(20));
        t.observe_vm(&vm("c", "Starting", &[]), at(0));
        assert_eq!(t.stuck_count(), 2);
        assert_eq!(t.fail_fast_due(), Some(at(70)));
        assert!(t.stuck_too_long(at(69)).is_none());
        // Pull errors alternate between ErrImagePull and ImagePullBackOff: still one spell.
        t.observe_vm(
            &vm(
                "a",
                "ImagePullBackOff",
                &[("Synchronized", "False", "back-off")],
            ),
            at(40),
        );
        assert_eq!(t.get("a").unwrap().stuck_since, Some(at(10)));
        assert_eq!(t.stuck_too_long(at(70)).unwrap().name, "a");
        // The image came back: a is no longer stuck, b's spell counts from its own start.
        t.observe_vm(&vm("a", "Starting", &[]), at(71));
        assert_eq!(t.fail_fast_due(), Some(at(80)));
        assert!(t.stuck_too_long(at(79)).is_none());
        assert_eq!(
            t.stuck_too_long(at(80)).unwrap().describe(),
            "ErrorUnschedulable"
        );
        // Without --fail-fast nobody is given up on.
        let mut patient = ReadinessTracker::new(["a"], ReadyCondition::Running);
        patient.observe_vm(&vm("a", "ErrImagePull", &[]), at(0));
        assert_eq!(patient.stuck_count(), 1);
        assert!(patient.stuck_too_long(at(1_000_000)).is_none());
    }

    #[test]
    fn a_ready_vm_is_never_stuck() {
        let mut t = ReadinessTracker::new(["a"], ReadyCondition::Running)
            .with_fail_fast(Some(Duration::from_secs(1)));
        t.observe_vm(&vm("a", "ErrImagePull", &[]), at(0));
        t.observe(&vmi("a", Some("Running"), &[]), at(1));
        assert_eq!(t.stuck_count(), 0);
        t.observe_vm(&vm("a", "CrashLoopBackOff", &[]), at(2));
        assert!(t.stuck_too_long(at(100)).is_none());
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
