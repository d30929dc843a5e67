//! Reaching the cluster, through the real binary: which credentials win, proxies, bounded
//! requests against a server that never answers, and credential plugins whose output must
//! never be shown. Cluster-facing behaviour runs against the fake API server over real HTTP.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::{FakeApiServer, Options};

const NS: &str = "virtwork";

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
