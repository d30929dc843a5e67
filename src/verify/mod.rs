//! `virtwork verify`'s core: judging Prometheus' answers against the expected-signal contract
//! of [`crate::signals`] ([`evaluate`]), reaching Prometheus ([`prometheus`], the only async
//! part) and the generated monitoring kit ([`kit`]).
//!
//! This file turns listed VirtualMachines into [`Target`]s (pure) and results into the
//! text table and JSON document (pure). Must not: talk to the cluster (commands/verify.rs
//! lists the VMs) or decide exit codes (the command does).

pub mod evaluate;
pub mod kit;
pub mod prometheus;

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde::Serialize;
use serde_json::{Value, json};

use crate::labels;
use crate::model::Window;
use crate::signals::contract::{
    CUSTOM_SIGNALS_ANNOTATION, Check, CustomSignal, SIGNAL_PARAMS_ANNOTATION, VmFacts,
};
use evaluate::Verdict;

/// One VM to verify, with what its signals depend on.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub facts: VmFacts,
    pub run_id: Option<String>,
    /// The VMI's phase; None when the VM has no VMI.
    pub vmi_phase: Option<String>,
    /// Why the VM's recorded signal setup could not be used (absent: defaults apply).
    pub setup_note: Option<String>,
}

fn label(object: &DynamicObject, key: &str) -> Option<String> {
    object
        .metadata
        .labels
        .as_ref()?
        .get(key)
        .filter(|v| !v.is_empty())
        .cloned()
}

fn annotation<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Builds the targets from listed VMs and VMIs (joined by namespace and name), sorted by
/// namespace and name.
pub fn targets(vms: &[DynamicObject], vmis: &[DynamicObject]) -> Vec<Target> {
    let key = |o: &DynamicObject| {
        (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    };
    let phases: BTreeMap<(String, String), Option<String>> = vmis
        .iter()
        .map(|vmi| {
            let phase = vmi.data["status"]["phase"].as_str().map(String::from);
            (key(vmi), phase)
        })
        .collect();
    let mut out: Vec<Target> = vms
        .iter()
        .map(|vm| {
            let (namespace, name) = key(vm);
            let mut notes = Vec::new();
            let params = match annotation(vm, SIGNAL_PARAMS_ANNOTATION) {
                None => BTreeMap::new(),
                Some(text) => serde_json::from_str::<BTreeMap<String, String>>(text)
                    .unwrap_or_else(|e| {
                        notes.push(format!("annotation {SIGNAL_PARAMS_ANNOTATION} is unreadable ({e}); default params assumed"));
                        BTreeMap::new()
                    }),
            };
            let custom = match annotation(vm, CUSTOM_SIGNALS_ANNOTATION) {
                None => Vec::new(),
                Some(text) => match serde_json::from_str::<Vec<CustomSignal>>(text) {
                    Ok(list) => list
                        .into_iter()
                        .filter(|s| match crate::signals::promql::validate_template(&s.query) {
                            Ok(()) => true,
                            Err(e) => {
                                notes.push(format!("catalog signal {:?} skipped: {e}", s.name));
                                false
                            }
                        })
                        .collect(),
                    Err(e) => {
                        notes.push(format!("annotation {CUSTOM_SIGNALS_ANNOTATION} is unreadable ({e})"));
                        Vec::new()
                    }
                },
            };
            let domain = &vm.data["spec"]["template"]["spec"]["domain"];
            let memory_bytes = domain["resources"]["requests"]["memory"]
                .as_str()
                .or_else(|| domain["memory"]["guest"].as_str())
                .and_then(|q| q.parse::<crate::model::Quantity>().ok())
                .map(|q| q.value())
                .filter(|b| *b > 0.0)
                .map(|b| b as u64);
            Target {
                vmi_phase: phases.get(&(namespace.clone(), name.clone())).cloned().flatten(),
                run_id: label(vm, labels::RUN_ID),
                facts: VmFacts {
                    workload: label(vm, labels::COMPONENT).unwrap_or_default(),
                    role: label(vm, labels::ROLE),
                    memory_bytes,
                    params,
                    custom,
                    namespace,
                    name,
                },
                setup_note: (!notes.is_empty()).then(|| notes.join("; ")),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.facts.namespace, &a.facts.name).cmp(&(&b.facts.namespace, &b.facts.name))
    });
    out
}

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
pub fn text_report(results: &[VmResult], prometheus: &str, window: Window) -> String {
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
    let mut out = crate::table::columns(&HEADER, &rows, "");
    for note in notes {
        out.push_str(&format!("note: {note}\n"));
    }
    let (expected, passed, missing, skipped) = tally(results);
    out.push_str(&format!(
        "{passed} of {expected} expected signal(s) present, {missing} missing{} ({} VM(s), window {window}, Prometheus: {prometheus}).\n",
        if skipped > 0 { format!(", {skipped} not expected in this window") } else { String::new() },
        results.len(),
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
    let vm = format!("{}/{}", t.facts.namespace, t.facts.name);
    if let Some(note) = &t.setup_note {
        notes.push(format!("{vm}: {note}"));
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
            "{vm}: workload {:?} declares no signals",
            t.facts.workload
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
            s.check.query.clone(),
        ]);
        if let Some(note) = &s.check.note {
            notes.push(format!("{vm} {}: {note}", s.check.signal));
        }
        if let Some(error) = &s.error {
            notes.push(format!("{vm} {}: {error}", s.check.signal));
        }
    }
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
        "passed": missing == 0 && expected > 0,
        "summary": {
            "vms": results.len(),
            "expected": expected,
            "present": passed,
            "missing": missing,
            "not_expected": skipped,
        },
        "vms": vms,
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
        Verdict::Error => format!("query failed: {}", s.error.as_deref().unwrap_or("error")),
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
