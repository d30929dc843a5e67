//! `virtwork validate`: loads catalog entries and reports each one on stdout
//! (`OK    <name>`, `WARN  <name>: ...`, `FAIL  <name>: ...`, or one document with
//! `--output json|yaml`). Any failure is exit 2.
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
use crate::model::OutputFormat;
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

    let reports: Vec<EntryReport> = entries
        .iter()
        .map(|name| check_entry(dir, name, &settings.sample))
        .collect();
    let failed = reports.iter().filter(|report| !report.ok()).count();
    let text = match settings.global.output {
        OutputFormat::Text => reports.iter().map(EntryReport::lines).collect(),
        format => super::document_text(format, &validate_json(dir, &reports, failed))?,
    };
    super::written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))?;
    if failed > 0 {
        return Err(Error::input(format!(
            "{failed} of {} entries: catalog validation failed",
            entries.len()
        )));
    }
    Ok(())
}

/// What `validate` found in one entry: warnings, and the failures that make it unusable.
#[derive(Debug, Default)]
struct EntryReport {
    name: String,
    warnings: Vec<String>,
    errors: Vec<String>,
}

impl EntryReport {
    fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// `WARN  <name>: ...` and `FAIL  <name>: ...` lines, or `OK    <name>`.
    fn lines(&self) -> String {
        let name = &self.name;
        let mut text = String::new();
        for warning in &self.warnings {
            text.push_str(&format!("WARN  {name}: {warning}\n"));
        }
        for error in &self.errors {
            text.push_str(&format!("FAIL  {name}: {error}\n"));
        }
        if self.ok() {
            text.push_str(&format!("OK    {name}\n"));
        }
        text
    }
}

/// The `--output json` document (docs/output-json.md).
fn validate_json(dir: &Path, reports: &[EntryReport], failed: usize) -> String {
    let entries: Vec<serde_json::Value> = reports
        .iter()
        .map(|report| {
            serde_json::json!({
                "name": report.name,
                "status": if !report.ok() { "fail" } else if report.warnings.is_empty() { "ok" } else { "warn" },
                "warnings": report.warnings,
                "errors": report.errors,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "format_version": 1,
        "command": "validate",
        "catalog_dir": dir.display().to_string(),
        "entries": entries,
        "failed": failed,
    });
    format!("{doc:#}")
}

/// Loads, checks and test-builds one entry.
fn check_entry(dir: &Path, name: &str, sample: &SampleBuild) -> EntryReport {
    let mut report = EntryReport {
        name: name.to_string(),
        ..EntryReport::default()
    };
    let entry = match CatalogEntry::load(dir, name) {
        Ok(entry) => entry,
        Err(e) => {
            report.errors.push(e.to_string());
            return report;
        }
    };
    let placeholders = entry.placeholder_report();
    report.warnings = placeholders
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect();
    report.errors = placeholders
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    if !report.ok() {
        return report;
    }
    let options = WorkloadOptions {
        namespace: sample.namespace.clone(),
        data_disk_size: sample.disk_size.clone(),
        ssh: SshAccess::default(),
        catalog_dir: dir.to_path_buf(),
        planned_workloads: vec![name.to_string()],
        ready_endpoint: true,
        run_tag: String::new(),
    };
    // An entry must render for every guest family it may be run on, and one with a load
    // profile section also with a profile (its level script and drop-in).
    let mut param_sets = vec![BTreeMap::new()];
    if entry.supports_profiles() {
        param_sets.push(BTreeMap::from([(
            crate::workloads::profile_keys::PROFILE.to_string(),
            "step".to_string(),
        )]));
    }
    for params in param_sets {
        for guest_family in GuestFamily::ALL {
            let settings = WorkloadSettings {
                vm_count: 1,
                cpu_cores: sample.cpu_cores,
                memory: sample.memory.clone(),
                params: params.clone(),
                guest_family,
            };
            if let Err(e) = entry.build(&settings, &options) {
                let with_profile = if params.is_empty() {
                    ""
                } else {
                    ", profile=step"
                };
                report
                    .errors
                    .push(format!("{e} (guest family {guest_family}{with_profile})"));
                return report;
            }
        }
    }
    report
}
