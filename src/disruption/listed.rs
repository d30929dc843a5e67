//! What `disruption` reads of a listed VirtualMachineInstance and
//! VirtualMachineInstanceMigration, and nothing more: the slim metadata of verify's listing
//! ([`crate::verify::listed::Listed`]: name, namespace, uid, creation time, labels); the VMI's
//! phase, node, `migrationState` and LiveMigratable condition; the migration's VMI name,
//! phase, phase transition times and `migrationState`. Deserialized straight from each list
//! page (a fleet's full VMIs are tens of MiB of JSON trees), then turned into the plain facts
//! of [`super::evidence`].
//!
//! Must not: keep any other field, talk to the cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::verify::listed::Listed;

use super::evidence::{MigrationObject, MigrationState, VmiFacts};

/// A listed VirtualMachineInstance (verify's slim listing: metadata, and the status read here).
pub type SlimVmi = Listed<IgnoredAny, VmiStatus>;
/// A listed VirtualMachineInstanceMigration.
pub type SlimMigration = Listed<MigrationSpec, MigrationStatus>;

/// Times are kept as text and parsed leniently: a malformed one is unknown, not a failed list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    migration_uid: Option<String>,
    start_timestamp: Option<String>,
    end_timestamp: Option<String>,
    source_node: Option<String>,
    target_node: Option<String>,
    #[serde(default)]
    completed: bool,
    #[serde(default)]
    failed: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    kind: Option<String>,
    status: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmiStatus {
    phase: Option<String>,
    node_name: Option<String>,
    migration_state: Option<State>,
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationSpec {
    vmi_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTime {
    phase: Option<String>,
    phase_transition_timestamp: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    phase: Option<String>,
    #[serde(default)]
    phase_transition_timestamps: Vec<PhaseTime>,
    migration_state: Option<State>,
}

/// An RFC 3339 time as Unix seconds.
pub fn seconds(text: &str) -> Option<f64> {
    let t: jiff::Timestamp = text.parse().ok()?;
    Some(t.as_millisecond() as f64 / 1000.0)
}

fn created(meta: &ObjectMeta) -> Option<f64> {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond() as f64 / 1000.0)
}

impl State {
    fn facts(&self) -> MigrationState {
        MigrationState {
            uid: self.migration_uid.clone(),
            start: self.start_timestamp.as_deref().and_then(seconds),
            end: self.end_timestamp.as_deref().and_then(seconds),
            source: self.source_node.clone(),
            target: self.target_node.clone(),
            completed: self.completed,
            failed: self.failed,
        }
    }
}

/// A VMI's facts (None: it has no name).
pub fn vmi_facts(vmi: &SlimVmi) -> Option<VmiFacts> {
    let status = vmi.status.clone().unwrap_or_default();
    let migratable = status
        .conditions
        .iter()
        .find(|c| c.kind.as_deref() == Some("LiveMigratable"))
        .map(|c| c.status.as_deref() == Some("True"));
    Some(VmiFacts {
        namespace: vmi.metadata.namespace.clone().unwrap_or_default(),
        name: vmi.metadata.name.clone()?,
        uid: vmi.metadata.uid.clone().unwrap_or_default(),
        created: created(&vmi.metadata),
        phase: status.phase,
        node: status.node_name,
        migratable,
        migration: status.migration_state.as_ref().map(State::facts),
    })
}

/// A migration's facts (None: it names no VMI).
pub fn migration_facts(migration: &SlimMigration) -> Option<MigrationObject> {
    let status = migration.status.clone().unwrap_or_default();
    Some(MigrationObject {
        namespace: migration.metadata.namespace.clone().unwrap_or_default(),
        name: migration.metadata.name.clone().unwrap_or_default(),
        uid: migration.metadata.uid.clone().unwrap_or_default(),
        vmi_name: migration.spec.as_ref()?.vmi_name.clone()?,
        created: created(&migration.metadata),
        phase: status.phase,
        phase_times: status
            .phase_transition_timestamps
            .iter()
            .filter_map(|p| {
                let at = seconds(p.phase_transition_timestamp.as_deref()?)?;
                Some((p.phase.clone()?, at))
            })
            .collect(),
        state: status.migration_state.as_ref().map(State::facts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vmi_and_a_migration_keep_what_disruption_reads() {
        let vmi: SlimVmi = serde_json::from_value(json!({
            "metadata": {"name": "vm", "namespace": "ns", "uid": "u1",
                         "creationTimestamp": "2026-12-05T10:00:00Z",
                         "managedFields": [{"manager": "x"}]},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Running", "nodeName": "n1",
                       "conditions": [{"type": "LiveMigratable", "status": "False"}],
                       "migrationState": {"migrationUid": "m1", "sourceNode": "n0", "targetNode": "n1",
                                          "startTimestamp": "2026-12-05T10:10:00Z",
                                          "endTimestamp": "2026-12-05T10:10:12Z", "completed": true}}
        }))
        .unwrap();
        let facts = vmi_facts(&vmi).unwrap();
        assert_eq!(facts.uid, "u1");
        assert_eq!(facts.migratable, Some(false));
        let state = facts.migration.unwrap();
        assert_eq!(state.end.unwrap() - state.start.unwrap(), 12.0);
        assert_eq!(state.target.as_deref(), Some("n1"));
        let m: SlimMigration = serde_json::from_value(json!({
            "metadata": {"name": "kubevirt-evacuation-x", "namespace": "ns", "uid": "m1"},
            "spec": {"vmiName": "vm"},
            "status": {"phase": "Succeeded", "phaseTransitionTimestamps": [
                {"phase": "Running", "phaseTransitionTimestamp": "2026-12-05T10:10:00Z"},
                {"phase": "Succeeded", "phaseTransitionTimestamp": "bad"}]}
        }))
        .unwrap();
        let m = migration_facts(&m).unwrap();
        assert_eq!(m.vmi_name, "vm");
        assert_eq!(m.phase_times.len(), 1, "an unreadable time is unknown");
    }
}
