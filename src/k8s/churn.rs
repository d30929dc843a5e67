//! The async shell of `virtwork churn`: finds a run's running VMs, then walks the schedule of
//! [`crate::churn`] in time, sending each action through KubeVirt's API and following it
//! until it is over, and at the end (or on interrupt) starts every VM it stopped.
//!
//! - restart: `PUT subresources.kubevirt.io/v1 .../virtualmachines/{name}/restart`, done when
//!   a new VMI runs;
//! - stop-start: `PUT .../stop`, once the VMI is gone `PUT .../start`, done when it runs;
//! - migrate: a `VirtualMachineInstanceMigration` labelled managed-by, the VM's run id and
//!   `virtwork/churn-id` (so cleanup removes it), done when its phase is Succeeded.
//!
//! Every request goes through the shared rate-limited client and retry policy. Progress is
//! followed with single GETs every [`POLL_INTERVAL`]. The decisions (which VM, which action,
//! what is owed) are the tracker's; this module only moves requests.
//!
//! Must not: decide what to do; record the audit (it reports [`ChurnEvent`]s to its caller).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ObjectMeta;
use tokio::time::Instant;

use crate::churn::{
    ActionResult, ChurnTally, ChurnVm, MigrationProgress, Schedule, Tracker, running_again,
};
use crate::error::Result;
use crate::k8s::error_line::one_line;
use crate::k8s::retry::{RetryError, retry};
use crate::k8s::scope::{ApiContext, Scope, list_in_scope};
use crate::kubevirt::{VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationSpec};
use crate::labels;
use crate::model::ChurnAction;
use crate::model::ManagedKind;

/// How often an action under way is checked.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Longest one action (or one restore) may take before it counts as failed.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);

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
                run_id: run_id_of(&vm.metadata),
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

fn run_id_of(meta: &ObjectMeta) -> String {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(labels::RUN_ID))
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

/// What happened, for the caller's audit record and log, as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// Walks `schedule` from now: each slot at its time goes to the tracker's VM; stops at the
/// end of the schedule or when `ctx.cancel` fires, lets the actions under way end, then
/// starts (with `restore`, a context that is not cancelled) every VM a stop-start left
/// stopped. `churn_id` labels the migrations.
pub async fn drive(
    ctx: &ApiContext,
    restore: &ApiContext,
    vms: &[ChurnVm],
    schedule: &Schedule,
    churn_id: &str,
    mut on_event: impl FnMut(&ChurnEvent),
) -> ChurnTally {
    let start = Instant::now();
    let mut tracker = Tracker::new(schedule, vms);
    let mut tally = ChurnTally::default();
    let mut under_way = FuturesUnordered::new();
    let mut slots = schedule.slots().peekable();
    let mut dispatched: u64 = 0;
    loop {
        let next_at = slots.peek().map(|slot| start + slot.at);
        if next_at.is_none() && under_way.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => break,
            Some((vm, action, (result, owes_start))) = under_way.next(), if !under_way.is_empty() => {
                tracker.finish(vm, owes_start);
                end_action(&mut tally, &vms[vm], action, result, &mut on_event);
            }
            () = sleep_until(next_at), if next_at.is_some() => {
                let Some(slot) = slots.next() else { continue };
                dispatched += 1;
                match tracker.assign(slot.action) {
                    Some(vm) => {
                        tally.started(slot.action);
                        let action = slot.action;
                        let target = &vms[vm];
                        under_way.push(async move {
                            (vm, action, perform(ctx, target, action, churn_id).await)
                        });
                    }
                    None => tally.skipped += 1,
                }
            }
        }
    }
    tally.not_started = schedule.len() - dispatched;
    while let Some((vm, action, (result, owes_start))) = under_way.next().await {
        tracker.finish(vm, owes_start);
        end_action(&mut tally, &vms[vm], action, result, &mut on_event);
    }
    let owed = tracker.owed_starts();
    restore_all(restore, vms, &owed, &mut tally, &mut on_event).await;
    tally
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Books one ended action.
fn end_action(
    tally: &mut ChurnTally,
    vm: &ChurnVm,
    action: ChurnAction,
    result: ActionResult,
    on_event: &mut impl FnMut(&ChurnEvent),
) {
    tally.ended(vm, action, &result);
    on_event(&ChurnEvent::Ended {
        vm: vm.clone(),
        action,
        result,
    });
}

/// Starts every owed VM that is stopped, one after another under the shared rate limit.
async fn restore_all(
    ctx: &ApiContext,
    vms: &[ChurnVm],
    owed: &[usize],
    tally: &mut ChurnTally,
    on_event: &mut impl FnMut(&ChurnEvent),
) {
    let results: Vec<(usize, std::result::Result<bool, String>)> = futures::stream::iter(owed)
        .map(|index| async move { (*index, ensure_running(ctx, &vms[*index]).await) })
        .buffer_unordered(32)
        .collect()
        .await;
    for (index, result) in results {
        let vm = &vms[index];
        let result = match result {
            Ok(false) => continue, // it never stopped
            Ok(true) => {
                tally.restored.push(vm.display_name());
                Ok(())
            }
            Err(error) => {
                tally.not_restored.push((vm.display_name(), error.clone()));
                Err(error)
            }
        };
        on_event(&ChurnEvent::Restored {
            vm: vm.clone(),
            result,
        });
    }
    tally.restored.sort();
    tally.not_restored.sort();
}

/// Sends `action` for `vm` and follows it until it is over.
/// The flag: the VM may be left stopped by this action (a stop-start whose stop may have
/// been applied and whose start did not run through), so churn owes it a start.
async fn perform(
    ctx: &ApiContext,
    vm: &ChurnVm,
    action: ChurnAction,
    churn_id: &str,
) -> (ActionResult, bool) {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let (outcome, owes_start) = match action {
        ChurnAction::Restart => (restart(ctx, vm, deadline).await, false),
        ChurnAction::StopStart => stop_start(ctx, vm, deadline).await,
        ChurnAction::Migrate => (migrate(ctx, vm, churn_id, deadline).await, false),
    };
    let result = match outcome {
        Ok(()) => ActionResult::Succeeded,
        Err(Step::Cancelled) => ActionResult::Abandoned,
        Err(Step::Failed(error) | Step::Refused(error)) => ActionResult::Failed(error),
    };
    (result, owes_start)
}

/// Why an action stopped short.
#[derive(Debug)]
enum Step {
    Cancelled,
    /// Gave up: timed out, or transient errors until the deadline (the request may have
    /// been applied).
    Failed(String),
    /// The API server refused the request (4xx): it was not applied.
    Refused(String),
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

    fn into_text(self) -> String {
        match self {
            Step::Cancelled => "interrupted".to_string(),
            Step::Failed(error) | Step::Refused(error) => error,
        }
    }
}

async fn restart(
    ctx: &ApiContext,
    vm: &ChurnVm,
    deadline: Instant,
) -> std::result::Result<(), Step> {
    let before = get_vmi(ctx, vm).await?.and_then(|vmi| vmi.metadata.uid);
    put_subresource(ctx, vm, "restart").await?;
    await_vmi(
        ctx,
        vm,
        deadline,
        "a new VMI running after the restart",
        |vmi| {
            vmi.is_some_and(|v| {
                running_again(v.metadata.uid.as_deref(), phase(v), before.as_deref())
            })
        },
    )
    .await
}

/// The stop, and once the VMI is gone the start. A stop the server refused leaves the VM as
/// it was: no start is owed (it may be somebody else's stopped VM).
async fn stop_start(
    ctx: &ApiContext,
    vm: &ChurnVm,
    deadline: Instant,
) -> (std::result::Result<(), Step>, bool) {
    match put_subresource(ctx, vm, "stop").await {
        Ok(()) => {}
        Err(refused @ Step::Refused(_)) => return (Err(refused), false),
        Err(other) => return (Err(other), true),
    }
    let started = async {
        await_vmi(ctx, vm, deadline, "the VMI gone after the stop", |vmi| {
            vmi.is_none()
        })
        .await?;
        put_subresource(ctx, vm, "start").await?;
        await_vmi(
            ctx,
            vm,
            deadline,
            "the VMI running after the start",
            |vmi| vmi.is_some_and(|v| phase(v) == Some("Running")),
        )
        .await
    }
    .await;
    let owes_start = started.is_err();
    (started, owes_start)
}

/// Starts `vm` when churn left it stopped. `Ok(true)`: it was stopped and runs again;
/// `Ok(false)`: it was not stopped.
async fn ensure_running(ctx: &ApiContext, vm: &ChurnVm) -> std::result::Result<bool, String> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let failed = Step::into_text;
    let api = vm_api(ctx, vm, ManagedKind::VirtualMachine);
    let what = format!("reading VM {}", vm.display_name());
    let current = retry(&ctx.policy, &ctx.cancel, &what, || api.get_opt(&vm.name))
        .await
        .map_err(|e| failed(Step::of(e, &what)))?;
    let halted = current
        .as_ref()
        .and_then(|v| v.data.pointer("/spec/runStrategy"))
        .and_then(|s| s.as_str())
        == Some("Halted");
    if !halted {
        return Ok(false);
    }
    await_vmi(ctx, vm, deadline, "the VMI gone after the stop", |vmi| {
        vmi.is_none()
    })
    .await
    .map_err(failed)?;
    put_subresource(ctx, vm, "start").await.map_err(failed)?;
    await_vmi(
        ctx,
        vm,
        deadline,
        "the VMI running after the start",
        |vmi| vmi.is_some_and(|v| phase(v) == Some("Running")),
    )
    .await
    .map_err(failed)?;
    Ok(true)
}

fn vm_api(ctx: &ApiContext, vm: &ChurnVm, kind: ManagedKind) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &vm.namespace, &kind.api_resource())
}

async fn get_vmi(
    ctx: &ApiContext,
    vm: &ChurnVm,
) -> std::result::Result<Option<DynamicObject>, Step> {
    let api = vm_api(ctx, vm, ManagedKind::VirtualMachineInstance);
    let what = format!("reading VMI {}", vm.display_name());
    retry(&ctx.policy, &ctx.cancel, &what, || api.get_opt(&vm.name))
        .await
        .map_err(|e| Step::of(e, &what))
}

/// Polls the VMI until `done` holds, the deadline passes (a failure naming `awaited`) or the
/// command is cancelled.
async fn await_vmi(
    ctx: &ApiContext,
    vm: &ChurnVm,
    deadline: Instant,
    awaited: &str,
    done: impl Fn(Option<&DynamicObject>) -> bool,
) -> std::result::Result<(), Step> {
    loop {
        if done(get_vmi(ctx, vm).await?.as_ref()) {
            return Ok(());
        }
        pause(ctx, deadline, awaited).await?;
    }
}

/// Waits one poll interval; fails past `deadline`, stops on cancellation.
async fn pause(
    ctx: &ApiContext,
    deadline: Instant,
    awaited: &str,
) -> std::result::Result<(), Step> {
    if Instant::now() + POLL_INTERVAL > deadline {
        return Err(Step::Failed(format!(
            "no sign of {awaited} within {}s",
            SETTLE_TIMEOUT.as_secs()
        )));
    }
    tokio::select! {
        () = ctx.cancel.cancelled() => Err(Step::Cancelled),
        () = tokio::time::sleep(POLL_INTERVAL) => Ok(()),
    }
}

/// `PUT` on a VM subresource (`restart`, `stop`, `start`). A 409 after a retry means the
/// first attempt went through (a VM already stopping or starting answers Conflict).
async fn put_subresource(
    ctx: &ApiContext,
    vm: &ChurnVm,
    verb: &str,
) -> std::result::Result<(), Step> {
    let path = format!(
        "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachines/{}/{verb}",
        vm.namespace, vm.name
    );
    let what = format!("{verb} VM {}", vm.display_name());
    let result = retry(&ctx.policy, &ctx.cancel, &what, || {
        let request = http::Request::put(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{}".to_vec())
            .expect("a PUT with a static body is a valid request");
        ctx.client.request_text(request)
    })
    .await;
    match result {
        Ok(_) => Ok(()),
        Err(RetryError::Failed {
            error: kube::Error::Api(status),
            attempts,
            ..
        }) if attempts > 1 && status.is_conflict() => Ok(()),
        Err(error) => Err(Step::of(error, &what)),
    }
}

/// The migration churn creates for `vm`: labelled so cleanup (and `--run-id`) finds it.
pub fn migration_for(vm: &ChurnVm, churn_id: &str) -> VirtualMachineInstanceMigration {
    let labels = [
        (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
        (labels::RUN_ID, vm.run_id.as_str()),
        (labels::CHURN_ID, churn_id),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    VirtualMachineInstanceMigration {
        metadata: ObjectMeta {
            generate_name: Some("virtwork-churn-".into()),
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

async fn migrate(
    ctx: &ApiContext,
    vm: &ChurnVm,
    churn_id: &str,
    deadline: Instant,
) -> std::result::Result<(), Step> {
    let api: Api<VirtualMachineInstanceMigration> =
        Api::namespaced(ctx.client.clone(), &vm.namespace);
    let what = format!("migrating VM {}", vm.display_name());
    let wanted = migration_for(vm, churn_id);
    // Not retried: a lost response would leave a second migration behind; one failed
    // migration is the lesser harm.
    let no_retry = ctx.policy.retrying_until(Instant::now());
    let params = PostParams::default();
    let created = retry(&no_retry, &ctx.cancel, &what, || {
        api.create(&params, &wanted)
    })
    .await
    .map_err(|e| Step::of(e, &what))?;
    let name = created.metadata.name.unwrap_or_default();
    let what = format!("reading migration {}/{name}", vm.namespace);
    loop {
        let seen = retry(&ctx.policy, &ctx.cancel, &what, || api.get_opt(&name))
            .await
            .map_err(|e| Step::of(e, &what))?;
        let phase = seen.as_ref().and_then(|m| m.status.as_ref()?.phase.clone());
        match (seen.is_some(), MigrationProgress::of(phase.as_deref())) {
            (_, MigrationProgress::Succeeded) => return Ok(()),
            (_, MigrationProgress::Failed) => {
                return Err(Step::Failed(format!("migration {name} failed")));
            }
            (false, _) => return Err(Step::Failed(format!("migration {name} disappeared"))),
            (true, MigrationProgress::InProgress) => {
                pause(ctx, deadline, &format!("migration {name} succeeding")).await?
            }
        }
    }
}
