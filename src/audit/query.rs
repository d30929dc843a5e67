//! Read queries behind `virtwork audit list|show`: typed rows out of the audit database, in a
//! deterministic order, serialisable as the documented JSON schema (docs/audit-schema.md).
//!
//! Reads tolerate databases written by the Go tool (NULLs where it never wrote, early files
//! without the cleanup count columns) and never write anything except the in-place schema
//! upgrade that opening performs. Rendering lives in `commands::audit`, not here.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};
use serde::Serialize;

use crate::audit::file::open_connection;
use crate::audit::records::ExecutionStatus;
use crate::error::{Error, Result};
use crate::model::{KindCounts, RunId, RunIdPrefix};

/// Which executions `audit list` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// At most this many (newest first); `None` = all.
    pub limit: Option<u32>,
    pub status: Option<ExecutionStatus>,
    pub namespace: Option<String>,
}

/// One `audit_log` row, with derived fields (`duration_seconds`, parsed lists).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionRecord {
    pub run_id: String,
    pub command: String,
    pub status: String,
    pub namespace: String,
    pub kubeconfig_path: Option<String>,
    pub cluster_context: Option<String>,
    pub container_disk_image: Option<String>,
    pub default_cpu_cores: Option<i64>,
    pub default_memory: Option<String>,
    pub data_disk_size: Option<String>,
    /// `workloads_csv` split on commas.
    pub workloads: Vec<String>,
    pub total_vm_count: Option<i64>,
    pub total_workload_count: Option<i64>,
    pub dry_run: bool,
    pub ssh_auth_configured: bool,
    pub cleanup_mode: Option<String>,
    pub wait_for_ready: bool,
    pub ready_timeout_seconds: Option<i64>,
    /// Cleanup only: the runs whose objects it deleted (`linked_run_ids`).
    pub linked_run_ids: Vec<String>,
    /// Cleanup only, once objects were deleted.
    pub deleted: Option<Deletions>,
    pub started_at: String,
    pub completed_at: Option<String>,
    /// `completed_at - started_at`, when both parse.
    pub duration_seconds: Option<i64>,
    pub error_summary: Option<String>,
}

/// `audit_log.*_deleted` of a cleanup. Serialised as documented in docs/audit-schema.md:
/// `{"vms", "services", "secrets", "data_volumes", "pvcs", "namespace"}` (no VMI column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletions {
    pub counts: KindCounts,
    pub namespace_deleted: bool,
}

impl Serialize for Deletions {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let c = &self.counts;
        let mut doc = serializer.serialize_struct("Deletions", 6)?;
        doc.serialize_field("vms", &c.vms)?;
        doc.serialize_field("services", &c.services)?;
        doc.serialize_field("secrets", &c.secrets)?;
        doc.serialize_field("data_volumes", &c.dvs)?;
        doc.serialize_field("pvcs", &c.pvcs)?;
        doc.serialize_field("namespace", &self.namespace_deleted)?;
        doc.end()
    }
}

/// One `workload_details` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkloadRow {
    pub workload_type: String,
    pub vm_count: i64,
    pub cpu_cores: i64,
    pub memory: String,
    pub has_data_disk: bool,
    pub data_disk_size: Option<String>,
    pub requires_service: bool,
    pub status: String,
}

/// One `vm_details` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmRow {
    pub vm_name: String,
    pub namespace: String,
    pub component: String,
    pub role: Option<String>,
    pub cpu_cores: i64,
    pub memory: String,
    pub container_disk_image: String,
    pub has_data_disk: bool,
    pub data_disk_size: Option<String>,
    pub phase: Option<String>,
    pub status: String,
    pub created_at: Option<String>,
    /// When its VMI was first seen scheduled / Running (NULL before schema version 3).
    pub scheduled_at: Option<String>,
    pub running_at: Option<String>,
    pub ready_at: Option<String>,
    /// `scheduled_at - created_at`, when both parse.
    pub seconds_to_scheduled: Option<i64>,
    /// `running_at - created_at`, when both parse.
    pub seconds_to_running: Option<i64>,
    /// `ready_at - created_at`, when both parse.
    pub seconds_to_ready: Option<i64>,
    pub deleted_at: Option<String>,
}

/// One `resource_details` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceRow {
    pub resource_type: String,
    pub resource_name: String,
    pub namespace: String,
    pub status: String,
    pub created_at: Option<String>,
    pub deleted_at: Option<String>,
}

/// One `events` row, with the VM and workload it links to resolved to names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventRow {
    pub occurred_at: String,
    pub event_type: String,
    pub message: Option<String>,
    pub error_detail: Option<String>,
    pub vm_name: Option<String>,
    pub workload: Option<String>,
}

/// Everything recorded about one execution, for `audit show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionDetail {
    pub execution: ExecutionRecord,
    pub workloads: Vec<WorkloadRow>,
    pub vms: Vec<VmRow>,
    pub resources: Vec<ResourceRow>,
    /// In the order they happened.
    pub events: Vec<EventRow>,
    /// Cleanups whose `linked_run_ids` contain this run id, oldest first.
    pub linked_cleanups: Vec<ExecutionRecord>,
}

/// Opens an existing audit database for reading, upgrading its schema in place when it can
/// (falls back to a read-only connection when the file is not writable).
pub fn open_existing(path: &Path) -> Result<Connection> {
    match open_connection(path) {
        Ok(conn) => Ok(conn),
        Err(upgrade_error) => {
            let Ok(real) = super::file::real_parent(path) else {
                return Err(upgrade_error);
            };
            Connection::open_with_flags(
                real,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NOFOLLOW,
            )
            .map_err(|_| upgrade_error)
        }
    }
}

fn query_failed(err: rusqlite::Error) -> Error {
    Error::Audit(format!("reading the audit database: {err}"))
}

/// Executions matching `filter`, newest first.
pub fn list_executions(conn: &Connection, filter: &ListFilter) -> Result<Vec<ExecutionRecord>> {
    let limit = filter.limit.map_or(-1, i64::from);
    let mut stmt = conn
        .prepare(
            "SELECT * FROM audit_log
             WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR namespace = ?2)
             ORDER BY started_at DESC, id DESC
             LIMIT ?3",
        )
        .map_err(query_failed)?;
    let rows = stmt
        .query_map(
            params![
                filter.status.map(ExecutionStatus::as_str),
                filter.namespace,
                limit
            ],
            execution_from_row,
        )
        .map_err(query_failed)?;
    rows.collect::<rusqlite::Result<_>>().map_err(query_failed)
}

/// One succeeded churn action (`churn_action` event): the churn's run id, when it ended
/// (RFC 3339) and its message (`<action> <ns>/<vm>: succeeded`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnActionRow {
    pub run_id: String,
    pub occurred_at: String,
    pub message: String,
}

/// Most churn actions read for one report (a day of churn at its highest rate is less).
pub const MAX_CHURN_ACTIONS: i64 = 100_000;

/// The churn actions recorded between `from` and `to` (RFC 3339 UTC, as the recorder
/// writes them, so they compare as text), oldest first, at most [`MAX_CHURN_ACTIONS`].
pub fn churn_actions(conn: &Connection, from: &str, to: &str) -> Result<Vec<ChurnActionRow>> {
    let mut stmt = conn
        .prepare(
            "SELECT a.run_id, e.occurred_at, e.message FROM events e
             JOIN audit_log a ON a.id = e.audit_id
             WHERE e.event_type = 'churn_action' AND e.occurred_at >= ?1 AND e.occurred_at <= ?2
             ORDER BY e.occurred_at, e.id LIMIT ?3",
        )
        .map_err(query_failed)?;
    let rows = stmt
        .query_map(params![from, to, MAX_CHURN_ACTIONS], |r| {
            Ok(ChurnActionRow {
                run_id: r.get(0)?,
                occurred_at: r.get(1)?,
                message: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            })
        })
        .map_err(query_failed)?;
    rows.collect::<rusqlite::Result<_>>().map_err(query_failed)
}

/// Which executions a run id prefix is looked up among.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executions {
    /// Every recorded execution (`audit show`, `--execution`, `report`).
    All,
    /// Only `run` executions: the ids that label objects on the cluster (`--run-id`).
    Runs,
}

/// Most ids a prefix lookup returns: more would only be listed as ambiguous.
pub const MAX_PREFIX_MATCHES: i64 = 100;

/// The distinct run ids in the database at `path` that begin with `prefix`, among `which`
/// executions; none when there is no database. Opens read-only: a lookup never upgrades or
/// creates a file.
pub fn run_ids_with_prefix(
    path: &Path,
    prefix: &RunIdPrefix,
    which: Executions,
) -> Result<Vec<RunId>> {
    if path.as_os_str() == ":memory:" || !path.is_file() {
        return Ok(Vec::new());
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(query_failed)?;
    // The prefix is hex digits only, so it holds no LIKE wildcard.
    let mut stmt = conn
        .prepare(
            "SELECT DISTINCT run_id FROM audit_log
             WHERE replace(lower(run_id), '-', '') LIKE ?1 || '%' AND (?2 = 0 OR command = 'run')
             ORDER BY run_id LIMIT ?3",
        )
        .map_err(query_failed)?;
    let rows = stmt
        .query_map(
            params![
                prefix.digits(),
                which == Executions::Runs,
                MAX_PREFIX_MATCHES
            ],
            |r| r.get::<_, String>(0),
        )
        .map_err(query_failed)?;
    let ids: Vec<String> = rows
        .collect::<rusqlite::Result<_>>()
        .map_err(query_failed)?;
    Ok(ids
        .iter()
        .filter_map(|id| uuid::Uuid::parse_str(id).ok().map(RunId::from))
        .collect())
}

/// What the audit database recorded of one VM of a run: what `virtwork verify` judges it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedVm {
    /// `vm_details.component`: the workload the run created it for.
    pub workload: String,
    pub role: Option<String>,
    /// The memory it was planned with, as recorded (`2Gi`).
    pub memory: String,
    /// Its workload's `signal_params` (JSON text, at most
    /// [`MAX_SIGNAL_PARAMS_CHARS`] + 1 characters read); None when the run did not record them
    /// (written before schema version 4, or by the Go tool).
    pub signal_params: Option<String>,
}

/// A run's recorded VMs by (namespace, name).
pub type RecordedRun = std::collections::BTreeMap<(String, String), RecordedVm>;

/// Longest `signal_params` text read (one more, so a longer one is seen to be too long).
pub const MAX_SIGNAL_PARAMS_CHARS: usize = 4096;
/// Most VM rows read of one run: far above any fleet, a bound on a damaged file.
const MAX_RECORDED_VMS: i64 = 1_000_000;

/// Opens the database at `path` read-only (never creating or upgrading it); None when there is
/// no such file.
pub fn open_read_only(path: &Path) -> Result<Option<Connection>> {
    if path.as_os_str() == ":memory:" || !path.is_file() {
        return Ok(None);
    }
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map(Some)
    .map_err(query_failed)
}

/// The VMs the `run` execution `run_id` recorded; None when the database has no run with that
/// id. Tolerates files before schema version 4 (no `signal_params`: every VM's is None).
pub fn recorded_run(conn: &Connection, run_id: &str) -> Result<Option<RecordedRun>> {
    let audit_id: Option<i64> = conn
        .query_row(
            "SELECT id FROM audit_log WHERE run_id = ?1 AND command = 'run'",
            [run_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(query_failed)?;
    let Some(audit_id) = audit_id else {
        return Ok(None);
    };
    let columns =
        crate::audit::schema::column_names(conn, "workload_details").map_err(query_failed)?;
    let params = match columns.iter().any(|c| c == "signal_params") {
        true => format!(
            "substr(w.signal_params, 1, {})",
            MAX_SIGNAL_PARAMS_CHARS + 1
        ),
        false => "NULL".to_string(),
    };
    let mut stmt = conn
        .prepare(&format!(
            "SELECT v.namespace, v.vm_name, v.component, v.role, v.memory, {params}
             FROM vm_details v LEFT JOIN workload_details w ON w.id = v.workload_id
             WHERE v.audit_id = ?1 ORDER BY v.id LIMIT ?2"
        ))
        .map_err(query_failed)?;
    let rows = stmt
        .query_map(params![audit_id, MAX_RECORDED_VMS], |r| {
            Ok((
                (r.get::<_, String>(0)?, r.get::<_, String>(1)?),
                RecordedVm {
                    workload: r.get(2)?,
                    role: r.get(3)?,
                    memory: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                    signal_params: r.get(5)?,
                },
            ))
        })
        .map_err(query_failed)?;
    // A name recorded twice (a VM replaced) keeps its latest row.
    rows.collect::<rusqlite::Result<RecordedRun>>()
        .map(Some)
        .map_err(query_failed)
}

/// Everything recorded for `run_id`, or `None` when no execution has that id.
pub fn show_execution(conn: &Connection, run_id: &str) -> Result<Option<ExecutionDetail>> {
    let found = conn
        .query_row(
            "SELECT * FROM audit_log WHERE run_id = ?1",
            [run_id],
            |row| Ok((row.get::<_, i64>("id")?, execution_from_row(row)?)),
        )
        .optional()
        .map_err(query_failed)?;
    let Some((audit_id, execution)) = found else {
        return Ok(None);
    };
    Ok(Some(ExecutionDetail {
        execution,
        workloads: workloads(conn, audit_id).map_err(query_failed)?,
        vms: vms(conn, audit_id).map_err(query_failed)?,
        resources: resources(conn, audit_id).map_err(query_failed)?,
        events: events(conn, audit_id).map_err(query_failed)?,
        linked_cleanups: linked_cleanups(conn, run_id).map_err(query_failed)?,
    }))
}

fn workloads(conn: &Connection, audit_id: i64) -> rusqlite::Result<Vec<WorkloadRow>> {
    let mut stmt = conn.prepare(
        "SELECT workload_type, vm_count, cpu_cores, memory, has_data_disk, data_disk_size,
                requires_service, status
         FROM workload_details WHERE audit_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([audit_id], |r| {
        Ok(WorkloadRow {
            workload_type: r.get(0)?,
            vm_count: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
            cpu_cores: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
            memory: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            has_data_disk: flag(r.get(4)?),
            data_disk_size: r.get(5)?,
            requires_service: flag(r.get(6)?),
            status: r.get(7)?,
        })
    })?;
    rows.collect()
}

fn vms(conn: &Connection, audit_id: i64) -> rusqlite::Result<Vec<VmRow>> {
    // A database opened read-only may predate schema version 3 (no timeline columns).
    let columns = crate::audit::schema::column_names(conn, "vm_details")?;
    let timeline = if columns.iter().any(|c| c == "running_at") {
        "scheduled_at, running_at"
    } else {
        "NULL, NULL"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT vm_name, namespace, component, role, cpu_cores, memory, container_disk_image,
                has_data_disk, data_disk_size, phase, status, created_at, ready_at, deleted_at,
                {timeline}
         FROM vm_details WHERE audit_id = ?1 ORDER BY id"
    ))?;
    let rows = stmt.query_map([audit_id], |r| {
        let created_at: Option<String> = r.get(11)?;
        let ready_at: Option<String> = r.get(12)?;
        let scheduled_at: Option<String> = r.get(14)?;
        let running_at: Option<String> = r.get(15)?;
        Ok(VmRow {
            vm_name: r.get(0)?,
            namespace: r.get(1)?,
            component: r.get(2)?,
            role: r.get(3)?,
            cpu_cores: r.get::<_, Option<i64>>(4)?.unwrap_or(0),
            memory: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
            container_disk_image: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
            has_data_disk: flag(r.get(7)?),
            data_disk_size: r.get(8)?,
            phase: r.get(9)?,
            status: r.get(10)?,
            seconds_to_scheduled: seconds_between(created_at.as_deref(), scheduled_at.as_deref()),
            seconds_to_running: seconds_between(created_at.as_deref(), running_at.as_deref()),
            seconds_to_ready: seconds_between(created_at.as_deref(), ready_at.as_deref()),
            created_at,
            scheduled_at,
            running_at,
            ready_at,
            deleted_at: r.get(13)?,
        })
    })?;
    let mut vms: Vec<VmRow> = rows.collect::<rusqlite::Result<_>>()?;
    vms.sort_by(|a, b| crate::model::natural_cmp(&a.vm_name, &b.vm_name));
    Ok(vms)
}

fn resources(conn: &Connection, audit_id: i64) -> rusqlite::Result<Vec<ResourceRow>> {
    let mut stmt = conn.prepare(
        "SELECT resource_type, resource_name, namespace, status, created_at, deleted_at
         FROM resource_details WHERE audit_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([audit_id], |r| {
        Ok(ResourceRow {
            resource_type: r.get(0)?,
            resource_name: r.get(1)?,
            namespace: r.get(2)?,
            status: r.get(3)?,
            created_at: r.get(4)?,
            deleted_at: r.get(5)?,
        })
    })?;
    rows.collect()
}

fn events(conn: &Connection, audit_id: i64) -> rusqlite::Result<Vec<EventRow>> {
    let mut stmt = conn.prepare(
        "SELECT e.occurred_at, e.event_type, e.message, e.error_detail, v.vm_name,
                w.workload_type
         FROM events e
         LEFT JOIN vm_details v ON v.id = e.vm_id
         LEFT JOIN workload_details w ON w.id = e.workload_id
         WHERE e.audit_id = ?1 ORDER BY e.occurred_at, e.id",
    )?;
    let rows = stmt.query_map([audit_id], |r| {
        Ok(EventRow {
            occurred_at: r.get(0)?,
            event_type: r.get(1)?,
            message: r.get(2)?,
            error_detail: r.get(3)?,
            vm_name: r.get(4)?,
            workload: r.get(5)?,
        })
    })?;
    rows.collect()
}

/// Cleanups whose JSON `linked_run_ids` contain `run_id`. The LIKE narrows the scan; the
/// parsed array decides, so a malformed array never matches by accident.
fn linked_cleanups(conn: &Connection, run_id: &str) -> rusqlite::Result<Vec<ExecutionRecord>> {
    let mut stmt = conn.prepare(
        "SELECT * FROM audit_log
         WHERE linked_run_ids LIKE '%' || ?1 || '%'
         ORDER BY started_at, id",
    )?;
    let rows = stmt.query_map([run_id], execution_from_row)?;
    let mut cleanups = Vec::new();
    for row in rows {
        let row = row?;
        if row.linked_run_ids.iter().any(|id| id == run_id) {
            cleanups.push(row);
        }
    }
    Ok(cleanups)
}

fn execution_from_row(r: &Row<'_>) -> rusqlite::Result<ExecutionRecord> {
    // Columns read by name and optional where an early reference database may lack them.
    let optional_int = |name: &str| r.get::<_, Option<i64>>(name).ok().flatten();
    let started_at: String = r.get("started_at")?;
    let completed_at: Option<String> = r.get("completed_at")?;
    let linked: Option<String> = r.get("linked_run_ids")?;
    // A count column is never negative as written; a foreign file's odd value reads as 0.
    let count = |name: &str| {
        optional_int(name)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    let deleted = optional_int("vms_deleted").map(|_| Deletions {
        counts: KindCounts {
            vms: count("vms_deleted"),
            services: count("services_deleted"),
            secrets: count("secrets_deleted"),
            dvs: count("dvs_deleted"),
            pvcs: count("pvcs_deleted"),
            vmis: 0,
            // No column: migrations are counted in the cleanup's own report only.
            migrations: 0,
        },
        namespace_deleted: optional_int("namespace_deleted").is_some_and(|n| n != 0),
    });
    Ok(ExecutionRecord {
        run_id: r.get("run_id")?,
        command: r.get("command")?,
        status: r.get("status")?,
        namespace: r.get("namespace")?,
        kubeconfig_path: r.get("kubeconfig_path")?,
        cluster_context: r.get("cluster_context")?,
        container_disk_image: r.get("container_disk_image")?,
        default_cpu_cores: r.get("default_cpu_cores")?,
        default_memory: r.get("default_memory")?,
        data_disk_size: r.get("data_disk_size")?,
        workloads: split_csv(r.get::<_, Option<String>>("workloads_csv")?.as_deref()),
        total_vm_count: r.get("total_vm_count")?,
        total_workload_count: r.get("total_workload_count")?,
        dry_run: flag(r.get("dry_run")?),
        ssh_auth_configured: flag(r.get("ssh_auth_configured")?),
        cleanup_mode: r.get("cleanup_mode")?,
        wait_for_ready: flag(r.get("wait_for_ready")?),
        ready_timeout_seconds: r.get("ready_timeout_seconds")?,
        linked_run_ids: linked
            .as_deref()
            .and_then(|json| serde_json::from_str::<Vec<String>>(json).ok())
            .unwrap_or_default(),
        deleted,
        duration_seconds: seconds_between(Some(&started_at), completed_at.as_deref()),
        started_at,
        completed_at,
        error_summary: r.get("error_summary")?,
    })
}

fn flag(value: Option<i64>) -> bool {
    value.is_some_and(|v| v != 0)
}

fn split_csv(csv: Option<&str>) -> Vec<String> {
    csv.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// Whole seconds from `from` to `to` when both are RFC 3339 timestamps.
pub fn seconds_between(from: Option<&str>, to: Option<&str>) -> Option<i64> {
    let from: jiff::Timestamp = from?.parse().ok()?;
    let to: jiff::Timestamp = to?.parse().ok()?;
    Some(to.as_second() - from.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_between_needs_two_valid_timestamps() {
        assert_eq!(
            seconds_between(Some("2026-01-01T00:00:00Z"), Some("2026-01-01T00:01:05Z")),
            Some(65)
        );
        assert_eq!(seconds_between(Some("2026-01-01T00:00:00Z"), None), None);
        assert_eq!(
            seconds_between(Some("yesterday"), Some("2026-01-01T00:00:00Z")),
            None
        );
    }

    #[test]
    fn workloads_csv_splits_and_drops_empty_entries() {
        assert_eq!(split_csv(Some("cpu, disk,,")), vec!["cpu", "disk"]);
        assert!(split_csv(None).is_empty());
    }
}
