//! `virtwork verify`'s core: judging Prometheus' answers against the expected-signal contract
//! of [`crate::signals`] ([`evaluate`]), reaching Prometheus ([`prometheus`], the only async
//! part) and the generated monitoring kit ([`kit`]).
//!
//! This file turns listed VirtualMachines into [`Target`]s (pure) and results into the
//! text table and JSON document (pure). Must not: talk to the cluster (commands/verify.rs
//! lists the VMs) or decide exit codes (the command does).

pub mod alerts;
pub mod evaluate;
pub mod kit;
pub mod listed;
pub mod profile;
pub mod prometheus;
pub mod recorded;

use std::collections::{BTreeMap, BTreeSet};

use kube::Resource;
use serde::Serialize;
use serde_json::{Value, json};

use crate::labels;
use crate::model::{DnsLabel, Window};
use crate::signals::contract::checks;
use crate::signals::contract::{
    Check, CustomSignal, SIGNAL_PARAMS_ANNOTATION, SIGNALS_DIGEST_ANNOTATION, Unit, VmFacts,
    WORKLOADS, signals_digest,
};
use evaluate::{SeriesFacts, Verdict};
use listed::{ListedVm, ListedVmi};
use recorded::{Fallback, ParamsSource, Records, Setup};

/// The local catalog entries the VMs name, as the command loaded them: entry name → its
/// signals, or why it could not be loaded.
pub type LocalCatalog = BTreeMap<String, std::result::Result<Vec<CustomSignal>, String>>;

/// One VM to verify, with what its signals depend on.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub facts: VmFacts,
    pub run_id: Option<String>,
    /// The VMI's phase; None when the VM has no VMI.
    pub vmi_phase: Option<String>,
    /// When the VMI was created (Unix seconds): nothing in the guest, a load profile's clock
    /// included, started before it.
    pub vmi_created: Option<f64>,
    /// Why the VM's recorded signal setup could not be used (absent: defaults apply).
    pub setup_note: Option<String>,
    /// Why the VM's catalog signals cannot be judged (no matching local entry): reported
    /// as a failure instead of querying anything the cluster could have chosen.
    pub unverifiable: Option<String>,
    /// Where its workload, role, memory and signal params came from: the audit database's
    /// record of its run, or the VM's own annotation and labels.
    pub params_source: ParamsSource,
    /// Why the VM's own annotation and labels were used (source annotation).
    pub params_fallback: Option<Fallback>,
    /// The one warning line when the VM's annotation or labels differ from the record.
    pub params_warning: Option<String>,
}

fn label(object: &impl Resource, key: &str) -> Option<String> {
    object
        .meta()
        .labels
        .as_ref()?
        .get(key)
        .filter(|v| !v.is_empty())
        .cloned()
}

fn annotation<'a>(object: &'a impl Resource, key: &str) -> Option<&'a str> {
    object
        .meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Whether `workload` is a built-in: judged by the built-in contract alone.
pub fn is_builtin(workload: &str) -> bool {
    WORKLOADS.contains(&workload)
}

/// The catalog entries the VMs name (workload labels that are not built-ins and could be
/// entry names), for the command to load from the local catalog.
pub fn catalog_names(vms: &[ListedVm]) -> BTreeSet<String> {
    vms.iter()
        .filter_map(|vm| label(vm, labels::COMPONENT))
        .filter(|w| !is_builtin(w) && DnsLabel::is_valid(w))
        .collect()
}

/// The signals a catalog VM is judged by: the local entry's, when its digest is the one the
/// run recorded. Err: why they cannot be trusted (reported, never replaced by a query from
/// the cluster).
fn catalog_signals(
    workload: &str,
    recorded: Option<&str>,
    catalog: &LocalCatalog,
) -> std::result::Result<Vec<CustomSignal>, String> {
    let local = match catalog.get(workload) {
        Some(Ok(signals)) => signals,
        Some(Err(why)) => return Err(format!("local catalog entry {workload:?}: {why}")),
        None => {
            return Err(format!(
                "workload {workload:?} is neither a built-in nor a catalog entry name"
            ));
        }
    };
    let digest = signals_digest(local);
    match recorded {
        Some(r) if r == digest => Ok(local.clone()),
        None if local.is_empty() => Ok(Vec::new()),
        None => Err(format!(
            "the VM records no {SIGNALS_DIGEST_ANNOTATION}, so it cannot be matched to the local entry {workload:?}'s signals"
        )),
        Some(_) => Err(format!(
            "the local catalog entry {workload:?} declares other signals than the run recorded \
             ({SIGNALS_DIGEST_ANNOTATION} differs): verify with the catalog the run used (--catalog-dir)"
        )),
    }
}

/// The params the VM's run recorded, or the defaults with a note when unreadable.
fn recorded_params(vm: &ListedVm, notes: &mut Vec<String>) -> BTreeMap<String, String> {
    match annotation(vm, SIGNAL_PARAMS_ANNOTATION) {
        None => BTreeMap::new(),
        Some(text) => serde_json::from_str(text).unwrap_or_else(|e| {
            notes.push(format!(
                "annotation {SIGNAL_PARAMS_ANNOTATION} is unreadable ({e}); default params assumed"
            ));
            BTreeMap::new()
        }),
    }
}

fn memory_request(vm: &ListedVm) -> Option<u64> {
    vm.spec
        .as_ref()?
        .memory_text()
        .and_then(|q| q.parse::<crate::model::Quantity>().ok())
        .map(|q| q.value())
        .filter(|b| *b > 0.0)
        .map(|b| b as u64)
}

/// Builds the targets from listed VMs and VMIs judged by their own annotation and labels
/// alone (no audit database): [`targets_recorded`] with [`Records::default`].
pub fn targets(vms: &[ListedVm], vmis: &[ListedVmi], catalog: &LocalCatalog) -> Vec<Target> {
    targets_recorded(vms, vmis, catalog, &Records::default())
}

/// Builds the targets from listed VMs and VMIs (joined by namespace and name), sorted by
/// namespace and name. Each VM's workload, role, memory and signal params are what its run
/// recorded in `records` when it has them ([`recorded::choose`]), else its own. Built-in
/// workloads get the built-in contract only; catalog workloads the local entry's signals (see
/// [`catalog_signals`]).
pub fn targets_recorded(
    vms: &[ListedVm],
    vmis: &[ListedVmi],
    catalog: &LocalCatalog,
    records: &Records,
) -> Vec<Target> {
    fn key(o: &impl Resource) -> (String, String) {
        (
            o.meta().namespace.clone().unwrap_or_default(),
            o.meta().name.clone().unwrap_or_default(),
        )
    }
    let phases: BTreeMap<(String, String), (Option<String>, Option<f64>)> = vmis
        .iter()
        .map(|vmi| {
            let phase = vmi
                .status
                .as_ref()
                .and_then(|s| s.phase())
                .map(String::from);
            let created = vmi
                .meta()
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second() as f64);
            (key(vmi), (phase, created))
        })
        .collect();
    let mut out: Vec<Target> = vms
        .iter()
        .map(|vm| {
            let (namespace, name) = key(vm);
            let vmi = phases
                .get(&(namespace.clone(), name.clone()))
                .cloned()
                .unwrap_or_default();
            target_of(vm, (namespace, name), vmi, catalog, records)
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.facts.namespace, &a.facts.name).cmp(&(&b.facts.namespace, &b.facts.name))
    });
    out
}

/// One VM's target: its setup chosen between its own words and its run's record
/// ([`recorded::choose`]), its expectations, and its VMI's phase and creation time.
fn target_of(
    vm: &ListedVm,
    (namespace, name): (String, String),
    (vmi_phase, vmi_created): (Option<String>, Option<f64>),
    catalog: &LocalCatalog,
    records: &Records,
) -> Target {
    let run_id = label(vm, labels::RUN_ID);
    let mut notes = Vec::new();
    let own = Setup {
        workload: label(vm, labels::COMPONENT).unwrap_or_default(),
        role: label(vm, labels::ROLE),
        memory_bytes: memory_request(vm),
        params: recorded_params(vm, &mut notes),
    };
    let choice = recorded::choose(&namespace, &name, run_id.as_deref(), own, records);
    if choice.source == ParamsSource::AuditDb {
        // The annotation was not used: its state is in the warning, if it differs.
        notes.clear();
    }
    notes.extend(choice.note);
    let Setup {
        workload,
        role,
        memory_bytes,
        params,
    } = choice.setup;
    let (custom, profile, unverifiable) =
        expectations_of(vm, &workload, &params, catalog, choice.source);
    Target {
        vmi_phase,
        vmi_created,
        run_id,
        facts: VmFacts {
            role,
            memory_bytes,
            params,
            profile,
            custom,
            workload,
            namespace,
            name,
        },
        setup_note: (!notes.is_empty()).then(|| notes.join("; ")),
        unverifiable,
        params_source: choice.source,
        params_fallback: choice.fallback,
        params_warning: choice.warning,
    }
}

/// What a VM is judged by beyond the built-in contract: a catalog VM's signals (the local
/// entry's), a built-in VM's load profile; or why neither can be trusted.
fn expectations_of(
    vm: &ListedVm,
    workload: &str,
    params: &BTreeMap<String, String>,
    catalog: &LocalCatalog,
    source: ParamsSource,
) -> (
    Vec<CustomSignal>,
    Option<crate::profile_schedule::LoadProfile>,
    Option<String>,
) {
    if !is_builtin(workload) {
        return match catalog_signals(workload, annotation(vm, SIGNALS_DIGEST_ANNOTATION), catalog) {
            Ok(signals) => (signals, None, None),
            Err(why) => (Vec::new(), None, Some(why)),
        };
    }
    // A profile the record cannot give is not judged as steady: that could fail a healthy VM
    // in its low phase, or pass one whose profile stopped.
    match crate::workloads::profile_driver::from_recorded(params) {
        Ok(profile) => (Vec::new(), profile, None),
        Err(why) => (
            Vec::new(),
            None,
            Some(match source {
                ParamsSource::Annotation => format!("annotation {SIGNAL_PARAMS_ANNOTATION}: {why}"),
                ParamsSource::AuditDb => format!("the signal params its run recorded: {why}"),
            }),
        ),
    }
}

/// The one result of a VM whose expectations cannot be trusted (a catalog VM without a
/// matching local entry, a built-in whose recorded load profile is unusable): a failure
/// naming why.
pub fn unverifiable_result(target: &Target, reason: &str) -> SignalResult {
    let (signal, description) = match is_builtin(&target.facts.workload) {
        true => ("load-profile", "the load profile its run recorded"),
        false => ("catalog-signals", "the catalog entry's own signals"),
    };
    SignalResult {
        check: Check {
            signal: signal.into(),
            description: description.into(),
            query: String::new(),
            threshold: None,
            unit: Unit::Custom,
            note: None,
            series: None,
            relabelled: None,
            group: None,
            profile: None,
        },
        observed: None,
        status: Verdict::Unverifiable,
        error: Some(reason.to_string()),
        profile: None,
        counter_unit: None,
    }
}

/// What Prometheus answered for one check, before judging.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub check: Check,
    pub observed: Option<f64>,
    /// The series' facts (None: not gathered, for catalog signals).
    pub facts: Option<SeriesFacts>,
    /// Prometheus rejected the query: its message.
    pub error: Option<String>,
    /// The VM's name and when its VMI was created (a load profile's clock starts after it).
    pub vm_name: String,
    pub vmi_created: Option<f64>,
}

/// The samples of one profiled group's range query, by VM name, and how they were taken.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRange {
    pub spec: profile::RangeSpec,
    pub samples: BTreeMap<String, Vec<(f64, f64)>>,
    /// Prometheus rejected the range query: its message.
    pub error: Option<String>,
}

/// The range answers of every profiled group.
pub type ProfileRanges = BTreeMap<crate::signals::contract::SignalGroup, GroupRange>;

/// Samples in a range and the seconds each covers, for judging the profiled signals of a
/// group scraped every `interval` seconds over `window`, ending at `now` (Unix seconds): each
/// sample's rate spans three scrapes (so it holds two samples whatever the jitter; 10 s when
/// the interval is unknown), and at most [`RANGE_POINTS`] samples.
pub fn range_spec(window: Window, interval: f64, now: f64) -> profile::RangeSpec {
    let rate_window = match interval > 0.0 {
        true => (3.0 * interval).ceil().max(2.0),
        false => 10.0,
    };
    let span = (window.as_secs() as f64 - rate_window).max(0.0);
    let step = (span / RANGE_POINTS as f64).max(interval).max(1.0).ceil();
    let end = now.floor();
    profile::RangeSpec {
        start: end - span,
        end,
        step,
        rate_window,
    }
}

/// Most samples per VM a profile range query asks for.
pub const RANGE_POINTS: usize = 240;

/// Whether the VM's VMI is running; otherwise why not, for the report.
pub fn not_running(target: &Target) -> Option<String> {
    match target.vmi_phase.as_deref() {
        Some("Running") => None,
        Some(phase) => Some(format!("its VMI is {phase}, not Running")),
        None => Some("it has no VMI (stopped)".to_string()),
    }
}

/// The results of a VM that is not running: every check fails as NOT RUNNING, unqueried.
pub fn not_running_results(target: &Target, window: Window, why: &str) -> Vec<SignalResult> {
    checks(&target.facts, window)
        .into_iter()
        .map(|mut check| {
            check.note = Some(format!("not running: {why}"));
            SignalResult {
                check,
                observed: None,
                status: Verdict::NotRunning,
                error: None,
                profile: None,
                counter_unit: None,
            }
        })
        .collect()
}

/// When the window is shorter than [`evaluate::MIN_WINDOW_INTERVALS`] of the fleet's scrape
/// interval ([`evaluate::fleet_interval`]; a rate then sees fewer than two samples): that
/// interval and the shortest window accepted, in seconds.
pub fn window_too_short(interval: Option<f64>, window: Window) -> Option<(f64, u64)> {
    let interval = interval?;
    // 10% tolerance: the interval is measured from sample timestamps, which jitter.
    let needed = evaluate::MIN_WINDOW_INTERVALS * interval * 0.9;
    ((window.as_secs() as f64) < needed).then_some((interval, needed.ceil() as u64))
}

/// What every verdict of one verify round shares: the window, the fleet's scrape interval
/// and the time the answers were read at (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub window: Window,
    pub interval: Option<f64>,
    pub now: f64,
}

/// The note of a vcpu-busy value read from a millisecond counter.
const MILLIS_NOTE: &str = "this VM's kubevirt_vmi_vcpu_seconds_total counts milliseconds (virt-handler before the fix of kubevirt/kubevirt#13898): values divided by 1000";

/// Judges every answer: a vcpu-busy value from a counter in milliseconds (decided per VM,
/// from its own series: VMs of one cluster differ during a virt-handler rollout) is converted
/// to seconds first; a profiled signal whose series is present and current is judged by its
/// profile over `ranges`.
pub fn judge_answers(
    answers: Vec<(usize, Answered)>,
    round: Round,
    ranges: &ProfileRanges,
) -> Vec<(usize, SignalResult)> {
    let mut fits = profile::FitCache::default();
    answers
        .into_iter()
        .map(|(i, a)| (i, judge_answer(a, round, ranges, &mut fits)))
        .collect()
}

/// One answer's [`SignalResult`]: its unit, its series' verdict, then its profile's.
fn judge_answer(
    mut a: Answered,
    round: Round,
    ranges: &ProfileRanges,
    fits: &mut profile::FitCache,
) -> SignalResult {
    let ctx = evaluate::Context {
        window: round.window,
        interval: round.interval,
        vmi_age: a.vmi_created.map(|c| round.now - c),
    };
    let (in_millis, counter_unit) = counter_unit(&a, &ctx);
    let mut unit_note = None;
    if in_millis {
        a.observed = a.observed.map(|v| v / 1000.0);
        unit_note = Some(MILLIS_NOTE.to_string());
    }
    let (mut status, mut note) = match (&a.error, &a.facts) {
        (Some(_), _) => (Verdict::Error, None),
        (None, Some(facts)) => evaluate::judge_series(&a.check, a.observed, facts, &ctx),
        (None, None) => (evaluate::judge(&a.check, a.observed), None),
    };
    let mut report = None;
    match judge_by_profile(&a, status, ranges, in_millis, fits) {
        None => {}
        Some(Err(error)) => {
            status = Verdict::Error;
            a.error = Some(error);
        }
        Some(Ok(judged)) => {
            status = judged.status;
            note = Some(judged.summary.clone());
            report = Some(judged);
        }
    }
    let notes: Vec<String> = [a.check.note.take(), unit_note, note]
        .into_iter()
        .flatten()
        .collect();
    a.check.note = (!notes.is_empty()).then(|| notes.join("; "));
    SignalResult {
        check: a.check,
        observed: a.observed,
        status,
        error: a.error,
        profile: report,
        counter_unit,
    }
}

/// Whether a vcpu-busy answer's counter is in milliseconds (decided from this VM's own
/// series), and the unit to report (none for other signals, or without facts).
fn counter_unit(a: &Answered, ctx: &evaluate::Context) -> (bool, Option<CounterUnit>) {
    if a.check.signal != "vcpu-busy" {
        return (false, None);
    }
    let in_millis =
        evaluate::vcpu_counter_in_millis(a.observed, a.facts.and_then(|f| f.peak), ctx.vmi_age);
    let reported = (a.error.is_none() && a.facts.is_some()).then_some(if in_millis {
        CounterUnit::Milliseconds
    } else {
        CounterUnit::Seconds
    });
    (in_millis, reported)
}

/// A profiled answer judged by its profile over its group's range: None when it has no
/// profile, no range, or a verdict a profile cannot mend (absent, stale and failed series
/// keep theirs); Err with the range query's error.
fn judge_by_profile(
    a: &Answered,
    status: Verdict,
    ranges: &ProfileRanges,
    in_millis: bool,
    fits: &mut profile::FitCache,
) -> Option<Result<profile::ProfileReport, String>> {
    let (Some(profiled), Some(group)) = (a.check.profile, a.check.group.as_ref()) else {
        return None;
    };
    if !matches!(status, Verdict::Pass | Verdict::Below | Verdict::TooYoung) {
        return None;
    }
    let range = ranges.get(group)?;
    if let Some(error) = &range.error {
        return Some(Err(error.clone()));
    }
    let mut samples = range.samples.get(&a.vm_name).cloned().unwrap_or_default();
    if in_millis {
        samples.iter_mut().for_each(|(_, v)| *v /= 1000.0);
    }
    Some(Ok(profile::judge_profile(
        &profiled,
        &samples,
        &range.spec,
        a.vmi_created,
        fits,
    )))
}

/// The unit a VM's vCPU counter was read in (`counter_unit` in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterUnit {
    Seconds,
    Milliseconds,
}

/// Text from the cluster or Prometheus made safe for a terminal: control characters
/// escaped, one line, at most [`UNTRUSTED_MAX_CHARS`] characters. The one place the text
/// report renders such text (to be replaced by the shared renderer when it lands).
pub fn untrusted(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == UNTRUSTED_MAX_CHARS {
            out.push('…');
            break;
        }
        if c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Longest untrusted text the report shows in one place.
const UNTRUSTED_MAX_CHARS: usize = 400;

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalResult {
    #[serde(flatten)]
    pub check: Check,
    pub observed: Option<f64>,
    pub status: Verdict,
    /// Prometheus' message when it rejected the query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How a profiled signal followed its load profile, phase by phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::ProfileReport>,
    /// vcpu-busy: the unit this VM's vCPU counter counts in, as decided from its own series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_unit: Option<CounterUnit>,
}

/// One VM's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct VmResult {
    pub target: Target,
    pub signals: Vec<SignalResult>,
}

impl VmResult {
    pub fn missing(&self) -> impl Iterator<Item = &SignalResult> {
        self.signals.iter().filter(|s| s.status.is_missing())
    }
}

/// Counts over all results: (expected signals, passed, missing, not expected).
pub fn tally(results: &[VmResult]) -> (usize, usize, usize, usize) {
    let all = results.iter().flat_map(|r| &r.signals);
    let (mut expected, mut passed, mut missing, mut skipped) = (0, 0, 0, 0);
    for s in all {
        match s.status {
            Verdict::NotExpected => skipped += 1,
            Verdict::Pass => {
                expected += 1;
                passed += 1;
            }
            _ => {
                expected += 1;
                missing += 1;
            }
        }
    }
    (expected, passed, missing, skipped)
}

fn threshold_text(s: &SignalResult) -> String {
    if let Some(profiled) = &s.check.profile {
        return format!("{} profile", profiled.profile.shape());
    }
    match s.check.threshold {
        Some(t) => format!(">= {}", s.check.unit.format(t)),
        None => "-".into(),
    }
}

fn observed_text(s: &SignalResult) -> String {
    s.observed
        .map_or_else(|| "-".into(), |v| s.check.unit.format(v))
}

/// The human table: one row per VM and signal, then notes and a summary line.
pub fn text_report(
    results: &[VmResult],
    prometheus: &str,
    window: Window,
    show_queries: bool,
) -> String {
    const HEADER: [&str; 7] = [
        "VM",
        "WORKLOAD",
        "SIGNAL",
        "OBSERVED",
        "THRESHOLD",
        "RESULT",
        "QUERY",
    ];
    let mut rows: Vec<[String; 7]> = Vec::new();
    let mut notes = Vec::new();
    for r in results {
        vm_rows(r, &mut rows, &mut notes);
    }
    // The query column only on request: it is long and the JSON carries it anyway.
    let shown = if show_queries {
        HEADER.len()
    } else {
        HEADER.len() - 1
    };
    let rows: Vec<&[String]> = rows.iter().map(|r| &r[..shown]).collect();
    let mut out = crate::table::columns(&HEADER[..shown], &rows, "");
    for note in notes {
        out.push_str(&format!("note: {note}\n"));
    }
    let (expected, passed, missing, skipped) = tally(results);
    out.push_str(&format!(
        "{passed} of {expected} expected signal(s) present, {missing} missing{} ({} VM(s), window {window}, Prometheus: {prometheus}){}.\n",
        if skipped > 0 { format!(", {skipped} not expected in this window") } else { String::new() },
        results.len(),
        if expected == 0 { ": nothing verified" } else { "" },
        prometheus = untrusted(prometheus),
    ));
    out
}

/// One VM's rows of the table (one per signal, or one saying it has none) and its notes.
fn vm_rows(r: &VmResult, rows: &mut Vec<[String; 7]>, notes: &mut Vec<String>) {
    let t = &r.target;
    let workload = match &t.facts.role {
        Some(role) => format!("{}/{role}", t.facts.workload),
        None => t.facts.workload.clone(),
    };
    let workload = untrusted(&workload);
    let vm = untrusted(&format!("{}/{}", t.facts.namespace, t.facts.name));
    if let Some(note) = &t.setup_note {
        notes.push(format!("{vm}: {}", untrusted(note)));
    }
    if r.signals.is_empty() {
        rows.push([
            vm.clone(),
            workload.clone(),
            "-".into(),
            "-".into(),
            "-".into(),
            "no signals".into(),
            "-".into(),
        ]);
        notes.push(format!(
            "{vm}: workload {} declares no signals",
            untrusted(&format!("{:?}", t.facts.workload))
        ));
    }
    for s in &r.signals {
        rows.push([
            vm.clone(),
            workload.clone(),
            s.check.signal.clone(),
            observed_text(s),
            threshold_text(s),
            s.status.as_str().to_uppercase(),
            untrusted(&s.check.query),
        ]);
        if let Some(note) = &s.check.note {
            notes.push(format!("{vm} {}: {}", s.check.signal, untrusted(note)));
        }
        if let Some(error) = &s.error {
            notes.push(format!("{vm} {}: {}", s.check.signal, untrusted(error)));
        }
        if let Some(report) = &s.profile {
            notes.extend(profile_notes(&vm, s, report));
        }
    }
}

/// The phases a profiled signal missed (the first few), for the notes under the table.
fn profile_notes(vm: &str, s: &SignalResult, report: &profile::ProfileReport) -> Vec<String> {
    const SHOWN: usize = 3;
    let off: Vec<&profile::PhaseReport> = report
        .phases
        .iter()
        .filter(|p| {
            matches!(
                p.status,
                profile::PhaseStatus::Below | profile::PhaseStatus::Above
            )
        })
        .collect();
    let unit = s.check.unit;
    let mut out: Vec<String> = off
        .iter()
        .take(SHOWN)
        .map(|p| {
            let bound = match p.status {
                profile::PhaseStatus::Below => format!(">= {}", unit.format(p.min.unwrap_or(0.0))),
                _ => format!("<= {}", unit.format(p.max)),
            };
            format!(
                "{vm} {}: phase {} to {} at level {}: observed {}, expected {bound}",
                s.check.signal,
                p.start,
                p.end,
                p.level,
                p.observed.map_or("-".into(), |v| unit.format(v)),
            )
        })
        .collect();
    if off.len() > SHOWN {
        out.push(format!(
            "{vm} {}: {} more phase(s) off the profile (see --output json)",
            s.check.signal,
            off.len() - SHOWN
        ));
    }
    out
}

/// The JSON document (`--output json`, see docs/output-json.md).
pub fn json_report(
    namespace: Option<&str>,
    run_id_filter: Option<&str>,
    results: &[VmResult],
    prometheus: &str,
    window: Window,
    rounds: u32,
) -> Value {
    let (expected, passed, missing, skipped) = tally(results);
    let vms: Vec<Value> = results
        .iter()
        .map(|r| {
            let t = &r.target;
            json!({
                "namespace": t.facts.namespace,
                "name": t.facts.name,
                "workload": t.facts.workload,
                "role": t.facts.role,
                "run_id": t.run_id,
                "vmi_phase": t.vmi_phase,
                "params_source": t.params_source,
                "note": t.setup_note,
                "signals": r.signals,
            })
        })
        .collect();
    json!({
        "format_version": 1,
        "command": "verify",
        "namespace": namespace,
        "run_id_filter": run_id_filter,
        "prometheus": prometheus,
        "window": window.to_string(),
        "window_seconds": window.as_secs(),
        "rounds": rounds,
        "passed": failure_message(results, window).is_none(),
        "summary": {
            "vms": results.len(),
            "expected": expected,
            "present": passed,
            "missing": missing,
            "not_expected": skipped,
        },
        "vms": vms,
        // The VMs `--run-id`'s run recorded that are not in scope (the command fills it).
        "absent": [],
    })
}

/// Why verify fails, in one line; None when it passes. Exit code, JSON `passed` and the
/// text summary all follow this: a missing signal fails, and so does a round in which no
/// signal was expected (nothing was verified).
pub fn failure_message(results: &[VmResult], window: Window) -> Option<String> {
    if let Some(message) = missing_message(results) {
        return Some(message);
    }
    let (expected, _, _, skipped) = tally(results);
    (expected == 0).then(|| {
        format!(
            "no signal is expected in a {window} window ({skipped} not expected, see the notes): \
             nothing was verified; use a longer --window"
        )
    })
}

/// The one-line failure naming the first missing VM and signal (and how many more).
pub fn missing_message(results: &[VmResult]) -> Option<String> {
    let missing: Vec<(&VmResult, &SignalResult)> = results
        .iter()
        .flat_map(|r| r.missing().map(move |s| (r, s)))
        .collect();
    let (r, s) = missing.first()?;
    let what = match s.status {
        Verdict::NoData => "no data".to_string(),
        Verdict::Unverifiable => s.error.clone().unwrap_or_default(),
        Verdict::Stale => "stale: no current sample".to_string(),
        Verdict::NotRunning => s.check.note.clone().unwrap_or_else(|| "not running".into()),
        Verdict::TooYoung => format!(
            "too young for the window: observed {}, expected {}",
            observed_text(s),
            threshold_text(s)
        ),
        Verdict::Error => format!("query failed: {}", s.error.as_deref().unwrap_or("error")),
        Verdict::OffProfile => format!(
            "off its load profile: {}",
            s.profile.as_ref().map_or("", |p| p.summary.as_str())
        ),
        _ => format!(
            "observed {}, expected {}",
            observed_text(s),
            threshold_text(s)
        ),
    };
    let more = match missing.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Some(format!(
        "expected signal missing: VM {}/{} signal {} ({what}){more}",
        r.target.facts.namespace, r.target.facts.name, s.check.signal
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(workload: &str, annotations: serde_json::Value) -> ListedVm {
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {
                "name": format!("virtwork-{workload}-0"), "namespace": "virtwork",
                "labels": {"app.kubernetes.io/component": workload},
                "annotations": annotations,
            },
        }))
        .unwrap()
    }

    fn signal(query: &str) -> CustomSignal {
        CustomSignal {
            name: "http-rx".into(),
            query: query.into(),
            threshold: 1.0,
            description: None,
        }
    }

    const LOCAL: &str = r#"sum(rate(kubevirt_vmi_network_receive_bytes_total{namespace="{{namespace}}",name="{{name}}"}[{{window}}]))"#;

    #[test]
    fn catalog_vms_are_judged_by_the_local_entry_whose_digest_the_run_recorded() {
        let local = vec![signal(LOCAL)];
        let catalog = LocalCatalog::from([("web".to_string(), Ok(local.clone()))]);
        let recorded = json!({"virtwork/signals-digest": signals_digest(&local)});
        let t = &targets(&[vm("web", recorded)], &[], &catalog)[0];
        assert_eq!(t.facts.custom, local);
        assert_eq!(t.unverifiable, None);

        // Anyone who may patch the VM can change its annotations, never the query verify sends.
        let forged = vec![signal("vector(1e9)")];
        let patched = json!({
            "virtwork/signals-digest": signals_digest(&forged),
            "virtwork/signals": serde_json::to_string(&forged).unwrap(),
        });
        let t = &targets(&[vm("web", patched)], &[], &catalog)[0];
        assert!(t.facts.custom.is_empty());
        assert!(
            t.unverifiable.as_deref().unwrap().contains("differs"),
            "{t:?}"
        );

        let t = &targets(&[vm("web", json!({}))], &[], &catalog)[0];
        assert!(
            t.unverifiable
                .as_deref()
                .unwrap()
                .contains("records no virtwork/signals-digest")
        );
        let t = &targets(&[vm("shop", json!({}))], &[], &catalog)[0];
        assert!(
            t.unverifiable
                .as_deref()
                .unwrap()
                .contains("neither a built-in")
        );
        let missing = LocalCatalog::from([("web".to_string(), Err("not found".to_string()))]);
        let t = &targets(&[vm("web", json!({}))], &[], &missing)[0];
        assert!(
            t.unverifiable
                .as_deref()
                .unwrap()
                .contains("local catalog entry \"web\": not found")
        );
    }

    #[test]
    fn a_recorded_profile_is_parsed_once_and_an_unusable_one_is_reported() {
        let stepped = json!({"virtwork/signal-params": r#"{"profile":"step","profile-low":"10","profile-high":"90","profile-period":"60s","profile-duty":"50"}"#});
        let t = &targets(&[vm("cpu", stepped)], &[], &LocalCatalog::new())[0];
        assert_eq!(t.facts.profile.unwrap().shape(), "step");
        assert!(t.unverifiable.is_none());
        // Edited on the cluster into something no run writes: reported, never judged as steady.
        let broken = json!({"virtwork/signal-params": r#"{"profile":"step","profile-low":"90","profile-high":"10","profile-period":"60s","profile-duty":"50"}"#});
        let t = &targets(&[vm("cpu", broken)], &[], &LocalCatalog::new())[0];
        assert!(t.facts.profile.is_none());
        let why = t.unverifiable.as_deref().unwrap();
        assert!(why.contains("must be below the high level"), "{why}");
    }

    #[test]
    fn a_vm_whose_run_recorded_its_setup_is_judged_by_the_record_not_its_annotation() {
        // Patched on the cluster: no load profile, a 1% load, another workload label.
        let patched: ListedVm = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {
                "name": "virtwork-cpu-0", "namespace": "virtwork",
                "labels": {"app.kubernetes.io/component": "tps", "virtwork/run-id": "r1"},
                "annotations": {"virtwork/signal-params": r#"{"cpu-load-percent":"1"}"#},
            },
        }))
        .unwrap();
        let recorded = crate::audit::query::RecordedVm {
            workload: "cpu".into(),
            role: None,
            memory: "2Gi".into(),
            signal_params: Some(
                r#"{"cpu-load-percent":"100","profile":"step","profile-low":"10","profile-high":"90","profile-period":"60s","profile-duty":"50"}"#.into(),
            ),
        };
        let records = Records::Read {
            path: "/db".into(),
            runs: [(
                "r1".to_string(),
                Some(
                    [(
                        ("virtwork".to_string(), "virtwork-cpu-0".to_string()),
                        recorded,
                    )]
                    .into(),
                ),
            )]
            .into(),
        };
        let t = &targets_recorded(
            std::slice::from_ref(&patched),
            &[],
            &LocalCatalog::new(),
            &records,
        )[0];
        assert_eq!(t.params_source, ParamsSource::AuditDb);
        assert_eq!(t.facts.workload, "cpu");
        assert_eq!(
            t.facts.profile.unwrap().shape(),
            "step",
            "the recorded profile"
        );
        let vcpu = checks(&t.facts, Window::from_secs(300).unwrap())
            .into_iter()
            .find(|c| c.signal == "vcpu-busy")
            .unwrap();
        assert!(
            vcpu.profile.is_some(),
            "judged by the recorded profile: {vcpu:?}"
        );
        assert!(
            t.params_warning
                .as_deref()
                .unwrap()
                .contains("workload label \"tps\"")
        );
        // Without the record the same VM is judged by what it says, and says why.
        let t = &targets(&[patched], &[], &LocalCatalog::new())[0];
        assert_eq!(t.params_source, ParamsSource::Annotation);
        assert_eq!(t.params_fallback, Some(Fallback::NoDatabase));
        assert_eq!(t.facts.workload, "tps");
    }

    #[test]
    fn built_in_vms_ignore_any_signals_recorded_on_the_cluster() {
        let forged = vec![signal("vector(1)")];
        let patched = json!({
            "virtwork/signals-digest": signals_digest(&forged),
            "virtwork/signals": serde_json::to_string(&forged).unwrap(),
        });
        let t = &targets(&[vm("cpu", patched)], &[], &LocalCatalog::new())[0];
        assert!(
            t.facts.custom.is_empty() && t.unverifiable.is_none(),
            "{t:?}"
        );
        assert_eq!(
            catalog_names(&[vm("cpu", json!({})), vm("web", json!({}))]),
            BTreeSet::from(["web".to_string()])
        );
        let t = &targets(&[vm("web", json!({}))], &[], &LocalCatalog::new())[0];
        let unverifiable = unverifiable_result(t, "why");
        assert_eq!(unverifiable.check.signal, "catalog-signals");
        assert!(unverifiable.status.is_missing());
    }

    const NOW: f64 = 1_800_000_000.0;

    /// A vcpu-busy answer of VM `vm` at `observed` (per vCPU), its VMI 600 s old, its busiest
    /// vCPU's counter at `peak`.
    fn answered(vm: &str, observed: f64, peak: f64) -> (usize, Answered) {
        let facts = SeriesFacts {
            age: Some(0.0),
            samples: Some(11.0),
            span: Some(600.0),
            relabelled: None,
            peak: Some(peak),
            before: None,
        };
        (
            0,
            Answered {
                check: Check {
                    signal: "vcpu-busy".into(),
                    description: String::new(),
                    query: "q".into(),
                    threshold: Some(0.5),
                    unit: Unit::VcpuFraction,
                    note: None,
                    series: Some("s".into()),
                    relabelled: None,
                    group: None,
                    profile: None,
                },
                observed: Some(observed),
                facts: Some(facts),
                error: None,
                vm_name: vm.into(),
                vmi_created: Some(NOW - 600.0),
            },
        )
    }

    fn round() -> Round {
        Round {
            window: Window::from_secs(60).unwrap(),
            interval: Some(30.0),
            now: NOW,
        }
    }

    #[test]
    fn the_vcpu_counter_unit_is_decided_per_vm() {
        // An idle VM (2% busy) reads 20 "seconds" per second from a millisecond counter.
        let judged = judge_answers(
            vec![answered("a", 20.0, 12_000.0)],
            round(),
            &ProfileRanges::new(),
        );
        let r = &judged[0].1;
        assert_eq!(r.status, Verdict::Below);
        assert!((r.observed.unwrap() - 0.02).abs() < 1e-9);
        assert!(r.check.note.as_deref().unwrap().contains("milliseconds"));
        assert_eq!(r.counter_unit, Some(CounterUnit::Milliseconds));
        // During a virt-handler rollout: one VM in milliseconds, its neighbours in seconds.
        // The neighbours keep their values (a busy 0.4 must not read 0.0004).
        let judged = judge_answers(
            vec![
                answered("ms", 970.0, 580_000.0),
                answered("busy", 0.97, 580.0),
                answered("idle", 0.4, 240.0),
            ],
            round(),
            &ProfileRanges::new(),
        );
        let got: Vec<(Verdict, Option<CounterUnit>, f64)> = judged
            .iter()
            .map(|(_, r)| (r.status, r.counter_unit, r.observed.unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Verdict::Pass, Some(CounterUnit::Milliseconds), 0.97),
                (Verdict::Pass, Some(CounterUnit::Seconds), 0.97),
                (Verdict::Below, Some(CounterUnit::Seconds), 0.4),
            ]
        );
        // A nearly idle VM on a millisecond counter reads 1.0 "seconds" per second, which
        // would pass; its counter's total over the VMI's life shows the unit.
        let judged = judge_answers(
            vec![answered("quiet", 1.0, 9_000.0)],
            round(),
            &ProfileRanges::new(),
        );
        assert_eq!(judged[0].1.status, Verdict::Below, "{:?}", judged[0].1);
        let doc = serde_json::to_value(&judged[0].1).unwrap();
        assert_eq!(doc["counter_unit"], "milliseconds");
    }

    #[test]
    fn windows_shorter_than_two_scrapes_are_refused_with_the_interval() {
        assert_eq!(
            window_too_short(Some(30.0), Window::from_secs(30).unwrap()),
            Some((30.0, 54))
        );
        assert_eq!(
            window_too_short(Some(30.0), Window::from_secs(60).unwrap()),
            None
        );
        assert_eq!(window_too_short(None, Window::from_secs(1).unwrap()), None);
    }

    #[test]
    fn vms_without_a_running_vmi_fail_as_not_running() {
        let catalog = LocalCatalog::new();
        let vmi = |phase: &str| -> ListedVmi {
            serde_json::from_value(json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": "virtwork-cpu-0", "namespace": "virtwork",
                             "creationTimestamp": "2026-12-02T10:00:00Z"},
                "status": {"phase": phase},
            }))
            .unwrap()
        };
        let vms = [vm("cpu", json!({}))];
        // The VMI's creation bounds a load profile's clock: kept through the slim listing.
        let running = &targets(&vms, &[vmi("Running")], &catalog)[0];
        assert_eq!(running.vmi_created, Some(1_796_205_600.0));
        let stopped = &targets(&vms, &[], &catalog)[0];
        assert_eq!(
            not_running(stopped).as_deref(),
            Some("it has no VMI (stopped)")
        );
        let results = not_running_results(stopped, Window::DEFAULT, "it has no VMI (stopped)");
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].status, Verdict::NotRunning);
        assert!(results[0].status.is_missing());
        let pending = &targets(&vms, &[vmi("Scheduling")], &catalog)[0];
        assert_eq!(
            not_running(pending).as_deref(),
            Some("its VMI is Scheduling, not Running")
        );
        assert_eq!(
            not_running(&targets(&vms, &[vmi("Running")], &catalog)[0]),
            None
        );
    }

    #[test]
    fn nothing_expected_is_a_failure_in_every_output() {
        let w = Window::from_secs(10).unwrap();
        let t = targets(&[vm("network", json!({}))], &[], &LocalCatalog::new()).remove(0);
        let signals = checks(&t.facts, w)
            .into_iter()
            .map(|check| SignalResult {
                status: evaluate::judge(&check, None),
                check,
                observed: None,
                error: None,
                profile: None,
                counter_unit: None,
            })
            .collect();
        let results = vec![VmResult { target: t, signals }];
        let failure = failure_message(&results, w).unwrap();
        assert!(failure.contains("nothing was verified"), "{failure}");
        let doc = json_report(None, None, &results, "p", w, 1);
        assert_eq!(doc["passed"], false);
        let text = text_report(&results, "p", w, false);
        assert!(text.trim_end().ends_with(": nothing verified."), "{text}");
        assert!(!text.lines().next().unwrap().contains("QUERY"));
        assert!(
            text_report(&results, "p", w, true)
                .lines()
                .next()
                .unwrap()
                .ends_with("QUERY")
        );
    }

    #[test]
    fn untrusted_text_stays_on_one_short_line_without_escapes() {
        assert_eq!(untrusted("vm\x1b[31mred\n"), "vm\\u{1b}[31mred\\n");
        assert_eq!(untrusted("a\u{202e}b"), "a\\u{202e}b");
        let long = "x".repeat(1000);
        assert_eq!(untrusted(&long).chars().count(), UNTRUSTED_MAX_CHARS + 1);
        assert_eq!(untrusted("virtwork/vm-0"), "virtwork/vm-0");
    }
}
