//! A small, strict validator for JSON values against the OpenAPI v2 (swagger) definitions in
//! KubeVirt's published schema, used to prove that the objects virtwork emits are accepted by
//! a real API server: `$ref`, `type` (incl. type lists and `nullable`), `format` (int32/int64
//! ranges, int-or-string, quantities), `enum`, `required`, `properties` with unknown keys
//! REJECTED in strict mode (as a structural-schema API server prunes/rejects them), `items`
//! and `additionalProperties`.
//!
//! Standalone on purpose: integration tests include it with `#[path = "support/schema.rs"]`
//! and the fake API server reuses it to validate KubeVirt objects it receives. It owns no
//! I/O beyond [`load_schema`], which finds `shared/schemas/kubevirt-swagger.json`.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

/// Env var naming the schema file explicitly.
pub const SCHEMA_PATH_ENV: &str = "VIRTWORK_SCHEMA_PATH";
/// Env var that turns "schema file absent" from a skip into a failure (set by CI).
pub const REQUIRE_SCHEMA_ENV: &str = "VIRTWORK_REQUIRE_SCHEMA";

const QUANTITY_DEFINITION: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";

/// Validates `value` against `definitions.<definition>` of `schema_doc`.
///
/// Returns every violation as `<json path>: <problem>`; empty means valid. With `strict`,
/// object keys not declared in `properties` (and not covered by `additionalProperties`)
/// are violations.
pub fn validate(schema_doc: &Value, definition: &str, value: &Value, strict: bool) -> Vec<String> {
    let mut validator = Validator {
        doc: schema_doc,
        strict,
        errors: Vec::new(),
    };
    match schema_doc.pointer(&format!("/definitions/{}", escape_pointer(definition))) {
        Some(schema) => validator.check(schema, Some(definition), value, "$"),
        None => validator
            .errors
            .push(format!("$: schema has no definition {definition:?}")),
    }
    validator.errors
}

/// Finds and parses the KubeVirt swagger document.
///
/// Looks at `$VIRTWORK_SCHEMA_PATH`, then `shared/schemas/kubevirt-swagger.json` in the
/// crate's parent and each further ancestor (so `../shared/...` next to a clone is found
/// first). Returns `None` with a printed notice when absent, and panics when absent while
/// `VIRTWORK_REQUIRE_SCHEMA=1`.
pub fn load_schema() -> Option<Value> {
    let path = schema_path();
    let Some(path) = path else {
        let msg = format!(
            "kubevirt-swagger.json not found (set {SCHEMA_PATH_ENV} or place shared/schemas \
             beside the repository)"
        );
        if std::env::var(REQUIRE_SCHEMA_ENV).is_ok_and(|v| v == "1") {
            panic!("{msg}, and {REQUIRE_SCHEMA_ENV}=1");
        }
        eprintln!("SKIPPED: {msg}");
        return None;
    };
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading schema {}: {e}", path.display()));
    Some(
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("parsing schema {}: {e}", path.display())),
    )
}

fn schema_path() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os(SCHEMA_PATH_ENV) {
        let path = PathBuf::from(explicit);
        return path.is_file().then_some(path);
    }
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .skip(1)
        .map(|dir| dir.join("shared/schemas/kubevirt-swagger.json"))
        .find(|candidate| candidate.is_file())
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

struct Validator<'a> {
    doc: &'a Value,
    strict: bool,
    errors: Vec<String>,
}

impl<'a> Validator<'a> {
    fn check(&mut self, schema: &'a Value, definition: Option<&str>, value: &Value, path: &str) {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let Some(name) = reference.strip_prefix("#/definitions/") else {
                self.errors
                    .push(format!("{path}: unsupported $ref {reference:?}"));
                return;
            };
            match self
                .doc
                .pointer(&format!("/definitions/{}", escape_pointer(name)))
            {
                Some(target) => self.check(target, Some(name), value, path),
                None => self
                    .errors
                    .push(format!("{path}: dangling $ref {reference:?}")),
            }
            return;
        }

        let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
        if value.is_null() && (nullable || type_allows(schema, "null")) {
            return;
        }

        if let Some(types) = declared_types(schema) {
            let format = schema.get("format").and_then(Value::as_str);
            if !types.iter().any(|t| matches_type(t, format, value)) {
                self.errors.push(format!(
                    "{path}: expected {} but found {}",
                    types.join(" or "),
                    describe(value)
                ));
                return;
            }
            if let Some(problem) = check_format(format, value) {
                self.errors.push(format!("{path}: {problem}"));
            }
        }

        if definition == Some(QUANTITY_DEFINITION)
            && let Some(text) = value.as_str()
            && !is_quantity(text)
        {
            self.errors
                .push(format!("{path}: {text:?} is not a Kubernetes quantity"));
        }

        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            self.errors.push(format!(
                "{path}: {} is not one of {}",
                describe(value),
                Value::Array(allowed.clone())
            ));
        }

        match value {
            Value::Object(map) => self.check_object(schema, map, path),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item_schema, None, item, &format!("{path}[{i}]"));
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(
        &mut self,
        schema: &'a Value,
        map: &serde_json::Map<String, Value>,
        path: &str,
    ) {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    self.errors
                        .push(format!("{path}: missing required field {key:?}"));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (key, child) in map {
            let child_path = format!("{path}.{key}");
            if let Some(prop_schema) = properties.and_then(|p| p.get(key)) {
                self.check(prop_schema, None, child, &child_path);
                continue;
            }
            match additional {
                Some(Value::Bool(true)) => {}
                Some(extra @ Value::Object(_)) => self.check(extra, None, child, &child_path),
                _ if self.strict => {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    self.errors.push(if known.is_empty() {
                        format!("{path}: unknown field {key:?} (this object takes no fields)")
                    } else {
                        format!(
                            "{path}: unknown field {key:?} (known: {})",
                            known.join(", ")
                        )
                    });
                }
                _ => {}
            }
        }
    }
}

fn declared_types(schema: &Value) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(list) => Some(list.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn type_allows(schema: &Value, wanted: &str) -> bool {
    declared_types(schema).is_some_and(|types| types.contains(&wanted))
}

fn matches_type(expected: &str, format: Option<&str>, value: &Value) -> bool {
    match expected {
        // An int-or-string field is declared `type: string` with this format.
        "string" if format == Some("int-or-string") => {
            value.is_string() || value.is_i64() || value.is_u64()
        }
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => false,
    }
}

fn check_format(format: Option<&str>, value: &Value) -> Option<String> {
    let in_range = |min: i128, max: i128| {
        let n = value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))?;
        (n < min || n > max).then(|| format!("{n} is out of range for its format"))
    };
    match format? {
        "int32" => in_range(i32::MIN.into(), i32::MAX.into()),
        "int64" => in_range(i64::MIN.into(), i64::MAX.into()),
        "int-or-string" => match value {
            Value::String(s) if s.is_empty() => Some("empty int-or-string".to_string()),
            _ => in_range(i32::MIN.into(), i32::MAX.into()),
        },
        _ => None,
    }
}

/// Kubernetes quantity grammar: `<signed number><suffix>` where the suffix is a binary SI
/// suffix (Ki..Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal
/// exponent (e/E followed by a signed integer).
pub fn is_quantity(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let valid_number = {
        let mut parts = number.splitn(2, '.');
        let whole = parts.next().unwrap_or("");
        let frac = parts.next();
        !number.is_empty()
            && number != "."
            && !frac.is_some_and(|f| f.contains('.'))
            && (whole.chars().all(|c| c.is_ascii_digit()))
    };
    if !valid_number {
        return false;
    }
    const SUFFIXES: [&str; 16] = [
        "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    if SUFFIXES.contains(&suffix) {
        return true;
    }
    let Some(exponent) = suffix.strip_prefix(['e', 'E']) else {
        return false;
    };
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}
