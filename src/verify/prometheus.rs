//! Reaching Prometheus' HTTP API: through the API server's service proxy (default; the
//! kubeconfig's credentials authenticate to the API server, which never forwards them) or
//! at a URL given with `--prometheus` (bearer token from `--prometheus-token-file` or the
//! kubeconfig). Thin async shell: what answers mean is decided in evaluate.rs.
//!
//! Every request passes the command's [`RequestGate`] (rate limit) and is retried on
//! 429/5xx/transport errors by [`crate::k8s::retry`] until the deadline; GET only, so the
//! proxy needs nothing beyond `get` on `services/proxy`. Must not: log a token.

use std::sync::Arc;
use std::time::Duration;

use kube::core::Status;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::evaluate::{Probe, QueryAnswer, classify_probe, parse_query_response};
use crate::error::{Error, Result};
use crate::k8s::client::{RateLimitLayer, RequestGate};
use crate::k8s::retry::{RetryError, RetryPolicy, retry};
use crate::signals::promql::url_encode;

/// Where discovery looks, in order: OpenShift's Thanos querier, then kube-prometheus.
/// The service reference is `scheme:name:port` as the proxy path takes it.
pub const CANDIDATES: [(&str, &str); 2] = [
    ("openshift-monitoring", "https:thanos-querier:web"),
    ("monitoring", "http:prometheus-k8s:web"),
];

/// How long one discovery probe retries transient answers before judging the candidate.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
/// Read timeout of a query; a query slower than this is retried until the deadline.
const QUERY_READ_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The proxy path prefix of a service.
pub fn proxy_base(namespace: &str, service: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/services/{service}/proxy")
}

/// A Prometheus HTTP API endpoint and the client that reaches it.
#[derive(Clone)]
pub struct PrometheusApi {
    client: kube::Client,
    /// Path before `/api/v1/...` (the proxy prefix; empty for a URL, whose own path the
    /// client keeps).
    base_path: String,
    /// For messages and the report: `service monitoring/http:prometheus-k8s:web via the
    /// API server` or the URL.
    pub describe: String,
}

/// One HTTP answer, whatever its status.
struct Raw {
    code: u16,
    body: String,
}

/// Marks an Api error that carries a raw HTTP answer (status and body) rather than a
/// Kubernetes Status, so it can be turned back into one after the retries.
const RAW_REASON: &str = "VirtworkRawAnswer";

async fn get_raw(client: &kube::Client, path: &str) -> std::result::Result<Raw, kube::Error> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::empty())
        .map_err(kube::Error::HttpError)?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await?;
    let body = String::from_utf8_lossy(&bytes).into_owned();
    if code == 429 || code >= 500 {
        // As an Api error the shared classifier sees a transient code and retries.
        let mut status = Status::failure(&body, RAW_REASON);
        status.code = code;
        return Err(kube::Error::Api(status.boxed()));
    }
    Ok(Raw { code, body })
}

/// GETs `path` under the retry policy; the final answer of any HTTP status comes back as
/// Ok, transport failures and cancellation as Err.
async fn get_retried(
    client: &kube::Client,
    path: &str,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    what: &str,
) -> Result<Raw> {
    match retry(policy, cancel, what, || get_raw(client, path)).await {
        Ok(raw) => Ok(raw),
        Err(RetryError::Failed {
            error: kube::Error::Api(status),
            ..
        }) if status.reason == RAW_REASON => Ok(Raw {
            code: status.code,
            body: status.message.clone(),
        }),
        Err(e) => Err(e.into_error(what.to_string())),
    }
}

impl PrometheusApi {
    /// An endpoint behind the API server's service proxy.
    pub fn via_proxy(client: kube::Client, namespace: &str, service: &str, server: &str) -> Self {
        PrometheusApi {
            client,
            base_path: proxy_base(namespace, service),
            describe: format!("service {namespace}/{service} through the API server {server}"),
        }
    }

    /// An endpoint at `url`; `auth` is the bearer-token part of the credentials (the
    /// caller strips everything else).
    pub fn at_url(
        url: &http::Uri,
        auth: kube::config::AuthInfo,
        gate: Arc<RequestGate>,
    ) -> Result<Self> {
        let mut config = kube::Config::new(url.clone());
        config.auth_info = auth;
        config.default_retry = false;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(QUERY_READ_TIMEOUT);
        let builder = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| Error::kube(format!("building a client for --prometheus {url}"), e))?;
        Ok(PrometheusApi {
            client: builder.with_layer(&RateLimitLayer::new(gate)).build(),
            base_path: String::new(),
            describe: url.to_string().trim_end_matches('/').to_string(),
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
        let what = format!("querying Prometheus ({})", self.describe);
        let raw = get_retried(
            &self.client,
            &self.query_path(promql),
            policy,
            cancel,
            &what,
        )
        .await?;
        if raw.code == 401 || raw.code == 403 {
            return Err(Error::runtime(format!(
                "{what}: HTTP {}: Prometheus refused the credentials; check --prometheus-token-file \
                 (or the kubeconfig's token) and that its user may query Prometheus",
                raw.code
            )));
        }
        parse_query_response(&raw.body)
            .map_err(|e| Error::runtime(format!("{what}: HTTP {}: {e}", raw.code)))
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

/// Finds Prometheus behind the API server's service proxy: the first candidate that
/// answers the Prometheus API wins. Err names every candidate and what it said.
pub async fn discover(
    client: &kube::Client,
    server: &str,
    cancel: &CancellationToken,
) -> Result<PrometheusApi> {
    let mut findings = Vec::new();
    for (namespace, service) in CANDIDATES {
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
                 through its proxy; use --prometheus with its route URL (the kubeconfig's token is sent)"
            ),
            Ok(Probe::Other(message)) => message,
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => e.to_string(),
        };
        findings.push(format!("{namespace}/{service}: {finding}"));
    }
    Err(Error::runtime(format!(
        "no Prometheus found through the API server's service proxy ({}); pass --prometheus URL",
        findings.join("; ")
    )))
}
