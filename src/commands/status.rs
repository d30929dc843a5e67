//! `virtwork status`: the runs present on the cluster and the phases of their VMs.
//!
//! Read-only: lists label-selected VMs and VMIs (see k8s/status.rs) and prints a table or
//! one JSON document on stdout. No runs is not an error.

use std::io::Write;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cli::{OutputFormat, StatusArgs};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::k8s::cleanup::{ApiContext, Scope};
use crate::k8s::client::connect_with_config;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::status::collect;
use crate::report::status::{status_json, status_text};

/// Runs `virtwork status` (`args.run_id`, when given, is already checked to be a UUID).
pub async fn status(config: &Config, args: &StatusArgs) -> Result<()> {
    let scope = Scope {
        namespace: (!args.all_namespaces).then(|| config.namespace.clone()),
        run_id: args.run_id.clone(),
    };
    let cluster = connect_with_config(config).await?;
    let cancel = CancellationToken::new();
    crate::commands::cleanup::cancel_on_signal(cancel.clone());
    let ctx = ApiContext {
        client: cluster.client.clone(),
        // --timeout bounds the whole command: every attempt, retry and page.
        policy: RetryPolicy::until(
            Instant::now() + Duration::from_secs(config.timeout_secs.max(1)),
        ),
        cancel,
    };
    let runs = collect(&ctx, &scope).await?;
    let now = jiff::Timestamp::now();
    let namespace = scope.namespace.as_deref();
    let run_id = scope.run_id.as_deref();
    let text = match config.output {
        OutputFormat::Json => format!("{}\n", status_json(namespace, run_id, &runs, now)),
        OutputFormat::Text => status_text(namespace, run_id, &runs, now),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|source| Error::Io {
            context: "writing to",
            path: "stdout".into(),
            source,
        })
}
