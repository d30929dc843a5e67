//! Human summaries, JSON result documents and progress rendering for every command.
//!
//! `virtwork run` (real and `--dry-run=server`): [`RunSummary`] holds the facts of a run;
//! [`run_summary_text`] renders the human summary and [`run_summary_json`] the documented
//! `--output json` document (docs/output-json.md). [`RunProgress`] shows progress of both
//! phases: a live indicatif view (creating: n/N, rate, ETA, VMs starting; waiting: VMs per
//! phase, ready count, the slowest VMs) when stderr is a terminal and logs are text,
//! otherwise a progress line at INFO every few seconds. Rendering is pure; only
//! `RunProgress` writes (to stderr).

// `cleanup` and `status` rendering lives in submodules (report/cleanup.rs, report/status.rs).
pub mod churn;
pub mod cleanup;
pub mod status;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::Outcome;
use crate::k8s::ready::{ReadinessObserver, ReadinessTracker, Transition, is_stuck_status};
use crate::model::KindCounts;
use crate::terminal::{CELL_CHARS, safe};

/// Version of the `--output json` run document; bumped only on incompatible changes.
pub const RUN_JSON_FORMAT_VERSION: u32 = 1;

/// One VM's state at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSummary {
    pub name: String,
    pub workload: String,
    pub role: Option<String>,
    /// Whether the VM object exists (created by this run).
    pub created: bool,
    /// Last VMI phase seen, when readiness was watched.
    pub phase: Option<String>,
    /// Last VM printableStatus seen (what `kubectl get vm` shows), when readiness was watched.
    pub status: Option<String>,
    /// Why the VM is in a stuck status (the condition or DataVolume message).
    pub message: Option<String>,
    /// When the API server accepted the VM.
    pub created_at: Option<jiff::Timestamp>,
    /// When the readiness watch first saw its VMI scheduled (phase Scheduled or Running).
    pub scheduled_at: Option<jiff::Timestamp>,
    /// When the readiness watch first saw its VMI Running.
    pub running_at: Option<jiff::Timestamp>,
    pub ready_at: Option<jiff::Timestamp>,
}

impl VmSummary {
    /// From creation to meeting the ready condition.
    pub fn time_to_ready(&self) -> Option<Duration> {
        since(self.created_at?, self.ready_at?)
    }
}

fn since(from: jiff::Timestamp, to: jiff::Timestamp) -> Option<Duration> {
    Duration::try_from(to.duration_since(from)).ok()
}

/// Time-to-ready over the VMs that became ready, and the rate achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadyStats {
    pub count: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// VMs ready per minute, from the first VM created to the last one ready.
    pub vms_per_minute: f64,
}

/// Nearest-rank percentiles of the VMs' time to ready; `None` when no VM became ready.
pub fn ready_stats(vms: &[VmSummary]) -> Option<ReadyStats> {
    let mut times: Vec<Duration> = vms.iter().filter_map(VmSummary::time_to_ready).collect();
    if times.is_empty() {
        return None;
    }
    times.sort();
    let rank = |p: usize| times[(p * times.len()).div_ceil(100).clamp(1, times.len()) - 1];
    let first_created = vms.iter().filter_map(|v| v.created_at).min()?;
    let last_ready = vms.iter().filter_map(|v| v.ready_at).max()?;
    let span = since(first_created, last_ready).unwrap_or_default();
    // A span under a millisecond (everything at once) would divide by ~0.
    let minutes = span.as_secs_f64().max(0.001) / 60.0;
    Some(ReadyStats {
        count: times.len(),
        p50: rank(50),
        p90: rank(90),
        p99: rank(99),
        max: *times.last().expect("not empty"),
        vms_per_minute: times.len() as f64 / minutes,
    })
}

/// The facts of one `virtwork run` against a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub status: Outcome,
    pub run_id: String,
    pub namespace: String,
    /// `--dry-run=server`: objects were validated by the server and not persisted.
    pub server_dry_run: bool,
    pub container_image: String,
    /// `running`, `ready`, `agent-connected` or `workload`.
    pub ready_condition: String,
    /// Objects the plan holds; `dvs` counts the DataVolumes the VMs' templates create (CDI
    /// creates them, not virtwork); `vmis` and `pvcs` stay zero.
    pub planned: KindCounts,
    /// What exists on the cluster because of this run (or would, for a server dry run).
    pub created: KindCounts,
    pub create_duration: Duration,
    /// `None` when readiness was not waited for (`--no-wait`, server dry run, early stop).
    pub wait_duration: Option<Duration>,
    pub vms_ready: usize,
    /// VMs in plan order.
    pub vms: Vec<VmSummary>,
    /// API requests admitted by the client rate limiter during the whole run.
    pub api_requests: u64,
    /// `--max-starting` and `--ramp` as given (unpaced when both are `None`).
    pub pacing: crate::model::Pacing,
    /// The error that ended the run, if any.
    pub error: Option<String>,
    /// Where the run was recorded (`None`: `--no-audit`), so the history can be found again.
    pub audit_db: Option<String>,
}

impl RunSummary {
    /// Whether the run left anything on the cluster (a server dry run or a refused
    /// preflight created nothing, so there is nothing to clean up).
    pub fn created_anything(&self) -> bool {
        !self.server_dry_run
            && self.created.vms + self.created.secrets + self.created.services + self.created.dvs
                > 0
    }

    /// The command that removes everything this run created.
    pub fn cleanup_command(&self) -> String {
        format!(
            "virtwork cleanup --namespace {} --run-id {}",
            self.namespace, self.run_id
        )
    }
}

/// A duration as people read it: `850ms`, `42s`, `9m58s`, `1h2m`.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) if s == 0 => format!("{m}m"),
        (0, _) => format!("{m}m{s}s"),
        _ if m == 0 => format!("{h}h"),
        _ => format!("{h}h{m}m"),
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Longest phase or state from the cluster shown in a progress line, in characters.
const PHASE_CHARS: usize = 64;

/// `1 VM`, `2 VMs`: the summary reads as English for any count.
fn count_of(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn counts_line(c: &KindCounts) -> String {
    let mut line = format!(
        "{}, {}, {}",
        count_of(c.vms, "VM"),
        count_of(c.secrets, "Secret"),
        count_of(c.services, "Service")
    );
    if c.dvs > 0 {
        line.push_str(&format!(
            ", {} (created by the VMs' templates)",
            count_of(c.dvs, "DataVolume")
        ));
    }
    line
}

/// "at most 50 starting, ramp 10m"; `None` when creation is not paced.
pub fn pacing_line(p: &crate::model::Pacing) -> Option<String> {
    let parts: Vec<String> = p
        .max_starting
        .map(|n| format!("at most {n} starting"))
        .into_iter()
        .chain(p.ramp.map(|r| format!("ramp {r}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The human summary printed on stdout at the end of a run.
pub fn run_summary_text(s: &RunSummary) -> String {
    let mut out = String::new();
    let headline = match (s.server_dry_run, s.status) {
        (true, Outcome::Success) => {
            "Server dry run complete: the API server accepted every object (dryRun=All); nothing was persisted."
        }
        // --no-wait: created, but nobody saw the VMs come up.
        (false, Outcome::Success) if s.wait_duration.is_none() => {
            "Deployment created (--no-wait: readiness not awaited)."
        }
        (false, Outcome::Success) => "Deployment complete.",
        (_, Outcome::Failed) => "Deployment FAILED.",
        (_, Outcome::Cancelled) => "Deployment interrupted.",
    };
    out.push_str(headline);
    out.push('\n');
    let mut row = |label: &str, value: String| {
        out.push_str(&format!("  {label:<11}{value}\n"));
    };
    row("Run ID:", s.run_id.clone());
    row("Namespace:", s.namespace.clone());
    row("Image:", s.container_image.clone());
    if s.server_dry_run {
        row("Validated:", counts_line(&s.planned));
    } else {
        row("Created:", counts_line(&s.created));
        if s.created != s.planned {
            row("Planned:", counts_line(&s.planned));
        }
    }
    if let Some(line) = pacing_line(&s.pacing) {
        row("Pacing:", line);
    }
    row("Create:", seconds(s.create_duration));
    if let Some(wait) = s.wait_duration {
        row(
            "Wait:",
            format!(
                "{} ({}/{} {})",
                seconds(wait),
                s.vms_ready,
                count_of(s.planned.vms, "VM"),
                s.ready_condition
            ),
        );
    }
    if let Some(stats) = ready_stats(&s.vms) {
        row(
            "To ready:",
            format!(
                "p50 {}, p90 {}, p99 {}, max {} ({})",
                seconds(stats.p50),
                seconds(stats.p90),
                seconds(stats.p99),
                seconds(stats.max),
                count_of(stats.count, "VM")
            ),
        );
        // One VM has no rate: the span from first created to last ready is its own time.
        if stats.count > 1 {
            row(
                "Rate:",
                format!("{:.1} VMs/minute ready", stats.vms_per_minute),
            );
        }
    }
    if let Some(error) = &s.error {
        row("Error:", error.clone());
    }
    let audit_db = s.audit_db.as_deref().map(|db| safe(db, CELL_CHARS));
    audit_db.into_iter().for_each(|db| row("Audit DB:", db));
    let created_anything = s.created.vms + s.created.secrets + s.created.services > 0;
    if !s.server_dry_run && created_anything {
        row("Undo:", s.cleanup_command());
    }
    out
}

/// The `--output json` document for a run (docs/output-json.md, "virtwork run") as a value,
/// for callers that inspect it; the command writes [`run_summary_document`] instead.
pub fn run_summary_json(s: &RunSummary) -> Value {
    serde_json::to_value(run_summary_document(s)).expect("the run summary is always serialisable")
}

/// The `--output json` document for a run, serialised straight from the summary: a fleet of
/// 10,000 VMs as a `serde_json::Value` tree was the run's peak memory (40 MB of maps, one
/// per VM). Fields are declared in name order, the order the value's sorted maps print.
pub fn run_summary_document(s: &RunSummary) -> impl serde::Serialize + '_ {
    let stats = ready_stats(&s.vms);
    RunDoc {
        api_requests: s.api_requests,
        audit_db: s.audit_db.as_deref(),
        cleanup_command: s.created_anything().then(|| s.cleanup_command()),
        command: "run",
        container_image: &s.container_image,
        created: CountsDoc::of(&s.created),
        dry_run: s.server_dry_run.then_some("server"),
        durations_ms: DurationsDoc {
            create: s.create_duration.as_millis() as u64,
            wait: s.wait_duration.map(|d| d.as_millis() as u64),
        },
        error: s.error.as_deref(),
        format_version: RUN_JSON_FORMAT_VERSION,
        namespace: &s.namespace,
        pacing: PacingDoc {
            max_starting: s.pacing.max_starting.map(|n| n.get()),
            ramp: s.pacing.ramp.map(|r| r.to_string()),
        },
        planned: CountsDoc::of(&s.planned),
        ready_condition: &s.ready_condition,
        run_id: &s.run_id,
        status: s.status.as_str(),
        time_to_ready_ms: stats.as_ref().map(|r| PercentilesDoc {
            max: r.max.as_millis() as u64,
            p50: r.p50.as_millis() as u64,
            p90: r.p90.as_millis() as u64,
            p99: r.p99.as_millis() as u64,
        }),
        vms: VmDocs(&s.vms),
        vms_per_minute: stats.map(|r| (r.vms_per_minute * 10.0).round() / 10.0),
        vms_ready: s.vms_ready,
    }
}

#[derive(serde::Serialize)]
struct RunDoc<'a> {
    api_requests: u64,
    audit_db: Option<&'a str>,
    cleanup_command: Option<String>,
    command: &'static str,
    container_image: &'a str,
    created: CountsDoc,
    dry_run: Option<&'static str>,
    durations_ms: DurationsDoc,
    error: Option<&'a str>,
    format_version: u32,
    namespace: &'a str,
    pacing: PacingDoc,
    planned: CountsDoc,
    ready_condition: &'a str,
    run_id: &'a str,
    status: &'static str,
    time_to_ready_ms: Option<PercentilesDoc>,
    vms: VmDocs<'a>,
    vms_per_minute: Option<f64>,
    vms_ready: usize,
}

#[derive(serde::Serialize)]
struct CountsDoc {
    data_volumes: usize,
    secrets: usize,
    services: usize,
    vms: usize,
}

impl CountsDoc {
    fn of(c: &KindCounts) -> Self {
        CountsDoc {
            data_volumes: c.dvs,
            secrets: c.secrets,
            services: c.services,
            vms: c.vms,
        }
    }
}

#[derive(serde::Serialize)]
struct DurationsDoc {
    create: u64,
    wait: Option<u64>,
}

#[derive(serde::Serialize)]
struct PacingDoc {
    max_starting: Option<u32>,
    ramp: Option<String>,
}

#[derive(serde::Serialize)]
struct PercentilesDoc {
    max: u64,
    p50: u64,
    p90: u64,
    p99: u64,
}

/// The VMs, each serialised as it is written (no list of documents is built).
struct VmDocs<'a>(&'a [VmSummary]);

impl serde::Serialize for VmDocs<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(VmDoc::of))
    }
}

#[derive(serde::Serialize)]
struct VmDoc<'a> {
    created: bool,
    #[serde(serialize_with = "display")]
    created_at: Option<jiff::Timestamp>,
    message: Option<&'a str>,
    name: &'a str,
    phase: Option<&'a str>,
    ready: bool,
    #[serde(serialize_with = "display")]
    ready_at: Option<jiff::Timestamp>,
    role: Option<&'a str>,
    #[serde(serialize_with = "display")]
    running_at: Option<jiff::Timestamp>,
    #[serde(serialize_with = "display")]
    scheduled_at: Option<jiff::Timestamp>,
    status: Option<&'a str>,
    time_to_ready_ms: Option<u64>,
    workload: &'a str,
}

impl<'a> VmDoc<'a> {
    fn of(vm: &'a VmSummary) -> Self {
        VmDoc {
            created: vm.created,
            created_at: vm.created_at,
            message: vm.message.as_deref(),
            name: &vm.name,
            phase: vm.phase.as_deref(),
            ready: vm.ready_at.is_some(),
            ready_at: vm.ready_at,
            role: vm.role.as_deref(),
            running_at: vm.running_at,
            scheduled_at: vm.scheduled_at,
            status: vm.status.as_deref(),
            time_to_ready_ms: vm.time_to_ready().map(|d| d.as_millis() as u64),
            workload: &vm.workload,
        }
    }
}

/// A timestamp as its text (`2026-01-01T00:00:00Z`), or null.
fn display<S: serde::Serializer>(
    time: &Option<jiff::Timestamp>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => serializer.collect_str(time),
        None => serializer.serialize_none(),
    }
}

/// How often the live view is redrawn from the shared state.
const LIVE_REFRESH: Duration = Duration::from_millis(250);
/// How often a progress line is logged when stderr is not a terminal.
pub const PROGRESS_LOG_INTERVAL: Duration = Duration::from_secs(5);
/// How many of the slowest VMs the view names.
const SLOWEST_SHOWN: usize = 3;
/// How many VMs entering a stuck status get a warning line each (the rest show in the
/// progress counts and the final error), so a fleet with a bad image does not flood stderr.
const STUCK_WARNINGS: usize = 5;

/// Run progress on stderr, for both phases (creating, then waiting for readiness). On a
/// terminal: one live indicatif view redrawn a few times a second (log lines print above
/// it, see `logging`). Otherwise: a phase change or a progress line every
/// [`PROGRESS_LOG_INTERVAL`] at INFO, never a line per VM (those are DEBUG, `--verbose`).
/// Updates are O(1) per event; the view is computed from the shared state on each tick.
pub struct RunProgress {
    state: Arc<Mutex<ProgressState>>,
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct ProgressState {
    total: usize,
    started: Instant,
    created: usize,
    creation_done: Option<Instant>,
    ready: usize,
    phases: BTreeMap<String, usize>,
    /// Created VMs not yet ready: since when, and their last phase.
    pending: HashMap<String, (Instant, String)>,
    /// VMs the watch saw ready before their creation was reported (the two race).
    ready_early: std::collections::HashSet<String>,
    /// Warnings printed so far about VMs entering a stuck status.
    stuck_warnings: usize,
    max_starting: Option<u32>,
}

impl ProgressState {
    fn creating_line(&self) -> String {
        let elapsed = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = self.created as f64 / elapsed;
        let left = self.total.saturating_sub(self.created);
        let eta = if rate > 0.0 {
            human_duration(Duration::from_secs_f64(left as f64 / rate))
        } else {
            "-".to_string()
        };
        let mut line = format!(
            "VMs created, {rate:.1}/s, ETA {eta}; {} starting",
            self.pending.len()
        );
        if let Some(max) = self.max_starting {
            line.push_str(&format!(" (at most {max})"));
        }
        line
    }

    fn waiting_line(&self) -> String {
        let mut slowest: Vec<(&String, &(Instant, String))> = self.pending.iter().collect();
        slowest.sort_by_key(|(name, (since, _))| (*since, *name));
        let slowest: Vec<String> = slowest
            .iter()
            .take(SLOWEST_SHOWN)
            .map(|(name, (since, phase))| {
                let phase = safe(phase, PHASE_CHARS);
                format!("{name} {phase} {}", human_duration(since.elapsed()))
            })
            .collect();
        let mut line = format!("VMs ready; {}", phase_counts_line(&self.phases));
        if !slowest.is_empty() {
            line.push_str(&format!("; slowest: {}", slowest.join(", ")));
        }
        line
    }
}

impl RunProgress {
    /// `live`: draw the indicatif view (stderr is a terminal and logs are human-readable).
    /// Must be called inside the tokio runtime (the view refreshes on a timer).
    pub fn new(total_vms: usize, live: bool, max_starting: Option<u32>) -> Self {
        let state = Arc::new(Mutex::new(ProgressState {
            total: total_vms,
            started: Instant::now(),
            created: 0,
            creation_done: None,
            ready: 0,
            phases: BTreeMap::new(),
            pending: HashMap::new(),
            ready_early: Default::default(),
            stuck_warnings: 0,
            max_starting,
        }));
        let bar = live.then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total_vms as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let style = indicatif::ProgressStyle::with_template(
                // wide_msg: the message is cut at the terminal's width instead of wrapping
                // (a wrapped line breaks the redraw into a scroll of copies).
                "{spinner} [{elapsed_precise}] {prefix} {bar:30} {pos}/{len} {wide_msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix("creating");
            bar.enable_steady_tick(Duration::from_millis(200));
            crate::logging::print_above(Some(bar.clone()));
            bar
        });
        let ticker = {
            let state = Arc::clone(&state);
            let bar = bar.clone();
            let every = if bar.is_some() {
                LIVE_REFRESH
            } else {
                PROGRESS_LOG_INTERVAL
            };
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(every);
                interval.tick().await;
                loop {
                    interval.tick().await;
                    let state = state.lock().expect("progress lock");
                    match &bar {
                        Some(bar) => draw(bar, &state),
                        None => log_progress(&state),
                    }
                }
            })
        };
        RunProgress {
            state,
            bar,
            ticker: Some(ticker),
        }
    }

    /// The API server accepted VM `name`.
    pub fn vm_created(&self, name: &str) {
        let mut state = self.state.lock().expect("progress lock");
        state.created += 1;
        if state.ready_early.remove(name) {
            return;
        }
        state
            .pending
            .entry(name.to_string())
            .or_insert_with(|| (Instant::now(), crate::k8s::ready::NO_VMI_PHASE.to_string()));
    }

    /// Creation ended (every VM sent, or stopped); the view turns to readiness.
    pub fn creation_finished(&self, waiting: bool) {
        let mut state = self.state.lock().expect("progress lock");
        state.creation_done = Some(Instant::now());
        // Without a terminal the command logs the phase change itself.
        if let Some(bar) = &self.bar
            && waiting
        {
            bar.set_prefix("ready");
            draw(bar, &state);
        }
    }

    /// Removes the live view (before the summary is printed) and stops the timer.
    pub fn finish(&mut self) {
        if let Some(ticker) = self.ticker.take() {
            ticker.abort();
        }
        if let Some(bar) = &self.bar {
            crate::logging::print_above(None);
            bar.finish_and_clear();
        }
    }
}

impl Drop for RunProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn draw(bar: &indicatif::ProgressBar, state: &ProgressState) {
    if state.creation_done.is_none() {
        bar.set_position(state.created as u64);
        bar.set_message(state.creating_line());
    } else {
        bar.set_position(state.ready as u64);
        bar.set_message(state.waiting_line());
    }
}

fn log_progress(state: &ProgressState) {
    if state.creation_done.is_none() {
        tracing::info!(
            created = state.created,
            total = state.total,
            ready = state.ready,
            "creating: {}/{} {}",
            state.created,
            state.total,
            state.creating_line()
        );
    } else {
        tracing::info!(
            ready = state.ready,
            total = state.total,
            "waiting: {}/{} {}",
            state.ready,
            state.total,
            state.waiting_line()
        );
    }
}

/// "Running 5, Scheduling 3, NoVMI 3": VMs per phase in phase-name order.
pub fn phase_counts_line(counts: &BTreeMap<String, usize>) -> String {
    counts
        .iter()
        .map(|(phase, n)| format!("{} {n}", safe(phase, PHASE_CHARS)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ReadinessObserver for RunProgress {
    fn changed(&mut self, tracker: &ReadinessTracker, transitions: &[Transition]) {
        self.observe(tracker, transitions);
    }
}

impl RunProgress {
    /// Readiness changed (the [`ReadinessObserver`] hook, usable through a shared reference
    /// while creation reports to the same view).
    pub fn observe(&self, tracker: &ReadinessTracker, transitions: &[Transition]) {
        let mut state = self.state.lock().expect("progress lock");
        state.ready = tracker.ready_count();
        state.phases = tracker.phase_counts();
        for t in transitions {
            match t {
                Transition::Phase { vm, from, to } => {
                    if let (Some((_, shown)), Some(now)) =
                        (state.pending.get_mut(vm), tracker.get(vm))
                    {
                        shown.clone_from(&now.shown().to_string());
                    }
                    tracing::debug!(vm_name = %vm, from = %from, phase = %to, "vm phase changed")
                }
                Transition::Status {
                    vm,
                    from,
                    to,
                    message,
                    stuck,
                } => {
                    if let Some((_, shown)) = state.pending.get_mut(vm) {
                        shown.clone_from(to);
                    }
                    let was_stuck = from.as_deref().is_some_and(is_stuck_status);
                    if *stuck && !was_stuck && state.stuck_warnings < STUCK_WARNINGS {
                        state.stuck_warnings += 1;
                        tracing::warn!(
                            vm_name = %vm,
                            status = %to,
                            message = message.as_deref().unwrap_or_default(),
                            "VM {vm} is {to}{}",
                            message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                        );
                    } else {
                        tracing::debug!(vm_name = %vm, status = %to, "vm status changed");
                    }
                }
                Transition::Ready { vm, phase } => {
                    if state.pending.remove(vm).is_none() {
                        state.ready_early.insert(vm.clone());
                    }
                    tracing::debug!(
                        vm_name = %vm,
                        phase = %phase,
                        ready = state.ready,
                        total = tracker.total(),
                        "vm ready"
                    )
                }
                Transition::Failed { vm, reason } => {
                    tracing::error!(vm_name = %vm, reason = %reason, "vm failed")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(status: Outcome, server_dry_run: bool) -> RunSummary {
        let planned = KindCounts {
            services: 2,
            secrets: 11,
            vms: 11,
            dvs: 3,
            ..KindCounts::default()
        };
        RunSummary {
            status,
            run_id: "0b6c5a57-5b0e-4a8b-9a43-8f6a3c1d2e4f".into(),
            namespace: "loadtest".into(),
            server_dry_run,
            container_image: "quay.io/containerdisks/fedora:42".into(),
            ready_condition: "running".into(),
            planned,
            created: if server_dry_run {
                KindCounts::default()
            } else {
                planned
            },
            create_duration: Duration::from_millis(2300),
            wait_duration: (!server_dry_run).then_some(Duration::from_millis(41_200)),
            vms_ready: 11,
            vms: vec![VmSummary {
                name: "virtwork-cpu-0".into(),
                workload: "cpu".into(),
                role: None,
                created: !server_dry_run,
                phase: Some("Running".into()),
                status: Some("Running".into()),
                message: None,
                created_at: Some(jiff::Timestamp::from_second(1_799_999_958).unwrap()),
                scheduled_at: Some(jiff::Timestamp::from_second(1_799_999_970).unwrap()),
                running_at: Some(jiff::Timestamp::from_second(1_799_999_990).unwrap()),
                ready_at: Some(jiff::Timestamp::from_second(1_800_000_000).unwrap()),
            }],
            api_requests: 42,
            audit_db: Some("/home/u/.local/state/virtwork/virtwork.db".into()),
            pacing: crate::model::Pacing::default(),
            error: None,
        }
    }

    #[test]
    fn one_ready_vm_reads_as_one_and_has_no_rate_line() {
        let text = run_summary_text(&summary(Outcome::Success, false));
        assert!(text.contains(" (1 VM)\n"), "{text}");
        assert!(text.contains("(11/11 VMs running)"), "{text}");
        assert!(!text.contains("Rate:"), "one VM has no rate: {text}");
    }

    #[test]
    fn a_no_wait_run_does_not_claim_the_deployment_is_complete() {
        let mut s = summary(Outcome::Success, false);
        s.wait_duration = None;
        let text = run_summary_text(&s);
        assert!(
            text.starts_with("Deployment created (--no-wait: readiness not awaited).\n"),
            "{text}"
        );
    }

    #[test]
    fn counts_use_singular_for_one() {
        let mut s = summary(Outcome::Success, false);
        s.created = KindCounts {
            services: 1,
            secrets: 1,
            vms: 1,
            dvs: 1,
            ..KindCounts::default()
        };
        let text = run_summary_text(&s);
        assert!(
            text.contains("1 VM, 1 Secret, 1 Service, 1 DataVolume (created"),
            "{text}"
        );
    }

    #[test]
    fn text_summary_has_counts_durations_and_the_undo_command() {
        let text = run_summary_text(&summary(Outcome::Success, false));
        assert!(text.starts_with("Deployment complete.\n"), "{text}");
        assert!(
            text.contains("Run ID:    0b6c5a57-5b0e-4a8b-9a43-8f6a3c1d2e4f"),
            "{text}"
        );
        assert!(
            text.contains("11 VMs, 11 Secrets, 2 Services, 3 DataVolumes"),
            "{text}"
        );
        assert!(text.contains("Create:    2.3s"), "{text}");
        assert!(
            text.contains("Wait:      41.2s (11/11 VMs running)"),
            "{text}"
        );
        assert!(text.contains(
            "Undo:      virtwork cleanup --namespace loadtest --run-id 0b6c5a57-5b0e-4a8b-9a43-8f6a3c1d2e4f"
        ));
    }

    #[test]
    fn server_dry_run_summary_says_nothing_was_persisted_and_offers_no_undo() {
        let text = run_summary_text(&summary(Outcome::Success, true));
        assert!(text.contains("nothing was persisted"), "{text}");
        assert!(!text.contains("Undo:"), "{text}");
        let doc = run_summary_json(&summary(Outcome::Success, true));
        assert_eq!(doc["dry_run"], "server");
        assert!(doc["cleanup_command"].is_null());
    }

    #[test]
    fn the_streamed_document_is_the_documented_value_byte_for_byte() {
        // The value's maps print their keys sorted; the streamed document must print the
        // same text, for every shape of summary.
        let mut everything = summary(Outcome::Failed, false);
        everything.error = Some("readiness timeout".into());
        everything.audit_db = Some("/data/virtwork.db".into());
        everything.pacing = crate::model::Pacing {
            max_starting: Some("10".parse().unwrap()),
            ramp: Some("90s".parse().unwrap()),
        };
        everything.vms[0].role = Some("server".into());
        everything.vms[0].message = Some("0/3 nodes are available".into());
        everything.vms[0].status = Some("ErrorUnschedulable".into());
        for s in [
            summary(Outcome::Success, true),
            summary(Outcome::Cancelled, false),
            everything,
        ] {
            assert_eq!(
                serde_json::to_string_pretty(&run_summary_document(&s)).unwrap(),
                serde_json::to_string_pretty(&run_summary_json(&s)).unwrap()
            );
        }
    }

    #[test]
    fn json_summary_has_the_documented_fields() {
        let doc = run_summary_json(&summary(Outcome::Cancelled, false));
        assert_eq!(doc["format_version"], 1);
        assert_eq!(doc["status"], "cancelled");
        assert_eq!(doc["created"]["vms"], 11);
        assert_eq!(doc["planned"]["data_volumes"], 3);
        assert_eq!(doc["durations_ms"]["create"], 2300);
        assert_eq!(doc["vms"][0]["phase"], "Running");
        assert_eq!(doc["vms"][0]["ready"], true);
        assert_eq!(doc["vms"][0]["ready_at"], "2027-01-15T08:00:00Z");
        assert_eq!(doc["vms"][0]["created_at"], "2027-01-15T07:59:18Z");
        assert_eq!(doc["vms"][0]["scheduled_at"], "2027-01-15T07:59:30Z");
        assert_eq!(doc["vms"][0]["running_at"], "2027-01-15T07:59:50Z");
        assert_eq!(doc["vms"][0]["time_to_ready_ms"], 42_000);
        assert_eq!(doc["time_to_ready_ms"]["max"], 42_000);
        assert!(doc["dry_run"].is_null());
        assert_eq!(doc["api_requests"], 42);
    }

    #[test]
    fn time_to_ready_percentiles_and_rate() {
        let t0 = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let at = |ms: i64| {
            t0.checked_add(jiff::SignedDuration::from_millis(ms))
                .unwrap()
        };
        // 100 VMs created a second apart, VM i ready (i + 1) x 100 ms after its creation;
        // one more never ready.
        let mut vms: Vec<VmSummary> = (0..100)
            .map(|i| VmSummary {
                name: format!("vm-{i}"),
                workload: "cpu".into(),
                role: None,
                created: true,
                phase: Some("Running".into()),
                status: Some("Running".into()),
                message: None,
                created_at: Some(at(i * 1000)),
                scheduled_at: None,
                running_at: None,
                ready_at: Some(at(i * 1000 + (i + 1) * 100)),
            })
            .collect();
        vms.push(VmSummary {
            ready_at: None,
            ..vms[0].clone()
        });
        let stats = ready_stats(&vms).unwrap();
        assert_eq!(stats.count, 100);
        assert_eq!(stats.p50, Duration::from_millis(5000));
        assert_eq!(stats.p90, Duration::from_millis(9000));
        assert_eq!(stats.p99, Duration::from_millis(9900));
        assert_eq!(stats.max, Duration::from_millis(10_000));
        // 100 VMs from t0 to the last ready at 109 s.
        assert!((stats.vms_per_minute - 100.0 / (109.0 / 60.0)).abs() < 0.01);
        assert!(ready_stats(&vms[100..]).is_none());

        let mut s = summary(Outcome::Success, false);
        s.vms = vms;
        let text = run_summary_text(&s);
        assert!(
            text.contains("To ready:  p50 5.0s, p90 9.0s, p99 9.9s, max 10.0s (100 VMs)"),
            "{text}"
        );
        assert!(text.contains("Rate:      55.0 VMs/minute ready"), "{text}");
        let doc = run_summary_json(&s);
        assert_eq!(doc["time_to_ready_ms"]["p90"], 9000);
        assert_eq!(doc["vms_per_minute"], 55.0);
        assert_eq!(doc["vms"][3]["time_to_ready_ms"], 400);
    }

    #[test]
    fn phase_counts_are_listed_in_name_order() {
        let counts = BTreeMap::from([("Scheduling".to_string(), 3), ("Running".to_string(), 5)]);
        assert_eq!(phase_counts_line(&counts), "Running 5, Scheduling 3");
    }

    #[test]
    fn a_phase_from_the_cluster_cannot_drive_the_terminal() {
        let counts = BTreeMap::from([("Running\u{1b}[2J".to_string(), 1)]);
        assert_eq!(phase_counts_line(&counts), "Running\\u{1b}[2J 1");
    }
}
