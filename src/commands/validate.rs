//! `virtwork validate`: loads catalog entries and reports each one on stdout
//! (`OK    <name>`, `WARN  <name>: ...`, `FAIL  <name>: ...`). Any failure is exit 2.
//!
//! The catalog directory is `--catalog-dir`, else `VIRTWORK_CATALOG_DIR`, else
//! `~/.virtwork/catalog`. Entries are the positional names, else every sub-directory
//! (sorted). Besides the manifest and placeholder checks, each entry is rendered once with
//! its defaults, so an entry that validates also builds.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use crate::cli::ValidateArgs;
use crate::config::SshConfig;
use crate::error::{Error, Result};
use crate::workloads::GuestFamily;
use crate::workloads::catalog::CatalogEntry;
use crate::workloads::{WorkloadOptions, WorkloadSettings};

/// The catalog directory from the flag, the environment or the home directory.
pub fn catalog_dir(args: &ValidateArgs, env: &[(String, String)]) -> Result<PathBuf> {
    let var = |name: &str| {
        env.iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    if let Some(dir) = &args.catalog_dir {
        return Ok(dir.clone());
    }
    if let Some(dir) = var("VIRTWORK_CATALOG_DIR") {
        return Ok(PathBuf::from(dir));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".virtwork").join("catalog")),
        None => Err(Error::input(
            "resolving home directory: HOME is not set; pass --catalog-dir or set VIRTWORK_CATALOG_DIR",
        )),
    }
}

/// Runs `virtwork validate`, writing the per-entry report to `out`.
pub fn run(args: &ValidateArgs, env: &[(String, String)], out: &mut dyn Write) -> Result<()> {
    let dir = catalog_dir(args, env)?;
    let entries = if args.entries.is_empty() {
        let read = std::fs::read_dir(&dir).map_err(|e| {
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
        args.entries.clone()
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
        let ok = check_entry(&dir, name, &mut lines);
        if !ok {
            failed += 1;
        }
    }
    let write_err = |e: std::io::Error| Error::Io {
        context: "writing to",
        path: PathBuf::from("stdout"),
        source: e,
    };
    for line in lines {
        writeln!(out, "{line}").map_err(write_err)?;
    }
    out.flush().map_err(write_err)?;
    if failed > 0 {
        return Err(Error::input(format!(
            "{failed} of {} entries: catalog validation failed",
            entries.len()
        )));
    }
    Ok(())
}

/// Appends the report lines of one entry; `false` when it failed.
fn check_entry(dir: &std::path::Path, name: &str, lines: &mut Vec<String>) -> bool {
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
        namespace: crate::config::DEFAULT_NAMESPACE.to_string(),
        data_disk_size: crate::config::DEFAULT_DISK_SIZE.to_string(),
        ssh: SshConfig::default(),
        catalog_dir: dir.to_path_buf(),
        planned_workloads: vec![name.to_string()],
    };
    // An entry must render for every guest family it may be run on.
    for guest_family in GuestFamily::ALL {
        let settings = WorkloadSettings {
            vm_count: 1,
            cpu_cores: crate::config::DEFAULT_CPU_CORES,
            memory: crate::config::DEFAULT_MEMORY.to_string(),
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
