//! Whether `--delete-namespace` may take the namespace: reads it and, when virtwork created it,
//! everything in it the account may list (every kind the server's discovery lists, metadata
//! only; a kind RBAC refuses is skipped unless [`must_read`] says it may not be), then lets
//! [`namespace_delete_decision`] decide. Run at discovery and again right before the delete.
//!
//! Must not: delete anything; decide by itself (the decision is a plain function in
//! [`crate::k8s::namespace`]); treat a failed read of a required kind as "empty" (it keeps
//! the namespace).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ObjectList};
use kube::core::{ApiResource, PartialObjectMeta};

use crate::error::Result;
use crate::k8s::error_line::one_line;
use crate::k8s::list::list_pages;
use crate::k8s::namespace::{
    ContentObject, ContentsCheck, DiscoveredResource, NamespaceFacts, NamespaceVerdict,
    SERVICE_ACCOUNT_SECRET_TYPES, classify_contents, content_resources, is_view_group, must_read,
    namespace_delete_decision, protected_reason,
};
use crate::k8s::retry::RetryError;
use crate::k8s::scope::ApiContext;

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

/// Every object in namespace `ns` of every [`content_resources`] kind the account may list
/// (Events are none), metadata only, and the kinds it may not
/// list (`group/plural`; never one of [`must_read`]'s). A kind gone since discovery has no
/// objects; one refused other than by RBAC, or a required one refused at all, is an error,
/// which keeps the namespace.
async fn list_namespace_contents(
    ctx: &ApiContext,
    ns: &str,
) -> Result<(Vec<ContentObject>, Vec<String>)> {
    let discovered = match discover_resources(ctx).await {
        Ok(found) => found,
        Err(_) if ctx.cancel.is_cancelled() => return Err(crate::error::Error::Interrupted),
        Err(reason) => return Err(crate::error::Error::runtime(reason)),
    };
    let mut unread = Vec::new();
    let mut objects = Vec::new();
    for found in content_resources(&discovered) {
        match list_kind_in(ctx, ns, &found).await {
            Ok(listed) => objects.extend(listed),
            Err(error) if is_forbidden(&error) && !must_read(&found.group, &found.name) => {
                unread.push(format!("{}/{}", found.group, found.name));
            }
            Err(error) => return Err(error),
        }
    }
    Ok((objects, unread))
}

/// Whether a list failed because RBAC refused it (403): the account may not read that kind.
fn is_forbidden(error: &crate::error::Error) -> bool {
    matches!(
        error,
        crate::error::Error::Kube { source, .. }
            if matches!(source.as_ref(), kube::Error::Api(status) if status.code == 403)
    )
}

/// The objects of one discovered kind in `ns`, metadata only. Secrets are read twice (the
/// second time only those whose type is not a service account's, by field selector): the
/// type is not in the metadata, and only a service-account-typed Secret can be the cluster's.
/// A server that ignored the selector would make every Secret "not a service account's",
/// which keeps the namespace rather than deleting one.
async fn list_kind_in(
    ctx: &ApiContext,
    ns: &str,
    found: &DiscoveredResource,
) -> Result<Vec<ContentObject>> {
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
    let list = |fields: Option<String>, what: String| {
        let api = &api;
        let kind = &found.kind;
        async move {
            let mut objects = Vec::new();
            list_pages(
                &ctx.policy,
                &ctx.cancel,
                &what,
                "",
                |params| {
                    let params = match &fields {
                        Some(fields) => params.fields(fields),
                        None => params,
                    };
                    async move { not_found_is_empty(api.list(&params).await) }
                },
                |items| {
                    objects.extend(
                        items
                            .iter()
                            .map(|item| ContentObject::from_meta(kind, &item.metadata)),
                    );
                },
            )
            .await
            .map(|()| objects)
        }
    };
    let mut objects = list(None, format!("listing {} in {ns}", resource.plural)).await?;
    if found.group.is_empty() && found.name == "secrets" {
        let other_types: String = SERVICE_ACCOUNT_SECRET_TYPES
            .iter()
            .map(|t| format!("type!={t}"))
            .collect::<Vec<_>>()
            .join(",");
        let others: BTreeSet<String> = list(
            Some(other_types),
            format!("listing secrets by type in {ns}"),
        )
        .await?
        .into_iter()
        .map(|o| o.uid)
        .collect();
        for object in &mut objects {
            object.service_account_type = !others.contains(&object.uid);
        }
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
        Ok((objects, unread)) => {
            if !unread.is_empty() {
                tracing::info!(
                    namespace = name,
                    unread = unread.join(", "),
                    "not allowed to list these kinds; judging the namespace by what virtwork \
                     creates and its RoleBindings"
                );
            }
            let contents = classify_contents(&objects, known_ours, check.run_id.as_deref());
            (ContentsCheck::Foreign(contents.foreign), contents.ours)
        }
        Err(crate::error::Error::Interrupted) => return Err(crate::error::Error::Interrupted),
        Err(error) => (ContentsCheck::Failed(error.to_string()), known_ours.clone()),
    };
    Ok((decide(facts.as_ref(), &check), ours))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ManagedKind;

    /// A foreign object of a kind virtwork creates is what its own account could have made:
    /// those kinds may never be skipped as unreadable.
    #[test]
    fn every_kind_virtwork_creates_must_be_read_before_a_namespace_goes() {
        for kind in ManagedKind::ALL {
            let resource = kind.api_resource();
            assert!(must_read(&resource.group, &resource.plural), "{kind}");
        }
        assert!(must_read("rbac.authorization.k8s.io", "rolebindings"));
        assert!(!must_read("apps", "deployments"));
    }
}
