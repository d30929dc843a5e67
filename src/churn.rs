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
//! A schedule is bounded ([`MAX_CHURN_ACTIONS`], checked when the flags are resolved) and
//! its slot times are exact at any index. What a read of a VM means is [`observe`]; the
//! latencies are [`latency`]; a run of identical failures that should stop churn is
//! [`FailureStreak`].
//!
//! Must not: do I/O, sleep or read the clock (the shell in `k8s/churn.rs` does).

pub mod latency;
pub mod observe;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::model::{ChurnAction, ChurnActions, ChurnRate, Share};

use self::latency::Latencies;
use self::observe::{CutShort, SkipCause};

/// Most actions one churn may plan: a week at 100/min is about a million. Beyond it a
/// schedule is a mistake (100000/s for a week is 60 billion), refused before anything runs.
pub const MAX_CHURN_ACTIONS: u64 = 1_000_000;

/// Consecutive identical failures that stop a churn unless told otherwise.
pub const DEFAULT_MAX_FAILURE_STREAK: u32 = 5;

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
    /// The VM's uid when churn listed it: an object under that name with another uid is
    /// somebody else's.
    pub uid: String,
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
                at: nanos(self.interval.as_nanos().saturating_mul(u128::from(index))),
                action,
            }
        })
    }

    /// When the last slot starts (zero without slots).
    pub fn last_at(&self) -> Duration {
        nanos(
            self.interval
                .as_nanos()
                .saturating_mul(u128::from(self.count.saturating_sub(1))),
        )
    }

    /// The dry-run view: each slot with the VM it would go to when every action ends before
    /// that VM's next turn (`None`: no VM can take it, e.g. a migration when none can migrate).
    pub fn preview<'a>(
        &'a self,
        vms: &'a [ChurnVm],
    ) -> impl Iterator<Item = (Slot, Option<usize>)> + 'a {
        let mut tracker = Tracker::new(self, vms);
        self.slots().map(move |slot| {
            let vm = tracker.assign(slot.action).ok();
            if let Some(vm) = vm {
                tracker.finish(vm, false);
            }
            (slot, vm)
        })
    }
}

/// A duration of `n` nanoseconds, saturating far past any schedule's end.
fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

/// Whether `rate` for `duration` stays within [`MAX_CHURN_ACTIONS`]; the error says how
/// many actions that is.
pub fn check_bounds(rate: ChurnRate, duration: Duration) -> Result<u64, u64> {
    let actions = rate.actions_in(duration);
    if actions > MAX_CHURN_ACTIONS {
        Err(actions)
    } else {
        Ok(actions)
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
    /// VMs deleted or replaced since churn listed them: never given anything again.
    retired: BTreeSet<usize>,
    cursor: usize,
}

impl Tracker {
    pub fn new(schedule: &Schedule, vms: &[ChurnVm]) -> Tracker {
        Tracker {
            order: schedule.selected.clone(),
            migratable: vms.iter().map(|vm| vm.migratable).collect(),
            busy: BTreeMap::new(),
            owed: BTreeSet::new(),
            retired: BTreeSet::new(),
            cursor: 0,
        }
    }

    /// The next idle selected VM that can take `action` (round-robin), now busy with it; or
    /// why none can: every candidate busy, none LiveMigratable (for a migration), or the idle
    /// ones owed a start.
    pub fn assign(&mut self, action: ChurnAction) -> Result<usize, SkipCause> {
        let n = self.order.len();
        let (mut any_migratable, mut any_owed) = (false, false);
        for step in 0..n {
            let position = (self.cursor + step) % n;
            let vm = self.order[position];
            if self.retired.contains(&vm) {
                continue;
            }
            let can = action != ChurnAction::Migrate || self.migratable[vm];
            any_migratable |= can;
            if !can || self.busy.contains_key(&vm) {
                continue;
            }
            if self.owed.contains(&vm) {
                any_owed = true;
                continue;
            }
            self.cursor = (position + 1) % n;
            self.busy.insert(vm, action);
            return Ok(vm);
        }
        Err(if !any_migratable && action == ChurnAction::Migrate {
            SkipCause::NoMigratableVm
        } else if any_owed {
            SkipCause::OwedStart
        } else {
            SkipCause::AllBusy
        })
    }

    /// `vm` is gone or somebody else's: it gets no action and no start from now on.
    pub fn retire(&mut self, vm: usize) {
        self.busy.remove(&vm);
        self.owed.remove(&vm);
        self.retired.insert(vm);
    }

    /// VMs with an action under way.
    pub fn busy_count(&self) -> usize {
        self.busy.len()
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
        let all: BTreeSet<usize> = self
            .owed
            .iter()
            .copied()
            .chain(under_way)
            .filter(|vm| !self.retired.contains(vm))
            .collect();
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
    /// Never sent: a fresh read of the VM said it could not take it.
    Skipped(SkipCause),
    /// The VM was deleted or replaced while its action was under way: the action ended at
    /// once, neither success nor failure.
    CutShort(CutShort),
}

/// Per-action counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ActionCounts {
    /// Actions whose first request was sent (skips not counted).
    pub started: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Ended because the VM was deleted or replaced meanwhile.
    pub cut_short: u64,
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
    /// Slots that took no action, by cause.
    pub skips: BTreeMap<SkipCause, u64>,
    /// Slots never reached because of an interrupt or a stop.
    pub not_started: u64,
    pub failures: Vec<ChurnFailure>,
    /// Actions ended because their VM was deleted or replaced: (VM, action, why).
    pub cut_short: Vec<(String, ChurnAction, &'static str)>,
    /// VMs stopped by churn and started again after an interrupt or at the end.
    pub restored: Vec<String>,
    /// VMs churn stopped and could not start again: (VM, error).
    pub not_restored: Vec<(String, String)>,
    /// VMs owed a start that churn left alone because they are no longer the VM it stopped
    /// (deleted, replaced or relabelled): (VM, why).
    pub restore_skipped: Vec<(String, &'static str)>,
    /// Why churn stopped before its schedule ended (a streak of identical failures).
    pub stopped_early: Option<String>,
    pub latencies: Latencies,
}

impl ChurnTally {
    /// Records how `action` on `vm` ended.
    pub fn ended(&mut self, vm: &ChurnVm, action: ChurnAction, result: &ActionResult) {
        if let ActionResult::Skipped(cause) = result {
            *self.skips.entry(*cause).or_default() += 1;
            return;
        }
        let counts = self.counts.entry(action).or_default();
        counts.started += 1;
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
            ActionResult::CutShort(why) => {
                counts.cut_short += 1;
                self.cut_short
                    .push((vm.display_name(), action, why.describe()));
            }
            ActionResult::Abandoned | ActionResult::Skipped(_) => {}
        }
    }

    /// A slot no VM could take.
    pub fn skipped(&mut self, cause: SkipCause) {
        *self.skips.entry(cause).or_default() += 1;
    }

    /// The counts of `action` (zero when never taken).
    pub fn of(&self, action: ChurnAction) -> ActionCounts {
        self.counts.get(&action).copied().unwrap_or_default()
    }

    /// Actions started over all kinds.
    pub fn total_started(&self) -> u64 {
        self.counts.values().map(|c| c.started).sum()
    }

    /// Skipped slots over all causes.
    pub fn total_skipped(&self) -> u64 {
        self.skips.values().sum()
    }

    /// Whether anything failed (exit 1).
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty() || !self.not_restored.is_empty() || self.stopped_early.is_some()
    }
}

/// Where the actions stand, for the live progress line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Per action kind: (ended, under way, failed).
    pub by_action: BTreeMap<ChurnAction, (u64, u64, u64)>,
    pub skipped: u64,
    /// The next slot: its action and how long until it starts.
    pub next: Option<(ChurnAction, Duration)>,
    /// VMs churn may have down now: stop-starts under way and VMs owed a start.
    pub down: usize,
    pub elapsed: Duration,
}

/// Consecutive identical failures: after `limit` of them in a row (the same action failing
/// the same way on whichever VM), churn stops, restores and says why. A success resets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureStreak {
    limit: u32,
    last: Option<(ChurnAction, String)>,
    count: u32,
}

impl FailureStreak {
    pub fn new(limit: u32) -> Self {
        FailureStreak {
            limit,
            last: None,
            count: 0,
        }
    }

    /// Books one ended action; `Some(reason)` when the streak reached the limit.
    pub fn record(
        &mut self,
        vm: &ChurnVm,
        action: ChurnAction,
        result: &ActionResult,
    ) -> Option<String> {
        match result {
            ActionResult::Succeeded => {
                self.last = None;
                self.count = 0;
                None
            }
            ActionResult::Failed(error) => {
                // The same failure on another VM reads the same once the VM's name is out.
                let kind = error
                    .replace(&vm.display_name(), "<vm>")
                    .replace(&vm.name, "<vm>");
                let key = (action, kind);
                if self.last.as_ref() == Some(&key) {
                    self.count += 1;
                } else {
                    self.last = Some(key);
                    self.count = 1;
                }
                (self.limit > 0 && self.count >= self.limit).then(|| {
                    format!(
                        "{} consecutive {action} actions failed the same way (the last on {}: {error})",
                        self.count,
                        vm.display_name()
                    )
                })
            }
            _ => None,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vms(n: usize, migratable: impl Fn(usize) -> bool) -> Vec<ChurnVm> {
        (0..n)
            .map(|i| ChurnVm {
                namespace: "virtwork".into(),
                name: format!("vm-{i:03}"),
                uid: format!("uid-{i}"),
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
        assert_eq!(
            tracker.assign(ChurnAction::Restart),
            Err(SkipCause::AllBusy),
            "all busy"
        );
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
            assert_eq!(vm, Ok(other), "the stopped VM is never chosen");
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
    fn the_tally_counts_per_action_skips_by_cause_and_keeps_failures() {
        let vm = &vms(1, |_| true)[0];
        let mut tally = ChurnTally::default();
        tally.ended(
            vm,
            ChurnAction::Migrate,
            &ActionResult::Failed("boom".into()),
        );
        tally.ended(vm, ChurnAction::Restart, &ActionResult::Succeeded);
        tally.ended(vm, ChurnAction::Restart, &ActionResult::Abandoned);
        tally.ended(
            vm,
            ChurnAction::Restart,
            &ActionResult::CutShort(CutShort::VmDeleted),
        );
        tally.ended(
            vm,
            ChurnAction::Restart,
            &ActionResult::Skipped(SkipCause::VmReplaced),
        );
        tally.skipped(SkipCause::AllBusy);
        assert_eq!(
            tally.of(ChurnAction::Restart),
            ActionCounts {
                started: 3,
                succeeded: 1,
                failed: 0,
                cut_short: 1,
            }
        );
        assert_eq!(tally.of(ChurnAction::StopStart), ActionCounts::default());
        assert_eq!(tally.failures[0].vm, "virtwork/vm-000");
        assert_eq!(tally.cut_short[0].2, "VM deleted");
        assert_eq!(tally.skips[&SkipCause::VmReplaced], 1);
        assert_eq!(tally.total_skipped(), 2);
        assert!(tally.has_failures());
        assert_eq!(tally.total_started(), 4);
    }

    #[test]
    fn skips_say_why_no_vm_could_take_the_slot() {
        let fleet = vms(2, |i| i == 0);
        let schedule = Schedule::new(&fleet, &spec("1/s", 10, 100, "restart", 3));
        let mut tracker = Tracker::new(&schedule, &fleet);
        let first = tracker.assign(ChurnAction::StopStart).unwrap();
        let second = tracker.assign(ChurnAction::StopStart).unwrap();
        assert_eq!(
            tracker.assign(ChurnAction::Restart),
            Err(SkipCause::AllBusy)
        );
        tracker.finish(first, true);
        tracker.finish(second, true);
        assert_eq!(
            tracker.assign(ChurnAction::Restart),
            Err(SkipCause::OwedStart)
        );
        tracker.retire(0);
        assert_eq!(
            tracker.assign(ChurnAction::Migrate),
            Err(SkipCause::NoMigratableVm),
            "the only migratable VM is gone"
        );
        assert_eq!(
            tracker.owed_starts(),
            vec![1],
            "a retired VM is owed nothing"
        );
    }

    #[test]
    fn slot_times_are_exact_at_any_index_and_schedules_are_bounded() {
        let fleet = vms(1, |_| true);
        let rate: ChurnRate = "100000/s".parse().unwrap();
        let week = Duration::from_secs(168 * 3600);
        assert_eq!(check_bounds(rate, week), Err(60_480_000_000));
        assert_eq!(
            check_bounds("6/m".parse().unwrap(), week),
            Ok(60_480),
            "a week at the default rate fits"
        );
        // Past 2^32 slots the times still grow (they used to saturate).
        let spec = ChurnSpec {
            rate,
            duration: week,
            share: Share::ALL,
            actions: "restart".parse().unwrap(),
            seed: 1,
        };
        let schedule = Schedule::new(&fleet, &spec);
        assert_eq!(schedule.last_at(), week - Duration::from_micros(10));
        let slot = schedule.slots().nth(3).unwrap();
        assert_eq!(slot.at, Duration::from_micros(30));
    }

    #[test]
    fn a_streak_of_identical_failures_stops_and_a_success_resets_it() {
        let fleet = vms(3, |_| true);
        let mut streak = FailureStreak::new(3);
        let fail = |vm: &ChurnVm| {
            ActionResult::Failed(format!("restart VM {}: forbidden", vm.display_name()))
        };
        assert_eq!(
            streak.record(&fleet[0], ChurnAction::Restart, &fail(&fleet[0])),
            None
        );
        assert_eq!(
            streak.record(&fleet[1], ChurnAction::Restart, &fail(&fleet[1])),
            None
        );
        streak.record(&fleet[2], ChurnAction::Restart, &ActionResult::Succeeded);
        assert_eq!(
            streak.record(&fleet[0], ChurnAction::Restart, &fail(&fleet[0])),
            None
        );
        assert_eq!(
            streak.record(&fleet[1], ChurnAction::Restart, &fail(&fleet[1])),
            None
        );
        let stop = streak
            .record(&fleet[2], ChurnAction::Restart, &fail(&fleet[2]))
            .unwrap();
        assert!(
            stop.starts_with("3 consecutive restart actions failed the same way"),
            "{stop}"
        );
        // Another kind of failure starts a new streak.
        let mut streak = FailureStreak::new(2);
        streak.record(&fleet[0], ChurnAction::Restart, &fail(&fleet[0]));
        assert_eq!(
            streak.record(
                &fleet[0],
                ChurnAction::Migrate,
                &ActionResult::Failed("x".into())
            ),
            None
        );
    }
}
