//! Who owns a namespace, and whether `cleanup --delete-namespace` may delete it.
//!
//! Ownership is recorded only when virtwork creates a namespace: the annotation
//! [`CREATED_BY_RUN`] carries the creating run's id. An existing namespace is never labelled
//! or annotated by a run. Cleanup deletes a namespace only when all of this holds:
//! its name is not protected (`default`, `kube-*`, `openshift*`, virtwork's own namespaces),
//! virtwork created it (the annotation; the managed-by label alone, which earlier versions
//! put on any namespace they ran in, proves nothing), and it holds nothing virtwork does not
//! manage. The delete then carries the namespace's uid as a precondition, so a namespace
//! recreated meanwhile under the same name is not touched.
//!
//! "Manages" means: carries `app.kubernetes.io/managed-by=virtwork` and a run id (of the run
//! being cleaned up, with `--run-id`; of any run otherwise), or is owned (ownerReferences,
//! transitively) by such an object — the VMIs, virt-launcher Pods, CDI importer Pods and PVCs
//! that KubeVirt and CDI create for our VMs and DataVolumes — or is something the cluster
//! itself puts in every namespace (see [`is_cluster_provided`]). Events (core and
//! `events.k8s.io`) are never read: they are records about other objects, kept for an hour
//! after those are gone, so one about an already-deleted VM would keep a namespace virtwork
//! created; whatever they are about is itself in the namespace or gone.
//!
//! The contents are read from every namespaced resource the server lists in discovery
//! ([`content_resources`]) that the account may list: Deployments, CronJobs, snapshots and any
//! custom resource count when readable. Reading every kind needs `list` on `*`, which would let
//! virtwork's token read the whole cluster, so no shipped role grants it; instead the kinds of
//! [`REQUIRED_CONTENT`] must be readable (a refusal keeps the namespace): the kinds virtwork
//! creates, and RoleBindings. virtwork never creates a RoleBinding, so in a namespace it
//! created, one beyond the cluster's own ([`is_cluster_provided`]) means someone was given
//! rights there and keeps the namespace; without one, only a cluster-wide writer can have put
//! an unreadable kind there (the residual docs/security.md states). A kind refused for any
//! other reason than RBAC, or a discovery that fails, keeps the namespace.
//!
//! Everything here is pure: [`namespace_delete_decision`] and [`classify_contents`] are tested
//! without a cluster; k8s/cleanup/namespace_check.rs does the reading and
//! k8s/cleanup/delete.rs the deleting. Must not: decide anything from
//! a label alone.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels;

/// The annotation a namespace created by virtwork carries: the id of the creating run.
pub const CREATED_BY_RUN: &str = "virtwork/created-by-run";
/// The namespace virtwork's own deployment runs in (deploy/).
pub const TOOL_NAMESPACE: &str = "virtwork-system";

/// ConfigMaps the control plane publishes into every namespace: the API server's CA
/// (kube-controller-manager) and, on OpenShift, the service CA.
const CLUSTER_CONFIGMAPS: [&str; 2] = ["kube-root-ca.crt", "openshift-service-ca.crt"];
/// ServiceAccounts created in every namespace: `default` everywhere, `builder` and `deployer`
/// in every OpenShift project.
const CLUSTER_SERVICE_ACCOUNTS: [&str; 3] = ["default", "builder", "deployer"];
/// RoleBindings OpenShift's controllers put in every namespace.
const CLUSTER_ROLE_BINDINGS: [&str; 3] = [
    "system:image-pullers",
    "system:image-builders",
    "system:deployers",
];
/// API groups whose namespaced resources are views of other objects, not objects of their
/// own: metrics of Pods, the `events.k8s.io` copy of core Events, OLM's package catalog
/// (shown in every namespace) and the cluster quotas that apply to a namespace.
const VIEW_GROUPS: [&str; 4] = [
    "metrics.k8s.io",
    "events.k8s.io",
    "packages.operators.coreos.com",
    "quota.openshift.io",
];
/// Kinds (group, plural) that must be readable for a namespace to be deleted: the kinds
/// virtwork creates (a foreign one of those is what a virtwork account could have made) and
/// RoleBindings (the only way anyone but a cluster-wide writer gets rights in a namespace
/// virtwork created). Any other kind the account may not list is not read.
pub const REQUIRED_CONTENT: [(&str, &str); 8] = [
    ("kubevirt.io", "virtualmachines"),
    ("kubevirt.io", "virtualmachineinstances"),
    ("kubevirt.io", "virtualmachineinstancemigrations"),
    ("", "services"),
    ("", "secrets"),
    ("", "persistentvolumeclaims"),
    ("cdi.kubevirt.io", "datavolumes"),
    ("rbac.authorization.k8s.io", "rolebindings"),
];

/// Whether the namespace's objects of `group`/`plural` must be read to delete it
/// ([`REQUIRED_CONTENT`]).
pub fn must_read(group: &str, plural: &str) -> bool {
    REQUIRED_CONTENT.contains(&(group, plural))
}

/// The Secret types the cluster generates for a ServiceAccount (a token, and OpenShift's
/// image-pull Secret); a Secret of any other type is somebody's, whatever its annotations.
pub const SERVICE_ACCOUNT_SECRET_TYPES: [&str; 2] = [
    "kubernetes.io/service-account-token",
    "kubernetes.io/dockercfg",
];

/// Annotations naming the service account a generated token or pull Secret belongs to.
const SERVICE_ACCOUNT_ANNOTATIONS: [&str; 2] = [
    "kubernetes.io/service-account.name",
    "openshift.io/internal-registry-auth-token.service-account",
];

/// Why a namespace name may never be deleted by virtwork, if it is protected. `own` are the
/// namespaces virtwork itself runs in ([`TOOL_NAMESPACE`], and the pod's namespace when
/// running in a cluster).
pub fn protected_reason(name: &str, own: &[String]) -> Option<String> {
    if name == "default" {
        return Some("it is the cluster's default namespace".to_string());
    }
    if name.starts_with("kube-") {
        return Some("kube-* namespaces belong to Kubernetes itself".to_string());
    }
    if name.starts_with("openshift") {
        return Some("openshift* namespaces belong to the OpenShift platform".to_string());
    }
    if name == TOOL_NAMESPACE || own.iter().any(|o| o == name) {
        return Some("it is the namespace virtwork itself runs in".to_string());
    }
    None
}

/// What cleanup needs to know about the namespace as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceFacts {
    pub uid: String,
    /// The [`CREATED_BY_RUN`] annotation.
    pub created_by_run: Option<String>,
    /// Carries `app.kubernetes.io/managed-by=virtwork` (what earlier versions put on any
    /// namespace they ran in).
    pub managed_label: bool,
    /// Already being deleted.
    pub terminating: bool,
}

impl NamespaceFacts {
    pub fn of(namespace: &Namespace) -> Self {
        let meta = &namespace.metadata;
        NamespaceFacts {
            uid: meta.uid.clone().unwrap_or_default(),
            created_by_run: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(CREATED_BY_RUN))
                .filter(|v| !v.is_empty())
                .cloned(),
            managed_label: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::MANAGED_BY))
                .is_some_and(|v| v == labels::MANAGED_BY_VALUE),
            terminating: meta.deletion_timestamp.is_some(),
        }
    }
}

/// One resource type as the server's discovery lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    /// The plural, or `plural/subresource`.
    pub name: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

/// The resources whose objects make up a namespace's contents, from everything discovery
/// lists (each group's preferred version first): namespaced, listable, not a subresource, not
/// a view of other objects ([`VIEW_GROUPS`]), not core Events, each group and plural once.
pub fn content_resources(discovered: &[DiscoveredResource]) -> Vec<DiscoveredResource> {
    let mut seen = BTreeSet::new();
    discovered
        .iter()
        .filter(|r| {
            r.namespaced
                && !r.name.contains('/')
                && r.verbs.iter().any(|v| v == "list")
                && !is_view_group(&r.group)
                && !(r.group.is_empty() && r.name == "events")
        })
        .filter(|r| seen.insert((r.group.clone(), r.name.clone())))
        .cloned()
        .collect()
}

/// Whether `group`'s namespaced resources are views of other objects ([`VIEW_GROUPS`]): not
/// read at all, so an aggregated API that is down (metrics-server) does not keep a namespace.
pub fn is_view_group(group: &str) -> bool {
    VIEW_GROUPS.contains(&group)
}

/// One object found in the namespace (any kind), reduced to what ownership needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentObject {
    /// Kind as shown in messages (`Pod`, `ConfigMap`, ...).
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// The run that made it, when made by a virtwork run (managed-by and run-id labels).
    pub run: Option<String>,
    /// Uids of its ownerReferences, and for an Event the uid of the object it is about.
    pub owners: Vec<String>,
    /// The service account a token or pull Secret was generated for.
    pub service_account: Option<String>,
    /// A Secret of one of [`SERVICE_ACCOUNT_SECRET_TYPES`] (the caller knows the type; the
    /// metadata does not carry it). False for every other kind.
    pub service_account_type: bool,
}

impl ContentObject {
    pub fn from_meta(kind: &str, meta: &ObjectMeta) -> Self {
        ContentObject {
            kind: kind.to_string(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            run: labels::made_by_a_run(meta.labels.as_ref())
                .then(|| meta.labels.as_ref()?.get(labels::RUN_ID).cloned())
                .flatten(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect(),
            service_account: meta.annotations.as_ref().and_then(|a| {
                SERVICE_ACCOUNT_ANNOTATIONS
                    .iter()
                    .find_map(|k| a.get(*k).cloned())
            }),
            service_account_type: false,
        }
    }

    fn shown(&self) -> String {
        match &self.run {
            Some(run) => format!("{} {} (run {run})", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Whether the cluster itself puts `object` in every namespace, so it says nothing about who
/// else uses the namespace: the CA ConfigMaps, the per-namespace ServiceAccounts, and the
/// token and image-pull Secrets generated for those ServiceAccounts (which only work while
/// their ServiceAccount exists, and it goes with the namespace). A Secret counts only with a
/// service-account type: anyone may annotate an Opaque Secret with `default`'s name.
pub fn is_cluster_provided(object: &ContentObject) -> bool {
    match object.kind.as_str() {
        "RoleBinding" => CLUSTER_ROLE_BINDINGS.contains(&object.name.as_str()),
        "ConfigMap" => CLUSTER_CONFIGMAPS.contains(&object.name.as_str()),
        "ServiceAccount" => CLUSTER_SERVICE_ACCOUNTS.contains(&object.name.as_str()),
        "Secret" => {
            object.service_account_type
                && object
                    .service_account
                    .as_deref()
                    .is_some_and(|sa| CLUSTER_SERVICE_ACCOUNTS.contains(&sa))
        }
        _ => false,
    }
}

/// The namespace's contents sorted into virtwork's (and the cluster's) and everything else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Uids of the objects that are virtwork's or the cluster's.
    pub ours: BTreeSet<String>,
    /// Everything else as `Kind name`, sorted.
    pub foreign: Vec<String>,
}

/// Sorts `objects`: made by a virtwork run (the run `run_filter` when given: another run's
/// objects are not this cleanup's to take down with the namespace), cluster-provided, or with
/// a uid in `known_ours` (what an earlier check found to be ours; its owner may be gone by
/// now) are ours, and so is anything owned, transitively, by an object of ours.
pub fn classify_contents(
    objects: &[ContentObject],
    known_ours: &BTreeSet<String>,
    run_filter: Option<&str>,
) -> Contents {
    let mut ours: BTreeSet<String> = known_ours.clone();
    let mut pending: Vec<&ContentObject> = Vec::new();
    for object in objects {
        let this_cleanups = object
            .run
            .as_deref()
            .is_some_and(|run| run_filter.is_none_or(|wanted| wanted == run));
        if this_cleanups || is_cluster_provided(object) || known_ours.contains(&object.uid) {
            ours.insert(object.uid.clone());
        } else {
            pending.push(object);
        }
    }
    // Ownership chains (VM → VMI → Pod, DataVolume → PVC → importer Pod) are short, but
    // repeat until nothing changes rather than assume a depth.
    loop {
        let before = pending.len();
        pending.retain(|object| {
            let owned = object.owners.iter().any(|o| ours.contains(o));
            if owned {
                ours.insert(object.uid.clone());
            }
            !owned
        });
        if pending.len() == before {
            break;
        }
    }
    let mut foreign: Vec<String> = pending.iter().map(|o| o.shown()).collect();
    foreign.sort();
    foreign.dedup();
    Contents { ours, foreign }
}

/// The outcome of reading the namespace's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentsCheck {
    /// Not read yet.
    NotChecked,
    /// Read; these objects are not virtwork's (may be empty).
    Foreign(Vec<String>),
    /// Could not be read completely (e.g. not allowed to list Pods): one line.
    Failed(String),
}

/// What cleanup does with the namespace it was asked to delete.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NamespaceVerdict {
    /// Delete it, with this uid as the precondition.
    Delete { uid: String },
    /// Ownership is established; whether it is empty of foreign objects decides.
    CheckContents,
    /// Keep it, for this reason (one line, for messages and JSON).
    Keep(String),
    /// Does not exist, or is already being deleted.
    Absent,
}

/// Decides about deleting namespace `name`: `own` are virtwork's own namespaces, `found` the
/// namespace as read (None: absent), `contents` what is in it. The checks run in order:
/// protected name, existence, who created it, then contents; a verdict of
/// [`NamespaceVerdict::CheckContents`] asks the caller to read the contents and decide again.
pub fn namespace_delete_decision(
    name: &str,
    own: &[String],
    found: Option<&NamespaceFacts>,
    contents: &ContentsCheck,
) -> NamespaceVerdict {
    if let Some(reason) = protected_reason(name, own) {
        return NamespaceVerdict::Keep(reason);
    }
    let Some(facts) = found else {
        return NamespaceVerdict::Absent;
    };
    if facts.terminating {
        return NamespaceVerdict::Absent;
    }
    if facts.created_by_run.is_none() {
        return NamespaceVerdict::Keep(if facts.managed_label {
            format!(
                "it carries {}={} but no {CREATED_BY_RUN} annotation: an earlier virtwork \
                 labelled every namespace it ran in, so the label does not show who created it",
                labels::MANAGED_BY,
                labels::MANAGED_BY_VALUE
            )
        } else {
            format!("virtwork did not create it (no {CREATED_BY_RUN} annotation)")
        });
    }
    match contents {
        ContentsCheck::NotChecked => NamespaceVerdict::CheckContents,
        ContentsCheck::Failed(error) => NamespaceVerdict::Keep(format!(
            "could not check it for objects virtwork does not manage: {error}"
        )),
        ContentsCheck::Foreign(foreign) if foreign.is_empty() => NamespaceVerdict::Delete {
            uid: facts.uid.clone(),
        },
        ContentsCheck::Foreign(foreign) => {
            let shown: Vec<&str> = foreign.iter().take(3).map(String::as_str).collect();
            let more = foreign.len().saturating_sub(shown.len());
            NamespaceVerdict::Keep(format!(
                "it holds {} object(s) virtwork does not manage: {}{}",
                foreign.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(created_by: Option<&str>, label: bool) -> NamespaceFacts {
        NamespaceFacts {
            uid: "ns-uid".into(),
            created_by_run: created_by.map(String::from),
            managed_label: label,
            terminating: false,
        }
    }

    const RUN: &str = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";

    #[test]
    fn protected_names_are_kept_whatever_else_holds() {
        let own = vec!["tools".to_string()];
        let created = facts(Some(RUN), true);
        for name in [
            "default",
            "kube-system",
            "kube-public",
            "openshift",
            "openshift-cnv",
            "virtwork-system",
            "tools",
        ] {
            let verdict = namespace_delete_decision(
                name,
                &own,
                Some(&created),
                &ContentsCheck::Foreign(vec![]),
            );
            assert!(
                matches!(verdict, NamespaceVerdict::Keep(_)),
                "{name}: {verdict:?}"
            );
        }
        assert_eq!(protected_reason("kubevirt-test", &own), None);
        assert_eq!(protected_reason("virtwork", &own), None);
    }

    #[test]
    fn only_a_namespace_virtwork_created_and_that_holds_nothing_foreign_is_deleted() {
        let none: Vec<String> = Vec::new();
        let empty = ContentsCheck::Foreign(vec![]);
        assert_eq!(
            namespace_delete_decision("vw", &none, None, &empty),
            NamespaceVerdict::Absent
        );
        let mut terminating = facts(Some(RUN), true);
        terminating.terminating = true;
        assert_eq!(
            namespace_delete_decision("vw", &none, Some(&terminating), &empty),
            NamespaceVerdict::Absent
        );
        // Labelled by an earlier version, or not ours at all.
        for (label, needle) in [(true, "earlier virtwork"), (false, "did not create it")] {
            match namespace_delete_decision("vw", &none, Some(&facts(None, label)), &empty) {
                NamespaceVerdict::Keep(reason) => assert!(reason.contains(needle), "{reason}"),
                other => panic!("{other:?}"),
            }
        }
        let ours = facts(Some(RUN), true);
        assert_eq!(
            namespace_delete_decision("vw", &none, Some(&ours), &ContentsCheck::NotChecked),
            NamespaceVerdict::CheckContents
        );
        assert_eq!(
            namespace_delete_decision("vw", &none, Some(&ours), &empty),
            NamespaceVerdict::Delete {
                uid: "ns-uid".into()
            }
        );
        let foreign = ContentsCheck::Foreign(
            ["ConfigMap a", "Pod b", "Secret c", "Service d"]
                .map(String::from)
                .to_vec(),
        );
        match namespace_delete_decision("vw", &none, Some(&ours), &foreign) {
            NamespaceVerdict::Keep(reason) => assert_eq!(
                reason,
                "it holds 4 object(s) virtwork does not manage: ConfigMap a, Pod b, Secret c and 1 more"
            ),
            other => panic!("{other:?}"),
        }
        let failed = ContentsCheck::Failed("pods is forbidden".into());
        assert!(matches!(
            namespace_delete_decision("vw", &none, Some(&ours), &failed),
            NamespaceVerdict::Keep(r) if r.contains("pods is forbidden")
        ));
    }

    fn object(kind: &'static str, name: &str, managed: bool, owners: &[&str]) -> ContentObject {
        ContentObject {
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            run: managed.then(|| RUN.to_string()),
            owners: owners.iter().map(|o| o.to_string()).collect(),
            service_account: None,
            service_account_type: false,
        }
    }

    #[test]
    fn dependents_of_ours_and_what_the_cluster_provides_are_not_foreign() {
        let mut token = object("Secret", "default-dockercfg-x7k2p", false, &[]);
        token.service_account = Some("default".into());
        token.service_account_type = true;
        let mut app_token = object("Secret", "app-token", false, &[]);
        app_token.service_account = Some("app".into());
        app_token.service_account_type = true;
        // Annotated for `default`, but Opaque: anyone's.
        let mut posing = object("Secret", "db-password", false, &[]);
        posing.service_account = Some("default".into());
        let objects = vec![
            object("VirtualMachine", "vm-0", true, &[]),
            object("VirtualMachineInstance", "vm-0", true, &["uid-vm-0"]),
            // Pod owned by the VMI, PVC owned by a DataVolume owned by the VM, importer
            // Pod owned by the PVC: listed before their owners on purpose.
            object("Pod", "importer-disk", false, &["uid-disk"]),
            object("Pod", "virt-launcher-vm-0-abcde", false, &["uid-vm-0"]),
            object("PersistentVolumeClaim", "disk", false, &["uid-dv"]),
            object("DataVolume", "dv", false, &["uid-vm-0"]),
            object("ConfigMap", "kube-root-ca.crt", false, &[]),
            object("ConfigMap", "openshift-service-ca.crt", false, &[]),
            object("ServiceAccount", "default", false, &[]),
            object("ServiceAccount", "deployer", false, &[]),
            token,
            // Foreign: unlabelled, another manager's, owned by something foreign.
            object("ConfigMap", "app-config", false, &[]),
            object("ServiceAccount", "app", false, &[]),
            app_token,
            posing,
            object("Pod", "web-0", false, &["uid-statefulset"]),
        ];
        let contents = classify_contents(&objects, &BTreeSet::new(), None);
        assert_eq!(
            contents.foreign,
            vec![
                "ConfigMap app-config",
                "Pod web-0",
                "Secret app-token",
                "Secret db-password",
                "ServiceAccount app"
            ]
        );
        // A PVC whose DataVolume is already gone still counts once an earlier check knew it.
        let orphan = vec![object(
            "PersistentVolumeClaim",
            "disk",
            false,
            &["uid-gone"],
        )];
        assert_eq!(
            classify_contents(&orphan, &BTreeSet::new(), None)
                .foreign
                .len(),
            1
        );
        assert!(
            classify_contents(&orphan, &contents.ours, None)
                .foreign
                .is_empty()
        );
    }

    #[test]
    fn another_runs_objects_keep_the_namespace_when_one_run_is_cleaned_up() {
        const OTHER: &str = "7d3e2f10-8a4b-4c5d-9e6f-0a1b2c3d4e5f";
        let mut theirs = object("VirtualMachine", "vm-b", true, &[]);
        theirs.run = Some(OTHER.into());
        let objects = vec![
            object("VirtualMachine", "vm-a", true, &[]),
            object("Pod", "virt-launcher-vm-a-x", false, &["uid-vm-a"]),
            theirs,
            object("Pod", "virt-launcher-vm-b-y", false, &["uid-vm-b"]),
        ];
        let all = classify_contents(&objects, &BTreeSet::new(), None);
        assert!(all.foreign.is_empty(), "{:?}", all.foreign);
        let one = classify_contents(&objects, &BTreeSet::new(), Some(RUN));
        assert_eq!(
            one.foreign,
            vec![
                "Pod virt-launcher-vm-b-y".to_string(),
                format!("VirtualMachine vm-b (run {OTHER})")
            ]
        );
    }

    #[test]
    fn an_event_is_ours_only_when_it_is_about_an_object_of_ours() {
        let objects = vec![
            object("VirtualMachine", "vm-a", true, &[]),
            object("Event", "vm-a.1", false, &["uid-vm-a"]),
            object("Event", "web.2", false, &["uid-web"]),
            object("RoleBinding", "system:image-pullers", false, &[]),
            object("RoleBinding", "team-edit", false, &[]),
        ];
        let contents = classify_contents(&objects, &BTreeSet::new(), None);
        assert_eq!(
            contents.foreign,
            vec!["Event web.2", "RoleBinding team-edit"]
        );
    }

    fn discovered(group: &str, name: &str, namespaced: bool, verbs: &[&str]) -> DiscoveredResource {
        DiscoveredResource {
            group: group.into(),
            version: "v1".into(),
            name: name.into(),
            kind: name.into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn contents_come_from_every_listable_namespaced_resource_but_views() {
        let list = &["get", "list", "watch", "delete"];
        let found = content_resources(&[
            discovered("apps", "deployments", true, list),
            discovered("apps", "deployments/status", true, &["get", "patch"]),
            discovered("apps", "deployments", true, list),
            discovered("", "namespaces", false, list),
            discovered("", "bindings", true, &["create"]),
            discovered("example.com", "widgets", true, list),
            discovered("metrics.k8s.io", "pods", true, list),
            discovered("events.k8s.io", "events", true, list),
            discovered("", "events", true, list),
        ]);
        let names: Vec<String> = found
            .iter()
            .map(|r| format!("{}/{}", r.group, r.name))
            .collect();
        assert_eq!(names, ["apps/deployments", "example.com/widgets"]);
    }
}
