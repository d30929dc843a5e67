//! The in-memory object store: objects keyed by (resource, namespace, name) in etcd key
//! order, the global resourceVersion counter, the bounded watch-event history (older
//! resourceVersions answer 410), and the REST verbs' storage semantics (create, get, list with
//! pagination, update with conflicts, patch, delete with propagation, deletecollection).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use base64::Engine;
use serde_json::{Map, Value, json};

use super::resources::{RESOURCES, ResourceInfo};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, success_status};
use super::validation::{self, SchemaMode, SchemaValidator, SchemaViolation};

/// (resource index into [`RESOURCES`], namespace or "" for cluster scope, name).
pub type Key = (usize, String, String);

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as watches and tests see it.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    pub rv: u64,
    pub event_type: EventType,
    pub res: usize,
    pub namespace: String,
    pub name: String,
    /// The object after the change (for Deleted: its last state, with the deletion's RV).
    pub object: Arc<Value>,
    /// The object before the change (Modified/Deleted), to compute selector transitions.
    pub old: Option<Arc<Value>>,
}

/// Propagation policy of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// Options shared by mutating verbs.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    /// The request's `fieldValidation` (overrides the server's schema mode when stricter).
    pub field_validation: Option<SchemaMode>,
}

/// A successful write: the object (or Status) to return, its HTTP code and warnings.
#[derive(Debug, Clone)]
pub struct WriteResult {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

/// A list page.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// All mutable server state guarded by one mutex.
pub struct Store {
    pub objects: BTreeMap<Key, Value>,
    pub rv: u64,
    pub history: VecDeque<StoreEvent>,
    pub history_limit: usize,
    /// Every event with rv <= this has been dropped from `history`.
    pub compacted_rv: u64,
    /// Every event ever, for tests (`FakeApiServer::events`).
    pub event_log: Vec<StoreEvent>,
    pub schema: Option<SchemaValidator>,
    pub schema_mode: SchemaMode,
    pub violations: Vec<SchemaViolation>,
    notify: tokio::sync::watch::Sender<u64>,
    /// uid → key, and owner uid → dependents: keep GC and propagation O(log n).
    uid_index: HashMap<String, Key>,
    owner_index: HashMap<String, BTreeSet<Key>>,
    /// Terminating objects held by the `foregroundDeletion` finalizer: the controller's
    /// foreground pass runs after every batch of changes, and scanning all objects there
    /// (under this lock) made every request of a 10,000-VM cleanup wait behind it.
    foreground_index: BTreeSet<Key>,
    name_counter: u64,
    ip_counter: u32,
}

fn held_for_foreground_deletion(obj: &Value) -> bool {
    !meta_str(obj, "deletionTimestamp").is_empty()
        && obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == "foregroundDeletion"))
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn ensure_metadata(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let o = obj.as_object_mut().unwrap();
    if !o.get("metadata").is_some_and(Value::is_object) {
        o.insert("metadata".into(), json!({}));
    }
    o.get_mut("metadata").unwrap().as_object_mut().unwrap()
}

/// The UIDs an object's ownerReferences point at.
pub fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// RFC 7386 JSON merge patch (also used for strategic-merge and as apply's approximation).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

impl Store {
    pub fn new(history_limit: usize, notify: tokio::sync::watch::Sender<u64>) -> Self {
        Store {
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted_rv: 0,
            event_log: Vec::new(),
            schema: None,
            schema_mode: SchemaMode::Strict,
            violations: Vec::new(),
            notify,
            uid_index: HashMap::new(),
            owner_index: HashMap::new(),
            foreground_index: BTreeSet::new(),
            name_counter: 0,
            ip_counter: 0,
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Records a committed change and wakes watchers.
    fn emit(&mut self, event_type: EventType, key: &Key, object: Value, old: Option<Value>) {
        let rv = meta_str(&object, "resourceVersion")
            .parse()
            .unwrap_or(self.rv);
        let ev = StoreEvent {
            rv,
            event_type,
            res: key.0,
            namespace: key.1.clone(),
            name: key.2.clone(),
            object: Arc::new(object),
            old: old.map(Arc::new),
        };
        self.event_log.push(ev.clone());
        self.history.push_back(ev);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted_rv = dropped.rv;
            }
        }
        self.notify.send_replace(self.rv);
    }

    /// Drops all retained history (every older resourceVersion now answers 410).
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted_rv = self.rv;
    }

    fn generate_name(&mut self, prefix: &str) -> String {
        // Same alphabet as apimachinery's name generator; deterministic per server.
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.name_counter += 1;
        let mut x = self.name_counter.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
        let suffix: String = (0..5)
            .map(|_| {
                let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
                x /= ALPHABET.len() as u64;
                c
            })
            .collect();
        format!("{prefix}{suffix}")
    }

    pub fn namespace_state(&self, ns: &str) -> Option<&Value> {
        self.objects.get(&(0, String::new(), ns.to_string()))
    }

    fn is_terminating(obj: &Value) -> bool {
        !meta_str(obj, "deletionTimestamp").is_empty()
    }

    /// Checks body apiVersion/kind and namespace against the request, filling them in.
    fn reconcile_type_and_namespace(
        ri: &ResourceInfo,
        ns: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(format!(
                "{} in version \"{}\" cannot be handled as a {}: the request body must be a JSON object",
                ri.kind, ri.version, ri.kind
            )));
        }
        let api_version = ri.api_version();
        if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
            && av != api_version
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({api_version})"
            )));
        }
        if let Some(k) = obj.get("kind").and_then(Value::as_str)
            && k != ri.kind
        {
            return Err(ApiError::bad_request(format!(
                "{k} in version \"{}\" cannot be handled as a {}: no kind \"{k}\" is registered for version \"{api_version}\"",
                ri.version, ri.kind
            )));
        }
        obj["apiVersion"] = json!(api_version);
        obj["kind"] = json!(ri.kind);
        let m = ensure_metadata(obj);
        if ri.namespaced {
            match m.get("namespace").and_then(Value::as_str) {
                Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        Ok(())
    }

    fn check_namespace_open(
        &self,
        ri: &ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !ri.namespaced {
            return Ok(());
        }
        match self.namespace_state(ns) {
            None => Err(ApiError::not_found(&RESOURCES[0], ns)),
            Some(n) if Self::is_terminating(n) => {
                Err(ApiError::namespace_terminating(ri, name, ns))
            }
            Some(_) => Ok(()),
        }
    }

    fn run_schema(
        &mut self,
        ri: &ResourceInfo,
        name: &str,
        obj: &mut Value,
        opts: &WriteOpts,
    ) -> Result<Vec<String>, ApiError> {
        let mode = match (self.schema_mode, opts.field_validation) {
            (SchemaMode::Off, _) => SchemaMode::Off,
            (_, Some(SchemaMode::Strict)) => SchemaMode::Strict,
            (m, _) => m,
        };
        let validator = self.schema.clone();
        validation::apply_schema(
            validator.as_ref(),
            mode,
            ri,
            name,
            obj,
            &mut self.violations,
        )
    }

    /// Create. `obj` is the request body. Returns 201 and the stored object.
    pub fn create(
        &mut self,
        res: usize,
        ns: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<WriteResult, ApiError> {
        let ri = &RESOURCES[res];
        Self::reconcile_type_and_namespace(ri, ns, &mut obj)?;
        let ns = if ri.namespaced { ns } else { "" };
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if !prefix.is_empty() {
                name = self.generate_name(&prefix);
            }
        }
        self.check_namespace_open(ri, ns, &name)?;
        if ri.plural == "secrets" {
            validation::normalize_secret(&mut obj)?;
        }
        validation::validate(ri, &name, &obj)?;
        let warnings = self.run_schema(ri, &name, &mut obj, opts)?;
        let key = (res, ns.to_string(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(ri, &name));
        }
        self.prepare_for_create(ri, &name, &mut obj);
        if opts.dry_run {
            return Ok(WriteResult {
                code: 201,
                body: obj,
                warnings,
            });
        }
        let rv = self.next_rv();
        ensure_metadata(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.set_object(key.clone(), obj.clone());
        self.emit(EventType::Added, &key, obj.clone(), None);
        Ok(WriteResult {
            code: 201,
            body: obj,
            warnings,
        })
    }

    /// Server-set fields of a new object.
    fn prepare_for_create(&mut self, ri: &ResourceInfo, name: &str, obj: &mut Value) {
        let m = ensure_metadata(obj);
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("managedFields");
        if !ri.builtin {
            m.insert("generation".into(), json!(1));
        }
        if ri.has_status && !ri.builtin {
            // With a status subresource, status is ignored on create.
            obj.as_object_mut().unwrap().remove("status");
        }
        match ri.plural {
            "namespaces" => {
                obj["spec"] = json!({ "finalizers": ["kubernetes"] });
                obj["status"] = json!({ "phase": "Active" });
                let labels = ensure_metadata(obj)
                    .entry("labels")
                    .or_insert_with(|| json!({}));
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
            "services" => {
                let spec = obj
                    .as_object_mut()
                    .unwrap()
                    .entry("spec")
                    .or_insert_with(|| json!({}));
                if spec.get("type").is_none() {
                    spec["type"] = json!("ClusterIP");
                }
                if spec.get("clusterIP").is_none() {
                    self.ip_counter += 1;
                    let ip = format!(
                        "10.96.{}.{}",
                        (self.ip_counter >> 8) & 0xff,
                        self.ip_counter & 0xff
                    );
                    spec["clusterIP"] = json!(ip);
                    spec["clusterIPs"] = json!([ip]);
                }
                obj["status"] = json!({ "loadBalancer": {} });
            }
            "persistentvolumeclaims" if obj.pointer("/status/phase").is_none() => {
                obj["status"] = json!({ "phase": "Pending" });
            }
            _ => {}
        }
    }

    pub fn get(&self, res: usize, ns: &str, name: &str) -> Result<Value, ApiError> {
        let ns = if RESOURCES[res].namespaced { ns } else { "" };
        self.objects
            .get(&(res, ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&RESOURCES[res], name))
    }

    /// List, in key order, optionally paginated. `ns` None = all namespaces.
    pub fn list(
        &self,
        res: usize,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let (start_after, snapshot_rv) = match continue_token {
            Some(t) if !t.is_empty() => {
                let (key, rv) = decode_continue(t)?;
                if rv < self.compacted_rv {
                    return Err(ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (Some(key), rv)
            }
            _ => (None, self.rv),
        };
        // Keys sort by resource first: scan only this resource's range.
        let lower = (res, String::new(), String::new());
        let matching = self
            .objects
            .range(lower..)
            .take_while(|((r, _, _), _)| *r == res)
            .filter(|((_, n, name), obj)| {
                ns.is_none_or(|ns| ns == n)
                    && start_after
                        .as_ref()
                        .is_none_or(|(sn, snm)| (n, name) > (sn, snm))
                    && labels.matches_object(obj)
                    && fields.matches_object(obj)
            });
        let mut items = Vec::new();
        let mut last: Option<(String, String)> = None;
        let mut remaining = 0u64;
        for ((_, n, name), obj) in matching {
            if limit.is_some_and(|l| l > 0 && items.len() >= l) {
                remaining += 1;
                continue;
            }
            items.push(obj.clone());
            last = Some((n.clone(), name.clone()));
        }
        let continue_token =
            (remaining > 0).then(|| encode_continue(last.as_ref().unwrap(), snapshot_rv));
        Ok(ListPage {
            items,
            resource_version: self.rv,
            continue_token,
            remaining: (remaining > 0).then_some(remaining),
        })
    }

    /// PUT (main resource or `status` subresource).
    pub fn update(
        &mut self,
        res: usize,
        ns: &str,
        name: &str,
        mut obj: Value,
        subresource: Option<&str>,
        opts: &WriteOpts,
    ) -> Result<WriteResult, ApiError> {
        let ri = &RESOURCES[res];
        Self::reconcile_type_and_namespace(ri, ns, &mut obj)?;
        let ns = if ri.namespaced { ns } else { "" };
        let body_name = meta_str(&obj, "name");
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let key = (res, ns.to_string(), name.to_string());
        let current = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(ri, name))?;
        let body_rv = meta_str(&obj, "resourceVersion");
        if !body_rv.is_empty() && body_rv != meta_str(&current, "resourceVersion") {
            return Err(ApiError::stale(ri, name));
        }
        let mut next = match subresource {
            Some("status") => {
                let mut n = current.clone();
                n["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                n
            }
            _ => {
                if ri.has_status && !ri.builtin {
                    match current.get("status") {
                        Some(s) => obj["status"] = s.clone(),
                        None => {
                            obj.as_object_mut().unwrap().remove("status");
                        }
                    }
                }
                obj
            }
        };
        if ri.plural == "secrets" {
            validation::normalize_secret(&mut next)?;
        }
        self.commit_update(res, key, current, next, opts)
    }

    /// Shared tail of update/patch: keep immutable metadata, validate, bump RV/generation.
    fn commit_update(
        &mut self,
        res: usize,
        key: Key,
        current: Value,
        mut next: Value,
        opts: &WriteOpts,
    ) -> Result<WriteResult, ApiError> {
        let ri = &RESOURCES[res];
        let name = key.2.clone();
        {
            let cm = meta(&current).cloned().unwrap_or_default();
            let m = ensure_metadata(&mut next);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ] {
                match cm.get(f) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.insert(
                "resourceVersion".into(),
                cm.get("resourceVersion").cloned().unwrap_or(Value::Null),
            );
        }
        if ri.plural == "namespaces" {
            // Namespace status is server-owned.
            next["status"] = current.get("status").cloned().unwrap_or(Value::Null);
        }
        validation::validate(ri, &name, &next)?;
        let warnings = self.run_schema(ri, &name, &mut next, opts)?;
        if next == current {
            return Ok(WriteResult {
                code: 200,
                body: current,
                warnings,
            });
        }
        if !ri.builtin && next.get("spec") != current.get("spec") {
            let g = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            ensure_metadata(&mut next).insert("generation".into(), json!(g + 1));
        }
        if opts.dry_run {
            return Ok(WriteResult {
                code: 200,
                body: next,
                warnings,
            });
        }
        let finalized = Self::is_terminating(&next)
            && next
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(|f| f.is_empty())
            && ri.plural != "namespaces";
        let rv = self.next_rv();
        ensure_metadata(&mut next).insert("resourceVersion".into(), json!(rv.to_string()));
        if finalized {
            self.take_object(&key);
            self.emit(EventType::Deleted, &key, next.clone(), Some(current));
        } else {
            self.set_object(key.clone(), next.clone());
            self.emit(EventType::Modified, &key, next.clone(), Some(current));
        }
        Ok(WriteResult {
            code: 200,
            body: next,
            warnings,
        })
    }

    /// PATCH with one of the four patch content types. `apply` creates missing objects.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        res: usize,
        ns: &str,
        name: &str,
        content_type: &str,
        body: &[u8],
        subresource: Option<&str>,
        field_manager: Option<&str>,
        opts: &WriteOpts,
    ) -> Result<WriteResult, ApiError> {
        let ri = &RESOURCES[res];
        let ns = if ri.namespaced { ns } else { "" };
        let key = (res, ns.to_string(), name.to_string());
        let ct = content_type.split(';').next().unwrap_or("").trim();
        let parse_json = |b: &[u8]| -> Result<Value, ApiError> {
            serde_json::from_slice(b)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
        };
        let current = self.objects.get(&key).cloned();
        let mut next = match ct {
            "application/apply-patch+yaml" => {
                if field_manager.is_none_or(str::is_empty) {
                    return Err(ApiError::bad_request(
                        "PATCH, fieldManager is required for apply requests",
                    ));
                }
                let applied: Value = serde_yaml::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
                match current.clone() {
                    None => {
                        if subresource.is_some() {
                            return Err(ApiError::not_found(ri, name));
                        }
                        return self.create(res, ns, applied, opts).map(|mut r| {
                            r.code = 201;
                            r
                        });
                    }
                    Some(mut cur) => {
                        merge_patch(&mut cur, &applied);
                        cur
                    }
                }
            }
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                let p = parse_json(body)?;
                if !p.is_object() {
                    return Err(ApiError::bad_request(
                        "error decoding patch: the patch must be a JSON object",
                    ));
                }
                let mut cur = current
                    .clone()
                    .ok_or_else(|| ApiError::not_found(ri, name))?;
                merge_patch(&mut cur, &p);
                cur
            }
            "application/json-patch+json" => {
                let p: json_patch::Patch = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                let mut cur = current
                    .clone()
                    .ok_or_else(|| ApiError::not_found(ri, name))?;
                json_patch::patch(&mut cur, &p).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
                cur
            }
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        let current = current.ok_or_else(|| ApiError::not_found(ri, name))?;
        // A resourceVersion in the patch is a precondition.
        let patched_rv = meta_str(&next, "resourceVersion").to_string();
        if !patched_rv.is_empty() && patched_rv != meta_str(&current, "resourceVersion") {
            return Err(ApiError::stale(ri, name));
        }
        if let (Some("status"), _) = (subresource, ()) {
            let mut n = current.clone();
            n["status"] = next.get("status").cloned().unwrap_or(Value::Null);
            next = n;
        } else if ri.has_status && !ri.builtin {
            match current.get("status") {
                Some(s) => next["status"] = s.clone(),
                None => {
                    next.as_object_mut().unwrap().remove("status");
                }
            }
        }
        next["apiVersion"] = json!(ri.api_version());
        next["kind"] = json!(ri.kind);
        if ri.plural == "secrets" {
            validation::normalize_secret(&mut next)?;
        }
        self.commit_update(res, key, current, next, opts)
    }

    /// Keys of objects with an ownerReference to `uid`.
    pub fn dependents_of(&self, uid: &str) -> Vec<Key> {
        self.owner_index
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any stored object has this uid.
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.uid_index.contains_key(uid)
    }

    /// The only way objects enter the map: keeps the indexes in step.
    fn set_object(&mut self, key: Key, obj: Value) {
        self.take_object(&key);
        let uid = meta_str(&obj, "uid").to_string();
        if !uid.is_empty() {
            self.uid_index.insert(uid, key.clone());
        }
        for owner in owner_uids(&obj) {
            self.owner_index
                .entry(owner)
                .or_default()
                .insert(key.clone());
        }
        if held_for_foreground_deletion(&obj) {
            self.foreground_index.insert(key.clone());
        }
        self.objects.insert(key, obj);
    }

    /// Terminating objects whose `foregroundDeletion` finalizer waits for their dependents.
    pub fn foreground_owners(&self) -> Vec<Key> {
        self.foreground_index.iter().cloned().collect()
    }

    /// The only way objects leave the map.
    fn take_object(&mut self, key: &Key) -> Option<Value> {
        let old = self.objects.remove(key)?;
        self.foreground_index.remove(key);
        self.uid_index.remove(meta_str(&old, "uid"));
        for owner in owner_uids(&old) {
            if let Some(set) = self.owner_index.get_mut(&owner) {
                set.remove(key);
                if set.is_empty() {
                    self.owner_index.remove(&owner);
                }
            }
        }
        Some(old)
    }

    /// Removes an object now (no checks), emitting DELETED. Returns its final state.
    pub fn remove_now(&mut self, key: &Key) -> Option<Value> {
        let old = self.take_object(key)?;
        let mut last = old.clone();
        let rv = self.next_rv();
        ensure_metadata(&mut last).insert("resourceVersion".into(), json!(rv.to_string()));
        self.emit(EventType::Deleted, key, last.clone(), Some(old));
        Some(last)
    }

    /// Answers a delete that leaves the object in place, marked for deletion (a terminating
    /// namespace, or an object held by finalizers): stored unless it is a dry run.
    fn keep_terminating(&mut self, key: &Key, marked: Value, dry_run: bool) -> WriteResult {
        let body = if dry_run {
            marked
        } else {
            self.put(key, marked)
                .expect("object exists: it was just read")
        };
        WriteResult {
            code: 200,
            body,
            warnings: vec![],
        }
    }

    /// Replaces an object (controller writes), bumping RV and emitting MODIFIED.
    pub fn put(&mut self, key: &Key, mut obj: Value) -> Option<Value> {
        let old = self.objects.get(key)?.clone();
        if old == obj {
            return Some(old);
        }
        let rv = self.next_rv();
        ensure_metadata(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        self.set_object(key.clone(), obj.clone());
        self.emit(EventType::Modified, key, obj.clone(), Some(old));
        Some(obj)
    }

    /// Inserts or replaces an object without validation (test seeding / controllers).
    pub fn upsert(&mut self, res: usize, mut obj: Value) -> Value {
        let ri = &RESOURCES[res];
        obj["apiVersion"] = json!(ri.api_version());
        obj["kind"] = json!(ri.kind);
        let ns = if ri.namespaced {
            meta_str(&obj, "namespace").to_string()
        } else {
            String::new()
        };
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            name = self.generate_name(meta_str(&obj, "generateName"));
        }
        let key = (res, ns, name.clone());
        match self.objects.get(&key) {
            Some(_) => self.put(&key, obj).unwrap(),
            None => {
                let uid = meta_str(&obj, "uid").to_string();
                let created = meta_str(&obj, "creationTimestamp").to_string();
                let keep_status = obj.get("status").cloned();
                self.prepare_for_create(ri, &name, &mut obj);
                let m = ensure_metadata(&mut obj);
                if !uid.is_empty() {
                    m.insert("uid".into(), json!(uid));
                }
                if !created.is_empty() {
                    m.insert("creationTimestamp".into(), json!(created));
                }
                if let Some(s) = keep_status {
                    obj["status"] = s;
                }
                let rv = self.next_rv();
                ensure_metadata(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
                self.set_object(key.clone(), obj.clone());
                self.emit(EventType::Added, &key, obj.clone(), None);
                obj
            }
        }
    }

    /// DELETE of one object.
    pub fn delete(
        &mut self,
        res: usize,
        ns: &str,
        name: &str,
        propagation: Option<Propagation>,
        preconditions: &Value,
        opts: &WriteOpts,
    ) -> Result<WriteResult, ApiError> {
        let ri = &RESOURCES[res];
        let ns = if ri.namespaced { ns } else { "" };
        let key = (res, ns.to_string(), name.to_string());
        let current = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(ri, name))?;
        if let Some(uid) = preconditions.get("uid").and_then(Value::as_str)
            && uid != meta_str(&current, "uid")
        {
            return Err(ApiError::conflict(
                ri,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&current, "uid")
                ),
            ));
        }
        if let Some(rv) = preconditions.get("resourceVersion").and_then(Value::as_str)
            && rv != meta_str(&current, "resourceVersion")
        {
            return Err(ApiError::conflict(
                ri,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&current, "resourceVersion")
                ),
            ));
        }
        let uid = meta_str(&current, "uid").to_string();
        if Self::is_terminating(&current) {
            // Deletion already in progress: the real server answers with the object.
            return Ok(WriteResult {
                code: 200,
                body: current,
                warnings: vec![],
            });
        }
        let mut marked = current.clone();
        {
            let m = ensure_metadata(&mut marked);
            m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        if ri.plural == "namespaces" {
            marked["status"] = json!({ "phase": "Terminating" });
            return Ok(self.keep_terminating(&key, marked, opts.dry_run));
        }
        let has_dependents = !self.dependents_of(&uid).is_empty();
        let propagation = propagation.unwrap_or(Propagation::Background);
        let mut finalizers: Vec<Value> = current
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if propagation == Propagation::Foreground && has_dependents {
            finalizers.push(json!("foregroundDeletion"));
        }
        if !finalizers.is_empty() {
            ensure_metadata(&mut marked).insert("finalizers".into(), json!(finalizers));
            return Ok(self.keep_terminating(&key, marked, opts.dry_run));
        }
        let returns_object = matches!(ri.plural, "services" | "persistentvolumeclaims");
        if opts.dry_run {
            let body = if returns_object {
                current
            } else {
                success_status(ri, name, &uid)
            };
            return Ok(WriteResult {
                code: 200,
                body,
                warnings: vec![],
            });
        }
        if propagation == Propagation::Orphan {
            self.orphan_dependents(&uid);
        }
        let last = self.remove_now(&key).unwrap();
        let body = if returns_object {
            last
        } else {
            success_status(ri, name, &uid)
        };
        Ok(WriteResult {
            code: 200,
            body,
            warnings: vec![],
        })
    }

    /// Strips ownerReferences to `uid` from its dependents (Orphan propagation).
    pub fn orphan_dependents(&mut self, uid: &str) {
        for dep in self.dependents_of(uid) {
            let mut obj = self.objects[&dep].clone();
            if let Some(refs) = obj
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
                if refs.is_empty() {
                    obj["metadata"]
                        .as_object_mut()
                        .unwrap()
                        .remove("ownerReferences");
                }
            }
            self.put(&dep, obj);
        }
    }

    /// DELETE on a collection: deletes every match; returns the List of deleted objects.
    pub fn delete_collection(
        &mut self,
        res: usize,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        propagation: Option<Propagation>,
        opts: &WriteOpts,
    ) -> Result<Vec<Value>, ApiError> {
        let page = self.list(res, ns, labels, fields, None, None)?;
        let mut out = Vec::new();
        for item in page.items {
            let item_ns = meta_str(&item, "namespace").to_string();
            let item_name = meta_str(&item, "name").to_string();
            match self.delete(res, &item_ns, &item_name, propagation, &Value::Null, opts) {
                Ok(r) => out.push(if r.body.get("kind") == Some(&json!("Status")) {
                    item
                } else {
                    r.body
                }),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

fn encode_continue((ns, name): &(String, String), rv: u64) -> String {
    let raw =
        json!({ "v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}") }).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<((String, String), u64), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token: {token}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok(((ns.to_string(), name.to_string()), rv))
}
