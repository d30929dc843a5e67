//! The real `virtwork` binary pointed at a fake API server: a scratch directory holding a
//! kubeconfig for the server and the audit database, and commands that run with a clean
//! environment (no `KUBECONFIG`, no in-cluster variables, no `VIRTWORK_*` from the caller),
//! so a test sees only what it passes. Included with `#[path]` next to `mod support;` by the
//! integration tests that spawn the binary (examples share `support` but have no binary).

// Each test file uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::FakeApiServer;

/// A scratch directory with a kubeconfig for one server and an audit DB path.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    /// Put after the global flags of every command (a subcommand, for test files that
    /// drive only one).
    subcommand: Option<String>,
}

impl Env {
    /// Commands get the global flags, then exactly the arguments given.
    pub fn new(server: &FakeApiServer) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        Env {
            dir,
            kubeconfig,
            subcommand: None,
        }
    }

    /// Commands get the global flags, then `subcommand`, then the arguments given.
    pub fn for_subcommand(server: &FakeApiServer, subcommand: &str) -> Env {
        Env {
            subcommand: Some(subcommand.to_string()),
            ..Env::new(server)
        }
    }

    /// The audit database every command of this environment records to.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("audit.db")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        self.command_with_db(&self.db(), args)
    }

    /// As [`Env::command`], recording to the audit database at `db`.
    pub fn command_with_db(&self, db: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--audit-db")
            .arg(db)
            .args(&self.subcommand)
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", self.dir.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null());
        for (key, _) in std::env::vars() {
            if key.starts_with("VIRTWORK_") {
                cmd.env_remove(key);
            }
        }
        crate::support::process::default_signals(&mut cmd);
        cmd
    }

    /// Runs the command to its end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("spawn virtwork")
    }
}
