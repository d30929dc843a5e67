//! Which record judges each VM (sans-IO): what its run recorded in the audit database when
//! the database has it, else what the VM itself says (its `virtwork/signal-params`
//! annotation, its workload and role labels, its memory request).
//!
//! Owns: the choice per VM ([`choose`]), the one warning line per VM whose own words differ
//! from the record ([`Setup::differences`]), and the one line saying why some VMs were judged
//! by their annotation ([`fallback_warning`]); and, for `verify --run-id`, which VMs the run
//! recorded are not in scope and why ([`absent_from_scope`], [`absence`]). The reason: anyone allowed to patch a VM can
//! rewrite its annotation and labels (`cpu-load-percent=1` lowers the vcpu-busy threshold
//! to 0.005), but not the audit database of the user who ran it. Must not: read the
//! database (commands/verify.rs does, through `audit::query`) or log anything.

use std::collections::BTreeMap;

use serde::Serialize;

use super::untrusted;
use crate::audit::query::{RecordedRun, RecordedVm};
use crate::model::Quantity;
use crate::signals::contract::SIGNAL_PARAMS_ANNOTATION;
use crate::workloads::signal_params::SignalParams;

/// What the audit database holds for the runs of the listed VMs.
#[derive(Debug, Clone, PartialEq)]
pub enum Records {
    /// No database was read: why (shown once).
    Unavailable(String),
    /// The database at `path` (as shown), and each run id asked for: its recorded VMs, or
    /// None when the database has no such run.
    Read {
        path: String,
        runs: BTreeMap<String, Option<RecordedRun>>,
    },
}

impl Default for Records {
    fn default() -> Self {
        Records::Unavailable("no audit database was read".into())
    }
}

/// Where the params a VM is judged by came from (`params_source` in the JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ParamsSource {
    #[serde(rename = "audit-db")]
    AuditDb,
    #[serde(rename = "annotation")]
    Annotation,
}

/// Why a VM was judged by its own annotation and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fallback {
    /// No database was read.
    NoDatabase,
    /// The VM has no run-id label.
    NoRunLabel,
    /// The database has no run with the VM's run id.
    RunNotRecorded,
    /// The run was recorded before signal params were (or by the Go tool).
    ParamsNotRecorded,
    /// The run's record has no VM of this namespace and name.
    VmNotRecorded,
}

/// What a VM is judged by: its workload, role, memory request and signal params.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub workload: String,
    pub role: Option<String>,
    pub memory_bytes: Option<u64>,
    pub params: BTreeMap<String, String>,
}

impl Setup {
    /// What differs between the VM's own words (`self`) and the record, as
    /// `what: "the VM's" (recorded "the record's")` parts; empty when they agree. A param the
    /// annotation omits takes the workload's default in both, so only the maps are compared.
    pub fn differences(&self, recorded: &Setup) -> Vec<String> {
        let mut out = Vec::new();
        if self.workload != recorded.workload {
            out.push(format!(
                "workload label {:?} (recorded {:?})",
                self.workload, recorded.workload
            ));
        }
        if self.role != recorded.role {
            out.push(format!(
                "role label {:?} (recorded {:?})",
                self.role.as_deref().unwrap_or(""),
                recorded.role.as_deref().unwrap_or("")
            ));
        }
        if self.memory_bytes != recorded.memory_bytes {
            out.push(format!(
                "memory {} bytes (recorded {} bytes)",
                self.memory_bytes.map_or("-".into(), |b| b.to_string()),
                recorded.memory_bytes.map_or("-".into(), |b| b.to_string())
            ));
        }
        if self.params != recorded.params {
            out.push(format!(
                "annotation {SIGNAL_PARAMS_ANNOTATION} {} (recorded {})",
                json_of(&self.params),
                json_of(&recorded.params)
            ));
        }
        out
    }
}

fn json_of(params: &BTreeMap<String, String>) -> String {
    serde_json::to_string(params).expect("a string map serializes")
}

/// The outcome of [`choose`] for one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub setup: Setup,
    pub source: ParamsSource,
    /// Why the annotation was used (source Annotation only).
    pub fallback: Option<Fallback>,
    /// The one warning line when the VM's own words differ from the record (escaped).
    pub warning: Option<String>,
    /// A recorded value that could not be used (source Annotation): why, for the VM's note.
    pub note: Option<String>,
}

/// Chooses what VM `namespace/name` of run `run_id` is judged by: the record when `records`
/// holds its run with signal params, else `own` (its annotation and labels).
pub fn choose(
    namespace: &str,
    name: &str,
    run_id: Option<&str>,
    own: Setup,
    records: &Records,
) -> Choice {
    let annotation = |fallback, note| Choice {
        setup: own.clone(),
        source: ParamsSource::Annotation,
        fallback: Some(fallback),
        warning: None,
        note,
    };
    let runs = match records {
        Records::Unavailable(_) => return annotation(Fallback::NoDatabase, None),
        Records::Read { runs, .. } => runs,
    };
    let Some(run_id) = run_id else {
        return annotation(Fallback::NoRunLabel, None);
    };
    let Some(Some(run)) = runs.get(run_id) else {
        return annotation(Fallback::RunNotRecorded, None);
    };
    let Some(vm) = run.get(&(namespace.to_string(), name.to_string())) else {
        return annotation(Fallback::VmNotRecorded, None);
    };
    let recorded = match recorded_setup(vm) {
        Ok(Some(setup)) => setup,
        Ok(None) => return annotation(Fallback::ParamsNotRecorded, None),
        Err(why) => {
            let note = format!(
                "the audit database's signal params for this VM are unusable ({why}); judged by its annotation"
            );
            return annotation(Fallback::ParamsNotRecorded, Some(note));
        }
    };
    let differences = own.differences(&recorded);
    let warning = (!differences.is_empty()).then(|| {
        untrusted(&format!(
            "VM {namespace}/{name}: {} differ(s) from what run {run_id} recorded in the audit \
             database; judged by the recorded value(s)",
            differences.join(", ")
        ))
    });
    Choice {
        setup: recorded,
        source: ParamsSource::AuditDb,
        fallback: None,
        warning,
        note: None,
    }
}

/// The setup a VM's record gives; None when its run recorded no signal params.
fn recorded_setup(vm: &RecordedVm) -> Result<Option<Setup>, String> {
    let Some(text) = &vm.signal_params else {
        return Ok(None);
    };
    let params = SignalParams::parse(&vm.workload, text)?;
    Ok(Some(Setup {
        workload: vm.workload.clone(),
        role: vm.role.clone().filter(|r| !r.is_empty()),
        memory_bytes: vm
            .memory
            .parse::<Quantity>()
            .ok()
            .map(|q| q.value())
            .filter(|b| *b > 0.0)
            .map(|b| b as u64),
        params: params.into_map(),
    }))
}

/// The one line saying which VMs were judged by their own annotation and why (None when every
/// VM was judged by the record): `fallbacks` holds each such VM's reason and run id.
pub fn fallback_warning(
    records: &Records,
    fallbacks: &[(Fallback, Option<&str>)],
) -> Option<String> {
    if fallbacks.is_empty() {
        return None;
    }
    let mut by_reason: BTreeMap<Fallback, (usize, Vec<&str>)> = BTreeMap::new();
    for (why, run) in fallbacks {
        let entry = by_reason.entry(*why).or_default();
        entry.0 += 1;
        if let Some(run) = run
            && !entry.1.contains(run)
        {
            entry.1.push(run);
        }
    }
    let path = match records {
        Records::Read { path, .. } => path.as_str(),
        Records::Unavailable(_) => "",
    };
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(why, (count, runs))| {
            let runs = runs.join(", ");
            match why {
                Fallback::NoDatabase => match records {
                    Records::Unavailable(reason) => reason.clone(),
                    Records::Read { .. } => "no audit database was read".into(),
                },
                Fallback::NoRunLabel => format!("{count} carry no run-id label"),
                Fallback::RunNotRecorded => {
                    format!("the audit database {path} has no record of run(s) {runs}")
                }
                Fallback::ParamsNotRecorded => format!(
                    "run(s) {runs} recorded no usable signal params (recorded before virtwork \
                     recorded them, or by another tool)"
                ),
                Fallback::VmNotRecorded => {
                    format!("{count} are not in the record of their run ({runs})")
                }
            }
        })
        .collect();
    Some(untrusted(&format!(
        "{} VM(s) judged by their {SIGNAL_PARAMS_ANNOTATION} annotation and labels, which anyone \
         allowed to edit the VMs can change: {}",
        fallbacks.len(),
        reasons.join("; ")
    )))
}

/// Most absent VMs looked up by name (one GET each); more are reported unlooked.
pub const MAX_ABSENT_LOOKUPS: usize = 200;

/// Why a VM its run recorded is not in `verify --run-id`'s scope (`absent[].reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Absence {
    /// No VM of that name in its namespace.
    Deleted,
    /// The VM is there, but its labels no longer put it in the run (a VM editor changed or
    /// removed `virtwork/run-id`, or the managed-by label).
    Relabelled,
    /// Not looked up (more than [`MAX_ABSENT_LOOKUPS`] absent, or the lookup failed).
    Unknown,
}

/// A VM the run recorded that verify did not find in scope: a failure, since whoever
/// patched its labels would otherwise drop it from the verdict unseen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AbsentVm {
    pub namespace: String,
    pub name: String,
    pub reason: Absence,
    /// Its `virtwork/run-id` label now (relabelled); None when removed, deleted or unknown.
    pub run_id_label: Option<String>,
    /// What was found, in a sentence (terminal-safe).
    pub note: String,
}

/// What a lookup by name found of an absent VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookedUp {
    /// No such VM.
    Gone,
    /// The VM, with its labels.
    Found(BTreeMap<String, String>),
    /// Not looked up, or the lookup failed (the reason).
    Unknown(String),
}

/// The VMs `recorded` holds that are not in `in_scope` (namespace, name), restricted to
/// `namespace` when verify looks in one: a VM of another namespace is out of scope by the
/// user's choice.
pub fn absent_from_scope(
    recorded: &RecordedRun,
    namespace: Option<&str>,
    in_scope: &std::collections::BTreeSet<(String, String)>,
) -> Vec<(String, String)> {
    recorded
        .keys()
        .filter(|(ns, _)| namespace.is_none_or(|n| n == ns))
        .filter(|key| !in_scope.contains(*key))
        .cloned()
        .collect()
}

/// The absence of VM `namespace/name` of run `run_id` from what a lookup found; None when the
/// VM turns out to carry the run's labels after all (created or relabelled back since the
/// list).
pub fn absence(run_id: &str, namespace: &str, name: &str, found: LookedUp) -> Option<AbsentVm> {
    let (reason, run_id_label, note) = match found {
        LookedUp::Gone => (
            Absence::Deleted,
            None,
            format!("deleted: no VM {name} in namespace {namespace}"),
        ),
        LookedUp::Unknown(why) => (Absence::Unknown, None, format!("not looked up: {why}")),
        LookedUp::Found(labels) => {
            let label = labels.get(crate::labels::RUN_ID).cloned();
            let managed = crate::labels::made_by_a_run(Some(&labels));
            match label.as_deref() {
                Some(l) if l == run_id && managed => return None,
                Some(l) if l == run_id => (
                    Absence::Relabelled,
                    label.clone(),
                    format!(
                        "relabelled: its {} label no longer says {}",
                        crate::labels::MANAGED_BY,
                        crate::labels::MANAGED_BY_VALUE
                    ),
                ),
                Some(l) => (
                    Absence::Relabelled,
                    label.clone(),
                    format!(
                        "relabelled: its {} label changed to {l} (the run recorded it as {run_id})",
                        crate::labels::RUN_ID
                    ),
                ),
                None => (
                    Absence::Relabelled,
                    None,
                    format!(
                        "relabelled: its {} label was removed",
                        crate::labels::RUN_ID
                    ),
                ),
            }
        }
    };
    Some(AbsentVm {
        namespace: namespace.to_string(),
        name: name.to_string(),
        reason,
        run_id_label: run_id_label.map(|l| untrusted(&l)),
        note: untrusted(&note),
    })
}

/// The one line failing verify for VMs of run `run_id` that are not in scope; None when none
/// is absent.
pub fn absent_message(run_id: &str, absent: &[AbsentVm]) -> Option<String> {
    let first = absent.first()?;
    let more = match absent.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(format!(
        "{} VM(s) run {run_id} recorded are not in scope: {}/{} ({}){more}",
        absent.len(),
        first.namespace,
        first.name,
        first.note
    ))
}

/// The text report's section on absent VMs (empty when none is).
pub fn absent_text(run_id: &str, absent: &[AbsentVm]) -> String {
    if absent.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\nVMs run {run_id} recorded that are not in scope ({}, not verified):\n",
        absent.len()
    );
    for vm in absent {
        out.push_str(&format!("  {}/{}: {}\n", vm.namespace, vm.name, vm.note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(params: &[(&str, &str)]) -> Setup {
        Setup {
            workload: "cpu".into(),
            role: None,
            memory_bytes: Some(2 << 30),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn read(run: &str, params: Option<&str>) -> Records {
        let vm = RecordedVm {
            workload: "cpu".into(),
            role: None,
            memory: "2Gi".into(),
            signal_params: params.map(String::from),
        };
        let recorded: RecordedRun = [(("ns".to_string(), "vm-0".to_string()), vm)].into();
        Records::Read {
            path: "/db".into(),
            runs: [(run.to_string(), Some(recorded))].into(),
        }
    }

    #[test]
    fn a_patched_annotation_is_overruled_by_the_record_with_one_warning() {
        let records = read("r1", Some(r#"{"cpu-load-percent":"100"}"#));
        let c = choose(
            "ns",
            "vm-0",
            Some("r1"),
            own(&[("cpu-load-percent", "1")]),
            &records,
        );
        assert_eq!(c.source, ParamsSource::AuditDb);
        assert_eq!(c.setup.params["cpu-load-percent"], "100");
        let warning = c.warning.unwrap();
        assert!(
            warning.contains("VM ns/vm-0")
                && warning.contains(r#"{"cpu-load-percent":"1"}"#)
                && warning.contains(r#"recorded {"cpu-load-percent":"100"}"#)
                && warning.contains("judged by the recorded"),
            "{warning}"
        );
    }

    #[test]
    fn an_agreeing_vm_is_judged_by_the_record_without_a_warning() {
        let records = read("r1", Some(r#"{"cpu-load-percent":"30"}"#));
        let c = choose(
            "ns",
            "vm-0",
            Some("r1"),
            own(&[("cpu-load-percent", "30")]),
            &records,
        );
        assert_eq!((c.source, c.warning), (ParamsSource::AuditDb, None));
    }

    #[test]
    fn a_relabelled_workload_and_a_grown_memory_are_overruled_too() {
        let records = read("r1", Some("{}"));
        let mut patched = own(&[]);
        patched.workload = "network\u{1b}[2J".into();
        patched.memory_bytes = Some(64 << 30);
        let c = choose("ns", "vm-0", Some("r1"), patched, &records);
        assert_eq!(c.setup.workload, "cpu");
        assert_eq!(c.setup.memory_bytes, Some(2 << 30));
        let warning = c.warning.unwrap();
        assert!(
            warning.contains("workload label") && warning.contains("memory"),
            "{warning}"
        );
        assert!(
            !warning.contains('\u{1b}'),
            "escaped for the terminal: {warning}"
        );
    }

    #[test]
    fn without_the_run_or_its_params_the_annotation_is_used_and_said_once() {
        let mine = own(&[("cpu-load-percent", "1")]);
        let cases = [
            (Records::default(), Some("r1"), Fallback::NoDatabase),
            (read("r1", None), Some("r1"), Fallback::ParamsNotRecorded),
            (read("r1", Some("{}")), Some("r2"), Fallback::RunNotRecorded),
            (read("r1", Some("{}")), None, Fallback::NoRunLabel),
        ];
        for (records, run, why) in cases {
            let c = choose("ns", "vm-0", run, mine.clone(), &records);
            assert_eq!(c.source, ParamsSource::Annotation, "{why:?}");
            assert_eq!(c.fallback, Some(why));
            assert_eq!(c.setup, mine);
            assert_eq!(c.warning, None);
        }
        let c = choose(
            "ns",
            "vm-9",
            Some("r1"),
            mine.clone(),
            &read("r1", Some("{}")),
        );
        assert_eq!(c.fallback, Some(Fallback::VmNotRecorded));

        let records = read("r1", Some("{}"));
        let line = fallback_warning(
            &records,
            &[
                (Fallback::RunNotRecorded, Some("r2")),
                (Fallback::RunNotRecorded, Some("r2")),
                (Fallback::RunNotRecorded, Some("r3")),
            ],
        )
        .unwrap();
        assert!(
            line.starts_with("3 VM(s) judged by their virtwork/signal-params annotation")
                && line.contains("the audit database /db has no record of run(s) r2, r3"),
            "{line}"
        );
        assert_eq!(fallback_warning(&records, &[]), None);
    }

    #[test]
    fn unusable_recorded_params_fall_back_with_a_note() {
        let records = read("r1", Some("[]"));
        let c = choose("ns", "vm-0", Some("r1"), own(&[]), &records);
        assert_eq!(c.source, ParamsSource::Annotation);
        assert!(c.note.unwrap().contains("unusable"));
    }

    fn recorded_vms(names: &[(&str, &str)]) -> RecordedRun {
        names
            .iter()
            .map(|(ns, name)| {
                (
                    (ns.to_string(), name.to_string()),
                    RecordedVm {
                        workload: "cpu".into(),
                        role: None,
                        memory: "2Gi".into(),
                        signal_params: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn recorded_vms_out_of_scope_are_named_with_what_became_of_them() {
        let run = recorded_vms(&[("a", "vm-0"), ("a", "vm-1"), ("a", "vm-2"), ("b", "vm-3")]);
        let in_scope = [("a".to_string(), "vm-0".to_string())]
            .into_iter()
            .collect();
        assert_eq!(
            absent_from_scope(&run, Some("a"), &in_scope),
            [("a".into(), "vm-1".into()), ("a".into(), "vm-2".into())]
        );
        assert_eq!(absent_from_scope(&run, None, &in_scope).len(), 3);

        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let managed = (crate::labels::MANAGED_BY, crate::labels::MANAGED_BY_VALUE);
        let moved = absence(
            "run-x",
            "a",
            "vm-1",
            LookedUp::Found(labels(&[managed, (crate::labels::RUN_ID, "other\x1b[2J")])),
        )
        .unwrap();
        assert_eq!(moved.reason, Absence::Relabelled);
        assert!(moved.note.contains("changed to other"), "{}", moved.note);
        assert!(
            !moved.note.contains('\x1b') && !moved.run_id_label.as_ref().unwrap().contains('\x1b')
        );
        let stripped = absence("run-x", "a", "vm-1", LookedUp::Found(labels(&[managed]))).unwrap();
        assert!(stripped.note.contains("was removed"), "{}", stripped.note);
        assert_eq!(stripped.run_id_label, None);
        let unmanaged = absence(
            "run-x",
            "a",
            "vm-1",
            LookedUp::Found(labels(&[(crate::labels::RUN_ID, "run-x")])),
        )
        .unwrap();
        assert_eq!(unmanaged.reason, Absence::Relabelled);
        assert!(unmanaged.note.contains(crate::labels::MANAGED_BY));
        // Back in the run since the list: not absent.
        let back = labels(&[managed, (crate::labels::RUN_ID, "run-x")]);
        assert_eq!(absence("run-x", "a", "vm-1", LookedUp::Found(back)), None);
        let gone = absence("run-x", "a", "vm-2", LookedUp::Gone).unwrap();
        assert_eq!(gone.reason, Absence::Deleted);
        let message = absent_message("run-x", &[moved.clone(), gone.clone()]).unwrap();
        assert!(
            message.starts_with("2 VM(s) run run-x recorded are not in scope: a/vm-1 (relabelled")
                && message.ends_with("and 1 more"),
            "{message}"
        );
        assert_eq!(absent_message("run-x", &[]), None);
        let text = absent_text("run-x", &[moved, gone]);
        assert!(
            text.contains("  a/vm-2: deleted: no VM vm-2 in namespace a"),
            "{text}"
        );
        assert_eq!(absent_text("run-x", &[]), "");
    }
}
