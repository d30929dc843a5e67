//! The load section's data for `virtwork report`: per workload, each expected signal of the
//! run's VMs over the run's window, each VM against its own threshold, with `virtwork
//! verify`'s verdict and, for a profiled VM, the shape its load profile should draw.
//!
//! Owns: choosing where the VMs' params come from (the run's VMs listed from the cluster, as
//! verify lists them, with the local catalog loaded as verify loads it; else the audit
//! records alone, with the signal params each VM's run recorded, chosen as verify chooses
//! them, the workloads' defaults only where none were recorded, said so), calling verify's
//! own evaluation ([`crate::commands::verify::evaluate`]) over the run's window, one range
//! query per signal group (a catalog signal: one per VM, capped) and joining the three into
//! [`SignalSeries`]. A Prometheus or cluster that fails becomes the reason the page gives;
//! only an interrupt ends the command. Must not: judge anything itself (verify does), or
//! build markup.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prometheus::{MIN_STEP, RunWindow, fetched};
use crate::commands::verify::{evaluate, load_catalog};
use crate::config::ReportSettings;
use crate::error::{Error, Result};
use crate::htmlreport::RunRecord;
use crate::htmlreport::data::{
    Expected, Fetched, Judged, Load, SignalSeries, VmSignal, expected_points,
};
use crate::k8s::client::Cluster;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope, list_in_scope};
use crate::model::{ManagedKind, Quantity, Window};
use crate::signals::contract::{
    Check, CustomSignal, SignalGroup, VmFacts, checks, profile_range_query,
};
use crate::verify::evaluate::RangeAnswer;
use crate::verify::listed::{ListedVm, ListedVmi};
use crate::verify::prometheus::PrometheusApi;
use crate::verify::recorded::{ParamsSource, Records, Setup, choose};
use crate::verify::{CounterUnit, SignalResult, Target, VmResult, is_builtin};
use crate::workloads::catalog::CatalogEntry;

/// How long transient failures of the cluster and Prometheus are retried, per run.
const DEADLINE: Duration = Duration::from_secs(60);
/// Most VMs per catalog signal whose series are read (each needs its own range query: the
/// entry's template names one VM).
pub const CATALOG_VMS_READ: usize = 20;

/// Fills each run's load section, or the reason it has none.
pub async fn add(
    settings: &ReportSettings,
    prometheus: std::result::Result<&PrometheusApi, &String>,
    cluster: std::result::Result<&Cluster, &String>,
    runs: &mut [RunRecord],
    cancel: &CancellationToken,
) -> Result<()> {
    for run in runs.iter_mut() {
        let api = match prometheus {
            Ok(api) => api,
            Err(why) => {
                run.load = Fetched::Missing(why.clone());
                continue;
            }
        };
        if run.detail.vms.is_empty() {
            run.load = Fetched::Missing("the run created no VMs".into());
            continue;
        }
        let Some(window) = RunWindow::of(run) else {
            run.load = Fetched::Missing("the run's start time is not readable".into());
            continue;
        };
        let policy = RetryPolicy::until(Instant::now() + DEADLINE);
        run.load = fetched(load(settings, api, cluster, run, &window, &policy, cancel).await)?;
    }
    Ok(())
}

/// One run's load: its VMs as targets, verify's verdicts on them, their series.
async fn load(
    settings: &ReportSettings,
    api: &PrometheusApi,
    cluster: std::result::Result<&Cluster, &String>,
    run: &RunRecord,
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Load> {
    let (vms, targets, listed) = match cluster {
        Ok(cluster) => {
            let ctx = ApiContext {
                client: cluster.client.clone(),
                policy: *policy,
                cancel: cancel.clone(),
            };
            match listed_targets(settings, run, &ctx).await {
                Ok(targets) if !targets.is_empty() => {
                    let vms = Recorded {
                        vms: targets.iter().map(Vm::of).collect(),
                        params_from: String::new(),
                    };
                    (vms, targets, Ok(()))
                }
                Ok(_) => (
                    recorded_vms(settings, run),
                    Vec::new(),
                    Err(format!(
                        "no VM of the run is left in namespace {}",
                        run.detail.execution.namespace
                    )),
                ),
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                Err(err) => (
                    recorded_vms(settings, run),
                    Vec::new(),
                    Err(format!("listing the run's VMs failed: {err}")),
                ),
            }
        }
        Err(why) => (recorded_vms(settings, run), Vec::new(), Err(why.clone())),
    };
    let (vms, params_from, verdicts, results) = match (vms, listed) {
        (Recorded { vms, .. }, Ok(())) => {
            let (how, results) = judged(api, targets, window, policy, cancel).await?;
            (
                vms,
                "each VM's own params, chosen as verify chooses them (its run's record in the \
                 audit database, else the VM's annotation; the VMs listed from the cluster)"
                    .to_string(),
                how,
                results,
            )
        }
        (Recorded { vms, params_from }, Err(why)) => (
            vms,
            format!("{params_from}; the VMs could not be read: {why}"),
            Err(format!("verify needs the run's VMs in the cluster: {why}")),
            Vec::new(),
        ),
    };
    let mut series = read_series(api, &vms, window, policy, cancel).await?;
    let undrawn = join_verdicts(&mut series, &results, &vms, run, window);
    Ok(Load {
        series,
        params_from,
        verdicts,
        undrawn,
    })
}

/// The run's VMs and VMIs as verify lists them (namespace and run id), as verify's targets
/// with the params the audit database recorded for the run.
async fn listed_targets(
    settings: &ReportSettings,
    run: &RunRecord,
    ctx: &ApiContext,
) -> Result<Vec<Target>> {
    let e = &run.detail.execution;
    let scope = Scope {
        namespace: Some(e.namespace.clone()),
        run_id: Some(e.run_id.clone()),
    };
    let (vms, vmis) = futures::try_join!(
        list_in_scope::<ListedVm>(ctx, &scope, ManagedKind::VirtualMachine),
        list_in_scope::<ListedVmi>(ctx, &scope, ManagedKind::VirtualMachineInstance),
    )?;
    let catalog = load_catalog(&settings.catalog_dir, &vms);
    // Judged by the params the run recorded, as verify judges them: a patched annotation
    // draws no lower threshold here either.
    Ok(crate::commands::verify::judged_targets(
        &vms,
        &vmis,
        &catalog,
        &settings.global.audit.path,
        &mut Default::default(),
    ))
}

/// What the page draws of one VM: its facts (params, profile, catalog signals) and when its
/// VMI was created (a profile's clock starts after it).
struct Vm {
    facts: VmFacts,
    vmi_created: Option<f64>,
}

impl Vm {
    fn of(target: &Target) -> Vm {
        Vm {
            facts: target.facts.clone(),
            vmi_created: target.vmi_created,
        }
    }
}

/// The VMs the page draws, and (when they come from the audit records alone; empty when
/// listed from the cluster) the line saying where their params came from.
struct Recorded {
    vms: Vec<Vm>,
    params_from: String,
}

/// The run's VMs from the audit records alone (the cluster cannot be read, or no longer
/// holds them): each judged by the signal params its run recorded in the audit database
/// (`workload_details.signal_params`, chosen by verify's own rules,
/// [`crate::verify::recorded::choose`]), a profiled VM with its load profile; the workloads'
/// defaults only for a VM whose run recorded none (before schema version 4, or by the Go
/// tool), said so. A catalog entry's signals come from the local catalog. Never judged (no
/// VMI phase is known).
fn recorded_vms(settings: &ReportSettings, run: &RunRecord) -> Recorded {
    let d = &run.detail;
    let records = run_records(settings, run);
    let catalog = recorded_catalog_signals(settings, run);
    let mut defaulted = 0usize;
    let mut unusable: Vec<String> = Vec::new();
    let vms: Vec<Vm> = d
        .vms
        .iter()
        .map(|vm| {
            let own = Setup {
                workload: vm.component.clone(),
                role: vm.role.clone().filter(|r| !r.is_empty()),
                memory_bytes: vm.memory.parse::<Quantity>().ok().map(|q| q.value() as u64),
                params: BTreeMap::new(),
            };
            let choice = choose(
                &vm.namespace,
                &vm.vm_name,
                Some(&d.execution.run_id),
                own,
                &records,
            );
            if choice.source != ParamsSource::AuditDb {
                defaulted += 1;
            }
            unusable.extend(choice.note.map(|note| format!("{}: {note}", vm.vm_name)));
            let setup = choice.setup;
            // A profile the record cannot give (verify would call the VM unverifiable) is
            // drawn without an expected shape, and the section's first line names the VM.
            let profile = match is_builtin(&setup.workload) {
                true => crate::workloads::profile_driver::from_recorded(&setup.params)
                    .unwrap_or_else(|why| {
                        unusable.push(format!("{}: {why}", vm.vm_name));
                        None
                    }),
                false => None,
            };
            Vm {
                facts: VmFacts {
                    namespace: d.execution.namespace.clone(),
                    name: vm.vm_name.clone(),
                    custom: catalog
                        .get(setup.workload.as_str())
                        .cloned()
                        .unwrap_or_default(),
                    workload: setup.workload,
                    role: setup.role,
                    memory_bytes: setup.memory_bytes,
                    params: setup.params,
                    profile,
                },
                vmi_created: None,
            }
        })
        .collect();
    Recorded {
        params_from: params_from_records(vms.len(), defaulted, &records, &unusable),
        vms,
    }
}

/// The run's own records in the audit database, for verify's choice of each VM's params.
fn run_records(settings: &ReportSettings, run: &RunRecord) -> Records {
    let db = &settings.global.audit.path;
    let run_id = &run.detail.execution.run_id;
    match crate::audit::query::open_read_only(db) {
        Ok(Some(conn)) => match crate::audit::query::recorded_run(&conn, run_id) {
            Ok(recorded) => Records::Read {
                path: db.display().to_string(),
                runs: BTreeMap::from([(run_id.clone(), recorded)]),
            },
            Err(e) => Records::Unavailable(format!("the audit database could not be read: {e}")),
        },
        Ok(None) => Records::Unavailable("the audit database is gone".into()),
        Err(e) => Records::Unavailable(format!("the audit database could not be read: {e}")),
    }
}

/// Each catalog workload of the run's VMs and its signals from the local catalog (none when
/// the entry is missing there).
fn recorded_catalog_signals<'a>(
    settings: &ReportSettings,
    run: &'a RunRecord,
) -> BTreeMap<&'a str, Vec<CustomSignal>> {
    let mut catalog: BTreeMap<&str, Vec<CustomSignal>> = BTreeMap::new();
    for vm in &run.detail.vms {
        let w = vm.component.as_str();
        if !is_builtin(w) && !catalog.contains_key(w) {
            let signals = CatalogEntry::load(&settings.catalog_dir, w)
                .map(|entry| entry.signals().to_vec())
                .unwrap_or_default();
            catalog.insert(w, signals);
        }
    }
    catalog
}

/// The section's line on where the params of VMs read from the audit records came from.
fn params_from_records(
    total: usize,
    defaulted: usize,
    records: &Records,
    unusable: &[String],
) -> String {
    let recorded = "each VM's own params, as its run recorded them in the audit database";
    let why_default = match records {
        Records::Unavailable(why) => why.clone(),
        Records::Read { .. } => "the run recorded no signal params for them (recorded before \
                                  schema version 4, or by the Go tool)"
            .into(),
    };
    let mut line = match defaulted {
        0 => recorded.to_string(),
        n if n == total => format!("the workloads' default params ({why_default})"),
        n => format!("{recorded}; the workloads' defaults for {n} of {total} VMs ({why_default})"),
    };
    if let Some(first) = unusable.first() {
        line.push_str(&format!(
            "; {} VM(s) with unusable recorded params, e.g. {first}",
            unusable.len()
        ));
    }
    line
}

/// verify's verdicts over the run's window (from its start to now, at most a week), or why
/// there are none.
async fn judged(
    api: &PrometheusApi,
    targets: Vec<Target>,
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<(std::result::Result<String, String>, Vec<VmResult>)> {
    let now = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(window.end);
    // Not shorter than two of the page's steps (verify refuses a window of fewer than two
    // scrapes, naming the interval, which the page then shows).
    let seconds = now
        .saturating_sub(window.start)
        .clamp(2 * MIN_STEP, 7 * 24 * 3600);
    let Some(over) = Window::from_secs(seconds) else {
        return Ok((
            Err(format!("a window of {seconds}s is not one verify takes")),
            Vec::new(),
        ));
    };
    match evaluate(api, targets, over, policy, cancel).await {
        Ok(results) => Ok((
            Ok(format!(
                "`virtwork verify --run-id <run> --window {over}` judged at the time of the \
                 report (the run's window: from its start to now{})",
                match now.saturating_sub(window.start) > seconds {
                    true => ", at most a week",
                    false => "",
                }
            )),
            results,
        )),
        Err(Error::Interrupted) => Err(Error::Interrupted),
        Err(err) => Ok((
            Err(format!("verify could not judge the VMs: {err}")),
            Vec::new(),
        )),
    }
}

/// One drawn signal: its key, the VMs' names and checks.
type Drawn<'a> = BTreeMap<(String, String), (Check, Vec<(&'a Vm, Check)>)>;

/// Each expected signal's samples over the window: one range query per (shown workload,
/// signal group) over its VMs' names; a catalog signal one query per VM, for at most
/// [`CATALOG_VMS_READ`] VMs.
async fn read_series(
    api: &PrometheusApi,
    targets: &[Vm],
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Vec<SignalSeries>> {
    let mut drawn: Drawn = BTreeMap::new();
    for target in targets {
        let f = &target.facts;
        let shown = match &f.role {
            Some(role) => format!("{} ({role})", f.workload),
            None => f.workload.clone(),
        };
        // Queries over the chart's rate window; thresholds (until verify's verdicts replace
        // them) at verify's default window.
        let defaults = checks(f, Window::DEFAULT);
        for mut check in checks(f, window.rate_window()) {
            if let Some(d) = defaults.iter().find(|d| d.signal == check.signal) {
                check.threshold = d.threshold;
            }
            drawn
                .entry((shown.clone(), check.signal.clone()))
                .or_insert_with(|| (check.clone(), Vec::new()))
                .1
                .push((target, check));
        }
    }
    let mut out = Vec::new();
    for ((workload, signal), (first, vms)) in drawn {
        let catalog = first.group.is_none();
        let (samples, note) = match &first.group {
            Some(group) => (
                group_samples(api, group, &vms, window, policy, cancel).await?,
                None,
            ),
            None => catalog_samples(api, &vms, window, policy, cancel).await?,
        };
        let vms = vms
            .iter()
            .map(|(t, check)| {
                let vm = VmSignal {
                    samples: samples.get(&t.facts.name).cloned().unwrap_or_default(),
                    threshold: check.threshold,
                    verdict: None,
                    expected: None,
                };
                (t.facts.name.clone(), vm)
            })
            .collect();
        out.push(SignalSeries {
            workload,
            signal,
            description: first.description,
            unit: first.unit,
            catalog,
            note,
            vms,
        });
    }
    Ok(out)
}

/// A built-in group's samples by VM name (only the names asked for).
async fn group_samples(
    api: &PrometheusApi,
    group: &SignalGroup,
    vms: &[(&Vm, Check)],
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<BTreeMap<String, Vec<(f64, f64)>>> {
    let names: Vec<&str> = vms.iter().map(|(t, _)| t.facts.name.as_str()).collect();
    let wanted: BTreeSet<&str> = names.iter().copied().collect();
    // Subqueries step at the finest step explicitly, not at the rule evaluation interval
    // Prometheus would default to.
    let query = profile_range_query(group, &names, window.rate_window(), Some(MIN_STEP * 1000));
    let series = match api
        .query_range(&query, window.range(), policy, cancel)
        .await?
    {
        RangeAnswer::Series(series) => series,
        RangeAnswer::Rejected { error_type, error } => {
            return Err(Error::runtime(format!(
                "Prometheus rejected the {} query ({error_type}): {error}",
                group.signal
            )));
        }
    };
    Ok(series
        .into_iter()
        .filter(|(name, samples)| wanted.contains(name.as_str()) && !samples.is_empty())
        .map(|(name, samples)| (name, window.offsets(samples)))
        .collect())
}

/// A catalog signal's samples by VM name: the entry's own query for each VM (its template
/// rendered for that VM), the first [`CATALOG_VMS_READ`] VMs only.
async fn catalog_samples(
    api: &PrometheusApi,
    vms: &[(&Vm, Check)],
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<(BTreeMap<String, Vec<(f64, f64)>>, Option<String>)> {
    let mut out = BTreeMap::new();
    for (target, check) in vms.iter().take(CATALOG_VMS_READ) {
        let name = &target.facts.name;
        match api
            .query_range(&check.query, window.range(), policy, cancel)
            .await?
        {
            RangeAnswer::Series(mut series) => {
                // The entry's query may keep any labels: the series named after the VM, else
                // the first one.
                let samples = series
                    .remove(name)
                    .or_else(|| series.into_values().next())
                    .unwrap_or_default();
                if !samples.is_empty() {
                    out.insert(name.clone(), window.offsets(samples));
                }
            }
            RangeAnswer::Rejected { error_type, error } => {
                return Err(Error::runtime(format!(
                    "Prometheus rejected catalog signal {}'s query for {name} ({error_type}): {error}",
                    check.signal
                )));
            }
        }
    }
    let note = (vms.len() > CATALOG_VMS_READ).then(|| {
        format!(
            "series read for the first {CATALOG_VMS_READ} of {} VMs (a catalog signal's query \
             names one VM, so each VM costs a query); verify's verdicts cover them all",
            vms.len()
        )
    });
    Ok((out, note))
}

/// Puts each verdict on its VM's signal (its threshold is the one verify judged by) and each
/// profiled VM's expected shape; returns the verdicts no drawn signal holds.
fn join_verdicts(
    series: &mut [SignalSeries],
    results: &[VmResult],
    targets: &[Vm],
    run: &RunRecord,
    window: &RunWindow,
) -> Vec<(String, String, Judged)> {
    let mut by_vm: BTreeMap<(&str, &str), &SignalResult> = BTreeMap::new();
    let mut undrawn = Vec::new();
    let drawn: BTreeSet<(&str, &str)> = series
        .iter()
        .flat_map(|s| s.vms.keys().map(move |vm| (vm.as_str(), s.signal.as_str())))
        .collect();
    for r in results {
        for s in &r.signals {
            let key = (r.target.facts.name.as_str(), s.check.signal.as_str());
            match drawn.contains(&key) {
                true => {
                    by_vm.insert(key, s);
                }
                false => undrawn.push((key.0.to_string(), key.1.to_string(), judged_of(s))),
            }
        }
    }
    let targets: BTreeMap<&str, &Vm> = targets.iter().map(|t| (t.facts.name.as_str(), t)).collect();
    let span = (window.end - window.start) as f64;
    for s in series.iter_mut() {
        for (name, vm) in s.vms.iter_mut() {
            let result = by_vm.get(&(name.as_str(), s.signal.as_str())).copied();
            if let Some(result) = result {
                vm.verdict = Some(judged_of(result));
                vm.threshold = result.check.threshold;
                // verify decided this VM's vCPU counter counts milliseconds (a node's
                // virt-handler before KubeVirt moved to seconds): its line in vCPU seconds,
                // as verify judged it, not 1000 times its neighbours'.
                if result.counter_unit == Some(CounterUnit::Milliseconds) {
                    for (_, value) in vm.samples.iter_mut() {
                        *value /= 1000.0;
                    }
                }
            }
            if let Some(target) = targets.get(name.as_str()) {
                vm.expected = expected_of(&s.signal, target, result, run, window, span);
            }
        }
    }
    undrawn
}

fn judged_of(s: &SignalResult) -> Judged {
    Judged {
        verdict: s.status,
        observed: s.observed,
        note: s.error.clone().or_else(|| s.check.note.clone()),
    }
}

/// A profiled VM's expected shape: the clock verify fitted, else the VMI's creation, else
/// the VM's recorded creation, else the run's start.
fn expected_of(
    signal: &str,
    target: &Vm,
    result: Option<&SignalResult>,
    run: &RunRecord,
    window: &RunWindow,
    span: f64,
) -> Option<Expected> {
    target.facts.profile?;
    let check = checks(&target.facts, Window::DEFAULT)
        .into_iter()
        .find(|c| c.signal == signal)?;
    let profiled = check.profile?;
    let report = result.and_then(|r| r.profile.as_ref());
    let unix = |text: &str| {
        text.parse::<jiff::Timestamp>()
            .ok()
            .map(|t| t.as_second() as f64)
    };
    let recorded = run
        .detail
        .vms
        .iter()
        .find(|v| v.vm_name == target.facts.name)
        .and_then(|v| v.created_at.as_deref())
        .and_then(unix);
    let (clock, clock_from) = match (
        report.and_then(|r| r.clock_start.as_deref()).and_then(unix),
        target.vmi_created,
        recorded,
    ) {
        (Some(fitted), _, _) => (fitted, "the clock verify fitted to the series"),
        (None, Some(vmi), _) => (vmi, "the VMI's creation (verify fitted no clock)"),
        (None, None, Some(vm)) => (vm, "the VM's recorded creation (verify fitted no clock)"),
        (None, None, None) => (
            window.start as f64,
            "the run's start (verify fitted no clock)",
        ),
    };
    let points = expected_points(
        &profiled,
        report.and_then(|r| r.factor_per_level),
        clock - window.start as f64,
        0.0,
        span,
    )?;
    Some(Expected {
        shape: profiled.profile.describe(),
        clock_from: clock_from.to_string(),
        points,
    })
}
