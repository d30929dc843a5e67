//! Fault injection knobs (latency with jitter, seeded random failures before or after the
//! write commits, dropped connections, an APF-style in-flight limit, short watch streams,
//! RBAC denials or a whole RBAC policy, scripted one-shot faults) and the deterministic generator
//! that drives them.

use std::time::Duration;

use super::authz::Authorizer;

/// What happens to a mutating request whose write has been committed but whose response is
/// sabotaged (the client never sees the success).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCommit {
    /// Answer with this error code (a Status body) although the write persisted.
    Status(u16),
    /// Close the connection without any response.
    Drop,
}

impl Default for AfterCommit {
    fn default() -> Self {
        AfterCommit::Status(500)
    }
}

/// One RBAC denial: `verb` on `resource` (plural, e.g. `virtualmachines`), optionally only
/// in one namespace. `"*"` matches any verb or resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub verb: String,
    pub resource: String,
    pub namespace: Option<String>,
}

impl Denial {
    pub fn new(verb: &str, resource: &str) -> Self {
        Denial {
            verb: verb.into(),
            resource: resource.into(),
            namespace: None,
        }
    }
    pub fn in_namespace(mut self, ns: &str) -> Self {
        self.namespace = Some(ns.into());
        self
    }
    pub fn matches(&self, verb: &str, resource: &str, namespace: &str) -> bool {
        (self.verb == "*" || self.verb == verb)
            && (self.resource == "*" || self.resource == resource)
            && self.namespace.as_deref().is_none_or(|n| n == namespace)
    }
}

/// A fault applied to the next `times` requests matching verb/resource/name.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedFault {
    /// Kubernetes verb (`create`, `get`, `list`, `watch`, `update`, `patch`, `delete`,
    /// `deletecollection`); None = any.
    pub verb: Option<String>,
    /// Resource plural; None = any.
    pub resource: Option<String>,
    /// Object name; None = any.
    pub name: Option<String>,
    pub times: u32,
    pub action: FaultAction,
}

impl ScriptedFault {
    pub fn new(verb: &str, resource: &str, action: FaultAction) -> Self {
        ScriptedFault {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            name: None,
            times: 1,
            action,
        }
    }
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }
    pub fn times(mut self, n: u32) -> Self {
        self.times = n;
        self
    }
    pub fn matches(&self, verb: &str, resource: &str, name: &str) -> bool {
        self.times > 0
            && self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.name.as_deref().is_none_or(|n| n == name)
    }
}

/// What a scripted fault does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultAction {
    /// Answer with this code before doing anything.
    Fail(u16),
    /// Perform the request, then answer with this code.
    FailAfterCommit(u16),
    /// Close the connection without a response before doing anything.
    Drop,
    /// Perform the request, then close the connection without a response.
    DropAfterCommit,
    /// Delay the request by this long.
    Delay(Duration),
    /// Answer 200 with headers, then never send a byte and never close: a silent connection
    /// (for a watch, a stream that stalls without the server ending it).
    Stall,
    /// Answer 200 with a JSON body of about this many bytes, streamed (a huge annotation on
    /// the object; for a watch, one ADDED event that long): a server that sends more than any
    /// client should hold.
    Oversized(usize),
    /// Refuse the request before doing anything with a Status of this code whose message is
    /// `message` repeated `times` times, as an admission webhook's denial reads.
    Deny {
        code: u16,
        message: &'static str,
        times: usize,
    },
}

/// Lists of `resource` (plural) never end: each page is served with a continue token, and a
/// request with such a token gets the first page again. `same_token`: always the same token
/// (a server stuck in a loop); otherwise a fresh one each time (a server that never ends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndlessList {
    pub resource: String,
    pub same_token: bool,
}

/// All fault knobs; `Faults::default()` is a well-behaved server.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Added to every request (not to watch events).
    pub latency: Duration,
    /// Uniform extra latency in [0, jitter).
    pub jitter: Duration,
    /// Added after a request is executed (a write already committed), before its answer:
    /// a slow way back, where a client that gives up loses the news of its own write.
    pub response_latency: Duration,
    /// Fraction (0..=1) of mutating requests that fail before the write.
    pub error_rate: f64,
    /// Codes for `error_rate` failures, picked uniformly; empty = [500].
    pub error_codes: Vec<u16>,
    /// Fraction (0..=1) of mutating requests that commit and then fail per `after_commit`.
    pub after_commit_rate: f64,
    pub after_commit: AfterCommit,
    /// Fraction (0..=1) of all non-watch requests dropped without a response.
    pub drop_rate: f64,
    /// Max concurrent non-watch requests; beyond it 429 with Retry-After (like APF).
    pub max_inflight: Option<usize>,
    /// Retry-After seconds of 429 answers (default 1 when 0).
    pub retry_after_secs: u64,
    /// Watch streams end after this long (like a load balancer idle timeout).
    pub watch_max_duration: Option<Duration>,
    pub denials: Vec<Denial>,
    /// An RBAC policy deciding every resource request and access review (None = allow all
    /// but `denials`); see `authz`.
    pub authorizer: Option<Authorizer>,
    /// One-shot faults, consumed in order of the list.
    pub scripted: Vec<ScriptedFault>,
    /// Lists of one resource never end: every page carries a continue token.
    pub endless_list: Option<EndlessList>,
    /// API groups whose discovery document (`/apis/<group>/<version>`) answers 503, like an
    /// aggregated API (metrics-server, say) whose backing service is down.
    pub unavailable_groups: Vec<String>,
    /// Seed of the random draws, so a failing run can be replayed.
    pub seed: u64,
}

/// SplitMix64: tiny, seedable, good enough for fault draws.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}
