//! The recorder commands call while they work: one [`Auditor`] per process, one [`Execution`]
//! per `run`/`cleanup` invocation. What is recorded is in [`super::records`] and
//! [`super::event`]; the file is opened by [`super::file`] and written by the one thread of
//! [`super::writer`].
//!
//! Rules it enforces so callers cannot forget them:
//! - Opening the database when auditing is enabled is the only fatal step ([`Error::Audit`],
//!   naming the path). Every later failure logs `WARN audit record failed` with `op` and
//!   `error` and the command carries on; no method returns an error.
//! - `--no-audit` gives [`Auditor::Disabled`]: every method is a no-op, yet the execution still
//!   carries the run id the caller generated (the run id labels every object either way).
//! - Credentials cannot be recorded: [`ExecutionParams`] has only `ssh_auth_configured`, and
//!   a workload's signal params are a `SignalParams`, which holds only the keys the signal
//!   contract reads.
//! - Every write is its own short `BEGIN IMMEDIATE` transaction on a connection with a busy
//!   timeout, so concurrent processes sharing one file queue instead of failing.
//! - Writes never block the caller: each method queues its write for one dedicated writer
//!   thread that owns the connection and applies them in order, so a database locked by
//!   another process (SQLite waits up to the 60 s busy timeout per write) cannot stall the
//!   async runtime, VM creation or readiness tracking. Timestamps are taken when the method is
//!   called, not when the write lands. [`Auditor::flush`] waits for what was queued (tests and
//!   readers of the file); when the last handle is dropped, queued writes get at most
//!   [`super::writer::DRAIN_TIMEOUT`] to land, then the command exits anyway and says how many were lost.
//!   After an interrupt, `complete_execution(Cancelled, ..)` still persists: nothing here
//!   observes cancellation.
//! - The database file is created `0600` (SQLite gives its `-wal` and `-shm` files the same
//!   mode) and a directory created for it `0700`: the audit trail is the user's alone.
//!
//! Must not: block the caller on the database; fail the command after the database is open;
//! record a credential.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rusqlite::{Transaction, params};
use uuid::Uuid;

use super::event::Event;
use super::file::open_connection;
use super::records::{
    CleanupMode, ExecutionParams, ExecutionStatus, ResourceKind, SUMMARY_DECLINED,
    SUMMARY_INTERRUPTED, VmRecord, WorkloadRecord, WorkloadStatus, format_timestamp,
    saturating_u32, timestamp_now,
};
use super::writer::{FLUSH_TIMEOUT, Store, try_write, write_logged};
use crate::error::{Error, Outcome, Result};
use crate::model::{KindCounts, NamespaceOutcome};
use crate::plan::Plan;

/// The process's audit database, or none with `--no-audit`.
#[derive(Clone)]
pub enum Auditor {
    Sqlite(SqliteAuditor),
    Disabled,
}

/// An open, migrated audit database shared by every recorder of this process.
#[derive(Clone)]
pub struct SqliteAuditor {
    store: Arc<Store>,
}

impl fmt::Debug for Auditor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auditor::Sqlite(s) => write!(f, "Auditor::Sqlite({})", s.store.path.display()),
            Auditor::Disabled => f.write_str("Auditor::Disabled"),
        }
    }
}

impl Auditor {
    /// Opens the database at `path`, or gives [`Auditor::Disabled`] when auditing is off
    /// (`None`).
    pub fn open(path: Option<&Path>) -> Result<Auditor> {
        match path {
            Some(path) => Self::open_path(path),
            None => Ok(Auditor::Disabled),
        }
    }

    /// Opens (creating it and its parent directory when missing) and migrates the database at
    /// `path`. The error names the path and how to proceed.
    pub fn open_path(path: &Path) -> Result<Auditor> {
        let conn = open_connection(path)?;
        let store = Store::start(conn, path).map_err(|e| {
            Error::Audit(format!(
                "starting the writer for {}: {e} (disable auditing with --no-audit)",
                path.display()
            ))
        })?;
        Ok(Auditor::Sqlite(SqliteAuditor {
            store: Arc::new(store),
        }))
    }

    /// Waits until every write queued so far has landed (bounded by the busy timeout plus a
    /// margin); whether they all did. Only for readers of the file in the same process: the
    /// recorder's own writes are always applied in order.
    pub fn flush(&self) -> bool {
        match self {
            Auditor::Sqlite(s) => s.store.flush(FLUSH_TIMEOUT),
            Auditor::Disabled => true,
        }
    }

    pub fn is_enabled(&self) -> bool {
        matches!(self, Auditor::Sqlite(_))
    }

    /// The database path, when enabled.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Auditor::Sqlite(s) => Some(&s.store.path),
            Auditor::Disabled => None,
        }
    }

    /// Queues the `audit_log` row (status `in_progress`) for the run id the caller generated.
    /// If the insert fails it warns, and the execution records nothing but keeps the run id.
    pub fn start_execution(&self, run_id: Uuid, params: &ExecutionParams) -> Execution {
        let recording = match self {
            Auditor::Disabled => None,
            Auditor::Sqlite(s) => {
                let audit_id = Arc::new(OnceLock::new());
                let cell = Arc::clone(&audit_id);
                let params = params.clone();
                let started_at = timestamp_now();
                s.store.submit(move |conn| {
                    let inserted = write_logged(conn, "StartExecution", |tx| {
                        insert_execution(tx, run_id, &params, &started_at)
                    });
                    let _ = cell.set(inserted);
                });
                Some(Recording {
                    store: Arc::clone(&s.store),
                    audit_id,
                })
            }
        };
        Execution { run_id, recording }
    }
}

fn insert_execution(
    tx: &Transaction<'_>,
    run_id: Uuid,
    p: &ExecutionParams,
    started_at: &str,
) -> rusqlite::Result<i64> {
    let workloads_csv = (!p.workloads.is_empty()).then(|| p.workloads.join(","));
    tx.execute(
        "INSERT INTO audit_log (
            run_id, command, status, kubeconfig_path, cluster_context, namespace,
            container_disk_image, default_cpu_cores, default_memory, data_disk_size,
            workloads_csv, total_vm_count, total_workload_count, dry_run, ssh_auth_configured,
            cleanup_mode, wait_for_ready, ready_timeout_seconds, started_at
         ) VALUES (?1, ?2, 'in_progress', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                   ?15, ?16, ?17, ?18)",
        params![
            run_id.to_string(),
            p.command.as_str(),
            non_empty(p.kubeconfig_path.as_deref()),
            non_empty(p.cluster_context.as_deref()),
            p.namespace,
            non_empty(p.container_disk_image.as_deref()),
            p.default_cpu_cores,
            non_empty(p.default_memory.as_deref()),
            non_empty(p.data_disk_size.as_deref()),
            workloads_csv,
            p.total_vm_count,
            p.total_workload_count,
            p.dry_run,
            p.ssh_auth_configured,
            p.cleanup_mode.map(CleanupMode::as_str),
            p.wait_for_ready,
            p.ready_timeout_seconds
                .map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
            started_at,
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

/// The reference stores empty strings as NULL.
fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// The recorder of one execution. Cheap to clone and shareable across tasks; with auditing
/// disabled (or after a failed start) every method is a no-op.
#[derive(Clone)]
pub struct Execution {
    run_id: Uuid,
    recording: Option<Recording>,
}

#[derive(Clone)]
struct Recording {
    store: Arc<Store>,
    /// Set by the writer thread once the start row is in: `None` when that insert failed
    /// (later writes of this execution are then skipped).
    audit_id: Arc<OnceLock<Option<i64>>>,
}

impl Recording {
    /// The start row's id, waiting for the writer to get there.
    fn wait_for_id(&self) -> Option<i64> {
        self.store.flush(FLUSH_TIMEOUT);
        self.audit_id.get().copied().flatten()
    }
}

impl fmt::Debug for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution")
            .field("run_id", &self.run_id)
            .field(
                "audit_id",
                &self
                    .recording
                    .as_ref()
                    .and_then(|r| r.audit_id.get().copied().flatten()),
            )
            .finish()
    }
}

impl Execution {
    /// An execution that records nothing (what `--no-audit` yields), for tests and callers
    /// that have no auditor.
    pub fn disabled(run_id: Uuid) -> Self {
        Execution {
            run_id,
            recording: None,
        }
    }

    /// The run id the caller generated; identical with or without auditing.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// Whether rows are being written (audit enabled and the start row inserted); waits for
    /// the start row to be written.
    pub fn is_recording(&self) -> bool {
        self.audit_id().is_some()
    }

    /// The `audit_log.id` of this execution, when recording; waits for the start row to be
    /// written.
    pub fn audit_id(&self) -> Option<i64> {
        self.recording.as_ref().and_then(Recording::wait_for_id)
    }

    /// Queues a write of this execution (skipped when its start row could not be written).
    fn write<T: 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Transaction<'_>, i64) -> rusqlite::Result<T> + Send + 'static,
    ) {
        let Some(recording) = &self.recording else {
            return;
        };
        let audit_id = Arc::clone(&recording.audit_id);
        recording.store.submit(move |conn| {
            if let Some(Some(id)) = audit_id.get().copied() {
                write_logged(conn, op, |tx| f(tx, id));
            }
        });
    }

    /// Sets the cluster context once connected (`current-context` or `in-cluster`).
    pub fn set_cluster_context(&self, context: &str) {
        let context = non_empty(Some(context)).map(String::from);
        self.write("SetClusterContext", move |tx, id| {
            tx.execute(
                "UPDATE audit_log SET cluster_context = ?2 WHERE id = ?1",
                params![id, context],
            )
        });
    }

    /// Sets `workloads_csv` and the totals when the plan is made after the start row.
    pub fn set_plan_summary(&self, plan: &Plan) {
        let workloads: Vec<&str> = plan.workloads.iter().map(|w| w.name.as_str()).collect();
        let csv = (!workloads.is_empty()).then(|| workloads.join(","));
        let vms = saturating_u32(plan.vms.len());
        let count = saturating_u32(plan.workloads.len());
        self.write("SetPlanSummary", move |tx, id| {
            tx.execute(
                "UPDATE audit_log SET workloads_csv = ?2, total_vm_count = ?3,
                        total_workload_count = ?4 WHERE id = ?1",
                params![id, csv, vms, count],
            )
        });
    }

    /// Appends an event. VM events link `vm_id` (and its `workload_id`) by VM name, workload
    /// events link `workload_id` by workload name, when those rows exist.
    pub fn record_event(&self, event: &Event) {
        let event = event.clone();
        let occurred_at = timestamp_now();
        self.write("RecordEvent", move |tx, id| {
            tx.execute(
                "INSERT INTO events (audit_id, vm_id, workload_id, event_type, message,
                                     error_detail, occurred_at)
                 VALUES (?1,
                   (SELECT id FROM vm_details WHERE audit_id = ?1 AND vm_name = ?2
                      ORDER BY id DESC LIMIT 1),
                   COALESCE(
                     (SELECT workload_id FROM vm_details WHERE audit_id = ?1 AND vm_name = ?2
                        ORDER BY id DESC LIMIT 1),
                     (SELECT id FROM workload_details WHERE audit_id = ?1 AND workload_type = ?3
                        ORDER BY id LIMIT 1)),
                   ?4, ?5, ?6, ?7)",
                params![
                    id,
                    event.vm_name,
                    event.workload_name,
                    event.event_type.as_str(),
                    non_empty(Some(&event.message)),
                    event.error_detail,
                    occurred_at,
                ],
            )
        });
    }

    /// Records every planned workload of `plan` (status `pending`) with the signal params its
    /// VMs are planned with (what verify judges them by), in one transaction.
    pub fn record_workloads(&self, plan: &Plan) {
        let records: Vec<(WorkloadRecord, String)> = plan
            .workloads
            .iter()
            .map(|w| (WorkloadRecord::from(w), w.signal_params.to_json()))
            .collect();
        self.write("RecordWorkload", move |tx, id| {
            for (record, params) in &records {
                insert_workload(tx, id, record, Some(params))?;
            }
            Ok(())
        });
    }

    /// Records one planned workload (status `pending`), without signal params (verify then
    /// judges its VMs by their annotation).
    pub fn record_workload(&self, workload: &WorkloadRecord) {
        let workload = workload.clone();
        self.write("RecordWorkload", move |tx, id| {
            insert_workload(tx, id, &workload, None)
        });
    }

    /// Sets the status of this execution's workload named `workload`.
    pub fn set_workload_status(&self, workload: &str, status: WorkloadStatus) {
        let workload = workload.to_string();
        self.write("UpdateWorkloadStatus", move |tx, id| {
            tx.execute(
                "UPDATE workload_details SET status = ?3 WHERE audit_id = ?1 AND workload_type = ?2",
                params![id, workload, status.as_str()],
            )
        });
    }

    /// Records a created VM (status `created`, `created_at` now), linked to its workload row.
    pub fn record_vm(&self, vm: &VmRecord) {
        let vm = vm.clone();
        let created_at = timestamp_now();
        self.write("RecordVM", move |tx, id| {
            tx.execute(
                "INSERT INTO vm_details (audit_id, workload_id, vm_name, namespace, component, role,
                     cpu_cores, memory, container_disk_image, has_data_disk, data_disk_size,
                     phase, status, created_at)
                 VALUES (?1,
                   (SELECT id FROM workload_details WHERE audit_id = ?1 AND workload_type = ?3
                      ORDER BY id LIMIT 1),
                   ?2, ?4, ?3, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'created', ?12)",
                params![
                    id,
                    vm.vm_name,
                    vm.component,
                    vm.namespace,
                    vm.role,
                    vm.cpu_cores,
                    vm.memory,
                    vm.container_disk_image,
                    vm.data_disk_size.is_some(),
                    vm.data_disk_size,
                    vm.phase,
                    created_at,
                ],
            )
        });
    }

    /// Records the VM's last observed phase without changing its status.
    pub fn update_vm_phase(&self, vm_name: &str, phase: &str) {
        let (vm_name, phase) = (vm_name.to_string(), phase.to_string());
        self.write("UpdateVMPhase", move |tx, id| {
            tx.execute(
                "UPDATE vm_details SET phase = ?3 WHERE audit_id = ?1 AND vm_name = ?2",
                params![id, vm_name, phase],
            )
        });
    }

    /// Marks the VM ready: status `ready`, its phase, and when it became ready.
    pub fn update_vm_ready(&self, vm_name: &str, phase: &str, ready_at: jiff::Timestamp) {
        let (vm_name, phase) = (vm_name.to_string(), phase.to_string());
        let ready_at = format_timestamp(ready_at);
        self.write("UpdateVMReady", move |tx, id| {
            tx.execute(
                "UPDATE vm_details SET status = 'ready', phase = ?3, ready_at = ?4
                 WHERE audit_id = ?1 AND vm_name = ?2",
                params![id, vm_name, phase, ready_at],
            )
        });
    }

    /// Records when the VM's VMI was first seen scheduled and Running (either may be unknown).
    pub fn update_vm_timeline(
        &self,
        vm_name: &str,
        scheduled_at: Option<jiff::Timestamp>,
        running_at: Option<jiff::Timestamp>,
    ) {
        let vm_name = vm_name.to_string();
        let (scheduled_at, running_at) = (
            scheduled_at.map(format_timestamp),
            running_at.map(format_timestamp),
        );
        self.write("UpdateVMTimeline", move |tx, id| {
            tx.execute(
                "UPDATE vm_details SET scheduled_at = COALESCE(?3, scheduled_at),
                     running_at = COALESCE(?4, running_at)
                 WHERE audit_id = ?1 AND vm_name = ?2",
                params![id, vm_name, scheduled_at, running_at],
            )
        });
    }

    /// Marks the VM failed (readiness timeout or error), keeping the last phase seen.
    pub fn update_vm_failed(&self, vm_name: &str, last_phase: Option<&str>) {
        let vm_name = vm_name.to_string();
        let last_phase = last_phase.map(String::from);
        self.write("UpdateVMFailed", move |tx, id| {
            tx.execute(
                "UPDATE vm_details SET status = 'failed', phase = COALESCE(?3, phase)
                 WHERE audit_id = ?1 AND vm_name = ?2",
                params![id, vm_name, last_phase],
            )
        });
    }

    /// Records a created Service or Secret (status `created`).
    pub fn record_resource(&self, kind: ResourceKind, name: &str, namespace: &str) {
        let (name, namespace) = (name.to_string(), namespace.to_string());
        let created_at = timestamp_now();
        self.write("RecordResource", move |tx, id| {
            tx.execute(
                "INSERT INTO resource_details (audit_id, resource_type, resource_name, namespace,
                                               status, created_at)
                 VALUES (?1, ?2, ?3, ?4, 'created', ?5)",
                params![id, kind.as_str(), name, namespace, created_at],
            )
        });
    }

    /// Finishes the execution. The first completion wins: later calls (e.g. an error path
    /// after an interrupt was already recorded) change nothing. `Cancelled` always records
    /// [`SUMMARY_INTERRUPTED`]; `Aborted` defaults to [`SUMMARY_DECLINED`].
    pub fn complete_execution(&self, status: ExecutionStatus, error_summary: Option<&str>) {
        let given = error_summary.filter(|s| !s.is_empty());
        let summary = match status {
            // The reference's fixed text, whatever error the interrupt surfaced as.
            ExecutionStatus::Cancelled => Some(SUMMARY_INTERRUPTED),
            ExecutionStatus::Aborted => given.or(Some(SUMMARY_DECLINED)),
            _ => given,
        }
        .map(String::from);
        let completed_at = timestamp_now();
        self.write("CompleteExecution", move |tx, id| {
            tx.execute(
                "UPDATE audit_log SET status = ?2, completed_at = ?3, error_summary = ?4
                 WHERE id = ?1 AND status = 'in_progress'",
                params![id, status.as_str(), completed_at, summary],
            )
        });
    }

    /// Finishes the execution with the outcome of `result` and its error as the summary (see
    /// [`Execution::complete_execution`]).
    pub fn finish<T>(&self, result: &Result<T>) {
        let error = result.as_ref().err().map(ToString::to_string);
        self.complete_execution(Outcome::of(result).into(), error.as_deref());
    }

    /// Records which runs a cleanup touched: the distinct non-empty run ids, sorted, as a JSON
    /// array in `linked_run_ids`.
    pub fn link_cleanup_to_runs<S: AsRef<str>>(&self, run_ids: &[S]) {
        let ids = sorted_run_ids(run_ids);
        let json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".to_string());
        self.write("LinkCleanupToRuns", move |tx, id| {
            tx.execute(
                "UPDATE audit_log SET linked_run_ids = ?2 WHERE id = ?1",
                params![id, json],
            )
        });
    }

    /// Marks the named VMs deleted in the records of the given runs (and namespace).
    pub fn mark_vms_deleted<N: AsRef<str>, R: AsRef<str>>(
        &self,
        namespace: &str,
        vm_names: &[N],
        run_ids: &[R],
    ) {
        if vm_names.is_empty() || run_ids.is_empty() {
            return;
        }
        let names = json_list(vm_names);
        let runs = json_list(run_ids);
        let namespace = namespace.to_string();
        let deleted_at = timestamp_now();
        self.write("MarkVMsDeletedByName", move |tx, _| {
            tx.execute(
                "UPDATE vm_details SET status = 'deleted', deleted_at = ?1
                 WHERE vm_name IN (SELECT value FROM json_each(?2)) AND namespace = ?3
                   AND audit_id IN (SELECT id FROM audit_log
                                    WHERE run_id IN (SELECT value FROM json_each(?4)))",
                params![deleted_at, names, namespace, runs],
            )
        });
    }

    /// Marks the named resources of `kind` deleted in the records of the given runs.
    pub fn mark_resources_deleted<N: AsRef<str>, R: AsRef<str>>(
        &self,
        kind: ResourceKind,
        namespace: &str,
        names: &[N],
        run_ids: &[R],
    ) {
        if names.is_empty() || run_ids.is_empty() {
            return;
        }
        let Some(recording) = &self.recording else {
            return;
        };
        let names = json_list(names);
        let runs = json_list(run_ids);
        let namespace = namespace.to_string();
        let deleted_at = timestamp_now();
        recording.store.submit(move |conn| {
            let result = try_write(conn, |tx| {
                tx.execute(
                    "UPDATE resource_details SET status = 'deleted', deleted_at = ?1
                     WHERE resource_name IN (SELECT value FROM json_each(?2)) AND namespace = ?3
                       AND resource_type = ?5
                       AND audit_id IN (SELECT id FROM audit_log
                                        WHERE run_id IN (SELECT value FROM json_each(?4)))",
                    params![deleted_at, names, namespace, runs, kind.as_str()],
                )
            });
            if let Err(error) = result {
                tracing::warn!(
                    op = "MarkResourcesDeletedByName",
                    r#type = kind.as_str(),
                    error = %error,
                    "audit record failed"
                );
            }
        });
    }

    /// Records how many objects the cleanup deleted and whether it deleted the namespace
    /// (`audit_log.*_deleted`; VMIs have no column: garbage collection removes them with their
    /// VMs). Why a namespace was kept or failed lands in the error summary.
    pub fn record_cleanup_counts(&self, counts: &KindCounts, namespace: Option<&NamespaceOutcome>) {
        let counts = *counts;
        let namespace_deleted = namespace.is_some_and(NamespaceOutcome::is_deleted);
        self.write("RecordCleanupCounts", move |tx, id| {
            tx.execute(
                "UPDATE audit_log SET vms_deleted = ?2, services_deleted = ?3,
                        secrets_deleted = ?4, dvs_deleted = ?5, pvcs_deleted = ?6,
                        namespace_deleted = ?7
                 WHERE id = ?1",
                params![
                    id,
                    clamp_i64(counts.vms),
                    clamp_i64(counts.services),
                    clamp_i64(counts.secrets),
                    clamp_i64(counts.dvs),
                    clamp_i64(counts.pvcs),
                    namespace_deleted
                ],
            )
        });
    }
}

/// `signal_params`: the JSON of [`crate::workloads::signal_params::SignalParams`] (only
/// recordable keys, never a credential), NULL when not recorded.
fn insert_workload(
    tx: &Transaction<'_>,
    audit_id: i64,
    w: &WorkloadRecord,
    signal_params: Option<&str>,
) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT INTO workload_details (audit_id, workload_type, enabled, vm_count, cpu_cores,
             memory, has_data_disk, data_disk_size, requires_service, status, signal_params)
         VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9)",
        params![
            audit_id,
            w.workload_type,
            w.vm_count,
            w.cpu_cores,
            w.memory,
            w.data_disk_size.is_some(),
            w.data_disk_size,
            w.requires_service,
            signal_params,
        ],
    )
}

fn clamp_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Distinct non-empty run ids, sorted (deterministic `linked_run_ids`).
pub fn sorted_run_ids<S: AsRef<str>>(run_ids: &[S]) -> Vec<String> {
    let set: std::collections::BTreeSet<&str> = run_ids
        .iter()
        .map(AsRef::as_ref)
        .filter(|id| !id.is_empty())
        .collect();
    set.into_iter().map(str::to_string).collect()
}

/// A list of strings as one JSON array parameter, expanded in SQL by `json_each`.
fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::records::CommandKind;
    use rusqlite::Connection;
    use std::sync::Mutex;

    fn params(command: CommandKind) -> ExecutionParams {
        ExecutionParams {
            command,
            namespace: "ns".into(),
            kubeconfig_path: None,
            cluster_context: Some("ctx".into()),
            container_disk_image: Some("img".into()),
            default_cpu_cores: Some(2),
            default_memory: Some("2Gi".into()),
            data_disk_size: Some("10Gi".into()),
            workloads: vec!["cpu".into(), "disk".into()],
            total_vm_count: Some(2),
            total_workload_count: Some(2),
            dry_run: false,
            ssh_auth_configured: true,
            cleanup_mode: None,
            wait_for_ready: true,
            ready_timeout_seconds: Some(600),
        }
    }

    fn open() -> (tempfile::TempDir, Auditor) {
        let dir = tempfile::tempdir().unwrap();
        let auditor = Auditor::open_path(&dir.path().join("nested/dir/a.db")).unwrap();
        (dir, auditor)
    }

    /// Reads one value through a connection of its own, after the queued writes landed.
    fn one<T: rusqlite::types::FromSql>(auditor: &Auditor, sql: &str) -> T {
        assert!(auditor.flush());
        reader(auditor).query_row(sql, [], |r| r.get(0)).unwrap()
    }

    fn reader(auditor: &Auditor) -> Connection {
        Connection::open(auditor.path().expect("enabled")).unwrap()
    }
    #[test]
    fn disabled_auditor_keeps_the_callers_run_id_and_records_nothing() {
        let run_id = Uuid::new_v4();
        let exec = Auditor::Disabled.start_execution(run_id, &params(CommandKind::Run));
        assert_eq!(exec.run_id(), run_id);
        assert!(!exec.is_recording());
        exec.record_event(&Event::vm_created("vm"));
        exec.complete_execution(ExecutionStatus::Success, None);
    }

    #[test]
    fn first_completion_wins_and_cancelled_gets_the_interrupt_summary() {
        let (_dir, auditor) = open();
        let exec = auditor.start_execution(Uuid::new_v4(), &params(CommandKind::Run));
        exec.complete_execution(ExecutionStatus::Cancelled, Some("interrupted"));
        exec.complete_execution(ExecutionStatus::Failed, Some("later error"));
        let status: String = one(&auditor, "SELECT status FROM audit_log");
        let summary: String = one(&auditor, "SELECT error_summary FROM audit_log");
        assert_eq!(
            (status.as_str(), summary.as_str()),
            ("cancelled", SUMMARY_INTERRUPTED)
        );
    }

    #[test]
    fn vm_events_link_to_the_vm_row_and_its_workload() {
        let (_dir, auditor) = open();
        let exec = auditor.start_execution(Uuid::new_v4(), &params(CommandKind::Run));
        exec.record_workload(&WorkloadRecord {
            workload_type: "cpu".into(),
            vm_count: 1,
            cpu_cores: 2,
            memory: "2Gi".into(),
            data_disk_size: None,
            requires_service: false,
        });
        exec.record_vm(&VmRecord {
            vm_name: "virtwork-cpu-0".into(),
            namespace: "ns".into(),
            component: "cpu".into(),
            role: None,
            cpu_cores: 2,
            memory: "2Gi".into(),
            container_disk_image: "img".into(),
            data_disk_size: None,
            phase: None,
        });
        exec.record_event(&Event::vm_created("virtwork-cpu-0"));
        let linked: i64 = one(
            &auditor,
            "SELECT COUNT(*) FROM events e JOIN vm_details v ON v.id = e.vm_id
             JOIN workload_details w ON w.id = e.workload_id AND w.id = v.workload_id",
        );
        assert_eq!(linked, 1);
    }

    #[test]
    fn duplicate_run_id_warns_and_stops_recording_instead_of_failing() {
        let (_dir, auditor) = open();
        let run_id = Uuid::new_v4();
        assert!(
            auditor
                .start_execution(run_id, &params(CommandKind::Run))
                .is_recording()
        );
        let second = auditor.start_execution(run_id, &params(CommandKind::Run));
        assert!(!second.is_recording());
        assert_eq!(second.run_id(), run_id);
    }

    #[test]
    fn opening_an_impossible_path_names_it() {
        let err = Auditor::open_path(Path::new("/dev/null/sub/a.db")).unwrap_err();
        assert!(matches!(err, Error::Audit(_)));
        assert!(err.to_string().contains("/dev/null/sub"), "{err}");
        assert_eq!(err.exit_code(), 1);
    }

    /// Captures what the recorder logs while `f` runs.
    fn captured_logs(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn write_failures_after_open_warn_with_the_operation_and_carry_on() {
        let (_dir, auditor) = open();
        let exec = auditor.start_execution(Uuid::new_v4(), &params(CommandKind::Run));
        assert!(exec.is_recording());
        reader(&auditor).execute_batch("DROP TABLE events").unwrap();
        let logs = captured_logs(|| {
            exec.record_event(&Event::vm_ready("virtwork-cpu-0"));
            exec.complete_execution(ExecutionStatus::Success, None);
            // The writes run on the writer thread, under this subscriber.
            assert!(auditor.flush());
        });
        assert!(logs.contains("WARN"), "{logs}");
        assert!(logs.contains("audit record failed"), "{logs}");
        assert!(logs.contains("op=\"RecordEvent\""), "{logs}");
        assert!(logs.contains("no such table: events"), "{logs}");
        let status: String = one(&auditor, "SELECT status FROM audit_log");
        assert_eq!(status, "success", "later writes still land");
    }

    #[cfg(unix)]
    #[test]
    fn the_database_is_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, auditor) = open();
        let exec = auditor.start_execution(Uuid::new_v4(), &params(CommandKind::Run));
        assert!(exec.is_recording());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("nested")), 0o700);
        assert_eq!(mode(&dir.path().join("nested/dir")), 0o700);
        assert_eq!(mode(&dir.path().join("nested/dir/a.db")), 0o600);
        for side in ["a.db-wal", "a.db-shm"] {
            let path = dir.path().join("nested/dir").join(side);
            assert_eq!(mode(&path) & 0o077, 0, "{side} is readable by others");
        }
    }

    #[test]
    fn writes_do_not_wait_for_a_locked_database() {
        let (_dir, auditor) = open();
        // Another process holds the write lock.
        let holder = reader(&auditor);
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let exec = auditor.start_execution(Uuid::new_v4(), &params(CommandKind::Run));
        for i in 0..100 {
            exec.record_event(&Event::vm_created(&format!("vm-{i}")));
        }
        exec.complete_execution(ExecutionStatus::Success, None);
        // The calls returned while the lock is still held: queued, nothing written yet.
        let written: i64 = holder
            .query_row("SELECT COUNT(*) FROM audit_log", [], |r| r.get(0))
            .unwrap();
        assert_eq!(written, 0);
        holder.execute_batch("COMMIT").unwrap();
        let events: i64 = one(&auditor, "SELECT COUNT(*) FROM events");
        assert_eq!(
            events, 100,
            "every queued write landed once the lock was released"
        );
        let status: String = one(&auditor, "SELECT status FROM audit_log");
        assert_eq!(status, "success");
    }

    #[test]
    fn linked_run_ids_are_sorted_distinct_and_non_empty() {
        assert_eq!(sorted_run_ids(&["b", "", "a", "b"]), vec!["a", "b"]);
    }
}
