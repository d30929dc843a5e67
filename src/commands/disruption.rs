//! `virtwork disruption`: lists the scope's VMs and VMIs (label-selected, paginated, like
//! verify) and the VirtualMachineInstanceMigrations of their namespaces (KubeVirt's
//! evacuation migrations carry no virtwork label), reads the churn actions the audit
//! database recorded in the window, finds Prometheus as verify does and sends a bounded
//! set of range queries (per namespace and batch of 250 VMs: the vCPU sum, the node, the
//! migration times; per signal group and batch of names that fits verify's name selector:
//! verify's signal expression, so no batch reads the whole namespace), then hands everything to
//! the sans-IO core ([`crate::disruption`]) and prints its report.
//!
//! Without Prometheus (none found, or `--no-prometheus`) it reports migrations and restarts
//! from the API alone and says interruptions were not measured. Exit codes: 0 every VM
//! within the budget, 1 one beyond it (the error line names it), no VMs found, or the
//! cluster unreachable; 2 bad input. Read-only on the cluster and the audit database.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::query::{Executions, churn_actions, open_existing, show_execution};
use crate::config::{DisruptionSettings, DisruptionSpan, PrometheusTarget};
use crate::disruption::evidence::{self, ChurnRecord, MetricFacts, MigrationObject, VmiFacts};
use crate::disruption::interruption::{self, Expected, Grid};
use crate::disruption::listed::{SlimMigration, SlimVmi, migration_facts, vmi_facts};
use crate::disruption::queries::{self, Labelled, MAX_POINTS, NAMES_PER_QUERY};
use crate::disruption::report::{Context, json_report, text_report};
use crate::disruption::{Assessed, Budget, Findings, Span, assess_with_gaps, failure_message};
use crate::error::{Error, Result};
use crate::k8s::client::Cluster;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope, list_in_scope};
use crate::model::{AllowRestarts, OutputFormat, Window};
use crate::model::{ManagedKind, RunRef};
use crate::signals::contract::{NAME_SELECTOR_MAX_CHARS, SignalGroup, checks, profile_range_query};
use crate::verify::evaluate::{QueryAnswer, RangeAnswer, subquery_step_ms, vcpu_counter_in_millis};
use crate::verify::listed::ListedVm;
use crate::verify::prometheus::PrometheusApi;
use crate::verify::{LocalCatalog, Target, catalog_names};
use crate::workloads::catalog::CatalogEntry;

/// The signal every VM reports while it runs, whatever its workload.
const VCPU_SIGNAL: &str = "vcpu-busy";
/// How long transient failures are retried.
const RETRY_DEADLINE: Duration = Duration::from_secs(120);
/// Queries in flight at once: each answer can be a few MiB, so few.
const QUERY_CONCURRENCY: usize = 2;

/// Per VM (namespace, name): what could not be read for it, each named.
type Gaps = BTreeMap<(String, String), Vec<String>>;

/// What Prometheus told about the fleet.
struct Measured {
    describe: String,
    interval: Option<f64>,
    grid: Grid,
    facts: BTreeMap<(String, String), MetricFacts>,
    /// Per VM: the samples and threshold of each expected signal, and the signal names.
    expected: Expectations,
    /// Per VM: the queries Prometheus rejected for it.
    gaps: Gaps,
}

/// Runs `virtwork disruption`.
pub async fn disruption(settings: &DisruptionSettings) -> Result<()> {
    let (cluster, cancel) = super::connect_interruptible(&settings.global.cluster).await?;
    let ctx = ApiContext {
        client: cluster.client.clone(),
        policy: RetryPolicy::until(Instant::now() + RETRY_DEADLINE),
        cancel: cancel.clone(),
    };
    let (span, span_from, churn) = window(settings)?;
    crate::k8s::reach::reach(&cluster, &ctx.policy, &cancel).await?;
    let resolved = resolve_run(settings, &ctx).await?;
    let settings = &resolved;
    let listed = list_objects(&settings.scope, &ctx).await?;
    if listed.vms.is_empty() {
        return Err(nothing_found(settings));
    }
    let prometheus = match &settings.prometheus {
        None => Err("--no-prometheus".to_string()),
        Some(target) => reach_prometheus(target, settings, &cluster, &cancel).await,
    };
    let request = Request {
        scope: &settings.scope,
        span,
        span_from,
        churn: &churn,
        audit_db: &settings.global.audit.path,
        catalog_dir: &settings.catalog_dir,
        max_interruption: settings.max_interruption,
        allow_restarts: settings.allow_restarts,
    };
    let (assessed, context) = analyse(&listed, &request, prometheus.as_ref(), &ctx).await?;
    let text = match settings.output {
        OutputFormat::Json | OutputFormat::Yaml => super::document_text(
            settings.output,
            &json_report(&assessed, &context).to_string(),
        )?,
        OutputFormat::Text => text_report(&assessed, &context),
    };
    super::write_stdout(&text)?;
    match failure_message(&assessed) {
        Some(message) => Err(Error::runtime(message)),
        None => Ok(()),
    }
}

/// What the analysis of a window needs besides the cluster's objects and Prometheus.
pub(crate) struct Request<'a> {
    pub scope: &'a Scope,
    pub span: Span,
    /// How the window was given, for the report.
    pub span_from: String,
    /// The churn actions the audit database recorded in the window.
    pub churn: &'a [ChurnRecord],
    /// The audit database whose record of each run judges its VMs (as verify's).
    pub audit_db: &'a std::path::Path,
    pub catalog_dir: &'a std::path::Path,
    /// None: two scrape intervals, once Prometheus shows them.
    pub max_interruption: Option<Duration>,
    pub allow_restarts: AllowRestarts,
}

/// The scope's VMs and VMIs and the migrations of their namespaces.
pub(crate) struct Listed {
    pub vms: Vec<ListedVm>,
    pub vmis: Vec<SlimVmi>,
    pub migrations: Vec<SlimMigration>,
}

/// Every listed VM judged over the window: measured with `prometheus` when it was reached
/// (else the reason interruptions were not measured), and how the report was made. Shared
/// by `virtwork disruption` and `virtwork report`'s timeline.
pub(crate) async fn analyse(
    listed: &Listed,
    request: &Request<'_>,
    prometheus: std::result::Result<&PrometheusApi, &String>,
    ctx: &ApiContext,
) -> Result<(Vec<Assessed>, Context)> {
    let span = request.span;
    let catalog = load_catalog(request.catalog_dir, &listed.vms);
    let found = crate::commands::verify::judged_targets(
        &listed.vms,
        &[],
        &catalog,
        request.audit_db,
        &mut Default::default(),
    );
    let measured = match prometheus {
        Ok(api) => measure(api, &found, span, &ctx.policy, &ctx.cancel).await?,
        Err(why) => Err(why.clone()),
    };
    let budget = budget(request, measured.as_ref().ok());
    let assessed = assess_all(
        &found,
        listed,
        request.churn,
        measured.as_ref().ok(),
        span,
        &budget,
    );
    let context = Context {
        namespace: request.scope.namespace.clone(),
        run_id: request.scope.run_id.clone(),
        span,
        span_from: request.span_from.clone(),
        prometheus: measured
            .as_ref()
            .map(|m| m.describe.clone())
            .map_err(|why| format!("{why}: migrations and restarts are from the API alone")),
        step: measured.as_ref().ok().map(|m| m.grid.step),
        scrape_interval: measured.as_ref().ok().and_then(|m| m.interval),
        budget,
    };
    Ok((assessed, context))
}

fn nothing_found(settings: &DisruptionSettings) -> Error {
    let place = settings
        .scope
        .namespace
        .as_deref()
        .map_or("any namespace".to_string(), |n| format!("namespace {n}"));
    Error::runtime(match &settings.scope.run_id {
        Some(id) => format!("no VMs of run {id} found in {place}: nothing to report"),
        None => format!("no virtwork VMs found in {place}: nothing to report"),
    })
}

fn now() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

/// The settings with `--run-id` resolved (a prefix among the runs on the cluster and in
/// the audit database).
async fn resolve_run(
    settings: &DisruptionSettings,
    ctx: &ApiContext,
) -> Result<DisruptionSettings> {
    let unscoped = crate::k8s::scope::Scope {
        run_id: None,
        ..settings.scope.clone()
    };
    let db = &settings.global.audit.path;
    let scope =
        super::run_ids::scope_on_cluster(&unscoped, settings.run_id.as_ref(), ctx, db).await?;
    Ok(DisruptionSettings {
        scope,
        ..settings.clone()
    })
}

fn ts(t: &jiff::Timestamp) -> f64 {
    t.as_millisecond() as f64 / 1000.0
}

/// The window in Unix seconds, how it was given, and the churn actions the audit database
/// recorded in it (none when the database does not exist).
fn window(settings: &DisruptionSettings) -> Result<(Span, String, Vec<ChurnRecord>)> {
    let db = &settings.global.audit.path;
    let started = now();
    let (span, given) = match &settings.span {
        // One reading of the clock: two would make the span a few ms longer than asked,
        // and its step a second coarser.
        DisruptionSpan::Since(w) => (
            Span {
                from: started - w.as_secs() as f64,
                to: started,
            },
            format!("--since {w}"),
        ),
        DisruptionSpan::Between { from, to } => (
            Span {
                from: ts(from),
                to: to.as_ref().map_or_else(now, ts),
            },
            "--from/--to".to_string(),
        ),
        DisruptionSpan::Execution(selector) => {
            let id = super::run_ids::in_database(selector, "--execution", db, Executions::All)?;
            (execution_span(db, &id)?, format!("--execution {id}"))
        }
    };
    let churn = match db.exists() {
        true => read_churn(db, span)?,
        false => Vec::new(),
    };
    Ok((span, given, churn))
}

/// The start and end (or now, while it runs) of the recorded execution `id`.
fn execution_span(db: &std::path::Path, id: &RunRef) -> Result<Span> {
    let refuse = |why: String| {
        Error::input(format!(
            "invalid value \"{id}\" for --execution: {why}; list them with virtwork audit list"
        ))
    };
    if !db.exists() {
        return Err(refuse(format!(
            "the audit database {} does not exist",
            db.display()
        )));
    }
    let conn = open_existing(db)?;
    let detail = show_execution(&conn, &id.to_string())?
        .ok_or_else(|| refuse("no execution has this run id".into()))?;
    let parse = |t: &str| crate::disruption::listed::seconds(t);
    let from = parse(&detail.execution.started_at)
        .ok_or_else(|| refuse("its start time is unreadable".into()))?;
    let to = detail
        .execution
        .completed_at
        .as_deref()
        .and_then(parse)
        .unwrap_or_else(now);
    Ok(Span { from, to })
}

/// Succeeded churn actions in `span` (`<action> <ns>/<vm>: succeeded`).
pub(crate) fn read_churn(db: &std::path::Path, span: Span) -> Result<Vec<ChurnRecord>> {
    let conn = open_existing(db)?;
    let text = |t: f64| crate::disruption::report::time_text(t);
    let rows = churn_actions(&conn, &text(span.from - 60.0), &text(span.to + 900.0))?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let (action, rest) = row.message.split_once(' ')?;
            let (vm, _) = rest.split_once(':')?;
            let (namespace, vm) = vm.split_once('/')?;
            Some(ChurnRecord {
                namespace: namespace.into(),
                vm: vm.into(),
                action: action.into(),
                at: crate::disruption::listed::seconds(&row.occurred_at)?,
                run_id: row.run_id,
            })
        })
        .collect())
}

/// The VMs and VMIs in scope and the migrations of their namespaces (all three at once).
pub(crate) async fn list_objects(scope: &Scope, ctx: &ApiContext) -> Result<Listed> {
    let (vms, vmis, migrations) = futures::try_join!(
        list_in_scope::<ListedVm>(ctx, scope, ManagedKind::VirtualMachine),
        list_in_scope::<SlimVmi>(ctx, scope, ManagedKind::VirtualMachineInstance),
        list_migrations(scope, ctx),
    )?;
    Ok(Listed {
        vms,
        vmis,
        migrations,
    })
}

/// Every VirtualMachineInstanceMigration of the scope's namespace (or all of them): the
/// evacuation controller's carry no virtwork label, so none is asked for; they are matched
/// to the VMs by `spec.vmiName`.
async fn list_migrations(scope: &Scope, ctx: &ApiContext) -> Result<Vec<SlimMigration>> {
    let resource = ManagedKind::VirtualMachineInstanceMigration.api_resource();
    let api: kube::Api<SlimMigration> = match &scope.namespace {
        Some(ns) => kube::Api::namespaced_with(ctx.client.clone(), ns, &resource),
        None => kube::Api::all_with(ctx.client.clone(), &resource),
    };
    let mut out = Vec::new();
    crate::k8s::list::list_pages(
        &ctx.policy,
        &ctx.cancel,
        "listing virtualmachineinstancemigrations",
        "",
        |params| {
            let api = &api;
            async move { api.list(&params).await }
        },
        |items| out.extend(items),
    )
    .await?;
    Ok(out)
}

/// The local catalog entries the VMs name (as verify loads them).
fn load_catalog(dir: &std::path::Path, vms: &[ListedVm]) -> LocalCatalog {
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

/// Prometheus as the settings name it (found as verify finds it), or why not: a Prometheus
/// that cannot be found is a reason to report from the API alone, not a failure.
async fn reach_prometheus(
    target: &PrometheusTarget,
    settings: &DisruptionSettings,
    cluster: &Cluster,
    cancel: &CancellationToken,
) -> std::result::Result<PrometheusApi, String> {
    super::prometheus_reach::reach_prometheus(&settings.global.cluster, target, cluster, cancel)
        .await
        .map_err(|e| {
            tracing::warn!("Prometheus not reached: {e}");
            format!("Prometheus not reached ({e})")
        })
}

/// The budget: the flags', else two scrape intervals (once Prometheus showed them), or two
/// query steps when the step is the coarser (a long window: nothing finer can be seen).
fn budget(request: &Request, measured: Option<&Measured>) -> Budget {
    let (max_interruption, from) = match (request.max_interruption, measured) {
        (Some(max), _) => (Some(max.as_secs_f64()), "--max-interruption".to_string()),
        (None, Some(m)) => {
            let (limit, from) = default_budget(m.interval, m.grid.step);
            (Some(limit), from)
        }
        (None, None) => (None, "not measured".to_string()),
    };
    Budget {
        max_interruption,
        max_interruption_from: from,
        allow_restarts: request.allow_restarts,
    }
}

/// The default longest interruption and what it is: two scrape intervals, or two query
/// steps when the step is longer than the interval (or no interval was seen).
fn default_budget(interval: Option<f64>, step: f64) -> (f64, String) {
    let seconds = crate::disruption::report::seconds_text;
    match interval {
        Some(i) if i >= step => (2.0 * i, format!("two scrape intervals of {}", seconds(i))),
        _ => (2.0 * step, format!("two query steps of {}", seconds(step))),
    }
}

// long: one pass joining each VM's objects, series and churn records into its findings.
fn assess_all(
    found: &[Target],
    listed: &Listed,
    churn: &[ChurnRecord],
    measured: Option<&Measured>,
    span: Span,
    budget: &Budget,
) -> Vec<Assessed> {
    let key = |ns: &str, name: &str| (ns.to_string(), name.to_string());
    let vmis: BTreeMap<(String, String), VmiFacts> = listed
        .vmis
        .iter()
        .filter_map(vmi_facts)
        .map(|v| (key(&v.namespace, &v.name), v))
        .collect();
    let mut objects: BTreeMap<(String, String), Vec<MigrationObject>> = BTreeMap::new();
    for m in listed.migrations.iter().filter_map(migration_facts) {
        objects
            .entry(key(&m.namespace, &m.vmi_name))
            .or_default()
            .push(m);
    }
    let created: BTreeMap<(String, String), f64> = listed
        .vms
        .iter()
        .filter_map(|vm| {
            let meta = vm.meta();
            let t = meta.creation_timestamp.as_ref()?.0.as_millisecond() as f64 / 1000.0;
            Some((key(meta.namespace.as_deref()?, meta.name.as_deref()?), t))
        })
        .collect();
    let none = MetricFacts::default();
    found
        .iter()
        .map(|t| {
            let k = key(&t.facts.namespace, &t.facts.name);
            let vmi = vmis.get(&k);
            let objs: Vec<&MigrationObject> = objects
                .get(&k)
                .map(|v| v.iter().collect())
                .unwrap_or_default();
            let mut moved = evidence::api_migrations(vmi, &objs, span);
            let metric = measured.and_then(|m| m.facts.get(&k)).unwrap_or(&none);
            let slack = measured.map_or(30.0, |m| 2.0 * m.grid.step);
            let step = measured.map_or(30.0, |m| m.grid.step);
            let resets = evidence::counter_resets(&metric.vcpu, step);
            let records: Vec<&ChurnRecord> = churn
                .iter()
                .filter(|c| c.namespace == k.0 && c.vm == k.1)
                .collect();
            let seen_before = metric
                .nodes
                .iter()
                .filter_map(|(_, times)| times.first().copied())
                .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
            // Every migration first, from any source: a migration's target is a new QEMU whose
            // vCPU counter starts afresh, so a reset one explains is not a restart.
            if measured.is_some() {
                let current = evidence::vmi_restart(
                    created.get(&k).copied(),
                    seen_before,
                    vmi,
                    &resets,
                    &records,
                    span,
                    slack,
                );
                let at: Vec<f64> = current.iter().map(|r| r.at).collect();
                let extra = evidence::metric_migrations(metric, &moved, &at, &resets, span, step);
                moved.extend(extra);
            }
            let restarts = evidence::restarts(
                created.get(&k).copied(),
                seen_before,
                vmi,
                &resets,
                &moved,
                &records,
                span,
                slack,
            );
            moved.sort_by(|a, b| a.start.unwrap_or(0.0).total_cmp(&b.start.unwrap_or(0.0)));
            let first_start = created
                .get(&k)
                .copied()
                .filter(|c| *c > span.from - evidence::FIRST_START_SLACK_SECS);
            let (interruption, measured_by) =
                match measured.and_then(|m| Some((m, m.expected.get(&k)?))) {
                    Some((m, signals)) => {
                        let expected: Vec<Expected> = signals
                            .iter()
                            .map(|(_, samples, threshold)| Expected {
                                samples,
                                threshold: *threshold,
                            })
                            .collect();
                        let names = signals.iter().map(|s| s.0.clone()).collect();
                        (interruption::measure(&expected, m.grid, first_start), names)
                    }
                    None => (None, Vec::new()),
                };
            let findings = Findings {
                namespace: k.0.clone(),
                name: k.1.clone(),
                workload: t.facts.workload.clone(),
                run_id: t.run_id.clone(),
                vmi: vmi.cloned(),
                migrations: moved,
                restarts,
                interruption,
                measured_by,
            };
            let mut gaps: Vec<String> = t
                .unverifiable
                .iter()
                .map(|why| format!("verify cannot judge it: {why}"))
                .collect();
            gaps.extend(
                measured
                    .and_then(|m| m.gaps.get(&k))
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            assess_with_gaps(findings, budget, measured.is_some(), gaps)
        })
        .collect()
}

/// The grid of a window: whole seconds, at most [`MAX_POINTS`] samples, no finer than the
/// scrape interval, ending at the window's end (so the newest state is always sampled, even
/// when a long window's step is many minutes).
fn grid(span: Span, interval: f64) -> Grid {
    let step = (span.seconds() / MAX_POINTS as f64)
        .max(interval)
        .max(1.0)
        .ceil();
    let end = span.to.floor();
    let points = ((end - span.from.ceil()) / step).floor().max(0.0) as usize + 1;
    Grid {
        start: end - (points - 1) as f64 * step,
        step,
        points,
    }
}

fn batches(found: &[Target]) -> Vec<(&str, Vec<&str>)> {
    let mut by_ns: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in found {
        by_ns
            .entry(t.facts.namespace.as_str())
            .or_default()
            .push(t.facts.name.as_str());
    }
    by_ns
        .into_iter()
        .flat_map(|(ns, names)| {
            names
                .chunks(NAMES_PER_QUERY)
                .map(|c| (ns, c.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Everything read from Prometheus: the scrape interval, each VM's evidence series and the
/// samples of its expected signals on one grid, and what it rejected; or why interruptions
/// cannot be measured there at all: no VM in scope has a vCPU series over the window (it
/// does not scrape KubeVirt, or not these VMs), which read on would show every VM
/// interrupted for the whole window.
async fn measure(
    api: &PrometheusApi,
    found: &[Target],
    span: Span,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<std::result::Result<Measured, String>> {
    let namespaces: BTreeSet<&str> = found.iter().map(|t| t.facts.namespace.as_str()).collect();
    let mut interval: Option<f64> = None;
    for ns in namespaces {
        // The namespace's interval: the smallest estimate; the fleet's: the largest.
        let mut here: Option<f64> = None;
        for seconds in queries::INTERVAL_WINDOWS {
            let query = queries::interval_query(ns, seconds);
            if let QueryAnswer::Value(count) = api.query(&query, policy, cancel).await?
                && let Some(seen) = queries::interval_from_count(seconds, count)
            {
                here = Some(here.map_or(seen, |h| h.min(seen)));
            }
        }
        interval = match (interval, here) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    let grid = grid(span, interval.unwrap_or(1.0));
    let range = (grid.start as u64, grid.end() as u64, grid.step as u64);
    let (facts, mut gaps, vcpu_rejected) = read_evidence(api, found, range, policy, cancel).await?;
    let no_vcpu = facts
        .values()
        .all(|f| f.vcpu.iter().all(|s| s.1.is_empty()));
    if !found.is_empty() && no_vcpu && !vcpu_rejected {
        let why = format!(
            "Prometheus ({}) holds no kubevirt_vmi_vcpu_seconds_total series for any of the {} VM(s) in scope over the window (does it scrape KubeVirt's virt-handler?)",
            api.describe,
            found.len()
        );
        tracing::warn!("{}", crate::terminal::safe(&why, 400));
        return Ok(Err(why));
    }
    let rate_window = (3.0 * interval.unwrap_or(grid.step)).max(grid.step).ceil();
    // Without a measured interval the grid's step stands in (the window is then unused).
    let step_ms = subquery_step_ms(interval.or(Some(grid.step)), Window::DEFAULT);
    let signals = SignalRange {
        range,
        rate_window,
        step_ms,
    };
    let (expected, rejected) = read_signals(api, found, &signals, policy, cancel).await?;
    for (vm, why) in rejected {
        gaps.entry(vm).or_default().extend(why);
    }
    Ok(Ok(Measured {
        describe: api.describe.clone(),
        interval,
        grid,
        facts,
        expected,
        gaps,
    }))
}

/// Logs a query Prometheus rejected, naming it, and files the reason under each of its VMs.
fn rejected(gaps: &mut Gaps, ns: &str, names: &[&str], query: &str, error: &str) {
    let error = crate::terminal::safe(error, 300);
    tracing::warn!(
        "Prometheus rejected the {query} query for {} VM(s) of namespace {}: {error}",
        names.len(),
        crate::terminal::safe(ns, 64)
    );
    for name in names {
        gaps.entry((ns.to_string(), name.to_string()))
            .or_default()
            .push(format!("Prometheus rejected its {query} query ({error})"));
    }
}

/// The evidence queries, as the log and the reasons name them.
const EVIDENCE: [&str; 4] = [
    "vCPU counter (kubevirt_vmi_vcpu_seconds_total)",
    "node (kubevirt_vmi_info)",
    "migration start (kubevirt_vmi_migration_start_time_seconds)",
    "migration end (kubevirt_vmi_migration_end_time_seconds)",
];

/// The evidence series of every batch (vCPU sum, node, migration start and end times), the
/// queries rejected per VM, and whether a vCPU query was among them.
async fn read_evidence(
    api: &PrometheusApi,
    found: &[Target],
    range: (u64, u64, u64),
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<(BTreeMap<(String, String), MetricFacts>, Gaps, bool)> {
    type Answer<'a> = (String, Vec<&'a str>, [Labelled; 4]);
    let answers: Vec<Result<Answer>> = futures::stream::iter(batches(found))
        .map(|(ns, names)| async move {
            let [vcpu, nodes, starts, ends] = queries::evidence_queries(ns, &names);
            let parsed = |q: String| async move {
                api.query_range_parsed(&q, range, policy, cancel, queries::parse_labelled)
                    .await
            };
            let (v, n, s, e) =
                futures::try_join!(parsed(vcpu), parsed(nodes), parsed(starts), parsed(ends))?;
            Ok((ns.to_string(), names, [v, n, s, e]))
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    let mut out: BTreeMap<(String, String), MetricFacts> = BTreeMap::new();
    let (mut gaps, mut vcpu_rejected) = (Gaps::new(), false);
    for answer in answers {
        let (ns, names, answers) = answer?;
        for (i, answer) in answers.iter().enumerate() {
            if let Labelled::Rejected(error) = answer {
                vcpu_rejected |= i == 0;
                rejected(&mut gaps, &ns, &names, EVIDENCE[i], error);
            }
        }
        let [vcpu, nodes, starts, ends] = answers;
        let mut batch: BTreeMap<String, MetricFacts> = BTreeMap::new();
        queries::file_evidence(&mut batch, vcpu, nodes, starts, ends);
        out.extend(batch.into_iter().map(|(name, f)| ((ns.clone(), name), f)));
    }
    Ok((out, gaps, vcpu_rejected))
}

/// Per VM (namespace, name): each expected signal's name, samples and per-sample threshold.
type Expectations = BTreeMap<(String, String), Vec<(String, Vec<(f64, f64)>, Option<f64>)>>;
/// The VMs of one signal query and the threshold each sample of theirs must reach.
type GroupVms<'a> = Vec<(&'a str, Option<f64>)>;

/// How the expected signals are read: the grid (start, end, step), the seconds each sample's
/// rate covers, and the step of the level signals' subqueries (the scrape interval, as verify
/// steps them: Prometheus' default is the rule evaluation interval).
struct SignalRange {
    range: (u64, u64, u64),
    rate_window: f64,
    step_ms: u64,
}

/// Each signal group to query and its VMs with the least each sample must show (None:
/// present is enough), over a rate window of `rate_window` seconds.
fn signal_groups(
    found: &[Target],
    rate_window: f64,
) -> BTreeMap<SignalGroup, Vec<(&str, Option<f64>)>> {
    let window = Window::from_secs(rate_window as u64).unwrap_or(Window::DEFAULT);
    let mut groups: BTreeMap<SignalGroup, Vec<(&str, Option<f64>)>> = BTreeMap::new();
    for t in found.iter().filter(|t| t.unverifiable.is_none()) {
        let mut grouped = false;
        for check in checks(&t.facts, window) {
            let Some(group) = check.group.clone() else {
                continue;
            };
            grouped = true;
            let threshold = queries::sample_threshold(&check, rate_window);
            groups
                .entry(group)
                .or_default()
                .push((t.facts.name.as_str(), threshold));
        }
        // A catalog entry's own signals are queries per VM, not measured over a window here:
        // its VM is owed the presence of its vCPU series, which every running VMI reports, so
        // a stop, an eviction or a restart still shows as an interruption.
        if !grouped {
            let presence = SignalGroup {
                namespace: t.facts.namespace.clone(),
                signal: VCPU_SIGNAL,
                mount: String::new(),
            };
            groups
                .entry(presence)
                .or_default()
                .push((t.facts.name.as_str(), None));
        }
    }
    groups
}

/// The samples of each VM's expected signals: one range query per signal group and batch
/// (verify's expression of the signal, each sample a rate over the rate window), each sample
/// held to the contract's threshold for that rate window; and the queries rejected per VM.
async fn read_signals(
    api: &PrometheusApi,
    found: &[Target],
    signals: &SignalRange,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<(Expectations, Gaps)> {
    let SignalRange {
        range,
        rate_window,
        step_ms,
    } = *signals;
    let window = Window::from_secs(rate_window as u64).unwrap_or(Window::DEFAULT);
    let groups = signal_groups(found, rate_window);
    let jobs: Vec<(SignalGroup, GroupVms)> = groups
        .into_iter()
        .flat_map(|(g, vms)| {
            queries::name_batches(&vms, |vm| vm.0, NAME_SELECTOR_MAX_CHARS)
                .into_iter()
                .map(|batch| (g.clone(), batch))
                .collect::<Vec<_>>()
        })
        .collect();
    let answers: Vec<Result<(SignalGroup, GroupVms, RangeAnswer)>> = futures::stream::iter(jobs)
        .map(|(group, vms)| async move {
            let names: Vec<&str> = vms.iter().map(|(n, _)| *n).collect();
            let query = profile_range_query(&group, &names, window, Some(step_ms));
            let answer = api
                .query_range_parsed(&query, range, policy, cancel, queries::parse_by_name)
                .await?;
            Ok((group, vms, answer))
        })
        .buffered(QUERY_CONCURRENCY)
        .collect()
        .await;
    let mut out = Expectations::new();
    let mut gaps = Gaps::new();
    for answer in answers {
        let (group, vms, answer) = answer?;
        let mut series = match answer {
            RangeAnswer::Series(series) => series,
            RangeAnswer::Rejected { error_type, error } => {
                let names: Vec<&str> = vms.iter().map(|v| v.0).collect();
                let query = format!("{} signal", group.signal);
                let error = format!("{error_type}: {error}");
                rejected(&mut gaps, &group.namespace, &names, &query, &error);
                continue;
            }
        };
        for (name, threshold) in vms {
            let mut samples = series.remove(name).unwrap_or_default();
            // The unit is this VM's own (VMs of one cluster differ during a virt-handler
            // rollout): milliseconds when any of its samples exceeds what seconds allow.
            let busiest = samples.iter().map(|s| s.1).reduce(f64::max);
            if group.signal == VCPU_SIGNAL && vcpu_counter_in_millis(busiest, None, None) {
                samples.iter_mut().for_each(|s| s.1 /= 1000.0);
            }
            let key = (group.namespace.clone(), name.to_string());
            out.entry(key)
                .or_default()
                .push((group.signal.to_string(), samples, threshold));
        }
    }
    Ok((out, gaps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_names_what_it_is_two_of() {
        assert_eq!(
            default_budget(Some(30.0), 30.0),
            (60.0, "two scrape intervals of 30s".to_string())
        );
        // A 7-day window: 480 points make a 1,260 s step, far coarser than the scrapes.
        assert_eq!(
            default_budget(Some(30.0), 1260.0),
            (2520.0, "two query steps of 21m00s".to_string())
        );
        let week = Span {
            from: 1_000_000.5,
            to: 1_604_800.5,
        };
        let g = grid(week, 30.0);
        assert_eq!(
            (g.step, g.end()),
            (1260.0, 1_604_800.0),
            "ends at the window's end"
        );
        assert!(
            g.start >= week.from && g.points <= MAX_POINTS as usize + 1,
            "{g:?}"
        );
        assert_eq!(
            default_budget(None, 15.0),
            (30.0, "two query steps of 15s".to_string())
        );
    }
}
