//! The objects virtwork creates and removes, as one vocabulary for every layer that counts or
//! reports them: [`ManagedKind`], the per-kind tally [`KindCounts`] (planned, created,
//! deleted, already gone: the same type for each) and [`NamespaceOutcome`], what became of the
//! namespace `cleanup --delete-namespace` named.
//!
//! How each document spells a count (`dvs` in the cleanup JSON, `data_volumes` in the run
//! JSON and the audit record) is the renderer's business; the counts themselves are one type.

use std::fmt;

use serde::Serialize;

/// The kinds virtwork creates or cleans up, in deletion order (VMs first, so their
/// controllers do not recreate what is being deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ManagedKind {
    VirtualMachine,
    VirtualMachineInstance,
    Service,
    Secret,
    DataVolume,
    PersistentVolumeClaim,
    /// Live migrations `virtwork churn` requested.
    VirtualMachineInstanceMigration,
}

impl ManagedKind {
    /// Every kind, in deletion order.
    pub const ALL: [ManagedKind; 7] = [
        ManagedKind::VirtualMachine,
        ManagedKind::VirtualMachineInstance,
        ManagedKind::Service,
        ManagedKind::Secret,
        ManagedKind::DataVolume,
        ManagedKind::PersistentVolumeClaim,
        ManagedKind::VirtualMachineInstanceMigration,
    ];

    /// Short name used in messages (`deleting secret ns/name: ...`).
    pub fn noun(self) -> &'static str {
        match self {
            ManagedKind::VirtualMachine => "VM",
            ManagedKind::VirtualMachineInstance => "VMI",
            ManagedKind::Service => "service",
            ManagedKind::Secret => "secret",
            ManagedKind::DataVolume => "DataVolume",
            ManagedKind::PersistentVolumeClaim => "PVC",
            ManagedKind::VirtualMachineInstanceMigration => "migration",
        }
    }

    /// Plural used in messages (`listing VMs in ns`).
    pub fn plural_noun(self) -> &'static str {
        match self {
            ManagedKind::VirtualMachine => "VMs",
            ManagedKind::VirtualMachineInstance => "VMIs",
            ManagedKind::Service => "services",
            ManagedKind::Secret => "secrets",
            ManagedKind::DataVolume => "DataVolumes",
            ManagedKind::PersistentVolumeClaim => "PVCs",
            ManagedKind::VirtualMachineInstanceMigration => "migrations",
        }
    }
}

impl fmt::Display for ManagedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

/// Objects per kind. Serialised with the cleanup document's keys (`vms`, `vmis`, `services`,
/// `secrets`, `dvs`, `pvcs`, `migrations`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    pub vms: usize,
    pub vmis: usize,
    pub services: usize,
    pub secrets: usize,
    pub dvs: usize,
    pub pvcs: usize,
    pub migrations: usize,
}

impl KindCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: ManagedKind) -> usize {
        match kind {
            ManagedKind::VirtualMachine => self.vms,
            ManagedKind::VirtualMachineInstance => self.vmis,
            ManagedKind::Service => self.services,
            ManagedKind::Secret => self.secrets,
            ManagedKind::DataVolume => self.dvs,
            ManagedKind::PersistentVolumeClaim => self.pvcs,
            ManagedKind::VirtualMachineInstanceMigration => self.migrations,
        }
    }

    fn slot(&mut self, kind: ManagedKind) -> &mut usize {
        match kind {
            ManagedKind::VirtualMachine => &mut self.vms,
            ManagedKind::VirtualMachineInstance => &mut self.vmis,
            ManagedKind::Service => &mut self.services,
            ManagedKind::Secret => &mut self.secrets,
            ManagedKind::DataVolume => &mut self.dvs,
            ManagedKind::PersistentVolumeClaim => &mut self.pvcs,
            ManagedKind::VirtualMachineInstanceMigration => &mut self.migrations,
        }
    }

    /// Adds one object of `kind`.
    pub fn add(&mut self, kind: ManagedKind) {
        *self.slot(kind) += 1;
    }

    /// Sum over all kinds.
    pub fn total(&self) -> usize {
        ManagedKind::ALL.iter().map(|k| self.get(*k)).sum()
    }
}

/// Counts one object per item.
impl FromIterator<ManagedKind> for KindCounts {
    fn from_iter<I: IntoIterator<Item = ManagedKind>>(kinds: I) -> Self {
        let mut counts = KindCounts::default();
        for kind in kinds {
            counts.add(kind);
        }
        counts
    }
}

/// What became of the namespace `cleanup --delete-namespace` named (and found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceOutcome {
    Deleted,
    /// Not deleted on purpose (not ours, holds foreign objects, replaced meanwhile, ...):
    /// the reason, one line. Before deleting (preview, dry run) it means "will be kept".
    Kept {
        reason: String,
    },
    /// The delete was sent and failed after retries: the error, one line.
    Failed {
        error: String,
    },
}

impl NamespaceOutcome {
    pub fn is_deleted(&self) -> bool {
        matches!(self, NamespaceOutcome::Deleted)
    }

    /// Why it was kept, when it was.
    pub fn kept_reason(&self) -> Option<&str> {
        match self {
            NamespaceOutcome::Kept { reason } => Some(reason),
            _ => None,
        }
    }

    /// The error of a failed delete.
    pub fn failure(&self) -> Option<&str> {
        match self {
            NamespaceOutcome::Failed { error } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_collect_per_kind_and_total() {
        let counts: KindCounts = [
            ManagedKind::VirtualMachine,
            ManagedKind::VirtualMachine,
            ManagedKind::DataVolume,
            ManagedKind::PersistentVolumeClaim,
        ]
        .into_iter()
        .collect();
        assert_eq!(counts.vms, 2);
        assert_eq!(counts.get(ManagedKind::DataVolume), 1);
        assert_eq!(counts.get(ManagedKind::Secret), 0);
        assert_eq!(counts.total(), 4);
    }

    #[test]
    fn the_counts_serialise_with_the_documented_keys() {
        let value = serde_json::to_value(KindCounts::default()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys.len(), 7);
        for key in [
            "vms",
            "vmis",
            "services",
            "secrets",
            "dvs",
            "pvcs",
            "migrations",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
    }
}
