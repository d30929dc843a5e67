//! Where cleanup, status, churn and verify look, and how they list what is there: a
//! [`Scope`] (one namespace or all, optionally one run), the [`ManagedObject`]s found in it,
//! the [`ApiContext`] every call of those commands goes through, and the bounded, paged
//! listings of one kind in a scope.
//!
//! Only objects carrying `app.kubernetes.io/managed-by=virtwork` (and, with `--run-id`, that
//! run's id) are ever listed: the label selector does the filtering on the server and
//! [`Scope::matches`] checks it again on every returned object, so a server that ignored the
//! selector still cannot make a caller act on a foreign object.
//!
//! Must not: decide what to delete, wait for or count (cleanup, status and churn do); list
//! anything outside a scope.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, ObjectList};
use kube::core::{ApiResource, DynamicResourceScope, PartialObjectMeta};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::k8s::list::list_pages;
use crate::k8s::retry::{RetryError, RetryPolicy, retry};
use crate::kubevirt::{
    DataVolume, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration,
};
use crate::labels;
use crate::model::{ManagedKind, RunId, RunIdPrefix};

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
    /// The `virtwork/run-id` label value: a resolved run id (`RunRef`), or a prefix that
    /// matched no run (and so matches nothing).
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
    pub(crate) async fn call<T, F, Fut>(
        &self,
        what: &str,
        attempt: F,
    ) -> std::result::Result<T, RetryError>
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
    list_in_scope_reduced(ctx, scope, kind, |object: K| object).await
}

/// [`list_in_scope`], each object reduced by `reduce` as its page arrives (for a `K` that
/// cannot say by its type alone what to drop), so only the reduced objects are held.
pub async fn list_in_scope_reduced<K, T>(
    ctx: &ApiContext,
    scope: &Scope,
    kind: ManagedKind,
    mut reduce: impl FnMut(K) -> T,
) -> Result<Vec<T>>
where
    K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
    T: kube::Resource,
{
    let api: Api<K> = scope.api_as(&ctx.client, kind);
    let mut found: BTreeMap<(String, String), T> = BTreeMap::new();
    for_each_in_scope(
        ctx,
        scope,
        kind,
        |params| {
            let api = &api;
            async move { api.list(&params).await }
        },
        |object: K| {
            let object = reduce(object);
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

/// The run ids that begin with `prefix` among the `virtwork/run-id` labels of the managed
/// objects of every kind in `namespace` (`None`: every namespace), from metadata-only lists,
/// each once. A kind that cannot be listed is passed over, as cleanup's discovery does; when
/// no kind can be listed, that is the error.
pub async fn run_ids_in_scope(
    ctx: &ApiContext,
    namespace: Option<&str>,
    prefix: &RunIdPrefix,
) -> Result<BTreeSet<RunId>> {
    let scope = Scope {
        namespace: namespace.map(String::from),
        run_id: None,
    };
    let mut found = BTreeSet::new();
    let mut first_error = None;
    let mut listed = 0;
    for kind in ManagedKind::ALL {
        let api = scope.metadata_api(&ctx.client, kind);
        let listing = for_each_in_scope(
            ctx,
            &scope,
            kind,
            |params| {
                let api = &api;
                async move { api.list_metadata(&params).await }
            },
            |item| {
                let label = item
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::RUN_ID));
                if let Some(id) = label.and_then(|text| text.parse::<RunId>().ok())
                    && prefix.matches(&id)
                {
                    found.insert(id);
                }
            },
        )
        .await;
        match listing {
            Ok(()) => listed += 1,
            Err(crate::error::Error::Interrupted) => return Err(crate::error::Error::Interrupted),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    match (listed, first_error) {
        (0, Some(error)) => Err(error),
        _ => Ok(found),
    }
}

/// Objects and scopes the tests of the listing's users build (labels as virtwork sets them).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn meta(ns: &str, name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
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

    pub(crate) const RUN_A: &str = "11111111-1111-4111-8111-111111111111";
    pub(crate) const RUN_B: &str = "22222222-2222-4222-8222-222222222222";

    pub(crate) fn managed(ns: &str, name: &str, run: &str) -> ObjectMeta {
        meta(
            ns,
            name,
            &[
                (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
                (labels::RUN_ID, run),
            ],
        )
    }

    pub(crate) fn scope(run_id: Option<&str>) -> Scope {
        Scope {
            namespace: Some("virtwork".into()),
            run_id: run_id.map(String::from),
        }
    }

    pub(crate) fn object(kind: ManagedKind, name: &str, run: &str) -> ManagedObject {
        ManagedObject::from_meta(kind, &managed("virtwork", name, run), &scope(None)).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fixtures::*;

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
}
