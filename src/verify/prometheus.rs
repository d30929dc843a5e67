//! Reaching Prometheus' HTTP API, three ways: through the API server's service proxy (the
//! kubeconfig's credentials authenticate to the API server, which never forwards them), at
//! the cluster's own monitoring route discovered from the API (OpenShift's `thanos-querier`
//! Route: https, certificate verified against the system roots plus the kubeconfig's CA,
//! the user's own bearer token), or at a URL given with `--prometheus` (only the token the
//! user chose for it). Thin async shell: what answers mean is decided in evaluate.rs.
//!
//! Every request passes the command's [`RequestGate`] (rate limit) and is retried on
//! 429/5xx/transport errors by [`crate::k8s::retry`] until the deadline; GET only, so the
//! proxy needs nothing beyond `get` on `services/proxy`. Every answer body is read up to
//! [`MAX_ANSWER_BYTES`], no further. Must not: log a token, show a URL's userinfo, send the
//! cluster's token anywhere but the API server and the route it named.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::core::{GroupVersionKind, Status};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::evaluate::{
    Probe, QueryAnswer, RangeAnswer, classify_probe, parse_query_response, parse_range_response,
};
use crate::error::{Error, Result};
use crate::k8s::client::{RateLimitLayer, RequestGate};
use crate::k8s::proxy::{ProxyEnv, choose_proxy};
use crate::k8s::retry::{RetryError, RetryPolicy, retry};
use crate::signals::promql::url_encode;

/// Where discovery looks through the service proxy, in order: OpenShift's Thanos querier,
/// then kube-prometheus. The service reference is `scheme:name:port` as the proxy path
/// takes it.
pub const CANDIDATES: [(&str, &str); 2] = [
    ("openshift-monitoring", "https:thanos-querier:web"),
    ("monitoring", "http:prometheus-k8s:web"),
];

/// The Route (route.openshift.io/v1) discovery tries first: OpenShift's Thanos querier,
/// whose auth proxy wants the user's token, which the service proxy drops.
pub const MONITORING_ROUTE: (&str, &str) = ("openshift-monitoring", "thanos-querier");

/// The most verify reads of one Prometheus answer (16 MiB): far above what its queries
/// return (a few hundred bytes per series), low enough that a broken or hostile server
/// cannot exhaust memory. A larger answer fails the command, naming the server.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// How one discovery probe retries transient answers before judging the candidate.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// Read timeout of a query; a query slower than this is retried until the deadline.
const QUERY_READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The proxy path prefix of a service.
pub fn proxy_base(namespace: &str, service: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/services/{service}/proxy")
}

/// `url` without its userinfo (`user:password@`) and trailing slash: the only form of a
/// URL that messages, logs and reports show.
pub fn display_url(url: &http::Uri) -> String {
    let mut out = String::new();
    if let Some(scheme) = url.scheme_str() {
        out.push_str(scheme);
        out.push_str("://");
    }
    if let Some(authority) = url.authority() {
        let host_port = authority.as_str().rsplit('@').next().unwrap_or_default();
        out.push_str(host_port);
    }
    out.push_str(url.path());
    out.trim_end_matches('/').to_string()
}

/// Whether `token` can travel in an `Authorization: Bearer` header: visible ASCII only.
/// Anything else (a control character, a space, a line break) would make the HTTP
/// library refuse the header, so it is refused here with a message instead.
pub fn is_valid_bearer_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// How verify reached Prometheus (the JSON's `prometheus_via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The API server's service proxy.
    ServiceProxy,
    /// The cluster's monitoring route, discovered from the API.
    Route,
    /// The URL given with `--prometheus`.
    Url,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::ServiceProxy => "service-proxy",
            Via::Route => "route",
            Via::Url => "url",
        }
    }
}

/// A Prometheus HTTP API endpoint and the client that reaches it.
#[derive(Clone)]
pub struct PrometheusApi {
    client: kube::Client,
    /// Path before `/api/v1/...` (the proxy prefix; empty for a URL, whose own path the
    /// client keeps).
    base_path: String,
    /// For messages and the report: `service monitoring/http:prometheus-k8s:web through the
    /// API server ...`, `route openshift-monitoring/thanos-querier https://...` or the URL
    /// (never with userinfo).
    pub describe: String,
    pub via: Via,
    /// Set once the first query's [`first_contact`](Self::first_contact) passed.
    contacted: tokio::sync::OnceCell<()>,
}

/// The cluster's credentials as far as the monitoring route may see them: its bearer token
/// (static, file, exec plugin or auth provider; never client certificates, basic auth or
/// impersonation) and the CA certificates (DER) the kubeconfig trusts.
#[derive(Clone, Default)]
pub struct ClusterCredentials {
    pub auth: kube::config::AuthInfo,
    pub root_certs: Vec<Vec<u8>>,
}

impl ClusterCredentials {
    /// Whether these credentials carry a bearer token of any kind.
    pub fn has_token(&self) -> bool {
        let a = &self.auth;
        a.token.is_some() || a.token_file.is_some() || a.exec.is_some() || a.auth_provider.is_some()
    }
}

/// One HTTP answer, whatever its status.
struct Raw {
    code: u16,
    body: String,
}

/// An answer whose body went past [`MAX_ANSWER_BYTES`]: final, never retried.
struct TooLarge;

/// Marks an Api error that carries a raw HTTP answer (status and body) rather than a
/// Kubernetes Status, so it can be turned back into one after the retries.
const RAW_REASON: &str = "VirtworkRawAnswer";

/// Reads `body` up to `limit` bytes; Ok(Err(TooLarge)) as soon as it goes past, without
/// reading the rest.
async fn read_capped(
    mut body: kube::client::Body,
    limit: usize,
) -> std::result::Result<std::result::Result<Vec<u8>, TooLarge>, kube::Error> {
    use hyper::body::Body as _;
    let mut bytes = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > limit {
            return Ok(Err(TooLarge));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(Ok(bytes))
}

async fn get_raw(
    client: &kube::Client,
    path: &str,
) -> std::result::Result<std::result::Result<Raw, TooLarge>, kube::Error> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::empty())
        .map_err(kube::Error::HttpError)?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let bytes = match read_capped(response.into_body(), MAX_ANSWER_BYTES).await? {
        Ok(bytes) => bytes,
        Err(TooLarge) => return Ok(Err(TooLarge)),
    };
    // Valid UTF-8 (the usual case) becomes the String without a copy.
    let body = String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
    if code == 429 || code >= 500 {
        // As an Api error the shared classifier sees a transient code and retries.
        let mut status = Status::failure(&body, RAW_REASON);
        status.code = code;
        return Err(kube::Error::Api(status.boxed()));
    }
    Ok(Ok(Raw { code, body }))
}

/// GETs `path` under the retry policy; the final answer of any HTTP status comes back as
/// Ok, transport failures, an oversized answer and cancellation as Err.
async fn get_retried(
    client: &kube::Client,
    path: &str,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    what: &str,
) -> Result<Raw> {
    let started = Instant::now();
    match retry(policy, cancel, what, || get_raw(client, path)).await {
        Ok(Ok(raw)) => Ok(raw),
        Ok(Err(TooLarge)) => Err(Error::runtime(format!(
            "{what}: the answer is larger than {} MiB, the most verify reads from Prometheus; \
             check that this is a Prometheus HTTP API",
            MAX_ANSWER_BYTES >> 20
        ))),
        Err(RetryError::Failed {
            error: kube::Error::Api(status),
            ..
        }) if status.reason == RAW_REASON => Ok(Raw {
            code: status.code,
            body: status.message.clone(),
        }),
        Err(RetryError::Failed {
            error,
            attempts,
            transient,
        }) => {
            // kube says "client error (Connect)" for a refused certificate or connection;
            // the innermost cause says which.
            let cause = innermost_cause(&error);
            let failed = RetryError::Failed {
                error,
                attempts,
                transient,
            };
            let message = match failed {
                RetryError::Failed {
                    error,
                    attempts,
                    transient: true,
                } if attempts > 1 => gave_up_text(what, &error, attempts, started.elapsed()),
                failed => failed.into_error(what.to_string()).to_string(),
            };
            Err(if message.contains(&cause) {
                Error::runtime(message)
            } else {
                Error::runtime(format!("{message} ({cause})"))
            })
        }
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
    }
}

/// The innermost error of a chain, e.g. `invalid peer certificate: UnknownIssuer`.
/// A request to Prometheus that kept failing transiently until verify's deadline: what was
/// retried and for how long, and the last failure (the deadline is `--timeout` only with
/// `--wait`; without it verify gives Prometheus a fixed time, so naming `--timeout` would
/// send the user to the wrong knob).
fn gave_up_text(what: &str, error: &kube::Error, attempts: u32, retried: Duration) -> String {
    format!(
        "{what}: gave up after {attempts} attempts over {} s (verify retries timeouts, dropped \
         connections, 429 and 5xx answers until its deadline: --timeout with --wait, else 60 \
         s); the last attempt failed with: {}",
        retried.as_secs(),
        crate::error::kube_text(error)
    )
}

/// Whether `error` says nobody can answer at this address: a refused connection or an
/// unknown host (the API server's first contact decides the same way).
fn nobody_there(error: &kube::Error) -> bool {
    crate::k8s::reach::first_contact(error) == crate::k8s::reach::FirstContact::Fatal
}

fn innermost_cause(error: &kube::Error) -> String {
    let mut current: &(dyn std::error::Error + 'static) = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

impl PrometheusApi {
    /// An endpoint behind the API server's service proxy.
    pub fn via_proxy(client: kube::Client, namespace: &str, service: &str, server: &str) -> Self {
        PrometheusApi {
            client,
            base_path: proxy_base(namespace, service),
            describe: format!("service {namespace}/{service} through the API server {server}"),
            via: Via::ServiceProxy,
            contacted: tokio::sync::OnceCell::new(),
        }
    }

    /// An endpoint at the user's `--prometheus` URL, trusting the system's roots; `auth`
    /// holds at most the bearer token the settings chose for it.
    pub fn at_url(
        url: &http::Uri,
        auth: kube::config::AuthInfo,
        gate: Arc<RequestGate>,
    ) -> Result<Self> {
        let describe = display_url(url);
        Self::at(url, auth, None, gate, Via::Url, describe)
    }

    /// The cluster's monitoring route at `url`, with the cluster's bearer token, trusting
    /// the system's roots plus the kubeconfig's CA (never `insecure-skip-tls-verify`).
    pub fn at_route(
        url: &http::Uri,
        credentials: &ClusterCredentials,
        gate: Arc<RequestGate>,
    ) -> Result<Self> {
        let mut roots = system_roots();
        roots.extend(credentials.root_certs.iter().cloned());
        let (namespace, name) = MONITORING_ROUTE;
        let describe = format!("route {namespace}/{name} {}", display_url(url));
        Self::at(
            url,
            credentials.auth.clone(),
            Some(roots),
            gate,
            Via::Route,
            describe,
        )
    }

    /// A direct client; `root_certs` None trusts the platform's roots, Some exactly those.
    fn at(
        url: &http::Uri,
        auth: kube::config::AuthInfo,
        root_certs: Option<Vec<Vec<u8>>>,
        gate: Arc<RequestGate>,
        via: Via,
        describe: String,
    ) -> Result<Self> {
        use secrecy::ExposeSecret;
        // kube builds the Authorization header of a static token when the client is built
        // and panics on a value HTTP forbids: refuse it with a message first.
        if let Some(token) = &auth.token
            && !is_valid_bearer_token(token.expose_secret())
        {
            return Err(Error::input(format!(
                "the bearer token for Prometheus ({describe}) contains a control character, a \
                 space or a non-ASCII character, which an HTTP header cannot carry; check the \
                 token's source (--prometheus-token-file or the kubeconfig's user token)"
            )));
        }
        // The proxy kubectl would use for this URL (HTTPS_PROXY/HTTP_PROXY minus NO_PROXY):
        // kube applies none to a config it did not load from a kubeconfig.
        let proxy = choose_proxy(url, None, &ProxyEnv::from_process()).map_err(Error::input)?;
        let describe = match &proxy {
            Some(proxy) => format!("{describe} ({proxy})"),
            None => describe,
        };
        let mut config = kube::Config::new(url.clone());
        config.proxy_url = proxy.map(|p| p.uri);
        config.auth_info = auth;
        config.root_cert = root_certs;
        config.default_retry = false;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(QUERY_READ_TIMEOUT);
        let builder = kube::client::ClientBuilder::try_from(config).map_err(|e| {
            Error::kube(format!("building a client for Prometheus ({describe})"), e)
        })?;
        Ok(PrometheusApi {
            client: builder.with_layer(&RateLimitLayer::new(gate)).build(),
            base_path: String::new(),
            describe,
            via,
            contacted: tokio::sync::OnceCell::new(),
        })
    }

    fn query_path(&self, promql: &str) -> String {
        format!(
            "{}/api/v1/query?query={}",
            self.base_path,
            url_encode(promql)
        )
    }

    /// One instant query at the server's current time.
    pub async fn query(
        &self,
        promql: &str,
        policy: &RetryPolicy,
        cancel: &CancellationToken,
    ) -> Result<QueryAnswer> {
        let path = self.query_path(promql);
        self.get_answer(&path, policy, cancel, parse_query_response)
            .await
    }

    /// One range query: `promql` evaluated every `step` seconds from `start` to `end` (Unix
    /// seconds, whole).
    pub async fn query_range(
        &self,
        promql: &str,
        (start, end, step): (u64, u64, u64),
        policy: &RetryPolicy,
        cancel: &CancellationToken,
    ) -> Result<RangeAnswer> {
        let path = format!(
            "{}/api/v1/query_range?query={}&start={start}&end={end}&step={step}",
            self.base_path,
            url_encode(promql)
        );
        self.get_answer(&path, policy, cancel, parse_range_response)
            .await
    }

    /// [`Self::query_range`] with the caller's parser of the answer (a caller that needs
    /// other labels than `name`: `disruption` reads `node` and `migration_name`).
    pub async fn query_range_parsed<T>(
        &self,
        promql: &str,
        (start, end, step): (u64, u64, u64),
        policy: &RetryPolicy,
        cancel: &CancellationToken,
        parse: fn(&str) -> std::result::Result<T, String>,
    ) -> Result<T> {
        let path = format!(
            "{}/api/v1/query_range?query={}&start={start}&end={end}&step={step}",
            self.base_path,
            url_encode(promql)
        );
        self.get_answer(&path, policy, cancel, parse).await
    }

    /// GETs an API path under the retry policy and parses the answer with `parse`; refused
    /// credentials are an error saying which ones to check.
    async fn get_answer<T>(
        &self,
        path: &str,
        policy: &RetryPolicy,
        cancel: &CancellationToken,
        parse: fn(&str) -> std::result::Result<T, String>,
    ) -> Result<T> {
        if self.via != Via::ServiceProxy {
            // Direct connections only: through the proxy the API server answers.
            self.contacted
                .get_or_try_init(|| self.first_contact(cancel))
                .await?;
        }
        let what = format!("querying Prometheus ({})", self.describe);
        let raw = get_retried(&self.client, path, policy, cancel, &what).await?;
        if raw.code == 401 || raw.code == 403 {
            let check = match self.via {
                Via::Url => {
                    "check the token (none is sent without --prometheus-token-file or \
                     --prometheus-use-cluster-token) and that its user may query Prometheus"
                }
                Via::Route | Via::ServiceProxy => {
                    "check that the kubeconfig's user may query Prometheus (on OpenShift: \
                     cluster-monitoring-view)"
                }
            };
            return Err(Error::runtime(format!(
                "{what}: HTTP {}: Prometheus refused the credentials; {check}",
                raw.code
            )));
        }
        parse(&raw.body).map_err(|e| Error::runtime(format!("{what}: HTTP {}: {e}", raw.code)))
    }

    /// One trivial query, not retried, before the first real one: a refused connection or an
    /// unknown host fails verify at once, naming the URL, instead of being retried until the
    /// deadline; anything else (an answer, a timeout, a 5xx) lets the queries proceed under
    /// their retry policy.
    async fn first_contact(&self, cancel: &CancellationToken) -> Result<()> {
        let path = self.query_path("vector(1)");
        let attempt = tokio::time::timeout(CONNECT_TIMEOUT, get_raw(&self.client, &path));
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Error::Interrupted),
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(Err(error)) if nobody_there(&error) => Err(Error::runtime(format!(
                "cannot reach Prometheus at {}: {}; check the address (not retried: nothing \
                 answers there)",
                self.describe,
                innermost_cause(&error)
            ))),
            _ => Ok(()),
        }
    }

    /// Probes this endpoint with a trivial query.
    async fn probe(&self, cancel: &CancellationToken) -> Result<Probe> {
        let policy = RetryPolicy::until(Instant::now() + PROBE_DEADLINE);
        let what = format!("probing {}", self.describe);
        let raw = get_retried(
            &self.client,
            &self.query_path("vector(1)"),
            &policy,
            cancel,
            &what,
        )
        .await?;
        Ok(classify_probe(raw.code, &raw.body))
    }
}

/// The system's trusted CA certificates (DER), as OpenSSL-style tools find them
/// (`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured); unreadable ones are skipped.
fn system_roots() -> Vec<Vec<u8>> {
    rustls_native_certs::load_native_certs()
        .certs
        .into_iter()
        .map(|c| c.as_ref().to_vec())
        .collect()
}

/// The https URL of the monitoring Route `route` (its `spec.host` and `spec.path`), or why
/// it cannot be used: a route without TLS would carry the token in clear text.
pub fn route_url(route: &Value) -> std::result::Result<http::Uri, String> {
    let spec = &route["spec"];
    let host = spec["host"].as_str().unwrap_or_default();
    if host.is_empty() {
        return Err("has no spec.host".into());
    }
    if !spec["tls"].is_object() {
        return Err(
            "is not served over TLS (no spec.tls), and the token goes only over https".into(),
        );
    }
    let path = spec["path"].as_str().unwrap_or_default();
    let uri: http::Uri = format!("https://{host}{path}")
        .parse()
        .map_err(|_| format!("has an unusable host {host:?}"))?;
    let plain_host = uri.authority().is_some_and(|a| !a.as_str().contains('@'));
    if !plain_host || uri.query().is_some() {
        return Err(format!("has an unusable host {host:?}"));
    }
    Ok(uri)
}

/// Reads the monitoring Route from the API: Ok(Ok(url)) to try, Ok(Err(finding)) when it
/// is absent or unusable (the finding says why).
async fn find_route(
    client: &kube::Client,
    cancel: &CancellationToken,
) -> Result<std::result::Result<http::Uri, String>> {
    let (namespace, name) = MONITORING_ROUTE;
    let gvk = GroupVersionKind::gvk("route.openshift.io", "v1", "Route");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "routes");
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(client.clone(), namespace, &resource);
    let policy = RetryPolicy::until(Instant::now() + PROBE_DEADLINE);
    match retry(&policy, cancel, "reading the monitoring route", || {
        api.get_opt(name)
    })
    .await
    {
        Ok(Some(route)) => Ok(route_url(&route.data)),
        Ok(None) => Ok(Err("not found".into())),
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(RetryError::Failed { error, .. }) => Ok(Err(crate::error::kube_text(&error))),
    }
}

/// Tries the cluster's monitoring route: Ok(Ok(api)) when it answers the Prometheus API,
/// Ok(Err(finding)) otherwise.
async fn try_route(
    client: &kube::Client,
    credentials: &ClusterCredentials,
    gate: &Arc<RequestGate>,
    cancel: &CancellationToken,
) -> Result<std::result::Result<PrometheusApi, String>> {
    let url = match find_route(client, cancel).await? {
        Ok(url) => url,
        Err(finding) => return Ok(Err(finding)),
    };
    if !credentials.has_token() {
        return Ok(Err(format!(
            "{} found, but the kubeconfig's user has no bearer token to present to it",
            display_url(&url)
        )));
    }
    let api = PrometheusApi::at_route(&url, credentials, gate.clone())?;
    let finding = match api.probe(cancel).await {
        Ok(Probe::Found) => return Ok(Ok(api)),
        Ok(Probe::BackendRefused(code)) => format!(
            "{} answered HTTP {code} to the kubeconfig's token: its user may not query \
             Prometheus (on OpenShift: cluster-monitoring-view)",
            display_url(&url)
        ),
        Ok(Probe::Forbidden(m) | Probe::Unavailable(m) | Probe::Other(m)) => {
            format!("{}: {m}", display_url(&url))
        }
        Ok(Probe::NoSuchService) => format!("{}: not found", display_url(&url)),
        Err(Error::Interrupted) => return Err(Error::Interrupted),
        Err(e) => e.to_string(),
    };
    Ok(Err(finding))
}

/// Whether the cluster has OpenShift's monitoring namespace, as far as the user can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenShiftMonitoring {
    Present,
    Absent,
    /// The user may not read the namespace, and the cluster serves OpenShift's Route API:
    /// taken as present.
    Unknown,
}

impl OpenShiftMonitoring {
    /// Whether kube-prometheus' `monitoring` namespace may be trusted for discovery: only
    /// where OpenShift's monitoring is absent. On OpenShift any self-provisioner can create
    /// a `monitoring` namespace with a `prometheus-k8s` answering whatever it likes.
    pub fn allows_kube_prometheus(self) -> bool {
        self == OpenShiftMonitoring::Absent
    }
}

/// Reads whether the namespace `openshift-monitoring` exists: 404 absent, 200 present;
/// refused, it counts as absent only where the API serves no `route.openshift.io` (not
/// OpenShift).
async fn openshift_monitoring(
    client: &kube::Client,
    cancel: &CancellationToken,
) -> Result<OpenShiftMonitoring> {
    let (namespace, _) = MONITORING_ROUTE;
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let policy = RetryPolicy::until(Instant::now() + PROBE_DEADLINE);
    match retry(
        &policy,
        cancel,
        "reading the openshift-monitoring namespace",
        || api.get_opt(namespace),
    )
    .await
    {
        Ok(Some(_)) => Ok(OpenShiftMonitoring::Present),
        Ok(None) => Ok(OpenShiftMonitoring::Absent),
        Err(RetryError::Cancelled) => Err(Error::Interrupted),
        Err(RetryError::Failed { .. }) => {
            let routes = retry(&policy, cancel, "reading the Route API", || {
                client.list_api_group_resources("route.openshift.io/v1")
            })
            .await;
            match routes {
                Err(RetryError::Cancelled) => Err(Error::Interrupted),
                Err(RetryError::Failed {
                    error: kube::Error::Api(status),
                    ..
                }) if status.code == 404 => Ok(OpenShiftMonitoring::Absent),
                _ => Ok(OpenShiftMonitoring::Unknown),
            }
        }
    }
}

/// Finds Prometheus: first the cluster's monitoring route (with `credentials`, the
/// kubeconfig's token), then behind the API server's service proxy; the first that
/// answers the Prometheus API wins. A route that is skipped is warned about with the
/// reason; kube-prometheus' `monitoring/prometheus-k8s` is tried only where no
/// `openshift-monitoring` namespace exists. Err names every place tried and what it said.
pub async fn discover(
    client: &kube::Client,
    server: &str,
    credentials: &ClusterCredentials,
    gate: &Arc<RequestGate>,
    cancel: &CancellationToken,
) -> Result<PrometheusApi> {
    let (namespace, name) = MONITORING_ROUTE;
    let mut findings = Vec::new();
    match try_route(client, credentials, gate, cancel).await? {
        Ok(api) => return Ok(api),
        Err(finding) => {
            tracing::warn!(
                route = format!("{namespace}/{name}").as_str(),
                reason = finding.as_str(),
                "not using the cluster's monitoring route"
            );
            findings.push(format!("route {namespace}/{name}: {finding}"));
        }
    }
    let openshift = openshift_monitoring(client, cancel).await?;
    for (namespace, service) in CANDIDATES {
        if namespace != MONITORING_ROUTE.0 && !openshift.allows_kube_prometheus() {
            let why = match openshift {
                OpenShiftMonitoring::Present => "the cluster has an openshift-monitoring namespace",
                _ => {
                    "the cluster serves OpenShift's Route API and the openshift-monitoring namespace cannot be read"
                }
            };
            tracing::warn!(
                service = format!("{namespace}/{service}").as_str(),
                "not trying kube-prometheus' service: {why}, so a {namespace} namespace may be anyone's"
            );
            findings.push(format!(
                "{namespace}/{service}: not tried, since {why} (on OpenShift anyone allowed to create \
                 namespaces could create {namespace})"
            ));
            continue;
        }
        let api = PrometheusApi::via_proxy(client.clone(), namespace, service, server);
        let finding = match api.probe(cancel).await {
            Ok(Probe::Found) => return Ok(api),
            Ok(Probe::NoSuchService) => "not found".to_string(),
            Ok(Probe::Forbidden(message)) => format!(
                "forbidden ({message}); grant get on services/proxy in {namespace} (docs/deployment.md)"
            ),
            Ok(Probe::Unavailable(message)) => format!("not serving ({message})"),
            Ok(Probe::BackendRefused(code)) => format!(
                "answered HTTP {code}: it requires credentials, which the API server does not pass \
                 through its proxy; use --prometheus with its route URL and --prometheus-token-file"
            ),
            Ok(Probe::Other(message)) => message,
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => e.to_string(),
        };
        findings.push(format!("{namespace}/{service}: {finding}"));
    }
    Err(Error::runtime(format!(
        "no Prometheus found through the monitoring route or the API server's service proxy \
         ({}); pass --prometheus URL",
        findings.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn display_url_never_shows_userinfo() {
        let url: http::Uri = "https://alice:s3cret@prom.example:9091/prefix/"
            .parse()
            .unwrap();
        assert_eq!(display_url(&url), "https://prom.example:9091/prefix");
        let url: http::Uri = "http://prom.example".parse().unwrap();
        assert_eq!(display_url(&url), "http://prom.example");
    }

    #[test]
    fn bearer_tokens_are_visible_ascii_only() {
        assert!(is_valid_bearer_token("eyJhbGciOi.J9-_~+/="));
        for bad in ["", "a b", "tok\u{7}en", "tok\ren", "t\u{e9}"] {
            assert!(!is_valid_bearer_token(bad), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_token_no_header_can_carry_is_an_input_error_not_a_panic() {
        let gate = RequestGate::new(crate::k8s::client::RateLimit {
            qps: 5.0,
            burst: 10,
        })
        .unwrap();
        let url: http::Uri = "https://prom.example".parse().unwrap();
        let auth = kube::config::AuthInfo {
            token: Some("abc\u{1b}[2Jdef".to_string().into()),
            ..Default::default()
        };
        let Err(error) = PrometheusApi::at_url(&url, auth, gate) else {
            panic!("a token with an escape character was accepted");
        };
        assert_eq!(error.exit_code(), 2);
        assert!(
            error.to_string().contains("https://prom.example"),
            "{error}"
        );
    }

    #[test]
    fn route_url_takes_host_and_path_and_requires_tls() {
        let route = json!({"spec": {"host": "thanos.apps.example", "path": "/q", "tls": {"termination": "reencrypt"}}});
        assert_eq!(
            route_url(&route).unwrap().to_string(),
            "https://thanos.apps.example/q"
        );
        let plain = json!({"spec": {"host": "thanos.apps.example"}});
        assert!(
            route_url(&plain)
                .unwrap_err()
                .contains("not served over TLS")
        );
        assert!(
            route_url(&json!({"spec": {"tls": {}}}))
                .unwrap_err()
                .contains("spec.host")
        );
        let sneaky = json!({"spec": {"host": "user@evil.example", "tls": {}}});
        assert!(route_url(&sneaky).unwrap_err().contains("unusable host"));
    }
}
