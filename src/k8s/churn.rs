//! The async shell of `virtwork churn`: finds a run's running VMs, checks that the chosen
//! actions are allowed, then walks the schedule of [`crate::churn`] in time, sending each
//! action through KubeVirt's API and following it until it is over, and at the end (or on
//! interrupt, or after a streak of identical failures) starts every VM it stopped.
//!
//! - restart: `PUT subresources.kubevirt.io/v1 .../virtualmachines/{name}/restart`, done when
//!   a new VMI runs;
//! - stop-start: `PUT .../stop`, once the VMI is gone `PUT .../start`, done when it runs;
//! - migrate: a `VirtualMachineInstanceMigration` named after the churn and the slot (so a
//!   create whose answer was lost is found again, never made twice), labelled managed-by, the
//!   VM's run id and `virtwork/churn-id` (so cleanup removes it), done when its phase is
//!   Succeeded, waited for as long as KubeVirt's own migration limits allow.
//!
//! Before every action and every restore the VM is read again: only the object churn listed
//! (same uid, still virtwork's, still the run's) is acted on. A lifecycle request whose answer
//! is lost is never sent again: what the VM and VMI show decides whether it took effect
//! ([`crate::churn::observe`]). Each action's progress is followed with single GETs every
//! [`POLL_INTERVAL`]; a VM deleted meanwhile ends its action at once.
//!
//! Must not: decide what an observed state means (the core does) or record the audit (it
//! reports [`ChurnEvent`]s to its caller).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ObjectMeta;
use tokio::time::Instant;

use crate::churn::latency::phase_offsets;
use crate::churn::observe::{
    CutShort, LifecycleRequest, Observed, VmView, VmiView, cut_short, ready_for, took_effect,
    vmi_gone, vmi_running, vmi_running_again,
};
use crate::churn::{ActionResult, ChurnTally, ChurnVm, FailureStreak, Progress, Schedule, Tracker};
use crate::error::{Error, Result};
use crate::k8s::error_line::one_line;
use crate::k8s::retry::{Decision, Failure, RetryError, classify, retry, timed_out};
use crate::k8s::scope::{ApiContext, Scope, list_in_scope};
use crate::kubevirt::{VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationSpec};
use crate::labels;
use crate::model::{ChurnAction, ManagedKind};

/// How often an action under way is checked.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Longest a restart or stop-start (or one restore) may take before it counts as failed.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a lifecycle request whose answer was lost is looked for on the VM.
pub const RESOLVE_WINDOW: Duration = Duration::from_secs(10);
/// KubeVirt's migration limits (pkg/virt-config/virt-config.go,
/// pkg/virt-controller/watch/migration/migration.go): a migration may stay pending up to the
/// catch-all pending timeout, then take `completionTimeoutPerGiB` per GiB of guest memory;
/// KubeVirt fails it past those, so churn waits that long plus a margin for the news.
pub const MIGRATION_PENDING_LIMIT: Duration = Duration::from_secs(15 * 60);
pub const MIGRATION_COMPLETION_PER_GIB: Duration = Duration::from_secs(150);
const MIGRATION_MARGIN: Duration = Duration::from_secs(60);
/// How long the discovery of KubeVirt's subresource API is retried.
const DISCOVERY_RETRY: Duration = Duration::from_secs(15);

/// The VMs found in scope: how many there are, and those running now (sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fleet {
    pub total: usize,
    pub running: Vec<ChurnVm>,
}

/// Lists the VMs and VMIs in `scope`; a VM is eligible when its VMI runs.
pub async fn find_fleet(ctx: &ApiContext, scope: &Scope) -> Result<Fleet> {
    let vms: Vec<DynamicObject> = list_in_scope(ctx, scope, ManagedKind::VirtualMachine).await?;
    let vmis: Vec<DynamicObject> =
        list_in_scope(ctx, scope, ManagedKind::VirtualMachineInstance).await?;
    let key = |o: &DynamicObject| (o.metadata.namespace.clone(), o.metadata.name.clone());
    let vmis: BTreeMap<_, &DynamicObject> = vmis.iter().map(|v| (key(v), v)).collect();
    let mut running: Vec<ChurnVm> = vms
        .iter()
        .filter_map(|vm| {
            let vmi = vmis.get(&key(vm))?;
            // A VMI marked for deletion is stopping: somebody else's action, not ours to touch.
            let stopping = vmi.metadata.deletion_timestamp.is_some();
            (phase(vmi) == Some("Running") && !stopping).then(|| ChurnVm {
                namespace: vm.metadata.namespace.clone().unwrap_or_default(),
                name: vm.metadata.name.clone().unwrap_or_default(),
                uid: vm.metadata.uid.clone().unwrap_or_default(),
                run_id: label(&vm.metadata, labels::RUN_ID),
                migratable: condition(vmi, "LiveMigratable") != Some("False"),
            })
        })
        .collect();
    running.sort();
    Ok(Fleet {
        total: vms.len(),
        running,
    })
}

fn label(meta: &ObjectMeta, key: &str) -> String {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

fn phase(object: &DynamicObject) -> Option<&str> {
    object.data.pointer("/status/phase")?.as_str()
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a str> {
    object
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))?
        .get("status")?
        .as_str()
}

/// The subresources and objects `actions` need, as (verb, group, resource, subresource).
fn needed_permissions(actions: &[ChurnAction]) -> Vec<Permission> {
    let mut needs = vec![
        ("get", "kubevirt.io", "virtualmachines", ""),
        ("get", "kubevirt.io", "virtualmachineinstances", ""),
    ];
    for action in actions {
        match action {
            ChurnAction::Restart => {
                needs.push((
                    "update",
                    "subresources.kubevirt.io",
                    "virtualmachines",
                    "restart",
                ));
            }
            ChurnAction::StopStart => {
                needs.push((
                    "update",
                    "subresources.kubevirt.io",
                    "virtualmachines",
                    "stop",
                ));
                needs.push((
                    "update",
                    "subresources.kubevirt.io",
                    "virtualmachines",
                    "start",
                ));
            }
            ChurnAction::Migrate => {
                needs.push((
                    "create",
                    "kubevirt.io",
                    "virtualmachineinstancemigrations",
                    "",
                ));
                needs.push(("get", "kubevirt.io", "virtualmachineinstancemigrations", ""));
            }
        }
    }
    needs.dedup();
    needs
}

/// Before the first action: KubeVirt's subresource API is served (discovery of
/// `subresources.kubevirt.io/v1` lists what the actions use) and the user may do what the
/// chosen actions need in every namespace they touch (one SelfSubjectAccessReview each). The
/// first gap is one line naming the permission; nothing has been touched then.
pub async fn check_permissions(
    ctx: &ApiContext,
    actions: &[ChurnAction],
    namespaces: &BTreeSet<String>,
) -> Result<()> {
    let needs = needed_permissions(actions);
    let subresources: Vec<&str> = needs
        .iter()
        .filter(|(_, group, _, _)| *group == "subresources.kubevirt.io")
        .map(|(_, _, _, sub)| *sub)
        .collect();
    check_subresource_api(ctx, &subresources).await?;
    for namespace in namespaces {
        for need in &needs {
            check_access(ctx, need, namespace).await?;
        }
    }
    Ok(())
}

/// Discovery of `subresources.kubevirt.io/v1` lists `virtualmachines/<sub>` for every
/// subresource the actions use.
async fn check_subresource_api(ctx: &ApiContext, subresources: &[&str]) -> Result<()> {
    if !subresources.is_empty() {
        let what = "reading the discovery of subresources.kubevirt.io/v1";
        let request = || {
            let request = http::Request::get("/apis/subresources.kubevirt.io/v1")
                .body(Vec::new())
                .expect("a GET without a body is a valid request");
            ctx.client.request::<serde_json::Value>(request)
        };
        // A cluster without the aggregated API answers 404 or 503 at once; a few retries
        // are enough for a virt-api that is restarting.
        let policy = ctx.policy.retrying_until(Instant::now() + DISCOVERY_RETRY);
        let served = match retry(&policy, &ctx.cancel, what, request).await {
            Ok(doc) => doc,
            Err(RetryError::Cancelled) => return Err(Error::Interrupted),
            Err(error) => {
                return Err(Error::runtime(format!(
                    "churn needs KubeVirt's subresource API (subresources.kubevirt.io/v1), and \
                     {what} failed: {}; nothing was touched",
                    error_text(&error)
                )));
            }
        };
        let names: Vec<&str> = served["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for sub in subresources.iter() {
            let wanted = format!("virtualmachines/{sub}");
            if !names.contains(&wanted.as_str()) {
                return Err(Error::runtime(format!(
                    "churn needs {wanted} in subresources.kubevirt.io/v1, which this cluster's \
                     KubeVirt does not serve; nothing was touched"
                )));
            }
        }
    }
    Ok(())
}

/// One SelfSubjectAccessReview: may the user do `need` in `namespace`?
async fn check_access(ctx: &ApiContext, need: &Permission, namespace: &str) -> Result<()> {
    let (verb, group, resource, subresource) = need;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(ctx.client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some((*verb).to_string()),
                group: Some((*group).to_string()),
                resource: Some((*resource).to_string()),
                subresource: (!subresource.is_empty()).then(|| (*subresource).to_string()),
                namespace: Some(namespace.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let what = "checking permissions (SelfSubjectAccessReview)";
    let params = PostParams::default();
    let answer = retry(&ctx.policy, &ctx.cancel, what, || {
        reviews.create(&params, &review)
    })
    .await;
    let allowed = match answer {
        Ok(review) => review.status.is_some_and(|s| s.allowed),
        Err(RetryError::Cancelled) => return Err(Error::Interrupted),
        Err(error) => {
            return Err(Error::runtime(format!(
                "{what} failed: {}; nothing was touched",
                error_text(&error)
            )));
        }
    };
    if !allowed {
        let resource = if subresource.is_empty() {
            (*resource).to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        return Err(Error::runtime(format!(
            "churn needs permission to {verb} {resource} (API group {group}) in \
             namespace {namespace}, which the current user lacks; nothing was touched \
             (see docs/churn.md#permissions)"
        )));
    }
    Ok(())
}

/// (verb, group, resource, subresource) of one permission churn needs.
type Permission = (&'static str, &'static str, &'static str, &'static str);

fn error_text(error: &RetryError) -> String {
    match error {
        RetryError::Cancelled => "interrupted".to_string(),
        RetryError::Failed { error, .. } => one_line(error),
    }
}

/// What happened, for the caller's audit record and log, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum ChurnEvent {
    Ended {
        vm: ChurnVm,
        action: ChurnAction,
        result: ActionResult,
    },
    /// A VM churn stopped was started again (`Ok`) or could not be (`Err`).
    Restored {
        vm: ChurnVm,
        result: std::result::Result<(), String>,
    },
    /// A VM owed a start left alone: no longer the VM churn stopped.
    RestoreSkipped { vm: ChurnVm, why: &'static str },
    /// Churn stops before its schedule ends.
    Stopping { reason: String },
    /// Every [`POLL_INTERVAL`] while churn runs.
    Progress(Progress),
}

/// What `drive` needs besides the fleet and the schedule.
pub struct DriveOptions<'a> {
    pub churn_id: &'a str,
    /// Identical consecutive failures that stop churn (0: never).
    pub max_failure_streak: u32,
}

/// One action's outcome, for the tracker and the tally.
struct Done {
    result: ActionResult,
    /// A stop may have been applied and its start did not run through: churn owes a start.
    owes_start: bool,
    /// First request to over.
    took: Option<Duration>,
    /// A succeeded migration's phase offsets.
    phases: Vec<(&'static str, Duration)>,
}

impl Done {
    fn plain(result: ActionResult) -> Done {
        Done {
            result,
            owes_start: false,
            took: None,
            phases: Vec::new(),
        }
    }
}

/// Walks `schedule` from now: each slot at its time goes to the tracker's VM; stops at the
/// end of the schedule, when `ctx.cancel` fires or after a streak of identical failures,
/// lets the actions under way end, then starts (with `restore`, a context that is not
/// cancelled) every VM a stop-start left stopped.
pub async fn drive(
    ctx: &ApiContext,
    restore: &ApiContext,
    vms: &[ChurnVm],
    schedule: &Schedule,
    options: &DriveOptions<'_>,
    mut on_event: impl FnMut(&ChurnEvent),
) -> ChurnTally {
    let start = Instant::now();
    let mut tracker = Tracker::new(schedule, vms);
    let mut tally = ChurnTally::default();
    let mut streak = FailureStreak::new(options.max_failure_streak);
    let mut under_way = FuturesUnordered::new();
    let mut slots = schedule.slots().peekable();
    let mut dispatched: u64 = 0;
    let mut ticker = tokio::time::interval(POLL_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let churn_id = options.churn_id;
    loop {
        let next_at = slots.peek().map(|slot| start + slot.at);
        if next_at.is_none() && under_way.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => break,
            Some((vm, action, done)) = under_way.next(), if !under_way.is_empty() => {
                let stop = book(&mut tracker, &mut tally, &mut streak, &vms[vm], vm, action, done, &mut on_event);
                if let Some(reason) = stop {
                    on_event(&ChurnEvent::Stopping { reason: reason.clone() });
                    tally.stopped_early = Some(reason);
                    break;
                }
            }
            () = sleep_until(next_at), if next_at.is_some() => {
                let Some(slot) = slots.next() else { continue };
                dispatched += 1;
                match tracker.assign(slot.action) {
                    Ok(vm) => {
                        let action = slot.action;
                        let target = &vms[vm];
                        under_way.push(async move {
                            (vm, action, perform(ctx, target, action, churn_id, slot.index).await)
                        });
                    }
                    Err(cause) => tally.skipped(cause),
                }
            }
            _ = ticker.tick() => {
                let next = slots.peek().map(|slot| {
                    (slot.action, (start + slot.at).saturating_duration_since(Instant::now()))
                });
                on_event(&ChurnEvent::Progress(progress(&tracker, &tally, next, start.elapsed())));
            }
        }
    }
    tally.not_started = schedule.len() - dispatched;
    while let Some((vm, action, done)) = under_way.next().await {
        book(
            &mut tracker,
            &mut tally,
            &mut streak,
            &vms[vm],
            vm,
            action,
            done,
            &mut on_event,
        );
    }
    let owed = tracker.owed_starts();
    restore_all(restore, vms, &owed, &mut tally, &mut on_event).await;
    tally
}

fn progress(
    tracker: &Tracker,
    tally: &ChurnTally,
    next: Option<(ChurnAction, Duration)>,
    elapsed: Duration,
) -> Progress {
    let mut by_action: BTreeMap<ChurnAction, (u64, u64, u64)> = BTreeMap::new();
    for (action, counts) in &tally.counts {
        let entry = by_action.entry(*action).or_default();
        entry.0 = counts.succeeded + counts.failed + counts.cut_short;
        entry.2 = counts.failed;
    }
    for (_, action) in tracker.busy() {
        by_action.entry(action).or_default().1 += 1;
    }
    Progress {
        by_action,
        skipped: tally.total_skipped(),
        next,
        down: tracker.owed_starts().len(),
        elapsed,
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Books one ended action; `Some(reason)` when it completes a streak of failures that
/// stops churn.
#[allow(clippy::too_many_arguments)]
fn book(
    tracker: &mut Tracker,
    tally: &mut ChurnTally,
    streak: &mut FailureStreak,
    vm: &ChurnVm,
    index: usize,
    action: ChurnAction,
    done: Done,
    on_event: &mut impl FnMut(&ChurnEvent),
) -> Option<String> {
    let retire = match &done.result {
        ActionResult::Skipped(cause) => cause.retires(),
        ActionResult::CutShort(_) => true,
        _ => false,
    };
    tracker.finish(index, done.owes_start);
    if retire {
        tracker.retire(index);
    }
    if let (ActionResult::Succeeded, Some(took)) = (&done.result, done.took) {
        tally.latencies.action(action, took);
        tally.latencies.migration(&done.phases);
    }
    tally.ended(vm, action, &done.result);
    let stop = streak.record(vm, action, &done.result);
    on_event(&ChurnEvent::Ended {
        vm: vm.clone(),
        action,
        result: done.result,
    });
    stop
}

/// How one restore ended.
enum Restore {
    Started,
    /// Not stopped: its stop never took effect, or somebody started it.
    NotStopped,
    LeftAlone(&'static str),
    Failed(String),
}

/// Starts every owed VM that is stopped, under the shared rate limit.
async fn restore_all(
    ctx: &ApiContext,
    vms: &[ChurnVm],
    owed: &[usize],
    tally: &mut ChurnTally,
    on_event: &mut impl FnMut(&ChurnEvent),
) {
    let results: Vec<(usize, Restore)> = futures::stream::iter(owed)
        .map(|index| async move { (*index, ensure_running(ctx, &vms[*index]).await) })
        .buffer_unordered(32)
        .collect()
        .await;
    for (index, result) in results {
        let vm = &vms[index];
        match result {
            Restore::NotStopped => {}
            Restore::LeftAlone(why) => {
                tally.restore_skipped.push((vm.display_name(), why));
                on_event(&ChurnEvent::RestoreSkipped {
                    vm: vm.clone(),
                    why,
                });
            }
            Restore::Started => {
                tally.restored.push(vm.display_name());
                on_event(&ChurnEvent::Restored {
                    vm: vm.clone(),
                    result: Ok(()),
                });
            }
            Restore::Failed(error) => {
                tally.not_restored.push((vm.display_name(), error.clone()));
                on_event(&ChurnEvent::Restored {
                    vm: vm.clone(),
                    result: Err(error),
                });
            }
        }
    }
    tally.restored.sort();
    tally.not_restored.sort();
    tally.restore_skipped.sort();
}

/// Why an action stopped short.
#[derive(Debug)]
enum Step {
    Cancelled,
    /// Gave up: timed out, transient errors until the deadline, or a request whose answer
    /// was lost and left no sign.
    Failed(String),
    /// The API server refused the request (4xx): it was not applied.
    Refused(String),
    /// The VM was deleted or replaced meanwhile.
    Cut(CutShort),
}

impl Step {
    fn of(error: RetryError, what: &str) -> Step {
        match error {
            RetryError::Cancelled => Step::Cancelled,
            RetryError::Failed {
                error, transient, ..
            } => {
                let text = format!("{what}: {}", one_line(&error));
                if transient {
                    Step::Failed(text)
                } else {
                    Step::Refused(text)
                }
            }
        }
    }

    fn into_result(self) -> ActionResult {
        match self {
            Step::Cancelled => ActionResult::Abandoned,
            Step::Failed(error) | Step::Refused(error) => ActionResult::Failed(error),
            Step::Cut(why) => ActionResult::CutShort(why),
        }
    }
}

/// Sends `action` for `vm` and follows it until it is over.
async fn perform(
    ctx: &ApiContext,
    vm: &ChurnVm,
    action: ChurnAction,
    churn_id: &str,
    slot: u64,
) -> Done {
    let observed = match observe(ctx, vm).await {
        Ok(observed) => observed,
        Err(step) => return Done::plain(step.into_result()),
    };
    if let Err(cause) = ready_for(vm, &observed) {
        return Done::plain(ActionResult::Skipped(cause));
    }
    let started = Instant::now();
    let deadline = started + SETTLE_TIMEOUT;
    let (outcome, owes_start) = match action {
        ChurnAction::Restart => (restart(ctx, vm, &observed, deadline).await, false),
        ChurnAction::StopStart => stop_start(ctx, vm, deadline).await,
        ChurnAction::Migrate => (migrate(ctx, vm, &observed, churn_id, slot).await, false),
    };
    match outcome {
        Ok(phases) => Done {
            result: ActionResult::Succeeded,
            owes_start,
            took: Some(started.elapsed()),
            phases,
        },
        Err(step) => Done {
            result: step.into_result(),
            owes_start,
            took: None,
            phases: Vec::new(),
        },
    }
}

/// Reads the VM and its VMI.
async fn observe(ctx: &ApiContext, vm: &ChurnVm) -> std::result::Result<Observed, Step> {
    let vms = vm_api(ctx, vm, ManagedKind::VirtualMachine);
    let what = format!("reading VM {}", vm.display_name());
    let seen_vm = retry(&ctx.policy, &ctx.cancel, &what, || vms.get_opt(&vm.name))
        .await
        .map_err(|e| Step::of(e, &what))?;
    let Some(seen_vm) = seen_vm else {
        return Ok(Observed::default());
    };
    let vmis = vm_api(ctx, vm, ManagedKind::VirtualMachineInstance);
    let what = format!("reading VMI {}", vm.display_name());
    let seen_vmi = retry(&ctx.policy, &ctx.cancel, &what, || vmis.get_opt(&vm.name))
        .await
        .map_err(|e| Step::of(e, &what))?;
    Ok(Observed {
        vm: Some(vm_view(&seen_vm)),
        vmi: seen_vmi.as_ref().map(vmi_view),
    })
}

fn vm_view(vm: &DynamicObject) -> VmView {
    VmView {
        uid: vm.metadata.uid.clone().unwrap_or_default(),
        managed: label(&vm.metadata, labels::MANAGED_BY) == labels::MANAGED_BY_VALUE,
        run_id: label(&vm.metadata, labels::RUN_ID),
        run_strategy: vm
            .data
            .pointer("/spec/runStrategy")
            .and_then(|s| s.as_str())
            .map(String::from),
        pending_requests: vm
            .data
            .pointer("/status/stateChangeRequests")
            .and_then(|r| r.as_array())
            .is_some_and(|r| !r.is_empty()),
    }
}

fn vmi_view(vmi: &DynamicObject) -> VmiView {
    VmiView {
        uid: vmi.metadata.uid.clone().unwrap_or_default(),
        phase: phase(vmi).unwrap_or_default().to_string(),
        terminating: vmi.metadata.deletion_timestamp.is_some(),
    }
}

async fn restart(
    ctx: &ApiContext,
    vm: &ChurnVm,
    before: &Observed,
    deadline: Instant,
) -> std::result::Result<Vec<(&'static str, Duration)>, Step> {
    let replaced = before.vmi.as_ref().map(|vmi| vmi.uid.clone());
    let request = LifecycleRequest::Restart {
        replaced: replaced.clone(),
    };
    send(ctx, vm, &request).await?;
    follow(
        ctx,
        vm,
        deadline,
        "a new VMI running after the restart",
        |now| vmi_running_again(now, replaced.as_deref()),
    )
    .await?;
    Ok(Vec::new())
}

/// The stop, and once the VMI is gone the start. A stop the server refused leaves the VM as
/// it was: no start is owed (it may be somebody else's stopped VM).
async fn stop_start(
    ctx: &ApiContext,
    vm: &ChurnVm,
    deadline: Instant,
) -> (
    std::result::Result<Vec<(&'static str, Duration)>, Step>,
    bool,
) {
    match send(ctx, vm, &LifecycleRequest::Stop).await {
        Ok(()) => {}
        Err(refused @ Step::Refused(_)) => return (Err(refused), false),
        Err(cut @ Step::Cut(_)) => return (Err(cut), false),
        Err(other) => return (Err(other), true),
    }
    let started = async {
        follow(ctx, vm, deadline, "the VMI gone after the stop", vmi_gone).await?;
        send(ctx, vm, &LifecycleRequest::Start).await?;
        follow(
            ctx,
            vm,
            deadline,
            "the VMI running after the start",
            vmi_running,
        )
        .await?;
        Ok(Vec::new())
    }
    .await;
    let owes_start = matches!(
        started,
        Err(Step::Failed(_) | Step::Refused(_) | Step::Cancelled)
    );
    (started, owes_start)
}

/// Starts `vm` when churn left it stopped, after checking it is still the VM churn stopped.
async fn ensure_running(ctx: &ApiContext, vm: &ChurnVm) -> Restore {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let failed = |step: Step| match step {
        Step::Cut(why) => Restore::LeftAlone(why.describe()),
        Step::Cancelled => Restore::Failed("interrupted".to_string()),
        Step::Failed(error) | Step::Refused(error) => Restore::Failed(error),
    };
    let now = match observe(ctx, vm).await {
        Ok(now) => now,
        Err(step) => return failed(step),
    };
    if let Some(why) = cut_short(vm, &now) {
        return Restore::LeftAlone(why.describe());
    }
    let halted = now.vm.as_ref().and_then(|v| v.run_strategy.as_deref()) == Some("Halted");
    if !halted {
        return Restore::NotStopped;
    }
    let started = async {
        follow(ctx, vm, deadline, "the VMI gone after the stop", vmi_gone).await?;
        send(ctx, vm, &LifecycleRequest::Start).await?;
        follow(
            ctx,
            vm,
            deadline,
            "the VMI running after the start",
            vmi_running,
        )
        .await
    }
    .await;
    match started {
        Ok(()) => Restore::Started,
        Err(step) => failed(step),
    }
}

fn vm_api(ctx: &ApiContext, vm: &ChurnVm, kind: ManagedKind) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &vm.namespace, &kind.api_resource())
}

/// Reads the VM and VMI until `done` holds, the VM is deleted or replaced (ends at once),
/// the deadline passes (a failure naming `awaited`) or the command is cancelled.
async fn follow(
    ctx: &ApiContext,
    vm: &ChurnVm,
    deadline: Instant,
    awaited: &str,
    done: impl Fn(&Observed) -> bool,
) -> std::result::Result<(), Step> {
    loop {
        let now = observe(ctx, vm).await?;
        if let Some(why) = cut_short(vm, &now) {
            return Err(Step::Cut(why));
        }
        if done(&now) {
            return Ok(());
        }
        pause(ctx, deadline, || {
            format!("no sign of {awaited} within {}s", SETTLE_TIMEOUT.as_secs())
        })
        .await?;
    }
}

/// Waits one poll interval; fails past `deadline` with `late()`, stops on cancellation.
async fn pause(
    ctx: &ApiContext,
    deadline: Instant,
    late: impl FnOnce() -> String,
) -> std::result::Result<(), Step> {
    if Instant::now() + POLL_INTERVAL > deadline {
        return Err(Step::Failed(late()));
    }
    tokio::select! {
        () = ctx.cancel.cancelled() => Err(Step::Cancelled),
        () = tokio::time::sleep(POLL_INTERVAL) => Ok(()),
    }
}

/// `PUT` on a VM subresource, sent once: only a 429 (refused before anything was done) is
/// sent again. A lost answer (a dropped connection, a 5xx such as a gateway's 504 or
/// virt-api's "already underway") is resolved by reading the VM: the request counts as done
/// when the VM shows it took effect within [`RESOLVE_WINDOW`], and fails otherwise.
async fn send(
    ctx: &ApiContext,
    vm: &ChurnVm,
    request: &LifecycleRequest,
) -> std::result::Result<(), Step> {
    let verb = request.verb();
    let path = format!(
        "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachines/{}/{verb}",
        vm.namespace, vm.name
    );
    let what = format!("{verb} VM {}", vm.display_name());
    let mut attempt: u32 = 0;
    let lost = loop {
        let Some(budget) = ctx.policy.attempt_budget(Instant::now()) else {
            return Err(Step::Failed(format!(
                "{what}: {}",
                one_line(&timed_out(Duration::ZERO, ctx.policy.attempt_timeout))
            )));
        };
        let put = http::Request::put(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{}".to_vec())
            .expect("a PUT with a static body is a valid request");
        let answer = tokio::time::timeout(budget, ctx.client.request_text(put)).await;
        let error = match answer {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(error)) => error,
            Err(_) => timed_out(budget, ctx.policy.attempt_timeout),
        };
        let failure = classify(&error);
        let too_many = matches!(&error, kube::Error::Api(status) if status.code == 429);
        match failure {
            Failure::Transient { .. } if too_many => {
                match ctx
                    .policy
                    .decide(&failure, attempt, Instant::now(), fastrand::f64())
                {
                    Decision::RetryAfter(delay) => {
                        tokio::select! {
                            () = ctx.cancel.cancelled() => return Err(Step::Cancelled),
                            () = tokio::time::sleep(delay) => {}
                        }
                        attempt = attempt.saturating_add(1);
                    }
                    Decision::GiveUp => {
                        return Err(Step::Failed(format!("{what}: {}", one_line(&error))));
                    }
                }
            }
            Failure::Transient { .. } => break one_line(&error),
            _ => return Err(Step::Refused(format!("{what}: {}", one_line(&error)))),
        }
    };
    tracing::info!(vm = %vm.display_name(), error = %lost, "no answer to {verb}; reading the VM to see whether it took effect");
    let deadline = Instant::now() + RESOLVE_WINDOW;
    loop {
        let now = observe(ctx, vm).await?;
        if let Some(why) = cut_short(vm, &now) {
            return Err(Step::Cut(why));
        }
        if took_effect(request, &now) {
            return Ok(());
        }
        pause(ctx, deadline, || {
            format!(
                "{what}: no answer ({lost}) and no sign within {}s that it took effect; not sent again",
                RESOLVE_WINDOW.as_secs()
            )
        })
        .await?;
    }
}

/// The migration churn creates for `vm` in slot `slot`: named after the churn and the slot,
/// so a create whose answer was lost is recognised (AlreadyExists with our churn id); labelled
/// so cleanup (and `--run-id`) finds it, with the run id read fresh from the VM.
pub fn migration_for(
    vm: &ChurnVm,
    run_id: &str,
    churn_id: &str,
    slot: u64,
) -> VirtualMachineInstanceMigration {
    let labels = [
        (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
        (labels::RUN_ID, run_id),
        (labels::CHURN_ID, churn_id),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let short: String = churn_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    VirtualMachineInstanceMigration {
        metadata: ObjectMeta {
            name: Some(format!("virtwork-churn-{short}-{slot}")),
            namespace: Some(vm.namespace.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineInstanceMigrationSpec {
            vmi_name: vm.name.clone(),
        },
        status: None,
    }
}

/// Guest memory of a VMI in GiB (at least 1), for KubeVirt's completion limit.
fn memory_gib(vmi: Option<&DynamicObject>) -> u64 {
    let quantity = vmi.and_then(|v| {
        v.data
            .pointer("/spec/domain/memory/guest")
            .or_else(|| v.data.pointer("/spec/domain/resources/requests/memory"))
            .and_then(|q| q.as_str())
            .and_then(|q| q.parse::<crate::model::Quantity>().ok())
    });
    let bytes = quantity.map_or(0.0, |q| q.value());
    ((bytes / f64::from(1u32 << 30)).ceil() as u64).max(1)
}

async fn migrate(
    ctx: &ApiContext,
    vm: &ChurnVm,
    observed: &Observed,
    churn_id: &str,
    slot: u64,
) -> std::result::Result<Vec<(&'static str, Duration)>, Step> {
    let vmis = vm_api(ctx, vm, ManagedKind::VirtualMachineInstance);
    let what = format!("reading VMI {}", vm.display_name());
    let vmi = retry(&ctx.policy, &ctx.cancel, &what, || vmis.get_opt(&vm.name))
        .await
        .map_err(|e| Step::of(e, &what))?;
    let gib = memory_gib(vmi.as_ref());
    let completion = MIGRATION_COMPLETION_PER_GIB * u32::try_from(gib).unwrap_or(u32::MAX);
    let deadline = Instant::now() + MIGRATION_PENDING_LIMIT + completion + MIGRATION_MARGIN;
    let name = create_migration(ctx, vm, observed, churn_id, slot).await?;
    follow_migration(ctx, vm, churn_id, &name, gib, deadline).await
}

/// Creates the migration of `vm` for `slot`; its name.
async fn create_migration(
    ctx: &ApiContext,
    vm: &ChurnVm,
    observed: &Observed,
    churn_id: &str,
    slot: u64,
) -> std::result::Result<String, Step> {
    let api: Api<VirtualMachineInstanceMigration> =
        Api::namespaced(ctx.client.clone(), &vm.namespace);
    let what = format!("migrating VM {}", vm.display_name());
    let run_id = observed
        .vm
        .as_ref()
        .map_or(vm.run_id.as_str(), |v| v.run_id.as_str());
    let wanted = migration_for(vm, run_id, churn_id, slot);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let params = PostParams::default();
    // Retried like every write (a 429 included): the fixed name makes a second attempt after
    // a lost answer meet AlreadyExists instead of creating a second migration.
    match retry(&ctx.policy, &ctx.cancel, &what, || {
        api.create(&params, &wanted)
    })
    .await
    {
        Ok(_) => {}
        Err(RetryError::Failed {
            error: kube::Error::Api(status),
            attempts,
            ..
        }) if attempts > 1 && status.is_already_exists() => {}
        Err(error) => return Err(Step::of(error, &what)),
    }
    Ok(name)
}

/// Follows migration `name` until it succeeds (its phase offsets), fails, disappears, its VM
/// is deleted or replaced, or KubeVirt's limits for `gib` GiB have passed (`deadline`).
async fn follow_migration(
    ctx: &ApiContext,
    vm: &ChurnVm,
    churn_id: &str,
    name: &str,
    gib: u64,
    deadline: Instant,
) -> std::result::Result<Vec<(&'static str, Duration)>, Step> {
    let migrations = Api::<DynamicObject>::namespaced_with(
        ctx.client.clone(),
        &vm.namespace,
        &ManagedKind::VirtualMachineInstanceMigration.api_resource(),
    );
    let what = format!("reading migration {}/{name}", vm.namespace);
    loop {
        let seen = retry(&ctx.policy, &ctx.cancel, &what, || migrations.get_opt(name))
            .await
            .map_err(|e| Step::of(e, &what))?;
        let Some(seen) = seen else {
            return Err(Step::Failed(format!("migration {name} disappeared")));
        };
        if label(&seen.metadata, labels::CHURN_ID) != churn_id {
            return Err(Step::Failed(format!(
                "migration {name} exists but is not this churn's"
            )));
        }
        match phase(&seen) {
            Some("Succeeded") => return Ok(migration_phases(&seen)),
            Some("Failed") => return Err(Step::Failed(format!("migration {name} failed"))),
            _ => {}
        }
        let now = observe(ctx, vm).await?;
        if let Some(why) = cut_short(vm, &now) {
            return Err(Step::Cut(why));
        }
        pause(ctx, deadline, || {
            format!(
                "migration {name} neither succeeded nor failed within KubeVirt's own limits \
                 (pending up to {}s, then completionTimeoutPerGiB {}s x {gib} GiB) plus {}s",
                MIGRATION_PENDING_LIMIT.as_secs(),
                MIGRATION_COMPLETION_PER_GIB.as_secs(),
                MIGRATION_MARGIN.as_secs()
            )
        })
        .await?;
    }
}

/// The phase offsets of a succeeded migration, from its creation and
/// `status.phaseTransitionTimestamps`.
fn migration_phases(migration: &DynamicObject) -> Vec<(&'static str, Duration)> {
    let created = migration
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    let transitions: Vec<(String, String)> = migration
        .data
        .pointer("/status/phaseTransitionTimestamps")
        .and_then(|t| t.as_array())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t.get("phase")?.as_str()?.to_string(),
                t.get("phaseTransitionTimestamp")?.as_str()?.to_string(),
            ))
        })
        .collect();
    phase_offsets(&created, &transitions)
}
