//! `virtwork status --watch`: the sans-IO judge of a followed fleet.
//!
//! Owns: deciding, from successive reads of the runs ([`RunStatus`]), when following them is
//! over ([`Follow::observe`]): every VM ready, one failed, one stuck past the grace period,
//! or nothing to follow; and how long to wait before the next read ([`next_interval`]:
//! bounded backoff while nothing changes). Must not: read the cluster, sleep or read the
//! clock (the shell in `commands/status.rs` passes `now`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::k8s::status::{Readiness, RunStatus, VmStatus};

/// The first wait between two reads, and the one after every change.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest wait between two reads while nothing changes: a fleet that settles is noticed
/// within this, and a quiet one costs one listing of each kind per this.
pub const MAX_INTERVAL: Duration = Duration::from_secs(8);

/// The wait before the next read: back to [`MIN_INTERVAL`] after a change, else twice the
/// last, at most [`MAX_INTERVAL`].
pub fn next_interval(last: Duration, changed: bool) -> Duration {
    if changed {
        MIN_INTERVAL
    } else {
        (last * 2).clamp(MIN_INTERVAL, MAX_INTERVAL)
    }
}

/// Why following is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every VM of every run is ready.
    AllReady { vms: usize, runs: usize },
    /// A VM failed and will not be started again.
    Failed {
        namespace: String,
        vm: String,
        why: String,
    },
    /// A VM stayed in a stuck state for the grace period.
    Stuck {
        namespace: String,
        vm: String,
        why: String,
        grace: Duration,
    },
    /// There are no VMs to follow.
    Nothing,
}

/// What following has seen so far: since when each stuck VM has been stuck.
#[derive(Debug, Clone, Default)]
pub struct Follow {
    /// How long a VM may stay stuck before following ends (None: until the timeout).
    grace: Option<Duration>,
    stuck_since: BTreeMap<(String, String), jiff::Timestamp>,
}

impl Follow {
    /// A judge that gives a stuck VM `grace` (None: never ends on a stuck VM).
    pub fn new(grace: Option<Duration>) -> Self {
        Follow {
            grace,
            stuck_since: BTreeMap::new(),
        }
    }

    /// Takes one read of the runs made at `now`; says whether following is over. A failed VM
    /// ends it first (the first by run, namespace and name), then the VM stuck longest once
    /// its grace has passed, then every VM ready.
    pub fn observe(&mut self, runs: &[RunStatus], now: jiff::Timestamp) -> Option<Settled> {
        let vms = || runs.iter().flat_map(|r| r.vms.iter());
        let key = |vm: &VmStatus| (vm.namespace.clone(), vm.name.clone());
        // Forget VMs that are no longer stuck (or gone); date the newly stuck.
        let stuck_now: BTreeMap<_, _> = vms()
            .filter(|vm| vm.readiness == Readiness::Stuck)
            .map(|vm| (key(vm), vm))
            .collect();
        self.stuck_since.retain(|k, _| stuck_now.contains_key(k));
        for k in stuck_now.keys() {
            self.stuck_since.entry(k.clone()).or_insert(now);
        }
        if let Some(vm) = vms().find(|vm| vm.readiness == Readiness::Failed) {
            return Some(Settled::Failed {
                namespace: vm.namespace.clone(),
                vm: vm.name.clone(),
                why: vm.why(),
            });
        }
        if let Some(grace) = self.grace
            && let Some((k, since)) = self
                .stuck_since
                .iter()
                .min_by_key(|(k, since)| (**since, *k))
            && now.duration_since(*since).unsigned_abs() >= grace
        {
            let vm = stuck_now[k];
            return Some(Settled::Stuck {
                namespace: vm.namespace.clone(),
                vm: vm.name.clone(),
                why: vm.why(),
                grace,
            });
        }
        let total = vms().count();
        if total == 0 {
            return Some(Settled::Nothing);
        }
        vms()
            .all(|vm| vm.readiness == Readiness::Ready)
            .then_some(Settled::AllReady {
                vms: total,
                runs: runs.len(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str, readiness: Readiness, status: &str) -> VmStatus {
        VmStatus {
            namespace: "virtwork".into(),
            name: name.into(),
            workload: Some("cpu".into()),
            role: None,
            printable_status: Some(status.into()),
            vmi_phase: None,
            node: None,
            ready: None,
            created_at: None,
            readiness,
            reason: None,
        }
    }

    fn runs(vms: Vec<VmStatus>) -> Vec<RunStatus> {
        vec![RunStatus {
            run_id: Some("run".into()),
            vms,
        }]
    }

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    #[test]
    fn follows_until_every_vm_is_ready() {
        let mut follow = Follow::new(Some(Duration::from_secs(60)));
        let starting = runs(vec![
            vm("a", Readiness::Ready, "Running"),
            vm("b", Readiness::Pending, "Provisioning"),
        ]);
        assert_eq!(follow.observe(&starting, at(0)), None);
        let ready = runs(vec![
            vm("a", Readiness::Ready, "Running"),
            vm("b", Readiness::Ready, "Running"),
        ]);
        assert_eq!(
            follow.observe(&ready, at(5)),
            Some(Settled::AllReady { vms: 2, runs: 1 })
        );
        assert_eq!(follow.observe(&[], at(6)), Some(Settled::Nothing));
    }

    #[test]
    fn a_failed_vm_ends_at_once_and_a_stuck_one_after_its_grace() {
        let mut follow = Follow::new(Some(Duration::from_secs(60)));
        let stuck = runs(vec![
            vm("a", Readiness::Ready, "Running"),
            vm("b", Readiness::Stuck, "ErrImagePull"),
        ]);
        assert_eq!(follow.observe(&stuck, at(0)), None);
        assert_eq!(follow.observe(&stuck, at(59)), None);
        // Cleared and stuck again: the grace starts over.
        let cleared = runs(vec![vm("b", Readiness::Pending, "Starting")]);
        assert_eq!(follow.observe(&cleared, at(60)), None);
        assert_eq!(follow.observe(&stuck, at(61)), None);
        assert_eq!(
            follow.observe(&stuck, at(121)),
            Some(Settled::Stuck {
                namespace: "virtwork".into(),
                vm: "b".into(),
                why: "ErrImagePull".into(),
                grace: Duration::from_secs(60),
            })
        );
        let failed = runs(vec![
            vm("b", Readiness::Stuck, "ErrImagePull"),
            vm("c", Readiness::Failed, "Failed"),
        ]);
        let mut follow = Follow::new(None);
        assert!(matches!(
            follow.observe(&failed, at(0)),
            Some(Settled::Failed { vm, .. }) if vm == "c"
        ));
        // Without a grace a stuck VM never ends following.
        let mut follow = Follow::new(None);
        assert_eq!(follow.observe(&stuck, at(0)), None);
        assert_eq!(follow.observe(&stuck, at(100_000)), None);
    }

    #[test]
    fn reads_back_off_while_nothing_changes() {
        assert_eq!(next_interval(MIN_INTERVAL, false), Duration::from_secs(2));
        assert_eq!(next_interval(Duration::from_secs(6), false), MAX_INTERVAL);
        assert_eq!(next_interval(MAX_INTERVAL, false), MAX_INTERVAL);
        assert_eq!(next_interval(MAX_INTERVAL, true), MIN_INTERVAL);
    }
}
