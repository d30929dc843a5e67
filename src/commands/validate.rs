//! `virtwork validate`: loads catalog entries and reports each one on stdout
//! (`OK    <name>`, `WARN  <name>: ...`, `FAIL  <name>: ...`). Any failure is exit 2.
//!
//! The catalog directory is `--catalog-dir`, else `VIRTWORK_CATALOG_DIR`, else YAML
//! `catalog-dir`, else `~/.virtwork/catalog` (resolved by the configuration). Entries are the
//! positional names, else every sub-directory (sorted). Besides the manifest and placeholder checks, each entry is rendered once with
//! its defaults, so an entry that validates also builds.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::config::{SampleBuild, ValidateSettings};
use crate::error::{Error, Result};
use crate::model::SshAccess;
use crate::workloads::GuestFamily;
use crate::workloads::catalog::CatalogEntry;
use crate::workloads::{WorkloadOptions, WorkloadSettings};

/// Runs `virtwork validate`, writing the per-entry report to `out`.
pub fn run(settings: &ValidateSettings, out: &mut dyn Write) -> Result<()> {
    let dir = &settings.catalog_dir;
    let entries = if settings.entries.is_empty() {
        let read = std::fs::read_dir(dir).map_err(|e| {
            Error::input(format!("reading catalog directory {}: {e}", dir.display()))
        })?;
        let mut names = Vec::new();
        for item in read {
            let item = item.map_err(|e| {
                Error::input(format!("reading catalog directory {}: {e}", dir.display()))
            })?;
            if item.path().is_dir() {
                names.push(item.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        names
    } else {
        if !dir.is_dir() {
            return Err(Error::input(format!(
                "reading catalog directory {}: not a directory",
                dir.display()
            )));
        }
        settings.entries.clone()
    };
    if entries.is_empty() {
        return Err(Error::input(format!(
            "{}: no catalog entries found",
            dir.display()
        )));
    }

    let mut lines = Vec::new();
    let mut failed = 0;
    for name in &entries {
        let ok = check_entry(dir, name, &settings.sample, &mut lines);
        if !ok {
            failed += 1;
        }
    }
    for line in lines {
        writeln!(out, "{line}").map_err(super::write_failed)?;
    }
    out.flush().map_err(super::write_failed)?;
    if failed > 0 {
        return Err(Error::input(format!(
            "{failed} of {} entries: catalog validation failed",
            entries.len()
        )));
    }
    Ok(())
}

/// Appends the report lines of one entry; `false` when it failed.
fn check_entry(dir: &Path, name: &str, sample: &SampleBuild, lines: &mut Vec<String>) -> bool {
    let entry = match CatalogEntry::load(dir, name) {
        Ok(entry) => entry,
        Err(e) => {
            lines.push(format!("FAIL  {name}: {e}"));
            return false;
        }
    };
    let report = entry.placeholder_report();
    for warning in &report.warnings {
        lines.push(format!("WARN  {name}: {warning}"));
    }
    for error in &report.errors {
        lines.push(format!("FAIL  {name}: {error}"));
    }
    if !report.errors.is_empty() {
        return false;
    }
    let options = WorkloadOptions {
        namespace: sample.namespace.clone(),
        data_disk_size: sample.disk_size.clone(),
        ssh: SshAccess::default(),
        catalog_dir: dir.to_path_buf(),
        planned_workloads: vec![name.to_string()],
        guest_exec: true,
        run_tag: String::new(),
    };
    // An entry must render for every guest family it may be run on.
    for guest_family in GuestFamily::ALL {
        let settings = WorkloadSettings {
            vm_count: 1,
            cpu_cores: sample.cpu_cores,
            memory: sample.memory.clone(),
            params: BTreeMap::new(),
            guest_family,
        };
        if let Err(e) = entry.build(&settings, &options) {
            lines.push(format!("FAIL  {name}: {e} (guest family {guest_family})"));
            return false;
        }
    }
    lines.push(format!("OK    {name}"));
    true
}
