//! `virtwork cleanup --wait`: the [`GoneTracker`] bookkeeping of which deleted objects (and
//! their garbage-collected dependents) are still present, and the watches that feed it until
//! everything is gone, the timeout passes or the command is cancelled.
//!
//! Must not: poll; delete anything; count an object that reuses a deleted one's name.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};

use crate::k8s::list::LIST_PAGE_SIZE;
use crate::k8s::ready::WATCH_TIMEOUT_SECS;
use crate::k8s::scope::{ApiContext, ManagedObject, Scope};
use crate::model::ManagedKind;

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
    use crate::k8s::scope::fixtures::*;

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
