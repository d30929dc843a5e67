//! Connecting to the API server: kubeconfig (merged like kubectl) or in-cluster service
//! account, and the client-side rate limit every request of a command passes through.
//!
//! [`connect`] is the only way commands obtain a [`kube::Client`]. The client it returns sits
//! behind a [`RateLimitLayer`]: a token bucket (`--qps` per second, bucket size `--burst`,
//! defaults 50/100 in config.rs, the same meaning as client-go's QPS/Burst) shared by every
//! request of the process, including discovery, SelfSubjectAccessReviews, creates, GETs and
//! watches (a watch costs one token per (re)connect, since it is one long request). The same
//! layer records a server's `Retry-After` on 429/503 responses and holds *all* requests
//! until it has passed, so an overloaded server is not hammered by our other workers.
//! kube's own transparent retry layer is switched off: retries are decided by
//! [`crate::k8s::retry`], which knows the run deadline, cancellation and AlreadyExists.
//!
//! Requests go through a proxy when kubectl would use one (see [`crate::k8s::proxy`]); the
//! proxy shows in [`Cluster::describe`] without its userinfo.
//!
//! This module performs no API call itself; connectivity problems surface on the first
//! request (see preflight.rs for the friendly messages).

use std::future::Future;
use std::io::IsTerminal;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use kube::config::{ExecInteractiveMode, KubeConfigOptions, Kubeconfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::k8s::proxy::{ProxyEnv, choose_proxy};
use crate::k8s::retry::ATTEMPT_TIMEOUT;

/// Context name recorded for the audit when running with the pod's service account.
pub const IN_CLUSTER_CONTEXT: &str = "in-cluster";

/// Longest server-requested pause we honour; a larger `Retry-After` is clamped so one
/// confused proxy cannot stall a run for hours (the retry deadline still applies).
const MAX_SERVER_PAUSE: Duration = Duration::from_secs(60);

/// Client-side request budget: a token bucket refilled at `qps` tokens per second holding
/// at most `burst` tokens (client-go semantics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f64,
    pub burst: u32,
}

impl RateLimit {
    /// The least time `requests` take through the token bucket when it starts full: the
    /// first `burst` go at once, the rest at `qps`.
    pub fn least_time_for(&self, requests: usize) -> Duration {
        let queued = requests.saturating_sub(self.burst as usize) as f64;
        Duration::try_from_secs_f64(queued / self.qps).unwrap_or(Duration::MAX)
    }

    fn quota(&self) -> Result<Quota> {
        let invalid = || {
            Error::input(format!(
                "invalid rate limit --qps {} --burst {}: expected a QPS above 0 and a burst of at least 1",
                self.qps, self.burst
            ))
        };
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Err(invalid());
        }
        let burst = NonZeroU32::new(self.burst).ok_or_else(invalid)?;
        let period = Duration::from_secs_f64(1.0 / self.qps);
        Ok(Quota::with_period(period)
            .ok_or_else(invalid)?
            .allow_burst(burst))
    }
}

/// The process-wide admission point for API requests: token bucket plus server pauses.
/// Shared by every clone of the client; also counts requests for reports and benchmarks.
pub struct RequestGate {
    limiter: RateLimiter<
        governor::state::NotKeyed,
        governor::state::InMemoryState,
        DefaultClock,
        governor::middleware::NoOpMiddleware,
    >,
    clock: DefaultClock,
    paused_until: Mutex<Option<Instant>>,
    requests: AtomicU64,
    /// Once cancelled, requests still waiting for admission fail instead of being sent: an
    /// interrupted command lets requests on the wire answer, but sends nothing new.
    stop: std::sync::OnceLock<CancellationToken>,
}

/// A request refused by a stopped [`RequestGate`]; it never reached the server.
#[derive(Debug, thiserror::Error)]
#[error("request not sent: the command is stopping")]
pub struct NotAdmitted;

impl std::fmt::Debug for RequestGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestGate")
            .field("requests", &self.requests_sent())
            .finish_non_exhaustive()
    }
}

impl RequestGate {
    /// A gate admitting requests at `limit`.
    pub fn new(limit: RateLimit) -> Result<Arc<Self>> {
        let clock = DefaultClock::default();
        Ok(Arc::new(RequestGate {
            limiter: RateLimiter::direct_with_clock(limit.quota()?, clock.clone()),
            clock,
            paused_until: Mutex::new(None),
            requests: AtomicU64::new(0),
            stop: std::sync::OnceLock::new(),
        }))
    }

    /// Waits until one more request may be sent: first any server-requested pause, then a
    /// token from the bucket.
    /// Fails with [`NotAdmitted`] once the stop token (see [`RequestGate::stop_when`]) fires.
    pub async fn admit(&self) -> std::result::Result<(), NotAdmitted> {
        let stop = self.stop.get().cloned().unwrap_or_default();
        loop {
            if stop.is_cancelled() {
                return Err(NotAdmitted);
            }
            let pause = *self.paused_until.lock().expect("gate mutex poisoned");
            let wait = match pause {
                Some(until) if until > Instant::now() => until - Instant::now(),
                _ => match self.limiter.check() {
                    Ok(()) => break,
                    Err(not_until) => not_until.wait_time_from(self.clock.now()),
                },
            };
            tokio::select! {
                () = stop.cancelled() => return Err(NotAdmitted),
                () = tokio::time::sleep(wait) => {}
            }
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// From when `stop` fires, admit nothing more (the first call wins).
    pub fn stop_when(&self, stop: &CancellationToken) {
        let _ = self.stop.set(stop.clone());
    }

    /// Holds every request until `delay` from now has passed (a server's `Retry-After`).
    pub fn pause_for(&self, delay: Duration) {
        let until = Instant::now() + delay.min(MAX_SERVER_PAUSE);
        let mut paused = self.paused_until.lock().expect("gate mutex poisoned");
        if paused.is_none_or(|current| current < until) {
            *paused = Some(until);
        }
    }

    /// Requests admitted so far (each watch (re)connect counts once).
    pub fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Parses a `Retry-After` header given in seconds (the form the API server sends).
/// HTTP-date values are ignored: the API server never sends them, and our backoff applies.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// tower layer putting a [`RequestGate`] in front of the kube client's HTTP stack.
#[derive(Clone)]
pub struct RateLimitLayer {
    gate: Arc<RequestGate>,
}

impl RateLimitLayer {
    pub fn new(gate: Arc<RequestGate>) -> Self {
        RateLimitLayer { gate }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            gate: self.gate.clone(),
            admission: None,
            admitted: false,
        }
    }
}

type Admission = Pin<Box<dyn Future<Output = std::result::Result<(), NotAdmitted>> + Send>>;

/// The service produced by [`RateLimitLayer`]. Admission happens in `poll_ready`, so the
/// kube client's request buffer hands out tokens in arrival order (FIFO, no starvation).
pub struct RateLimited<S> {
    inner: S,
    gate: Arc<RequestGate>,
    admission: Option<Admission>,
    admitted: bool,
}

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for RateLimited<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: From<NotAdmitted>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.admitted {
            let admission = self.admission.get_or_insert_with(|| {
                let gate = self.gate.clone();
                Box::pin(async move { gate.admit().await })
            });
            match admission.as_mut().poll(cx) {
                Poll::Ready(Ok(())) => {
                    self.admission = None;
                    self.admitted = true;
                }
                Poll::Ready(Err(refused)) => {
                    self.admission = None;
                    return Poll::Ready(Err(refused.into()));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        self.admitted = false;
        let gate = self.gate.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            // A 429 or 503 that names a wait pauses every request, not just the retried one.
            if let Some(delay) = retry_after
                && (status == http::StatusCode::TOO_MANY_REQUESTS
                    || status == http::StatusCode::SERVICE_UNAVAILABLE)
            {
                gate.pause_for(delay);
            }
            Ok(response)
        })
    }
}

/// The interactive mode an exec credential plugin runs with. kube treats every mode but
/// `Never` as interactive and lets the plugin write straight to our stderr (and read stdin);
/// `IfAvailable` (and no mode) only means "interactive when a terminal is there", so without a
/// terminal the plugin runs with its output captured, where a failing plugin's output (which
/// can hold a token) is never shown (see [`credential_plugin_failure`]).
pub fn exec_interactive_mode(
    configured: Option<ExecInteractiveMode>,
    stdin_is_terminal: bool,
) -> ExecInteractiveMode {
    match configured {
        Some(ExecInteractiveMode::Always) => ExecInteractiveMode::Always,
        Some(ExecInteractiveMode::Never) => ExecInteractiveMode::Never,
        Some(ExecInteractiveMode::IfAvailable) | None if stdin_is_terminal => {
            ExecInteractiveMode::IfAvailable
        }
        Some(ExecInteractiveMode::IfAvailable) | None => ExecInteractiveMode::Never,
    }
}

/// A failed credential plugin, described without anything it printed: its stdout and stderr
/// can hold a token, so only the command from the kubeconfig and how it ended are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialPluginFailed {
    message: String,
}

impl std::fmt::Display for CredentialPluginFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CredentialPluginFailed {}

/// The safe description of `error` when it (or its cause) is an exec credential plugin that
/// failed or printed something that is not an ExecCredential; None for any other error.
/// `plugin` is the kubeconfig's `users[].user.exec.command`.
pub fn credential_plugin_failure(
    error: &(dyn std::error::Error + 'static),
    plugin: Option<&str>,
) -> Option<CredentialPluginFailed> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(auth) = e.downcast_ref::<kube::client::AuthError>() {
            return plugin_failure_text(auth, plugin)
                .map(|message| CredentialPluginFailed { message });
        }
        if let Some(kube::Error::Auth(auth)) = e.downcast_ref::<kube::Error>() {
            return plugin_failure_text(auth, plugin)
                .map(|message| CredentialPluginFailed { message });
        }
        current = e.source();
    }
    None
}

/// The [`CredentialPluginFailed`] somewhere in `error`'s source chain, if any.
pub fn find_plugin_failure<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a CredentialPluginFailed> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<CredentialPluginFailed>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

fn plugin_failure_text(error: &kube::client::AuthError, plugin: Option<&str>) -> Option<String> {
    use kube::client::AuthError;
    let command = plugin.filter(|c| !c.is_empty()).unwrap_or("<no command>");
    let withheld = "its output is not shown because it can contain credentials";
    match error {
        AuthError::AuthExecRun { out, .. } => Some(format!(
            "exec credential plugin {command:?} failed ({}); {withheld}; run it by hand to see why",
            out.status
        )),
        AuthError::AuthExecParse(_) => Some(format!(
            "exec credential plugin {command:?} printed something that is not an ExecCredential; \
             {withheld}"
        )),
        AuthError::AuthExecStart(io) => Some(format!(
            "cannot start exec credential plugin {command:?}: {io} (is it installed and on PATH?)"
        )),
        _ => None,
    }
}

/// tower layer replacing a credential plugin's error (which carries everything the plugin
/// printed) by [`CredentialPluginFailed`] before it reaches retry logic, logs or messages.
#[derive(Clone)]
pub struct RedactPluginOutputLayer {
    plugin: Option<String>,
}

impl<S> tower::Layer<S> for RedactPluginOutputLayer {
    type Service = RedactPluginOutput<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RedactPluginOutput {
            inner,
            plugin: self.plugin.clone(),
        }
    }
}

/// The service produced by [`RedactPluginOutputLayer`].
#[derive(Clone)]
pub struct RedactPluginOutput<S> {
    inner: S,
    plugin: Option<String>,
}

impl<S, Req> tower::Service<Req> for RedactPluginOutput<S>
where
    S: tower::Service<Req, Error = tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let plugin = self.plugin.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            response.await.map_err(|error| {
                match credential_plugin_failure(error.as_ref(), plugin.as_deref()) {
                    Some(safe) => Box::new(safe) as tower::BoxError,
                    None => error,
                }
            })
        })
    }
}

/// tower layer bounding the time from sending a request to its response head by
/// [`ATTEMPT_TIMEOUT`]. It covers every request, including those kube's watcher makes on its
/// own (its LIST and each WATCH start); the stream of a watch after its head is bounded by
/// the watch's `timeoutSeconds` (kube abandons a stream silent for longer), and the retry loop
/// bounds whole attempts, bodies included, by the command's deadline. Admission by the rate
/// limit is outside this layer, so waiting for a token never counts as a slow server.
#[derive(Clone)]
pub struct ResponseTimeoutLayer {
    timeout: Duration,
}

impl<S> tower::Layer<S> for ResponseTimeoutLayer {
    type Service = ResponseTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ResponseTimeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service produced by [`ResponseTimeoutLayer`].
#[derive(Clone)]
pub struct ResponseTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S, Req> tower::Service<Req> for ResponseTimeout<S>
where
    S: tower::Service<Req, Error = tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let timeout = self.timeout;
        let response = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(timeout, response).await {
                Ok(result) => result,
                Err(_) => Err(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no response from the API server within {}s",
                        timeout.as_secs()
                    ),
                )) as tower::BoxError),
            }
        })
    }
}

/// The most virtwork reads of one API response (an object, a page of a list, a Status), or of
/// one watch event: 64 MiB. etcd refuses objects over 1.5 MiB and lists come in pages of 500,
/// so a well-behaved server stays far below it; a broken or hostile one cannot make the
/// command hold more.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A response from the API server larger than [`MAX_RESPONSE_BYTES`] (or a watch event that
/// is). Never retried: the server would send it again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the API server {server} sent {what} larger than {} MiB, the most virtwork reads; \
     reading stopped (a broken or hostile server, or a proxy in between)",
    limit >> 20
)]
pub struct ResponseTooLarge {
    pub server: String,
    pub what: &'static str,
    pub limit: usize,
}

/// A redirect from the API server (or something pretending to be it): kube's client does not
/// follow redirects, and credentials must not follow them anywhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the API server {server} answered with a redirect (HTTP {code} to {location}); virtwork \
     does not follow redirects: point the kubeconfig's server at the API server itself"
)]
pub struct ServerRedirected {
    pub server: String,
    pub code: u16,
    pub location: String,
}

/// tower layer bounding every response body read from the API server by
/// [`MAX_RESPONSE_BYTES`]: the whole body of a request, and each line (event) of a watch,
/// whose stream as a whole lasts as long as the watch. Also turns a redirect into
/// [`ServerRedirected`]. The one place the transport bounds what it reads.
#[derive(Clone)]
pub struct ResponseLimitLayer {
    server: Arc<str>,
    limit: usize,
}

impl<S> tower::Layer<S> for ResponseLimitLayer {
    type Service = ResponseLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ResponseLimit {
            inner,
            server: self.server.clone(),
            limit: self.limit,
        }
    }
}

/// The service produced by [`ResponseLimitLayer`].
#[derive(Clone)]
pub struct ResponseLimit<S> {
    inner: S,
    server: Arc<str>,
    limit: usize,
}

impl<S, ReqBody, B> tower::Service<http::Request<ReqBody>> for ResponseLimit<S>
where
    S: tower::Service<
            http::Request<ReqBody>,
            Response = http::Response<B>,
            Error = tower::BoxError,
        >,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = hyper::body::Bytes> + Unpin + Send + 'static,
    B::Error: Into<tower::BoxError>,
{
    type Response = http::Response<CappedBody<B>>;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let watch = request
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let (server, limit) = (self.server.clone(), self.limit);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if response.status().is_redirection() {
                let location = response
                    .headers()
                    .get(http::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map_or("nowhere".to_string(), |l| {
                        crate::terminal::safe(l, crate::terminal::CELL_CHARS)
                    });
                return Err(Box::new(ServerRedirected {
                    server: server.to_string(),
                    code: response.status().as_u16(),
                    location,
                }) as tower::BoxError);
            }
            Ok(response.map(|body| CappedBody {
                inner: body,
                server,
                limit,
                watch,
                counted: 0,
            }))
        })
    }
}

/// A response body that fails with [`ResponseTooLarge`] once more than `limit` bytes arrived
/// (for a watch: since the last newline).
pub struct CappedBody<B> {
    inner: B,
    server: Arc<str>,
    limit: usize,
    watch: bool,
    counted: usize,
}

impl<B> hyper::body::Body for CappedBody<B>
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Unpin,
    B::Error: Into<tower::BoxError>,
{
    type Data = hyper::body::Bytes;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<hyper::body::Bytes>, tower::BoxError>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref() {
            self.counted = match data.iter().rposition(|b| *b == b'\n') {
                Some(newline) if self.watch => data.len() - newline - 1,
                _ => self.counted.saturating_add(data.len()),
            };
            if self.counted > self.limit {
                let too_large = ResponseTooLarge {
                    server: self.server.to_string(),
                    what: if self.watch {
                        "a watch event"
                    } else {
                        "a response"
                    },
                    limit: self.limit,
                };
                return Poll::Ready(Some(Err(Box::new(too_large))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Where the credentials came from, for error messages and the audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// Kubeconfig files in merge order.
    Kubeconfig(Vec<PathBuf>),
    /// The pod's service account.
    InCluster,
}

impl std::fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialSource::Kubeconfig(paths) => {
                let joined: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                write!(f, "kubeconfig {}", joined.join(":"))
            }
            CredentialSource::InCluster => f.write_str("in-cluster service account"),
        }
    }
}

/// A rate-limited client plus what we know about where it points.
#[derive(Clone)]
pub struct Cluster {
    pub client: kube::Client,
    /// kubeconfig current-context, or [`IN_CLUSTER_CONTEXT`].
    pub context: String,
    /// The API server URL, for error messages.
    pub server_url: String,
    pub source: CredentialSource,
    /// `via proxy <url without userinfo> from <setting>` when requests go through a proxy.
    pub proxy: Option<String>,
    /// The namespace of the pod virtwork runs in, when it uses the in-cluster service account
    /// (cleanup never deletes it).
    pub home_namespace: Option<String>,
    /// The shared admission gate (request counts for reports and benchmarks).
    pub gate: Arc<RequestGate>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("context", &self.context)
            .field("server_url", &self.server_url)
            .field("source", &self.source)
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// "server <url> (<source>)": appended to connection errors so users know which
    /// cluster and which credentials were used.
    pub fn describe(&self) -> String {
        match &self.proxy {
            Some(proxy) => format!("API server {} ({}, {proxy})", self.server_url, self.source),
            None => format!("API server {} ({})", self.server_url, self.source),
        }
    }
}

/// Connects with the `kubeconfig` paths, or in-cluster when none are given and the pod
/// environment is present, or `~/.kube/config`; every request passes `limit`.
/// `context` picks a kubeconfig context instead of the current one (`--context`).
pub async fn connect_from_env(
    kubeconfig: &[PathBuf],
    context: Option<&str>,
    limit: RateLimit,
) -> Result<Cluster> {
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    connect_with_context(kubeconfig, context, in_cluster, limit).await
}

/// Which credentials a command uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialChoice {
    /// These kubeconfig files, merged in order.
    Kubeconfig(Vec<PathBuf>),
    /// The pod's service account.
    InCluster,
}

/// Decides where credentials come from, in client-go/kubectl order: kubeconfig files given
/// explicitly (`--kubeconfig`, `KUBECONFIG`) win; then `~/.kube/config` when it exists; the
/// in-cluster service account is only the fallback, so a user who runs virtwork inside a pod
/// (a toolbox, a CI runner) with their own kubeconfig is not silently switched to the pod's
/// identity. `home_kubeconfig` is `~/.kube/config` and whether it exists (None without HOME).
pub fn choose_credentials(
    explicit: &[PathBuf],
    home_kubeconfig: Option<(PathBuf, bool)>,
    in_cluster: bool,
) -> Result<CredentialChoice> {
    if !explicit.is_empty() {
        return Ok(CredentialChoice::Kubeconfig(explicit.to_vec()));
    }
    const NONE: &str = "no kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or run in a pod with a service account";
    match home_kubeconfig {
        Some((path, true)) => Ok(CredentialChoice::Kubeconfig(vec![path])),
        _ if in_cluster => Ok(CredentialChoice::InCluster),
        // The first thing a new user meets: say what was looked for, not a read error.
        Some((path, false)) => Err(Error::input(format!(
            "{NONE} (there is no {})",
            path.display()
        ))),
        None => Err(Error::input(NONE)),
    }
}

/// Builds the client (no API call is made). Credentials are chosen by [`choose_credentials`]
/// from `kubeconfig` (files merged in order as kubectl merges a `KUBECONFIG` list: first file
/// to set a value wins; files that do not exist are skipped unless none exists; the merged
/// `current-context` is used), `~/.kube/config`, and `in_cluster` (the pod environment is
/// present; context [`IN_CLUSTER_CONTEXT`]).
pub async fn connect(
    kubeconfig: &[PathBuf],
    in_cluster: bool,
    limit: RateLimit,
) -> Result<Cluster> {
    connect_with_context(kubeconfig, None, in_cluster, limit).await
}

/// [`connect`] with the kubeconfig context `context` instead of the current one.
pub async fn connect_with_context(
    kubeconfig: &[PathBuf],
    context: Option<&str>,
    in_cluster: bool,
    limit: RateLimit,
) -> Result<Cluster> {
    let gate = RequestGate::new(limit)?;
    let proxy_env = ProxyEnv::from_process();
    let Credentials {
        config: mut kube_config,
        context,
        source,
        kubeconfig_proxy,
        home_namespace,
    } = load_credentials(kubeconfig, context, in_cluster, &proxy_env).await?;
    // Retries are ours (deadline-, cancellation- and AlreadyExists-aware).
    kube_config.default_retry = false;
    let plugin = kube_config.auth_info.exec.as_mut().map(|exec| {
        exec.interactive_mode = Some(exec_interactive_mode(
            exec.interactive_mode.clone(),
            std::io::stdin().is_terminal(),
        ));
        exec.command.clone().unwrap_or_default()
    });
    // kube reads HTTPS_PROXY itself but not HTTP_PROXY, and checks NO_PROXY against the proxy
    // instead of the server; the choice is made here the way kubectl makes it.
    let proxy = choose_proxy(
        &kube_config.cluster_url,
        kubeconfig_proxy.as_deref(),
        &proxy_env,
    )
    .map_err(|e| Error::input(format!("{e} ({source})")))?;
    kube_config.proxy_url = proxy.as_ref().map(|p| p.uri.clone());
    let server_url = kube_config.cluster_url.to_string();
    check_static_token(&kube_config, &source, &context)?;
    if kube_config.accept_invalid_certs {
        warn_insecure_once(&server_url, &source);
    }
    let builder = kube::client::ClientBuilder::try_from(kube_config).map_err(|e| {
        let context = format!("building a client for {server_url} ({source})");
        match credential_plugin_failure(&e, plugin.as_deref()) {
            Some(failure) => Error::runtime(format!("{context}: {failure}")),
            None => Error::kube(context, e),
        }
    })?;
    let client = builder
        .with_layer(&ResponseLimitLayer {
            server: server_url.trim_end_matches('/').into(),
            limit: MAX_RESPONSE_BYTES,
        })
        .with_layer(&RedactPluginOutputLayer { plugin })
        .with_layer(&ResponseTimeoutLayer {
            timeout: ATTEMPT_TIMEOUT,
        })
        .with_layer(&RateLimitLayer::new(gate.clone()))
        .build();
    Ok(Cluster {
        client,
        context,
        server_url: server_url.trim_end_matches('/').to_string(),
        source,
        proxy: proxy.map(|p| p.to_string()),
        home_namespace,
        gate,
    })
}

/// Refuses a kubeconfig token that cannot be sent as an HTTP header (a control character, a
/// line break): the client library would panic building the header. Exit 2: the kubeconfig
/// is input, and nothing was sent.
fn check_static_token(
    config: &kube::Config,
    source: &CredentialSource,
    context: &str,
) -> Result<()> {
    use secrecy::ExposeSecret;
    let Some(token) = &config.auth_info.token else {
        return Ok(());
    };
    if http::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())).is_err() {
        return Err(Error::input(format!(
            "the token of the user of context {context:?} in {source} holds a control character \
             or line break, which an HTTP header cannot carry: copy the token again (it is not \
             shown here)"
        )));
    }
    Ok(())
}

/// Says once per process, on stderr, that the server's certificate is not checked: with
/// `insecure-skip-tls-verify: true` anyone between us and the server can read the token.
fn warn_insecure_once(server: &str, source: &CredentialSource) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        crate::terminal::to_stderr(&format!(
            "Warning: {source} sets insecure-skip-tls-verify: true for {server}: the server's \
             certificate is not verified, so anyone on the network path can impersonate it and \
             read the credentials; set certificate-authority-data instead\n"
        ));
    });
}

/// What [`load_credentials`] found.
struct Credentials {
    config: kube::Config,
    context: String,
    source: CredentialSource,
    /// The current cluster's `proxy-url` in the kubeconfig.
    kubeconfig_proxy: Option<String>,
    /// The pod's namespace, when in-cluster.
    home_namespace: Option<String>,
}

/// Chooses and loads the credentials (see [`choose_credentials`]); no client is built and no
/// API call made. A bad proxy setting is reported here, naming the setting.
async fn load_credentials(
    kubeconfig: &[PathBuf],
    wanted_context: Option<&str>,
    in_cluster: bool,
    proxy_env: &ProxyEnv,
) -> Result<Credentials> {
    let home_kubeconfig = default_kubeconfig_path().map(|p| {
        let exists = p.exists();
        (p, exists)
    });
    let choice = choose_credentials(kubeconfig, home_kubeconfig, in_cluster)?;
    let mut kubeconfig_proxy = None;
    let mut home_namespace = None;
    let (config, context, source) = match choice {
        CredentialChoice::InCluster if wanted_context.is_some() => {
            return Err(Error::input(
                "--context names a kubeconfig context, but no kubeconfig was found (in-cluster credentials have none): pass --kubeconfig <path> or set KUBECONFIG",
            ));
        }
        CredentialChoice::InCluster => {
            let config = kube::Config::incluster().map_err(|e| {
                Error::runtime(format!(
                    "loading the in-cluster service account configuration: {e}"
                ))
            })?;
            home_namespace = Some(config.default_namespace.clone());
            (
                config,
                IN_CLUSTER_CONTEXT.to_string(),
                CredentialSource::InCluster,
            )
        }
        CredentialChoice::Kubeconfig(paths) => {
            let (mut merged, used) = read_merged_kubeconfig(&paths)?;
            let source = CredentialSource::Kubeconfig(used);
            if let Some(wanted) = wanted_context {
                choose_context(&mut merged, wanted, &source)?;
            }
            let context = merged.current_context.clone().ok_or_else(|| {
                Error::input(format!(
                    "{source} has no current-context: set one with `kubectl config use-context <name>`"
                ))
            })?;
            let cluster = current_cluster(&merged);
            kubeconfig_proxy = cluster.and_then(|c| c.proxy_url.clone());
            // kube's loader parses the proxy settings too, with less helpful messages:
            // report a bad value first, naming the setting.
            if let Some(server) = cluster
                .and_then(|c| c.server.as_deref())
                .and_then(|s| s.parse::<http::Uri>().ok())
            {
                choose_proxy(&server, kubeconfig_proxy.as_deref(), proxy_env)
                    .map_err(|e| Error::input(format!("{e} ({source})")))?;
            }
            let config =
                kube::Config::from_custom_kubeconfig(merged, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| match e {
                        kube::config::KubeconfigError::ParseNoProxy(cause) => {
                            Error::input(format!(
                                "NO_PROXY/no_proxy: {cause}; the Kubernetes client rejects empty \
                                 or malformed entries (e.g. a trailing comma): remove them"
                            ))
                        }
                        other => Error::input(format!("{source} (context {context}): {other}")),
                    })?;
            (config, context, source)
        }
    };
    Ok(Credentials {
        config,
        context,
        source,
        kubeconfig_proxy,
        home_namespace,
    })
}

/// Loads the credentials and server of a command (no client is built, no API call made):
/// the same choice as [`connect`]. verify reuses the credentials for a Prometheus URL.
pub async fn load_kube_config(
    kubeconfig: &[PathBuf],
    context: Option<&str>,
    in_cluster: bool,
) -> Result<(kube::Config, String, CredentialSource)> {
    let loaded =
        load_credentials(kubeconfig, context, in_cluster, &ProxyEnv::from_process()).await?;
    Ok((loaded.config, loaded.context, loaded.source))
}

/// Makes `wanted` the merged kubeconfig's current context, as `kubectl --context` does; a
/// context the files do not define is refused, naming the ones they do.
fn choose_context(merged: &mut Kubeconfig, wanted: &str, source: &CredentialSource) -> Result<()> {
    if !merged.contexts.iter().any(|c| c.name == wanted) {
        let known: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
        return Err(Error::input(format!(
            "--context {wanted:?}: no such context in {source}; it defines: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    merged.current_context = Some(wanted.to_string());
    Ok(())
}

/// The cluster the merged kubeconfig's current context uses.
fn current_cluster(kubeconfig: &Kubeconfig) -> Option<&kube::config::Cluster> {
    let name = kubeconfig.current_context.as_ref()?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| &c.name == name)?
        .context
        .as_ref()?;
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)?
        .cluster
        .as_ref()
}

/// `~/.kube/config`, or None without HOME.
fn default_kubeconfig_path() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| Path::new(&home).join(".kube").join("config"))
}

/// Reads and merges kubeconfig files in order; returns the merged config and the files
/// actually read. Missing files are skipped as kubectl does, unless none exists.
pub fn read_merged_kubeconfig(paths: &[PathBuf]) -> Result<(Kubeconfig, Vec<PathBuf>)> {
    let mut merged: Option<Kubeconfig> = None;
    let mut used = Vec::new();
    for path in paths {
        if path.as_os_str().is_empty() {
            continue;
        }
        // Missing files are skipped as kubectl skips them; none at all is said below.
        if !path.exists() {
            continue;
        }
        let next = Kubeconfig::read_from(path).map_err(|e| {
            Error::input(format!(
                "reading kubeconfig {}: {e} (expected a kubeconfig YAML file; check --kubeconfig or KUBECONFIG)",
                path.display()
            ))
        })?;
        merged = Some(match merged {
            None => next,
            Some(acc) => acc
                .merge(next)
                .map_err(|e| Error::input(format!("merging kubeconfig {}: {e}", path.display())))?,
        });
        used.push(path.clone());
    }
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let merged = merged.ok_or_else(|| {
        Error::input(format!(
            "no kubeconfig file found at {}: check --kubeconfig or KUBECONFIG",
            shown.join(":")
        ))
    })?;
    Ok((merged, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const FIRST: &str = "apiVersion: v1\nkind: Config\ncurrent-context: one\nclusters:\n- name: c1\n  cluster:\n    server: https://one.example:6443\ncontexts:\n- name: one\n  context:\n    cluster: c1\n    user: u1\nusers:\n- name: u1\n  user:\n    token: abc\n";
    const SECOND: &str = "apiVersion: v1\nkind: Config\ncurrent-context: two\nclusters:\n- name: c2\n  cluster:\n    server: https://two.example:6443\ncontexts:\n- name: two\n  context:\n    cluster: c2\n    user: u2\nusers:\n- name: u2\n  user:\n    token: def\n";

    #[test]
    fn merged_kubeconfig_keeps_first_current_context_and_all_entries() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", FIRST);
        let b = write(dir.path(), "b", SECOND);
        let (merged, used) = read_merged_kubeconfig(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("one"));
        assert_eq!(merged.contexts.len(), 2);
        assert_eq!(merged.clusters.len(), 2);
        assert_eq!(used, vec![a, b]);
    }

    #[test]
    fn missing_files_in_a_list_are_skipped_but_a_lone_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let b = write(dir.path(), "b", SECOND);
        let missing = dir.path().join("absent");
        let (merged, used) = read_merged_kubeconfig(&[missing.clone(), b.clone()]).unwrap();
        assert_eq!(merged.current_context.as_deref(), Some("two"));
        assert_eq!(used, vec![b]);
        let err = read_merged_kubeconfig(std::slice::from_ref(&missing)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("absent"), "{err}");
    }

    #[test]
    fn unparseable_kubeconfig_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(dir.path(), "bad", "clusters: [ {");
        let err = read_merged_kubeconfig(&[bad]).unwrap_err();
        assert!(err.to_string().contains("bad"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }

    #[tokio::test]
    async fn connect_reports_context_and_server_without_contacting_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", FIRST);
        let limit = RateLimit {
            qps: 50.0,
            burst: 100,
        };
        let cluster = connect(&[a], false, limit).await.unwrap();
        assert_eq!(cluster.context, "one");
        assert_eq!(cluster.server_url, "https://one.example:6443");
        assert_eq!(cluster.gate.requests_sent(), 0);
    }

    #[test]
    fn explicit_files_then_home_kubeconfig_then_in_cluster() {
        let home = PathBuf::from("/home/u/.kube/config");
        let given = vec![PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")];
        for in_cluster in [false, true] {
            for home_state in [
                None,
                Some((home.clone(), true)),
                Some((home.clone(), false)),
            ] {
                assert_eq!(
                    choose_credentials(&given, home_state, in_cluster).unwrap(),
                    CredentialChoice::Kubeconfig(given.clone()),
                    "explicit files always win"
                );
            }
            assert_eq!(
                choose_credentials(&[], Some((home.clone(), true)), in_cluster).unwrap(),
                CredentialChoice::Kubeconfig(vec![home.clone()]),
                "an existing ~/.kube/config wins over the service account"
            );
        }
        assert_eq!(
            choose_credentials(&[], Some((home.clone(), false)), true).unwrap(),
            CredentialChoice::InCluster
        );
        assert_eq!(
            choose_credentials(&[], None, true).unwrap(),
            CredentialChoice::InCluster
        );
        let missing = choose_credentials(&[], Some((home.clone(), false)), false).unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        assert_eq!(
            missing.to_string(),
            format!(
                "no kubeconfig: pass --kubeconfig <path>, set KUBECONFIG, or run in a pod with \
                 a service account (there is no {})",
                home.display()
            )
        );
        let none = choose_credentials(&[], None, false).unwrap_err();
        assert_eq!(none.exit_code(), 2);
        assert!(none.to_string().contains("no kubeconfig"), "{none}");
    }

    #[test]
    fn exec_plugins_are_interactive_only_with_a_terminal_or_when_they_insist() {
        use ExecInteractiveMode::*;
        for (configured, terminal, expected) in [
            (None, false, Never),
            (Some(IfAvailable), false, Never),
            (None, true, IfAvailable),
            (Some(IfAvailable), true, IfAvailable),
            (Some(Always), false, Always),
            (Some(Never), true, Never),
        ] {
            assert_eq!(
                exec_interactive_mode(configured.clone(), terminal),
                expected,
                "{configured:?} terminal={terminal}"
            );
        }
    }

    #[test]
    fn a_failed_plugin_is_described_without_its_output() {
        use std::os::unix::process::ExitStatusExt;
        let failed = kube::Error::Auth(kube::client::AuthError::AuthExecRun {
            cmd: "\"get-token\" \"--password=hunter2\"".into(),
            out: Box::new(std::process::Output {
                status: std::process::ExitStatus::from_raw(3 << 8),
                stdout: b"token-from-stdout".to_vec(),
                stderr: b"token-from-stderr".to_vec(),
            }),
        });
        let text = credential_plugin_failure(&failed, Some("/usr/bin/get-token"))
            .unwrap()
            .to_string();
        assert!(text.contains("\"/usr/bin/get-token\""), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
        for secret in ["token-from", "hunter2"] {
            assert!(!text.contains(secret), "{text}");
        }
        // Behind a service error, as the request path sees it.
        let wrapped = kube::Error::Service(Box::new(
            credential_plugin_failure(&failed, Some("get-token")).unwrap(),
        ));
        assert!(find_plugin_failure(&wrapped).is_some());
        // Other errors are left alone.
        let other = kube::Error::Auth(kube::client::AuthError::MissingCommand);
        assert!(credential_plugin_failure(&other, None).is_none());
    }

    #[test]
    fn invalid_rate_limits_are_input_errors() {
        for (qps, burst) in [(0.0, 10), (-1.0, 10), (f64::NAN, 10), (5.0, 0)] {
            let err = RequestGate::new(RateLimit { qps, burst }).unwrap_err();
            assert_eq!(err.exit_code(), 2, "qps {qps} burst {burst}");
        }
    }

    #[tokio::test]
    async fn gate_admits_the_burst_at_once_then_paces_at_qps() {
        let gate = RequestGate::new(RateLimit {
            qps: 1000.0,
            burst: 5,
        })
        .unwrap();
        for _ in 0..5 {
            // Within the burst no wait happens: each admission completes on first poll.
            assert!(futures::FutureExt::now_or_never(gate.admit()).is_some());
        }
        assert!(futures::FutureExt::now_or_never(gate.admit()).is_none());
        gate.admit().await.unwrap();
        assert_eq!(gate.requests_sent(), 6);
    }

    #[tokio::test]
    async fn a_stopped_gate_refuses_waiting_requests_and_sends_nothing_more() {
        let gate = RequestGate::new(RateLimit { qps: 0.1, burst: 1 }).unwrap();
        let stop = CancellationToken::new();
        gate.stop_when(&stop);
        gate.admit().await.unwrap();
        // The next token is 10 s away: the waiting request is refused as soon as stop fires.
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.admit().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        stop.cancel();
        let refused = tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("refused promptly")
            .unwrap();
        assert!(refused.is_err());
        assert!(gate.admit().await.is_err());
        assert_eq!(gate.requests_sent(), 1);
    }

    #[tokio::test]
    async fn server_pause_holds_admissions() {
        let gate = RequestGate::new(RateLimit {
            qps: 1000.0,
            burst: 100,
        })
        .unwrap();
        gate.pause_for(Duration::from_secs(30));
        assert!(futures::FutureExt::now_or_never(gate.admit()).is_none());
        assert_eq!(gate.requests_sent(), 0);
    }

    fn capped(chunks: &[&'static str], watch: bool, limit: usize) -> Vec<Result<usize, String>> {
        use http_body_util::BodyExt;
        let frames: Vec<Result<hyper::body::Frame<hyper::body::Bytes>, std::convert::Infallible>> =
            chunks
                .iter()
                .map(|c| {
                    Ok(hyper::body::Frame::data(hyper::body::Bytes::from_static(
                        c.as_bytes(),
                    )))
                })
                .collect();
        let mut body = CappedBody {
            inner: http_body_util::StreamBody::new(futures::stream::iter(frames)),
            server: "https://api.example:6443".into(),
            limit,
            watch,
            counted: 0,
        };
        let mut seen = Vec::new();
        futures::executor::block_on(async {
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => seen.push(Ok(frame.into_data().unwrap().len())),
                    Err(error) => {
                        seen.push(Err(error.to_string()));
                        break;
                    }
                }
            }
        });
        seen
    }

    #[test]
    fn a_body_over_the_cap_fails_naming_the_server_and_a_watch_is_capped_per_event() {
        assert_eq!(capped(&["12345", "678"], false, 8), [Ok(5), Ok(3)]);
        let over = capped(&["12345", "6789"], false, 8);
        assert_eq!(over[0], Ok(5));
        assert!(
            over[1].as_ref().unwrap_err().starts_with(
                "the API server https://api.example:6443 sent a response larger than 0 MiB"
            ),
            "{over:?}"
        );
        // A watch may stream forever; each event (line) is bounded, not the stream.
        let events = capped(&["12345\n", "1234567\n12", "345678\n"], true, 8);
        assert_eq!(events, [Ok(6), Ok(10), Ok(7)]);
        let long_event = capped(&["1234\n123", "456789"], true, 8);
        assert!(
            long_event[1]
                .as_ref()
                .unwrap_err()
                .contains("a watch event larger")
        );
    }

    #[test]
    fn retry_after_seconds_parse() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
