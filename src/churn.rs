//! The sans-IO core of `virtwork churn`: from a run's VMs, a rate, a share, weighted actions, a
//! duration and a seed, the timed sequence of lifecycle actions ([`Schedule`]); the
//! [`Tracker`] of which VM is busy with what, so no VM gets two actions at once, a migration
//! only goes to a VM that can migrate, and every VM churn stopped is known (its start is owed,
//! on interrupt too); and the tally the reports print ([`ChurnTally`]).
//!
//! Slots are evenly spaced (`--rate` 30/m is one action every 2 s, the first at once); the
//! share of VMs is a seeded shuffle of the run's running VMs, and each slot's action a seeded
//! weighted draw, so a seed reproduces the schedule. VMs are taken round-robin in that
//! shuffled order, skipping busy ones: a dry run shows the order assuming every action ends
//! before its VM's next turn.
//!
//! Must not: do I/O, sleep or read the clock (the shell in `k8s/churn.rs` does).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::model::{ChurnAction, ChurnActions, ChurnRate, Share};

/// What churn is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnSpec {
    pub rate: ChurnRate,
    pub duration: Duration,
    pub share: Share,
    pub actions: ChurnActions,
    pub seed: u64,
}

/// One VM churn may act on: running when churn started.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChurnVm {
    pub namespace: String,
    pub name: String,
    /// The VM's `virtwork/run-id` label (labels the migrations churn creates for it).
    pub run_id: String,
    /// The VMI's `LiveMigratable` condition is not False.
    pub migratable: bool,
}

impl ChurnVm {
    /// `namespace/name`.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// One planned action: when (from churn's start) and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub index: u64,
    pub at: Duration,
    pub action: ChurnAction,
}

/// The timed sequence of actions and the VMs they go to. Slots are generated lazily, so a
/// week at 100/s costs no memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Indices into the VM list: the selected share, in round-robin order.
    pub selected: Vec<usize>,
    interval: Duration,
    count: u64,
    actions: Vec<(ChurnAction, u32)>,
    seed: u64,
}

impl Schedule {
    /// The schedule for `vms` (sorted by namespace and name, so a seed means the same thing
    /// on every call) under `spec`.
    pub fn new(vms: &[ChurnVm], spec: &ChurnSpec) -> Schedule {
        let mut rng = fastrand::Rng::with_seed(spec.seed);
        let mut selected: Vec<usize> = (0..vms.len()).collect();
        rng.shuffle(&mut selected);
        selected.truncate(spec.share.of(vms.len()));
        let count = if selected.is_empty() {
            0
        } else {
            spec.rate.actions_in(spec.duration)
        };
        Schedule {
            selected,
            interval: spec.rate.interval(),
            count,
            actions: spec.actions.weighted().to_vec(),
            seed: spec.seed,
        }
    }

    /// Number of slots.
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The slots in time order.
    pub fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        // A stream of its own, so the actions do not depend on how many VMs were shuffled.
        let mut rng = fastrand::Rng::with_seed(self.seed ^ 0x9e37_79b9_7f4a_7c15);
        let total: u32 = self.actions.iter().map(|(_, w)| w).sum();
        (0..self.count).map(move |index| {
            let mut draw = rng.u32(0..total.max(1));
            let action = self
                .actions
                .iter()
                .find(|(_, weight)| {
                    let hit = draw < *weight;
                    draw = draw.saturating_sub(*weight);
                    hit
                })
                .map_or(ChurnAction::Restart, |(a, _)| *a);
            Slot {
                index,
                at: self
                    .interval
                    .saturating_mul(u32::try_from(index).unwrap_or(u32::MAX)),
                action,
            }
        })
    }

    /// The dry-run view: each slot with the VM it would go to when every action ends before
    /// that VM's next turn (`None`: no VM can take it, e.g. a migration when none can migrate).
    pub fn preview<'a>(
        &'a self,
        vms: &'a [ChurnVm],
    ) -> impl Iterator<Item = (Slot, Option<usize>)> + 'a {
        let mut tracker = Tracker::new(self, vms);
        self.slots().map(move |slot| {
            let vm = tracker.assign(slot.action);
            if let Some(vm) = vm {
                tracker.finish(vm, false);
            }
            (slot, vm)
        })
    }
}

/// Which selected VM is busy with which action, and which VMs churn left stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracker {
    order: Vec<usize>,
    migratable: Vec<bool>,
    busy: BTreeMap<usize, ChurnAction>,
    /// VMs a stop-start may have left stopped (its start did not run through): owed a start
    /// at the end, and given no other action meanwhile.
    owed: BTreeSet<usize>,
    cursor: usize,
}

impl Tracker {
    pub fn new(schedule: &Schedule, vms: &[ChurnVm]) -> Tracker {
        Tracker {
            order: schedule.selected.clone(),
            migratable: vms.iter().map(|vm| vm.migratable).collect(),
            busy: BTreeMap::new(),
            owed: BTreeSet::new(),
            cursor: 0,
        }
    }

    /// The next idle selected VM that can take `action` (round-robin), now busy with it;
    /// `None` when every candidate is busy or none can take it.
    pub fn assign(&mut self, action: ChurnAction) -> Option<usize> {
        let n = self.order.len();
        for step in 0..n {
            let position = (self.cursor + step) % n;
            let vm = self.order[position];
            let can = action != ChurnAction::Migrate || self.migratable[vm];
            if can && !self.busy.contains_key(&vm) && !self.owed.contains(&vm) {
                self.cursor = (position + 1) % n;
                self.busy.insert(vm, action);
                return Some(vm);
            }
        }
        None
    }

    /// `vm`'s action is over (done, failed or cut short). `left_stopped`: a stop may have
    /// been applied and its start did not run through, so the VM is owed a start and takes
    /// no other action.
    pub fn finish(&mut self, vm: usize, left_stopped: bool) {
        self.busy.remove(&vm);
        if left_stopped {
            self.owed.insert(vm);
        }
    }

    /// VMs with an action under way, and which.
    pub fn busy(&self) -> impl Iterator<Item = (usize, ChurnAction)> + '_ {
        self.busy.iter().map(|(vm, action)| (*vm, *action))
    }

    /// VMs churn may have left stopped: those a finished stop-start left so, and those in the
    /// middle of one. Each is owed a start; sorted.
    pub fn owed_starts(&self) -> Vec<usize> {
        let under_way = self
            .busy()
            .filter(|(_, action)| *action == ChurnAction::StopStart)
            .map(|(vm, _)| vm);
        let all: BTreeSet<usize> = self.owed.iter().copied().chain(under_way).collect();
        all.into_iter().collect()
    }
}

/// How one action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionResult {
    Succeeded,
    /// The error, one line.
    Failed(String),
    /// Cut short by an interrupt: neither success nor failure (stopped VMs are restored).
    Abandoned,
}

/// Per-action counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ActionCounts {
    /// Actions begun at their slot (their requests then wait for the client's rate limit).
    pub started: u64,
    pub succeeded: u64,
    pub failed: u64,
}

/// One failed action, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChurnFailure {
    /// `namespace/name`.
    pub vm: String,
    pub action: ChurnAction,
    pub error: String,
}

/// What churn did, as the reports show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChurnTally {
    pub counts: BTreeMap<ChurnAction, ActionCounts>,
    /// Slots no VM could take (all busy, or none can migrate).
    pub skipped: u64,
    /// Slots never reached because of an interrupt.
    pub not_started: u64,
    pub failures: Vec<ChurnFailure>,
    /// VMs stopped by churn and started again after an interrupt or at the end.
    pub restored: Vec<String>,
    /// VMs churn stopped and could not start again: (VM, error).
    pub not_restored: Vec<(String, String)>,
}

impl ChurnTally {
    pub fn started(&mut self, action: ChurnAction) {
        self.counts.entry(action).or_default().started += 1;
    }

    /// Records how `action` on `vm` ended.
    pub fn ended(&mut self, vm: &ChurnVm, action: ChurnAction, result: &ActionResult) {
        let counts = self.counts.entry(action).or_default();
        match result {
            ActionResult::Succeeded => counts.succeeded += 1,
            ActionResult::Failed(error) => {
                counts.failed += 1;
                self.failures.push(ChurnFailure {
                    vm: vm.display_name(),
                    action,
                    error: error.clone(),
                });
            }
            ActionResult::Abandoned => {}
        }
    }

    /// The counts of `action` (zero when never taken).
    pub fn of(&self, action: ChurnAction) -> ActionCounts {
        self.counts.get(&action).copied().unwrap_or_default()
    }

    /// Actions started over all kinds.
    pub fn total_started(&self) -> u64 {
        self.counts.values().map(|c| c.started).sum()
    }

    /// Whether anything failed (exit 1).
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty() || !self.not_restored.is_empty()
    }
}

/// Where a VirtualMachineInstanceMigration is, from its `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationProgress {
    InProgress,
    Succeeded,
    Failed,
}

impl MigrationProgress {
    pub fn of(phase: Option<&str>) -> Self {
        match phase {
            Some("Succeeded") => MigrationProgress::Succeeded,
            Some("Failed") => MigrationProgress::Failed,
            _ => MigrationProgress::InProgress,
        }
    }
}

/// Whether a VM's VMI, seen as (`uid`, `phase`), is a running instance other than
/// `replaced` (the one a restart or stop removed).
pub fn running_again(uid: Option<&str>, phase: Option<&str>, replaced: Option<&str>) -> bool {
    phase == Some("Running") && uid.is_some() && uid != replaced
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vms(n: usize, migratable: impl Fn(usize) -> bool) -> Vec<ChurnVm> {
        (0..n)
            .map(|i| ChurnVm {
                namespace: "virtwork".into(),
                name: format!("vm-{i:03}"),
                run_id: "run".into(),
                migratable: migratable(i),
            })
            .collect()
    }

    fn spec(rate: &str, secs: u64, share: u8, actions: &str, seed: u64) -> ChurnSpec {
        ChurnSpec {
            rate: rate.parse().unwrap(),
            duration: Duration::from_secs(secs),
            share: Share::new(share).unwrap(),
            actions: actions.parse().unwrap(),
            seed,
        }
    }

    #[test]
    fn slots_are_evenly_spaced_at_the_rate_for_the_duration() {
        let fleet = vms(10, |_| true);
        let schedule = Schedule::new(&fleet, &spec("120/m", 5, 100, "restart", 1));
        let times: Vec<u128> = schedule.slots().map(|s| s.at.as_millis()).collect();
        assert_eq!(times, (0..10).map(|i| i * 500).collect::<Vec<_>>());
        // A duration that is not a whole number of intervals still gets the slot it began.
        let odd = Schedule::new(&fleet, &spec("1/s", 3, 100, "restart", 1));
        assert_eq!(odd.len(), 3);
        let odd = Schedule::new(&fleet, &spec("2/m", 31, 100, "restart", 1));
        assert_eq!(odd.len(), 2);
    }

    #[test]
    fn the_share_picks_that_many_vms_and_only_they_are_touched() {
        let fleet = vms(10, |_| true);
        let schedule = Schedule::new(&fleet, &spec("10/s", 10, 30, "restart,stop-start", 7));
        assert_eq!(schedule.selected.len(), 3);
        let touched: std::collections::BTreeSet<usize> =
            schedule.preview(&fleet).filter_map(|(_, vm)| vm).collect();
        assert_eq!(
            touched,
            schedule.selected.iter().copied().collect(),
            "round-robin reaches every selected VM and no other"
        );
    }

    #[test]
    fn a_seed_reproduces_the_schedule_and_another_seed_differs() {
        let fleet = vms(50, |_| true);
        let run = |seed| {
            let schedule = Schedule::new(&fleet, &spec("60/m", 60, 20, "restart,migrate=3", seed));
            schedule
                .preview(&fleet)
                .map(|(slot, vm)| (slot.action, vm))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn weights_shape_the_mix_of_actions() {
        let fleet = vms(4, |_| true);
        let schedule = Schedule::new(&fleet, &spec("100/s", 60, 100, "restart=3,migrate", 5));
        let restarts = schedule
            .slots()
            .filter(|s| s.action == ChurnAction::Restart)
            .count();
        let share = restarts as f64 / schedule.len() as f64;
        assert!((0.72..0.78).contains(&share), "restart share {share}");
        assert!(schedule.slots().all(|s| s.action != ChurnAction::StopStart));
    }

    #[test]
    fn no_vm_gets_two_actions_at_once_and_migrations_need_a_migratable_vm() {
        let fleet = vms(3, |i| i != 1);
        let schedule = Schedule::new(&fleet, &spec("1/s", 10, 100, "restart", 3));
        let mut tracker = Tracker::new(&schedule, &fleet);
        let a = tracker.assign(ChurnAction::StopStart).unwrap();
        let b = tracker.assign(ChurnAction::Restart).unwrap();
        let c = tracker.assign(ChurnAction::Restart).unwrap();
        assert_eq!(
            [a, b, c]
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        assert_eq!(tracker.assign(ChurnAction::Restart), None, "all busy");
        tracker.finish(b, false);
        tracker.finish(c, false);
        let idle_migratable = [b, c].into_iter().filter(|vm| *vm != 1).collect::<Vec<_>>();
        let migrated = tracker.assign(ChurnAction::Migrate).unwrap();
        assert!(idle_migratable.contains(&migrated));
        assert_ne!(migrated, 1, "vm-001 cannot migrate");
        assert_eq!(tracker.owed_starts(), vec![a], "a stop-start under way");
        tracker.finish(a, false);
        assert!(tracker.owed_starts().is_empty());
    }

    #[test]
    fn a_vm_left_stopped_is_owed_its_start_and_gets_nothing_else() {
        let fleet = vms(2, |_| true);
        let schedule = Schedule::new(&fleet, &spec("1/s", 10, 100, "stop-start", 3));
        let mut tracker = Tracker::new(&schedule, &fleet);
        let stopped = tracker.assign(ChurnAction::StopStart).unwrap();
        tracker.finish(stopped, true);
        assert_eq!(tracker.owed_starts(), vec![stopped]);
        let other = tracker.assign(ChurnAction::Restart).unwrap();
        assert_ne!(other, stopped);
        tracker.finish(other, false);
        for _ in 0..4 {
            let vm = tracker.assign(ChurnAction::Restart);
            assert_eq!(vm, Some(other), "the stopped VM is never chosen");
            tracker.finish(other, false);
        }
    }

    #[test]
    fn a_fleet_without_running_vms_has_no_slots() {
        let schedule = Schedule::new(&[], &spec("10/s", 10, 100, "restart", 1));
        assert!(schedule.is_empty());
        assert_eq!(schedule.slots().count(), 0);
    }

    #[test]
    fn the_tally_counts_per_action_and_keeps_failures() {
        let vm = &vms(1, |_| true)[0];
        let mut tally = ChurnTally::default();
        tally.started(ChurnAction::Migrate);
        tally.ended(
            vm,
            ChurnAction::Migrate,
            &ActionResult::Failed("boom".into()),
        );
        tally.started(ChurnAction::Restart);
        tally.ended(vm, ChurnAction::Restart, &ActionResult::Succeeded);
        tally.started(ChurnAction::Restart);
        tally.ended(vm, ChurnAction::Restart, &ActionResult::Abandoned);
        assert_eq!(
            tally.of(ChurnAction::Restart),
            ActionCounts {
                started: 2,
                succeeded: 1,
                failed: 0
            }
        );
        assert_eq!(tally.of(ChurnAction::StopStart), ActionCounts::default());
        assert_eq!(tally.failures[0].vm, "virtwork/vm-000");
        assert!(tally.has_failures());
        assert_eq!(tally.total_started(), 3);
    }

    #[test]
    fn progress_reads_phases_and_instances() {
        assert_eq!(
            MigrationProgress::of(Some("Scheduling")),
            MigrationProgress::InProgress
        );
        assert_eq!(
            MigrationProgress::of(Some("Succeeded")),
            MigrationProgress::Succeeded
        );
        assert_eq!(
            MigrationProgress::of(Some("Failed")),
            MigrationProgress::Failed
        );
        assert!(running_again(Some("new"), Some("Running"), Some("old")));
        assert!(!running_again(Some("old"), Some("Running"), Some("old")));
        assert!(!running_again(Some("new"), Some("Scheduling"), Some("old")));
        assert!(!running_again(None, None, None));
    }
}
