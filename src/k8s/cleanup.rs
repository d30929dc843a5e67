//! Label-scoped discovery, deletion and `--wait` for `virtwork cleanup`.
//!
//! Only objects carrying `app.kubernetes.io/managed-by=virtwork` (and, with `--run-id`, that
//! run's id) are ever listed, deleted or waited on: the label selector does the filtering on
//! the server and [`ManagedObject::from_meta`] checks it again on every returned object, so a
//! server that ignored the selector still cannot make us delete a foreign object. Deletes carry
//! a uid precondition, so an object replaced between listing and deleting is not touched either.
//!
//! The decisions (what is managed, which VMIs are orphans, deletion phases, outcome
//! aggregation, the wait bookkeeping) are plain functions and types tested without a cluster;
//! the async functions at the bottom only move objects between the API server and them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use std::future::Future;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectList, Preconditions, PropagationPolicy,
};
use kube::core::{ApiResource, DynamicResourceScope, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;

use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::k8s::list::{LIST_PAGE_SIZE, list_pages};
use crate::k8s::namespace::{
    ContentObject, ContentsCheck, DiscoveredResource, NamespaceFacts, NamespaceVerdict,
    classify_contents, content_resources, is_view_group, namespace_delete_decision,
    protected_reason,
};
use crate::k8s::ready::WATCH_TIMEOUT_SECS;
use crate::k8s::retry::{RetryError, RetryPolicy, retry};
use crate::kubevirt::{
    DataVolume, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration,
};
use crate::labels;
pub use crate::model::{KindCounts, ManagedKind, NamespaceOutcome};

/// Deletes in flight at once; the shared client rate limit is the real bound on throughput.
pub const DELETE_CONCURRENCY: usize = 32;

// The API side of the shared kind vocabulary (an inherent impl may live anywhere in the
// crate; the model stays free of kube).
impl ManagedKind {
    /// Group, version, kind and plural on the API server, from the typed resource itself.
    pub fn api_resource(self) -> ApiResource {
        match self {
            ManagedKind::VirtualMachine => ApiResource::erase::<VirtualMachine>(&()),
            ManagedKind::VirtualMachineInstance => {
                ApiResource::erase::<VirtualMachineInstance>(&())
            }
            ManagedKind::Service => ApiResource::erase::<Service>(&()),
            ManagedKind::Secret => ApiResource::erase::<Secret>(&()),
            ManagedKind::DataVolume => ApiResource::erase::<DataVolume>(&()),
            ManagedKind::PersistentVolumeClaim => ApiResource::erase::<PersistentVolumeClaim>(&()),
            ManagedKind::VirtualMachineInstanceMigration => {
                ApiResource::erase::<VirtualMachineInstanceMigration>(&())
            }
        }
    }
}

/// Where cleanup and status look: one namespace or all of them, optionally one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `None` means every namespace (`--all-namespaces`).
    pub namespace: Option<String>,
    /// `--run-id`, already validated as a UUID.
    pub run_id: Option<String>,
}

impl Scope {
    /// The label selector of this scope.
    pub fn selector(&self) -> String {
        labels::managed_selector(self.run_id.as_deref())
    }

    /// What to print for the namespace (`*` for all namespaces).
    pub fn namespace_display(&self) -> &str {
        self.namespace.as_deref().unwrap_or("*")
    }

    /// An `Api` for `kind` in this scope.
    pub fn api(&self, client: &Client, kind: ManagedKind) -> Api<DynamicObject> {
        self.api_as(client, kind)
    }

    /// An `Api` for `kind` in this scope whose objects are read as `K` (a type that keeps
    /// only the fields its caller reads, so a large list is never held whole).
    pub fn api_as<K>(&self, client: &Client, kind: ManagedKind) -> Api<K>
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>,
    {
        let resource = kind.api_resource();
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }

    /// A metadata-only `Api` for `kind` in this scope: its lists and watches carry no spec,
    /// status or Secret data.
    pub fn metadata_api(
        &self,
        client: &Client,
        kind: ManagedKind,
    ) -> Api<PartialObjectMeta<DynamicObject>> {
        let resource = kind.api_resource();
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }

    /// Whether `meta` carries the labels of this scope (the client-side re-check).
    pub fn matches(&self, meta: &ObjectMeta) -> bool {
        let labels = meta.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        if !labels::made_by_a_run(labels) {
            return false;
        }
        if let Some(ns) = &self.namespace
            && meta.namespace.as_deref() != Some(ns.as_str())
        {
            return false;
        }
        match &self.run_id {
            Some(id) => label(labels::RUN_ID) == Some(id.as_str()),
            None => true,
        }
    }
}

/// One managed object found by discovery.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ManagedObject {
    pub kind: ManagedKind,
    pub namespace: String,
    pub name: String,
    /// Non-empty `virtwork/run-id` label value.
    pub run_id: Option<String>,
    #[serde(skip)]
    pub uid: Option<String>,
}

impl ManagedObject {
    /// The object behind `meta` when it is in `scope`, `None` for anything else.
    pub fn from_meta(kind: ManagedKind, meta: &ObjectMeta, scope: &Scope) -> Option<Self> {
        if !scope.matches(meta) {
            return None;
        }
        Some(ManagedObject {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
            run_id: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::RUN_ID))
                .filter(|id| !id.is_empty())
                .cloned(),
            uid: meta.uid.clone(),
        })
    }

    /// `namespace/name`.
    pub fn display_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Counts per kind of `objects`.
pub fn count_kinds<'a>(objects: impl IntoIterator<Item = &'a ManagedObject>) -> KindCounts {
    objects.into_iter().map(|o| o.kind).collect()
}

/// What `--delete-namespace` found out about the namespace, for the decision right before the
/// delete (see [`crate::k8s::namespace`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceCheck {
    /// virtwork's own namespaces, never deleted.
    pub own: Vec<String>,
    /// Uids of the namespace's objects that were virtwork's (or the cluster's) at discovery;
    /// they still count as ours when their owners are already gone.
    pub ours: BTreeSet<String>,
    /// `--run-id`: only that run's objects may go with the namespace.
    pub run_id: Option<String>,
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

/// What happened to one object's delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// NotFound: someone (usually garbage collection) was faster.
    AlreadyGone,
    /// Any other error after retries, as one line.
    Failed(String),
    /// Not attempted because the user interrupted.
    NotAttempted,
}

/// An object whose delete failed, for the warnings at the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeleteFailure {
    pub kind: ManagedKind,
    pub namespace: String,
    pub name: String,
    pub error: String,
}

impl fmt::Display for DeleteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "deleting {} {}/{}: {}",
            self.kind.noun(),
            self.namespace,
            self.name,
            self.error
        )
    }
}

/// The aggregated result of a cleanup execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupOutcome {
    /// Objects this cleanup deleted, sorted.
    pub deleted: Vec<ManagedObject>,
    /// Objects already gone when we came to delete them.
    pub already_gone: Vec<ManagedObject>,
    /// Per-object failures, sorted by kind, namespace and name.
    pub failures: Vec<DeleteFailure>,
    /// Objects not attempted because of an interrupt.
    pub not_attempted: Vec<ManagedObject>,
    /// The namespace `--delete-namespace` named and what became of it; `None` when it was not
    /// asked for, absent, or the delete was not attempted (interrupt, gone meanwhile).
    pub namespace: Option<(String, NamespaceOutcome)>,
    pub interrupted: bool,
}

impl CleanupOutcome {
    /// Records the outcome of one object's delete.
    pub fn record(&mut self, object: ManagedObject, outcome: DeleteOutcome) {
        match outcome {
            DeleteOutcome::Deleted => self.deleted.push(object),
            DeleteOutcome::AlreadyGone => self.already_gone.push(object),
            DeleteOutcome::NotAttempted => self.not_attempted.push(object),
            DeleteOutcome::Failed(error) => self.failures.push(DeleteFailure {
                kind: object.kind,
                namespace: object.namespace,
                name: object.name,
                error,
            }),
        }
    }

    /// Records what became of namespace `ns`.
    pub fn record_namespace(&mut self, ns: &str, outcome: NamespaceOutcome) {
        self.namespace = Some((ns.to_string(), outcome));
    }

    /// Sorts every list so that reports are deterministic.
    pub fn finish(&mut self) {
        self.deleted.sort();
        self.already_gone.sort();
        self.failures.sort();
        self.not_attempted.sort();
    }

    /// Deleted objects per kind.
    pub fn deleted_counts(&self) -> KindCounts {
        count_kinds(&self.deleted)
    }

    /// Objects already gone per kind.
    pub fn already_gone_counts(&self) -> KindCounts {
        count_kinds(&self.already_gone)
    }

    /// Whether the namespace was deleted.
    pub fn namespace_deleted(&self) -> bool {
        self.namespace.as_ref().is_some_and(|(_, o)| o.is_deleted())
    }

    /// The namespace that was kept, and why.
    pub fn namespace_kept(&self) -> Option<(&str, &str)> {
        let (ns, outcome) = self.namespace.as_ref()?;
        Some((ns.as_str(), outcome.kept_reason()?))
    }

    /// Every failed delete as one line (`deleting secret ns/name: ...`): the objects in
    /// order, then the namespace.
    pub fn failure_lines(&self) -> Vec<String> {
        let namespace = self.namespace.as_ref().and_then(|(ns, outcome)| {
            outcome
                .failure()
                .map(|error| format!("deleting namespace {ns}: {error}"))
        });
        self.failures
            .iter()
            .map(ToString::to_string)
            .chain(namespace)
            .collect()
    }

    /// Whether any delete failed, the namespace's included (exit code 1).
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty()
            || self
                .namespace
                .as_ref()
                .is_some_and(|(_, o)| o.failure().is_some())
    }
}

/// Turns a delete result into an outcome: NotFound is "already gone".
pub fn classify_delete<T>(result: std::result::Result<T, kube::Error>) -> DeleteOutcome {
    match result {
        Ok(_) => DeleteOutcome::Deleted,
        Err(kube::Error::Api(status)) if status.is_not_found() => DeleteOutcome::AlreadyGone,
        Err(err) => DeleteOutcome::Failed(one_line(&err)),
    }
}

/// A kube error as one line, with the API status reason and code when there is one, safe
/// for a terminal (the message is escaped and capped; see [`crate::error::kube_text`]).
pub fn one_line(err: &kube::Error) -> String {
    let text = match err {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", crate::terminal::safe(&status.reason, 64))
            };
            let message = crate::terminal::safe(&status.message, crate::terminal::MESSAGE_CHARS);
            format!("{message}{reason}: HTTP {}", status.code)
        }
        other => crate::error::kube_text(other),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Bookkeeping of `--wait`: which of the expected objects, and of their dependents, are
/// still present.
///
/// Expected are the objects cleanup deleted (plus VMIs of deleted VMs). Any object whose
/// `ownerReferences` name an expected object's uid becomes expected too, transitively: that
/// is how garbage-collected dependents that carry no labels of ours (a DataVolume's PVC)
/// are waited for. Each watched kind reports its initial listing (`begin_listing`/`listed`/
/// `end_listing`) and then changes; the wait is over once every watched kind has been
/// listed at least once and no expected object is present any more.
#[derive(Debug, Clone, Default)]
pub struct GoneTracker {
    /// Expected objects keyed by (kind, namespace, name), with their uid when known.
    expected: BTreeMap<ObjectKey, Option<String>>,
    /// Uids of expected objects: owners whose dependents we wait for.
    owner_uids: BTreeSet<String>,
    /// Seen, not (yet) expected objects with their uid and owner uids, per kind.
    others: BTreeMap<ObjectKey, (String, Vec<String>)>,
    present: BTreeSet<ObjectKey>,
    relisting: BTreeMap<ManagedKind, BTreeSet<ObjectKey>>,
    watched: BTreeSet<ManagedKind>,
    listed: BTreeSet<ManagedKind>,
    /// The namespace to see gone, and whether it is still present (None until listed).
    namespace: Option<(String, Option<bool>)>,
}

type ObjectKey = (ManagedKind, String, String);

/// Kinds that can be garbage-collected dependents of what cleanup deletes.
const DEPENDENT_KINDS: [ManagedKind; 3] = [
    ManagedKind::VirtualMachineInstance,
    ManagedKind::DataVolume,
    ManagedKind::PersistentVolumeClaim,
];

impl GoneTracker {
    /// Tracks `objects` (and the namespace, if it was deleted).
    pub fn new<'a>(
        objects: impl IntoIterator<Item = &'a ManagedObject>,
        namespace: Option<&str>,
    ) -> Self {
        let mut tracker = GoneTracker {
            namespace: namespace.map(|n| (n.to_string(), None)),
            ..Default::default()
        };
        for object in objects {
            tracker.watched.insert(object.kind);
            tracker.expected.insert(
                (object.kind, object.namespace.clone(), object.name.clone()),
                object.uid.clone(),
            );
            tracker.owner_uids.extend(object.uid.clone());
        }
        if tracker.watched.iter().any(|k| {
            matches!(
                k,
                ManagedKind::VirtualMachine
                    | ManagedKind::VirtualMachineInstance
                    | ManagedKind::DataVolume
            )
        }) {
            tracker.watched.extend(DEPENDENT_KINDS);
        }
        tracker
    }

    /// The kinds that need a watch, and whether the watch must see objects without our
    /// labels (possible dependents) rather than only label-selected ones.
    pub fn watches(&self) -> Vec<(ManagedKind, bool)> {
        self.watched
            .iter()
            .map(|k| (*k, DEPENDENT_KINDS.contains(k)))
            .collect()
    }

    /// Whether `meta` (of `kind`) is expected; adopts it when an expected object owns it.
    fn expected_key(&mut self, kind: ManagedKind, meta: &ObjectMeta) -> Option<ObjectKey> {
        let key = (kind, meta.namespace.clone()?, meta.name.clone()?);
        let uid = meta.uid.clone().unwrap_or_default();
        match self.expected.get(&key) {
            // A new object that reuses the name is not the one we deleted.
            Some(Some(expected_uid)) if !uid.is_empty() && uid != *expected_uid => {}
            Some(_) => return Some(key),
            None => {}
        }
        let owners: Vec<String> = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect();
        if owners.iter().any(|o| self.owner_uids.contains(o)) {
            self.adopt(key.clone(), uid);
            return Some(key);
        }
        self.others.insert(key, (uid, owners));
        None
    }

    /// Makes `key` expected and, transitively, everything already seen that it owns.
    fn adopt(&mut self, key: ObjectKey, uid: String) {
        let mut queue = vec![(key, uid)];
        while let Some((key, uid)) = queue.pop() {
            self.others.remove(&key);
            self.expected.insert(key.clone(), Some(uid.clone()));
            if self.listed.contains(&key.0) {
                self.present.insert(key.clone());
            } else {
                self.relisting.entry(key.0).or_default().insert(key.clone());
            }
            if uid.is_empty() || !self.owner_uids.insert(uid.clone()) {
                continue;
            }
            let owned: Vec<(ObjectKey, String)> = self
                .others
                .iter()
                .filter(|(_, (_, owners))| owners.contains(&uid))
                .map(|(k, (u, _))| (k.clone(), u.clone()))
                .collect();
            queue.extend(owned);
        }
    }

    /// A (re)list of `kind` starts.
    pub fn begin_listing(&mut self, kind: ManagedKind) {
        self.relisting.insert(kind, BTreeSet::new());
        self.others.retain(|k, _| k.0 != kind);
    }

    /// One object of the current listing of `kind`.
    pub fn listed(&mut self, kind: ManagedKind, meta: &ObjectMeta) {
        if let Some(key) = self.expected_key(kind, meta) {
            self.relisting.entry(kind).or_default().insert(key);
        }
    }

    /// The listing of `kind` is complete.
    pub fn end_listing(&mut self, kind: ManagedKind) {
        let seen = self.relisting.remove(&kind).unwrap_or_default();
        self.present.retain(|k| k.0 != kind);
        self.present.extend(seen);
        self.listed.insert(kind);
    }

    /// An object of `kind` was added or modified.
    pub fn applied(&mut self, kind: ManagedKind, meta: &ObjectMeta) {
        if let Some(key) = self.expected_key(kind, meta) {
            self.present.insert(key);
        }
    }

    /// An object of `kind` was deleted.
    pub fn deleted(&mut self, kind: ManagedKind, meta: &ObjectMeta) {
        if let (Some(ns), Some(name)) = (&meta.namespace, &meta.name) {
            let key = (kind, ns.clone(), name.clone());
            self.present.remove(&key);
            self.others.remove(&key);
        }
    }

    /// The namespace was seen present (`true`) or absent (`false`).
    pub fn namespace_seen(&mut self, present: bool) {
        if let Some((_, state)) = &mut self.namespace {
            *state = Some(present);
        }
    }

    /// Whether everything expected is gone.
    pub fn all_gone(&self) -> bool {
        self.watched.iter().all(|k| self.listed.contains(k))
            && self.present.is_empty()
            && !matches!(self.namespace, Some((_, None | Some(true))))
    }

    /// How many objects are known to be still present (cheap, unlike [`Self::remaining`]).
    pub fn present_count(&self) -> usize {
        self.present.len()
    }

    /// What is still present (or not yet confirmed gone), sorted, as `kind ns/name`.
    pub fn remaining(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .expected
            .keys()
            .filter(|k| !self.listed.contains(&k.0) || self.present.contains(*k))
            .map(|(kind, ns, name)| format!("{} {ns}/{name}", kind.noun()))
            .collect();
        if let Some((ns, state)) = &self.namespace
            && *state != Some(false)
        {
            out.push(format!("namespace {ns}"));
        }
        out
    }
}

// ------------------------------------------------------------------------------------------
// I/O: listing, deleting and watching. Every call goes through the shared client (rate
// limited) and the shared retry policy.
// ------------------------------------------------------------------------------------------

/// What every API call of a cleanup or status needs: the shared rate-limited client, the
/// retry policy (whose deadline bounds retries) and the command's cancellation.
#[derive(Clone)]
pub struct ApiContext {
    pub client: Client,
    pub policy: RetryPolicy,
    pub cancel: CancellationToken,
}

impl ApiContext {
    /// Runs `attempt` under the shared retry policy.
    async fn call<T, F, Fut>(&self, what: &str, attempt: F) -> std::result::Result<T, RetryError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, kube::Error>>,
    {
        retry(&self.policy, &self.cancel, what, attempt).await
    }
}

/// Lists every object of `kind` in `scope`: one LIST of `scope`'s selector, page by page within
/// the bounds of [`list_pages`]. `keep` sees every item; only those [`Scope::matches`] accepts
/// are passed on (the client-side re-check of the server's selector).
pub async fn for_each_in_scope<T, F, Fut>(
    ctx: &ApiContext,
    scope: &Scope,
    kind: ManagedKind,
    fetch: F,
    mut keep: impl FnMut(T),
) -> Result<()>
where
    T: Clone + kube::Resource,
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = std::result::Result<ObjectList<T>, kube::Error>>,
{
    let what = format!(
        "listing {} in {}",
        kind.plural_noun(),
        scope.namespace_display()
    );
    list_pages(
        &ctx.policy,
        &ctx.cancel,
        &what,
        &scope.selector(),
        fetch,
        |items| {
            for item in items {
                if scope.matches(item.meta()) {
                    keep(item);
                }
            }
        },
    )
    .await
}

/// Every object of `kind` in `scope`, read as `K` (whole as a [`DynamicObject`], or only the
/// fields a slimmer `K` keeps, for callers that read spec or status), each once, within
/// the bounds of [`list_pages`]: one page of raw objects is held at a time.
pub async fn list_in_scope<K>(ctx: &ApiContext, scope: &Scope, kind: ManagedKind) -> Result<Vec<K>>
where
    K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = scope.api_as(&ctx.client, kind);
    let mut found: BTreeMap<(String, String), K> = BTreeMap::new();
    for_each_in_scope(
        ctx,
        scope,
        kind,
        |params| {
            let api = &api;
            async move { api.list(&params).await }
        },
        |object: K| {
            let key = (
                object.meta().namespace.clone().unwrap_or_default(),
                object.meta().name.clone().unwrap_or_default(),
            );
            found.insert(key, object);
        },
    )
    .await?;
    Ok(found.into_values().collect())
}

/// The managed objects of `kind` in `scope`, from metadata-only lists (no spec, status or
/// Secret data is transferred or held), each object once.
pub async fn list_managed(
    ctx: &ApiContext,
    scope: &Scope,
    kind: ManagedKind,
) -> Result<Vec<ManagedObject>> {
    let api = scope.api(&ctx.client, kind);
    let mut found: BTreeMap<(String, String), ManagedObject> = BTreeMap::new();
    for_each_in_scope(
        ctx,
        scope,
        kind,
        |params| {
            let api = &api;
            async move { api.list_metadata(&params).await }
        },
        |item| {
            if let Some(object) = ManagedObject::from_meta(kind, &item.metadata, scope) {
                found.insert((object.namespace.clone(), object.name.clone()), object);
            }
        },
    )
    .await?;
    Ok(found.into_values().collect())
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
    for kind in ManagedKind::ALL {
        objects.extend(list_managed(ctx, scope, kind).await?);
    }
    let mut discovery = Discovery::from_objects(objects);
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

/// Every resource type the server lists in discovery (the core group, then each group's
/// preferred version); a failure names the group version that could not be read.
async fn discover_resources(
    ctx: &ApiContext,
) -> std::result::Result<Vec<DiscoveredResource>, String> {
    let failed = |gv: &str, error: RetryError| match error {
        RetryError::Cancelled => "interrupted".to_string(),
        RetryError::Failed { error, .. } => {
            format!("could not read discovery of {gv}: {}", one_line(&error))
        }
    };
    let mut lists = Vec::new();
    let core = ctx
        .call("discovery of v1", || {
            ctx.client.list_core_api_resources("v1")
        })
        .await
        .map_err(|e| failed("v1", e))?;
    lists.push((String::new(), core));
    let groups = ctx
        .call("discovery of API groups", || ctx.client.list_api_groups())
        .await
        .map_err(|e| failed("/apis", e))?;
    for group in groups.groups {
        if is_view_group(&group.name) {
            continue;
        }
        let Some(version) = group
            .preferred_version
            .clone()
            .or_else(|| group.versions.first().cloned())
        else {
            continue;
        };
        let gv = version.group_version;
        // One attempt: an aggregated API that is down answers 503 until someone fixes it, and
        // waiting out --timeout for it would only delay the verdict (keep the namespace).
        let list = ctx
            .client
            .list_api_group_resources(&gv)
            .await
            .map_err(|error| format!("could not read discovery of {gv}: {}", one_line(&error)))?;
        lists.push((group.name.clone(), list));
    }
    Ok(lists
        .into_iter()
        .flat_map(|(group, list)| {
            let version = list
                .group_version
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string();
            list.resources.into_iter().map(move |r| DiscoveredResource {
                group: group.clone(),
                version: version.clone(),
                name: r.name,
                kind: r.kind,
                namespaced: r.namespaced,
                verbs: r.verbs,
            })
        })
        .collect())
}

/// Every object in namespace `ns` of every [`content_resources`] kind, metadata only (Events
/// in full, for the object each is about). A kind gone since discovery has no objects; one
/// that cannot be listed is an error, which keeps the namespace.
async fn list_namespace_contents(ctx: &ApiContext, ns: &str) -> Result<Vec<ContentObject>> {
    let discovered = match discover_resources(ctx).await {
        Ok(found) => found,
        Err(_) if ctx.cancel.is_cancelled() => return Err(crate::error::Error::Interrupted),
        Err(reason) => return Err(crate::error::Error::runtime(reason)),
    };
    let mut objects = list_events(ctx, ns).await?;
    for found in content_resources(&discovered) {
        if found.group.is_empty() && found.name == "events" {
            continue;
        }
        let api_version = if found.group.is_empty() {
            found.version.clone()
        } else {
            format!("{}/{}", found.group, found.version)
        };
        let resource = ApiResource {
            group: found.group.clone(),
            version: found.version.clone(),
            api_version,
            kind: found.kind.clone(),
            plural: found.name.clone(),
        };
        let api: Api<PartialObjectMeta<DynamicObject>> =
            Api::namespaced_with(ctx.client.clone(), ns, &resource);
        let what = format!("listing {} in {ns}", resource.plural);
        list_pages(
            &ctx.policy,
            &ctx.cancel,
            &what,
            "",
            |params| {
                let api = &api;
                async move { not_found_is_empty(api.list(&params).await) }
            },
            |items| {
                objects.extend(
                    items
                        .iter()
                        .map(|item| ContentObject::from_meta(&found.kind, &item.metadata)),
                );
            },
        )
        .await?;
    }
    Ok(objects)
}

/// A list of a kind the server no longer serves is empty.
fn not_found_is_empty<T: Clone>(
    listed: std::result::Result<ObjectList<T>, kube::Error>,
) -> std::result::Result<ObjectList<T>, kube::Error> {
    match listed {
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(ObjectList {
            types: Default::default(),
            metadata: Default::default(),
            items: Vec::new(),
        }),
        other => other,
    }
}

/// The core Events in `ns`, each owned (for the decision) by the object it is about: an Event
/// about a VM of ours is ours, one about anything else is foreign.
async fn list_events(ctx: &ApiContext, ns: &str) -> Result<Vec<ContentObject>> {
    let api: Api<Event> = Api::namespaced(ctx.client.clone(), ns);
    let mut events = Vec::new();
    list_pages(
        &ctx.policy,
        &ctx.cancel,
        &format!("listing events in {ns}"),
        "",
        |params| {
            let api = &api;
            async move { not_found_is_empty(api.list(&params).await) }
        },
        |items| {
            events.extend(items.iter().map(|event| {
                let mut object = ContentObject::from_meta("Event", &event.metadata);
                object.owners.extend(event.involved_object.uid.clone());
                object
            }));
        },
    )
    .await?;
    Ok(events)
}

/// Reads namespace `name` and, when virtwork created it, its contents, and decides with
/// [`namespace_delete_decision`]. `known_ours` are uids an earlier check found to be ours.
/// Returns the verdict and the uids of the objects that are ours. Only an interrupt is an
/// error: anything that cannot be read keeps the namespace, with the reason.
pub async fn namespace_verdict(
    ctx: &ApiContext,
    name: &str,
    check: &NamespaceCheck,
    known_ours: &BTreeSet<String>,
) -> Result<(NamespaceVerdict, BTreeSet<String>)> {
    let own = check.own.as_slice();
    let decide = |found: Option<&NamespaceFacts>, contents: &ContentsCheck| {
        namespace_delete_decision(name, own, found, contents)
    };
    if protected_reason(name, own).is_some() {
        return Ok((decide(None, &ContentsCheck::NotChecked), known_ours.clone()));
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let what = format!("reading namespace {name}");
    let facts = match ctx.call(&what, || api.get_opt(name)).await {
        Ok(found) => found.as_ref().map(NamespaceFacts::of),
        Err(RetryError::Cancelled) => return Err(crate::error::Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => {
            let reason = format!("could not read it: {}", one_line(&error));
            return Ok((NamespaceVerdict::Keep(reason), known_ours.clone()));
        }
    };
    let verdict = decide(facts.as_ref(), &ContentsCheck::NotChecked);
    if verdict != NamespaceVerdict::CheckContents {
        return Ok((verdict, known_ours.clone()));
    }
    let (check, ours) = match list_namespace_contents(ctx, name).await {
        Ok(objects) => {
            let contents = classify_contents(&objects, known_ours, check.run_id.as_deref());
            (ContentsCheck::Foreign(contents.foreign), contents.ours)
        }
        Err(crate::error::Error::Interrupted) => return Err(crate::error::Error::Interrupted),
        Err(error) => (ContentsCheck::Failed(error.to_string()), known_ours.clone()),
    };
    Ok((decide(facts.as_ref(), &check), ours))
}

/// Maps the retried delete to an outcome.
fn delete_outcome<T>(result: std::result::Result<T, RetryError>) -> DeleteOutcome {
    match result {
        Ok(_) => DeleteOutcome::Deleted,
        Err(RetryError::Cancelled) => DeleteOutcome::NotAttempted,
        // A NotFound after a transient failure most likely means our earlier attempt went
        // through and only its response was lost.
        Err(RetryError::Failed {
            error, attempts, ..
        }) => match classify_delete::<()>(Err(error)) {
            DeleteOutcome::AlreadyGone if attempts > 1 => DeleteOutcome::Deleted,
            other => other,
        },
    }
}

/// Deletes one object (uid precondition, background propagation), retrying transient errors.
async fn delete_one(ctx: &ApiContext, object: &ManagedObject) -> DeleteOutcome {
    if ctx.cancel.is_cancelled() {
        return DeleteOutcome::NotAttempted;
    }
    let resource = object.kind.api_resource();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &object.namespace, &resource);
    let mut params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    if let Some(uid) = &object.uid {
        params.preconditions = Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        });
    }
    let what = format!("deleting {} {}", object.kind.noun(), object.display_name());
    delete_outcome(ctx.call(&what, || api.delete(&object.name, &params)).await)
}

/// Deletes everything in `discovery`: VMs first, then the rest, concurrently; then the
/// namespace. Stops issuing deletes once the command is cancelled. `progress` is called once
/// per object as its delete ends (the live view of a large cleanup).
pub async fn execute(
    ctx: &ApiContext,
    discovery: &Discovery,
    progress: &(dyn Fn() + Sync),
) -> CleanupOutcome {
    let mut outcome = CleanupOutcome::default();
    for phase in discovery.deletion_phases() {
        let results: Vec<(ManagedObject, DeleteOutcome)> = futures::stream::iter(phase)
            .map(|object| async move {
                let result = delete_one(ctx, &object).await;
                progress();
                tracing::debug!(kind = %object.kind, object = %object.display_name(), ?result, "delete");
                (object, result)
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        for (object, result) in results {
            outcome.record(object, result);
        }
    }
    match &discovery.namespace {
        _ if ctx.cancel.is_cancelled() => {}
        Some((ns, NamespaceVerdict::Delete { uid })) => {
            delete_namespace(ctx, ns, uid, &discovery.namespace_check, &mut outcome).await
        }
        Some((ns, NamespaceVerdict::Keep(reason))) => {
            let reason = reason.clone();
            outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        }
        Some((_, NamespaceVerdict::Absent | NamespaceVerdict::CheckContents)) | None => {}
    }
    outcome.interrupted = ctx.cancel.is_cancelled();
    outcome.finish();
    outcome
}

/// Deletes namespace `ns` (checked at discovery as `uid`): checks it again first, since
/// cleanup has been deleting for a while and someone may have put something of theirs in it
/// or replaced it, then deletes it with the uid as precondition.
async fn delete_namespace(
    ctx: &ApiContext,
    ns: &str,
    uid: &str,
    check: &NamespaceCheck,
    outcome: &mut CleanupOutcome,
) {
    let replaced = "it was deleted and created again since cleanup checked it".to_string();
    let reason = match namespace_verdict(ctx, ns, check, &check.ours).await {
        Err(_) => return, // interrupted: not attempted
        Ok((NamespaceVerdict::Delete { uid: now }, _)) if now == uid => None,
        Ok((NamespaceVerdict::Delete { .. }, _)) => Some(replaced.clone()),
        Ok((NamespaceVerdict::Keep(reason), _)) => Some(reason),
        Ok((NamespaceVerdict::Absent | NamespaceVerdict::CheckContents, _)) => return,
    };
    if let Some(reason) = reason {
        outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        return;
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let what = format!("deleting namespace {ns}");
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let result = ctx.call(&what, || api.delete(ns, &params)).await;
    if let Err(RetryError::Failed {
        error: kube::Error::Api(status),
        ..
    }) = &result
        && status.is_conflict()
    {
        // The uid precondition failed: the name now belongs to another namespace.
        let reason = replaced;
        outcome.record_namespace(ns, NamespaceOutcome::Kept { reason });
        return;
    }
    match delete_outcome(result) {
        DeleteOutcome::Deleted => outcome.record_namespace(ns, NamespaceOutcome::Deleted),
        DeleteOutcome::Failed(error) => {
            outcome.record_namespace(ns, NamespaceOutcome::Failed { error })
        }
        DeleteOutcome::AlreadyGone | DeleteOutcome::NotAttempted => {}
    }
}

/// Why `--wait` stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitResult {
    AllGone,
    /// The timeout passed; what was still present, sorted.
    TimedOut(Vec<String>),
    /// The user interrupted; what was still present, sorted.
    Interrupted(Vec<String>),
}

/// Waits (by watching, not polling) until every object in `tracker` is gone, or `timeout`
/// passes, or the command is cancelled. Watch errors are retried by the watcher's backoff.
/// `progress` is told, after each change seen, how many objects are still present.
pub async fn wait_until_gone(
    ctx: &ApiContext,
    scope: &Scope,
    tracker: &mut GoneTracker,
    timeout: Duration,
    progress: &(dyn Fn(usize) + Sync),
) -> WaitResult {
    let mut events = futures::stream::select_all(gone_watches(ctx, scope, tracker));
    let namespace_name = tracker.namespace.as_ref().map(|(n, _)| n.clone());
    let mut namespace_listed = false;
    let watching = async {
        while !tracker.all_gone() {
            let Some(item) = events.next().await else {
                break;
            };
            match item {
                Err(err) => {
                    tracing::debug!(error = %err, "watch error while waiting; reconnecting")
                }
                Ok(Seen::Object(kind, event)) => {
                    object_seen(tracker, kind, event);
                    progress(tracker.present_count());
                }
                Ok(Seen::Namespace(event)) => {
                    let ours = |n: &Namespace| n.metadata.name == namespace_name;
                    match event {
                        watcher::Event::Init => namespace_listed = false,
                        watcher::Event::InitApply(n) if ours(&n) => namespace_listed = true,
                        watcher::Event::InitDone => tracker.namespace_seen(namespace_listed),
                        watcher::Event::Apply(n) if ours(&n) => tracker.namespace_seen(true),
                        watcher::Event::Delete(n) if ours(&n) => tracker.namespace_seen(false),
                        _ => {}
                    }
                }
            }
        }
    };
    let stopped = tokio::select! {
        () = watching => None,
        () = tokio::time::sleep(timeout) => Some(false),
        () = ctx.cancel.cancelled() => Some(true),
    };
    match stopped {
        None => WaitResult::AllGone,
        Some(false) => WaitResult::TimedOut(tracker.remaining()),
        Some(true) => WaitResult::Interrupted(tracker.remaining()),
    }
}

/// One event of the watches `--wait` runs.
enum Seen {
    Object(
        ManagedKind,
        watcher::Event<PartialObjectMeta<DynamicObject>>,
    ),
    Namespace(watcher::Event<Namespace>),
}

type SeenStream = futures::stream::BoxStream<'static, std::result::Result<Seen, watcher::Error>>;

/// One watch per kind the tracker waits for, and one on the namespace when it waits for it.
fn gone_watches(ctx: &ApiContext, scope: &Scope, tracker: &GoneTracker) -> Vec<SeenStream> {
    let selector = scope.selector();
    let mut streams: Vec<SeenStream> = Vec::new();
    for (kind, with_dependents) in tracker.watches() {
        // Dependents (a DataVolume's PVC) may carry none of our labels: watch the kind
        // unfiltered; the tracker only ever counts expected objects and their dependents.
        let mut config = watcher::Config::default()
            .page_size(LIST_PAGE_SIZE)
            .timeout(WATCH_TIMEOUT_SECS);
        if !with_dependents {
            config = config.labels(&selector);
        }
        // Metadata is all the tracker reads (and Secret data must never be held).
        let stream = watcher(scope.metadata_api(&ctx.client, kind), config)
            .default_backoff()
            .map_ok(move |event| Seen::Object(kind, event))
            .boxed();
        streams.push(stream);
    }
    if let Some((ns, _)) = &tracker.namespace {
        let api: Api<Namespace> = Api::all(ctx.client.clone());
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={ns}"))
            .timeout(WATCH_TIMEOUT_SECS);
        streams.push(
            watcher(api, config)
                .default_backoff()
                .map_ok(Seen::Namespace)
                .boxed(),
        );
    }
    streams
}

/// Feeds one watch event on objects of `kind` to the tracker.
fn object_seen(
    tracker: &mut GoneTracker,
    kind: ManagedKind,
    event: watcher::Event<PartialObjectMeta<DynamicObject>>,
) {
    match event {
        watcher::Event::Init => tracker.begin_listing(kind),
        watcher::Event::InitApply(o) => tracker.listed(kind, &o.metadata),
        watcher::Event::InitDone => tracker.end_listing(kind),
        watcher::Event::Apply(o) => tracker.applied(kind, &o.metadata),
        watcher::Event::Delete(o) => tracker.deleted(kind, &o.metadata),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ns: &str, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{ns}-{name}")),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    const RUN_A: &str = "11111111-1111-4111-8111-111111111111";
    const RUN_B: &str = "22222222-2222-4222-8222-222222222222";

    fn managed(ns: &str, name: &str, run: &str) -> ObjectMeta {
        meta(
            ns,
            name,
            &[
                (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
                (labels::RUN_ID, run),
            ],
        )
    }

    fn scope(run_id: Option<&str>) -> Scope {
        Scope {
            namespace: Some("virtwork".into()),
            run_id: run_id.map(String::from),
        }
    }

    fn object(kind: ManagedKind, name: &str, run: &str) -> ManagedObject {
        ManagedObject::from_meta(kind, &managed("virtwork", name, run), &scope(None)).unwrap()
    }

    #[test]
    fn objects_without_our_label_are_never_in_scope() {
        let s = scope(None);
        let foreign = meta("virtwork", "x", &[(labels::MANAGED_BY, "helm")]);
        let unlabelled = meta("virtwork", "y", &[]);
        assert!(ManagedObject::from_meta(ManagedKind::Secret, &foreign, &s).is_none());
        assert!(ManagedObject::from_meta(ManagedKind::Secret, &unlabelled, &s).is_none());
        let ours = managed("virtwork", "z", RUN_A);
        assert!(ManagedObject::from_meta(ManagedKind::Secret, &ours, &s).is_some());
    }

    #[test]
    fn run_id_scope_excludes_other_runs_and_other_namespaces() {
        let s = scope(Some(RUN_A));
        assert!(s.matches(&managed("virtwork", "a", RUN_A)));
        assert!(!s.matches(&managed("virtwork", "b", RUN_B)));
        assert!(!s.matches(&managed("elsewhere", "a", RUN_A)));
        let all = Scope {
            namespace: None,
            run_id: None,
        };
        assert!(all.matches(&managed("elsewhere", "a", RUN_A)));
        assert_eq!(
            s.selector(),
            format!("app.kubernetes.io/managed-by=virtwork,virtwork/run-id={RUN_A}")
        );
    }

    #[test]
    fn empty_run_id_label_is_not_a_run() {
        let o = object(ManagedKind::Service, "svc", "");
        assert_eq!(o.run_id, None);
    }

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

    #[test]
    fn not_found_is_already_gone_and_other_errors_fail() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(&format!("boom {code}"), reason).with_code(code),
            ))
        };
        assert_eq!(classify_delete::<()>(Ok(())), DeleteOutcome::Deleted);
        assert_eq!(
            classify_delete::<()>(Err(status(404, "NotFound"))),
            DeleteOutcome::AlreadyGone
        );
        match classify_delete::<()>(Err(status(403, "Forbidden"))) {
            DeleteOutcome::Failed(msg) => {
                assert!(msg.contains("Forbidden") && msg.contains("403"), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_are_aggregated_sorted_with_the_namespace_last() {
        let mut outcome = CleanupOutcome::default();
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Failed {
                error: "denied".into(),
            },
        );
        outcome.record(
            object(ManagedKind::Secret, "b", RUN_A),
            DeleteOutcome::Failed("forbidden".into()),
        );
        outcome.record(
            object(ManagedKind::Secret, "a", RUN_A),
            DeleteOutcome::Failed("forbidden".into()),
        );
        outcome.record(
            object(ManagedKind::VirtualMachine, "vm", RUN_A),
            DeleteOutcome::Deleted,
        );
        outcome.record(
            object(ManagedKind::DataVolume, "dv", RUN_A),
            DeleteOutcome::AlreadyGone,
        );
        outcome.finish();
        assert_eq!(
            outcome.failure_lines(),
            vec![
                "deleting secret virtwork/a: forbidden",
                "deleting secret virtwork/b: forbidden",
                "deleting namespace virtwork: denied",
            ]
        );
        assert_eq!(outcome.deleted_counts().vms, 1);
        assert_eq!(outcome.deleted_counts().dvs, 0);
        assert_eq!(
            outcome.failures.len(),
            2,
            "the namespace is not an object failure"
        );
        assert!(outcome.has_failures());
        assert!(!outcome.namespace_deleted());
        assert_eq!(outcome.namespace_kept(), None);
    }

    #[test]
    fn a_failed_namespace_delete_alone_is_a_failure() {
        let mut outcome = CleanupOutcome::default();
        assert!(!outcome.has_failures());
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Kept {
                reason: "not ours".into(),
            },
        );
        assert!(
            !outcome.has_failures(),
            "a kept namespace is reported, not failed"
        );
        assert_eq!(outcome.namespace_kept(), Some(("virtwork", "not ours")));
        outcome.record_namespace(
            "virtwork",
            NamespaceOutcome::Failed {
                error: "denied".into(),
            },
        );
        assert!(outcome.has_failures());
        assert_eq!(
            outcome.failure_lines(),
            ["deleting namespace virtwork: denied"]
        );
    }

    fn list_all(t: &mut GoneTracker, kind: ManagedKind, metas: &[ObjectMeta]) {
        t.begin_listing(kind);
        for m in metas {
            t.listed(kind, m);
        }
        t.end_listing(kind);
    }

    #[test]
    fn tracker_waits_for_every_kind_to_be_listed_and_emptied() {
        let secret = object(ManagedKind::Secret, "vm-0-cloudinit", RUN_A);
        let service = object(ManagedKind::Service, "svc", RUN_A);
        let mut t = GoneTracker::new([&secret, &service], None);
        assert_eq!(
            t.watches(),
            vec![(ManagedKind::Service, false), (ManagedKind::Secret, false)]
        );
        assert!(!t.all_gone());
        assert_eq!(t.remaining().len(), 2);
        list_all(&mut t, ManagedKind::Service, &[]);
        assert!(!t.all_gone(), "secrets not listed yet");
        list_all(
            &mut t,
            ManagedKind::Secret,
            &[managed("virtwork", "vm-0-cloudinit", RUN_A)],
        );
        assert_eq!(
            t.remaining(),
            vec!["secret virtwork/vm-0-cloudinit".to_string()]
        );
        t.deleted(
            ManagedKind::Secret,
            &managed("virtwork", "vm-0-cloudinit", RUN_A),
        );
        assert!(t.all_gone());
    }

    #[test]
    fn tracker_waits_for_unlabelled_dependents_of_deleted_objects() {
        let vm = object(ManagedKind::VirtualMachine, "vm-0", RUN_A);
        let dv = object(ManagedKind::DataVolume, "disk-vm-0", RUN_A);
        let mut t = GoneTracker::new([&vm, &dv], None);
        assert!(
            t.watches()
                .contains(&(ManagedKind::PersistentVolumeClaim, true))
        );
        let owned_by = |name: &str, owner: &ManagedObject| {
            let mut m = meta("virtwork", name, &[]);
            m.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    uid: owner.uid.clone().unwrap(),
                    ..Default::default()
                },
            ]);
            m
        };
        let pvc = owned_by("disk-vm-0", &dv);
        let unrelated = meta("virtwork", "someone-elses", &[]);
        list_all(&mut t, ManagedKind::VirtualMachine, &[]);
        list_all(&mut t, ManagedKind::DataVolume, &[]);
        list_all(&mut t, ManagedKind::VirtualMachineInstance, &[]);
        list_all(
            &mut t,
            ManagedKind::PersistentVolumeClaim,
            &[pvc.clone(), unrelated],
        );
        assert_eq!(t.remaining(), vec!["PVC virtwork/disk-vm-0".to_string()]);
        t.deleted(ManagedKind::PersistentVolumeClaim, &pvc);
        assert!(t.all_gone());
    }

    #[test]
    fn tracker_adopts_dependents_seen_before_their_owner() {
        let vm = object(ManagedKind::VirtualMachine, "vm-0", RUN_A);
        let mut t = GoneTracker::new([&vm], None);
        // An unlabelled DataVolume owned by the VM, and its PVC, listed PVC first.
        let mut dv = meta("virtwork", "dv", &[]);
        dv.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                uid: vm.uid.clone().unwrap(),
                ..Default::default()
            },
        ]);
        let mut pvc = meta("virtwork", "dv", &[]);
        pvc.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                uid: dv.uid.clone().unwrap(),
                ..Default::default()
            },
        ]);
        list_all(&mut t, ManagedKind::PersistentVolumeClaim, &[pvc.clone()]);
        list_all(&mut t, ManagedKind::VirtualMachine, &[]);
        list_all(&mut t, ManagedKind::VirtualMachineInstance, &[]);
        assert!(!t.all_gone());
        list_all(&mut t, ManagedKind::DataVolume, &[dv.clone()]);
        assert_eq!(
            t.remaining(),
            vec![
                "DataVolume virtwork/dv".to_string(),
                "PVC virtwork/dv".to_string()
            ]
        );
        t.deleted(ManagedKind::DataVolume, &dv);
        t.deleted(ManagedKind::PersistentVolumeClaim, &pvc);
        assert!(t.all_gone());
    }

    #[test]
    fn tracker_ignores_a_new_object_reusing_the_name() {
        let secret = object(ManagedKind::Secret, "s", RUN_A);
        let mut t = GoneTracker::new([&secret], None);
        let mut newcomer = managed("virtwork", "s", RUN_B);
        newcomer.uid = Some("another-uid".into());
        list_all(&mut t, ManagedKind::Secret, &[newcomer]);
        assert!(t.all_gone());
    }

    #[test]
    fn tracker_waits_for_the_namespace() {
        let mut t = GoneTracker::new([], Some("virtwork"));
        assert!(!t.all_gone());
        t.namespace_seen(true);
        assert_eq!(t.remaining(), vec!["namespace virtwork".to_string()]);
        t.namespace_seen(false);
        assert!(t.all_gone());
    }
}
