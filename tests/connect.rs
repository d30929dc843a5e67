//! Reaching the cluster, through the real binary: which credentials win, proxies, bounded
//! requests against a server that never answers, and credential plugins whose output must
//! never be shown. Cluster-facing behaviour runs against the fake API server over real HTTP.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{FakeApiServer, FaultAction, Options, ScriptedFault};

const NS: &str = "virtwork";

/// The namespace a run would have made: `status` says when a namespace does not exist.
fn with_namespace(server: &FakeApiServer) {
    server.insert(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}
    }));
}

/// A scratch HOME with an audit DB path; every run starts from an empty environment.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn db(&self) -> PathBuf {
        self.home().join("audit.db")
    }

    /// Writes `text` to `~/.kube/config`.
    fn home_kubeconfig(&self, text: &str) -> PathBuf {
        let dir = self.home().join(".kube");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .envs(env.iter().copied())
            .arg("--audit-db")
            .arg(self.db())
            .args(args)
            .current_dir(self.home())
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------------------------
// Credential precedence
// ---------------------------------------------------------------------------------------------

#[test]
fn an_existing_home_kubeconfig_wins_over_the_in_cluster_service_account() {
    let server = FakeApiServer::start(Options::default());
    with_namespace(&server);
    let sandbox = Sandbox::new();
    sandbox.home_kubeconfig(&server.kubeconfig_yaml(None));
    let port = closed_port().to_string();
    // The pod environment points elsewhere: using it would fail.
    let in_cluster = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
    ];
    let out = sandbox.run(&["--namespace", NS, "status"], &in_cluster);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("No virtwork runs"),
        "{}",
        stdout(&out)
    );
    assert!(server.count("list", "virtualmachines") >= 1);

    // The audit records the kubeconfig's context, not "in-cluster".
    let run = sandbox.run(&["--namespace", NS, "cleanup", "--dry-run"], &in_cluster);
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let context: String = conn
        .query_row("SELECT cluster_context FROM audit_log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(context, "fake");
}

#[test]
fn the_in_cluster_service_account_is_the_fallback_without_any_kubeconfig() {
    let sandbox = Sandbox::new();
    let port = closed_port().to_string();
    let out = sandbox.run(
        &["--namespace", NS, "status"],
        &[
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", port.as_str()),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("in-cluster"), "{}", stderr(&out));

    // Without the pod environment the missing ~/.kube/config is named.
    let out = sandbox.run(&["--namespace", NS, "status"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(".kube/config"), "{}", stderr(&out));
}

// ---------------------------------------------------------------------------------------------
// Exec credential plugins: their output can hold a token and is never shown
// ---------------------------------------------------------------------------------------------

const LEAK_STDOUT: &str = "LEAKED-STDOUT-TOKEN-1234";
const LEAK_STDERR: &str = "LEAKED-STDERR-TOKEN-5678";

/// A kubeconfig for `server` whose user runs `plugin` as an exec credential plugin.
fn exec_kubeconfig(server: &FakeApiServer, plugin: &Path) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server.url()}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "users": [{"name": "fake", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": plugin.to_str().unwrap(),
            "args": ["--profile", "ci"],
            "interactiveMode": "IfAvailable",
        }}}],
    });
    serde_yaml::to_string(&doc).unwrap()
}

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn assert_no_plugin_output(what: &str, text: &str) {
    assert!(
        !text.contains(LEAK_STDOUT) && !text.contains(LEAK_STDERR),
        "{what} shows the plugin's output: {text}"
    );
}

#[test]
fn a_failing_credential_plugin_is_named_but_its_output_never_shown() {
    let server = FakeApiServer::start(Options::default());
    let sandbox = Sandbox::new();
    let plugin = sandbox.home().join("get-token");
    script(
        &plugin,
        &format!("echo {LEAK_STDOUT}\necho {LEAK_STDERR} >&2\nexit 1\n"),
    );
    let kubeconfig = sandbox.home().join("kubeconfig");
    std::fs::write(&kubeconfig, exec_kubeconfig(&server, &plugin)).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    for args in [
        vec!["--output", "json", "run", "--workloads", "cpu"],
        vec!["--output", "json", "cleanup", "--yes"],
        vec!["--output", "json", "status"],
    ] {
        let mut full = vec!["--kubeconfig", kubeconfig, "--namespace", NS];
        full.extend(&args);
        let out = sandbox.run(&full, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_no_plugin_output("stderr", &stderr(&out));
        assert_no_plugin_output("stdout", &stdout(&out));
        let last = stderr(&out).lines().last().unwrap_or_default().to_string();
        assert!(
            last.contains(plugin.to_str().unwrap()) && last.contains("exit status: 1"),
            "{args:?}: {last}"
        );
    }
    assert_eq!(
        server.request_log().len(),
        0,
        "no request without credentials"
    );
}

#[test]
fn a_credential_plugin_failing_on_refresh_stays_out_of_json_and_the_audit() {
    let server = FakeApiServer::start(Options::default());
    let sandbox = Sandbox::new();
    let plugin = sandbox.home().join("get-token");
    // The first call hands out a token that is already expired, so the first request runs
    // the plugin again; from then on it fails, printing what could be a token.
    script(
        &plugin,
        &format!(
            r#"state="$(dirname "$0")/calls"
n=$(cat "$state" 2>/dev/null || echo 0)
echo $((n + 1)) > "$state"
if [ "$n" -eq 0 ]; then
  printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"first","expirationTimestamp":"2000-01-01T00:00:00Z"}}}}'
  exit 0
fi
echo {LEAK_STDOUT}
echo {LEAK_STDERR} >&2
exit 1
"#
        ),
    );
    let kubeconfig = sandbox.home().join("kubeconfig");
    std::fs::write(&kubeconfig, exec_kubeconfig(&server, &plugin)).unwrap();
    let out = sandbox.run(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--namespace",
            NS,
            "--output",
            "json",
            "run",
            "--workloads",
            "cpu",
            "--timeout",
            "30",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_no_plugin_output("stderr", &stderr(&out));
    assert_no_plugin_output("stdout", &stdout(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\n{}",
            stdout(&out),
            stderr(&out)
        )
    });
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.contains(plugin.to_str().unwrap()) && error.contains("exit status: 1"),
        "{error}"
    );
    let conn = rusqlite::Connection::open(sandbox.db()).unwrap();
    let summary: String = conn
        .query_row("SELECT error_summary FROM audit_log", [], |r| r.get(0))
        .unwrap();
    assert_no_plugin_output("the audit error_summary", &summary);
    assert!(summary.contains(plugin.to_str().unwrap()), "{summary}");
}

// ---------------------------------------------------------------------------------------------
// Proxies: HTTPS_PROXY / HTTP_PROXY / NO_PROXY as kubectl reads them, and kubeconfig proxy-url
// ---------------------------------------------------------------------------------------------

use support::proxy::CountingProxy;

/// A host name only the test proxy can reach (`.invalid` never resolves).
const PROXIED_HOST: &str = "apiserver.virtwork.invalid";

fn server_addr(server: &FakeApiServer) -> std::net::SocketAddr {
    server.url().rsplit("://").next().unwrap().parse().unwrap()
}

/// `server`'s kubeconfig with the cluster URL's host replaced by `host` (TLS still verified:
/// `tls-server-name` names the certificate's `localhost`) and optionally a `proxy-url`.
fn kubeconfig_via(server: &FakeApiServer, host: &str, proxy_url: Option<&str>) -> String {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&server.kubeconfig_yaml(None)).unwrap();
    let cluster = &mut doc["clusters"][0]["cluster"];
    let port = server_addr(server).port();
    let scheme = if server.url().starts_with("https") {
        "https"
    } else {
        "http"
    };
    cluster["server"] = format!("{scheme}://{host}:{port}").into();
    if scheme == "https" {
        cluster["tls-server-name"] = "localhost".into();
    }
    if let Some(url) = proxy_url {
        cluster["proxy-url"] = url.into();
    }
    serde_yaml::to_string(&doc).unwrap()
}

fn basic(userinfo: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

#[test]
fn https_proxy_carries_every_request_and_no_proxy_bypasses_it() {
    let server = FakeApiServer::start(Options::secure());
    with_namespace(&server);
    let proxy = CountingProxy::start(server_addr(&server));
    let sandbox = Sandbox::new();
    let kubeconfig = sandbox.home().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_via(&server, PROXIED_HOST, None)).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let https_proxy = proxy.url().replace("http://", "http://alice:s3cret@");

    let out = sandbox.run(
        &["--kubeconfig", kubeconfig, "--namespace", NS, "status"],
        &[("HTTPS_PROXY", https_proxy.as_str())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = proxy.requests();
    assert!(!seen.is_empty(), "nothing went through the proxy");
    let port = server_addr(&server).port();
    for request in &seen {
        assert_eq!(request.method, "CONNECT");
        assert_eq!(request.target, format!("{PROXIED_HOST}:{port}"));
        assert_eq!(
            request.authorization.as_deref(),
            Some(basic("alice:s3cret").as_str())
        );
    }
    let served = server.count("list", "virtualmachines");
    assert!(served >= 1);

    // NO_PROXY naming the server's domain sends requests directly (and the made-up name
    // then fails to resolve): the proxy sees nothing more.
    let out = sandbox.run(
        &[
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NS,
            "run",
            "--workloads",
            "cpu",
            "--timeout",
            "5",
        ],
        &[
            ("HTTPS_PROXY", https_proxy.as_str()),
            ("NO_PROXY", "localhost,.virtwork.invalid"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(proxy.requests().len(), seen.len(), "NO_PROXY was ignored");
    assert!(!stderr(&out).contains("via proxy"), "{}", stderr(&out));

    // A loopback server is never proxied from the environment, as in kubectl.
    let direct = sandbox.home().join("direct");
    server.write_kubeconfig(&direct).unwrap();
    let out = sandbox.run(
        &[
            "--kubeconfig",
            direct.to_str().unwrap(),
            "--namespace",
            NS,
            "status",
        ],
        &[("https_proxy", https_proxy.as_str())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(proxy.requests().len(), seen.len());
}

#[test]
fn http_proxy_serves_an_http_server_and_kubeconfig_proxy_url_wins() {
    let server = FakeApiServer::start(Options::default());
    with_namespace(&server);
    let env_proxy = CountingProxy::start(server_addr(&server));
    let sandbox = Sandbox::new();
    let kubeconfig = sandbox.home().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_via(&server, PROXIED_HOST, None)).unwrap();
    let out = sandbox.run(
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--namespace",
            NS,
            "status",
        ],
        // HTTPS_PROXY does not apply to an http:// server; HTTP_PROXY does.
        &[
            ("HTTP_PROXY", env_proxy.url().as_str()),
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!env_proxy.requests().is_empty());

    // The cluster's proxy-url is used even for a loopback server and over the environment.
    let kubeconfig_proxy = CountingProxy::start(server_addr(&server));
    let with_proxy_url = sandbox.home().join("with-proxy-url");
    std::fs::write(
        &with_proxy_url,
        kubeconfig_via(&server, "127.0.0.1", Some(&kubeconfig_proxy.url())),
    )
    .unwrap();
    let before = env_proxy.requests().len();
    let out = sandbox.run(
        &[
            "--kubeconfig",
            with_proxy_url.to_str().unwrap(),
            "--namespace",
            NS,
            "cleanup",
            "--dry-run",
        ],
        &[("HTTP_PROXY", env_proxy.url().as_str()), ("NO_PROXY", "*")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!kubeconfig_proxy.requests().is_empty());
    assert_eq!(env_proxy.requests().len(), before);
}

#[test]
fn proxy_credentials_never_appear_in_errors() {
    let server = FakeApiServer::start(Options::secure());
    let sandbox = Sandbox::new();
    let kubeconfig = sandbox.home().join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_via(&server, PROXIED_HOST, None)).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let closed = closed_port();

    // A proxy that refuses connections: the run names the proxy without its userinfo.
    let refused = format!("http://alice:s3cret@127.0.0.1:{closed}");
    let out = sandbox.run(
        &[
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NS,
            "--output",
            "json",
            "run",
            "--workloads",
            "cpu",
            "--timeout",
            "5",
        ],
        &[("HTTPS_PROXY", refused.as_str())],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains(&format!(
            "via proxy http://***@127.0.0.1:{closed}/ from HTTPS_PROXY"
        )),
        "{text}"
    );

    // An unusable proxy URL is bad input, named with its variable and without credentials.
    for (var, value) in [
        ("HTTPS_PROXY", "ftp://alice:s3cret@proxy.example:21"),
        ("https_proxy", "http://alice:s3cret@bad host:1"),
    ] {
        let out = sandbox.run(
            &["--kubeconfig", kubeconfig, "--namespace", NS, "status"],
            &[(var, value)],
        );
        assert_eq!(out.status.code(), Some(2), "{var}: {}", stderr(&out));
        assert!(stderr(&out).contains(var), "{}", stderr(&out));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            !text.contains("s3cret") && !text.contains("alice"),
            "{text}"
        );
    }
    assert!(
        !text.contains("s3cret") && !text.contains("alice"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Bounded requests: a server that accepts connections and never answers
// ---------------------------------------------------------------------------------------------

/// Accepts TCP connections and holds them open without reading or writing a byte.
fn silent_server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    addr
}

/// Runs the command, killing it if it is still running after `guard` (a hang guard, not a
/// timing assertion): None when it had to be killed.
fn run_with_guard(mut cmd: Command, guard: std::time::Duration) -> Option<Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + guard;
    while std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn every_command_ends_at_its_timeout_against_a_server_that_never_answers() {
    let addr = silent_server();
    let sandbox = Sandbox::new();
    let kubeconfig = sandbox.home().join("kubeconfig");
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": format!("http://{addr}")}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    });
    std::fs::write(&kubeconfig, serde_yaml::to_string(&doc).unwrap()).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["run", "--workloads", "cpu", "--timeout", "5"],
            "cannot reach API server",
        ),
        (
            vec!["cleanup", "--yes", "--timeout", "3"],
            "cannot reach API server",
        ),
        (vec!["status", "--timeout", "3"], "cannot reach API server"),
    ] {
        let mut full = vec!["--kubeconfig", kubeconfig, "--namespace", NS];
        full.extend(&args);
        let out = run_with_guard(
            sandbox.command(&full, &[]),
            std::time::Duration::from_secs(40),
        )
        .unwrap_or_else(|| panic!("{args:?} was still running long after its --timeout"));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.contains(needle)
                && last.contains("no complete response from the API server")
                && last.contains("when the command's --timeout ran out"),
            "{args:?}: {last}"
        );
    }
}

/// A kubeconfig in the sandbox whose cluster is `server`.
fn kubeconfig_for_url(sandbox: &Sandbox, server: &str) -> String {
    let path = sandbox.home().join("kubeconfig-url");
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": server}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    });
    std::fs::write(&path, serde_yaml::to_string(&doc).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn every_cluster_command_stops_at_once_on_a_refused_connection_or_an_unknown_host() {
    let sandbox = Sandbox::new();
    let refused = format!("http://127.0.0.1:{}", closed_port());
    let unknown = "https://virtwork-no-such-host.invalid:6443".to_string();
    for (server, cause) in [(refused, "refused"), (unknown, "dns")] {
        let kubeconfig = kubeconfig_for_url(&sandbox, &server);
        // Each command would otherwise retry for its whole time limit (60 s and more).
        for args in [
            vec!["status", "--timeout", "300"],
            vec!["cleanup", "--yes", "--timeout", "300"],
            vec!["verify"],
            vec!["churn", "--yes"],
        ] {
            let mut full = vec!["--kubeconfig", kubeconfig.as_str(), "--namespace", NS];
            full.extend(&args);
            let started = std::time::Instant::now();
            let out = run_with_guard(
                sandbox.command(&full, &[]),
                std::time::Duration::from_secs(45),
            )
            .unwrap_or_else(|| panic!("{args:?} against {server} kept retrying"));
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?} {server}: {err}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "{args:?} {server} took {:?}",
                started.elapsed()
            );
            let last = err.lines().last().unwrap_or_default();
            assert!(
                last.contains(&format!("cannot reach API server {server}"))
                    && last.to_ascii_lowercase().contains(cause),
                "{args:?}: {last}"
            );
            assert!(!err.contains("trying again"), "{args:?}: {err}");
        }
    }
}

/// Answers every HTTP request with a 500 Status (a server that is up but failing).
fn failing_server() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

#[test]
fn a_failing_server_is_tried_again_until_the_timeout_saying_so() {
    let sandbox = Sandbox::new();
    let kubeconfig = kubeconfig_for_url(&sandbox, &format!("http://{}", failing_server()));
    let out = run_with_guard(
        sandbox.command(
            &[
                "--kubeconfig",
                &kubeconfig,
                "--namespace",
                NS,
                "status",
                "--timeout",
                "4",
            ],
            &[],
        ),
        std::time::Duration::from_secs(40),
    )
    .expect("status ends at its --timeout");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let attempts: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("is not answering (HTTP 500 InternalError); trying again"))
        .collect();
    // Several attempts within the first seconds, announced once (at most one line per 10 s).
    assert_eq!(attempts.len(), 1, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("cannot reach API server") && last.contains("etcd is down"),
        "{last}"
    );
}

#[test]
fn transient_failures_are_retried_and_announced_once_per_wave() {
    let server = FakeApiServer::start(Options {
        namespaces: vec![NS.into()],
        ..Default::default()
    });
    let sandbox = Sandbox::new();
    let kubeconfig = sandbox.home().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    for args in [
        vec!["status"],
        vec!["cleanup", "--yes"],
        vec!["verify", "--prometheus", "http://127.0.0.1:9"],
    ] {
        // Three 500s in a row (kube's client retries none of them): one wave, one notice.
        server.update_faults(|f| {
            f.scripted =
                vec![ScriptedFault::new("list", "virtualmachines", FaultAction::Fail(500)).times(3)]
        });
        let mut full = vec!["--kubeconfig", kubeconfig, "--namespace", NS];
        full.extend(&args);
        let out = sandbox.run(&full, &[]);
        let err = stderr(&out);
        let notices: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("API requests are failing transiently"))
            .collect();
        assert_eq!(notices.len(), 1, "{args:?}: {err}");
        assert!(notices[0].contains("HTTP 500"), "{args:?}: {}", notices[0]);
        // The lists then succeed: the command does its job (verify finds nothing to check).
        if args[0] != "verify" {
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        }
    }
}

#[test]
fn status_timeout_is_validated_like_the_other_commands() {
    let sandbox = Sandbox::new();
    let out = sandbox.run(&["status", "--timeout", "soon"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("invalid value \"soon\" for --timeout"),
        "{}",
        stderr(&out)
    );
}

struct Quiet;

impl virtwork::k8s::ready::ReadinessObserver for Quiet {
    fn changed(
        &mut self,
        _: &virtwork::k8s::ready::ReadinessTracker,
        _: &[virtwork::k8s::ready::Transition],
    ) {
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_stream_that_goes_silent_is_abandoned_and_resumed() {
    use std::time::Duration;
    use support::{ControllerOptions, FaultAction, Faults, ScriptedFault};
    use virtwork::k8s::ready::{ReadinessTracker, ReadinessWatch, WaitOutcome};

    // The VMI stays Pending for a while, so readiness needs the watch; the first watch
    // stream answers 200 and then never sends a byte nor closes.
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            pending_delay: Duration::from_secs(2),
            ..ControllerOptions::default()
        },
        faults: Faults {
            scripted: vec![ScriptedFault::new(
                "watch",
                "virtualmachineinstances",
                FaultAction::Stall,
            )],
            ..Faults::default()
        },
        ..Options::default()
    });
    let run_id = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";
    let labels = serde_json::json!({
        "app.kubernetes.io/managed-by": "virtwork",
        "virtwork/run-id": run_id,
    });
    server.insert(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm-0", "namespace": "default", "labels": labels},
        "spec": {"runStrategy": "Always", "template": {
            "metadata": {"labels": labels},
            "spec": {"domain": {"devices": {}}},
        }},
    }));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let cluster = virtwork::k8s::client::connect(
        &[kubeconfig],
        false,
        virtwork::k8s::client::RateLimit {
            qps: 50.0,
            burst: 100,
        },
    )
    .await
    .unwrap();

    let mut tracker = ReadinessTracker::new(["vm-0"], virtwork::model::ReadyCondition::Running);
    let watch = ReadinessWatch {
        namespace: "default",
        run_id,
        data_volumes: false,
        watch_timeout_secs: 2,
    };
    let (outcome, _) = virtwork::k8s::ready::wait_for_ready_with(
        cluster.client.clone(),
        &watch,
        &mut tracker,
        Duration::from_secs(60),
        &tokio_util::sync::CancellationToken::new(),
        &mut Quiet,
    )
    .await;
    assert_eq!(outcome, WaitOutcome::AllReady);
    let watches: Vec<_> = server
        .request_log()
        .into_iter()
        .filter(|r| r.verb == "watch" && r.resource == "virtualmachineinstances")
        .collect();
    assert!(
        watches.len() >= 2,
        "the silent stream was never replaced: {watches:?}"
    );
    assert!(
        watches.iter().all(|r| r.query.contains("timeoutSeconds=2")),
        "{watches:?}"
    );
}
