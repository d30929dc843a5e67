//! The command line as a configuration layer: the flags the user gave, already parsed into
//! their model types by clap, each named as typed (`--cpu-cores`).
//!
//! One line per flag. The only I/O: reading `--ssh-key-file`s.

use std::path::PathBuf;

use super::io_reason;
use super::partial::Partial;
use super::value::{Source, Sourced};
use crate::cli::{
    ChurnArgs, CleanupArgs, GlobalArgs, RunArgs, StatusArgs, ValidateArgs, VerifyArgs,
};
use crate::error::{Error, Result};
use crate::model::{DryRunFlag, DryRunMode, Invalid, PublicKey, Switch};

/// `value` as given with `flag`, when it was.
fn given<T: Clone>(value: &Option<T>, flag: &'static str) -> Option<Sourced<T>> {
    value
        .as_ref()
        .map(|value| Sourced::new(value.clone(), Source::Flag(flag)))
}

/// `value` for a switch that was given (`--no-audit`).
fn switch<T>(on: bool, value: T, flag: &'static str) -> Option<Sourced<T>> {
    on.then(|| Sourced::new(value, Source::Flag(flag)))
}

/// The global flags.
pub fn global(args: &GlobalArgs) -> Partial {
    Partial {
        namespace: given(&args.namespace, "--namespace"),
        kubeconfig: given(&args.kubeconfig, "--kubeconfig"),
        context: given(&args.context, "--context"),
        verbose: switch(args.verbose, true, "--verbose"),
        audit: switch(args.no_audit, false, "--no-audit")
            .or(given(&args.audit.map(Switch::is_on), "--audit")),
        audit_db: given(&args.audit_db, "--audit-db"),
        log_format: given(&args.log_format, "--log-format"),
        output: given(&args.output, "--output"),
        qps: given(&args.qps, "--qps"),
        burst: given(&args.burst, "--burst"),
        ..Partial::default()
    }
}

/// The flags of `virtwork run`.
pub fn run(args: &RunArgs) -> Result<Partial> {
    Ok(Partial {
        workloads: given(&args.workloads.as_deref().map(names), "--workloads"),
        vm_count: given(&args.vm_count, "--vm-count"),
        cpu_cores: given(&args.cpu_cores, "--cpu-cores"),
        memory: given(&args.memory, "--memory"),
        disk_size: given(&args.disk_size, "--disk-size"),
        storage_class: given(&args.storage_class, "--storage-class"),
        access_mode: given(&args.access_mode, "--access-mode"),
        volume_mode: given(&args.volume_mode, "--volume-mode"),
        eviction_strategy: given(&args.eviction_strategy, "--eviction-strategy"),
        container_disk_image: given(&args.container_disk_image, "--container-disk-image"),
        guest_os: given(&args.guest_os, "--guest-os"),
        dry_run: given(&args.dry_run.map(DryRunFlag::mode), "--dry-run"),
        wait_for_ready: given(&args.no_wait.map(|s| !s.is_on()), "--no-wait"),
        timeout: given(&args.timeout, "--timeout"),
        ready_condition: given(&args.ready_condition, "--ready-condition"),
        ssh_user: given(&args.ssh_user, "--ssh-user"),
        ssh_password: given(&args.ssh_password, "--ssh-password"),
        ssh_authorized_keys: authorized_keys(&args.ssh_key, &args.ssh_key_file)?,
        vm_concurrency: given(&args.vm_concurrency, "--vm-concurrency"),
        params: given(&args.params, "--params"),
        catalog_dir: given(&args.catalog_dir, "--catalog-dir"),
        from_catalog: given(&args.from_catalog, "--from-catalog"),
        max_starting: given(&args.max_starting, "--max-starting"),
        ramp: given(&args.ramp, "--ramp"),
        fail_fast: given(&args.fail_fast, "--fail-fast"),
        ..Partial::default()
    })
}

/// The flags of `virtwork churn`.
pub fn churn(args: &ChurnArgs) -> Partial {
    Partial {
        churn_duration: given(&args.duration, "--duration"),
        churn_rate: given(&args.rate, "--rate"),
        churn_share: given(&args.share, "--share"),
        churn_actions: given(&args.actions, "--actions"),
        churn_seed: given(&args.seed, "--seed"),
        ..Partial::default()
    }
}

/// The flags of `virtwork cleanup`.
pub fn cleanup(args: &CleanupArgs) -> Partial {
    Partial {
        dry_run: given(
            &args
                .dry_run
                .map(|s| s.is_on().then_some(DryRunMode::Client)),
            "--dry-run",
        ),
        timeout: given(&args.timeout, "--timeout"),
        ..Partial::default()
    }
}

/// The flags of `virtwork status`.
pub fn status(args: &StatusArgs) -> Partial {
    Partial {
        timeout: given(&args.timeout, "--timeout"),
        fail_fast: given(&args.fail_fast, "--fail-fast"),
        ..Partial::default()
    }
}

/// The flags of `virtwork verify` that are configuration keys.
pub fn verify(args: &VerifyArgs) -> Partial {
    Partial {
        catalog_dir: given(&args.catalog_dir, "--catalog-dir"),
        ..Partial::default()
    }
}

/// The flags of `virtwork disruption`.
pub fn disruption(args: &crate::cli::DisruptionArgs) -> Partial {
    Partial {
        catalog_dir: given(&args.catalog_dir, "--catalog-dir"),
        ..Partial::default()
    }
}

/// The flags of `virtwork report` that are configuration keys.
pub fn report(args: &crate::cli::ReportArgs) -> Partial {
    Partial {
        catalog_dir: given(&args.catalog_dir, "--catalog-dir"),
        ..Partial::default()
    }
}

/// The flags of `virtwork validate`.
pub fn validate(args: &ValidateArgs) -> Partial {
    Partial {
        catalog_dir: given(&args.catalog_dir, "--catalog-dir"),
        ..Partial::default()
    }
}

/// Warnings for the Go tool's `--flag=true|false` spellings among the global flags, and for
/// global flags that do nothing for the command.
pub fn legacy_global(args: &GlobalArgs) -> Vec<String> {
    legacy_switch(args.audit, "--audit", "--audit", "--no-audit")
        .into_iter()
        .chain(args.inert_flags.iter().cloned())
        .collect()
}

/// Warnings for the Go tool's spellings among the flags of `virtwork run`.
pub fn legacy_run(args: &RunArgs) -> Vec<String> {
    let dry_run = match args.dry_run {
        Some(DryRunFlag::Valued(on)) => legacy_switch(
            Some(Switch::Valued(on)),
            "--dry-run",
            "--dry-run",
            "no --dry-run",
        ),
        _ => None,
    };
    dry_run
        .into_iter()
        .chain(legacy_switch(
            args.no_wait,
            "--no-wait",
            "--no-wait",
            "no --no-wait",
        ))
        .collect()
}

/// Warnings for the Go tool's spellings among the flags of `virtwork cleanup`.
pub fn legacy_cleanup(args: &CleanupArgs) -> Vec<String> {
    legacy_switch(args.dry_run, "--dry-run", "--dry-run", "no --dry-run")
        .into_iter()
        .collect()
}

/// The deprecation warning for `flag=<bool>`: `on` and `off` say what to write instead.
fn legacy_switch(value: Option<Switch>, flag: &str, on: &str, off: &str) -> Option<String> {
    match value? {
        Switch::Bare => None,
        Switch::Valued(set) => Some(format!(
            "{flag}={set} is the Go tool's boolean flag syntax and is deprecated; write {}",
            if set { on } else { off }
        )),
    }
}

/// A comma list from clap: items trimmed, empty items dropped.
fn names(items: &[String]) -> Vec<String> {
    items
        .iter()
        .map(|item| item.trim())
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

/// Inline `--ssh-key` values followed by the keys in each `--ssh-key-file` (one per line,
/// blank and `#` lines skipped). A key file's content is never echoed.
fn authorized_keys(
    inline: &[PublicKey],
    files: &[PathBuf],
) -> Result<Option<Sourced<Vec<PublicKey>>>> {
    let mut keys = inline.to_vec();
    for path in files {
        let content = std::fs::read_to_string(path).map_err(|err| {
            Error::input(format!(
                "cannot read --ssh-key-file {}: {}",
                path.display(),
                io_reason(&err)
            ))
        })?;
        if content.contains("PRIVATE KEY") {
            return Err(Error::input(format!(
                "--ssh-key-file {} holds a private key; give the public key file (usually ending in .pub)",
                path.display()
            )));
        }
        for (index, line) in content.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key = line.parse().map_err(|why: Invalid| {
                let input = format!("--ssh-key-file {} line {}", path.display(), index + 1);
                Error::input(why.message(&input, line))
            })?;
            keys.push(key);
        }
    }
    let flag = if inline.is_empty() {
        "--ssh-key-file"
    } else {
        "--ssh-key"
    };
    Ok((!keys.is_empty()).then(|| Sourced::new(keys, Source::Flag(flag))))
}
