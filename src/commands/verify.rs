//! `virtwork verify`: lists the run's VMs (label-selected, paginated, like status), finds
//! Prometheus, queries each running VM's expected signals (value and the facts of the series
//! behind it), loads catalog VMs' signals from the local catalog, and prints the verdicts;
//! with `--wait` it polls until every expected signal is present or `--timeout` has passed
//! (the last round runs at the deadline); with `--alerts` it adds the alerts that fired.
//!
//! Exit codes: 0 every expected signal present (at least one expected) and every alert
//! expectation met; 1 one missing (the error line names the VM and the signal), nothing
//! expected in the window, an alert expectation unmet, a VM the `--run-id` run recorded in
//! the audit database that is not in scope (deleted, or relabelled out of the run),
//! Prometheus or the cluster unreachable, or no VMs found; 2 bad input (flags are parsed and
//! files read before any request; a `--window` shorter than two scrape intervals once they
//! are known). Read-only on the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prometheus_reach::reach_prometheus;
use crate::config::VerifySettings;
use crate::error::{Error, Result};
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, list_in_scope};
use crate::model::ManagedKind;
use crate::model::{OutputFormat, Window};
use crate::signals::contract::{
    Check, SignalGroup, checks, checks_stepped, group_queries, profile_range_query,
};
use crate::verify::alerts::{
    FiredAlert, alerts_query, expectation_failure, expectations, fired_alerts,
    text_section as alerts_text, worth_waiting,
};
use crate::verify::evaluate::{
    QueryAnswer, RangeAnswer, SeriesFacts, facts_by_name, first_steps, fleet_interval,
    group_facts_query, group_oldest_fallback_query, group_oldest_query, group_value_query,
    set_spans, subquery_step_ms, values_by_name,
};
use crate::verify::listed::{ListedVm, ListedVmi};
use crate::verify::prometheus::PrometheusApi;
use crate::verify::recorded::{
    AbsentVm, Fallback, LookedUp, MAX_ABSENT_LOOKUPS, Records, absence, absent_from_scope,
    absent_message, absent_text, fallback_warning,
};
use crate::verify::{
    Answered, GroupRange, LocalCatalog, ProfileRanges, Round, Target, VmResult, catalog_names,
    failure_message, json_report, judge_answers, not_running, not_running_results, range_spec,
    targets_recorded, text_report, unverifiable_result, window_too_short,
};
use crate::workloads::catalog::CatalogEntry;

/// How long transient failures are retried when not waiting.
const RETRY_DEADLINE: Duration = Duration::from_secs(60);
/// How long the round at the `--wait` deadline may retry transient failures.
const LAST_ROUND_GRACE: Duration = Duration::from_secs(20);
/// Queries in flight at once (each also passes the rate limit).
const QUERY_CONCURRENCY: usize = 8;

/// Runs `virtwork verify`.
pub async fn verify(settings: &VerifySettings) -> Result<()> {
    let (cluster, cancel) = super::connect_interruptible(&settings.global.cluster).await?;
    let deadline = Instant::now() + settings.wait.unwrap_or(RETRY_DEADLINE);
    let ctx = ApiContext {
        client: cluster.client.clone(),
        policy: RetryPolicy::until(deadline),
        cancel: cancel.clone(),
    };
    crate::k8s::reach::reach(&cluster, &ctx.policy, &cancel).await?;
    let resolved = resolve_run(settings, &ctx).await?;
    let settings = &resolved;
    let api = reach_prometheus(
        &settings.global.cluster,
        &settings.prometheus,
        &cluster,
        &cancel,
    )
    .await?;
    tracing::info!(
        prometheus = api.describe.as_str(),
        via = api.via.as_str(),
        "querying Prometheus"
    );
    let (results, rounds) = poll_signals(settings, &ctx, &api, deadline).await?;
    let namespace = settings.scope.namespace.as_deref();
    let run_id = settings.scope.run_id.as_deref();
    let absent = absent_vms(settings, &ctx, &results).await?;
    if results.is_empty() {
        let error = nothing_to_verify(namespace, run_id);
        return Err(match run_id.and_then(|id| absent_message(id, &absent)) {
            Some(message) => Error::runtime(format!("{error}; {message}")),
            None => error,
        });
    }
    let (alerts, expectations) = match settings.alerts.wanted() {
        true => {
            let (fired, expectations) =
                poll_alerts(settings, &api, &results, deadline, &cancel).await?;
            (Some(fired), expectations)
        }
        false => (None, Vec::new()),
    };
    let found = Found {
        results: &results,
        rounds,
        alerts: alerts.as_deref(),
        expectations: &expectations,
        absent: &absent,
    };
    let text = render(settings, &api, &found)?;
    super::write_stdout(&text)?;
    outcome(settings, &results, &expectations, &absent)
}

/// What one verify found: the last round's results, the alerts and the absent VMs.
struct Found<'a> {
    results: &'a [VmResult],
    rounds: u32,
    alerts: Option<&'a [FiredAlert]>,
    expectations: &'a [crate::verify::alerts::Expectation],
    absent: &'a [AbsentVm],
}

/// What verify writes to stdout: the document (`--output json|yaml`) or the text report.
fn render(settings: &VerifySettings, api: &PrometheusApi, found: &Found<'_>) -> Result<String> {
    let namespace = settings.scope.namespace.as_deref();
    let run_id = settings.scope.run_id.as_deref();
    Ok(match settings.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let mut doc = json_report(
                namespace,
                run_id,
                found.results,
                &api.describe,
                settings.window,
                found.rounds,
            );
            doc["prometheus_via"] = api.via.as_str().into();
            if !found.absent.is_empty() {
                doc["absent"] = serde_json::json!(found.absent);
                doc["passed"] = false.into();
            }
            if let Some(fired) = found.alerts {
                doc["alerts"] =
                    serde_json::json!({"fired": fired, "expectations": found.expectations});
                let met = found.expectations.iter().all(|e| e.met);
                doc["passed"] = serde_json::json!(doc["passed"] == true && met);
            }
            super::document_text(settings.output, &doc.to_string())?
        }
        OutputFormat::Text => {
            let mut text = text_report(
                found.results,
                &api.describe,
                settings.window,
                settings.show_queries,
            );
            if let Some(fired) = found.alerts {
                text.push_str(&alerts_text(fired, found.expectations, settings.window));
            }
            if let Some(id) = run_id {
                text.push_str(&absent_text(id, found.absent));
            }
            text
        }
    })
}

/// The VMs the run `--run-id` names recorded in the audit database that are not in scope,
/// each looked up by name to say why (deleted, or relabelled out of the run); empty without
/// `--run-id` or without the run's record (the fallback warning already said so).
async fn absent_vms(
    settings: &VerifySettings,
    ctx: &ApiContext,
    results: &[VmResult],
) -> Result<Vec<AbsentVm>> {
    let Some(run_id) = settings.scope.run_id.as_deref() else {
        return Ok(Vec::new());
    };
    let recorded = match crate::audit::query::open_read_only(&settings.global.audit.path) {
        Ok(Some(conn)) => crate::audit::query::recorded_run(&conn, run_id),
        Ok(None) | Err(_) => return Ok(Vec::new()),
    };
    let Ok(Some(recorded)) = recorded else {
        return Ok(Vec::new());
    };
    let in_scope: BTreeSet<(String, String)> = results
        .iter()
        .map(|r| {
            (
                r.target.facts.namespace.clone(),
                r.target.facts.name.clone(),
            )
        })
        .collect();
    let missing = absent_from_scope(&recorded, settings.scope.namespace.as_deref(), &in_scope);
    // The lookups get time of their own: after `--wait` the command's deadline has passed.
    let ctx = &ApiContext {
        policy: RetryPolicy::until(Instant::now() + LAST_ROUND_GRACE),
        ..ctx.clone()
    };
    let resource = ManagedKind::VirtualMachine.api_resource();
    let lookups = missing
        .into_iter()
        .enumerate()
        .map(|(i, (namespace, name))| {
            let resource = resource.clone();
            async move {
                let found = if i >= MAX_ABSENT_LOOKUPS {
                    LookedUp::Unknown(format!("more than {MAX_ABSENT_LOOKUPS} VMs are absent"))
                } else {
                    let api: kube::Api<kube::core::PartialObjectMeta<kube::api::DynamicObject>> =
                        kube::Api::namespaced_with(ctx.client.clone(), &namespace, &resource);
                    let what = format!("reading VM {namespace}/{name}");
                    match ctx.call(&what, || api.get_metadata_opt(&name)).await {
                        Ok(Some(vm)) => LookedUp::Found(vm.metadata.labels.unwrap_or_default()),
                        Ok(None) => LookedUp::Gone,
                        Err(crate::k8s::retry::RetryError::Cancelled) => {
                            return Err(Error::Interrupted);
                        }
                        Err(e) => LookedUp::Unknown(e.into_error(what).to_string()),
                    }
                };
                Ok(absence(run_id, &namespace, &name, found))
            }
        });
    let looked: Vec<Result<Option<AbsentVm>>> = futures::stream::iter(lookups)
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    looked.into_iter().filter_map(|r| r.transpose()).collect()
}

/// The settings with `--run-id` resolved (a prefix among the runs on the cluster and in
/// the audit database).
async fn resolve_run(settings: &VerifySettings, ctx: &ApiContext) -> Result<VerifySettings> {
    let unscoped = crate::k8s::scope::Scope {
        run_id: None,
        ..settings.scope.clone()
    };
    let db = &settings.global.audit.path;
    let scope =
        super::run_ids::scope_on_cluster(&unscoped, settings.run_id.as_ref(), ctx, db).await?;
    Ok(VerifySettings {
        scope,
        ..settings.clone()
    })
}

/// Exit status: the signals' failure first, then an unmet alert expectation, then (added to
/// either) the VMs the run recorded that are not in scope.
fn outcome(
    settings: &VerifySettings,
    results: &[VmResult],
    expectations: &[crate::verify::alerts::Expectation],
    absent: &[AbsentVm],
) -> Result<()> {
    let still_missing = results.iter().any(|r| r.missing().next().is_some());
    let failure = failure_message(results, settings.window)
        .map(|message| match settings.wait {
            Some(t) if still_missing => {
                format!("{message}; still missing after --timeout {}s", t.as_secs())
            }
            _ => message,
        })
        .or_else(|| expectation_failure(expectations, settings.window, settings.wait));
    let absent = settings
        .scope
        .run_id
        .as_deref()
        .and_then(|id| absent_message(id, absent));
    let failure = match (failure, absent) {
        (Some(failure), Some(absent)) => Some(format!("{failure}; {absent}")),
        (failure, absent) => failure.or(absent),
    };
    match failure {
        Some(message) => Err(Error::runtime(message)),
        None => Ok(()),
    }
}

/// The alerts that fired for the VMs during the window and the expectations judged on them;
/// with `--wait`, read again every poll interval while an expected alert has not fired (and
/// no forbidden one has) until the deadline, so `--wait --expect-alert` waits out a rule's
/// `for:`.
async fn poll_alerts(
    settings: &VerifySettings,
    api: &PrometheusApi,
    results: &[VmResult],
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(Vec<FiredAlert>, Vec<crate::verify::alerts::Expectation>)> {
    loop {
        let fired = read_alerts(api, results, settings.window, cancel).await?;
        let judged = expectations(&settings.alerts, &fired);
        let now = Instant::now();
        if settings.wait.is_none() || now >= deadline || !worth_waiting(&judged) {
            return Ok((fired, judged));
        }
        tracing::info!(
            missing = judged.iter().filter(|e| !e.met).count(),
            "expected alerts have not fired yet; polling again"
        );
        let pause = poll_interval(settings.window).min(deadline - now);
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Error::Interrupted),
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// The alerts that fired for the VMs during the window: one query per namespace.
async fn read_alerts(
    api: &PrometheusApi,
    results: &[VmResult],
    window: Window,
    cancel: &CancellationToken,
) -> Result<Vec<FiredAlert>> {
    let mut by_namespace: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in results {
        by_namespace
            .entry(r.target.facts.namespace.as_str())
            .or_default()
            .push(r.target.facts.name.as_str());
    }
    let policy = RetryPolicy::until(Instant::now() + LAST_ROUND_GRACE);
    let mut fired = Vec::new();
    for (namespace, names) in by_namespace {
        let query = alerts_query(namespace, &names, window);
        match api.query(&query, &policy, cancel).await? {
            QueryAnswer::Facts(facts) => fired.extend(fired_alerts(&facts, window)),
            QueryAnswer::Value(_) => {}
            QueryAnswer::Rejected { error_type, error } => {
                return Err(Error::runtime(format!(
                    "reading ALERTS: Prometheus rejected the query ({error_type}): {error}"
                )));
            }
        }
    }
    Ok(fired)
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
    let mut warned = BTreeSet::new();
    loop {
        rounds += 1;
        // The last round starts at the deadline: it still gets a short time to retry.
        let round = ApiContext {
            client: ctx.client.clone(),
            policy: RetryPolicy::until(deadline.max(Instant::now() + LAST_ROUND_GRACE)),
            cancel: ctx.cancel.clone(),
        };
        let ctx = &round;
        // Both lists at once: on a large fleet each takes several pages.
        let (vms, vmis) = futures::try_join!(
            list_in_scope::<ListedVm>(ctx, &settings.scope, ManagedKind::VirtualMachine),
            list_in_scope::<ListedVmi>(ctx, &settings.scope, ManagedKind::VirtualMachineInstance),
        )?;
        let catalog = load_catalog(&settings.catalog_dir, &vms);
        let found = judged_targets(
            &vms,
            &vmis,
            &catalog,
            &settings.global.audit.path,
            &mut warned,
        );
        let results = if found.is_empty() {
            Vec::new()
        } else {
            evaluate(api, found, settings.window, &ctx.policy, &ctx.cancel).await?
        };
        // Nothing missing: waiting longer cannot change the verdict (even when nothing is
        // expected in the window, which the window, not time, decides).
        let complete = !results.is_empty() && results.iter().all(|r| r.missing().next().is_none());
        let now = Instant::now();
        // The last round runs at the deadline, so --wait --timeout T waits T, not less.
        if complete || settings.wait.is_none() || now >= deadline {
            return Ok((results, rounds));
        }
        let pause = poll.min(deadline - now);
        tracing::info!(
            round = rounds,
            missing = results.iter().map(|r| r.missing().count()).sum::<usize>(),
            "expected signals still missing; polling again"
        );
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(Error::Interrupted),
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// The targets of the listed VMs, each judged by what its run recorded in the audit database
/// at `db` when the database has it, else by its own annotation and labels
/// ([`crate::verify::recorded`]). Logs each VM whose annotation or labels differ from the
/// record (one WARN line each) and, in one line, which VMs were judged by their annotation
/// and why; a line already in `warned` is not logged again (the rounds of `--wait`). The one
/// resolution of verify, disruption and report's timeline.
pub(crate) fn judged_targets(
    vms: &[ListedVm],
    vmis: &[ListedVmi],
    catalog: &LocalCatalog,
    db: &std::path::Path,
    warned: &mut BTreeSet<String>,
) -> Vec<Target> {
    let records = read_records(db, vms);
    let found = targets_recorded(vms, vmis, catalog, &records);
    let fallbacks: Vec<(Fallback, Option<&str>)> = found
        .iter()
        .filter_map(|t| t.params_fallback.map(|f| (f, t.run_id.as_deref())))
        .collect();
    let lines = found
        .iter()
        .filter_map(|t| t.params_warning.clone())
        .chain(fallback_warning(&records, &fallbacks));
    for line in lines {
        if warned.insert(line.clone()) {
            tracing::warn!("{line}");
        }
    }
    found
}

/// What the audit database at `db` recorded of the runs the VMs' run-id labels name (read
/// only; never created or upgraded). A database that cannot be read is reported, not fatal:
/// the VMs are then judged by their annotations, which the warning says.
fn read_records(db: &std::path::Path, vms: &[ListedVm]) -> Records {
    let shown = db.display().to_string();
    let runs: BTreeSet<&str> = vms
        .iter()
        .filter_map(|vm| vm.metadata.labels.as_ref()?.get(crate::labels::RUN_ID))
        .map(String::as_str)
        .filter(|id| !id.is_empty())
        .collect();
    let unreadable = |e: Error| {
        Records::Unavailable(format!(
            "the audit database {shown} could not be read ({e})"
        ))
    };
    let conn = match crate::audit::query::open_read_only(db) {
        Ok(Some(conn)) => conn,
        Ok(None) => {
            return Records::Unavailable(format!(
                "there is no audit database at {shown} (the run was recorded on another machine, \
                 or the file was removed; --audit-db names another)"
            ));
        }
        Err(e) => return unreadable(e),
    };
    let mut read = BTreeMap::new();
    for run in runs {
        match crate::audit::query::recorded_run(&conn, run) {
            Ok(recorded) => read.insert(run.to_string(), recorded),
            Err(e) => return unreadable(e),
        };
    }
    Records::Read {
        path: shown,
        runs: read,
    }
}

/// The local catalog entries the VMs name, loaded (and validated, signal names included)
/// from `dir`; an entry that cannot be loaded is kept with the reason, to be reported.
pub(crate) fn load_catalog(dir: &std::path::Path, vms: &[ListedVm]) -> LocalCatalog {
    catalog_names(vms)
        .into_iter()
        .map(|name| {
            let signals = CatalogEntry::load(dir, &name)
                .map(|entry| entry.signals().to_vec())
                .map_err(|e| e.to_string());
            (name, signals)
        })
        .collect()
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

/// Queries every check of every running target and judges the answers (results in target
/// order). Built-in signals are queried by group (per namespace, signal and mount, whatever
/// the number of VMs): first the facts of every group's series, from which the fleet's
/// scrape interval is measured (it refuses a window too short and steps every subquery),
/// then one value query per group; catalog signals one by one. VMs that are not running,
/// and catalog VMs without a matching local entry, are judged without a query. Shared with
/// `virtwork report`, whose load section shows these verdicts.
pub(crate) async fn evaluate(
    api: &PrometheusApi,
    targets: Vec<Target>,
    window: Window,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Vec<VmResult>> {
    let running: Vec<(usize, &Target)> = targets
        .iter()
        .enumerate()
        .filter(|(_, t)| t.unverifiable.is_none() && not_running(t).is_none())
        .collect();
    let facts = fleet_facts(api, &running, window, policy, cancel).await?;
    let interval = fleet_interval(facts.values().flat_map(|by_vm| by_vm.values()), window);
    refuse_short_window(interval, window)?;
    let step_ms = subquery_step_ms(interval, window);
    let grouped = fleet_values(api, facts, window, step_ms, policy, cancel).await?;
    let answers = answer_checks(api, &running, &grouped, window, step_ms, policy, cancel).await?;
    let mut results = unanswered_results(targets, window);
    let now = unix_now();
    let ranges = profile_ranges(api, &answers, window, interval, now, policy, cancel).await?;
    let round = Round {
        window,
        interval,
        now,
    };
    for (i, signal) in judge_answers(answers, round, &ranges) {
        results[i].signals.push(signal);
    }
    Ok(results)
}

/// The facts of every signal group the running targets' thresholded checks belong to.
async fn fleet_facts(
    api: &PrometheusApi,
    running: &[(usize, &Target)],
    window: Window,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<BTreeMap<SignalGroup, BTreeMap<String, SeriesFacts>>> {
    let groups: BTreeSet<SignalGroup> = running
        .iter()
        .flat_map(|(_, t)| checks(&t.facts, window))
        .filter(|c| c.threshold.is_some())
        .filter_map(|c| c.group)
        .collect();
    let facts: Vec<Result<(SignalGroup, BTreeMap<String, SeriesFacts>)>> =
        futures::stream::iter(groups)
            .map(|g| async move {
                let facts = group_facts(api, &g, window, policy, cancel).await?;
                Ok((g, facts))
            })
            .buffered(QUERY_CONCURRENCY)
            .collect()
            .await;
    facts.into_iter().collect()
}

/// Bad input: a window shorter than two of the fleet's scrape intervals.
fn refuse_short_window(interval: Option<f64>, window: Window) -> Result<()> {
    match window_too_short(interval, window) {
        Some((interval, shortest)) => Err(Error::input(format!(
            "invalid value \"{window}\" for --window: Prometheus scrapes these series every {interval:.1}s, \
             so a window shorter than two scrapes holds too few samples; use --window {shortest}s or longer"
        ))),
        None => Ok(()),
    }
}

/// One value query per signal group, with the facts gathered before.
async fn fleet_values(
    api: &PrometheusApi,
    facts: BTreeMap<SignalGroup, BTreeMap<String, SeriesFacts>>,
    window: Window,
    step_ms: u64,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<BTreeMap<SignalGroup, GroupAnswer>> {
    let values: Vec<Result<(SignalGroup, GroupAnswer)>> = futures::stream::iter(facts)
        .map(|(g, facts)| async move {
            let answer = group_values(api, &g, facts, window, step_ms, policy, cancel).await?;
            Ok((g, answer))
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    values.into_iter().collect()
}

/// Every check of the running targets answered: a grouped one from its group's answer, a
/// catalog one by its own query (by target index).
async fn answer_checks(
    api: &PrometheusApi,
    running: &[(usize, &Target)],
    grouped: &BTreeMap<SignalGroup, GroupAnswer>,
    window: Window,
    step_ms: u64,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Vec<(usize, Answered)>> {
    let jobs: Vec<(usize, &Target, Check)> = running
        .iter()
        .flat_map(|(i, t)| {
            checks_stepped(&t.facts, window, Some(step_ms))
                .into_iter()
                .map(move |c| (*i, *t, c))
        })
        .collect();
    let answers: Vec<Result<(usize, Answered)>> = futures::stream::iter(jobs)
        .map(|(i, target, check)| {
            let name = target.facts.name.as_str();
            let created = target.vmi_created;
            let group = check.group.as_ref().and_then(|g| grouped.get(g));
            async move {
                let mut answered = match group {
                    Some(answer) => answer.for_vm(check, name),
                    None => answer_single(api, check, policy, cancel).await?,
                };
                answered.vm_name = name.to_string();
                answered.vmi_created = created;
                Ok((i, answered))
            }
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// Each target's result before its answers are judged: unverifiable and not-running
/// targets are judged already (without a query), running ones have no signal yet.
fn unanswered_results(targets: Vec<Target>, window: Window) -> Vec<VmResult> {
    targets
        .into_iter()
        .map(|target| {
            let signals = match (&target.unverifiable, not_running(&target)) {
                (Some(why), _) => vec![unverifiable_result(&target, why)],
                (None, Some(why)) => not_running_results(&target, window, &why),
                (None, None) => Vec::new(),
            };
            VmResult { target, signals }
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The range answers for the profiled checks among `answers`: one range query per group
/// (namespace, signal, mount) over the group's profiled VMs, whose samples each cover three
/// scrapes of the fleet's scrape interval.
async fn profile_ranges(
    api: &PrometheusApi,
    answers: &[(usize, Answered)],
    window: Window,
    interval: Option<f64>,
    now: f64,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<ProfileRanges> {
    let mut groups: BTreeMap<&SignalGroup, Vec<&str>> = BTreeMap::new();
    for (_, a) in answers {
        let (Some(_), Some(group)) = (&a.check.profile, &a.check.group) else {
            continue;
        };
        groups.entry(group).or_default().push(a.vm_name.as_str());
    }
    let step_ms = subquery_step_ms(interval, window);
    let queried: Vec<Result<(SignalGroup, GroupRange)>> = futures::stream::iter(groups)
        .map(|(group, names)| async move {
            let spec = range_spec(window, interval.unwrap_or(0.0), now);
            let rate_window = Window::from_secs(spec.rate_window as u64).unwrap_or(window);
            let query = profile_range_query(group, &names, rate_window, Some(step_ms));
            let answer = api
                .query_range(
                    &query,
                    (spec.start as u64, spec.end as u64, spec.step as u64),
                    policy,
                    cancel,
                )
                .await?;
            let range = match answer {
                RangeAnswer::Series(samples) => GroupRange {
                    spec,
                    samples,
                    error: None,
                },
                RangeAnswer::Rejected { error_type, error } => GroupRange {
                    spec,
                    samples: BTreeMap::new(),
                    error: Some(format!(
                        "Prometheus rejected the range query ({error_type}): {error}"
                    )),
                },
            };
            Ok((group.clone(), range))
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    queried.into_iter().collect()
}

/// What a group's queries said, by VM name.
struct GroupAnswer {
    values: BTreeMap<String, f64>,
    facts: BTreeMap<String, SeriesFacts>,
    /// Prometheus rejected the value query: its message, for every VM of the group.
    error: Option<String>,
}

impl GroupAnswer {
    /// One VM's share: its value and its series' facts (none: no series at all).
    fn for_vm(&self, check: Check, name: &str) -> Answered {
        Answered {
            check,
            observed: self.values.get(name).copied(),
            facts: Some(self.facts.get(name).copied().unwrap_or_default()),
            error: self.error.clone(),
            vm_name: String::new(),
            vmi_created: None,
        }
    }
}

/// A group's facts query, then the query for its series' oldest samples, which needs the
/// facts' answer: each VM's [`SeriesFacts`].
async fn group_facts(
    api: &PrometheusApi,
    group: &SignalGroup,
    window: Window,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<BTreeMap<String, SeriesFacts>> {
    let q = group_queries(group, window, None);
    let facts_query = group_facts_query(&q.series, &q.relabelled, window);
    let facts = api.query(&facts_query, policy, cancel).await?;
    let mut facts_by_vm = facts_by_name(&facts, window);
    if let Some((now, firsts)) = first_steps(&facts)
        && let Some(oldest_query) = group_oldest_query(&q.series, &firsts, window)
    {
        let mut oldest = api.query(&oldest_query, policy, cancel).await?;
        if let QueryAnswer::Rejected { error_type, error } = &oldest {
            tracing::warn!(
                error_type = error_type.as_str(),
                error = error.as_str(),
                "Prometheus refused the query for the series' oldest samples (an @ modifier); \
                 using the slower plain subquery"
            );
            let fallback = group_oldest_fallback_query(&q.series, window);
            oldest = api.query(&fallback, policy, cancel).await?;
        }
        set_spans(&mut facts_by_vm, now, &values_by_name(&oldest));
    }
    Ok(facts_by_vm)
}

/// A group's value query, its subqueries stepped at `step_ms`, with the facts gathered
/// before.
async fn group_values(
    api: &PrometheusApi,
    group: &SignalGroup,
    facts: BTreeMap<String, SeriesFacts>,
    window: Window,
    step_ms: u64,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<GroupAnswer> {
    let q = group_queries(group, window, Some(step_ms));
    let value = api
        .query(&group_value_query(&q.value), policy, cancel)
        .await?;
    let error = match &value {
        QueryAnswer::Rejected { error_type, error } => Some(format!(
            "Prometheus rejected the query ({error_type}): {error}"
        )),
        _ => None,
    };
    Ok(GroupAnswer {
        values: values_by_name(&value),
        facts,
        error,
    })
}

/// One check queried alone (catalog signals: their templates may read anything, so no
/// facts are gathered); a check not expected in the window is not queried.
async fn answer_single(
    api: &PrometheusApi,
    check: Check,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Answered> {
    if check.threshold.is_none() {
        return Ok(Answered {
            check,
            observed: None,
            facts: None,
            error: None,
            vm_name: String::new(),
            vmi_created: None,
        });
    }
    let (observed, error) = match api.query(&check.query, policy, cancel).await? {
        QueryAnswer::Rejected { error_type, error } => (
            None,
            Some(format!(
                "Prometheus rejected the query ({error_type}): {error}"
            )),
        ),
        QueryAnswer::Value(observed) => (observed, None),
        QueryAnswer::Facts(_) => (
            None,
            Some("the query's answer carries virtwork's own fact label".into()),
        ),
    };
    Ok(Answered {
        check,
        observed,
        facts: None,
        error,
        vm_name: String::new(),
        vmi_created: None,
    })
}
