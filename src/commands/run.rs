//! `virtwork run`: plan the fleet from the Config, apply it to the cluster, wait and report.
//!
//! Every mode starts with [`prepare`] (registry, run id, pure plan), so bad input is
//! rejected with exit 2 before anything is printed or sent. `--dry-run` (client) then only
//! renders the plan to stdout with [`print_plan`]: no cluster is contacted and no kubeconfig
//! is read. Logs go to stderr; stdout carries only the product.

use std::io::Write;

use crate::cli::{DryRunMode, OutputFormat};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::plan::{self, Plan};
use crate::render;
use crate::workloads::Registry;

/// Runs `virtwork run` with an already loaded and validated configuration.
pub async fn run(config: &Config) -> Result<()> {
    match config.dry_run {
        Some(DryRunMode::Client) => {
            let plan = prepare(config)?;
            print_plan(config, &plan, &mut std::io::stdout().lock())
        }
        // Applying the plan (and dryRun=All) is the run engine's; it reuses `prepare`.
        Some(DryRunMode::Server) | None => Err(Error::NotImplemented {
            command: "run",
            issue: 5,
        }),
    }
}

/// A fresh run id: a UUID v4 for every run, audited or not (SPEC §1 item 3).
pub fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Loads the registry (built-ins plus the requested catalog entries), generates the run id
/// and builds the plan. Touches no cluster; every error here is the user's input (exit 2)
/// or an unreadable catalog file.
pub fn prepare(config: &Config) -> Result<Plan> {
    let registry = Registry::with_catalog(&config.catalog_dir, &config.from_catalog)?;
    let run_id = new_run_id();
    let plan = plan::build_plan(config, &registry, &run_id)?;
    // AUDIT HOOK: start the execution record here (command `run` or `dry-run`, this run id),
    // then record `workload_skipped` per skipped name and the planned workloads, so a plan
    // that fails validation above leaves no audit row (reference: errors before planning
    // are never audited).
    for name in &plan.skipped {
        tracing::info!(workload = %name, reason = "disabled in config", "workload skipped");
    }
    Ok(plan)
}

/// Prints a planned run for `--dry-run`: the YAML stream (default) or, with
/// `--output json`, one JSON document (docs/output-json.md), written in one piece.
/// Logs the reference's `dry run mode` and `deployment summary` lines on stderr.
pub fn print_plan(config: &Config, plan: &Plan, out: &mut dyn Write) -> Result<()> {
    tracing::info!(total_vms = plan.vms.len(), "dry run mode");
    let text = match config.output {
        OutputFormat::Json => {
            let document = render::plan_json(plan, "client")?;
            let mut text = serde_json::to_string_pretty(&document)
                .map_err(|err| Error::runtime(format!("rendering the plan as JSON: {err}")))?;
            text.push('\n');
            text
        }
        OutputFormat::Text => render::dry_run_yaml(plan)?,
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(super::write_failed)?;
    tracing::info!(
        run_id = %plan.run_id,
        namespace = %plan.namespace,
        vms_created = plan.vms.len(),
        services_created = plan.services.len(),
        secrets_created = plan.vms.len(),
        container_image = %config.container_disk_image,
        "deployment summary"
    );
    Ok(())
}
