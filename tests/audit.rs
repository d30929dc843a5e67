//! The audit database as users and the Go tool see it: the exact reference schema, upgrades of
//! Go-written files, the rows each kind of execution leaves, concurrent writers, the absence of
//! credentials, and `virtwork audit list|show` through the real binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;
use rusqlite::types::Value;
use uuid::Uuid;
use virtwork::audit::query;
use virtwork::audit::schema;
use virtwork::audit::{
    Auditor, CleanupMode, CommandKind, Event, Execution, ExecutionParams, ExecutionStatus,
    ResourceKind, VmRecord, WorkloadRecord, WorkloadStatus,
};
use virtwork::model::{KindCounts, NamespaceOutcome};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit").join("virtwork.db");
    (dir, path)
}

fn connect(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

/// Every row of `sql` as dynamic values, for exact comparisons.
fn rows(conn: &Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let width = stmt.column_count();
    stmt.query_map([], |r| (0..width).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn int(n: i64) -> Value {
    Value::Integer(n)
}

const NULL: Value = Value::Null;

/// A stored timestamp is UTC RFC 3339 with second precision: `2026-01-01T00:00:00Z`.
fn assert_timestamp(value: &Value) {
    let Value::Text(s) = value else {
        panic!("expected a timestamp, got {value:?}")
    };
    assert_eq!(s.len(), 20, "second precision: {s}");
    assert!(s.ends_with('Z'), "UTC: {s}");
    s.parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{s}: {e}"));
}

fn run_params(namespace: &str, workloads: &[&str], vms: u32) -> ExecutionParams {
    ExecutionParams {
        command: CommandKind::Run,
        namespace: namespace.to_string(),
        kubeconfig_path: Some("/home/op/.kube/config".to_string()),
        cluster_context: Some("kind-test".to_string()),
        container_disk_image: Some("quay.io/containerdisks/fedora:42".to_string()),
        default_cpu_cores: Some(2),
        default_memory: Some("2Gi".to_string()),
        data_disk_size: Some("10Gi".to_string()),
        workloads: workloads.iter().map(|w| w.to_string()).collect(),
        total_vm_count: Some(vms),
        total_workload_count: Some(workloads.len() as u32),
        dry_run: false,
        ssh_auth_configured: false,
        cleanup_mode: None,
        wait_for_ready: true,
        ready_timeout_seconds: Some(600),
    }
}

fn cleanup_params(namespace: &str, mode: CleanupMode) -> ExecutionParams {
    ExecutionParams {
        command: CommandKind::Cleanup,
        cleanup_mode: Some(mode),
        workloads: Vec::new(),
        total_vm_count: None,
        total_workload_count: None,
        ..run_params(namespace, &[], 0)
    }
}

fn workload(name: &str, vm_count: u32, requires_service: bool) -> WorkloadRecord {
    WorkloadRecord {
        workload_type: name.to_string(),
        vm_count,
        cpu_cores: 2,
        memory: "2Gi".to_string(),
        data_disk_size: (name == "disk").then(|| "10Gi".to_string()),
        requires_service,
    }
}

fn vm(name: &str, namespace: &str, component: &str, role: Option<&str>) -> VmRecord {
    VmRecord {
        vm_name: name.to_string(),
        namespace: namespace.to_string(),
        component: component.to_string(),
        role: role.map(str::to_string),
        cpu_cores: 2,
        memory: "2Gi".to_string(),
        container_disk_image: "quay.io/containerdisks/fedora:42".to_string(),
        data_disk_size: (component == "disk").then(|| "10Gi".to_string()),
        phase: None,
    }
}

fn ready_time() -> jiff::Timestamp {
    "2026-03-01T10:00:07Z".parse().unwrap()
}

/// What `virtwork run` records for a successful run of cpu (1 VM) + network (server/client).
fn record_successful_run(auditor: &Auditor, run_id: Uuid, namespace: &str) -> Execution {
    let exec = auditor.start_execution(run_id, &run_params(namespace, &["cpu", "network"], 3));
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    exec.record_workload(&workload("cpu", 1, false));
    exec.record_workload(&workload("network", 2, true));
    exec.record_event(&Event::planned(3, 2));
    exec.record_resource(ResourceKind::Service, "virtwork-iperf3-server", namespace);
    exec.record_event(&Event::service_created("virtwork-iperf3-server", "network"));
    let vms = [
        ("virtwork-cpu-0", "cpu", None),
        ("virtwork-network-server-0", "network", Some("server")),
        ("virtwork-network-client-0", "network", Some("client")),
    ];
    for (name, _, _) in vms {
        exec.record_resource(
            ResourceKind::Secret,
            &format!("{name}-cloudinit"),
            namespace,
        );
    }
    for (name, component, role) in vms {
        exec.record_vm(&vm(name, namespace, component, role));
        exec.record_event(&Event::vm_created(name));
    }
    for (name, _, _) in vms {
        exec.update_vm_ready(name, "Running", ready_time());
        exec.record_event(&Event::vm_ready(name));
    }
    exec.set_workload_status("cpu", WorkloadStatus::Created);
    exec.set_workload_status("network", WorkloadStatus::Created);
    exec.complete_execution(ExecutionStatus::Success, None);
    exec
}

/// A run whose second cpu VM is rejected by the API server.
fn record_failed_run(auditor: &Auditor, run_id: Uuid, namespace: &str) -> Execution {
    let exec = auditor.start_execution(run_id, &run_params(namespace, &["cpu"], 2));
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    exec.record_workload(&workload("cpu", 2, false));
    exec.record_event(&Event::planned(2, 1));
    exec.record_vm(&vm("virtwork-cpu-0", namespace, "cpu", None));
    exec.record_event(&Event::vm_created("virtwork-cpu-0"));
    exec.record_event(
        &Event::vm_failed("virtwork-cpu-1", "admission webhook denied the request")
            .with_workload("cpu"),
    );
    exec.set_workload_status("cpu", WorkloadStatus::Failed);
    exec.complete_execution(
        ExecutionStatus::Failed,
        Some("creating VMs: creating VM \"virtwork-cpu-1\": admission webhook denied the request"),
    );
    exec
}

/// A run interrupted by Ctrl-C while waiting for readiness.
fn record_interrupted_run(auditor: &Auditor, run_id: Uuid, namespace: &str) -> Execution {
    let exec = auditor.start_execution(run_id, &run_params(namespace, &["memory"], 1));
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    exec.record_workload(&workload("memory", 1, false));
    exec.record_vm(&vm("virtwork-memory-0", namespace, "memory", None));
    exec.update_vm_phase("virtwork-memory-0", "Scheduling");
    exec.record_event(&Event::vm_created("virtwork-memory-0"));
    exec.complete_execution(ExecutionStatus::Cancelled, None);
    exec
}

fn audit_row(conn: &Connection, run_id: Uuid, columns: &str) -> Vec<Value> {
    let mut found = rows(
        conn,
        &format!("SELECT {columns} FROM audit_log WHERE run_id = '{run_id}'"),
    );
    assert_eq!(found.len(), 1, "one audit_log row for {run_id}");
    found.remove(0)
}

// ---------------------------------------------------------------------------------------------
// The schema is the reference's v1, column by column
// ---------------------------------------------------------------------------------------------

/// (name, declared type, NOT NULL, default as written, primary key)
type Col = (&'static str, &'static str, bool, Option<&'static str>, bool);

const AUDIT_LOG: &[Col] = &[
    ("id", "INTEGER", false, None, true),
    ("run_id", "TEXT", true, None, false),
    ("linked_run_ids", "TEXT", false, None, false),
    ("command", "TEXT", true, None, false),
    ("status", "TEXT", true, Some("'in_progress'"), false),
    ("kubeconfig_path", "TEXT", false, None, false),
    ("cluster_context", "TEXT", false, None, false),
    ("namespace", "TEXT", true, None, false),
    ("container_disk_image", "TEXT", false, None, false),
    ("default_cpu_cores", "INTEGER", false, None, false),
    ("default_memory", "TEXT", false, None, false),
    ("data_disk_size", "TEXT", false, None, false),
    ("workloads_csv", "TEXT", false, None, false),
    ("total_vm_count", "INTEGER", false, None, false),
    ("total_workload_count", "INTEGER", false, None, false),
    ("dry_run", "INTEGER", true, Some("0"), false),
    ("ssh_auth_configured", "INTEGER", true, Some("0"), false),
    ("cleanup_mode", "TEXT", false, None, false),
    ("wait_for_ready", "INTEGER", true, Some("1"), false),
    ("ready_timeout_seconds", "INTEGER", false, None, false),
    ("vms_deleted", "INTEGER", false, None, false),
    ("services_deleted", "INTEGER", false, None, false),
    ("secrets_deleted", "INTEGER", false, None, false),
    ("dvs_deleted", "INTEGER", false, None, false),
    ("pvcs_deleted", "INTEGER", false, None, false),
    ("namespace_deleted", "INTEGER", false, None, false),
    ("started_at", "TEXT", true, None, false),
    ("completed_at", "TEXT", false, None, false),
    ("error_summary", "TEXT", false, None, false),
];

const WORKLOAD_DETAILS: &[Col] = &[
    ("id", "INTEGER", false, None, true),
    ("audit_id", "INTEGER", true, None, false),
    ("workload_type", "TEXT", true, None, false),
    ("enabled", "INTEGER", true, Some("1"), false),
    ("vm_count", "INTEGER", true, None, false),
    ("cpu_cores", "INTEGER", true, None, false),
    ("memory", "TEXT", true, None, false),
    ("has_data_disk", "INTEGER", true, Some("0"), false),
    ("data_disk_size", "TEXT", false, None, false),
    ("requires_service", "INTEGER", true, Some("0"), false),
    ("status", "TEXT", true, Some("'pending'"), false),
    // Migration 4 (ours, additive and nullable): the signal params the workload was planned
    // with, which verify judges its VMs by.
    ("signal_params", "TEXT", false, None, false),
];

/// Columns our migrations append to `workload_details` after the reference schema.
const WORKLOAD_DETAILS_ADDED: usize = 1;

const VM_DETAILS: &[Col] = &[
    ("id", "INTEGER", false, None, true),
    ("audit_id", "INTEGER", true, None, false),
    ("workload_id", "INTEGER", false, None, false),
    ("vm_name", "TEXT", true, None, false),
    ("namespace", "TEXT", true, None, false),
    ("component", "TEXT", true, None, false),
    ("role", "TEXT", false, None, false),
    ("cpu_cores", "INTEGER", true, None, false),
    ("memory", "TEXT", true, None, false),
    ("container_disk_image", "TEXT", true, None, false),
    ("has_data_disk", "INTEGER", true, Some("0"), false),
    ("data_disk_size", "TEXT", false, None, false),
    ("phase", "TEXT", false, None, false),
    ("status", "TEXT", true, Some("'planned'"), false),
    ("created_at", "TEXT", false, None, false),
    ("ready_at", "TEXT", false, None, false),
    ("deleted_at", "TEXT", false, None, false),
    // Migration 3 (ours, additive and nullable): the VMI's first Scheduled/Running sighting.
    ("scheduled_at", "TEXT", false, None, false),
    ("running_at", "TEXT", false, None, false),
];

/// Columns our migrations append to `vm_details` after the reference schema.
const VM_DETAILS_ADDED: usize = 2;

const RESOURCE_DETAILS: &[Col] = &[
    ("id", "INTEGER", false, None, true),
    ("audit_id", "INTEGER", true, None, false),
    ("resource_type", "TEXT", true, None, false),
    ("resource_name", "TEXT", true, None, false),
    ("namespace", "TEXT", true, None, false),
    ("status", "TEXT", true, Some("'created'"), false),
    ("created_at", "TEXT", false, None, false),
    ("deleted_at", "TEXT", false, None, false),
];

const EVENTS: &[Col] = &[
    ("id", "INTEGER", false, None, true),
    ("audit_id", "INTEGER", true, None, false),
    ("vm_id", "INTEGER", false, None, false),
    ("workload_id", "INTEGER", false, None, false),
    ("event_type", "TEXT", true, None, false),
    ("message", "TEXT", false, None, false),
    ("error_detail", "TEXT", false, None, false),
    ("occurred_at", "TEXT", true, None, false),
];

const SCHEMA_VERSION: &[Col] = &[("version", "INTEGER", true, None, false)];

/// (index name, unique, indexed columns)
const INDEXES: &[(&str, &str, bool, &[&str])] = &[
    (
        "audit_log",
        "idx_audit_log_started_at",
        false,
        &["started_at"],
    ),
    (
        "audit_log",
        "idx_audit_log_namespace",
        false,
        &["namespace"],
    ),
    ("audit_log", "idx_audit_log_status", false, &["status"]),
    ("audit_log", "idx_audit_log_run_id", false, &["run_id"]),
    (
        "audit_log",
        "sqlite_autoindex_audit_log_1",
        true,
        &["run_id"],
    ),
    (
        "workload_details",
        "idx_workload_details_audit_id",
        false,
        &["audit_id"],
    ),
    (
        "workload_details",
        "idx_workload_details_type",
        false,
        &["workload_type"],
    ),
    (
        "vm_details",
        "idx_vm_details_audit_id",
        false,
        &["audit_id"],
    ),
    (
        "vm_details",
        "idx_vm_details_workload_id",
        false,
        &["workload_id"],
    ),
    ("vm_details", "idx_vm_details_vm_name", false, &["vm_name"]),
    (
        "resource_details",
        "idx_resource_details_audit_id",
        false,
        &["audit_id"],
    ),
    (
        "resource_details",
        "idx_resource_details_type",
        false,
        &["resource_type"],
    ),
    ("events", "idx_events_audit_id", false, &["audit_id"]),
    ("events", "idx_events_event_type", false, &["event_type"]),
    ("events", "idx_events_occurred_at", false, &["occurred_at"]),
];

/// (table, column, referenced table, referenced column)
const FOREIGN_KEYS: &[(&str, &str, &str, &str)] = &[
    ("workload_details", "audit_id", "audit_log", "id"),
    ("vm_details", "audit_id", "audit_log", "id"),
    ("vm_details", "workload_id", "workload_details", "id"),
    ("resource_details", "audit_id", "audit_log", "id"),
    ("events", "audit_id", "audit_log", "id"),
    ("events", "vm_id", "vm_details", "id"),
    ("events", "workload_id", "workload_details", "id"),
];

fn table_info(conn: &Connection, table: &str) -> Vec<(String, String, bool, Option<String>, bool)> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)? != 0,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, i64>(5)? != 0,
        ))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

fn expected_columns(cols: &[Col]) -> Vec<(String, String, bool, Option<String>, bool)> {
    cols.iter()
        .map(|(n, t, nn, d, pk)| {
            (
                n.to_string(),
                t.to_string(),
                *nn,
                d.map(str::to_string),
                *pk,
            )
        })
        .collect()
}

fn indexes(conn: &Connection) -> BTreeSet<(String, String, bool, Vec<String>)> {
    let mut found = BTreeSet::new();
    for table in [
        "audit_log",
        "workload_details",
        "vm_details",
        "resource_details",
        "events",
    ] {
        let list: Vec<(String, bool)> = {
            let mut stmt = conn
                .prepare(&format!("PRAGMA index_list({table})"))
                .unwrap();
            stmt.query_map([], |r| {
                Ok((r.get::<_, String>(1)?, r.get::<_, i64>(2)? != 0))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
        };
        for (name, unique) in list {
            let mut stmt = conn.prepare(&format!("PRAGMA index_info({name})")).unwrap();
            let columns: Vec<String> = stmt
                .query_map([], |r| r.get::<_, String>(2))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            found.insert((table.to_string(), name, unique, columns));
        }
    }
    found
}

fn foreign_keys(conn: &Connection) -> BTreeSet<(String, String, String, String, String, String)> {
    let mut found = BTreeSet::new();
    for table in [
        "audit_log",
        "workload_details",
        "vm_details",
        "resource_details",
        "events",
    ] {
        let mut stmt = conn
            .prepare(&format!("PRAGMA foreign_key_list({table})"))
            .unwrap();
        let keys: Vec<(String, String, String, String, String)> = stmt
            .query_map([], |r| {
                Ok((r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        for (to_table, from, to, on_update, on_delete) in keys {
            found.insert((table.to_string(), from, to_table, to, on_update, on_delete));
        }
    }
    found
}

fn assert_reference_schema(conn: &Connection) {
    for (table, cols) in [
        ("audit_log", AUDIT_LOG),
        ("workload_details", WORKLOAD_DETAILS),
        ("vm_details", VM_DETAILS),
        ("resource_details", RESOURCE_DETAILS),
        ("events", EVENTS),
        ("schema_version", SCHEMA_VERSION),
    ] {
        assert_eq!(
            table_info(conn, table),
            expected_columns(cols),
            "columns of {table}"
        );
    }
    let expected_indexes: BTreeSet<_> = INDEXES
        .iter()
        .map(|(t, n, u, c)| {
            (
                t.to_string(),
                n.to_string(),
                *u,
                c.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(indexes(conn), expected_indexes);
    let expected_keys: BTreeSet<_> = FOREIGN_KEYS
        .iter()
        .map(|(t, f, rt, rc)| {
            let no_action = "NO ACTION".to_string();
            (
                t.to_string(),
                f.to_string(),
                rt.to_string(),
                rc.to_string(),
                no_action.clone(),
                no_action,
            )
        })
        .collect();
    assert_eq!(foreign_keys(conn), expected_keys);
    let tables: Vec<Vec<Value>> = rows(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    );
    let tables: Vec<&Value> = tables.iter().map(|r| &r[0]).collect();
    assert_eq!(
        tables,
        [
            "audit_log",
            "events",
            "resource_details",
            "schema_version",
            "sqlite_sequence",
            "vm_details",
            "workload_details"
        ]
        .iter()
        .map(|t| text(t))
        .collect::<Vec<_>>()
        .iter()
        .collect::<Vec<_>>()
    );
    assert_eq!(
        rows(conn, "SELECT version FROM schema_version"),
        vec![vec![int(schema::latest_version())]],
        "exactly one schema_version row at the latest version"
    );
}

#[test]
fn new_database_has_the_reference_schema_column_by_column() {
    let (_dir, path) = temp_db();
    Auditor::open_path(&path).unwrap();
    let conn = connect(&path);
    assert_reference_schema(&conn);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

// ---------------------------------------------------------------------------------------------
// Databases written by the Go tool upgrade in place without loss
// ---------------------------------------------------------------------------------------------

/// The Go tool's schema v1, as its migration 1 creates it.
const GO_V1_DDL: &str = "
CREATE TABLE IF NOT EXISTS audit_log (
	id                    INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id                TEXT    NOT NULL UNIQUE,
	linked_run_ids        TEXT,
	command               TEXT    NOT NULL,
	status                TEXT    NOT NULL DEFAULT 'in_progress',
	kubeconfig_path       TEXT,
	cluster_context       TEXT,
	namespace             TEXT    NOT NULL,
	container_disk_image  TEXT,
	default_cpu_cores     INTEGER,
	default_memory        TEXT,
	data_disk_size        TEXT,
	workloads_csv         TEXT,
	total_vm_count        INTEGER,
	total_workload_count  INTEGER,
	dry_run               INTEGER NOT NULL DEFAULT 0,
	ssh_auth_configured   INTEGER NOT NULL DEFAULT 0,
	cleanup_mode          TEXT,
	wait_for_ready        INTEGER NOT NULL DEFAULT 1,
	ready_timeout_seconds INTEGER,
	vms_deleted           INTEGER,
	services_deleted      INTEGER,
	secrets_deleted       INTEGER,
	dvs_deleted           INTEGER,
	pvcs_deleted          INTEGER,
	namespace_deleted     INTEGER,
	started_at            TEXT    NOT NULL,
	completed_at          TEXT,
	error_summary         TEXT
);
CREATE INDEX IF NOT EXISTS idx_audit_log_started_at ON audit_log(started_at);
CREATE INDEX IF NOT EXISTS idx_audit_log_namespace  ON audit_log(namespace);
CREATE INDEX IF NOT EXISTS idx_audit_log_status     ON audit_log(status);
CREATE INDEX IF NOT EXISTS idx_audit_log_run_id     ON audit_log(run_id);
CREATE TABLE IF NOT EXISTS workload_details (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	audit_id         INTEGER NOT NULL REFERENCES audit_log(id),
	workload_type    TEXT    NOT NULL,
	enabled          INTEGER NOT NULL DEFAULT 1,
	vm_count         INTEGER NOT NULL,
	cpu_cores        INTEGER NOT NULL,
	memory           TEXT    NOT NULL,
	has_data_disk    INTEGER NOT NULL DEFAULT 0,
	data_disk_size   TEXT,
	requires_service INTEGER NOT NULL DEFAULT 0,
	status           TEXT    NOT NULL DEFAULT 'pending'
);
CREATE INDEX IF NOT EXISTS idx_workload_details_audit_id ON workload_details(audit_id);
CREATE INDEX IF NOT EXISTS idx_workload_details_type     ON workload_details(workload_type);
CREATE TABLE IF NOT EXISTS vm_details (
	id                   INTEGER PRIMARY KEY AUTOINCREMENT,
	audit_id             INTEGER NOT NULL REFERENCES audit_log(id),
	workload_id          INTEGER REFERENCES workload_details(id),
	vm_name              TEXT    NOT NULL,
	namespace            TEXT    NOT NULL,
	component            TEXT    NOT NULL,
	role                 TEXT,
	cpu_cores            INTEGER NOT NULL,
	memory               TEXT    NOT NULL,
	container_disk_image TEXT    NOT NULL,
	has_data_disk        INTEGER NOT NULL DEFAULT 0,
	data_disk_size       TEXT,
	phase                TEXT,
	status               TEXT    NOT NULL DEFAULT 'planned',
	created_at           TEXT,
	ready_at             TEXT,
	deleted_at           TEXT
);
CREATE INDEX IF NOT EXISTS idx_vm_details_audit_id    ON vm_details(audit_id);
CREATE INDEX IF NOT EXISTS idx_vm_details_workload_id ON vm_details(workload_id);
CREATE INDEX IF NOT EXISTS idx_vm_details_vm_name     ON vm_details(vm_name);
CREATE TABLE IF NOT EXISTS resource_details (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	audit_id      INTEGER NOT NULL REFERENCES audit_log(id),
	resource_type TEXT    NOT NULL,
	resource_name TEXT    NOT NULL,
	namespace     TEXT    NOT NULL,
	status        TEXT    NOT NULL DEFAULT 'created',
	created_at    TEXT,
	deleted_at    TEXT
);
CREATE INDEX IF NOT EXISTS idx_resource_details_audit_id ON resource_details(audit_id);
CREATE INDEX IF NOT EXISTS idx_resource_details_type     ON resource_details(resource_type);
CREATE TABLE IF NOT EXISTS events (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	audit_id     INTEGER NOT NULL REFERENCES audit_log(id),
	vm_id        INTEGER REFERENCES vm_details(id),
	workload_id  INTEGER REFERENCES workload_details(id),
	event_type   TEXT    NOT NULL,
	message      TEXT,
	error_detail TEXT,
	occurred_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_events_audit_id   ON events(audit_id);
CREATE INDEX IF NOT EXISTS idx_events_event_type ON events(event_type);
CREATE INDEX IF NOT EXISTS idx_events_occurred_at ON events(occurred_at);
";

const GO_RUN_ID: &str = "0b5c7f5e-2d7a-4c1e-9f3e-6a1d2b3c4d5e";
const GO_STUCK_RUN_ID: &str = "1c6d8a6f-3e8b-4d2f-8a4f-7b2e3c4d5e6f";
const GO_CLEANUP_ID: &str = "2d7e9b70-4f9c-4e30-9b50-8c3f4d5e6f70";

/// Rows exactly as the Go tool writes them (NULL totals, phase and links; `in_progress` left by
/// an interrupted run; a cleanup linking the first run).
const GO_ROWS: &str = "
INSERT INTO audit_log (run_id, command, status, kubeconfig_path, cluster_context, namespace,
  container_disk_image, default_cpu_cores, default_memory, data_disk_size, workloads_csv,
  dry_run, ssh_auth_configured, wait_for_ready, ready_timeout_seconds, started_at, completed_at)
VALUES ('0b5c7f5e-2d7a-4c1e-9f3e-6a1d2b3c4d5e', 'run', 'success', NULL, 'admin', 'virtwork',
  'quay.io/containerdisks/fedora:42', 2, '2Gi', '10Gi', 'cpu', 0, 1, 1, 600,
  '2026-01-01T00:00:00Z', '2026-01-01T00:02:30Z');
INSERT INTO workload_details (audit_id, workload_type, enabled, vm_count, cpu_cores, memory,
  has_data_disk, data_disk_size, requires_service, status)
VALUES (1, 'cpu', 1, 1, 2, '2Gi', 0, '10Gi', 0, 'created');
INSERT INTO vm_details (audit_id, workload_id, vm_name, namespace, component, role, cpu_cores,
  memory, container_disk_image, has_data_disk, data_disk_size, status, created_at)
VALUES (1, 1, 'virtwork-cpu-0', 'virtwork', 'cpu', NULL, 2, '2Gi',
  'quay.io/containerdisks/fedora:42', 0, '10Gi', 'deleted', '2026-01-01T00:00:05Z');
UPDATE vm_details SET deleted_at = '2026-01-02T00:00:01Z';
INSERT INTO resource_details (audit_id, resource_type, resource_name, namespace, status,
  created_at, deleted_at)
VALUES (1, 'Secret', 'virtwork-cpu-0-cloudinit', 'virtwork', 'deleted', '2026-01-01T00:00:03Z',
  '2026-01-02T00:00:01Z');
INSERT INTO events (audit_id, event_type, message, occurred_at) VALUES
  (1, 'execution_started', 'Starting run with run-id 0b5c7f5e-2d7a-4c1e-9f3e-6a1d2b3c4d5e',
   '2026-01-01T00:00:00Z'),
  (1, 'execution_started', 'Planned 1 VMs across 1 workloads', '2026-01-01T00:00:00Z'),
  (1, 'vm_created', 'VM virtwork-cpu-0 created', '2026-01-01T00:00:05Z'),
  (1, 'vm_ready', 'VM virtwork-cpu-0 is ready', '2026-01-01T00:02:30Z');
INSERT INTO audit_log (run_id, command, namespace, started_at)
VALUES ('1c6d8a6f-3e8b-4d2f-8a4f-7b2e3c4d5e6f', 'run', 'virtwork', '2026-01-01T01:00:00Z');
INSERT INTO audit_log (run_id, linked_run_ids, command, status, namespace, cleanup_mode,
  vms_deleted, services_deleted, secrets_deleted, dvs_deleted, pvcs_deleted, namespace_deleted,
  started_at, completed_at)
VALUES ('2d7e9b70-4f9c-4e30-9b50-8c3f4d5e6f70', '[\"0b5c7f5e-2d7a-4c1e-9f3e-6a1d2b3c4d5e\"]',
  'cleanup', 'success', 'virtwork', 'all', 1, 0, 1, 0, 0, 0, '2026-01-02T00:00:00Z',
  '2026-01-02T00:00:01Z');
INSERT INTO events (audit_id, event_type, message, occurred_at) VALUES
  (3, 'cleanup_started', 'Starting cleanup (namespace: virtwork, run-id filter: \"\")',
   '2026-01-02T00:00:00Z'),
  (3, 'cleanup_completed', 'Deleted 1 VMs, 0 services, 1 secrets, 0 DVs, 0 PVCs',
   '2026-01-02T00:00:01Z');
";

const DATA_TABLES: [&str; 5] = [
    "audit_log",
    "workload_details",
    "vm_details",
    "resource_details",
    "events",
];

fn dump(conn: &Connection) -> Vec<(String, Vec<Vec<Value>>)> {
    DATA_TABLES
        .iter()
        .map(|t| {
            (
                t.to_string(),
                rows(conn, &format!("SELECT * FROM {t} ORDER BY id")),
            )
        })
        .collect()
}

fn assert_go_database_upgrades_without_loss(setup: &str) {
    let (_dir, path) = temp_db();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let before = {
        let conn = connect(&path);
        conn.execute_batch(setup).unwrap();
        conn.execute_batch(GO_ROWS).unwrap();
        dump(&conn)
    };
    assert_eq!(before[0].1.len(), 3);

    let auditor = Auditor::open_path(&path).unwrap();
    let conn = connect(&path);
    let mut after = dump(&conn);
    // The columns our migrations added are NULL on every Go-written row.
    for (table, count) in [(1, WORKLOAD_DETAILS_ADDED), (2, VM_DETAILS_ADDED)] {
        for row in &mut after[table].1 {
            let added = row.split_off(row.len() - count);
            assert!(added.iter().all(|v| *v == Value::Null), "{added:?}");
        }
    }
    assert_eq!(
        after, before,
        "every Go-written row survives the upgrade unchanged"
    );
    assert_reference_schema(&conn);

    // The upgraded file keeps working: a new run records next to the Go rows …
    let run_id = Uuid::new_v4();
    record_successful_run(&auditor, run_id, "virtwork");
    assert!(auditor.flush(), "queued writes landed");
    assert_eq!(
        rows(&conn, "SELECT COUNT(*) FROM audit_log"),
        vec![vec![int(4)]]
    );
    // … and the Go rows read back through the query layer, links included.
    let detail = query::show_execution(&conn, GO_RUN_ID).unwrap().unwrap();
    assert_eq!(detail.execution.status, "success");
    assert_eq!(detail.execution.workloads, vec!["cpu"]);
    assert_eq!(detail.execution.duration_seconds, Some(150));
    assert_eq!(detail.vms[0].status, "deleted");
    assert_eq!(detail.events.len(), 4);
    let cleanups: Vec<&str> = detail
        .linked_cleanups
        .iter()
        .map(|c| c.run_id.as_str())
        .collect();
    assert_eq!(cleanups, vec![GO_CLEANUP_ID]);
    let stuck = query::show_execution(&conn, GO_STUCK_RUN_ID)
        .unwrap()
        .unwrap();
    assert_eq!(stuck.execution.status, "in_progress");
}

#[test]
fn go_written_database_with_schema_version_upgrades_in_place_without_loss() {
    let setup = format!(
        "{GO_V1_DDL}
         CREATE TABLE schema_version (version INTEGER NOT NULL);
         INSERT INTO schema_version (version) VALUES (1);"
    );
    assert_go_database_upgrades_without_loss(&setup);
}

#[test]
fn database_predating_schema_version_upgrades_in_place_without_loss() {
    assert_go_database_upgrades_without_loss(GO_V1_DDL);
}

/// A file as the previous schema version (3) left it: the reference schema plus migration 3's
/// timeline columns, with rows in it.
#[test]
fn version_3_database_gains_signal_params_in_place_and_its_runs_read_as_not_recorded() {
    let (_dir, path) = temp_db();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        let conn = connect(&path);
        conn.execute_batch(GO_V1_DDL).unwrap();
        conn.execute_batch(
            "ALTER TABLE vm_details ADD COLUMN scheduled_at TEXT;
             ALTER TABLE vm_details ADD COLUMN running_at TEXT;
             CREATE TABLE schema_version (version INTEGER NOT NULL);
             INSERT INTO schema_version VALUES (3);",
        )
        .unwrap();
        conn.execute_batch(GO_ROWS).unwrap();
    }
    // Read-only (verify never upgrades a file), the version 3 file still answers: the run's
    // VM is recorded, its signal params are not.
    let before = {
        let conn = query::open_read_only(&path).unwrap().unwrap();
        query::recorded_run(&conn, GO_RUN_ID).unwrap().unwrap()
    };
    let vm = &before[&("virtwork".to_string(), "virtwork-cpu-0".to_string())];
    assert_eq!((vm.workload.as_str(), vm.memory.as_str()), ("cpu", "2Gi"));
    assert_eq!(vm.signal_params, None);
    let rows_before = dump(&connect(&path));

    Auditor::open_path(&path).unwrap();
    let conn = connect(&path);
    assert_eq!(
        rows(&conn, "SELECT version FROM schema_version"),
        vec![vec![int(schema::latest_version())]]
    );
    assert_eq!(schema::latest_version(), 4);
    let mut rows_after = dump(&conn);
    for row in &mut rows_after[1].1 {
        assert_eq!(row.pop(), Some(Value::Null), "old rows record no params");
    }
    assert_eq!(rows_after, rows_before, "every row survives the upgrade");
    assert_eq!(query::recorded_run(&conn, GO_RUN_ID).unwrap(), Some(before));
    assert_eq!(
        query::recorded_run(&conn, GO_CLEANUP_ID).unwrap(),
        None,
        "runs only"
    );

    // Params recorded after the upgrade read back, bounded in length.
    conn.execute(
        "UPDATE workload_details SET signal_params = ?1",
        [r#"{"cpu-load-percent":"30"}"#],
    )
    .unwrap();
    let run = query::recorded_run(&conn, GO_RUN_ID).unwrap().unwrap();
    assert_eq!(
        run.values().next().unwrap().signal_params.as_deref(),
        Some(r#"{"cpu-load-percent":"30"}"#)
    );
    conn.execute(
        "UPDATE workload_details SET signal_params = ?1",
        [&"x".repeat(1 << 20)],
    )
    .unwrap();
    let run = query::recorded_run(&conn, GO_RUN_ID).unwrap().unwrap();
    assert_eq!(
        run.values()
            .next()
            .unwrap()
            .signal_params
            .as_ref()
            .map(String::len),
        Some(query::MAX_SIGNAL_PARAMS_CHARS + 1)
    );
}

#[test]
fn early_go_database_without_dv_and_pvc_counts_gains_them_without_loss() {
    let early = GO_V1_DDL
        .replace("\tdvs_deleted           INTEGER,\n", "")
        .replace("\tpvcs_deleted          INTEGER,\n", "");
    assert_ne!(early, GO_V1_DDL);
    let rows_without_new_columns = GO_ROWS
        .replace(
            "secrets_deleted, dvs_deleted, pvcs_deleted,",
            "secrets_deleted,",
        )
        .replace("1, 0, 1, 0, 0, 0, '2026-01-02", "1, 0, 1, 0, '2026-01-02");
    let (_dir, path) = temp_db();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        let conn = connect(&path);
        conn.execute_batch(&early).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_version (version INTEGER NOT NULL);
                            INSERT INTO schema_version VALUES (1);",
        )
        .unwrap();
        conn.execute_batch(&rows_without_new_columns).unwrap();
    }
    Auditor::open_path(&path).unwrap();
    let conn = connect(&path);
    // SQLite appends added columns, so only their order differs from a fresh database.
    let mut columns = table_info(&conn, "audit_log");
    let mut expected = expected_columns(AUDIT_LOG);
    columns.sort();
    expected.sort();
    assert_eq!(columns, expected);
    assert_eq!(
        rows(&conn, "SELECT version FROM schema_version"),
        vec![vec![int(schema::latest_version())]]
    );
    assert_eq!(
        audit_row(
            &conn,
            GO_CLEANUP_ID.parse().unwrap(),
            "vms_deleted, secrets_deleted, dvs_deleted, pvcs_deleted"
        ),
        vec![int(1), int(1), NULL, NULL]
    );
}

// ---------------------------------------------------------------------------------------------
// Each kind of execution leaves exactly the expected rows
// ---------------------------------------------------------------------------------------------

const PARAM_COLUMNS: &str = "command, status, kubeconfig_path, cluster_context, namespace, \
    container_disk_image, default_cpu_cores, default_memory, data_disk_size, workloads_csv, \
    total_vm_count, total_workload_count, dry_run, ssh_auth_configured, cleanup_mode, \
    wait_for_ready, ready_timeout_seconds, linked_run_ids, vms_deleted, services_deleted, \
    secrets_deleted, dvs_deleted, pvcs_deleted, namespace_deleted, error_summary";

fn event_rows(conn: &Connection, run_id: Uuid) -> Vec<Vec<Value>> {
    rows(
        conn,
        &format!(
            "SELECT e.event_type, e.message, e.error_detail, v.vm_name, w.workload_type
             FROM events e JOIN audit_log a ON a.id = e.audit_id
             LEFT JOIN vm_details v ON v.id = e.vm_id
             LEFT JOIN workload_details w ON w.id = e.workload_id
             WHERE a.run_id = '{run_id}' ORDER BY e.id"
        ),
    )
}

fn assert_times(conn: &Connection, run_id: Uuid, completed: bool) {
    let times = audit_row(conn, run_id, "started_at, completed_at");
    assert_timestamp(&times[0]);
    if completed {
        assert_timestamp(&times[1]);
    } else {
        assert_eq!(times[1], NULL);
    }
}

#[test]
fn successful_run_leaves_the_expected_rows() {
    let (_dir, path) = temp_db();
    let auditor = Auditor::open_path(&path).unwrap();
    let run_id = Uuid::new_v4();
    let exec = record_successful_run(&auditor, run_id, "vw-ok");
    assert_eq!(exec.run_id(), run_id);
    assert!(auditor.flush(), "queued writes landed");
    let conn = connect(&path);

    assert_eq!(
        audit_row(&conn, run_id, PARAM_COLUMNS),
        vec![
            text("run"),
            text("success"),
            text("/home/op/.kube/config"),
            text("kind-test"),
            text("vw-ok"),
            text("quay.io/containerdisks/fedora:42"),
            int(2),
            text("2Gi"),
            text("10Gi"),
            text("cpu,network"),
            int(3),
            int(2),
            int(0),
            int(0),
            NULL,
            int(1),
            int(600),
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
        ]
    );
    assert_times(&conn, run_id, true);

    assert_eq!(
        rows(
            &conn,
            "SELECT workload_type, enabled, vm_count, cpu_cores, memory, has_data_disk,
                    data_disk_size, requires_service, status FROM workload_details ORDER BY id"
        ),
        vec![
            vec![
                text("cpu"),
                int(1),
                int(1),
                int(2),
                text("2Gi"),
                int(0),
                NULL,
                int(0),
                text("created")
            ],
            vec![
                text("network"),
                int(1),
                int(2),
                int(2),
                text("2Gi"),
                int(0),
                NULL,
                int(1),
                text("created")
            ],
        ]
    );
    assert_eq!(
        rows(
            &conn,
            "SELECT v.vm_name, v.namespace, v.component, v.role, w.workload_type, v.cpu_cores,
                    v.memory, v.container_disk_image, v.has_data_disk, v.data_disk_size, v.phase,
                    v.status, v.ready_at, v.deleted_at
             FROM vm_details v JOIN workload_details w ON w.id = v.workload_id ORDER BY v.id"
        ),
        [
            ("virtwork-cpu-0", NULL, "cpu"),
            ("virtwork-network-server-0", text("server"), "network"),
            ("virtwork-network-client-0", text("client"), "network"),
        ]
        .into_iter()
        .map(|(name, role, component)| vec![
            text(name),
            text("vw-ok"),
            text(component),
            role,
            text(component),
            int(2),
            text("2Gi"),
            text("quay.io/containerdisks/fedora:42"),
            int(0),
            NULL,
            text("Running"),
            text("ready"),
            text("2026-03-01T10:00:07Z"),
            NULL,
        ])
        .collect::<Vec<_>>()
    );
    for created in rows(&conn, "SELECT created_at FROM vm_details") {
        assert_timestamp(&created[0]);
    }
    assert_eq!(
        rows(
            &conn,
            "SELECT resource_type, resource_name, namespace, status, deleted_at
             FROM resource_details ORDER BY id"
        ),
        vec![
            vec![
                text("Service"),
                text("virtwork-iperf3-server"),
                text("vw-ok"),
                text("created"),
                NULL
            ],
            vec![
                text("Secret"),
                text("virtwork-cpu-0-cloudinit"),
                text("vw-ok"),
                text("created"),
                NULL
            ],
            vec![
                text("Secret"),
                text("virtwork-network-server-0-cloudinit"),
                text("vw-ok"),
                text("created"),
                NULL
            ],
            vec![
                text("Secret"),
                text("virtwork-network-client-0-cloudinit"),
                text("vw-ok"),
                text("created"),
                NULL
            ],
        ]
    );
    let vm_event = |kind: &str, message: String, vm: &str, workload: &str| {
        vec![text(kind), text(&message), NULL, text(vm), text(workload)]
    };
    assert_eq!(
        event_rows(&conn, run_id),
        vec![
            vec![
                text("execution_started"),
                text(&format!("Starting run with run-id {run_id}")),
                NULL,
                NULL,
                NULL
            ],
            vec![
                text("execution_started"),
                text("Planned 3 VMs across 2 workloads"),
                NULL,
                NULL,
                NULL
            ],
            vec![
                text("service_created"),
                text("Service virtwork-iperf3-server created"),
                NULL,
                NULL,
                text("network")
            ],
            vm_event(
                "vm_created",
                "VM virtwork-cpu-0 created".into(),
                "virtwork-cpu-0",
                "cpu"
            ),
            vm_event(
                "vm_created",
                "VM virtwork-network-server-0 created".into(),
                "virtwork-network-server-0",
                "network"
            ),
            vm_event(
                "vm_created",
                "VM virtwork-network-client-0 created".into(),
                "virtwork-network-client-0",
                "network"
            ),
            vm_event(
                "vm_ready",
                "VM virtwork-cpu-0 is ready".into(),
                "virtwork-cpu-0",
                "cpu"
            ),
            vm_event(
                "vm_ready",
                "VM virtwork-network-server-0 is ready".into(),
                "virtwork-network-server-0",
                "network"
            ),
            vm_event(
                "vm_ready",
                "VM virtwork-network-client-0 is ready".into(),
                "virtwork-network-client-0",
                "network"
            ),
        ]
    );
    for occurred in rows(&conn, "SELECT occurred_at FROM events") {
        assert_timestamp(&occurred[0]);
    }
}

#[test]
fn failed_run_leaves_the_expected_rows() {
    let (_dir, path) = temp_db();
    let auditor = Auditor::open_path(&path).unwrap();
    let run_id = Uuid::new_v4();
    record_failed_run(&auditor, run_id, "vw-fail");
    assert!(auditor.flush(), "queued writes landed");
    let conn = connect(&path);
    assert_eq!(
        audit_row(
            &conn,
            run_id,
            "status, workloads_csv, total_vm_count, error_summary"
        ),
        vec![
            text("failed"),
            text("cpu"),
            int(2),
            text(
                "creating VMs: creating VM \"virtwork-cpu-1\": admission webhook denied the request"
            ),
        ]
    );
    assert_times(&conn, run_id, true);
    assert_eq!(
        rows(&conn, "SELECT workload_type, status FROM workload_details"),
        vec![vec![text("cpu"), text("failed")]]
    );
    assert_eq!(
        rows(
            &conn,
            "SELECT vm_name, status, phase, ready_at FROM vm_details"
        ),
        vec![vec![text("virtwork-cpu-0"), text("created"), NULL, NULL]],
        "only the VM the API accepted has a row"
    );
    assert_eq!(
        event_rows(&conn, run_id),
        vec![
            vec![
                text("execution_started"),
                text(&format!("Starting run with run-id {run_id}")),
                NULL,
                NULL,
                NULL
            ],
            vec![
                text("execution_started"),
                text("Planned 2 VMs across 1 workloads"),
                NULL,
                NULL,
                NULL
            ],
            vec![
                text("vm_created"),
                text("VM virtwork-cpu-0 created"),
                NULL,
                text("virtwork-cpu-0"),
                text("cpu")
            ],
            vec![
                text("vm_failed"),
                text("Failed to create VM virtwork-cpu-1"),
                text("admission webhook denied the request"),
                NULL,
                text("cpu"),
            ],
        ]
    );
}

#[test]
fn interrupted_run_persists_cancelled() {
    let (_dir, path) = temp_db();
    let auditor = Auditor::open_path(&path).unwrap();
    let run_id = Uuid::new_v4();
    let exec = record_interrupted_run(&auditor, run_id, "vw-int");
    // The error path that follows the interrupt must not overwrite the recorded outcome.
    exec.complete_execution(ExecutionStatus::Failed, Some("context canceled"));
    assert!(auditor.flush(), "queued writes landed");
    let conn = connect(&path);
    assert_eq!(
        audit_row(&conn, run_id, "status, error_summary"),
        vec![text("cancelled"), text("interrupted by signal")]
    );
    assert_times(&conn, run_id, true);
    assert_eq!(
        rows(&conn, "SELECT vm_name, status, phase FROM vm_details"),
        vec![vec![
            text("virtwork-memory-0"),
            text("created"),
            text("Scheduling")
        ]]
    );
    assert_eq!(
        rows(&conn, "SELECT workload_type, status FROM workload_details"),
        vec![vec![text("memory"), text("pending")]]
    );
}

#[test]
fn aborted_cleanup_leaves_the_expected_rows() {
    let (_dir, path) = temp_db();
    let auditor = Auditor::open_path(&path).unwrap();
    let cleanup_id = Uuid::new_v4();
    let exec = auditor.start_execution(cleanup_id, &cleanup_params("vw-abort", CleanupMode::All));
    exec.complete_execution(ExecutionStatus::Aborted, None);
    assert!(auditor.flush(), "queued writes landed");
    let conn = connect(&path);
    assert_eq!(
        audit_row(&conn, cleanup_id, PARAM_COLUMNS),
        vec![
            text("cleanup"),
            text("aborted"),
            text("/home/op/.kube/config"),
            text("kind-test"),
            text("vw-abort"),
            text("quay.io/containerdisks/fedora:42"),
            int(2),
            text("2Gi"),
            text("10Gi"),
            NULL,
            NULL,
            NULL,
            int(0),
            int(0),
            text("all"),
            int(1),
            int(600),
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            text("user declined confirmation"),
        ]
    );
    assert_times(&conn, cleanup_id, true);
    assert!(
        event_rows(&conn, cleanup_id).is_empty(),
        "a declined cleanup records no events"
    );
}

struct LinkedFixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    run_a: Uuid,
    run_b: Uuid,
    older: Uuid,
    other_ns: Uuid,
    cleanup: Uuid,
    failed: Uuid,
    cancelled: Uuid,
    aborted: Uuid,
}

/// Two runs in `shared`, an older run there whose VM name repeats, a run elsewhere with the
/// same VM name, then a cleanup that deletes the two runs' objects; plus a failed, a cancelled
/// run and an aborted cleanup.
fn linked_fixture() -> LinkedFixture {
    let (dir, path) = temp_db();
    let auditor = Auditor::open_path(&path).unwrap();
    let older = Uuid::new_v4();
    let older_exec = auditor.start_execution(older, &run_params("shared", &["cpu"], 1));
    older_exec.record_vm(&vm("virtwork-cpu-0", "shared", "cpu", None));
    older_exec.complete_execution(ExecutionStatus::Success, None);

    let run_a = Uuid::new_v4();
    let a = auditor.start_execution(run_a, &run_params("shared", &["cpu"], 1));
    a.record_workload(&workload("cpu", 1, false));
    a.record_resource(ResourceKind::Secret, "virtwork-cpu-0-cloudinit", "shared");
    a.record_vm(&vm("virtwork-cpu-0", "shared", "cpu", None));
    a.complete_execution(ExecutionStatus::Success, None);

    let run_b = Uuid::new_v4();
    let b = auditor.start_execution(run_b, &run_params("shared", &["disk"], 1));
    b.record_workload(&workload("disk", 1, false));
    b.record_resource(ResourceKind::Secret, "virtwork-disk-0-cloudinit", "shared");
    b.record_vm(&vm("virtwork-disk-0", "shared", "disk", None));
    b.complete_execution(ExecutionStatus::Success, None);

    let other_ns = Uuid::new_v4();
    let other = auditor.start_execution(other_ns, &run_params("elsewhere", &["cpu"], 1));
    other.record_vm(&vm("virtwork-cpu-0", "elsewhere", "cpu", None));
    other.complete_execution(ExecutionStatus::Success, None);

    let failed = Uuid::new_v4();
    record_failed_run(&auditor, failed, "vw-fail");
    let cancelled = Uuid::new_v4();
    record_interrupted_run(&auditor, cancelled, "vw-int");
    let aborted = Uuid::new_v4();
    auditor
        .start_execution(aborted, &cleanup_params("vw-abort", CleanupMode::All))
        .complete_execution(ExecutionStatus::Aborted, None);

    let cleanup = Uuid::new_v4();
    let c = auditor.start_execution(cleanup, &cleanup_params("shared", CleanupMode::All));
    c.record_event(&Event::cleanup_started("shared", None));
    let (a_id, b_id) = (run_a.to_string(), run_b.to_string());
    c.link_cleanup_to_runs(&[b_id.as_str(), a_id.as_str(), "", a_id.as_str()]);
    let run_ids = [a_id.clone(), b_id.clone()];
    c.mark_vms_deleted("shared", &["virtwork-cpu-0", "virtwork-disk-0"], &run_ids);
    c.mark_resources_deleted(
        ResourceKind::Secret,
        "shared",
        &["virtwork-cpu-0-cloudinit", "virtwork-disk-0-cloudinit"],
        &run_ids,
    );
    c.mark_resources_deleted::<&str, _>(ResourceKind::Service, "shared", &[], &run_ids);
    let counts = KindCounts {
        vms: 2,
        secrets: 2,
        ..KindCounts::default()
    };
    c.record_cleanup_counts(&counts, Some(&NamespaceOutcome::Deleted));
    c.record_event(&Event::cleanup_completed(&counts));
    c.complete_execution(ExecutionStatus::Success, None);

    LinkedFixture {
        _dir: dir,
        path,
        run_a,
        run_b,
        older,
        other_ns,
        cleanup,
        failed,
        cancelled,
        aborted,
    }
}

#[test]
fn cleanup_linking_two_runs_leaves_the_expected_rows() {
    let f = linked_fixture();
    let conn = connect(&f.path);
    let mut linked = [f.run_a.to_string(), f.run_b.to_string()];
    linked.sort();
    assert_eq!(
        audit_row(
            &conn,
            f.cleanup,
            "command, status, cleanup_mode, linked_run_ids, vms_deleted, services_deleted,
             secrets_deleted, dvs_deleted, pvcs_deleted, namespace_deleted, error_summary"
        ),
        vec![
            text("cleanup"),
            text("success"),
            text("all"),
            text(&format!("[\"{}\",\"{}\"]", linked[0], linked[1])),
            int(2),
            int(0),
            int(2),
            int(0),
            int(0),
            int(1),
            NULL,
        ]
    );
    assert_eq!(
        event_rows(&conn, f.cleanup),
        vec![
            vec![
                text("cleanup_started"),
                text("Starting cleanup (namespace: shared, run-id filter: \"\")"),
                NULL,
                NULL,
                NULL
            ],
            vec![
                text("cleanup_completed"),
                text("Deleted 2 VMs, 0 services, 2 secrets, 0 DVs, 0 PVCs"),
                NULL,
                NULL,
                NULL
            ],
        ]
    );
    let vm_state = |run: Uuid| {
        rows(
            &conn,
            &format!(
                "SELECT v.vm_name, v.status, v.deleted_at IS NOT NULL FROM vm_details v
                 JOIN audit_log a ON a.id = v.audit_id WHERE a.run_id = '{run}'"
            ),
        )
    };
    assert_eq!(
        vm_state(f.run_a),
        vec![vec![text("virtwork-cpu-0"), text("deleted"), int(1)]]
    );
    assert_eq!(
        vm_state(f.run_b),
        vec![vec![text("virtwork-disk-0"), text("deleted"), int(1)]]
    );
    assert_eq!(
        vm_state(f.older),
        vec![vec![text("virtwork-cpu-0"), text("created"), int(0)]],
        "a same-named VM of a run the cleanup did not touch stays as recorded"
    );
    assert_eq!(
        vm_state(f.other_ns),
        vec![vec![text("virtwork-cpu-0"), text("created"), int(0)]],
        "a same-named VM in another namespace stays as recorded"
    );
    for row in rows(
        &conn,
        "SELECT deleted_at FROM vm_details WHERE status = 'deleted'",
    ) {
        assert_timestamp(&row[0]);
    }
    assert_eq!(
        rows(
            &conn,
            "SELECT resource_name, status FROM resource_details ORDER BY id"
        ),
        vec![
            vec![text("virtwork-cpu-0-cloudinit"), text("deleted")],
            vec![text("virtwork-disk-0-cloudinit"), text("deleted")],
        ]
    );
    for run in [f.run_a, f.run_b] {
        let detail = query::show_execution(&conn, &run.to_string())
            .unwrap()
            .unwrap();
        let cleanups: Vec<String> = detail
            .linked_cleanups
            .iter()
            .map(|c| c.run_id.clone())
            .collect();
        assert_eq!(cleanups, vec![f.cleanup.to_string()]);
    }
    let older = query::show_execution(&conn, &f.older.to_string())
        .unwrap()
        .unwrap();
    assert!(older.linked_cleanups.is_empty());
}

#[test]
fn list_filters_by_status_and_namespace_newest_first() {
    let f = linked_fixture();
    let conn = connect(&f.path);
    let ids = |filter: query::ListFilter| -> Vec<String> {
        query::list_executions(&conn, &filter)
            .unwrap()
            .into_iter()
            .map(|e| e.run_id)
            .collect()
    };
    let all = ids(query::ListFilter::default());
    assert_eq!(all.len(), 8);
    assert_eq!(all[0], f.cleanup.to_string(), "newest first");
    assert_eq!(
        ids(query::ListFilter {
            status: Some(ExecutionStatus::Cancelled),
            ..Default::default()
        }),
        vec![f.cancelled.to_string()]
    );
    assert_eq!(
        ids(query::ListFilter {
            status: Some(ExecutionStatus::Failed),
            ..Default::default()
        }),
        vec![f.failed.to_string()]
    );
    assert_eq!(
        ids(query::ListFilter {
            status: Some(ExecutionStatus::Aborted),
            namespace: Some("vw-abort".into()),
            ..Default::default()
        }),
        vec![f.aborted.to_string()]
    );
    assert_eq!(
        ids(query::ListFilter {
            namespace: Some("elsewhere".into()),
            ..Default::default()
        }),
        vec![f.other_ns.to_string()]
    );
    assert_eq!(
        ids(query::ListFilter {
            limit: Some(2),
            ..Default::default()
        })
        .len(),
        2
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrent processes share one database file
// ---------------------------------------------------------------------------------------------

const WRITER_DB_ENV: &str = "VIRTWORK_AUDIT_TEST_WRITER_DB";
const WRITER_VMS: usize = 50;

/// Not a test on its own: the body of one writer process spawned by
/// `eight_concurrent_processes_share_one_database` (this test binary re-executed with
/// `WRITER_DB_ENV` set). Without the variable it returns at once.
#[test]
fn concurrent_writer_process() {
    let Ok(db) = std::env::var(WRITER_DB_ENV) else {
        return;
    };
    let auditor = Auditor::open_path(Path::new(&db)).expect("writer opens the shared database");
    let run_id = Uuid::new_v4();
    let namespace = format!("writer-{run_id}");
    let exec =
        auditor.start_execution(run_id, &run_params(&namespace, &["cpu"], WRITER_VMS as u32));
    assert!(exec.is_recording(), "start row written");
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    exec.record_workload(&workload("cpu", WRITER_VMS as u32, false));
    for i in 0..WRITER_VMS {
        let name = format!("virtwork-cpu-{i}");
        exec.record_resource(
            ResourceKind::Secret,
            &format!("{name}-cloudinit"),
            &namespace,
        );
        exec.record_vm(&vm(&name, &namespace, "cpu", None));
        exec.record_event(&Event::vm_created(&name));
    }
    for i in 0..WRITER_VMS {
        let name = format!("virtwork-cpu-{i}");
        exec.update_vm_ready(&name, "Running", ready_time());
        exec.record_event(&Event::vm_ready(&name));
    }
    exec.set_workload_status("cpu", WorkloadStatus::Created);
    exec.complete_execution(ExecutionStatus::Success, None);

    // Every write must have landed: a swallowed "database is locked" shows up as a missing row.
    let conn = connect(Path::new(&db));
    let id = exec.audit_id().unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [id], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COUNT(*) FROM events WHERE audit_id = ?1"),
        1 + 2 * WRITER_VMS as i64
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM vm_details WHERE audit_id = ?1 AND status = 'ready'"),
        WRITER_VMS as i64
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM resource_details WHERE audit_id = ?1"),
        WRITER_VMS as i64
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM audit_log WHERE id = ?1 AND status = 'success'"),
        1
    );
}

#[test]
fn eight_concurrent_processes_share_one_database() {
    let (_dir, path) = temp_db();
    let me = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(&me)
                .args([
                    "--exact",
                    "audit::concurrent_writer_process",
                    "--test-threads=1",
                ])
                .env(WRITER_DB_ENV, &path)
                .output_spawn()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "writer {i} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "writer {i} ran its body"
        );
    }
    let conn = connect(&path);
    assert_eq!(
        rows(
            &conn,
            "SELECT COUNT(*), SUM(status = 'success') FROM audit_log"
        ),
        vec![vec![int(8), int(8)]]
    );
    assert_eq!(
        rows(&conn, "SELECT COUNT(*) FROM events"),
        vec![vec![int(8 * (1 + 2 * WRITER_VMS as i64))]]
    );
    assert_eq!(
        rows(&conn, "SELECT version FROM schema_version"),
        vec![vec![int(schema::latest_version())]]
    );
}

trait SpawnPiped {
    fn output_spawn(&mut self) -> std::process::Child;
}

impl SpawnPiped for Command {
    fn output_spawn(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// No credential reaches the database
// ---------------------------------------------------------------------------------------------

const PASSWORD: &str = "Tr0ub4dor&3-never-stored";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyMaterialNeverStored0123456789 op@laptop";

/// The settings of a `run` given a password and a key, through the real command-line parser
/// and configuration.
fn settings_with_credentials(db_path: &Path) -> virtwork::config::RunSettings {
    use clap::Parser;
    let db = db_path.display().to_string();
    let cli = virtwork::cli::Cli::try_parse_from([
        "virtwork",
        "run",
        "--namespace",
        "vw-secret",
        "--kubeconfig",
        "/home/op/.kube/config",
        "--audit-db",
        &db,
        "--workloads",
        "cpu",
        "--ssh-password",
        PASSWORD,
        "--ssh-key",
        KEY,
    ])
    .unwrap();
    let virtwork::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    let env = [("HOME".to_string(), "/nonexistent".to_string())];
    virtwork::config::RunSettings::resolve(&cli.global, &args, &env).unwrap()
}

#[test]
fn no_row_contains_an_ssh_key_or_password() {
    let (_dir, path) = temp_db();
    let settings = settings_with_credentials(&path);
    let auditor = Auditor::open(settings.global.audit.recording_path()).unwrap();
    let run_id = Uuid::new_v4();
    let mut params = virtwork::commands::run::execution_params(&settings, CommandKind::Run);
    params.workloads = settings.plan.workloads.clone();
    let exec = auditor.start_execution(run_id, &params);
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    exec.record_workload(&workload("cpu", 1, false));
    exec.record_vm(&vm("virtwork-cpu-0", "vw-secret", "cpu", None));
    exec.record_event(&Event::vm_created("virtwork-cpu-0"));
    exec.complete_execution(ExecutionStatus::Success, None);
    assert!(auditor.flush(), "queued writes landed");

    let conn = connect(&path);
    assert_eq!(
        audit_row(&conn, run_id, "ssh_auth_configured"),
        vec![int(1)]
    );
    let key_material = KEY.split(' ').nth(1).unwrap();
    let mut cells = 0;
    for table in DATA_TABLES {
        for row in rows(&conn, &format!("SELECT * FROM {table}")) {
            for cell in row {
                if let Value::Text(s) = cell {
                    cells += 1;
                    assert!(!s.contains(PASSWORD), "{table} holds the password: {s}");
                    assert!(!s.contains(key_material), "{table} holds the SSH key: {s}");
                    assert!(!s.contains("ssh-ed25519"), "{table} holds an SSH key: {s}");
                }
            }
        }
    }
    assert!(cells > 20, "the scan saw the recorded text ({cells} cells)");
}
// ---------------------------------------------------------------------------------------------
// `virtwork audit list|show` through the real binary
// ---------------------------------------------------------------------------------------------

fn virtwork(db: &Path, args: &[&str]) -> Output {
    let home = db
        .ancestors()
        .find(|dir| dir.is_dir())
        .expect("an existing ancestor directory");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    for (name, _) in std::env::vars() {
        if name.starts_with("VIRTWORK_") || name == "KUBECONFIG" {
            cmd.env_remove(name);
        }
    }
    cmd.env("HOME", home)
        .current_dir(home)
        .arg("--audit-db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

#[test]
fn audit_list_text_is_an_aligned_table_newest_first() {
    let f = linked_fixture();
    let out = virtwork(&f.path, &["audit", "list"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let (table, footer) = text.split_once("\n\n").expect("a table, then the database");
    assert_eq!(footer, format!("Database: {}\n", f.path.display()));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 9, "one heading and eight executions:\n{text}");
    for heading in [
        "RUN ID",
        "COMMAND",
        "STATUS",
        "NAMESPACE",
        "STARTED",
        "DURATION",
        "OBJECTS",
    ] {
        assert!(lines[0].contains(heading), "{}", lines[0]);
    }
    assert!(
        lines[1].starts_with(&f.cleanup.to_string()),
        "newest first:\n{text}"
    );
    assert!(
        lines[1].contains("deleted 2 VMs, 0 services, 2 secrets"),
        "{}",
        lines[1]
    );
    // Aligned: every row's STATUS column starts where its heading does.
    let status_col = lines[0].find("STATUS").unwrap();
    for line in &lines[1..] {
        let status = &line[status_col..];
        assert!(
            ["success", "failed", "cancelled", "aborted", "in_progress"]
                .iter()
                .any(|s| status.starts_with(s)),
            "misaligned row: {line}"
        );
    }
    let cancelled = lines
        .iter()
        .find(|l| l.starts_with(&f.cancelled.to_string()))
        .unwrap();
    assert!(
        cancelled.contains("cancelled") && cancelled.contains("vw-int"),
        "{cancelled}"
    );
}

#[test]
fn audit_list_filters_and_json() {
    let f = linked_fixture();
    let out = virtwork(&f.path, &["audit", "list", "--status", "failed"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_eq!(
        text.lines().count(),
        4,
        "heading, one row, database:\n{text}"
    );
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with(&f.failed.to_string())
    );

    let out = virtwork(
        &f.path,
        &[
            "--namespace",
            "vw-abort",
            "--output",
            "json",
            "audit",
            "list",
        ],
    );
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let executions = doc["executions"].as_array().unwrap();
    assert_eq!(executions.len(), 1);
    let aborted = &executions[0];
    assert_eq!(aborted["run_id"], f.aborted.to_string());
    assert_eq!(aborted["command"], "cleanup");
    assert_eq!(aborted["status"], "aborted");
    assert_eq!(aborted["cleanup_mode"], "all");
    assert_eq!(aborted["error_summary"], "user declined confirmation");
    assert_eq!(aborted["deleted"], serde_json::Value::Null);

    let out = virtwork(
        &f.path,
        &["--output", "json", "audit", "list", "--limit", "3"],
    );
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["executions"].as_array().unwrap().len(), 3);
}

#[test]
fn audit_show_text_has_parameters_vms_events_and_linked_cleanups() {
    let f = linked_fixture();
    let out = virtwork(&f.path, &["audit", "show", &f.run_a.to_string()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let field = |key: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}:")))
            .map(|v| v.trim().to_string())
    };
    let run_a = f.run_a.to_string();
    for (key, value) in [
        ("Run ID", run_a.as_str()),
        ("Command", "run"),
        ("Status", "success"),
        ("Namespace", "shared"),
        ("Cluster context", "kind-test"),
        ("Kubeconfig", "/home/op/.kube/config"),
        ("Image", "quay.io/containerdisks/fedora:42"),
        ("Defaults", "2 CPU, 2Gi memory, 10Gi data disk"),
        ("Workloads", "cpu"),
        ("Planned VMs", "1"),
        ("Dry run", "no"),
        ("Wait for ready", "yes (timeout 600s)"),
        ("SSH access", "none"),
    ] {
        assert_eq!(field(key).as_deref(), Some(value), "{key} in:\n{text}");
    }
    // Values start in one column.
    let value_starts: BTreeSet<usize> = text
        .lines()
        .take(5)
        .map(|l| {
            let colon = l.find(':').unwrap() + 1;
            colon + (l[colon..].len() - l[colon..].trim_start().len())
        })
        .collect();
    assert_eq!(value_starts.len(), 1, "aligned values:\n{text}");
    let vm_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("virtwork-cpu-0 "))
        .unwrap_or_else(|| panic!("VM row in:\n{text}"));
    let vm_cells: Vec<&str> = vm_line.split_whitespace().collect();
    assert_eq!(
        &vm_cells[..5],
        ["virtwork-cpu-0", "cpu", "-", "-", "deleted"],
        "{vm_line}"
    );
    let cleanups = text
        .split("Cleaned up by:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("linked cleanups in:\n{text}"));
    assert!(
        cleanups
            .lines()
            .nth(1)
            .unwrap()
            .trim_start()
            .starts_with(&f.cleanup.to_string()),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.ends_with(' ')),
        "no trailing spaces:\n{text}"
    );

    let out = virtwork(&f.path, &["audit", "show", &f.failed.to_string()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("Events:"), "{text}");
    assert!(
        text.contains("vm_failed")
            && text.contains(
                "Failed to create VM virtwork-cpu-1: admission webhook denied the request"
            ),
        "{text}"
    );
    assert!(text.contains("Error:"), "{text}");

    let out = virtwork(&f.path, &["audit", "show", &f.cancelled.to_string()]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("cancelled") && text.contains("interrupted by signal"),
        "{text}"
    );
}

#[test]
fn audit_show_json_is_the_documented_document() {
    let f = linked_fixture();
    let out = virtwork(
        &f.path,
        &["--output", "json", "audit", "show", &f.run_b.to_string()],
    );
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        BTreeSet::from_iter(keys),
        BTreeSet::from([
            "format_version",
            "command",
            "execution",
            "workloads",
            "vms",
            "resources",
            "events",
            "linked_cleanups"
        ])
    );
    let e = &doc["execution"];
    assert_eq!(e["run_id"], f.run_b.to_string());
    assert_eq!(e["command"], "run");
    assert_eq!(e["status"], "success");
    assert_eq!(e["namespace"], "shared");
    assert_eq!(e["workloads"], serde_json::json!(["disk"]));
    assert_eq!(e["total_vm_count"], 1);
    assert_eq!(e["wait_for_ready"], true);
    assert_eq!(e["ssh_auth_configured"], false);
    assert_eq!(doc["workloads"][0]["workload_type"], "disk");
    assert_eq!(doc["workloads"][0]["has_data_disk"], true);
    assert_eq!(doc["vms"][0]["vm_name"], "virtwork-disk-0");
    assert_eq!(doc["vms"][0]["status"], "deleted");
    assert_eq!(
        doc["resources"][0]["resource_name"],
        "virtwork-disk-0-cloudinit"
    );
    assert_eq!(doc["linked_cleanups"][0]["run_id"], f.cleanup.to_string());
    assert_eq!(doc["linked_cleanups"][0]["deleted"]["vms"], 2);
    assert_eq!(doc["linked_cleanups"][0]["deleted"]["namespace"], true);

    let out = virtwork(
        &f.path,
        &["--output", "json", "audit", "show", &f.cleanup.to_string()],
    );
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut linked = vec![f.run_a.to_string(), f.run_b.to_string()];
    linked.sort();
    assert_eq!(
        doc["execution"]["linked_run_ids"],
        serde_json::json!(linked)
    );
    let events: Vec<&str> = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["cleanup_started", "cleanup_completed"]);
}

#[test]
fn audit_show_unknown_run_id_exits_2_suggesting_list() {
    let f = linked_fixture();
    let unknown = Uuid::new_v4().to_string();
    let out = virtwork(&f.path, &["audit", "show", &unknown]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&unknown) && err.contains("virtwork audit list"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
}

#[test]
fn audit_list_invalid_status_exits_2_listing_accepted_statuses() {
    let f = linked_fixture();
    let out = virtwork(&f.path, &["audit", "list", "--status", "done"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("in_progress, success, failed, aborted, cancelled") && err.contains("done"),
        "{err}"
    );
}

#[test]
fn missing_database_is_no_history_for_list_and_an_input_error_for_show() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none").join("virtwork.db");
    let out = virtwork(&missing, &["audit", "list"]);
    assert_exit(&out, 0);
    assert_eq!(
        stdout(&out).lines().next().unwrap(),
        format!("no audit database at {}", missing.display())
    );
    assert!(
        stdout(&out).contains("earlier versions (default ./virtwork.db)"),
        "how to find older databases: {}",
        stdout(&out)
    );
    let out = virtwork(&missing, &["--output", "json", "audit", "list"]);
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "format_version": 1,
            "command": "audit list",
            "database": missing.display().to_string(),
            "executions": [],
        })
    );
    assert!(!missing.exists(), "listing never creates a database");

    let out = virtwork(&missing, &["audit", "show", &Uuid::new_v4().to_string()]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("no audit database at"),
        "{}",
        stderr(&out)
    );
    assert!(!missing.exists());
}

/// The database path's last component is never followed: a dangling link does not create a
/// file at its target, and a live link is refused too.
#[test]
fn a_linked_audit_database_is_refused_and_nothing_is_created_at_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere.db");
    let link = dir.path().join("audit.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let Err(err) = Auditor::open_path(&link) else {
        panic!("a link is followed");
    };
    let message = err.to_string();
    assert!(
        message.contains("audit.db") && message.contains("is a symbolic link"),
        "{message}"
    );
    assert!(!target.exists(), "a file was created at the link's target");
    std::fs::write(&target, b"").unwrap();
    assert!(
        Auditor::open_path(&link).is_err(),
        "a live link is followed"
    );
}

/// Only the last component refuses links: a database in a directory reached through one
/// (Fedora Atomic's `/home -> var/home`) is created, recorded into and read back, in the
/// real directory, with a fresh directory made through the link.
#[test]
fn an_audit_database_through_a_linked_directory_works() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("var-home")).unwrap();
    std::os::unix::fs::symlink("var-home", dir.path().join("home")).unwrap();
    let path = dir.path().join("home/user/.virtwork/audit.db");
    let auditor = Auditor::open_path(&path).unwrap_or_else(|e| panic!("{e}"));
    drop(auditor);
    let real = dir.path().join("var-home/user/.virtwork/audit.db");
    assert!(real.is_file(), "the database is in the real directory");
    let out = virtwork(&path, &["--output", "json", "audit", "list"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And through a relative link in the path of an existing database.
    std::os::unix::fs::symlink(dir.path().join("var-home/user"), dir.path().join("me")).unwrap();
    drop(Auditor::open_path(&dir.path().join("me/.virtwork/audit.db")).unwrap());
}

/// A database file this attempt created is removed when SQLite then cannot use it, so a
/// failure leaves no empty file behind; an existing file is never removed.
#[test]
fn a_failed_open_leaves_no_empty_database_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    // SQLite cannot make its write-ahead log where a directory has that name.
    std::fs::create_dir(dir.path().join("audit.db-wal")).unwrap();
    assert!(Auditor::open_path(&path).is_err(), "opened without a WAL");
    assert!(!path.exists(), "an empty database file was left behind");
    std::fs::write(&path, b"").unwrap();
    assert!(Auditor::open_path(&path).is_err());
    assert!(path.exists(), "an existing file was removed");
}

/// A database every user may write could hold any history: refused, as OpenSSH refuses a key
/// file others can write.
#[test]
fn a_world_writable_audit_database_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, path) = temp_db();
    drop(Auditor::open_path(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let Err(err) = Auditor::open_path(&path) else {
        panic!("a world-writable database is used");
    };
    let message = err.to_string();
    assert!(
        message.contains("is writable by every user (mode 666)") && message.contains("chmod 600"),
        "{message}"
    );
}

/// A database its group may write is used, with a warning naming the risk (OpenSSH's
/// judgement of key files); the user's own 0600 database gets none.
#[test]
fn a_group_writable_audit_database_is_used_with_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, path) = temp_db();
    drop(Auditor::open_path(&path).unwrap());
    let quiet = virtwork(&path, &["audit", "list"]);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(
        !String::from_utf8_lossy(&quiet.stderr).contains("writable"),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).unwrap();
    let out = virtwork(&path, &["audit", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the audit database is writable by its group"),
        "{stderr}"
    );
}

/// `virtwork` with no `--audit-db`: HOME and XDG_STATE_HOME as given, run from `cwd`.
fn virtwork_default_db(cwd: &Path, env: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    for (name, _) in std::env::vars() {
        if name.starts_with("VIRTWORK_") || name.starts_with("XDG_") || name == "KUBECONFIG" {
            cmd.env_remove(name);
        }
    }
    cmd.env_remove("HOME");
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.current_dir(cwd).args(args).output().unwrap()
}

#[test]
fn the_default_database_is_in_the_xdg_state_directory_whatever_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let run = ["run", "--dry-run", "--workloads", "cpu", "-o", "json"];
    // HOME only: ~/.local/state/virtwork/virtwork.db.
    let out = virtwork_default_db(&work, &[("HOME", &home)], &run);
    assert_exit(&out, 0);
    let db = home.join(".local/state/virtwork/virtwork.db");
    assert!(db.is_file(), "recorded in {}", db.display());
    assert!(
        !work.join("virtwork.db").exists(),
        "nothing in the working directory"
    );
    let out = virtwork_default_db(dir.path(), &[("HOME", &home)], &["audit", "list"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("Database: {}", db.display())),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        stdout(&out)
            .lines()
            .filter(|l| l.contains(" dry-run "))
            .count(),
        1,
        "{}",
        stdout(&out)
    );
    // XDG_STATE_HOME wins over HOME.
    let state = dir.path().join("state");
    let out = virtwork_default_db(&work, &[("HOME", &home), ("XDG_STATE_HOME", &state)], &run);
    assert_exit(&out, 0);
    assert!(state.join("virtwork/virtwork.db").is_file());
}
