//! The HTTP/1.1 front of the fake server: the accept loop (plain or TLS), request routing
//! by Kubernetes URL layout, bearer-token auth, RBAC (denials or a policy), fault injection, the request
//! log and counters, and each verb's wire format (JSON bodies, Status errors, Table output
//! for kubectl, and chunked watch streams with bookmarks, timeouts and 410s).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use super::authz::{self, AccessAttributes};
use super::controllers::ControllerOptions;
use super::faults::{AfterCommit, FaultAction, Faults, Rng};
use super::resources::{self, RESOURCES, ResourceInfo};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{EventType, Propagation, Store, StoreEvent, WriteOpts, WriteResult, meta_str};
use super::validation::SchemaMode;

pub type Body = BoxBody<Bytes, Infallible>;

/// One served request, as tests see it in `FakeApiServer::request_log`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    pub method: String,
    pub path: String,
    /// Raw query string ("" when none).
    pub query: String,
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, ...) or "" for non-resource paths.
    pub verb: String,
    /// Resource plural or "" for non-resource paths.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    /// HTTP status sent; 0 when the connection was dropped without a response.
    pub status: u16,
    /// Until the response head (watches: until the stream was set up).
    pub duration: Duration,
    /// Requests in flight when this one started, itself included.
    pub inflight_at_start: usize,
    pub timestamp: SystemTime,
    /// Whether the write was committed (mutating verbs only; true for dry runs never).
    pub committed: bool,
    /// The request's `Accept` header ("" when none): shows metadata-only and Table requests.
    pub accept: String,
    /// The DeleteOptions body of a delete (preconditions, propagation), else None.
    pub delete_options: Option<Value>,
}

/// Settings changeable while the server runs.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub virtualization_installed: bool,
    pub token: Option<String>,
    pub user: String,
    pub bookmark_interval: Duration,
    /// Server-side default watch timeout when the client sends none.
    pub default_watch_timeout: Duration,
}

/// State shared by the HTTP layer, the controllers and the test handle.
pub struct Shared {
    pub store: Mutex<Store>,
    pub changes: tokio::sync::watch::Receiver<u64>,
    pub faults: Mutex<(Faults, Rng)>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub counters: Mutex<BTreeMap<(String, String), u64>>,
    pub inflight: AtomicUsize,
    pub config: Mutex<RuntimeConfig>,
    pub controller: Mutex<ControllerOptions>,
    pub address: String,
    /// Service-proxy backends and the KubeVirt metrics state (proxy.rs, metrics.rs).
    pub proxy: Mutex<super::proxy::ProxyState>,
}

/// Parsed Kubernetes request target.
#[derive(Debug, Clone, Default)]
struct Target {
    res: Option<usize>,
    namespace: String,
    /// Whether the URL carried `/namespaces/<ns>/` (vs all-namespaces / cluster scope).
    namespaced_url: bool,
    name: String,
    subresource: Option<String>,
    verb: String,
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response<Body> {
    let mut b = Response::builder()
        .status(code)
        .header("Content-Type", "application/json");
    for w in warnings {
        b = b.header("Warning", format!("299 - {:?}", w));
    }
    b.body(full(serde_json::to_vec(body).unwrap())).unwrap()
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(e.code, &e.to_status(), &[]);
    if let Some(s) = e.retry_after_secs {
        resp.headers_mut()
            .insert("Retry-After", s.to_string().parse().unwrap());
    }
    resp
}

fn not_found_path() -> ApiError {
    let mut e = ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    e.details = Some(json!({}));
    e
}

/// Percent-decodes one query component (`+` is a space).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(v) => {
                    out.push(v);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

fn is_true(v: Option<&String>) -> bool {
    matches!(v.map(String::as_str), Some("true" | "1"))
}

/// Routes `/api/...` and `/apis/...` resource paths. Err = not a resource path we serve.
fn parse_target(
    method: &str,
    path: &str,
    query: &BTreeMap<String, String>,
    virt: bool,
) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path()),
    };
    if !resources::group_version_served(group, version, virt) || rest.is_empty() {
        return Err(not_found_path());
    }
    let find = |plural: &str| resources::find(group, version, plural);
    let mut t = Target::default();
    let (res, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if find(plural).is_some_and(|r| RESOURCES[r].namespaced) =>
        {
            t.namespace = ns.to_string();
            t.namespaced_url = true;
            (find(plural), tail.first().copied(), tail.get(1).copied())
        }
        [plural, tail @ ..] => (find(plural), tail.first().copied(), tail.get(1).copied()),
        [] => (None, None, None),
    };
    let res = res.ok_or_else(not_found_path)?;
    let ri = &RESOURCES[res];
    t.res = Some(res);
    t.name = name.unwrap_or("").to_string();
    t.subresource = sub.map(String::from);
    // `pods/<name>/eviction` is the Eviction API (a create), handled in drain.rs.
    let eviction = ri.plural == "pods" && t.subresource.as_deref() == Some("eviction");
    if let Some(s) = &t.subresource
        && !eviction
        && (s != "status" || !ri.has_status)
    {
        return Err(not_found_path());
    }
    if eviction {
        if method != "POST" {
            return Err(ApiError::method_not_allowed(method));
        }
        t.verb = "create".to_string();
        return Ok(t);
    }
    if !ri.namespaced && t.namespaced_url {
        return Err(not_found_path());
    }
    let collection = t.name.is_empty();
    t.verb = match (method, collection) {
        ("GET", true) if is_true(query.get("watch")) => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", true) => "create",
        ("PUT", false) => "update",
        ("PATCH", false) => "patch",
        ("DELETE", false) => "delete",
        ("DELETE", true) => "deletecollection",
        _ => return Err(ApiError::method_not_allowed(method)),
    }
    .to_string();
    if ri.create_only && t.verb != "create" {
        return Err(ApiError::method_not_allowed(method));
    }
    Ok(t)
}

/// How objects are sent back, from the `Accept` header: as stored, as a `meta.k8s.io/v1`
/// Table (kubectl's printers), or metadata only (`as=PartialObjectMetadata[List]`, what
/// clients ask for when they need no spec, status or Secret data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Full,
    Table,
    Metadata,
}

/// `meta.k8s.io/v1` PartialObjectMetadata of `obj`.
fn partial_object(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// Continue tokens of the endless-list fault start with this.
const ENDLESS_TOKEN: &str = "endless";
/// Pages served under the endless-list fault (makes fresh tokens unique).
static ENDLESS_PAGES: AtomicUsize = AtomicUsize::new(0);

fn is_mutating(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// Decrements the in-flight counter when the request finishes.
struct InflightGuard<'a>(&'a AtomicUsize);
impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Outcome of the fault draw for one request.
#[derive(Debug, Default)]
struct FaultPlan {
    delay: Duration,
    fail_before: Option<u16>,
    drop_before: bool,
    stall: bool,
    oversized: Option<usize>,
    deny: Option<(u16, String)>,
    after_commit: Option<AfterCommit>,
}

fn plan_faults(shared: &Shared, t: &Target) -> FaultPlan {
    let resource = t.res.map(|r| RESOURCES[r].plural).unwrap_or("");
    plan_faults_for(shared, &t.verb, resource, &t.name)
}

/// The fault draw for a request by its verb, resource (a plural, or `plural/subresource`
/// for KubeVirt's lifecycle subresources) and object name.
fn plan_faults_for(shared: &Shared, verb: &str, resource: &str, name: &str) -> FaultPlan {
    let mut guard = shared.faults.lock().unwrap();
    let (faults, rng) = &mut *guard;
    let mut plan = FaultPlan::default();
    if !faults.latency.is_zero() || !faults.jitter.is_zero() {
        let jitter = faults.jitter.mul_f64(rng.unit());
        plan.delay = faults.latency + jitter;
    }
    if let Some(sf) = faults
        .scripted
        .iter_mut()
        .find(|s| s.matches(verb, resource, name))
    {
        sf.times -= 1;
        match sf.action {
            FaultAction::Fail(c) => plan.fail_before = Some(c),
            FaultAction::FailAfterCommit(c) => plan.after_commit = Some(AfterCommit::Status(c)),
            FaultAction::Drop => plan.drop_before = true,
            FaultAction::DropAfterCommit => plan.after_commit = Some(AfterCommit::Drop),
            FaultAction::Delay(d) => plan.delay += d,
            FaultAction::Stall => plan.stall = true,
            FaultAction::Oversized(bytes) => plan.oversized = Some(bytes),
            FaultAction::Deny {
                code,
                message,
                times,
            } => plan.deny = Some((code, message.repeat(times))),
        }
        return plan;
    }
    if verb != "watch" && rng.chance(faults.drop_rate) {
        plan.drop_before = true;
        return plan;
    }
    if is_mutating(verb) {
        if rng.chance(faults.error_rate) {
            let codes = if faults.error_codes.is_empty() {
                vec![500]
            } else {
                faults.error_codes.clone()
            };
            plan.fail_before = Some(codes[(rng.next_u64() % codes.len() as u64) as usize]);
        } else if rng.chance(faults.after_commit_rate) {
            plan.after_commit = Some(faults.after_commit);
        }
    }
    plan
}

/// Serves one connection until it closes or a handler asks to drop it.
pub async fn serve_connection<I>(io: I, shared: Arc<Shared>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = Arc::new(Notify::new());
    let k2 = kill.clone();
    let svc = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let kill = k2.clone();
        async move { Ok::<_, Infallible>(handle(shared, kill, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::select! {
        _ = conn => {}
        _ = kill.notified() => {}
    }
}

/// Never answers: the connection task drops the socket once `kill` fires.
async fn drop_connection(kill: &Notify) -> Response<Body> {
    kill.notify_one();
    std::future::pending::<()>().await;
    unreachable!()
}

async fn handle(shared: Arc<Shared>, kill: Arc<Notify>, req: Request<Incoming>) -> Response<Body> {
    let start = Instant::now();
    let timestamp = SystemTime::now();
    let inflight_at_start = shared.inflight.fetch_add(1, Ordering::SeqCst) + 1;
    let _guard = InflightGuard(&shared.inflight);
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let query = parse_query(&raw_query);
    let virt = shared.config.lock().unwrap().virtualization_installed;
    let target = parse_target(&method, &path, &query, virt);
    let mut record = RequestRecord {
        method: method.clone(),
        path: path.clone(),
        query: raw_query.clone(),
        verb: String::new(),
        resource: String::new(),
        namespace: String::new(),
        name: String::new(),
        status: 0,
        duration: Duration::ZERO,
        inflight_at_start,
        timestamp,
        committed: false,
        accept: req
            .headers()
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        delete_options: None,
    };
    if let Ok(t) = &target {
        record.verb = t.verb.clone();
        record.resource = t
            .res
            .map(|r| RESOURCES[r].plural.to_string())
            .unwrap_or_default();
        record.namespace = t.namespace.clone();
        record.name = t.name.clone();
        *shared
            .counters
            .lock()
            .unwrap()
            .entry((record.verb.clone(), record.resource.clone()))
            .or_insert(0) += 1;
    }
    let finish = |shared: &Shared, mut record: RequestRecord, status: u16| {
        record.status = status;
        record.duration = start.elapsed();
        shared.log.lock().unwrap().push(record);
    };

    // Authentication first, like the real filter chain (health and version are open).
    let open_path = matches!(
        path.as_str(),
        "/version" | "/healthz" | "/livez" | "/readyz"
    );
    let token = shared.config.lock().unwrap().token.clone();
    if let (Some(expected), false) = (token, open_path) {
        let got = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if got != format!("Bearer {expected}") {
            let resp = error_response(&ApiError::unauthorized());
            finish(&shared, record, 401);
            return resp;
        }
    }

    // An RBAC policy decides on RequestInfo attributes before routing: like a real cluster,
    // a forbidden request to a path nothing serves is 403, not 404.
    let authorizer = shared.faults.lock().unwrap().0.authorizer.clone();
    if let Some(authorizer) = authorizer
        && let Some(attributes) = AccessAttributes::from_request(&method, &path, &query)
    {
        let via = if raw_query.is_empty() {
            format!("{method} {path}")
        } else {
            format!("{method} {path}?{raw_query}")
        };
        if !authorizer.allows(&attributes, &via) {
            let user = shared.config.lock().unwrap().user.clone();
            if record.resource.is_empty() {
                // Not a path the fake routes as a resource (e.g. a service proxy): log what
                // was refused.
                record.verb = attributes.verb.clone();
                record.resource = attributes.rbac_resource();
                record.namespace = attributes.namespace.clone();
                record.name = attributes.name.clone();
            }
            finish(&shared, record, 403);
            return error_response(&authz::forbidden(&attributes, &user));
        }
    }

    if let Some(lifecycle) = super::lifecycle::parse(&path) {
        record.verb = if method == "PUT" { "update" } else { "" }.to_string();
        record.resource = format!("virtualmachines/{}", lifecycle.action);
        record.namespace = lifecycle.namespace.clone();
        record.name = lifecycle.name.clone();
        *shared
            .counters
            .lock()
            .unwrap()
            .entry((record.verb.clone(), record.resource.clone()))
            .or_insert(0) += 1;
        let _ = req.into_body().collect().await;
        // RBAC names a subresource as `virtualmachines/restart`: a denial of plain
        // `virtualmachines` does not cover it, as on a real cluster.
        let (denied, rate_limited) = {
            let faults = &shared.faults.lock().unwrap().0;
            let denied = faults
                .denials
                .iter()
                .any(|d| d.matches(&record.verb, &record.resource, &lifecycle.namespace));
            let limited = faults
                .max_inflight
                .is_some_and(|max| inflight_at_start > max)
                .then(|| faults.retry_after_secs.max(1));
            (denied, limited)
        };
        if let Some(secs) = rate_limited {
            finish(&shared, record, 429);
            return error_response(&ApiError::too_many_requests(secs));
        }
        if denied {
            let attributes = AccessAttributes::from_request(&method, &path, &query)
                .expect("a lifecycle path is a resource path");
            let user = shared.config.lock().unwrap().user.clone();
            finish(&shared, record, 403);
            return error_response(&authz::forbidden(&attributes, &user));
        }
        let plan = plan_faults_for(&shared, &record.verb, &record.resource, &record.name);
        let latency = shared.faults.lock().unwrap().0.latency;
        if !(latency + plan.delay).is_zero() {
            tokio::time::sleep(latency + plan.delay).await;
        }
        if plan.drop_before {
            finish(&shared, record, 0);
            return drop_connection(&kill).await;
        }
        if let Some(code) = plan.fail_before {
            finish(&shared, record, code);
            return error_response(&ApiError::injected(code));
        }
        return match super::lifecycle::serve(&shared, &method, &lifecycle) {
            Ok(code) => {
                record.committed = true;
                match plan.after_commit {
                    // The change is made; the answer never reaches the client.
                    Some(AfterCommit::Drop) => {
                        finish(&shared, record, 0);
                        drop_connection(&kill).await
                    }
                    Some(AfterCommit::Status(status)) => {
                        finish(&shared, record, status);
                        error_response(&ApiError::injected(status))
                    }
                    None => {
                        finish(&shared, record, code);
                        Response::builder()
                            .status(code)
                            .body(full(Bytes::new()))
                            .unwrap()
                    }
                }
            }
            Err(e) => {
                finish(&shared, record, e.code);
                error_response(&e)
            }
        };
    }

    if let Some(proxied) = super::proxy::parse(&path) {
        record.verb = match method.as_str() {
            "GET" | "HEAD" => "get",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
        record.resource = "services/proxy".into();
        record.namespace = proxied.namespace.clone();
        record.name = proxied.service.clone();
        *shared
            .counters
            .lock()
            .unwrap()
            .entry((record.verb.clone(), record.resource.clone()))
            .or_insert(0) += 1;
        let verb = record.verb.clone();
        let resp = super::proxy::serve(&shared, &proxied, &verb, &raw_query, req).await;
        let status = resp.status().as_u16();
        finish(&shared, record, status);
        return resp;
    }

    let t = match target {
        Ok(t) => t,
        Err(e) if e.code == 404 => {
            let resp = non_resource(&shared, &method, &path);
            let status = resp.status().as_u16();
            finish(&shared, record, status);
            return resp;
        }
        Err(e) => {
            finish(&shared, record, e.code);
            return error_response(&e);
        }
    };
    let ri = &RESOURCES[t.res.unwrap()];
    let accept = req
        .headers()
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let render = if accept.contains("as=Table") {
        Render::Table
    } else if accept.contains("as=PartialObjectMetadata") {
        Render::Metadata
    } else {
        Render::Full
    };
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            finish(&shared, record, 0);
            return drop_connection(&kill).await;
        }
    };
    if t.verb == "delete" && !body.is_empty() {
        record.delete_options = serde_json::from_slice(&body).ok();
    }
    let mut t = t;
    if t.verb == "create" && t.name.is_empty() {
        // Name the object being created (for scripted faults and the log) from its body.
        let parsed: Option<Value> = serde_json::from_slice(&body).ok();
        if let Some(n) = parsed
            .as_ref()
            .and_then(|b| b.pointer("/metadata/name"))
            .and_then(Value::as_str)
        {
            t.name = n.to_string();
            record.name = t.name.clone();
        }
    }

    // API Priority and Fairness: watches are long-running and not limited here.
    let faults_snapshot = shared.faults.lock().unwrap().0.clone();
    if t.verb != "watch"
        && let Some(max) = faults_snapshot.max_inflight
        && inflight_at_start > max
    {
        let secs = faults_snapshot.retry_after_secs.max(1);
        finish(&shared, record, 429);
        return error_response(&ApiError::too_many_requests(secs));
    }
    let user = shared.config.lock().unwrap().user.clone();
    if faults_snapshot
        .denials
        .iter()
        .any(|d| d.matches(&t.verb, ri.plural, &t.namespace))
    {
        let name = if matches!(
            t.verb.as_str(),
            "create" | "list" | "watch" | "deletecollection"
        ) {
            ""
        } else {
            &t.name
        };
        let ns = ri.namespaced.then_some(t.namespace.as_str());
        let e = ApiError::forbidden_rbac(ri, name, &user, &t.verb, ns);
        finish(&shared, record, 403);
        return error_response(&e);
    }
    let plan = plan_faults(&shared, &t);
    if !plan.delay.is_zero() {
        tokio::time::sleep(plan.delay).await;
    }
    if plan.drop_before {
        finish(&shared, record, 0);
        return drop_connection(&kill).await;
    }
    if let Some(code) = plan.fail_before {
        // A scripted 403 reads like an RBAC denial (an authorizer that changed its mind after
        // the access review, or an admission plugin), so clients see the real wording.
        let e = if code == 403 {
            let name = if matches!(t.verb.as_str(), "create" | "list" | "watch") {
                ""
            } else {
                &t.name
            };
            let ns = ri.namespaced.then_some(t.namespace.as_str());
            ApiError::forbidden_rbac(ri, name, &user, &t.verb, ns)
        } else {
            ApiError::injected(code)
        };
        finish(&shared, record, code);
        let mut response = error_response(&e);
        if (300..400).contains(&code) {
            // A redirect, as a login page or a misconfigured proxy in front of a server sends.
            response.headers_mut().insert(
                "Location",
                "https://elsewhere.example/login".parse().unwrap(),
            );
        }
        return response;
    }
    if let Some((code, message)) = plan.deny {
        finish(&shared, record, code);
        return error_response(&ApiError::new(code, "Forbidden", message));
    }
    if let Some(bytes) = plan.oversized {
        finish(&shared, record, 200);
        return oversized_response(ri, &t, bytes);
    }
    if plan.stall {
        finish(&shared, record, 200);
        let silent = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
        return Response::builder()
            .status(200)
            .header("Content-Type", "application/json")
            .body(StreamBody::new(silent).boxed())
            .unwrap();
    }

    if t.verb == "watch" {
        let resp = watch(
            &shared,
            &t,
            &query,
            render,
            faults_snapshot.watch_max_duration,
        );
        let status = resp.status().as_u16();
        finish(&shared, record, status);
        return resp;
    }

    let result = execute(&shared, &t, &query, &content_type, &body, render, &user);
    let committed = is_mutating(&t.verb) && result.is_ok() && !dry_run(&query);
    record.committed = committed;
    if !faults_snapshot.response_latency.is_zero() {
        tokio::time::sleep(faults_snapshot.response_latency).await;
    }
    match (result, plan.after_commit) {
        (Ok(_), Some(AfterCommit::Drop)) => {
            finish(&shared, record, 0);
            drop_connection(&kill).await
        }
        (Ok(_), Some(AfterCommit::Status(code))) => {
            finish(&shared, record, code);
            error_response(&ApiError::injected(code))
        }
        (Ok(r), _) => {
            finish(&shared, record, r.code);
            json_response(r.code, &r.body, &r.warnings)
        }
        (Err(e), _) => {
            finish(&shared, record, e.code);
            error_response(&e)
        }
    }
}

/// A 200 answer of about `bytes` bytes, streamed in 1 MiB chunks so the fake never holds it:
/// the requested object (or, for a watch, one ADDED event) with one enormous annotation.
fn oversized_response(ri: &ResourceInfo, t: &Target, bytes: usize) -> Response<Body> {
    let object = format!(
        "{{\"apiVersion\":\"{}\",\"kind\":\"{}\",\"metadata\":{{\"name\":\"{}\",\"namespace\":\"{}\",\"annotations\":{{\"pad\":\"",
        ri.api_version(),
        ri.kind,
        t.name,
        t.namespace
    );
    let head = if t.verb == "watch" {
        format!("{{\"type\":\"ADDED\",\"object\":{object}")
    } else {
        object
    };
    let tail = if t.verb == "watch" {
        "\"}}}}\n"
    } else {
        "\"}}}"
    };
    const CHUNK: usize = 1 << 20;
    let pad = Bytes::from(vec![b'x'; CHUNK]);
    let chunks = bytes / CHUNK;
    let frames = std::iter::once(Bytes::from(head))
        .chain(std::iter::repeat_n(pad, chunks))
        .chain(std::iter::once(Bytes::from_static(tail.as_bytes())))
        .map(|b| Ok::<_, Infallible>(Frame::data(b)));
    Response::builder()
        .status(200)
        .header("Content-Type", "application/json")
        .body(StreamBody::new(futures::stream::iter(frames)).boxed())
        .unwrap()
}

fn dry_run(query: &BTreeMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|v| v == "All")
}

/// Discovery, version and health endpoints.
fn non_resource(shared: &Shared, method: &str, path: &str) -> Response<Body> {
    if method != "GET" {
        return error_response(&not_found_path());
    }
    let virt = shared.config.lock().unwrap().virtualization_installed;
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let unavailable = shared.faults.lock().unwrap().0.unavailable_groups.clone();
    if let ["apis", g, _] = segs.as_slice()
        && unavailable.iter().any(|u| u == g)
    {
        // An aggregated API whose backing service is down, as kube-aggregator answers.
        return error_response(&ApiError::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ));
    }
    let doc = match segs.as_slice() {
        ["api"] => Some(resources::core_versions(&shared.address)),
        ["api", "v1"] => Some(resources::resource_list("", "v1")),
        ["apis"] => Some(resources::group_list(virt)),
        ["apis", g] => resources::group(g, virt),
        ["apis", "subresources.kubevirt.io", "v1"] if virt => {
            Some(resources::kubevirt_subresources())
        }
        ["apis", g, v] if resources::group_version_served(g, v, virt) => {
            Some(resources::resource_list(g, v))
        }
        ["version"] => Some(resources::version()),
        ["openapi", "v3"] => Some(resources::openapi_v3_index(virt)),
        ["openapi", "v3", "api", v] if resources::group_version_served("", v, virt) => {
            Some(resources::openapi_v3_group_version("", v))
        }
        ["openapi", "v3", "apis", g, v] if resources::group_version_served(g, v, virt) => {
            Some(resources::openapi_v3_group_version(g, v))
        }
        ["healthz" | "livez" | "readyz"] => {
            return Response::builder()
                .status(200)
                .header("Content-Type", "text/plain")
                .body(full("ok"))
                .unwrap();
        }
        _ => None,
    };
    match doc {
        Some(d) => json_response(200, &d, &[]),
        None => error_response(&not_found_path()),
    }
}

fn write_opts(query: &BTreeMap<String, String>) -> Result<WriteOpts, ApiError> {
    let dry = match query.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dryRun value: \"{other}\": supported values: \"All\""
            )));
        }
    };
    let field_validation = match query.get("fieldValidation").map(String::as_str) {
        None | Some("") => None,
        Some("Strict") => Some(SchemaMode::Strict),
        Some("Warn") => Some(SchemaMode::Warn),
        Some("Ignore") => Some(SchemaMode::Off),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation {other} is invalid, valid values are: Ignore, Warn, Strict"
            )));
        }
    };
    Ok(WriteOpts {
        dry_run: dry,
        field_validation,
    })
}

fn selectors(query: &BTreeMap<String, String>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(query.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    let ct = content_type.split(';').next().unwrap_or("").trim();
    if ct.contains("yaml") {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else if ct.is_empty() || ct.contains("json") {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })
    } else {
        Err(ApiError::unsupported_media_type(ct))
    }
}

/// List items of built-in types carry no apiVersion/kind, as on a real server.
fn list_item(ri: &ResourceInfo, mut obj: Value) -> Value {
    if ri.builtin
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("apiVersion");
        o.remove("kind");
    }
    obj
}

fn propagation(
    query: &BTreeMap<String, String>,
    body: &Value,
) -> Result<Option<Propagation>, ApiError> {
    let raw = query.get("propagationPolicy").cloned().or_else(|| {
        body.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    let orphan = body.get("orphanDependents").and_then(Value::as_bool);
    match raw.as_deref() {
        None | Some("") => Ok(orphan.map(|o| {
            if o {
                Propagation::Orphan
            } else {
                Propagation::Background
            }
        })),
        Some("Background") => Ok(Some(Propagation::Background)),
        Some("Foreground") => Ok(Some(Propagation::Foreground)),
        Some("Orphan") => Ok(Some(Propagation::Orphan)),
        Some(other) => Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            ),
        )),
    }
}

/// Runs one non-watch resource request against the store.
fn execute(
    shared: &Shared,
    t: &Target,
    query: &BTreeMap<String, String>,
    content_type: &str,
    body: &[u8],
    render: Render,
    user: &str,
) -> Result<WriteResult, ApiError> {
    let res = t.res.unwrap();
    let ri = &RESOURCES[res];
    let ok = |body: Value| {
        Ok(WriteResult {
            code: 200,
            body,
            warnings: vec![],
        })
    };
    if t.subresource.as_deref() == Some("eviction") {
        let opts = shared.controller.lock().unwrap().clone();
        return super::drain::evict(
            &mut shared.store.lock().unwrap(),
            &opts,
            &t.namespace,
            &t.name,
            dry_run(query),
        );
    }
    match t.verb.as_str() {
        "get" => {
            let obj = shared
                .store
                .lock()
                .unwrap()
                .get(res, &t.namespace, &t.name)?;
            match render {
                Render::Table => {
                    let rv = meta_str(&obj, "resourceVersion").to_string();
                    ok(table(ri, &[obj], &rv))
                }
                Render::Metadata => ok(partial_object(&obj)),
                Render::Full => ok(obj),
            }
        }
        "list" => {
            let (labels, fields) = selectors(query)?;
            let limit = match query.get("limit").filter(|l| !l.is_empty()) {
                Some(l) => Some(
                    l.parse::<usize>()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?,
                ),
                None => None,
            };
            let ns = t.namespaced_url.then_some(t.namespace.as_str());
            let endless = shared
                .faults
                .lock()
                .unwrap()
                .0
                .endless_list
                .clone()
                .filter(|e| e.resource == ri.plural);
            let mut continue_token = query.get("continue").map(String::as_str);
            if endless.is_some() && continue_token.is_some_and(|c| c.starts_with(ENDLESS_TOKEN)) {
                continue_token = None;
            }
            let mut page = shared.store.lock().unwrap().list(
                res,
                ns,
                &labels,
                &fields,
                limit,
                continue_token,
            )?;
            if let Some(endless) = endless {
                // Every page claims another one follows: the same page again, under a fresh
                // token or always the same one.
                let served = ENDLESS_PAGES.fetch_add(1, Ordering::SeqCst);
                page.continue_token = Some(if endless.same_token {
                    ENDLESS_TOKEN.to_string()
                } else {
                    format!("{ENDLESS_TOKEN}-{served}")
                });
            }
            let rv = page.resource_version.to_string();
            if render == Render::Metadata {
                let mut metadata = json!({ "resourceVersion": rv });
                if let Some(c) = &page.continue_token {
                    metadata["continue"] = json!(c);
                }
                let items: Vec<Value> = page.items.iter().map(partial_object).collect();
                return ok(json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                    "items": items,
                }));
            }
            if render == Render::Table {
                let mut tbl = table(ri, &page.items, &rv);
                if let Some(c) = &page.continue_token {
                    tbl["metadata"]["continue"] = json!(c);
                }
                return ok(tbl);
            }
            let mut metadata = json!({ "resourceVersion": rv });
            if let Some(c) = page.continue_token {
                metadata["continue"] = json!(c);
            }
            if let Some(n) = page.remaining {
                metadata["remainingItemCount"] = json!(n);
            }
            let items: Vec<Value> = page.items.into_iter().map(|i| list_item(ri, i)).collect();
            ok(json!({
                "kind": format!("{}List", ri.kind),
                "apiVersion": ri.api_version(),
                "metadata": metadata,
                "items": items,
            }))
        }
        "create" => {
            let opts = write_opts(query)?;
            let obj = parse_body(body, content_type)?;
            if ri.create_only {
                return Ok(access_review(shared, obj, user));
            }
            shared
                .store
                .lock()
                .unwrap()
                .create(res, &t.namespace, obj, &opts)
        }
        "update" => {
            let opts = write_opts(query)?;
            let obj = parse_body(body, content_type)?;
            shared.store.lock().unwrap().update(
                res,
                &t.namespace,
                &t.name,
                obj,
                t.subresource.as_deref(),
                &opts,
            )
        }
        "patch" => {
            let opts = write_opts(query)?;
            shared.store.lock().unwrap().patch(
                res,
                &t.namespace,
                &t.name,
                content_type,
                body,
                t.subresource.as_deref(),
                query.get("fieldManager").map(String::as_str),
                &opts,
            )
        }
        "delete" => {
            let opts = write_opts(query)?;
            let options = parse_body(body, "application/json")?;
            let prop = propagation(query, &options)?;
            let pre = options.get("preconditions").cloned().unwrap_or(Value::Null);
            shared
                .store
                .lock()
                .unwrap()
                .delete(res, &t.namespace, &t.name, prop, &pre, &opts)
        }
        "deletecollection" => {
            let opts = write_opts(query)?;
            let options = parse_body(body, "application/json")?;
            let prop = propagation(query, &options)?;
            let (labels, fields) = selectors(query)?;
            let ns = t.namespaced_url.then_some(t.namespace.as_str());
            let mut store = shared.store.lock().unwrap();
            let deleted = store.delete_collection(res, ns, &labels, &fields, prop, &opts)?;
            let rv = store.rv.to_string();
            let items: Vec<Value> = deleted.into_iter().map(|i| list_item(ri, i)).collect();
            ok(json!({
                "kind": format!("{}List", ri.kind),
                "apiVersion": ri.api_version(),
                "metadata": { "resourceVersion": rv },
                "items": items,
            }))
        }
        other => Err(ApiError::method_not_allowed(other)),
    }
}

/// SelfSubjectAccessReview: allowed unless an RBAC denial matches or the RBAC policy says no.
fn access_review(shared: &Shared, mut review: Value, _user: &str) -> WriteResult {
    let attrs = review
        .pointer("/spec/resourceAttributes")
        .cloned()
        .unwrap_or(Value::Null);
    let question = AccessAttributes::from_review(&attrs);
    let (denied_by_list, authorizer) = {
        let faults = &shared.faults.lock().unwrap().0;
        // A denial naming `resource/subresource` answers questions about that subresource
        // (as an RBAC rule must name it to grant it).
        let denied = faults.denials.iter().any(|d| {
            d.matches(&question.verb, &question.resource, &question.namespace)
                || (!question.subresource.is_empty()
                    && d.resource == question.rbac_resource()
                    && d.matches(&question.verb, &d.resource, &question.namespace))
        });
        (denied, faults.authorizer.clone())
    };
    // Only resource questions go to the policy; non-resource ones (no resourceAttributes) are
    // about discovery paths every user may read.
    let denied = denied_by_list
        || (!attrs.is_null()
            && authorizer.is_some_and(|a| !a.allows(&question, "SelfSubjectAccessReview")));
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    if !review.get("metadata").is_some_and(Value::is_object) {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review["status"] = if denied {
        json!({ "allowed": false, "reason": "denied by the fake API server's RBAC configuration" })
    } else {
        json!({ "allowed": true, "reason": "allowed by the fake API server" })
    };
    WriteResult {
        code: 201,
        body: review,
        warnings: vec![],
    }
}

/// kube's HumanDuration: "45s", "5m10s", "17m", "3h12m", "26h", "12d", "2y".
fn human_age(created: &str) -> String {
    let Ok(ts) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = (jiff::Timestamp::now().as_second() - ts.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s if s < 365 * 86400 => format!("{}d", s / 86400),
        s => format!("{}y", s / (365 * 86400)),
    }
}

/// `meta.k8s.io/v1` Table for kubectl's printers.
fn table(ri: &ResourceInfo, objs: &[Value], rv: &str) -> Value {
    let text = |o: &Value, p: &str| match o.pointer(p) {
        Some(Value::String(s)) => json!(s),
        Some(Value::Bool(b)) => json!(b.to_string()),
        Some(Value::Number(n)) => json!(n.to_string()),
        _ => json!("<none>"),
    };
    let (cols, extra): (Vec<&str>, Vec<&str>) = match ri.plural {
        "namespaces" => (vec!["Status"], vec!["/status/phase"]),
        "secrets" => (vec!["Type"], vec!["/type"]),
        "services" => (
            vec!["Type", "Cluster-IP"],
            vec!["/spec/type", "/spec/clusterIP"],
        ),
        "persistentvolumeclaims" => (vec!["Status"], vec!["/status/phase"]),
        "virtualmachines" => (
            vec!["Status", "Ready"],
            vec!["/status/printableStatus", "/status/ready"],
        ),
        "virtualmachineinstances" => (
            vec!["Phase", "IP", "NodeName"],
            vec![
                "/status/phase",
                "/status/interfaces/0/ipAddress",
                "/status/nodeName",
            ],
        ),
        "datavolumes" => (
            vec!["Phase", "Progress"],
            vec!["/status/phase", "/status/progress"],
        ),
        _ => (vec![], vec![]),
    };
    let mut defs = vec![
        json!({ "name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0 }),
    ];
    for c in &cols {
        defs.push(
            json!({ "name": c, "type": "string", "format": "", "description": c, "priority": 0 }),
        );
    }
    defs.push(json!({ "name": "Age", "type": "string", "format": "", "description": "CreationTimestamp", "priority": 0 }));
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut cells = vec![json!(meta_str(o, "name"))];
            cells.extend(extra.iter().map(|p| text(o, p)));
            cells.push(json!(human_age(meta_str(o, "creationTimestamp"))));
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": { "resourceVersion": rv },
        "columnDefinitions": defs,
        "rows": rows,
    })
}

fn watch_line(event_type: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({ "type": event_type, "object": object })).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

fn expired_event(requested: u64, oldest: u64) -> Bytes {
    let e = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
    watch_line("ERROR", &e.to_status())
}

/// The event type a watcher with these selectors sees for a store event, if any.
fn visible(
    ev: &StoreEvent,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Option<&'static str> {
    let m = |o: &Value| labels.matches_object(o) && fields.matches_object(o);
    let now = m(&ev.object);
    let before = ev.old.as_deref().map(m);
    match ev.event_type {
        EventType::Added => now.then_some("ADDED"),
        EventType::Deleted => before.unwrap_or(now).then_some("DELETED"),
        EventType::Modified => match (before.unwrap_or(true), now) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
    }
}

/// Starts a watch stream: synthetic ADDED events for RV ""/"0" or sendInitialEvents, then
/// every later change; bookmarks on request; 410 ERROR for compacted versions.
fn watch(
    shared: &Arc<Shared>,
    t: &Target,
    query: &BTreeMap<String, String>,
    render: Render,
    max_duration: Option<Duration>,
) -> Response<Body> {
    let res = t.res.unwrap();
    let ri = RESOURCES[res];
    let (labels, fields) = match selectors(query) {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    let ns = t.namespaced_url.then(|| t.namespace.clone());
    let bookmarks = is_true(query.get("allowWatchBookmarks"));
    let send_initial = is_true(query.get("sendInitialEvents"));
    let rv_param = query.get("resourceVersion").cloned().unwrap_or_default();
    let cfg = shared.config.lock().unwrap().clone();
    let mut timeout = match query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(s) => Duration::from_secs(s),
        None => cfg.default_watch_timeout,
    };
    if let Some(m) = max_duration {
        timeout = timeout.min(m);
    }
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let encode = move |ty: &str, obj: &Value| -> Bytes {
        match render {
            _ if ty == "BOOKMARK" || ty == "ERROR" => watch_line(ty, obj),
            Render::Table => {
                let rv = meta_str(obj, "resourceVersion").to_string();
                watch_line(ty, &table(&ri, std::slice::from_ref(obj), &rv))
            }
            Render::Metadata => watch_line(ty, &partial_object(obj)),
            Render::Full => watch_line(ty, obj),
        }
    };
    let bookmark = move |rv: u64, initial_end: bool| -> Bytes {
        let mut meta = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        watch_line(
            "BOOKMARK",
            &json!({ "kind": ri.kind, "apiVersion": ri.api_version(), "metadata": meta }),
        )
    };
    let in_scope = {
        let ns = ns.clone();
        move |ev: &StoreEvent| ev.res == res && ns.as_deref().is_none_or(|n| n == ev.namespace)
    };

    // Snapshot under the lock so no event falls between the initial state and the stream.
    let mut initial: Vec<Bytes> = Vec::new();
    let start_rv;
    {
        let store = shared.store.lock().unwrap();
        let synthetic = send_initial || rv_param.is_empty() || rv_param == "0";
        if synthetic {
            let page = store.list(res, ns.as_deref(), &labels, &fields, None, None);
            for obj in page.map(|p| p.items).unwrap_or_default() {
                initial.push(encode("ADDED", &obj));
            }
            start_rv = store.rv;
            if send_initial && bookmarks {
                initial.push(bookmark(start_rv, true));
            }
        } else {
            let requested: u64 = match rv_param.parse() {
                Ok(v) => v,
                Err(_) => {
                    return error_response(&ApiError::bad_request(format!(
                        "invalid resource version \"{rv_param}\""
                    )));
                }
            };
            if requested < store.compacted_rv {
                initial.push(expired_event(requested, store.compacted_rv + 1));
                let stream = futures::stream::iter(
                    initial
                        .into_iter()
                        .map(|b| Ok::<_, Infallible>(Frame::data(b))),
                );
                return Response::builder()
                    .status(200)
                    .header("Content-Type", "application/json")
                    .body(StreamBody::new(stream).boxed())
                    .unwrap();
            }
            start_rv = requested;
        }
    }

    let shared2 = shared.clone();
    tokio::spawn(async move {
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let mut changes = shared2.changes.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last_rv = start_rv;
        let mut next_bookmark = tokio::time::Instant::now() + cfg.bookmark_interval;
        loop {
            // Drain everything after last_rv.
            let mut out = Vec::new();
            let mut expired = false;
            {
                let store = shared2.store.lock().unwrap();
                if last_rv < store.compacted_rv {
                    expired = true;
                    out.push(expired_event(last_rv, store.compacted_rv + 1));
                } else {
                    let first = store.history.partition_point(|e| e.rv <= last_rv);
                    for ev in store.history.range(first..) {
                        if in_scope(ev)
                            && let Some(ty) = visible(ev, &labels, &fields)
                        {
                            out.push(encode(ty, &ev.object));
                        }
                        last_rv = ev.rv;
                    }
                    last_rv = last_rv.max(store.rv);
                }
            }
            for line in out {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
            if expired {
                return;
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => {
                    if bookmarks {
                        let _ = tx.send(bookmark(last_rv, false)).await;
                    }
                    return;
                }
                _ = tokio::time::sleep_until(next_bookmark), if bookmarks => {
                    next_bookmark = tokio::time::Instant::now() + cfg.bookmark_interval;
                    if tx.send(bookmark(last_rv, false)).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    Response::builder()
        .status(200)
        .header("Content-Type", "application/json")
        .body(StreamBody::new(stream).boxed())
        .unwrap()
}
