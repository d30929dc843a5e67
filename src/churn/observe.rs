//! What one read of a VM and its VMI means to churn, decided without I/O: whether the VM is
//! still the object churn listed ([`identity`]), whether it can take an action now
//! ([`ready_for`]), whether a request whose answer was lost took effect ([`took_effect`]),
//! and whether an action under way is over ([`vmi_running_again`], [`vmi_gone`],
//! [`vmi_running`]).
//!
//! A lost answer (a dropped connection, a gateway's 504, virt-api's 500 "stop/start already
//! underway") says nothing about whether the change was made; resending a restart that went
//! through restarts the VM twice. So churn never resends: it reads the VM and VMI, and a
//! change that took effect leaves a mark KubeVirt keeps until it is acted on (virt-api's
//! restart puts `status.stateChangeRequests` on the VM, which the VM controller clears only
//! once the old VMI is gone and the new one created; stop and start patch
//! `spec.runStrategy`).
//!
//! Owns: those judgements over the plain views [`VmView`] and [`VmiView`]. Must not: read the
//! cluster, sleep or read the clock (the shell in `k8s/churn.rs` does).

use super::ChurnVm;

/// What churn reads of a VirtualMachine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmView {
    pub uid: String,
    /// Carries `app.kubernetes.io/managed-by=virtwork`.
    pub managed: bool,
    /// Its `virtwork/run-id` label ("" when none).
    pub run_id: String,
    /// `spec.runStrategy` (`Always`, `Halted`, ...), when set.
    pub run_strategy: Option<String>,
    /// `status.stateChangeRequests` is not empty: a restart (or stop) virt-api accepted and
    /// the VM controller has not finished.
    pub pending_requests: bool,
}

/// What churn reads of a VirtualMachineInstance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmiView {
    pub uid: String,
    /// `status.phase` ("" when none yet).
    pub phase: String,
    /// Marked for deletion: shutting down.
    pub terminating: bool,
}

/// One read of a VM and its VMI (`None`: not found).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    pub vm: Option<VmView>,
    pub vmi: Option<VmiView>,
}

/// Whether the VM read now is the one churn listed when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    Same,
    /// Another object under that name (another uid), or the same one relabelled to another
    /// run or away from virtwork.
    Replaced,
    Deleted,
}

/// The listed VM `listed` against what a read found.
pub fn identity(listed: &ChurnVm, vm: Option<&VmView>) -> Identity {
    match vm {
        None => Identity::Deleted,
        Some(vm) if vm.uid == listed.uid && vm.managed && vm.run_id == listed.run_id => {
            Identity::Same
        }
        Some(_) => Identity::Replaced,
    }
}

/// Why a slot's VM took no action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipCause {
    /// Every selected VM that could take it had an action under way.
    AllBusy,
    /// A migration, and no idle selected VM is LiveMigratable.
    NoMigratableVm,
    /// The only idle VMs are owed a start (a stop-start left them stopped).
    OwedStart,
    /// The VM under that name is no longer the one churn listed.
    VmReplaced,
    VmDeleted,
    /// Not running now, or somebody else is stopping or restarting it.
    NotRunning,
}

impl SkipCause {
    pub const ALL: [SkipCause; 6] = [
        SkipCause::AllBusy,
        SkipCause::NoMigratableVm,
        SkipCause::OwedStart,
        SkipCause::VmReplaced,
        SkipCause::VmDeleted,
        SkipCause::NotRunning,
    ];

    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            SkipCause::AllBusy => "all_busy",
            SkipCause::NoMigratableVm => "no_migratable_vm",
            SkipCause::OwedStart => "owed_a_start",
            SkipCause::VmReplaced => "vm_replaced",
            SkipCause::VmDeleted => "vm_deleted",
            SkipCause::NotRunning => "not_running",
        }
    }

    /// The words the reports use.
    pub fn describe(self) -> &'static str {
        match self {
            SkipCause::AllBusy => "every selected VM busy",
            SkipCause::NoMigratableVm => "no LiveMigratable VM",
            SkipCause::OwedStart => "owed a start",
            SkipCause::VmReplaced => "VM replaced since churn started",
            SkipCause::VmDeleted => "VM deleted",
            SkipCause::NotRunning => "VM not running or stopping elsewhere",
        }
    }

    /// Whether the VM is out of churn for good (never given another action, never started).
    pub fn retires(self) -> bool {
        matches!(self, SkipCause::VmReplaced | SkipCause::VmDeleted)
    }
}

/// Whether the listed VM can take an action now, from a fresh read.
pub fn ready_for(listed: &ChurnVm, now: &Observed) -> Result<(), SkipCause> {
    match identity(listed, now.vm.as_ref()) {
        Identity::Deleted => return Err(SkipCause::VmDeleted),
        Identity::Replaced => return Err(SkipCause::VmReplaced),
        Identity::Same => {}
    }
    let vm = now.vm.as_ref().expect("identity Same has a VM");
    let halted = vm.run_strategy.as_deref() == Some("Halted");
    if halted || vm.pending_requests || !vmi_running(now) {
        return Err(SkipCause::NotRunning);
    }
    Ok(())
}

/// Why an action under way ended before it was over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutShort {
    VmDeleted,
    VmReplaced,
}

impl CutShort {
    pub fn describe(self) -> &'static str {
        match self {
            CutShort::VmDeleted => "VM deleted",
            CutShort::VmReplaced => "VM replaced since churn started",
        }
    }
}

/// During an action: `Some` when the VM is gone or no longer the listed one.
pub fn cut_short(listed: &ChurnVm, now: &Observed) -> Option<CutShort> {
    match identity(listed, now.vm.as_ref()) {
        Identity::Same => None,
        Identity::Deleted => Some(CutShort::VmDeleted),
        Identity::Replaced => Some(CutShort::VmReplaced),
    }
}

/// A lifecycle request churn sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleRequest {
    /// `restart` of the VMI with this uid.
    Restart {
        replaced: Option<String>,
    },
    Stop,
    Start,
}

impl LifecycleRequest {
    /// The subresource.
    pub fn verb(&self) -> &'static str {
        match self {
            LifecycleRequest::Restart { .. } => "restart",
            LifecycleRequest::Stop => "stop",
            LifecycleRequest::Start => "start",
        }
    }
}

/// Whether `request` took effect, judged from a read after its answer was lost: a restart
/// leaves pending state change requests, then a VMI shutting down, then none or a new one;
/// a stop and a start change `spec.runStrategy`.
pub fn took_effect(request: &LifecycleRequest, now: &Observed) -> bool {
    let Some(vm) = &now.vm else {
        return false;
    };
    match request {
        LifecycleRequest::Restart { replaced } => {
            vm.pending_requests
                || match &now.vmi {
                    None => true,
                    Some(vmi) => vmi.terminating || Some(&vmi.uid) != replaced.as_ref(),
                }
        }
        LifecycleRequest::Stop => vm.run_strategy.as_deref() == Some("Halted"),
        LifecycleRequest::Start => vm
            .run_strategy
            .as_deref()
            .is_some_and(|strategy| strategy != "Halted"),
    }
}

/// A running VMI other than `replaced` (the one a restart or stop removed).
pub fn vmi_running_again(now: &Observed, replaced: Option<&str>) -> bool {
    now.vmi
        .as_ref()
        .is_some_and(|vmi| Some(vmi.uid.as_str()) != replaced && running(vmi))
}

/// The VMI is gone.
pub fn vmi_gone(now: &Observed) -> bool {
    now.vmi.is_none()
}

/// A VMI runs and is not shutting down.
pub fn vmi_running(now: &Observed) -> bool {
    now.vmi.as_ref().is_some_and(running)
}

fn running(vmi: &VmiView) -> bool {
    vmi.phase == "Running" && !vmi.terminating
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> ChurnVm {
        ChurnVm {
            namespace: "ns".into(),
            name: "vm".into(),
            uid: "u1".into(),
            run_id: "run".into(),
            migratable: true,
        }
    }

    fn vm(uid: &str, run: &str, strategy: &str) -> VmView {
        VmView {
            uid: uid.into(),
            managed: true,
            run_id: run.into(),
            run_strategy: Some(strategy.into()),
            pending_requests: false,
        }
    }

    fn vmi(uid: &str, phase: &str) -> VmiView {
        VmiView {
            uid: uid.into(),
            phase: phase.into(),
            terminating: false,
        }
    }

    #[test]
    fn only_the_listed_object_with_its_labels_is_the_same_vm() {
        let l = listed();
        assert_eq!(
            identity(&l, Some(&vm("u1", "run", "Always"))),
            Identity::Same
        );
        assert_eq!(identity(&l, None), Identity::Deleted);
        // Another VM took the name.
        assert_eq!(
            identity(&l, Some(&vm("u2", "run", "Always"))),
            Identity::Replaced
        );
        // Relabelled to another run, or away from virtwork.
        assert_eq!(
            identity(&l, Some(&vm("u1", "other", "Always"))),
            Identity::Replaced
        );
        let mut unmanaged = vm("u1", "run", "Always");
        unmanaged.managed = false;
        assert_eq!(identity(&l, Some(&unmanaged)), Identity::Replaced);
    }

    #[test]
    fn a_vm_takes_an_action_only_when_it_is_the_same_and_runs_undisturbed() {
        let l = listed();
        let ok = Observed {
            vm: Some(vm("u1", "run", "Always")),
            vmi: Some(vmi("i1", "Running")),
        };
        assert_eq!(ready_for(&l, &ok), Ok(()));
        let mut replaced = ok.clone();
        replaced.vm.as_mut().unwrap().uid = "u2".into();
        assert_eq!(ready_for(&l, &replaced), Err(SkipCause::VmReplaced));
        assert_eq!(
            ready_for(&l, &Observed::default()),
            Err(SkipCause::VmDeleted)
        );
        let mut pending = ok.clone();
        pending.vm.as_mut().unwrap().pending_requests = true;
        assert_eq!(ready_for(&l, &pending), Err(SkipCause::NotRunning));
        let mut stopping = ok.clone();
        stopping.vmi.as_mut().unwrap().terminating = true;
        assert_eq!(ready_for(&l, &stopping), Err(SkipCause::NotRunning));
        assert!(SkipCause::VmReplaced.retires() && !SkipCause::NotRunning.retires());
    }

    #[test]
    fn a_lost_restart_is_done_when_the_vm_shows_its_requests_or_a_new_instance() {
        let restart = LifecycleRequest::Restart {
            replaced: Some("i1".into()),
        };
        let untouched = Observed {
            vm: Some(vm("u1", "run", "Always")),
            vmi: Some(vmi("i1", "Running")),
        };
        assert!(!took_effect(&restart, &untouched));
        let mut pending = untouched.clone();
        pending.vm.as_mut().unwrap().pending_requests = true;
        assert!(took_effect(&restart, &pending));
        let mut shutting = untouched.clone();
        shutting.vmi.as_mut().unwrap().terminating = true;
        assert!(took_effect(&restart, &shutting));
        let mut gone = untouched.clone();
        gone.vmi = None;
        assert!(took_effect(&restart, &gone));
        let mut new = untouched.clone();
        new.vmi = Some(vmi("i2", "Scheduling"));
        assert!(took_effect(&restart, &new));
        assert!(!took_effect(&restart, &Observed::default()));
    }

    #[test]
    fn a_lost_stop_or_start_is_read_from_the_run_strategy() {
        let halted = Observed {
            vm: Some(vm("u1", "run", "Halted")),
            vmi: Some(vmi("i1", "Running")),
        };
        let always = Observed {
            vm: Some(vm("u1", "run", "Always")),
            vmi: None,
        };
        assert!(took_effect(&LifecycleRequest::Stop, &halted));
        assert!(!took_effect(&LifecycleRequest::Stop, &always));
        assert!(took_effect(&LifecycleRequest::Start, &always));
        assert!(!took_effect(&LifecycleRequest::Start, &halted));
    }

    #[test]
    fn over_means_a_new_running_instance_or_none() {
        let mut now = Observed {
            vm: Some(vm("u1", "run", "Always")),
            vmi: Some(vmi("i1", "Running")),
        };
        assert!(!vmi_running_again(&now, Some("i1")));
        assert!(vmi_running(&now));
        now.vmi = Some(vmi("i2", "Running"));
        assert!(vmi_running_again(&now, Some("i1")));
        now.vmi.as_mut().unwrap().terminating = true;
        assert!(!vmi_running_again(&now, Some("i1")));
        now.vmi = None;
        assert!(vmi_gone(&now));
        assert_eq!(cut_short(&listed(), &now), None);
        now.vm = None;
        assert_eq!(cut_short(&listed(), &now), Some(CutShort::VmDeleted));
    }
}
