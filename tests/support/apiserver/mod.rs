//! The fake Kubernetes API server: a real HTTP(S) server on 127.0.0.1 with an in-memory
//! store, simulated KubeVirt/CDI controllers, fault injection and a request log, running on
//! its own tokio runtime so both sync tests (spawning the `virtwork` binary) and async tests
//! (using `kube::Client`) can use it. See docs/fake-apiserver.md.

pub mod authz;
pub mod controllers;
pub mod drain;
pub mod endpoints;
pub mod faults;
pub mod http;
pub mod lifecycle;
pub mod metrics;
pub mod proxy;
pub mod resources;
pub mod selector;
pub mod status;
pub mod store;
pub mod tls;
pub mod validation;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use authz::{AccessAttributes, Authorizer};
pub use controllers::ControllerOptions;
pub use faults::{AfterCommit, Denial, EndlessList, FaultAction, Faults, ScriptedFault};
pub use http::RequestRecord;
pub use proxy::Backend;
pub use status::ApiError;
pub use store::{EventType, StoreEvent};
pub use validation::{SchemaMode, SchemaReport, SchemaValidator, SchemaViolation};

use http::{RuntimeConfig, Shared};
use resources::RESOURCES;
use store::Store;

/// How to start a [`FakeApiServer`].
#[derive(Clone)]
pub struct Options {
    /// Serve HTTPS with a fresh self-signed CA (written into the kubeconfig).
    pub tls: bool,
    /// Require `Authorization: Bearer <token>`; the kubeconfig carries it.
    pub token: Option<String>,
    /// User name in RBAC denial messages.
    pub user: String,
    /// Serve the KubeVirt and CDI API groups (off = a cluster without KubeVirt).
    pub virtualization_installed: bool,
    /// Namespaces created at start (besides `default`).
    pub namespaces: Vec<String>,
    /// Events retained for watch resumption; older resourceVersions answer 410 Gone.
    pub watch_history: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Watch timeout when the client sends no timeoutSeconds.
    pub default_watch_timeout: Duration,
    pub controllers: ControllerOptions,
    pub faults: Faults,
    /// How unknown fields in KubeVirt/CDI objects are handled when a schema validator is set.
    pub schema_mode: SchemaMode,
    /// Validator for KubeVirt/CDI objects; the default is [`kubevirt_schema`] (None when the
    /// swagger file is absent, which `support::schema` reports as a skip).
    pub schema: Option<SchemaValidator>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tls: false,
            token: None,
            user: "virtwork-tester".into(),
            virtualization_installed: true,
            namespaces: Vec::new(),
            watch_history: 100_000,
            bookmark_interval: Duration::from_secs(1),
            default_watch_timeout: Duration::from_secs(1800),
            controllers: ControllerOptions::default(),
            faults: Faults::default(),
            schema_mode: SchemaMode::Strict,
            schema: kubevirt_schema(),
        }
    }
}

impl Options {
    /// HTTPS + bearer token, like a real cluster.
    pub fn secure() -> Self {
        Options {
            tls: true,
            token: Some("fake-token-0123456789".into()),
            ..Default::default()
        }
    }
}

/// A running fake API server; dropping it stops the server and its controllers.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    url: String,
    ca_pem: Option<String>,
    token: Option<String>,
}

impl FakeApiServer {
    /// Binds 127.0.0.1:0 and starts serving on a private 2-thread tokio runtime.
    pub fn start(options: Options) -> FakeApiServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let scheme = if options.tls { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        let mut store = Store::new(options.watch_history, tx);
        store.schema = options.schema.clone();
        store.schema_mode = options.schema_mode;
        for ns in std::iter::once("default".to_string()).chain(options.namespaces.iter().cloned()) {
            store.upsert(0, serde_json::json!({ "metadata": { "name": ns } }));
        }
        // Like most clusters, one default StorageClass; remove it to test its absence.
        if let Some(classes) = resources::find("storage.k8s.io", "v1", "storageclasses") {
            store.upsert(
                classes,
                serde_json::json!({
                    "metadata": {
                        "name": "standard",
                        "annotations": { "storageclass.kubernetes.io/is-default-class": "true" }
                    },
                    "provisioner": "fake.virtwork.test/hostpath"
                }),
            );
        }
        let seed = options.faults.seed;
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            changes: rx,
            faults: Mutex::new((options.faults.clone(), faults::Rng::new(seed))),
            log: Mutex::new(Vec::new()),
            counters: Mutex::new(BTreeMap::new()),
            inflight: AtomicUsize::new(0),
            config: Mutex::new(RuntimeConfig {
                virtualization_installed: options.virtualization_installed,
                token: options.token.clone(),
                user: options.user.clone(),
                bookmark_interval: options.bookmark_interval,
                default_watch_timeout: options.default_watch_timeout,
            }),
            controller: Mutex::new(options.controllers.clone()),
            address: addr.to_string(),
            proxy: Mutex::new(proxy::ProxyState::default()),
        });
        let tls = options.tls.then(tls::generate);
        let ca_pem = tls.as_ref().map(|t| t.ca_pem.clone());
        let acceptor = tls.map(|t| t.acceptor);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-apiserver")
            .enable_all()
            .build()
            .expect("fake apiserver runtime");
        let s = shared.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let s = s.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        Some(acc) => {
                            if let Ok(tls) = acc.accept(tcp).await {
                                http::serve_connection(tls, s).await;
                            }
                        }
                        None => http::serve_connection(tcp, s).await,
                    }
                });
            }
        });
        runtime.spawn(controllers::run(shared.clone()));
        FakeApiServer {
            shared,
            runtime: Some(runtime),
            url,
            ca_pem,
            token: options.token,
        }
    }

    /// `http://127.0.0.1:<port>` or `https://...`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PEM of the CA that signed the server certificate (TLS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The kubeconfig YAML (cluster/user/context `fake`), optionally with a default namespace.
    pub fn kubeconfig_yaml(&self, namespace: Option<&str>) -> String {
        tls::kubeconfig(
            &self.url,
            self.ca_pem.as_deref(),
            self.token.as_deref(),
            namespace,
        )
    }

    /// Writes the kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml(None))
    }

    /// The `kube::Config` of the generated kubeconfig.
    pub async fn kube_config(&self) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml(None)).unwrap();
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap()
    }

    /// A `kube::Client` for this server, built from the generated kubeconfig. Note that kube 5
    /// retries 429/503/504 by default (up to 15 times, honouring Retry-After).
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.kube_config().await).unwrap()
    }

    /// A `kube::Client` that sees every 429/503/504 itself (kube's default retry layer off).
    pub async fn client_without_retries(&self) -> kube::Client {
        let mut config = self.kube_config().await;
        config.default_retry = false;
        kube::Client::try_from(config).unwrap()
    }

    /// Every request served so far, in completion order.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn clear_request_log(&self) {
        self.shared.log.lock().unwrap().clear();
    }

    /// Requests per (verb, resource plural), e.g. `("create", "virtualmachines")`.
    pub fn counters(&self) -> BTreeMap<(String, String), u64> {
        self.shared.counters.lock().unwrap().clone()
    }

    /// Number of requests with this verb on this resource (plural).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.counters()
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Objects of a resource (plural, singular, Kind or short name), in one namespace or all
    /// (None), in key order (namespace, name).
    pub fn objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        let res = resolve(resource);
        let store = self.shared.store.lock().unwrap();
        store
            .objects
            .iter()
            .filter(|((r, ns, _), _)| *r == res && namespace.is_none_or(|n| n == ns))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// One object; `namespace` is ignored for cluster-scoped resources.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        self.shared
            .store
            .lock()
            .unwrap()
            .get(resolve(resource), namespace, name)
            .ok()
    }

    /// Seeds (or replaces) an object without validation; apiVersion/kind pick the resource.
    /// Server-set metadata (uid, resourceVersion, creationTimestamp) is filled in, status kept.
    pub fn insert(&self, object: Value) -> Value {
        let av = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let res = resources::by_api_version_kind(av, kind)
            .unwrap_or_else(|| panic!("fake apiserver does not serve {av} {kind}"));
        self.shared.store.lock().unwrap().upsert(res, object)
    }

    /// Removes an object immediately (no finalizers, GC of dependents follows).
    pub fn remove(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = resolve(resource);
        let ns = if RESOURCES[res].namespaced {
            namespace
        } else {
            ""
        };
        self.shared
            .store
            .lock()
            .unwrap()
            .remove_now(&(res, ns.to_string(), name.to_string()))
    }

    /// Every committed change so far (ADDED/MODIFIED/DELETED with the object), in order.
    pub fn events(&self) -> Vec<StoreEvent> {
        self.shared.store.lock().unwrap().event_log.clone()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().unwrap().rv
    }

    /// Forgets the watch history: watches from any older resourceVersion now get 410 Gone.
    pub fn compact(&self) {
        self.shared.store.lock().unwrap().compact();
    }

    /// Replaces all fault knobs (the random generator is re-seeded from `faults.seed`).
    pub fn set_faults(&self, faults: Faults) {
        let seed = faults.seed;
        *self.shared.faults.lock().unwrap() = (faults, faults::Rng::new(seed));
    }

    /// Edits the fault knobs in place (keeps the random generator's position).
    pub fn update_faults(&self, edit: impl FnOnce(&mut Faults)) {
        edit(&mut self.shared.faults.lock().unwrap().0);
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.lock().unwrap().0.clone()
    }

    pub fn set_controllers(&self, options: ControllerOptions) {
        *self.shared.controller.lock().unwrap() = options;
    }

    /// Adds or removes the KubeVirt and CDI API groups (discovery and endpoints).
    pub fn set_virtualization_installed(&self, installed: bool) {
        self.shared.config.lock().unwrap().virtualization_installed = installed;
    }

    pub fn set_schema(&self, validator: Option<SchemaValidator>, mode: SchemaMode) {
        let mut store = self.shared.store.lock().unwrap();
        store.schema = validator;
        store.schema_mode = mode;
    }

    /// Unknown fields and schema errors seen in writes (recorded in every mode but Off).
    pub fn schema_violations(&self) -> Vec<SchemaViolation> {
        self.shared.store.lock().unwrap().violations.clone()
    }

    /// Requests being served right now (watch streams excluded once set up).
    pub fn inflight(&self) -> usize {
        self.shared
            .inflight
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Puts `backend` behind port `port` (name or number, "" for a reference without one)
    /// of Service `namespace/service` for the service proxy; the Service object itself
    /// must exist in the store for requests to reach it.
    pub fn set_service_backend(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
        backend: proxy::Backend,
    ) {
        self.shared
            .proxy
            .lock()
            .unwrap()
            .backends
            .insert((namespace.into(), service.into(), port.into()), backend);
    }

    /// Makes the KubeVirt metrics of VMI `namespace/name` flat (counters stop, gauges idle)
    /// or lets them follow the workload again.
    pub fn set_metrics_flat(&self, namespace: &str, name: &str, flat: bool) {
        let mut proxy = self.shared.proxy.lock().unwrap();
        let key = (namespace.to_string(), name.to_string());
        if flat {
            proxy.metrics.flat.insert(key);
        } else {
            proxy.metrics.flat.remove(&key);
        }
    }

    /// Leaves VMI `namespace/name` out of the KubeVirt metrics although it keeps running
    /// (its series vanish, as when virt-handler stops reporting a domain), or back in.
    pub fn set_metrics_hidden(&self, namespace: &str, name: &str, hidden: bool) {
        let mut proxy = self.shared.proxy.lock().unwrap();
        let key = (namespace.to_string(), name.to_string());
        if hidden {
            proxy.metrics.hidden.insert(key);
        } else {
            proxy.metrics.hidden.remove(&key);
        }
    }

    /// Makes the vCPU counter advance in milliseconds, as KubeVirt's did before
    /// kubevirt/kubevirt#13898.
    /// Serves a profiled VM's load at its profile's high level throughout, as a guest whose
    /// driver never changes levels would show.
    pub fn set_profile_stuck_high(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.shared
            .proxy
            .lock()
            .unwrap()
            .metrics
            .stuck_high
            .insert(key);
    }

    pub fn set_vcpu_millis(&self, millis: bool) {
        self.shared.proxy.lock().unwrap().metrics.vcpu_millis = millis;
    }

    /// Makes VMI `namespace/name`'s vCPU counter advance in milliseconds, the others' in
    /// seconds: virt-handler is per node, so during its rollout VMs of one cluster differ.
    pub fn set_vcpu_millis_for(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.shared
            .proxy
            .lock()
            .unwrap()
            .metrics
            .vcpu_millis_vmis
            .insert(key);
    }

    /// Serves every series as a scrape without honorLabels stores them: `namespace` is
    /// virt-handler's, the VMI's moves to `exported_namespace`.
    pub fn set_namespace_relabelled(&self, relabelled: bool) {
        self.shared
            .proxy
            .lock()
            .unwrap()
            .metrics
            .namespace_relabelled = relabelled;
    }

    /// The KubeVirt metrics endpoint's body right now (advances the counters like a scrape).
    pub fn kubevirt_metrics(&self) -> String {
        let store = self.shared.store.lock().unwrap();
        let mut proxy = self.shared.proxy.lock().unwrap();
        metrics::render(&store, &mut proxy.metrics, Instant::now())
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` passes (an upper bound for
    /// hangs, never a timing assertion). Blocking: from async code use `spawn_blocking`.
    pub fn wait_until(
        &self,
        timeout: Duration,
        mut condition: impl FnMut(&FakeApiServer) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if condition(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn resolve(resource: &str) -> usize {
    resources::lookup(resource)
        .unwrap_or_else(|| panic!("fake apiserver does not serve resource {resource:?}"))
}

/// Validates VirtualMachines and VirtualMachineInstances against KubeVirt's swagger
/// (`v1.VirtualMachine`, `v1.VirtualMachineInstance`) and DataVolume specs against
/// `v1beta1.DataVolumeSpec`, with unknown fields reported, using `support::schema`. The
/// schema is loaded once per test binary; None when it is not available.
pub fn kubevirt_schema() -> Option<SchemaValidator> {
    static DOC: OnceLock<Option<Arc<Value>>> = OnceLock::new();
    let doc = DOC
        .get_or_init(|| super::schema::load_schema().map(Arc::new))
        .clone()?;
    Some(Arc::new(
        move |ri: &resources::ResourceInfo, obj: &Value| {
            let (definition, value, prefix) = match ri.kind {
                "VirtualMachine" => ("v1.VirtualMachine", obj, ""),
                "VirtualMachineInstance" => ("v1.VirtualMachineInstance", obj, ""),
                "DataVolume" => ("v1beta1.DataVolumeSpec", obj.get("spec")?, "/spec"),
                _ => return None,
            };
            let mut report = SchemaReport::default();
            for err in super::schema::validate(&doc, definition, value, true) {
                let (path, problem) = err.split_once(": ").unwrap_or(("$", err.as_str()));
                let pointer = format!("{prefix}{}", dotted_to_pointer(path));
                match problem
                    .strip_prefix("unknown field \"")
                    .and_then(|r| r.split_once('"'))
                {
                    Some((key, _)) => report.unknown_fields.push(format!(
                        "{pointer}/{}",
                        key.replace('~', "~0").replace('/', "~1")
                    )),
                    None => report.errors.push((pointer, problem.to_string())),
                }
            }
            Some(report)
        },
    ))
}

/// `$.spec.volumes[1].x` → `/spec/volumes/1/x`.
fn dotted_to_pointer(path: &str) -> String {
    let mut out = String::new();
    let rest = path.strip_prefix('$').unwrap_or(path);
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        let mut segs = part.split('[');
        if let Some(name) = segs.next().filter(|n| !n.is_empty()) {
            out.push('/');
            out.push_str(&name.replace('~', "~0").replace('/', "~1"));
        }
        for idx in segs {
            out.push('/');
            out.push_str(idx.trim_end_matches(']'));
        }
    }
    out
}
