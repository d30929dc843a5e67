//! The API server's service proxy: `/api/v1/namespaces/{ns}/services/{[scheme:]name[:port]}/proxy/{path}`.
//!
//! Like kube-apiserver: the caller is authenticated first (http.rs), RBAC is checked as
//! verb on `services/proxy` (denials from the fault knobs), the Service must exist (404
//! Status otherwise), and a port must have a backend (503 "no endpoints available"). The
//! `Authorization` header is never forwarded. Backends are registered per service port by
//! tests: the KubeVirt metrics endpoint (metrics.rs), an upstream HTTP server on 127.0.0.1
//! (e.g. a real Prometheus), or a fixed answer (e.g. an auth proxy refusing the request).

use std::collections::BTreeMap;
use std::time::Instant;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::json;

use super::http::{Body, Shared};
use super::metrics::{self, MetricsState};
use super::resources;
use super::status::ApiError;

/// What answers behind one service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// KubeVirt's per-VMI metrics (virt-handler's `/metrics`), for every path.
    KubeVirtMetrics,
    /// Forward to this `http://127.0.0.1:<port>` server, path and query kept.
    Upstream(String),
    /// Answer every request with this status and body (text/plain).
    Respond(u16, String),
}

/// Registered backends and the metrics endpoint's state.
#[derive(Debug, Default)]
pub struct ProxyState {
    /// (namespace, service, port) → backend.
    pub backends: BTreeMap<(String, String, String), Backend>,
    pub metrics: MetricsState,
}

/// A parsed proxy request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyTarget {
    pub namespace: String,
    pub service: String,
    /// The port name or number from the reference ("" when none was given).
    pub port: String,
    /// The path after `/proxy` (at least "/").
    pub rest: String,
}

/// Recognises a service-proxy path.
pub fn parse(path: &str) -> Option<ProxyTarget> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let (namespace, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix("services/")?;
    let (reference, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix("proxy")?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let parts: Vec<&str> = reference.split(':').collect();
    let (service, port) = match parts.as_slice() {
        [name] => (*name, ""),
        [scheme, name] if matches!(*scheme, "http" | "https") => (*name, ""),
        [name, port] => (*name, *port),
        [_scheme, name, port] => (*name, *port),
        _ => return None,
    };
    Some(ProxyTarget {
        namespace: namespace.to_string(),
        service: service.to_string(),
        port: port.to_string(),
        rest: if rest.is_empty() {
            "/".into()
        } else {
            rest.to_string()
        },
    })
}

fn text(code: u16, body: impl Into<String>, content_type: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("Content-Type", content_type)
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body.into())).boxed())
        .unwrap()
}

fn status(e: &ApiError) -> Response<Body> {
    text(
        e.code,
        serde_json::to_vec(&e.to_status())
            .map(|v| String::from_utf8(v).unwrap())
            .unwrap(),
        "application/json",
    )
}

/// Serves one proxy request (authentication already passed).
pub async fn serve(
    shared: &Shared,
    target: &ProxyTarget,
    verb: &str,
    raw_query: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let user = shared.config.lock().unwrap().user.clone();
    let denied = shared
        .faults
        .lock()
        .unwrap()
        .0
        .denials
        .iter()
        .any(|d| d.matches(verb, "services/proxy", &target.namespace));
    if denied {
        return status(&ApiError::new(
            403,
            "Forbidden",
            format!(
                "services \"{}\" is forbidden: User \"{user}\" cannot {verb} resource \"services/proxy\" in API group \"\" in the namespace \"{}\"",
                target.service, target.namespace
            ),
        ));
    }
    let services = resources::lookup("services").expect("services are served");
    let service = shared
        .store
        .lock()
        .unwrap()
        .get(services, &target.namespace, &target.service)
        .ok();
    let Some(service) = service else {
        let mut e = ApiError::new(
            404,
            "NotFound",
            format!("services \"{}\" not found", target.service),
        );
        e.details = Some(json!({ "name": target.service, "kind": "services" }));
        return status(&e);
    };
    // The port reference must name (or number) one of the Service's ports.
    let ports = service["spec"]["ports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let port_ok = target.port.is_empty()
        || ports.iter().any(|p| {
            p["name"].as_str() == Some(target.port.as_str())
                || p["port"].as_u64().map(|n| n.to_string()) == Some(target.port.clone())
        });
    let backend = shared
        .proxy
        .lock()
        .unwrap()
        .backends
        .get(&(
            target.namespace.clone(),
            target.service.clone(),
            target.port.clone(),
        ))
        .cloned();
    let Some(backend) = backend.filter(|_| port_ok) else {
        return status(&ApiError::new(
            503,
            "ServiceUnavailable",
            format!("no endpoints available for service \"{}\"", target.service),
        ));
    };
    match backend {
        Backend::Respond(code, body) => text(code, body, "text/plain; charset=utf-8"),
        Backend::KubeVirtMetrics => {
            let body = {
                let store = shared.store.lock().unwrap();
                let mut proxy = shared.proxy.lock().unwrap();
                metrics::render(&store, &mut proxy.metrics, Instant::now())
            };
            text(200, body, "text/plain; version=0.0.4; charset=utf-8")
        }
        Backend::Upstream(base) => forward(&base, target, raw_query, req).await,
    }
}

/// Forwards to a plain-HTTP upstream on this machine, without the caller's credentials.
async fn forward(
    base: &str,
    target: &ProxyTarget,
    raw_query: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let bad_gateway = |why: String| {
        status(&ApiError::new(
            503,
            "ServiceUnavailable",
            format!("error trying to reach service: {why}"),
        ))
    };
    let authority = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let stream = match tokio::net::TcpStream::connect(&authority).await {
        Ok(s) => s,
        Err(e) => return bad_gateway(e.to_string()),
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await {
            Ok(pair) => pair,
            Err(e) => return bad_gateway(e.to_string()),
        };
    tokio::spawn(conn);
    let uri = if raw_query.is_empty() {
        target.rest.clone()
    } else {
        format!("{}?{raw_query}", target.rest)
    };
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return bad_gateway(e.to_string()),
    };
    let mut upstream = Request::builder()
        .method(parts.method)
        .uri(uri)
        .header("Host", &authority);
    for (name, value) in &parts.headers {
        if name != hyper::header::AUTHORIZATION && name != hyper::header::HOST {
            upstream = upstream.header(name, value);
        }
    }
    let request = upstream.body(http_body_util::Full::new(body)).unwrap();
    match sender.send_request(request).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            match body.collect().await {
                Ok(bytes) => {
                    Response::from_parts(parts, http_body_util::Full::new(bytes.to_bytes()).boxed())
                }
                Err(e) => bad_gateway(e.to_string()),
            }
        }
        Err(e) => bad_gateway(e.to_string()),
    }
}
