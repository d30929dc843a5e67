//! Server-side validation the fake applies before persisting: object names (DNS-1123 /
//! DNS-1035 rules per resource, 63-char VM names), label keys and values, Secret data
//! (base64, keys, the 1 MiB limit) and the hook for KubeVirt OpenAPI schema validation with
//! unknown-field handling (Strict rejects, Warn prunes and adds a `Warning` header).

use std::sync::Arc;

use base64::Engine;
use serde_json::Value;

use super::resources::ResourceInfo;
use super::selector::{valid_label_key, valid_label_value};
use super::status::{ApiError, FieldError};

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Largest total Secret payload the apiserver accepts.
pub const SECRET_MAX_BYTES: usize = 1024 * 1024;

fn is_label_chars(s: &str, first_alpha: bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (if first_alpha {
            b[0].is_ascii_lowercase()
        } else {
            b[0].is_ascii_lowercase() || b[0].is_ascii_digit()
        })
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_chars(s, false)
}

pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|part| is_label_chars(part, false))
}

pub fn is_dns1035_label(s: &str) -> bool {
    s.len() <= 63 && is_label_chars(s, true)
}

/// Name rules per resource, like each type's `ValidateObjectMeta` name function.
fn name_errors(res: &ResourceInfo, name: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (format_ok, msg, max) = match res.plural {
        "namespaces" => (is_label_chars(name, false), LABEL_MSG, 63),
        "services" => (is_label_chars(name, true), DNS1035_MSG, 63),
        // KubeVirt derives pod names and the `vm.kubevirt.io/name` label from these names.
        "virtualmachines" | "virtualmachineinstances" => (
            name.split('.').all(|p| is_label_chars(p, false)),
            SUBDOMAIN_MSG,
            63,
        ),
        _ => (
            name.split('.').all(|p| is_label_chars(p, false)),
            SUBDOMAIN_MSG,
            253,
        ),
    };
    if name.len() > max {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be no more than {max} characters"),
        ));
    }
    if !format_ok {
        errs.push(FieldError::invalid("metadata.name", name, msg));
    }
    errs
}

fn label_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, map) in [("metadata.labels", "/metadata/labels")] {
        let Some(labels) = obj.pointer(map).and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in labels {
            if !valid_label_key(k) {
                errs.push(FieldError::invalid(field, k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"));
            }
            let Some(v) = v.as_str() else {
                errs.push(FieldError::invalid(
                    field,
                    &v.to_string(),
                    "label values must be strings",
                ));
                continue;
            };
            if v.len() > 63 {
                errs.push(FieldError::invalid(
                    field,
                    v,
                    "must be no more than 63 characters",
                ));
            } else if !valid_label_value(v) {
                errs.push(FieldError::invalid(field, v, LABEL_VALUE_MSG));
            }
        }
    }
    errs
}

/// Validates metadata and type-specific rules; on success the object is ready to persist.
/// `name` is the final name (after generateName).
pub fn validate(res: &ResourceInfo, name: &str, obj: &Value) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        errs.extend(name_errors(res, name));
    }
    errs.extend(label_errors(obj));
    if res.plural == "secrets" {
        errs.extend(secret_errors(obj));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(res, name, &errs))
    }
}

fn secret_errors(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    if let Some(data) = obj.get("data").and_then(Value::as_object) {
        for (k, v) in data {
            if k.is_empty()
                || !k
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            {
                errs.push(FieldError::invalid(
                    &format!("data[{k}]"),
                    k,
                    CONFIG_KEY_MSG,
                ));
            }
            // Values were checked as valid base64 by `normalize_secret`.
            total += v
                .as_str()
                .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                .map_or(0, |b| b.len());
        }
    }
    if total > SECRET_MAX_BYTES {
        errs.push(FieldError::too_long("data", SECRET_MAX_BYTES));
    }
    errs
}

/// Folds `stringData` into base64 `data` and rejects undecodable `data` values, as the real
/// server's decoder does (a 400 BadRequest, before validation).
pub fn normalize_secret(obj: &mut Value) -> Result<(), ApiError> {
    let engine = base64::engine::general_purpose::STANDARD;
    if let Some(data) = obj.get("data").and_then(Value::as_object) {
        for v in data.values() {
            let Some(s) = v.as_str() else {
                return Err(ApiError::bad_request(
                    "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal non-string into Go struct field Secret.data of type []uint8",
                ));
            };
            if let Err(e) = engine.decode(s) {
                let byte = match e {
                    base64::DecodeError::InvalidByte(i, _)
                    | base64::DecodeError::InvalidLastSymbol(i, _) => i,
                    base64::DecodeError::InvalidLength(n) => n,
                    base64::DecodeError::InvalidPadding => s.len(),
                };
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {byte}"
                )));
            }
        }
    }
    if let Some(string_data) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
        && let Some(sd) = string_data.as_object()
    {
        let data = obj
            .as_object_mut()
            .unwrap()
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        for (k, v) in sd {
            let text = v.as_str().unwrap_or_default();
            data[k] = Value::String(engine.encode(text));
        }
    }
    if obj.get("type").is_none() {
        obj["type"] = Value::String("Opaque".into());
    }
    Ok(())
}

/// How unknown fields in a KubeVirt/CDI object are treated (the apiserver's
/// `fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaMode {
    /// No schema check at all.
    Off,
    /// Unknown fields are pruned and reported in a `Warning: 299` header; type errors → 422.
    Warn,
    /// Unknown fields → 400 `strict decoding error`; type errors → 422.
    #[default]
    Strict,
}

/// What a schema validator found in one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchemaReport {
    /// JSON pointers (RFC 6901) of fields the schema does not declare, e.g.
    /// `/spec/template/spec/volumes/1/cloudInitNoCloud/userDataSecretRef`.
    pub unknown_fields: Vec<String>,
    /// Other schema violations: (JSON pointer, message).
    pub errors: Vec<(String, String)>,
}

/// Validates one object of a resource against its OpenAPI definition; `None` when the
/// validator has no definition for the type.
pub type SchemaValidator = Arc<dyn Fn(&ResourceInfo, &Value) -> Option<SchemaReport> + Send + Sync>;

/// `/spec/volumes/1/x` → `spec.volumes[1].x`, the path form of apiserver messages.
pub fn pointer_to_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

/// Removes the field at a JSON pointer (for Warn mode pruning).
pub fn prune(obj: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    let target = if parent.is_empty() {
        Some(obj)
    } else {
        obj.pointer_mut(parent)
    };
    match target {
        Some(Value::Object(m)) => {
            m.remove(&last);
        }
        Some(Value::Array(a)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        _ => {}
    }
}

/// Applies the schema check for one write. Returns the warnings to send; Strict mode turns
/// unknown fields into a 400 and any mode turns schema errors into a 422.
pub fn apply_schema(
    validator: Option<&SchemaValidator>,
    mode: SchemaMode,
    res: &ResourceInfo,
    name: &str,
    obj: &mut Value,
    violations: &mut Vec<SchemaViolation>,
) -> Result<Vec<String>, ApiError> {
    let Some(validator) = validator else {
        return Ok(Vec::new());
    };
    if mode == SchemaMode::Off {
        return Ok(Vec::new());
    }
    let Some(report) = validator(res, obj) else {
        return Ok(Vec::new());
    };
    for f in &report.unknown_fields {
        violations.push(SchemaViolation {
            kind: res.kind.to_string(),
            name: name.to_string(),
            path: pointer_to_path(f),
            message: "unknown field".into(),
        });
    }
    for (p, m) in &report.errors {
        violations.push(SchemaViolation {
            kind: res.kind.to_string(),
            name: name.to_string(),
            path: pointer_to_path(p),
            message: m.clone(),
        });
    }
    if !report.errors.is_empty() {
        let causes: Vec<FieldError> = report
            .errors
            .iter()
            .map(|(p, m)| FieldError::invalid(&pointer_to_path(p), "", m.clone()))
            .collect();
        return Err(ApiError::invalid(res, name, &causes));
    }
    if report.unknown_fields.is_empty() {
        return Ok(Vec::new());
    }
    let listed: Vec<String> = report
        .unknown_fields
        .iter()
        .map(|f| format!("unknown field \"{}\"", pointer_to_path(f)))
        .collect();
    if mode == SchemaMode::Strict {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            listed.join(", "),
            kind = res.kind,
            v = res.version
        )));
    }
    // Prune deepest/last first so earlier array indices stay valid.
    let mut pointers = report.unknown_fields.clone();
    pointers.sort();
    for p in pointers.iter().rev() {
        prune(obj, p);
    }
    Ok(listed)
}

/// One schema finding, kept for tests to assert on (`FakeApiServer::schema_violations`).
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaViolation {
    pub kind: String,
    pub name: String,
    /// Dotted path, e.g. `spec.template.spec.volumes[1].cloudInitNoCloud.userDataSecretRef`.
    pub path: String,
    pub message: String,
}
