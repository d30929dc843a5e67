//! API errors as the real kube-apiserver sends them: `metav1.Status` bodies (kind Status,
//! status Failure, reason, details, code) with the exact message formats of
//! `k8s.io/apimachinery/pkg/api/errors`, plus the Success Status returned by deletes.

use serde_json::{Value, json};

use super::resources::ResourceInfo;

/// One failed request: HTTP code, machine reason, human message, and optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Sent as the `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after_secs: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `secrets "x" not found` / `virtualmachines.kubevirt.io "x" not found`.
    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified()),
        )
        .with_details(res.details(name))
    }

    pub fn already_exists(res: &ResourceInfo, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.qualified()),
        )
        .with_details(res.details(name))
    }

    pub fn conflict(res: &ResourceInfo, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                res.qualified()
            ),
        )
        .with_details(res.details(name))
    }

    /// The optimistic-concurrency conflict of an update carrying a stale resourceVersion.
    pub fn stale(res: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with one cause per field error, like `errors.NewInvalid`.
    pub fn invalid(res: &ResourceInfo, name: &str, causes: &[FieldError]) -> Self {
        let joined = if causes.len() == 1 {
            causes[0].to_string()
        } else {
            format!(
                "[{}]",
                causes
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let mut details = json!({
            "name": name,
            "kind": res.kind,
            "causes": causes.iter().map(|c| json!({
                "reason": c.reason, "message": c.detail_message(), "field": c.field,
            })).collect::<Vec<_>>(),
        });
        if !res.group.is_empty() {
            details["group"] = json!(res.group);
        }
        ApiError::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {joined}", res.kind),
        )
        .with_details(details)
    }

    /// RBAC denial in the authorizer's exact wording.
    pub fn forbidden_rbac(
        res: &ResourceInfo,
        name: &str,
        user: &str,
        verb: &str,
        namespace: Option<&str>,
    ) -> Self {
        let subject = if name.is_empty() {
            res.qualified()
        } else {
            format!("{} \"{name}\"", res.qualified())
        };
        let scope = match namespace {
            Some(ns) if !ns.is_empty() => format!(" in the namespace \"{ns}\""),
            _ => " at the cluster scope".to_string(),
        };
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\"{scope}",
                res.plural, res.group
            ),
        )
        .with_details(res.details(name))
    }

    /// Create into a namespace whose deletion is in progress.
    pub fn namespace_terminating(res: &ResourceInfo, name: &str, ns: &str) -> Self {
        let mut details = res.details(name);
        details["causes"] = json!([{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace",
        }]);
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                res.qualified()
            ),
        )
        .with_details(details)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn too_many_requests(retry_after_secs: u64) -> Self {
        let mut e = ApiError::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({ "retryAfterSeconds": retry_after_secs }));
        e.retry_after_secs = Some(retry_after_secs);
        e
    }

    /// The 410 of a watch or continue token older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    pub fn method_not_allowed(verb: &str) -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {content_type:?})"
            ),
        )
    }

    /// A server error for an injected fault with the given code (5xx or anything else).
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            500 => ("InternalError", "Internal error occurred: injected fault".to_string()),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_string()),
            504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request".to_string()),
            429 => return Self::too_many_requests(1),
            409 => ("Conflict", "Operation cannot be fulfilled: injected conflict".to_string()),
            // The reason the real server pairs with each code: clients (kube's Status
            // helpers, client-go) decide by reason when it is a known one.
            400 => ("BadRequest", format!("injected fault {code}")),
            401 => ("Unauthorized", format!("injected fault {code}")),
            403 => ("Forbidden", format!("injected fault {code}")),
            404 => ("NotFound", format!("injected fault {code}")),
            422 => ("Invalid", format!("injected fault {code}")),
            _ => ("InternalError", format!("injected fault {code}")),
        };
        let mut e = ApiError::new(code, reason, message);
        if code == 500 {
            e.details = Some(json!({ "causes": [{ "message": "injected fault" }] }));
        }
        if code == 503 || code == 504 {
            e.retry_after_secs = Some(1);
            e.details = Some(json!({ "retryAfterSeconds": 1 }));
        }
        e
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// One field error of an Invalid response (`field.Error`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueTooLong`, ...
    pub reason: &'static str,
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    pub fn invalid(field: &str, value: &str, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            value: Some(value.into()),
            detail: detail.into(),
        }
    }
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueRequired",
            value: None,
            detail: detail.into(),
        }
    }
    pub fn too_long(field: &str, max: usize) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueTooLong",
            value: None,
            detail: format!("must have at most {max} bytes"),
        }
    }

    fn detail_message(&self) -> String {
        match (self.reason, &self.value) {
            ("FieldValueInvalid", Some(v)) => format!("Invalid value: {v:?}: {}", self.detail),
            ("FieldValueRequired", _) => format!("Required value: {}", self.detail),
            ("FieldValueTooLong", _) => format!("Too long: {}", self.detail),
            _ => self.detail.clone(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.detail_message())
    }
}

/// The Success Status a delete returns once the object is gone.
pub fn success_status(res: &ResourceInfo, name: &str, uid: &str) -> Value {
    let mut details = res.details(name);
    details["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
