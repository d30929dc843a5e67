//! The audit database schema: the reference tool's v1 DDL, our numbered migrations, and the
//! connection set-up (WAL, foreign keys, busy timeout) every opener goes through.
//!
//! Compatibility contract: a database written by the Go tool opens and upgrades in place, and a
//! database we write stays readable by the Go tool. Version 1 is therefore the reference DDL
//! column for column (`CREATE … IF NOT EXISTS`, so files that predate `schema_version` upgrade
//! cleanly); everything later is an additive, numbered migration applied in its own
//! transaction. This module must not know about runs or commands.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

/// How long a writer waits for another process's write lock before giving up. Runs hold the
/// lock only for single short statements, so this is generous on purpose: concurrent runs
/// sharing one file must never fail with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Baseline DDL: the reference tool's schema v1, kept column-for-column identical (names,
/// types, NOT NULL, defaults, keys, index names and columns).
pub const V1_DDL: &str = "
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
CREATE INDEX IF NOT EXISTS idx_events_audit_id    ON events(audit_id);
CREATE INDEX IF NOT EXISTS idx_events_event_type  ON events(event_type);
CREATE INDEX IF NOT EXISTS idx_events_occurred_at ON events(occurred_at);
";

/// One numbered schema change. Migration N moves `schema_version` from N-1 to N.
pub struct Migration {
    pub version: i64,
    /// What the migration does and why, for `docs/audit-schema.md` and error messages.
    pub description: &'static str,
    apply: fn(&Transaction<'_>) -> rusqlite::Result<()>,
}

/// Every migration, in order. Append only; never edit a released one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "baseline: the reference tool's schema v1",
        apply: apply_v1_baseline,
    },
    Migration {
        version: 2,
        description: "add audit_log.dvs_deleted/pvcs_deleted where an early reference build \
                      created audit_log without them",
        apply: apply_v2_cleanup_count_columns,
    },
    Migration {
        version: 3,
        description: "add vm_details.scheduled_at/running_at: when the readiness watch first \
                      saw each VM's VMI scheduled and Running (time-to-ready figures)",
        apply: apply_v3_vm_timeline_columns,
    },
    Migration {
        version: 4,
        description: "add workload_details.signal_params: the signal params each workload's \
                      VMs were planned with (JSON object), so verify judges by what the run \
                      recorded rather than by what a VM's annotation says now",
        apply: apply_v4_signal_params_column,
    },
];

/// The schema version a fully migrated database has.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

fn apply_v1_baseline(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(V1_DDL)
}

/// Early reference builds wrote migration 1 without these two columns and recorded version 1,
/// so `CREATE TABLE IF NOT EXISTS` never added them; we add whichever is missing.
fn apply_v2_cleanup_count_columns(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let existing = column_names(tx, "audit_log")?;
    for column in ["dvs_deleted", "pvcs_deleted"] {
        if !existing.iter().any(|c| c == column) {
            tx.execute_batch(&format!(
                "ALTER TABLE audit_log ADD COLUMN {column} INTEGER"
            ))?;
        }
    }
    Ok(())
}

/// Nullable TEXT columns, so rows written before (and by the Go tool) stay valid and the Go
/// tool, which names its columns, keeps reading the table.
fn apply_v3_vm_timeline_columns(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let existing = column_names(tx, "vm_details")?;
    for column in ["scheduled_at", "running_at"] {
        if !existing.iter().any(|c| c == column) {
            tx.execute_batch(&format!("ALTER TABLE vm_details ADD COLUMN {column} TEXT"))?;
        }
    }
    Ok(())
}

/// A nullable TEXT column: NULL means "not recorded" (rows written before this version, or by
/// the Go tool), which verify tells apart from a recorded empty object `{}`.
fn apply_v4_signal_params_column(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    if !column_names(tx, "workload_details")?
        .iter()
        .any(|c| c == "signal_params")
    {
        tx.execute_batch("ALTER TABLE workload_details ADD COLUMN signal_params TEXT")?;
    }
    Ok(())
}

pub(crate) fn column_names(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt.query_map([], |row| row.get::<_, String>(1))?;
    names.collect()
}

/// Applies the connection settings every audit connection needs. The busy timeout comes first
/// so that even switching to WAL waits for a concurrent opener instead of failing.
pub fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // WAL lets readers (`virtwork audit`) and one writer work at once; concurrent writers
    // serialise on the write lock, bounded by the busy timeout.
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        tracing::debug!(journal_mode = %mode, "audit database did not switch to WAL");
    }
    // In WAL mode NORMAL keeps the file consistent on power loss (at worst the last commits
    // are lost) while skipping an fsync per transaction; an audit trail needs no more.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

/// Reads the current schema version (0 when the table is missing or empty).
pub fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    let has_table: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version')",
        [],
        |row| row.get(0),
    )?;
    if !has_table {
        return Ok(0);
    }
    let version = conn
        .query_row("SELECT version FROM schema_version LIMIT 1", [], |row| {
            row.get::<_, i64>(0)
        })
        .optional()?;
    Ok(version.unwrap_or(0))
}

/// Brings the database to [`latest_version`]. Safe to run from many processes at once: the
/// version is re-read inside each `BEGIN IMMEDIATE` transaction, so a migration another
/// process already applied is skipped.
pub fn migrate(conn: &mut Connection) -> Result<(), MigrationError> {
    // A current database needs no write at all: reading the version takes no lock in WAL
    // mode, so a database another process holds locked still opens (writes then queue).
    let current = current_version(conn).map_err(|source| MigrationError {
        step: "reading schema_version".to_string(),
        source,
    })?;
    if current >= latest_version() {
        return Ok(());
    }
    init_version_table(conn).map_err(|source| MigrationError {
        step: "initialising schema_version".to_string(),
        source,
    })?;
    for migration in MIGRATIONS {
        apply_if_needed(conn, migration).map_err(|source| MigrationError {
            step: format!(
                "migration {} ({})",
                migration.version, migration.description
            ),
            source,
        })?;
    }
    Ok(())
}

/// A migration step that failed, and why.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct MigrationError {
    pub step: String,
    #[source]
    pub source: rusqlite::Error,
}

fn init_version_table(conn: &mut Connection) -> rusqlite::Result<()> {
    {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
        let rows: i64 = tx.query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0))?;
        if rows == 0 {
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", [])?;
        }
        tx.commit()?;
    }
    Ok(())
}

fn apply_if_needed(conn: &mut Connection, migration: &Migration) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current: i64 = tx.query_row("SELECT version FROM schema_version", [], |r| r.get(0))?;
    if current >= migration.version {
        return Ok(()); // dropping `tx` rolls back the empty transaction
    }
    (migration.apply)(&tx)?;
    tx.execute(
        "UPDATE schema_version SET version = ?1",
        [migration.version],
    )?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        configure(&conn).unwrap();
        migrate(&mut conn).unwrap();
        conn
    }

    #[test]
    fn fresh_database_reaches_latest_version_with_one_version_row() {
        let conn = fresh();
        assert_eq!(current_version(&conn).unwrap(), latest_version());
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }

    #[test]
    fn migrating_twice_changes_nothing() {
        let mut conn = fresh();
        migrate(&mut conn).unwrap();
        assert_eq!(current_version(&conn).unwrap(), latest_version());
        assert_eq!(
            column_names(&conn, "audit_log").unwrap().len(),
            29,
            "audit_log keeps exactly the reference's 29 columns"
        );
    }

    #[test]
    fn early_reference_database_gains_the_missing_cleanup_count_columns() {
        let mut conn = Connection::open_in_memory().unwrap();
        let early = V1_DDL
            .replace("    dvs_deleted           INTEGER,\n", "")
            .replace("    pvcs_deleted          INTEGER,\n", "");
        conn.execute_batch(&early).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_version (version INTEGER NOT NULL);
             INSERT INTO schema_version VALUES (1);",
        )
        .unwrap();
        assert!(
            !column_names(&conn, "audit_log")
                .unwrap()
                .contains(&"dvs_deleted".into())
        );
        migrate(&mut conn).unwrap();
        let columns = column_names(&conn, "audit_log").unwrap();
        assert!(columns.contains(&"dvs_deleted".to_string()));
        assert!(columns.contains(&"pvcs_deleted".to_string()));
        assert_eq!(current_version(&conn).unwrap(), latest_version());
    }
}
