//! Closed output: every command run with its stdout or stderr closed, or a pipe whose reader
//! has gone (`virtwork ... 2>&1 | head -1`), exits with the code it has when both are read —
//! never 101, the code of a panic on a failed write.

use crate::binary;
use crate::support;

use std::process::{Command, Stdio};

use binary::Env;
use support::{FakeApiServer, Options};

/// How the child's stdout and stderr are set up.
#[derive(Debug, Clone, Copy)]
enum Output {
    /// Both read to the end: the reference exit code.
    Neither,
    /// A pipe whose reader is gone before the command starts.
    StdoutGone,
    StderrGone,
    /// Both on one pipe whose reader is gone (`2>&1 | head -0`).
    BothGone,
    /// The file descriptor itself closed.
    StdoutClosed,
    StderrClosed,
}

const VARIANTS: [Output; 5] = [
    Output::StdoutGone,
    Output::StderrGone,
    Output::BothGone,
    Output::StdoutClosed,
    Output::StderrClosed,
];

/// A pipe whose read end is already closed: every write to it fails with EPIPE.
fn gone_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Runs `cmd` with its output set up as `closed`; the exit code (`None`: killed by a signal).
fn exit_code(mut cmd: Command, closed: Output) -> Option<i32> {
    match closed {
        Output::Neither => {
            let out = cmd.output().unwrap();
            return out.status.code();
        }
        Output::StdoutGone => {
            cmd.stdout(gone_pipe()).stderr(Stdio::null());
        }
        Output::StderrGone => {
            cmd.stdout(Stdio::null()).stderr(gone_pipe());
        }
        Output::BothGone => {
            let writer = gone_pipe();
            cmd.stdout(writer.try_clone().unwrap()).stderr(writer);
        }
        Output::StdoutClosed | Output::StderrClosed => {
            let fd = if matches!(closed, Output::StdoutClosed) {
                1
            } else {
                2
            };
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            use std::os::unix::process::CommandExt;
            // SAFETY: close(2) is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    libc::close(fd);
                    Ok(())
                });
            }
        }
    }
    let mut child = cmd.spawn().unwrap();
    child.wait().unwrap().code()
}

/// `disruption` of a healthy fleet without Prometheus: every VM within the budget.
const DISRUPTION_API_ONLY: i32 = 0;
/// `report` of a recorded run without Prometheus: the page is written without its load.
const REPORT_WITHOUT_PROMETHEUS: i32 = 0;

/// One command line: its arguments after the global flags, the documented exit code, and
/// what the fake API server holds before it runs.
struct Case {
    args: &'static [&'static str],
    code: i32,
    /// Seeds the server (a run to look at or delete).
    with_fleet: bool,
}

const CASES: &[Case] = &[
    Case {
        args: &["version"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["--output", "json", "version"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["--help"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["run", "--help"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["completion", "bash"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["man"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["--no-such-flag"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["run", "--dry-run", "--vm-count", "20"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["run", "--workloads", "cpu", "--no-wait"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["run", "--workloads", "nope"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["run", "--params", "cpuu.cpu-load-percent=5"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["status"],
        code: 0,
        with_fleet: true,
    },
    Case {
        args: &["status", "--namespace", "nowhere"],
        code: 1,
        with_fleet: false,
    },
    Case {
        args: &["cleanup", "--yes"],
        code: 0,
        with_fleet: true,
    },
    // Nobody answers the prompt (stdin is /dev/null): the command needs --yes.
    Case {
        args: &["cleanup"],
        code: 2,
        with_fleet: true,
    },
    Case {
        args: &["cleanup", "--dry-run"],
        code: 0,
        with_fleet: true,
    },
    Case {
        args: &["verify", "--prometheus", "http://127.0.0.1:9"],
        code: 1,
        with_fleet: true,
    },
    Case {
        args: &["churn", "--dry-run", "--duration", "10s", "--rate", "1/s"],
        code: 0,
        with_fleet: true,
    },
    Case {
        args: &["churn", "--rate", "0/m"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["validate", "--catalog-dir", "CATALOG"],
        code: 0,
        with_fleet: false,
    },
    Case {
        args: &["validate", "--catalog-dir", "/nonexistent"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["audit", "list"],
        code: 0,
        with_fleet: true,
    },
    Case {
        args: &["--output", "json", "audit", "list"],
        code: 0,
        with_fleet: true,
    },
    Case {
        args: &["audit", "show", "00000000-0000-4000-8000-000000000000"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["disruption", "--since", "soon"],
        code: 2,
        with_fleet: false,
    },
    // No Prometheus: API-only, which it says on stderr while the table goes to stdout.
    Case {
        args: &["disruption", "--since", "10m"],
        code: DISRUPTION_API_ONLY,
        with_fleet: true,
    },
    Case {
        args: &["report", "--run-id", "yesterday", "--html", "HTML"],
        code: 2,
        with_fleet: false,
    },
    Case {
        args: &["report", "--run-id", "RUN", "--html", "HTML"],
        code: REPORT_WITHOUT_PROMETHEUS,
        with_fleet: true,
    },
    // The fleet is running and ready: following ends at once.
    Case {
        args: &["status", "--watch", "--timeout", "60"],
        code: 0,
        with_fleet: true,
    },
];

/// The case's arguments, the placeholders replaced: CATALOG (the repository's catalog),
/// HTML (a page in the scratch directory), RUN (the id of the fleet's run).
fn case_args(case: &Case, server: &FakeApiServer, env: &Env) -> Vec<String> {
    let catalog = concat!(env!("CARGO_MANIFEST_DIR"), "/catalog");
    case.args
        .iter()
        .map(|a| {
            match *a {
            "CATALOG" => catalog.to_string(),
            "HTML" => env.dir.path().join("report.html").display().to_string(),
            "RUN" => server.objects("virtualmachines", Some("virtwork"))[0]["metadata"]
                ["labels"]["virtwork/run-id"]
                .as_str()
                .expect("the fleet's run id")
                .to_string(),
            other => other.to_string(),
        }
        })
        .collect()
}

/// A fresh server, with a fleet created by `virtwork run` when the case asks for one.
fn prepared(case: &Case) -> (FakeApiServer, Env) {
    let server = FakeApiServer::start(Options::default());
    let env = Env::new(&server);
    if case.with_fleet {
        let out = env.run(&["run", "--workloads", "cpu,memory", "--timeout", "60"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (server, env)
}

#[test]
fn no_command_panics_on_closed_output_and_each_keeps_its_exit_code() {
    let mut wrong = Vec::new();
    for case in CASES {
        // Commands that change the cluster get a fresh one each time; the others share one.
        let mutates = case.args.iter().any(|a| ["run", "--yes"].contains(a));
        let mut shared = None;
        for closed in std::iter::once(Output::Neither).chain(VARIANTS) {
            if mutates || shared.is_none() {
                shared = Some(prepared(case));
            }
            let (server, env) = shared.as_ref().unwrap();
            let args = case_args(case, server, env);
            let cmd = env.command(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let code = exit_code(cmd, closed);
            if code != Some(case.code) {
                wrong.push(format!(
                    "virtwork {} with {closed:?}: exit {code:?}, expected {}",
                    case.args.join(" "),
                    case.code
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `status --watch | head -1`: once the reader has gone, following stops (exit 0, no panic)
/// instead of polling until the fleet settles or `--timeout` runs out. The only node is
/// cordoned, so the fleet cannot settle while the test runs.
#[test]
fn status_watch_stops_when_its_reader_has_gone() {
    let server = FakeApiServer::start(Options::default());
    server.insert(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": "node-a" },
        "spec": { "unschedulable": true },
        "status": { "allocatable": { "cpu": "64", "memory": "256Gi" } },
    }));
    let env = Env::new(&server);
    let out = env.run(&["run", "--workloads", "cpu", "--no-wait"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = env
        .command(&["status", "--watch", "--timeout", "600"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line (`head -1`), then go away.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(first.contains("0/1 ready"), "{first}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "following a fleet that cannot settle"
    );
    drop(stdout);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("status --watch went on following after its reader had gone");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let vms = server.objects("virtualmachines", Some("virtwork"));
    assert_ne!(
        vms[0]["status"]["printableStatus"], "Running",
        "still unsettled"
    );
}
