//! The deletes of `virtwork cleanup`: VMs first, then everything else, concurrently, each with
//! a uid precondition and background propagation, retried under the shared policy; then the
//! namespace, checked once more right before. Outcomes are aggregated into a
//! [`CleanupOutcome`] (deleted, already gone, failed, not attempted).
//!
//! Must not: discover (it deletes what [`super::discover()`] found); delete after the command
//! is cancelled.

use std::fmt;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, Preconditions, PropagationPolicy};
use serde::Serialize;

use super::discover::{Discovery, count_kinds};
use super::namespace_check::{NamespaceCheck, namespace_verdict};
use crate::k8s::error_line::one_line;
use crate::k8s::namespace::NamespaceVerdict;
use crate::k8s::retry::RetryError;
use crate::k8s::scope::{ApiContext, ManagedObject};
use crate::model::{KindCounts, ManagedKind, NamespaceOutcome};

/// Deletes in flight at once; the shared client rate limit is the real bound on throughput.
pub const DELETE_CONCURRENCY: usize = 32;

/// What happened to one object's delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// NotFound: someone (usually garbage collection) was faster.
    AlreadyGone,
    /// Any other error after retries, as one line.
    Failed(String),
    /// Not attempted because the user interrupted.
    NotAttempted,
}

/// An object whose delete failed, for the warnings at the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeleteFailure {
    pub kind: ManagedKind,
    pub namespace: String,
    pub name: String,
    pub error: String,
}

impl fmt::Display for DeleteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deleting {} {}/{}: {}",
            self.kind.noun(),
            self.namespace,
            self.name,
            self.error
        )
    }
}

/// The aggregated result of a cleanup execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupOutcome {
    /// Objects this cleanup deleted, sorted.
    pub deleted: Vec<ManagedObject>,
    /// Objects already gone when we came to delete them.
    pub already_gone: Vec<ManagedObject>,
    /// Per-object failures, sorted by kind, namespace and name.
    pub failures: Vec<DeleteFailure>,
    /// Objects not attempted because of an interrupt.
    pub not_attempted: Vec<ManagedObject>,
    /// The namespace `--delete-namespace` named and what became of it; `None` when it was not
    /// asked for, absent, or the delete was not attempted (interrupt, gone meanwhile).
    pub namespace: Option<(String, NamespaceOutcome)>,
    pub interrupted: bool,
}

impl CleanupOutcome {
    /// Records the outcome of one object's delete.
    pub fn record(&mut self, object: ManagedObject, outcome: DeleteOutcome) {
        match outcome {
            DeleteOutcome::Deleted => self.deleted.push(object),
            DeleteOutcome::AlreadyGone => self.already_gone.push(object),
            DeleteOutcome::NotAttempted => self.not_attempted.push(object),
            DeleteOutcome::Failed(error) => self.failures.push(DeleteFailure {
                kind: object.kind,
                namespace: object.namespace,
                name: object.name,
                error,
            }),
        }
    }

    /// Records what became of namespace `ns`.
    pub fn record_namespace(&mut self, ns: &str, outcome: NamespaceOutcome) {
        self.namespace = Some((ns.to_string(), outcome));
    }

    /// Sorts every list so that reports are deterministic.
    pub fn finish(&mut self) {
        self.deleted.sort();
        self.already_gone.sort();
        self.failures.sort();
        self.not_attempted.sort();
    }

    /// Deleted objects per kind.
    pub fn deleted_counts(&self) -> KindCounts {
        count_kinds(&self.deleted)
    }

    /// Objects already gone per kind.
    pub fn already_gone_counts(&self) -> KindCounts {
        count_kinds(&self.already_gone)
    }

    /// Whether the namespace was deleted.
    pub fn namespace_deleted(&self) -> bool {
        self.namespace.as_ref().is_some_and(|(_, o)| o.is_deleted())
    }

    /// The namespace that was kept, and why.
    pub fn namespace_kept(&self) -> Option<(&str, &str)> {
        let (ns, outcome) = self.namespace.as_ref()?;
        Some((ns.as_str(), outcome.kept_reason()?))
    }

    /// Every failed delete as one line (`deleting secret ns/name: ...`): the objects in
    /// order, then the namespace.
    pub fn failure_lines(&self) -> Vec<String> {
        let namespace = self.namespace.as_ref().and_then(|(ns, outcome)| {
            outcome
                .failure()
                .map(|error| format!("deleting namespace {ns}: {error}"))
        });
        self.failures
            .iter()
            .map(ToString::to_string)
            .chain(namespace)
            .collect()
    }

    /// Whether any delete failed, the namespace's included (exit code 1).
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty()
            || self
                .namespace
                .as_ref()
                .is_some_and(|(_, o)| o.failure().is_some())
    }
}

/// Turns a delete result into an outcome: NotFound is "already gone".
pub fn classify_delete<T>(result: std::result::Result<T, kube::Error>) -> DeleteOutcome {
    match result {
        Ok(_) => DeleteOutcome::Deleted,
        Err(kube::Error::Api(status)) if status.is_not_found() => DeleteOutcome::AlreadyGone,
        Err(err) => DeleteOutcome::Failed(one_line(&err)),
    }
}

/// Maps the retried delete to an outcome.
fn delete_outcome<T>(result: std::result::Result<T, RetryError>) -> DeleteOutcome {
    match result {
        Ok(_) => DeleteOutcome::Deleted,
        Err(RetryError::Cancelled) => DeleteOutcome::NotAttempted,
        // A NotFound after a transient failure most likely means our earlier attempt went
        // through and only its response was lost.
        Err(RetryError::Failed {
            error, attempts, ..
        }) => match classify_delete::<()>(Err(error)) {
            DeleteOutcome::AlreadyGone if attempts > 1 => DeleteOutcome::Deleted,
            other => other,
        },
    }
}

/// Deletes one object (uid precondition, background propagation), retrying transient errors.
async fn delete_one(ctx: &ApiContext, object: &ManagedObject) -> DeleteOutcome {
    if ctx.cancel.is_cancelled() {
        return DeleteOutcome::NotAttempted;
    }
    let resource = object.kind.api_resource();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &object.namespace, &resource);
    let mut params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    if let Some(uid) = &object.uid {
        params.preconditions = Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        });
    }
    let what = format!("deleting {} {}", object.kind.noun(), object.display_name());
    delete_outcome(ctx.call(&what, || api.delete(&object.name, &params)).await)
}

/// Deletes everything in `discovery`: VMs first, then the rest, concurrently; then the
/// namespace. Stops issuing deletes once the command is cancelled. `progress` is called once
/// per object as its delete ends (the live view of a large cleanup).
pub async fn execute(
    ctx: &ApiContext,
    discovery: &Discovery,
    progress: &(dyn Fn() + Sync),
) -> CleanupOutcome {
    let mut outcome = CleanupOutcome::default();
    for phase in discovery.deletion_phases() {
        let results: Vec<(ManagedObject, DeleteOutcome)> = futures::stream::iter(phase)
            .map(|object| async move {
                let result = delete_one(ctx, &object).await;
                progress();
                tracing::debug!(kind = %object.kind, object = %object.display_name(), ?result, "delete");
                (object, result)
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        for (object, result) in results {
            outcome.record(object, result);
        }
    }
    match &discovery.namespace {
        _ if ctx.cancel.is_cancelled() => {}
        Some((ns, NamespaceVerdict::Delete { uid })) => {
            delete_namespace(ctx, ns, uid, &discovery.namespace_check, &mut outcome).await
        }
        Some((ns, NamespaceVerdict::Keep(reason))) => {
            let reason = reason.clone();
            outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        }
        Some((_, NamespaceVerdict::Absent | NamespaceVerdict::CheckContents)) | None => {}
    }
    outcome.interrupted = ctx.cancel.is_cancelled();
    outcome.finish();
    outcome
}

/// Deletes namespace `ns` (checked at discovery as `uid`): checks it again first, since
/// cleanup has been deleting for a while and someone may have put something of theirs in it
/// or replaced it, then deletes it with the uid as precondition.
async fn delete_namespace(
    ctx: &ApiContext,
    ns: &str,
    uid: &str,
    check: &NamespaceCheck,
    outcome: &mut CleanupOutcome,
) {
    let replaced = "it was deleted and created again since cleanup checked it".to_string();
    let reason = match namespace_verdict(ctx, ns, check, &check.ours).await {
        Err(_) => return, // interrupted: not attempted
        Ok((NamespaceVerdict::Delete { uid: now }, _)) if now == uid => None,
        Ok((NamespaceVerdict::Delete { .. }, _)) => Some(replaced.clone()),
        Ok((NamespaceVerdict::Keep(reason), _)) => Some(reason),
        Ok((NamespaceVerdict::Absent | NamespaceVerdict::CheckContents, _)) => return,
    };
    if let Some(reason) = reason {
        outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        return;
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let what = format!("deleting namespace {ns}");
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let result = ctx.call(&what, || api.delete(ns, &params)).await;
    if let Err(RetryError::Failed {
        error: kube::Error::Api(status),
        ..
    }) = &result
        && status.is_conflict()
    {
        // The uid precondition failed: the name now belongs to another namespace.
        let reason = replaced;
        outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        return;
    }
    match delete_outcome(result) {
        DeleteOutcome::Deleted => outcome.record_namespace(ns, NamespaceOutcome::Deleted),
        DeleteOutcome::Failed(error) => {
            outcome.record_namespace(ns, NamespaceOutcome::Failed { error })
        }
        DeleteOutcome::AlreadyGone | DeleteOutcome::NotAttempted => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::scope::fixtures::*;

    #[test]
    fn not_found_is_already_gone_and_other_errors_fail() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(&format!("boom {code}"), reason).with_code(code),
            ))
        };
        assert_eq!(classify_delete::<()>(Ok(())), DeleteOutcome::Deleted);
        assert_eq!(
            classify_delete::<()>(Err(status(404, "NotFound"))),
            DeleteOutcome::AlreadyGone
        );
        match classify_delete::<()>(Err(status(403, "Forbidden"))) {
            DeleteOutcome::Failed(msg) => {
                assert!(msg.contains("Forbidden") && msg.contains("403"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_are_aggregated_sorted_with_the_namespace_last() {
        let mut outcome = CleanupOutcome::default();
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Failed {
                error: "denied".into(),
            },
        );
        outcome.record(
            object(ManagedKind::Secret, "b", RUN_A),
            DeleteOutcome::Failed("forbidden".into()),
        );
        outcome.record(
            object(ManagedKind::Secret, "a", RUN_A),
            DeleteOutcome::Failed("forbidden".into()),
        );
        outcome.record(
            object(ManagedKind::VirtualMachine, "vm", RUN_A),
            DeleteOutcome::Deleted,
        );
        outcome.record(
            object(ManagedKind::DataVolume, "dv", RUN_A),
            DeleteOutcome::AlreadyGone,
        );
        outcome.finish();
        assert_eq!(
            outcome.failure_lines(),
            vec![
                "deleting secret virtwork/a: forbidden",
                "deleting secret virtwork/b: forbidden",
                "deleting namespace virtwork: denied",
            ]
        );
        assert_eq!(outcome.deleted_counts().vms, 1);
        assert_eq!(outcome.deleted_counts().dvs, 0);
        assert_eq!(
            outcome.failures.len(),
            2,
            "the namespace is not an object failure"
        );
        assert!(outcome.has_failures());
        assert!(!outcome.namespace_deleted());
        assert_eq!(outcome.namespace_kept(), None);
    }

    #[test]
    fn a_failed_namespace_delete_alone_is_a_failure() {
        let mut outcome = CleanupOutcome::default();
        assert!(!outcome.has_failures());
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Kept {
                reason: "not ours".into(),
            },
        );
        assert!(
            !outcome.has_failures(),
            "a kept namespace is reported, not failed"
        );
        assert_eq!(outcome.namespace_kept(), Some(("virtwork", "not ours")));
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Failed {
                error: "denied".into(),
            },
        );
        assert!(outcome.has_failures());
        assert_eq!(
            outcome.failure_lines(),
            ["deleting namespace virtwork: denied"]
        );
    }
}
