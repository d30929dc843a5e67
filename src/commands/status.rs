//! `virtwork status`: the runs present on the cluster and the phases of their VMs.
//!
//! Read-only: lists label-selected VMs and VMIs (see k8s/status.rs) and prints a table or
//! one JSON document on stdout. No runs is not an error; a namespace that does not exist is
//! (exit 1), said as such rather than as "no runs".

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::StatusSettings;
use crate::error::{Error, Result};
use crate::k8s::client::connect_from_env;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope};
use crate::k8s::status::collect;
use crate::model::OutputFormat;
use crate::report::status::{status_json, status_text};

/// Runs `virtwork status` with its resolved settings.
pub async fn status(settings: &StatusSettings) -> Result<()> {
    let scope = Scope {
        namespace: (!settings.all_namespaces).then(|| settings.global.namespace.to_string()),
        run_id: settings.run_id.map(|id| id.to_string()),
    };
    let access = &settings.global.cluster;
    let cluster = connect_from_env(
        &access.kubeconfig,
        access.context.as_deref(),
        access.rate_limit,
    )
    .await?;
    let cancel = CancellationToken::new();
    cluster.gate.stop_when(&cancel);
    crate::commands::install_interrupt_handler(cancel.clone());
    let ctx = ApiContext {
        client: cluster.client.clone(),
        // --timeout bounds the whole command: every attempt, retry and page.
        policy: RetryPolicy::until(
            Instant::now() + Duration::from_secs(settings.timeout.get().max(1)),
        ),
        cancel,
    };
    crate::k8s::reach::reach(&cluster, &ctx.policy, &ctx.cancel).await?;
    let runs = collect(&ctx, &scope).await?;
    if runs.is_empty()
        && let Some(ns) = scope.namespace.as_deref()
    {
        check_namespace_exists(&ctx, ns).await?;
    }
    let now = jiff::Timestamp::now();
    let namespace = scope.namespace.as_deref();
    let run_id = scope.run_id.as_deref();
    let text = match settings.global.output {
        format @ (OutputFormat::Json | OutputFormat::Yaml) => {
            super::document_text(format, &status_json(namespace, run_id, &runs, now))?
        }
        OutputFormat::Text => status_text(namespace, run_id, &runs, now),
    };
    super::write_stdout(&text)
}

/// An empty answer for a namespace that does not exist is a typo more often than a cleaned-up
/// fleet: say which it is.
async fn check_namespace_exists(ctx: &ApiContext, ns: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(ctx.client.clone());
    let what = format!("reading namespace {ns}");
    match ctx.call(&what, || api.get_opt(ns)).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Error::runtime(format!(
            "namespace {ns} does not exist; give the namespace of a run with --namespace, or \
             see every namespace with `virtwork status -A`"
        ))),
        Err(crate::k8s::retry::RetryError::Cancelled) => Err(Error::Interrupted),
        // A user who may not read namespaces (namespace-scoped RBAC): "no runs" stands.
        Err(_) => Ok(()),
    }
}
