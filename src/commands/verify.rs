//! `virtwork verify`: lists the run's VMs (label-selected, paginated, like status), finds
//! Prometheus, queries each VM's expected signals and prints the verdicts; with `--wait` it
//! polls until every expected signal is present or the timeout passes.
//!
//! Exit codes: 0 every expected signal present; 1 one missing (the error line names the VM
//! and the signal), Prometheus or the cluster unreachable, or no VMs found; 2 bad input
//! (flags are parsed and files read before any request). Read-only on the cluster.

use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{PrometheusTarget, VerifySettings};
use crate::error::{Error, Result};
use crate::k8s::cleanup::{ApiContext, ManagedKind, list_in_scope};
use crate::k8s::client::{Cluster, connect_from_env, load_kube_config};
use crate::k8s::retry::RetryPolicy;
use crate::model::{OutputFormat, Window};
use crate::signals::contract::checks;
use crate::verify::evaluate::{QueryAnswer, Verdict, judge};
use crate::verify::prometheus::{PrometheusApi, discover};
use crate::verify::{
    SignalResult, Target, VmResult, json_report, missing_message, targets, text_report,
};

/// How long transient failures are retried when not waiting.
const RETRY_DEADLINE: Duration = Duration::from_secs(60);
/// Queries in flight at once (each also passes the rate limit).
const QUERY_CONCURRENCY: usize = 8;

/// Only the bearer-token part of the kubeconfig's credentials goes to a Prometheus URL:
/// client certificates, basic auth and impersonation are meant for the API server.
fn bearer_only(auth: kube::config::AuthInfo) -> kube::config::AuthInfo {
    kube::config::AuthInfo {
        token: auth.token,
        token_file: auth.token_file,
        auth_provider: auth.auth_provider,
        exec: auth.exec,
        ..Default::default()
    }
}

/// Runs `virtwork verify`.
pub async fn verify(settings: &VerifySettings) -> Result<()> {
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
    let deadline = Instant::now() + settings.wait.unwrap_or(RETRY_DEADLINE);
    let ctx = ApiContext {
        client: cluster.client.clone(),
        policy: RetryPolicy::until(deadline),
        cancel: cancel.clone(),
    };
    let api = reach_prometheus(settings, &cluster, &cancel).await?;
    tracing::info!(prometheus = api.describe.as_str(), "querying Prometheus");
    let (results, rounds) = poll_signals(settings, &ctx, &api, deadline).await?;
    let namespace = settings.scope.namespace.as_deref();
    let run_id = settings.scope.run_id.as_deref();
    if results.is_empty() {
        return Err(nothing_to_verify(namespace, run_id));
    }
    let text = match settings.output {
        OutputFormat::Json | OutputFormat::Yaml => super::document_text(
            settings.output,
            &json_report(
                namespace,
                run_id,
                &results,
                &api.describe,
                settings.window,
                rounds,
            )
            .to_string(),
        )?,
        OutputFormat::Text => text_report(&results, &api.describe, settings.window),
    };
    super::write_stdout(&text)?;
    match missing_message(&results) {
        Some(message) => Err(Error::runtime(match settings.wait {
            Some(t) => format!("{message}; still missing after --timeout {}s", t.as_secs()),
            None => message,
        })),
        None => Ok(()),
    }
}

/// Prometheus as the settings name it: found through the API server's service proxy, or
/// at a URL with the given token (else the kubeconfig's bearer token).
async fn reach_prometheus(
    settings: &VerifySettings,
    cluster: &Cluster,
    cancel: &CancellationToken,
) -> Result<PrometheusApi> {
    match &settings.prometheus {
        PrometheusTarget::Discover => discover(&cluster.client, &cluster.server_url, cancel).await,
        PrometheusTarget::Url { url, token } => {
            let auth = match token {
                Some(token) => kube::config::AuthInfo {
                    token: Some(token.expose().to_string().into()),
                    ..Default::default()
                },
                None => {
                    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
                    let access = &settings.global.cluster;
                    let (kube_config, _, _) =
                        load_kube_config(&access.kubeconfig, access.context.as_deref(), in_cluster)
                            .await?;
                    bearer_only(kube_config.auth_info)
                }
            };
            PrometheusApi::at_url(url, auth, cluster.gate.clone())
        }
    }
}

/// Lists the VMs in scope and queries their signals; with `--wait`, again every poll
/// interval until every signal is present or the deadline is near. Returns the last
/// results and how many rounds it took.
async fn poll_signals(
    settings: &VerifySettings,
    ctx: &ApiContext,
    api: &PrometheusApi,
    deadline: Instant,
) -> Result<(Vec<VmResult>, u32)> {
    let poll = poll_interval(settings.window);
    let mut rounds = 0u32;
    loop {
        rounds += 1;
        let vms = list_in_scope(ctx, &settings.scope, ManagedKind::VirtualMachine).await?;
        let vmis = list_in_scope(ctx, &settings.scope, ManagedKind::VirtualMachineInstance).await?;
        let found = targets(&vms, &vmis);
        let results = if found.is_empty() {
            Vec::new()
        } else {
            evaluate(api, found, settings.window, &ctx.policy, &ctx.cancel).await?
        };
        let complete = !results.is_empty() && results.iter().all(|r| r.missing().next().is_none());
        let waiting = settings.wait.is_some() && Instant::now() + poll < deadline;
        if complete || !waiting {
            return Ok((results, rounds));
        }
        tracing::info!(
            round = rounds,
            missing = results.iter().map(|r| r.missing().count()).sum::<usize>(),
            "expected signals still missing; polling again"
        );
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(Error::Interrupted),
            () = tokio::time::sleep(poll) => {}
        }
    }
}

/// No VM in scope: an error, since nothing was verified.
fn nothing_to_verify(namespace: Option<&str>, run_id: Option<&str>) -> Error {
    let place = namespace.map_or("any namespace".to_string(), |n| format!("namespace {n}"));
    Error::runtime(match run_id {
        Some(id) => format!("no VMs of run {id} found in {place}: nothing to verify"),
        None => format!("no virtwork VMs found in {place}: nothing to verify"),
    })
}

/// Polls often enough to see a new sample, rarely enough not to load Prometheus.
fn poll_interval(window: Window) -> Duration {
    Duration::from_secs((window.as_secs() / 4).clamp(1, 15))
}

/// Queries every check of every target (bounded concurrency, results in target order).
async fn evaluate(
    api: &PrometheusApi,
    targets: Vec<Target>,
    window: Window,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Vec<VmResult>> {
    let jobs: Vec<(usize, crate::signals::contract::Check)> = targets
        .iter()
        .enumerate()
        .flat_map(|(i, t)| checks(&t.facts, window).into_iter().map(move |c| (i, c)))
        .collect();
    let answers: Vec<Result<(usize, SignalResult)>> = futures::stream::iter(jobs)
        .map(|(i, check)| async move {
            if check.threshold.is_none() {
                let status = judge(&check, None);
                return Ok((
                    i,
                    SignalResult {
                        check,
                        observed: None,
                        status,
                        error: None,
                    },
                ));
            }
            let answer = api.query(&check.query, policy, cancel).await?;
            let result = match answer {
                QueryAnswer::Value(observed) => {
                    let status = judge(&check, observed);
                    SignalResult {
                        check,
                        observed,
                        status,
                        error: None,
                    }
                }
                QueryAnswer::Rejected { error_type, error } => SignalResult {
                    check,
                    observed: None,
                    status: Verdict::Error,
                    error: Some(format!(
                        "Prometheus rejected the query ({error_type}): {error}"
                    )),
                },
            };
            Ok((i, result))
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    let mut results: Vec<VmResult> = targets
        .into_iter()
        .map(|target| VmResult {
            target,
            signals: Vec::new(),
        })
        .collect();
    for answer in answers {
        let (i, signal) = answer?;
        results[i].signals.push(signal);
    }
    Ok(results)
}
