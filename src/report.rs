//! Human summaries, JSON result documents and progress rendering for every command.
//!
//! `virtwork run` (real and `--dry-run=server`): [`RunSummary`] holds the facts of a run;
//! [`run_summary_text`] renders the human summary and [`run_summary_json`] the documented
//! `--output json` document (docs/output-json.md). [`RunProgress`] shows readiness progress:
//! a live indicatif view (VMs per phase, ready count, elapsed, ETA) when stderr is a
//! terminal and logs are text, otherwise one info log line per phase change. Rendering is
//! pure; only `RunProgress` writes (to stderr).

// `cleanup` and `status` rendering lives in submodules (report/cleanup.rs, report/status.rs).
pub mod cleanup;
pub mod status;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::k8s::ready::{ReadinessObserver, ReadinessTracker, Transition};

/// Version of the `--output json` run document; bumped only on incompatible changes.
pub const RUN_JSON_FORMAT_VERSION: u32 = 1;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Success,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// Objects per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindCounts {
    pub services: usize,
    pub secrets: usize,
    pub vms: usize,
    /// DataVolumes the VMs' templates create (CDI creates them, not virtwork).
    pub data_volumes: usize,
}

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
    pub ready_at: Option<jiff::Timestamp>,
}

/// The facts of one `virtwork run` against a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub status: RunStatus,
    pub run_id: String,
    pub namespace: String,
    /// `--dry-run=server`: objects were validated by the server and not persisted.
    pub server_dry_run: bool,
    pub container_image: String,
    /// `running`, `ready`, `agent-connected` or `workload`.
    pub ready_condition: String,
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
}

impl RunSummary {
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
    if c.data_volumes > 0 {
        line.push_str(&format!(
            ", {} (created by the VMs' templates)",
            count_of(c.data_volumes, "DataVolume")
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
        (true, RunStatus::Success) => {
            "Server dry run complete: the API server accepted every object (dryRun=All); nothing was persisted."
        }
        (false, RunStatus::Success) => "Deployment complete.",
        (_, RunStatus::Failed) => "Deployment FAILED.",
        (_, RunStatus::Cancelled) => "Deployment interrupted.",
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
                "{} ({}/{} VMs {})",
                seconds(wait),
                s.vms_ready,
                s.planned.vms,
                s.ready_condition
            ),
        );
    }
    if let Some(error) = &s.error {
        row("Error:", error.clone());
    }
    let created_anything = s.created.vms + s.created.secrets + s.created.services > 0;
    if !s.server_dry_run && created_anything {
        row("Undo:", s.cleanup_command());
    }
    out
}

/// The `--output json` document for a run (docs/output-json.md, "virtwork run").
pub fn run_summary_json(s: &RunSummary) -> Value {
    let counts = |c: &KindCounts| {
        json!({
            "services": c.services,
            "secrets": c.secrets,
            "vms": c.vms,
            "data_volumes": c.data_volumes,
        })
    };
    let vms: Vec<Value> = s
        .vms
        .iter()
        .map(|vm| {
            json!({
                "name": vm.name,
                "workload": vm.workload,
                "role": vm.role,
                "created": vm.created,
                "phase": vm.phase,
                "ready": vm.ready_at.is_some(),
                "ready_at": vm.ready_at.map(|t| t.to_string()),
            })
        })
        .collect();
    json!({
        "format_version": RUN_JSON_FORMAT_VERSION,
        "status": s.status.as_str(),
        "dry_run": if s.server_dry_run { Value::from("server") } else { Value::Null },
        "run_id": s.run_id,
        "namespace": s.namespace,
        "container_image": s.container_image,
        "ready_condition": s.ready_condition,
        "planned": counts(&s.planned),
        "created": counts(&s.created),
        "durations_ms": {
            "create": s.create_duration.as_millis() as u64,
            "wait": s.wait_duration.map(|d| d.as_millis() as u64),
        },
        "vms_ready": s.vms_ready,
        "vms": vms,
        "api_requests": s.api_requests,
        "pacing": {
            "max_starting": s.pacing.max_starting.map(|n| n.get()),
            "ramp": s.pacing.ramp.map(|r| r.to_string()),
        },
        "error": s.error,
        "cleanup_command": if s.server_dry_run { Value::Null } else { Value::from(s.cleanup_command()) },
    })
}

/// Readiness progress on stderr: a live view on a terminal, log lines otherwise.
pub struct RunProgress {
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
}

impl RunProgress {
    /// `live`: draw the indicatif view (stderr is a terminal and logs are human-readable).
    pub fn new(total_vms: usize, live: bool) -> Self {
        let bar = live.then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total_vms as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            let style = indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} VMs ready, ETA {eta}  {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        RunProgress {
            bar,
            started: Instant::now(),
        }
    }

    /// Whether the live view is drawn.
    pub fn is_live(&self) -> bool {
        self.bar.is_some()
    }

    /// Removes the live view (before the summary is printed).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// Time since the wait began.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// "Running 5, Scheduling 3, NoVMI 3": VMs per phase in phase-name order.
pub fn phase_counts_line(counts: &BTreeMap<String, usize>) -> String {
    counts
        .iter()
        .map(|(phase, n)| format!("{phase} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ReadinessObserver for RunProgress {
    fn changed(&mut self, tracker: &ReadinessTracker, transitions: &[Transition]) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(tracker.ready_count() as u64);
                bar.set_message(phase_counts_line(&tracker.phase_counts()));
            }
            None => {
                for t in transitions {
                    match t {
                        Transition::Phase { vm, from, to } => {
                            tracing::info!(vm_name = %vm, from = %from, phase = %to, "vm phase changed")
                        }
                        Transition::Ready { vm, phase } => tracing::info!(
                            vm_name = %vm,
                            phase = %phase,
                            ready = tracker.ready_count(),
                            total = tracker.total(),
                            elapsed_ms = self.started.elapsed().as_millis() as u64,
                            "vm ready"
                        ),
                        Transition::Failed { vm, reason } => {
                            tracing::error!(vm_name = %vm, reason = %reason, "vm failed")
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(status: RunStatus, server_dry_run: bool) -> RunSummary {
        let planned = KindCounts {
            services: 2,
            secrets: 11,
            vms: 11,
            data_volumes: 3,
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
                ready_at: Some(jiff::Timestamp::from_second(1_800_000_000).unwrap()),
            }],
            api_requests: 42,
            pacing: crate::model::Pacing::default(),
            error: None,
        }
    }

    #[test]
    fn counts_use_singular_for_one() {
        let mut s = summary(RunStatus::Success, false);
        s.created = KindCounts {
            services: 1,
            secrets: 1,
            vms: 1,
            data_volumes: 1,
        };
        let text = run_summary_text(&s);
        assert!(
            text.contains("1 VM, 1 Secret, 1 Service, 1 DataVolume (created"),
            "{text}"
        );
    }

    #[test]
    fn text_summary_has_counts_durations_and_the_undo_command() {
        let text = run_summary_text(&summary(RunStatus::Success, false));
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
        let text = run_summary_text(&summary(RunStatus::Success, true));
        assert!(text.contains("nothing was persisted"), "{text}");
        assert!(!text.contains("Undo:"), "{text}");
        let doc = run_summary_json(&summary(RunStatus::Success, true));
        assert_eq!(doc["dry_run"], "server");
        assert!(doc["cleanup_command"].is_null());
    }

    #[test]
    fn json_summary_has_the_documented_fields() {
        let doc = run_summary_json(&summary(RunStatus::Cancelled, false));
        assert_eq!(doc["format_version"], 1);
        assert_eq!(doc["status"], "cancelled");
        assert_eq!(doc["created"]["vms"], 11);
        assert_eq!(doc["planned"]["data_volumes"], 3);
        assert_eq!(doc["durations_ms"]["create"], 2300);
        assert_eq!(doc["vms"][0]["phase"], "Running");
        assert_eq!(doc["vms"][0]["ready"], true);
        assert_eq!(doc["vms"][0]["ready_at"], "2027-01-15T08:00:00Z");
        assert!(doc["dry_run"].is_null());
        assert_eq!(doc["api_requests"], 42);
    }

    #[test]
    fn phase_counts_are_listed_in_name_order() {
        let counts = BTreeMap::from([("Scheduling".to_string(), 3), ("Running".to_string(), 5)]);
        assert_eq!(phase_counts_line(&counts), "Running 5, Scheduling 3");
    }
}
