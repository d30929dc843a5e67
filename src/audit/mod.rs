//! The SQLite audit database: schema and migrations ([`schema`]), the file opened privately
//! ([`mod@file`]), what is recorded ([`records`], [`event`]), the recorder used by commands
//! ([`recorder`]) and its writer thread ([`writer`]), and the read-only queries behind
//! `virtwork audit` ([`query`]).
//!
//! Commands use it like this (run):
//!
//! ```no_run
//! # use virtwork::audit::{Auditor, CommandKind, Event, ExecutionParams, ExecutionStatus};
//! # fn demo(params: ExecutionParams, plan: &virtwork::plan::Plan) -> virtwork::error::Result<()> {
//! let auditor = Auditor::open(Some(std::path::Path::new("virtwork.db")))?; // the only fatal step
//! let run_id = uuid::Uuid::new_v4(); // generated even with --no-audit
//! let exec = auditor.start_execution(run_id, &params.with_plan(plan));
//! exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
//! exec.record_workloads(plan);
//! // ... record_resource / record_vm / record_event / update_vm_ready ...
//! exec.complete_execution(ExecutionStatus::Success, None);
//! # Ok(()) }
//! ```
//!
//! Audit failures after the database is open only warn; see [`recorder`].

pub mod churn;
pub mod event;
pub mod file;
pub mod query;
pub mod recorder;
pub mod records;
pub mod schema;
pub mod writer;

pub use event::{Event, EventType};
pub use recorder::{Auditor, Execution};
pub use records::{
    CleanupMode, CommandKind, ExecutionParams, ExecutionStatus, ResourceKind, SUMMARY_DECLINED,
    SUMMARY_INTERRUPTED, VmRecord, WorkloadRecord, WorkloadStatus, format_timestamp, timestamp_now,
};
