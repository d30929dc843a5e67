//! Creating a plan's objects on the cluster: namespace, Services, then cloud-init Secrets and
//! VirtualMachines concurrently, each create retried until the run deadline.
//!
//! Order: the namespace is ensured (created labelled `app.kubernetes.io/managed-by=virtwork`
//! and annotated with the creating run; an existing namespace is used untouched), Services
//! are created one by one in name order, then every VM's Secret and
//! VirtualMachine are created as one unit, `--vm-concurrency` units at a time
//! (`buffer_unordered`). Every request passes the client's rate limit.
//!
//! Creates are retried by [`crate::k8s::retry`]. A create that meets AlreadyExists GETs the
//! object: carrying our `virtwork/run-id` it is our own earlier attempt whose response was
//! lost (success); otherwise it is a conflict naming the other run and how to resolve it
//! and how to resolve it. `--dry-run=server` submits every object with `dryRun=All`.
//! The first failure stops the remaining work (in-flight creates are dropped); what was
//! created stays and is reported, so `virtwork cleanup --run-id` can remove it.
//!
//! This module reports progress through [`ApplyEvent`]s and knows nothing of audit or output.

use std::fmt::Debug;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::k8s::namespace::CREATED_BY_RUN;
use crate::k8s::retry::{Failure, RetryError, RetryPolicy, retry};
use crate::kubevirt::VirtualMachine;
use crate::labels;
use crate::plan::{Plan, PlannedVm};

/// Field manager recorded on every object we create or patch.
pub const FIELD_MANAGER: &str = "virtwork";

/// Progress reported while applying, in the order things happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyEvent {
    NamespaceEnsured { namespace: String, created: bool },
    ServiceCreated { name: String, workload: String },
    SecretCreated { name: String, vm: String },
    VmCreated { name: String, workload: String },
    VmFailed { name: String, error: String },
}

/// Names of what exists after applying (created now or adopted from a lost response).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub namespace_created: bool,
    pub services: Vec<String>,
    pub secrets: Vec<String>,
    pub vms: Vec<String>,
}

/// How to apply: where, as which run, until when, how concurrently, for real or dry-run.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    pub run_id: String,
    pub namespace: String,
    pub policy: RetryPolicy,
    pub cancel: CancellationToken,
    /// Bound on VM units (Secret + VM) in flight.
    pub vm_concurrency: usize,
    /// `--dry-run=server`: submit with `dryRun=All`, persist nothing.
    pub server_dry_run: bool,
    /// `--max-starting` / `--ramp`: every VM unit waits for its admission first.
    pub pace: Option<std::sync::Arc<crate::k8s::pacing::PaceGate>>,
}

impl ApplyOptions {
    fn post_params(&self) -> PostParams {
        PostParams {
            dry_run: self.server_dry_run,
            field_manager: Some(FIELD_MANAGER.to_string()),
        }
    }
}

/// What a create ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// It already existed with our run id: an earlier attempt succeeded unseen.
    AlreadyOurs,
}

/// The error for an object of another run (or of no virtwork run) standing in our way.
pub fn conflict_error(kind: &str, namespace: &str, name: &str, owner_run: Option<&str>) -> Error {
    match owner_run {
        Some(other) if !other.is_empty() => Error::runtime(format!(
            "{kind} {namespace}/{name} already exists and belongs to virtwork run {other}: \
             remove that run with `virtwork cleanup --namespace {namespace} --run-id {other}` \
             or choose another --namespace"
        )),
        _ => Error::runtime(format!(
            "{kind} {namespace}/{name} already exists and was not created by a virtwork run: \
             delete it or choose another --namespace"
        )),
    }
}

/// Creates `object` with retries; resolves AlreadyExists by the object's run-id label.
pub async fn create_owned<K>(
    api: &Api<K>,
    object: &K,
    options: &ApplyOptions,
) -> Result<CreateOutcome>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let name = object.name_any();
    let namespace = &options.namespace;
    let what = format!("creating {kind} {namespace}/{name}");
    let params = options.post_params();
    let created = retry(&options.policy, &options.cancel, &what, || {
        api.create(&params, object)
    })
    .await;
    match created {
        Ok(_) => Ok(CreateOutcome::Created),
        Err(err) if err.failure() == Some(Failure::AlreadyExists) => {
            let existing = retry(&options.policy, &options.cancel, &what, || api.get(&name))
                .await
                .map_err(|e| e.into_error(format!("{what}: reading the existing object")))?;
            let owner = existing.labels().get(labels::RUN_ID).map(String::as_str);
            if owner == Some(options.run_id.as_str()) && !options.server_dry_run {
                Ok(CreateOutcome::AlreadyOurs)
            } else {
                Err(conflict_error(&kind, namespace, &name, owner))
            }
        }
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(err) => Err(explain_create_failure(err, &what, namespace)),
    }
}

/// Adds the hint a user needs for the common permanent failures.
fn explain_create_failure(err: RetryError, what: &str, namespace: &str) -> Error {
    if err.failure() == Some(Failure::NotFound) {
        return err.into_error(format!(
            "{what}: namespace {namespace} not found (was it deleted during the run?)"
        ));
    }
    err.into_error(what)
}

/// The namespace object a run creates: labelled as virtwork's, and annotated with the
/// creating run, the only proof of ownership `cleanup --delete-namespace` accepts.
pub fn namespace_object(name: &str, run_id: &str) -> Namespace {
    Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    labels::MANAGED_BY.to_string(),
                    labels::MANAGED_BY_VALUE.to_string(),
                )]
                .into(),
            ),
            annotations: Some([(CREATED_BY_RUN.to_string(), run_id.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Ensures the namespace exists, creating it (see [`namespace_object`]) when it does not.
/// An existing namespace is used as it is: never labelled, annotated or otherwise changed,
/// so a namespace virtwork did not create never looks like one it did. Returns whether this
/// run created it (a create whose response was lost is recognised by its annotation).
pub async fn ensure_namespace(client: &kube::Client, options: &ApplyOptions) -> Result<bool> {
    let api: Api<Namespace> = Api::all(client.clone());
    let name = options.namespace.clone();
    let what = format!("ensuring namespace {name:?}");
    let namespace = namespace_object(&name, &options.run_id);
    let params = options.post_params();
    match retry(&options.policy, &options.cancel, &what, || {
        api.create(&params, &namespace)
    })
    .await
    {
        Ok(_) => Ok(true),
        Err(err) if err.failure() == Some(Failure::AlreadyExists) => {
            let existing = retry(&options.policy, &options.cancel, &what, || api.get(&name))
                .await
                .map_err(|e| e.into_error(format!("{what}: reading the existing namespace")))?;
            let creator = existing.annotations().get(CREATED_BY_RUN);
            Ok(creator == Some(&options.run_id) && !options.server_dry_run)
        }
        Err(err) => Err(err.into_error(what)),
    }
}

/// Applies `plan`: namespace, Services, then Secrets + VMs concurrently. `on_event` sees
/// every step as it completes. On failure the error is returned together with what exists.
pub async fn apply_plan(
    client: &kube::Client,
    plan: &Plan,
    options: &ApplyOptions,
    on_event: &mut (dyn FnMut(ApplyEvent) + Send),
) -> std::result::Result<Applied, (Error, Applied)> {
    let mut applied = Applied::default();
    if let Err(e) =
        create_namespace_and_services(client, plan, options, on_event, &mut applied).await
    {
        return Err((e, applied));
    }
    let first_error = create_vms(client, plan, options, on_event, &mut applied).await;
    applied.secrets.sort();
    applied.vms.sort();
    match first_error {
        Some(e) => Err((e, applied)),
        None => Ok(applied),
    }
}

/// Ensures the namespace, then creates the Services one by one, stopping at the first
/// failure.
async fn create_namespace_and_services(
    client: &kube::Client,
    plan: &Plan,
    options: &ApplyOptions,
    on_event: &mut (dyn FnMut(ApplyEvent) + Send),
    applied: &mut Applied,
) -> Result<()> {
    let created = ensure_namespace(client, options).await?;
    applied.namespace_created = created;
    on_event(ApplyEvent::NamespaceEnsured {
        namespace: options.namespace.clone(),
        created,
    });
    let services: Api<Service> = Api::namespaced(client.clone(), &options.namespace);
    for planned in &plan.services {
        create_owned(&services, &planned.service, options).await?;
        let name = planned.service.name_any();
        applied.services.push(name.clone());
        on_event(ApplyEvent::ServiceCreated {
            name,
            workload: planned.workload.clone(),
        });
    }
    Ok(())
}

/// Creates each VM's Secret and VM: admitted in plan order (pacing), then `--vm-concurrency`
/// at a time. The first failure stops new units; the stream is then drained so every unit
/// already in flight reports what it created and the summary matches the cluster. Returns
/// the first failure.
async fn create_vms(
    client: &kube::Client,
    plan: &Plan,
    options: &ApplyOptions,
    on_event: &mut (dyn FnMut(ApplyEvent) + Send),
    applied: &mut Applied,
) -> Option<Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &options.namespace);
    let stop = options.cancel.child_token();
    let unit_options = ApplyOptions {
        cancel: stop.clone(),
        ..options.clone()
    };
    let unit_options = &unit_options;
    let mut units = Box::pin(
        futures::stream::iter(plan.vms.iter())
            .then(|vm| async move {
                let admitted = match &unit_options.pace {
                    Some(gate) => {
                        gate.admit(&unit_options.cancel, unit_options.policy.deadline)
                            .await
                    }
                    None => Ok(()),
                };
                (vm, admitted)
            })
            .map(|(vm, admitted)| {
                let secrets = &secrets;
                let vms = &vms;
                async move {
                    match admitted {
                        Ok(()) => create_vm_unit(secrets, vms, vm, unit_options).await,
                        Err(e) => UnitOutcome {
                            vm,
                            secret_created: false,
                            vm_result: Err(e),
                        },
                    }
                }
            })
            .buffer_unordered(options.vm_concurrency.max(1)),
    );
    let mut first_error = None;
    while let Some(unit) = units.next().await {
        if let Err(error) = record_unit(unit, applied, on_event) {
            stop.cancel();
            // Units stopped by an earlier failure say Interrupted; keep the cause.
            first_error.get_or_insert(error);
        }
    }
    first_error
}

/// Records what one unit created and tells `on_event`; returns the unit's failure.
fn record_unit(
    unit: UnitOutcome<'_>,
    applied: &mut Applied,
    on_event: &mut (dyn FnMut(ApplyEvent) + Send),
) -> Result<()> {
    let UnitOutcome {
        vm,
        secret_created,
        vm_result,
    } = unit;
    if secret_created {
        applied.secrets.push(secret_name(vm));
        on_event(ApplyEvent::SecretCreated {
            name: secret_name(vm),
            vm: vm.name.clone(),
        });
    }
    match vm_result {
        Ok(()) => {
            applied.vms.push(vm.name.clone());
            on_event(ApplyEvent::VmCreated {
                name: vm.name.clone(),
                workload: vm.workload.clone(),
            });
            Ok(())
        }
        Err(error) => {
            if !matches!(error, Error::Interrupted) {
                on_event(ApplyEvent::VmFailed {
                    name: vm.name.clone(),
                    error: error.to_string(),
                });
            }
            Err(error)
        }
    }
}

fn secret_name(vm: &PlannedVm) -> String {
    vm.secret_name()
}

struct UnitOutcome<'a> {
    vm: &'a PlannedVm,
    secret_created: bool,
    vm_result: Result<()>,
}

async fn create_vm_unit<'a>(
    secrets: &Api<Secret>,
    vms: &Api<VirtualMachine>,
    vm: &'a PlannedVm,
    options: &ApplyOptions,
) -> UnitOutcome<'a> {
    // Objects are built here, when sent, so only the units in flight hold a copy of their
    // user-data.
    if let Err(e) = create_owned(secrets, &vm.secret(), options).await {
        return UnitOutcome {
            vm,
            secret_created: false,
            vm_result: Err(e),
        };
    }
    let vm_result = create_owned(vms, &vm.vm(), options).await.map(|_| ());
    UnitOutcome {
        vm,
        secret_created: true,
        vm_result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_errors_name_the_object_the_run_and_the_remedy() {
        let e = conflict_error("VirtualMachine", "ns1", "virtwork-cpu-0", Some("abc"));
        let msg = e.to_string();
        assert!(msg.contains("VirtualMachine ns1/virtwork-cpu-0"), "{msg}");
        assert!(
            msg.contains("virtwork cleanup --namespace ns1 --run-id abc"),
            "{msg}"
        );
        assert!(msg.contains("another --namespace"), "{msg}");
        assert_eq!(e.exit_code(), 1);
        let foreign = conflict_error("Secret", "ns1", "x", None).to_string();
        assert!(
            foreign.contains("not created by a virtwork run"),
            "{foreign}"
        );
    }
}
