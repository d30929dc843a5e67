//! `virtwork report`: one self-contained HTML page about recorded runs.
//!
//! Owns: reading each run's records (and those of the churn executions linked to it) from
//! the audit database, reading its signals and alerts over its window from Prometheus when
//! one is reachable (found as verify finds it, or `--prometheus`; [`prometheus`]), verify's
//! verdicts on its VMs with each VM's own thresholds and expected shapes ([`load`]), running
//! `virtwork disruption`'s analysis over its window when the cluster is reachable
//! ([`disruption`]; never contacted with `--no-prometheus`, the audit database alone),
//! handing them to [`crate::htmlreport::page`], and writing the page in one step (a
//! temporary file beside it, then a rename, so a reader never sees half a page; only over a
//! regular file, or to standard output with `--html -`). Never writes to the database beyond
//! the in-place schema upgrade that opening performs, and never creates one; read-only on
//! the cluster. A Prometheus that cannot be reached or answers with an error
//! leaves a note on the page, not a failed command. Must not: compute figures or build
//! markup.

mod disruption;
mod load;
mod prometheus;

use std::io::Write;
use std::path::Path;

use crate::audit::query::{self, ExecutionDetail, Executions};
use crate::config::ReportSettings;
use crate::error::{Error, Result};
use crate::htmlreport::data::Fetched;
use crate::htmlreport::{Provenance, RunRecord, page};
use crate::model::{RunIdSelector, RunRef};
use tokio_util::sync::CancellationToken;

/// Runs `virtwork report`: reads the runs, adds what Prometheus holds, writes the page, says
/// where on stdout.
pub async fn report(settings: &ReportSettings) -> Result<()> {
    let target = PageTarget::of(&settings.html)?;
    let db = &settings.global.audit.path;
    let run_ids = resolve_runs(db, &settings.run_ids)?;
    let mut runs = read_runs(db, &run_ids)?;
    let cancel = CancellationToken::new();
    crate::commands::install_interrupt_handler(cancel.clone());
    let api = prometheus::reach_or_why(settings, &cancel).await?;
    // --no-prometheus is the audit database alone: the cluster is not contacted either.
    let cluster = match settings.prometheus {
        Some(_) => disruption::connect_or_why(settings, &cancel).await?,
        None => Err("left out with --no-prometheus (the audit database alone)".to_string()),
    };
    prometheus::add(api.as_ref(), &mut runs, &cancel).await?;
    load::add(settings, api.as_ref(), cluster.as_ref(), &mut runs, &cancel).await?;
    disruption::add(settings, api.as_ref(), cluster.as_ref(), &mut runs, &cancel).await?;
    let provenance = Provenance {
        database: db.display().to_string(),
        generated_at: crate::audit::timestamp_now(),
        generator: format!("virtwork {}", env!("CARGO_PKG_VERSION")),
    };
    let html = page(&runs, &provenance);
    let path = match target {
        PageTarget::Stdout => return super::write_stdout(html.as_str()),
        PageTarget::File(path) => path,
    };
    write_page(&path, html.as_str())?;
    super::write_stdout(&format!(
        "wrote {} ({} KiB): {}\n",
        settings.html.display(),
        html.as_str().len().div_ceil(1024),
        run_ids
            .iter()
            .map(|id| format!("run {id}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The runs `--run-id` names, prefixes resolved among the recorded executions, in the order
/// given, each once.
fn resolve_runs(db: &Path, given: &[RunIdSelector]) -> Result<Vec<RunRef>> {
    let mut runs: Vec<RunRef> = Vec::new();
    for selector in given {
        let run = super::run_ids::in_database(selector, "--run-id", db, Executions::All)?;
        if !runs.contains(&run) {
            runs.push(run);
        }
    }
    Ok(runs)
}

/// Each run's records, in the order given; an unknown id or one that is not a run is bad
/// input naming it.
pub fn read_runs(db: &Path, run_ids: &[RunRef]) -> Result<Vec<RunRecord>> {
    let exists = db.as_os_str() != ":memory:" && db.is_file();
    if !exists {
        return Err(Error::input(format!(
            "no audit database at {}: pass the file that recorded the run with --audit-db",
            db.display()
        )));
    }
    let conn = query::open_existing(db)?;
    run_ids.iter().map(|id| read_run(&conn, db, id)).collect()
}

fn read_run(conn: &rusqlite::Connection, db: &Path, run_id: &RunRef) -> Result<RunRecord> {
    let Some(detail) = query::show_execution(conn, &run_id.to_string())? else {
        return Err(Error::input(format!(
            "--run-id {run_id}: no execution with this run id in {}: list recorded runs with `virtwork audit list`",
            db.display()
        )));
    };
    if !matches!(detail.execution.command.as_str(), "run" | "dry-run") {
        return Err(Error::input(format!(
            "--run-id {run_id}: this is a `{}` execution, not a run; pass the id of the run it \
             acted on (`virtwork audit show {run_id}` lists it)",
            crate::terminal::safe(&detail.execution.command, 64)
        )));
    }
    let churns = churns_of(conn, &detail)?;
    Ok(RunRecord {
        detail,
        churns,
        load: Fetched::Missing("Prometheus was not read".into()),
        alerts: Fetched::Missing("Prometheus was not read".into()),
        disruption: Fetched::Missing("the cluster was not read".into()),
    })
}

/// The churn executions linked to the run, with their events.
fn churns_of(
    conn: &rusqlite::Connection,
    detail: &ExecutionDetail,
) -> Result<Vec<ExecutionDetail>> {
    let mut churns = Vec::new();
    for linked in &detail.linked_cleanups {
        if linked.command != "churn" {
            continue;
        }
        if let Some(churn) = query::show_execution(conn, &linked.run_id)? {
            churns.push(churn);
        }
    }
    Ok(churns)
}

/// Where the page goes.
#[derive(Debug, PartialEq)]
enum PageTarget {
    /// `--html -`: standard output (nothing else is printed there).
    Stdout,
    /// The regular file to create or replace (a symlink's target: the link stays).
    File(std::path::PathBuf),
}

impl PageTarget {
    /// `--html`, checked before anything is read: the page replaces only a regular file
    /// (written through a temporary file and a rename, which would put a regular file in
    /// place of a device, a fifo or a socket, e.g. /dev/full when run as root).
    fn of(given: &Path) -> Result<PageTarget> {
        if given.as_os_str() == "-" {
            return Ok(PageTarget::Stdout);
        }
        let metadata = match std::fs::metadata(given) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match std::fs::symlink_metadata(given) {
                    // A dangling link: the page would silently replace the link.
                    Ok(_) => Err(not_a_file(given, "a symbolic link to nothing")),
                    Err(_) => Ok(PageTarget::File(given.to_path_buf())),
                };
            }
            Err(e) => {
                return Err(Error::Io {
                    context: "reading",
                    path: given.to_path_buf(),
                    source: e,
                });
            }
        };
        if !metadata.is_file() {
            return Err(not_a_file(given, kind_of(&metadata.file_type())));
        }
        let is_link = std::fs::symlink_metadata(given).is_ok_and(|m| m.file_type().is_symlink());
        match is_link {
            // Written beside the file the link names, so the link keeps naming the page.
            true => std::fs::canonicalize(given)
                .map(PageTarget::File)
                .map_err(|e| Error::Io {
                    context: "reading",
                    path: given.to_path_buf(),
                    source: e,
                }),
            false => Ok(PageTarget::File(given.to_path_buf())),
        }
    }
}

fn kind_of(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a fifo"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn not_a_file(given: &Path, kind: &str) -> Error {
    Error::input(format!(
        "--html {}: is {kind}; expected the path of an HTML file to create or replace (a \
         regular file), or - to write the page to standard output",
        crate::terminal::safe(&given.display().to_string(), 200)
    ))
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename.
fn write_page(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.html".into());
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let failed = |source: std::io::Error, at: &Path| Error::Io {
        context: "writing",
        path: at.to_path_buf(),
        source,
    };
    let written = std::fs::File::create(&temp)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .map_err(|e| failed(e, &temp))
        .and_then(|()| std::fs::rename(&temp, path).map_err(|e| failed(e, path)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}
