//! Authorization the way kube-apiserver sees it, for tests that install an RBAC policy
//! (`Faults::authorizer`) instead of listing denials: the attributes of a request derived from
//! its URL exactly like the apiserver's RequestInfo, the attributes of a
//! SelfSubjectAccessReview question, and the Forbidden status in the authorizer's wording.
//!
//! The RequestInfo rules that matter for RBAC and differ from the fake server's routing: a
//! request on `/api/v1/namespaces/<name>` is *in* namespace `<name>` (so a RoleBinding there
//! can grant it), a collection read with a `metadata.name=<x>` field selector names `<x>` (so
//! `resourceNames` can grant it), a DELETE without a name is `deletecollection`, and
//! everything after `<resource>/<name>/<subresource>` (e.g. a service proxy path) is ignored.
//! Discovery, `/version` and other non-resource paths have no attributes: every authenticated
//! user may read them on a real cluster. Must not decide anything itself: the policy is the
//! test's.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use super::status::ApiError;

/// What the authorizer is asked about one resource request or access review.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccessAttributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group, "" for the core group.
    pub group: String,
    /// Resource plural, e.g. `virtualmachines`.
    pub resource: String,
    /// e.g. `status`, `proxy`; "" when none.
    pub subresource: String,
    /// "" for cluster-scoped requests and requests across all namespaces.
    pub namespace: String,
    /// "" when the request names no object (create, list without a name selector).
    pub name: String,
}

impl AccessAttributes {
    /// The attributes of an HTTP request, or None for a non-resource path. `query` is the
    /// decoded query string.
    pub fn from_request(
        method: &str,
        path: &str,
        query: &BTreeMap<String, String>,
    ) -> Option<AccessAttributes> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, mut parts) = match segments.as_slice() {
            ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
            ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
            _ => return None,
        };
        let mut verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
        // Legacy `/api/v1/watch/...` and `/proxy/...` prefixes name the verb.
        if let [special @ ("watch" | "proxy"), rest @ ..] = parts
            && !rest.is_empty()
        {
            verb = special.to_string();
            parts = rest;
        }
        let mut namespace = String::new();
        if let ["namespaces", ns, rest @ ..] = parts {
            namespace = ns.to_string();
            // `namespaces/<ns>/status` and `/finalize` are subresources of the namespace.
            if !rest.is_empty() && !matches!(rest[0], "status" | "finalize") {
                parts = rest;
            }
        }
        let mut attributes = AccessAttributes {
            verb,
            group: group.to_string(),
            resource: parts.first().copied().unwrap_or_default().to_string(),
            subresource: String::new(),
            namespace,
            name: parts.get(1).copied().unwrap_or_default().to_string(),
        };
        if parts.len() >= 3 && attributes.verb != "proxy" {
            attributes.subresource = parts[2].to_string();
        }
        if attributes.name.is_empty() && attributes.verb == "get" {
            attributes.verb =
                if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) {
                    "watch".into()
                } else {
                    "list".into()
                };
            if let Some(name) = query
                .get("fieldSelector")
                .and_then(|selector| exact_name(selector))
            {
                attributes.name = name;
            }
        }
        if attributes.name.is_empty() && attributes.verb == "delete" {
            attributes.verb = "deletecollection".into();
        }
        Some(attributes)
    }

    /// The attributes a SelfSubjectAccessReview asks about (`spec.resourceAttributes`), taken
    /// literally: a question about a namespace object without `namespace` is cluster-scoped.
    pub fn from_review(resource_attributes: &Value) -> AccessAttributes {
        let field = |key: &str| {
            resource_attributes
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        AccessAttributes {
            verb: field("verb"),
            group: field("group"),
            resource: field("resource"),
            subresource: field("subresource"),
            namespace: field("namespace"),
            name: field("name"),
        }
    }

    /// `resource` or `resource/subresource`, as RBAC rules spell it.
    pub fn rbac_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

impl fmt::Display for AccessAttributes {
    /// `get namespaces "demo" (group "") in namespace demo`, `list storageclasses (group
    /// "storage.k8s.io") at the cluster scope`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.rbac_resource())?;
        if !self.name.is_empty() {
            write!(f, " {:?}", self.name)?;
        }
        write!(f, " (group {:?})", self.group)?;
        if self.namespace.is_empty() {
            write!(f, " at the cluster scope")
        } else {
            write!(f, " in namespace {}", self.namespace)
        }
    }
}

/// The value of a `metadata.name=<x>` (or `==`) requirement of a field selector.
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|requirement| {
        let value = requirement
            .strip_prefix("metadata.name==")
            .or_else(|| requirement.strip_prefix("metadata.name="))?;
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// An RBAC policy for the fake server: called with the attributes of every resource request
/// and every access-review question, and with where they came from (`"GET /api/v1/...?..."` or
/// `"SelfSubjectAccessReview"`); `true` allows. Denials in `Faults::denials` still apply.
#[derive(Clone)]
pub struct Authorizer(Arc<Decide>);

/// The policy's decision: attributes and where they came from in, allowed out.
type Decide = dyn Fn(&AccessAttributes, &str) -> bool + Send + Sync;

impl Authorizer {
    pub fn new(decide: impl Fn(&AccessAttributes, &str) -> bool + Send + Sync + 'static) -> Self {
        Authorizer(Arc::new(decide))
    }

    pub fn allows(&self, attributes: &AccessAttributes, via: &str) -> bool {
        (self.0)(attributes, via)
    }
}

impl fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Authorizer(..)")
    }
}

/// The 403 kube-apiserver sends when the authorizer says no, in its exact wording.
pub fn forbidden(attributes: &AccessAttributes, user: &str) -> ApiError {
    let qualified = if attributes.group.is_empty() {
        attributes.resource.clone()
    } else {
        format!("{}.{}", attributes.resource, attributes.group)
    };
    let subject = if attributes.name.is_empty() {
        qualified
    } else {
        format!("{qualified} {:?}", attributes.name)
    };
    let scope = if attributes.namespace.is_empty() {
        " at the cluster scope".to_string()
    } else {
        format!(" in the namespace {:?}", attributes.namespace)
    };
    let mut error = ApiError::new(
        403,
        "Forbidden",
        format!(
            "{subject} is forbidden: User {user:?} cannot {} resource {:?} in API group {:?}{scope}",
            attributes.verb,
            attributes.rbac_resource(),
            attributes.group
        ),
    );
    let mut details = json!({ "kind": attributes.resource });
    if !attributes.name.is_empty() {
        details["name"] = json!(attributes.name);
    }
    if !attributes.group.is_empty() {
        details["group"] = json!(attributes.group);
    }
    error.details = Some(details);
    error
}
