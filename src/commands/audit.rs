//! `virtwork audit list|show`: the audit history without the sqlite3 CLI.
//!
//! Resolves the database path and output format from the shared configuration, runs the
//! queries in [`crate::audit::query`] and renders them as aligned text or one JSON document
//! (schema in docs/audit-schema.md). Never writes to the database beyond the in-place schema
//! upgrade that opening performs, and never creates a database that does not exist.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::audit::ExecutionStatus;
use crate::audit::query::{self, ExecutionDetail, ExecutionRecord, Executions, ListFilter};
use crate::cli::AuditCommand;
use crate::config::AuditSettings;
use crate::error::{Error, Result};
use crate::model::{OutputFormat, RunIdSelector};

/// What `virtwork audit` reads and how it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    pub db_path: PathBuf,
    pub output: OutputFormat,
    /// Only executions in this namespace (`--namespace` given explicitly).
    pub namespace: Option<String>,
}

impl AuditOptions {
    pub fn from_settings(settings: &AuditSettings) -> Self {
        AuditOptions {
            db_path: settings.global.audit.path.clone(),
            output: settings.global.output,
            namespace: settings.namespace_filter.as_ref().map(|ns| ns.to_string()),
        }
    }
}

/// Runs `virtwork audit` against the configured database, writing the product to stdout.
pub fn audit(settings: &AuditSettings) -> Result<()> {
    let options = AuditOptions::from_settings(settings);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    run(&settings.command, &options, &mut out)
}

/// Runs one `audit` subcommand, writing the product to `out`.
pub fn run(command: &AuditCommand, options: &AuditOptions, out: &mut dyn Write) -> Result<()> {
    match command {
        AuditCommand::List { limit, status } => {
            let status = status.as_deref().map(parse_status).transpose()?;
            let filter = ListFilter {
                limit: (*limit > 0).then_some(*limit),
                status,
                namespace: options.namespace.clone(),
            };
            list(options, &filter, out)
        }
        AuditCommand::Show { run_id } => show(options, run_id, out),
    }
}

/// Parses `--status`, naming the accepted values when it is not one of them.
pub fn parse_status(value: &str) -> Result<ExecutionStatus> {
    ExecutionStatus::parse(value.trim()).ok_or_else(|| {
        let accepted: Vec<&str> = ExecutionStatus::ALL.iter().map(|s| s.as_str()).collect();
        Error::input(format!(
            "invalid --status \"{value}\": expected one of {}",
            accepted.join(", ")
        ))
    })
}

fn list(options: &AuditOptions, filter: &ListFilter, out: &mut dyn Write) -> Result<()> {
    if !database_exists(&options.db_path) {
        // No database means no history yet, which is not an error for a listing.
        let text = match options.output {
            OutputFormat::Json | OutputFormat::Yaml => {
                list_document::<ExecutionRecord>(options.output, &[], &options.db_path)?
            }
            OutputFormat::Text => format!(
                "no audit database at {}\n{OLDER_DATABASES}\n",
                options.db_path.display()
            ),
        };
        return emit(out, &text);
    }
    let conn = query::open_existing(&options.db_path)?;
    let executions = query::list_executions(&conn, filter)?;
    let text = match options.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            list_document(options.output, &executions, &options.db_path)?
        }
        OutputFormat::Text => render_list(&executions, &options.db_path),
    };
    emit(out, &text)
}

fn show(options: &AuditOptions, given: &RunIdSelector, out: &mut dyn Write) -> Result<()> {
    if !database_exists(&options.db_path) {
        return Err(Error::input(format!(
            "no audit database at {}: pass the file that recorded run {given} with --audit-db",
            options.db_path.display()
        )));
    }
    let run_id = super::run_ids::in_database(given, "run id", &options.db_path, Executions::All)?;
    let conn = query::open_existing(&options.db_path)?;
    let Some(detail) = query::show_execution(&conn, &run_id.to_string())? else {
        return Err(Error::input(format!(
            "no execution with run id \"{run_id}\" in {}: list recorded runs with `virtwork audit list`",
            options.db_path.display()
        )));
    };
    let text = match options.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let mut doc = serde_json::to_value(&detail)
                .map_err(|e| Error::runtime(format!("encoding JSON output: {e}")))?;
            if let Some(fields) = doc.as_object_mut() {
                fields.insert("format_version".into(), AUDIT_FORMAT_VERSION.into());
                fields.insert("command".into(), "audit show".into());
            }
            json_document(options.output, &doc)?
        }
        OutputFormat::Text => render_detail(&detail),
    };
    emit(out, &text)
}

fn database_exists(path: &Path) -> bool {
    path.as_os_str() != ":memory:" && path.is_file()
}

/// Version of the `audit list` and `audit show` documents' schema (docs/output-json.md).
const AUDIT_FORMAT_VERSION: u32 = 1;

/// Where history recorded before the XDG default may be: the working directory of each
/// earlier command (`virtwork.db` was the default there).
pub const OLDER_DATABASES: &str = "Runs recorded by earlier versions (default ./virtwork.db) are \
    in virtwork.db of the directory they ran in: `virtwork audit list --audit-db DIR/virtwork.db`";

fn list_document<T: serde::Serialize>(
    format: OutputFormat,
    executions: &[T],
    db_path: &Path,
) -> Result<String> {
    json_document(
        format,
        &serde_json::json!({
            "format_version": AUDIT_FORMAT_VERSION,
            "command": "audit list",
            "database": db_path.display().to_string(),
            "executions": executions,
        }),
    )
}

fn json_document(format: OutputFormat, value: &impl serde::Serialize) -> Result<String> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("encoding JSON output: {e}")))?;
    super::document_text(format, &text)
}

fn emit(out: &mut dyn Write, text: &str) -> Result<()> {
    super::written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// The `audit list` table, newest first.
pub fn render_list(executions: &[ExecutionRecord], db_path: &Path) -> String {
    if executions.is_empty() {
        return format!(
            "no matching executions recorded in {}\n{OLDER_DATABASES}\n",
            db_path.display()
        );
    }
    let rows = executions
        .iter()
        .map(|e| {
            vec![
                e.run_id.clone(),
                e.command.clone(),
                e.status.clone(),
                e.namespace.clone(),
                e.started_at.clone(),
                e.duration_seconds
                    .map_or_else(|| "-".to_string(), format_duration),
                summary_of_objects(e),
            ]
        })
        .collect();
    let mut text = table(
        &[
            "RUN ID",
            "COMMAND",
            "STATUS",
            "NAMESPACE",
            "STARTED",
            "DURATION",
            "OBJECTS",
        ],
        rows,
        "",
    );
    text.push_str(&format!("\nDatabase: {}\n", db_path.display()));
    text
}

/// What the execution planned (run) or deleted (cleanup), in a few words.
fn summary_of_objects(e: &ExecutionRecord) -> String {
    if let Some(d) = &e.deleted {
        return format!(
            "deleted {} VMs, {} services, {} secrets",
            d.counts.vms, d.counts.services, d.counts.secrets
        );
    }
    let vms = |n: i64| {
        if n == 1 {
            "1 VM".to_string()
        } else {
            format!("{n} VMs")
        }
    };
    match (e.total_vm_count, e.workloads.is_empty()) {
        (Some(n), false) => format!("{}: {}", vms(n), e.workloads.join(",")),
        (Some(n), true) => vms(n),
        (None, false) => e.workloads.join(","),
        (None, true) => "-".to_string(),
    }
}

/// `audit show`: the run's fields, then a table per recorded part (workloads, VMs, resources,
/// events, the cleanups that removed it), each only when it has rows.
pub fn render_detail(d: &ExecutionDetail) -> String {
    let fields = detail_fields(&d.execution);
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut text = String::new();
    for (key, value) in &fields {
        // Recorded values can hold names and messages from the cluster.
        let value = crate::terminal::safe(value, crate::terminal::MESSAGE_CHARS);
        text.push_str(&format!("{:<width$} {value}\n", format!("{key}:")));
    }

    workloads_section(d, &mut text);
    vms_section(d, &mut text);
    resources_section(d, &mut text);
    events_section(d, &mut text);
    cleanups_section(d, &mut text);
    text
}

/// What an execution's linked runs are: a churn links the runs whose VMs it acted on, a
/// cleanup those whose objects it deleted.
fn linked_runs_label(command: &str) -> &'static str {
    if command.starts_with("churn") {
        "Churned runs"
    } else {
        "Cleaned runs"
    }
}

/// The run's own fields, in display order; absent values are left out.
fn detail_fields(e: &ExecutionRecord) -> Vec<(&'static str, String)> {
    let mut fields: Vec<(&'static str, String)> = vec![
        ("Run ID", e.run_id.clone()),
        ("Command", e.command.clone()),
        ("Status", e.status.clone()),
        ("Namespace", e.namespace.clone()),
        ("Started", e.started_at.clone()),
    ];
    if let Some(done) = &e.completed_at {
        let took = e
            .duration_seconds
            .map(|s| format!(" (took {})", format_duration(s)))
            .unwrap_or_default();
        fields.push(("Completed", format!("{done}{took}")));
    }
    if let Some(error) = &e.error_summary {
        fields.push(("Error", error.clone()));
    }
    push_opt(&mut fields, "Cluster context", e.cluster_context.as_deref());
    push_opt(&mut fields, "Kubeconfig", e.kubeconfig_path.as_deref());
    push_opt(&mut fields, "Image", e.container_disk_image.as_deref());
    let defaults = [
        e.default_cpu_cores.map(|c| format!("{c} CPU")),
        e.default_memory.as_ref().map(|m| format!("{m} memory")),
        e.data_disk_size.as_ref().map(|s| format!("{s} data disk")),
    ];
    let defaults: Vec<String> = defaults.into_iter().flatten().collect();
    if !defaults.is_empty() {
        fields.push(("Defaults", defaults.join(", ")));
    }
    if !e.workloads.is_empty() {
        fields.push(("Workloads", e.workloads.join(",")));
    }
    if let Some(vms) = e.total_vm_count {
        fields.push(("Planned VMs", vms.to_string()));
    }
    fields.push(("Dry run", yes_no(e.dry_run).to_string()));
    fields.push((
        "Wait for ready",
        match (e.wait_for_ready, e.ready_timeout_seconds) {
            (true, Some(t)) => format!("yes (timeout {t}s)"),
            (wait, _) => yes_no(wait).to_string(),
        },
    ));
    fields.push((
        "SSH access",
        if e.ssh_auth_configured {
            "configured"
        } else {
            "none"
        }
        .to_string(),
    ));
    push_opt(&mut fields, "Cleanup mode", e.cleanup_mode.as_deref());
    if !e.linked_run_ids.is_empty() {
        fields.push((linked_runs_label(&e.command), e.linked_run_ids.join(", ")));
    }
    if let Some(c) = &e.deleted {
        fields.push((
            "Deleted",
            format!(
                "{} VMs, {} services, {} secrets, {} DVs, {} PVCs, namespace {}",
                c.counts.vms,
                c.counts.services,
                c.counts.secrets,
                c.counts.dvs,
                c.counts.pvcs,
                if c.namespace_deleted {
                    "deleted"
                } else {
                    "kept"
                }
            ),
        ));
    }
    fields
}

/// Per workload: size, data disk, Service and status.
fn workloads_section(d: &ExecutionDetail, text: &mut String) {
    if !d.workloads.is_empty() {
        text.push_str("\nWorkloads:\n");
        let rows = d
            .workloads
            .iter()
            .map(|w| {
                vec![
                    w.workload_type.clone(),
                    w.vm_count.to_string(),
                    w.cpu_cores.to_string(),
                    w.memory.clone(),
                    w.data_disk_size
                        .clone()
                        .filter(|_| w.has_data_disk)
                        .unwrap_or_else(|| "-".into()),
                    yes_no(w.requires_service).to_string(),
                    w.status.clone(),
                ]
            })
            .collect();
        text.push_str(&table(
            &[
                "WORKLOAD",
                "VMS",
                "CPU",
                "MEMORY",
                "DATA DISK",
                "SERVICE",
                "STATUS",
            ],
            rows,
            "  ",
        ));
    }
}

/// Per VM: placement, status and the time-to-ready milestones.
fn vms_section(d: &ExecutionDetail, text: &mut String) {
    if !d.vms.is_empty() {
        text.push_str("\nVMs:\n");
        let rows = d
            .vms
            .iter()
            .map(|v| {
                vec![
                    v.vm_name.clone(),
                    v.component.clone(),
                    dash(v.role.as_deref()),
                    dash(v.phase.as_deref()),
                    v.status.clone(),
                    dash(v.created_at.as_deref()),
                    v.seconds_to_scheduled
                        .map_or_else(|| "-".into(), format_duration),
                    v.seconds_to_running
                        .map_or_else(|| "-".into(), format_duration),
                    v.seconds_to_ready
                        .map_or_else(|| "-".into(), format_duration),
                    dash(v.deleted_at.as_deref()),
                ]
            })
            .collect();
        text.push_str(&table(
            &[
                "VM",
                "WORKLOAD",
                "ROLE",
                "PHASE",
                "STATUS",
                "CREATED",
                "TO SCHEDULED",
                "TO RUNNING",
                "TO READY",
                "DELETED",
            ],
            rows,
            "  ",
        ));
    }
}

/// Every object the run created or deleted.
fn resources_section(d: &ExecutionDetail, text: &mut String) {
    if !d.resources.is_empty() {
        text.push_str("\nResources:\n");
        let rows = d
            .resources
            .iter()
            .map(|r| {
                vec![
                    r.resource_type.clone(),
                    r.resource_name.clone(),
                    r.status.clone(),
                    dash(r.created_at.as_deref()),
                    dash(r.deleted_at.as_deref()),
                ]
            })
            .collect();
        text.push_str(&table(
            &["KIND", "NAME", "STATUS", "CREATED", "DELETED"],
            rows,
            "  ",
        ));
    }
}

/// The run's events, oldest first.
fn events_section(d: &ExecutionDetail, text: &mut String) {
    if !d.events.is_empty() {
        text.push_str("\nEvents:\n");
        let rows = d
            .events
            .iter()
            .map(|ev| {
                let mut message = ev.message.clone().unwrap_or_default();
                if let Some(detail) = &ev.error_detail {
                    message.push_str(&format!(": {detail}"));
                }
                vec![ev.occurred_at.clone(), ev.event_type.clone(), message]
            })
            .collect();
        text.push_str(&table(&["TIME", "EVENT", "MESSAGE"], rows, "  "));
    }
}

/// The cleanups that removed this run's objects.
fn cleanups_section(d: &ExecutionDetail, text: &mut String) {
    if !d.linked_cleanups.is_empty() {
        text.push_str("\nCleaned up by:\n");
        let rows = d
            .linked_cleanups
            .iter()
            .map(|c| {
                vec![
                    c.run_id.clone(),
                    c.command.clone(),
                    c.status.clone(),
                    c.started_at.clone(),
                ]
            })
            .collect();
        text.push_str(&table(
            &["RUN ID", "COMMAND", "STATUS", "STARTED"],
            rows,
            "  ",
        ));
    }
}

fn push_opt<'a>(fields: &mut Vec<(&'a str, String)>, key: &'a str, value: Option<&str>) {
    if let Some(v) = value {
        fields.push((key, v.to_string()));
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_string()
}

/// `45s`, `3m05s`, `2h01m`.
pub fn format_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The audit tables: the shared renderer with owned rows.
fn table(headers: &[&str], rows: Vec<Vec<String>>, indent: &str) -> String {
    crate::table::columns(headers, &rows, indent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_status_is_input_error_listing_every_status() {
        let err = parse_status("done").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            err.to_string(),
            "invalid --status \"done\": expected one of in_progress, success, failed, aborted, cancelled"
        );
        assert_eq!(
            parse_status("cancelled").unwrap(),
            ExecutionStatus::Cancelled
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(5), "5s");
        assert_eq!(format_duration(185), "3m05s");
        assert_eq!(format_duration(7260), "2h01m");
    }
}
