//! What `virtwork cleanup` finds in its scope: every managed object of every kind, sorted, the
//! VMIs left to garbage collection (their VM is deleted too) told apart from orphans, the
//! deletion phases, and, with `--delete-namespace`, the namespace's verdict.
//!
//! Must not: delete or wait; decide about the namespace itself ([`super::namespace_check`]).

use std::collections::BTreeSet;

use super::namespace_check::{NamespaceCheck, namespace_verdict};
use crate::error::{Error, Result};
use crate::k8s::namespace::NamespaceVerdict;
use crate::k8s::scope::{ApiContext, ManagedObject, Scope, list_managed};
use crate::model::{KindCounts, ManagedKind};

/// Counts per kind of `objects`.
pub fn count_kinds<'a>(objects: impl IntoIterator<Item = &'a ManagedObject>) -> KindCounts {
    objects.into_iter().map(|o| o.kind).collect()
}

/// Everything discovery found, sorted by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Objects to delete: VMs, VMIs left without a VM, Services, Secrets, DataVolumes, PVCs.
    pub to_delete: Vec<ManagedObject>,
    /// VMIs whose VM is also being deleted: garbage collection removes them; `--wait` waits.
    pub owned_vmis: Vec<ManagedObject>,
    /// The namespace named with `--delete-namespace`, and what to do with it
    /// ([`NamespaceVerdict::Delete`], [`NamespaceVerdict::Keep`] or
    /// [`NamespaceVerdict::Absent`]).
    pub namespace: Option<(String, NamespaceVerdict)>,
    /// What the namespace decision was based on.
    pub namespace_check: NamespaceCheck,
    /// Kinds that could not be listed (a 403 for a user without that permission, a 404, a
    /// server error past the retries). Cleanup deletes everything else and reports these;
    /// what they hold stays.
    pub unlisted: Vec<Unlisted>,
}

/// A kind discovery could not list in `namespace` (empty: every namespace), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unlisted {
    pub kind: ManagedKind,
    pub namespace: String,
    /// The failed list as one line (`listing services in ns: ...`).
    pub error: String,
}

impl Discovery {
    /// Builds the discovery from the listed objects of every kind (already in scope).
    /// A VMI is an orphan (deleted directly) when no VM of the same name and namespace
    /// was found.
    pub fn from_objects(objects: impl IntoIterator<Item = ManagedObject>) -> Self {
        let mut all: Vec<ManagedObject> = objects.into_iter().collect();
        all.sort();
        all.dedup_by(|a, b| a.kind == b.kind && a.namespace == b.namespace && a.name == b.name);
        let vm_names: BTreeSet<(String, String)> = all
            .iter()
            .filter(|o| o.kind == ManagedKind::VirtualMachine)
            .map(|o| (o.namespace.clone(), o.name.clone()))
            .collect();
        let (owned_vmis, to_delete) = all.into_iter().partition(|o| {
            o.kind == ManagedKind::VirtualMachineInstance
                && vm_names.contains(&(o.namespace.clone(), o.name.clone()))
        });
        Discovery {
            to_delete,
            owned_vmis,
            namespace: None,
            namespace_check: NamespaceCheck::default(),
            unlisted: Vec::new(),
        }
    }

    /// Counts per kind of the objects to delete.
    pub fn counts(&self) -> KindCounts {
        count_kinds(&self.to_delete)
    }

    /// Distinct run ids over everything found, sorted.
    pub fn run_ids(&self) -> Vec<String> {
        self.to_delete
            .iter()
            .chain(&self.owned_vmis)
            .filter_map(|o| o.run_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Whether the namespace will be deleted.
    pub fn deletes_namespace(&self) -> bool {
        matches!(self.namespace, Some((_, NamespaceVerdict::Delete { .. })))
    }

    /// The namespace `--delete-namespace` named that will be kept, and why.
    pub fn kept_namespace(&self) -> Option<(&str, &str)> {
        match &self.namespace {
            Some((ns, NamespaceVerdict::Keep(reason))) => Some((ns.as_str(), reason.as_str())),
            _ => None,
        }
    }

    /// Whether there is nothing at all to do (no object and no namespace to delete).
    pub fn is_empty(&self) -> bool {
        self.to_delete.is_empty() && !self.deletes_namespace()
    }

    /// The deletion phases: VMs first (so their controllers do not recreate what we
    /// delete), then everything else. Each phase runs concurrently.
    pub fn deletion_phases(&self) -> Vec<Vec<ManagedObject>> {
        let (vms, rest): (Vec<_>, Vec<_>) = self
            .to_delete
            .iter()
            .cloned()
            .partition(|o| o.kind == ManagedKind::VirtualMachine);
        [vms, rest].into_iter().filter(|p| !p.is_empty()).collect()
    }
}

/// Finds everything in `scope`; with `delete_namespace`, also decides about the namespace
/// (never one of `own_namespaces`, virtwork's own).
pub async fn discover(
    ctx: &ApiContext,
    scope: &Scope,
    delete_namespace: bool,
    own_namespaces: &[String],
) -> Result<Discovery> {
    let mut objects = Vec::new();
    let mut unlisted = Vec::new();
    let mut first_error = None;
    for kind in ManagedKind::ALL {
        match list_managed(ctx, scope, kind).await {
            Ok(found) => objects.extend(found),
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            // One kind the user may not list must not stop the cleanup of the others: it is
            // label-driven precisely so that it works when things are half broken.
            Err(error) => {
                unlisted.push(Unlisted {
                    kind,
                    namespace: scope.namespace.clone().unwrap_or_default(),
                    error: error.to_string(),
                });
                first_error.get_or_insert(error);
            }
        }
    }
    // Nothing could be listed at all: that is the cluster's answer, not a partial cleanup.
    if unlisted.len() == ManagedKind::ALL.len()
        && let Some(error) = first_error
    {
        return Err(error);
    }
    let mut discovery = Discovery::from_objects(objects);
    discovery.unlisted = unlisted;
    if delete_namespace && let Some(ns) = &scope.namespace {
        discovery.namespace_check.own = own_namespaces.to_vec();
        discovery.namespace_check.run_id = scope.run_id.clone();
        let (verdict, ours) =
            namespace_verdict(ctx, ns, &discovery.namespace_check, &BTreeSet::new()).await?;
        discovery.namespace_check.ours = ours;
        discovery.namespace = Some((ns.clone(), verdict));
    }
    Ok(discovery)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::scope::fixtures::*;

    #[test]
    fn vmis_with_a_vm_are_left_to_garbage_collection() {
        let d = Discovery::from_objects(vec![
            object(ManagedKind::VirtualMachineInstance, "vm-0", RUN_A),
            object(ManagedKind::VirtualMachine, "vm-0", RUN_A),
            object(ManagedKind::VirtualMachineInstance, "orphan", RUN_B),
            object(ManagedKind::Secret, "vm-0-cloudinit", RUN_A),
        ]);
        assert_eq!(d.owned_vmis.len(), 1);
        assert_eq!(d.owned_vmis[0].name, "vm-0");
        let counts = d.counts();
        assert_eq!((counts.vms, counts.vmis, counts.secrets), (1, 1, 1));
        assert_eq!(counts.total(), 3);
        assert_eq!(d.run_ids(), vec![RUN_A.to_string(), RUN_B.to_string()]);
    }

    #[test]
    fn run_ids_are_sorted_and_distinct() {
        let d = Discovery::from_objects(vec![
            object(ManagedKind::Secret, "s2", RUN_B),
            object(ManagedKind::Secret, "s1", RUN_A),
            object(ManagedKind::Service, "svc", RUN_B),
        ]);
        assert_eq!(d.run_ids(), vec![RUN_A.to_string(), RUN_B.to_string()]);
    }

    #[test]
    fn vms_are_deleted_in_a_phase_before_everything_else() {
        let d = Discovery::from_objects(vec![
            object(ManagedKind::PersistentVolumeClaim, "pvc", RUN_A),
            object(ManagedKind::Secret, "s", RUN_A),
            object(ManagedKind::VirtualMachine, "b", RUN_A),
            object(ManagedKind::VirtualMachine, "a", RUN_A),
            object(ManagedKind::DataVolume, "dv", RUN_A),
        ]);
        let phases = d.deletion_phases();
        assert_eq!(phases.len(), 2);
        assert!(
            phases[0]
                .iter()
                .all(|o| o.kind == ManagedKind::VirtualMachine)
        );
        assert_eq!(phases[0].len(), 2);
        assert!(
            phases[1]
                .iter()
                .all(|o| o.kind != ManagedKind::VirtualMachine)
        );
        assert_eq!(phases[1].len(), 3);
    }

    #[test]
    fn nothing_to_delete_but_the_namespace_is_not_empty() {
        let mut d = Discovery::default();
        assert!(d.is_empty());
        d.namespace = Some((
            "virtwork".into(),
            NamespaceVerdict::Delete { uid: "u".into() },
        ));
        assert!(!d.is_empty());
        assert!(d.deletion_phases().is_empty());
        d.namespace = Some(("virtwork".into(), NamespaceVerdict::Absent));
        assert!(d.is_empty());
    }
}
