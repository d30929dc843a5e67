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
