//! Reaching Prometheus as the settings name it, shared by `verify`, `disruption` and `report`.
//!
//! Owns: the choice between discovery (the cluster's monitoring route, else the API server's
//! service proxy) and `--prometheus URL`, and the credential each sends: none, the given
//! token, or only the bearer-token part of the kubeconfig's credentials (client
//! certificates, basic auth and impersonation are meant for the API server).
//! Must not: decide what an unreachable Prometheus means (verify fails, disruption and
//! report say why and go on); query it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{ClusterAccess, PrometheusCredential, PrometheusTarget};
use crate::error::Result;
use crate::k8s::client::{Cluster, RequestGate, load_kube_config};
use crate::verify::prometheus::{ClusterCredentials, PrometheusApi, discover};

/// Prometheus as `target` names it, found through `cluster` (whose gate it shares).
pub(crate) async fn reach_prometheus(
    access: &ClusterAccess,
    target: &PrometheusTarget,
    cluster: &Cluster,
    cancel: &CancellationToken,
) -> Result<PrometheusApi> {
    match target {
        PrometheusTarget::Discover => {
            let credentials = credentials_of(access).await?;
            discover(
                &cluster.client,
                &cluster.server_url,
                &credentials,
                &cluster.gate,
                cancel,
            )
            .await
        }
        PrometheusTarget::Url { url, credential } => {
            at_url(access, url, credential, cluster.gate.clone()).await
        }
    }
}

/// Prometheus at `url` with the credential the settings chose (no cluster connection needed).
pub(crate) async fn at_url(
    access: &ClusterAccess,
    url: &http::Uri,
    credential: &PrometheusCredential,
    gate: Arc<RequestGate>,
) -> Result<PrometheusApi> {
    let auth = match credential {
        PrometheusCredential::None => kube::config::AuthInfo::default(),
        PrometheusCredential::Token(token) => kube::config::AuthInfo {
            token: Some(token.expose().to_string().into()),
            ..Default::default()
        },
        PrometheusCredential::ClusterToken => credentials_of(access).await?.auth,
    };
    PrometheusApi::at_url(url, auth, gate)
}

/// The bearer token and CA of the kubeconfig `access` names (loaded as the API client loads
/// them).
async fn credentials_of(access: &ClusterAccess) -> Result<ClusterCredentials> {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let (kube_config, _, _) =
        load_kube_config(&access.kubeconfig, access.context.as_deref(), in_cluster).await?;
    Ok(ClusterCredentials {
        auth: bearer_only(kube_config.auth_info),
        root_certs: kube_config.root_cert.unwrap_or_default(),
    })
}

/// Only the bearer-token part of the kubeconfig's credentials ever goes to Prometheus (the
/// monitoring route, or a URL with `--prometheus-use-cluster-token`).
fn bearer_only(auth: kube::config::AuthInfo) -> kube::config::AuthInfo {
    kube::config::AuthInfo {
        token: auth.token,
        token_file: auth.token_file,
        auth_provider: auth.auth_provider,
        exec: auth.exec,
        ..Default::default()
    }
}
