//! A stand-in for a Prometheus HTTP API endpoint (or a route in front of one), for testing
//! how verify reaches it: an HTTP or HTTPS server on 127.0.0.1 that records the path and
//! `Authorization` header of every request and answers with a fixed [`Answer`] (or one that
//! never ends). HTTPS uses a fresh CA from `apiserver::tls` (its PEM in [`PromStub::ca_pem`]),
//! so a test decides whether the client trusts it. Runs on its own tokio runtime; dropping
//! the handle stops it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::{Request, Response};

/// What the stub answers to every request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200 with this JSON body.
    Json(String),
    /// 200 with a body that starts like a Prometheus answer and never ends.
    Endless,
    /// 200 with the body of the first rule whose text occurs in the (percent-decoded)
    /// request, else `otherwise`.
    ByQuery {
        rules: Vec<(String, String)>,
        otherwise: String,
    },
}

/// One request as the stub saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub path_and_query: String,
    pub authorization: Option<String>,
}

pub struct PromStub {
    url: String,
    ca_pem: Option<String>,
    seen: Arc<Mutex<Vec<Seen>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

/// An answer holding one sample of value 1: a probe's `vector(1)` or a present signal.
pub const ONE_SAMPLE: &str = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#;

type StubBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// `text` with every `%XX` turned back into its byte.
pub fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn respond(answer: &Answer, path_and_query: &str) -> Response<StubBody> {
    let full = |text: &str| http_body_util::Full::new(Bytes::from(text.to_string())).boxed();
    let body = match answer {
        Answer::Json(text) => full(text),
        Answer::ByQuery { rules, otherwise } => {
            let request = percent_decoded(path_and_query);
            let rule = rules
                .iter()
                .find(|(needle, _)| request.contains(needle.as_str()));
            full(rule.map_or(otherwise.as_str(), |(_, body)| body.as_str()))
        }
        Answer::Endless => {
            let head = futures::stream::once(async {
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(
                    br#"{"status":"success","data":{"resultType":"vector","result":["#,
                )))
            });
            let chunk = Bytes::from(vec![b' '; 64 * 1024]);
            let rest = futures::stream::repeat_with(move || Ok(Frame::data(chunk.clone())));
            StreamBody::new(futures::StreamExt::chain(head, rest)).boxed()
        }
    };
    Response::builder()
        .status(200)
        .header("Content-Type", "application/json")
        .body(body)
        .unwrap()
}

impl PromStub {
    /// Starts serving `answer` over HTTP, or HTTPS with a fresh CA when `tls`.
    pub fn start(answer: Answer, tls: bool) -> PromStub {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let material = tls.then(super::apiserver::tls::generate);
        let ca_pem = material.as_ref().map(|m| m.ca_pem.clone());
        let acceptor = material.map(|m| m.acceptor);
        let url = format!("{}://{addr}", if tls { "https" } else { "http" });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let log = seen.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (log, answer, acceptor) = (log.clone(), answer.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<_>| {
                        let path_and_query = req
                            .uri()
                            .path_and_query()
                            .map(|p| p.to_string())
                            .unwrap_or_default();
                        let response = respond(&answer, &path_and_query);
                        log.lock().unwrap().push(Seen {
                            path_and_query,
                            authorization: req
                                .headers()
                                .get("authorization")
                                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
                        });
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                let io = hyper_util::rt::TokioIo::new(stream);
                                let _ = http.serve_connection(io, service).await;
                            }
                        }
                        None => {
                            let io = hyper_util::rt::TokioIo::new(tcp);
                            let _ = http.serve_connection(io, service).await;
                        }
                    }
                });
            }
        });
        PromStub {
            url,
            ca_pem,
            seen,
            runtime: Some(runtime),
        }
    }

    /// `http://127.0.0.1:<port>` or `https://...`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `127.0.0.1:<port>`, as a Route's `spec.host` would name it.
    pub fn host(&self) -> &str {
        self.url.split("://").nth(1).unwrap()
    }

    /// PEM of the CA that signed the stub's certificate (HTTPS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The distinct `Authorization` headers seen (None for a request without one).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        let mut all: Vec<Option<String>> = self
            .requests()
            .into_iter()
            .map(|s| s.authorization)
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

impl Drop for PromStub {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
