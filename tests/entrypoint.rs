//! The container entrypoint (`entrypoint.sh`) run for real against a stub binary.
//!
//! `VIRTWORK_BIN` points the script at a stub shell script that records the exact argv it got
//! (NUL-separated) and exits with a chosen code, so these tests pin what the pod runs: the
//! command allowlist, shell-like splitting of `VIRTWORK_ARGS` without any expansion or code
//! execution, exit-code passthrough, the sleep modes, signal forwarding, and that an idle
//! entrypoint stops at once on SIGTERM — as the test's direct child and as PID 1 of a PID
//! namespace, like in a container (`unshare`; skipped with a notice where PID namespaces cannot
//! be made, required when `VIRTWORK_REQUIRE_PIDNS=1`). Every case runs under every POSIX shell
//! present (`dash` is Debian's `/bin/sh`, `bash` is UBI's). shellcheck runs when installed and is
//! required when `VIRTWORK_REQUIRE_GUEST_TOOLS=1`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const STUB: &str = r#"#!/bin/sh
: > "$STUB_LOG"
for arg in "$@"; do printf '%s\0' "$arg" >> "$STUB_LOG"; done
if [ "${STUB_MODE:-}" = wait ]; then
    trap 'echo TERM > "$STUB_LOG.signal"; exit 130' TERM
    trap 'echo INT > "$STUB_LOG.signal"; exit 130' INT
    : > "$STUB_LOG.started"
    while :; do sleep 1; done
fi
exit "${STUB_EXIT:-0}"
"#;

fn entrypoint() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("entrypoint.sh")
}

/// The POSIX shells to run the script under: `/bin/sh` always, plus dash and bash when present
/// (deduplicated by resolved path).
fn shells() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for candidate in [
        "/bin/sh",
        "/usr/bin/dash",
        "/bin/dash",
        "/usr/bin/bash",
        "/bin/bash",
    ] {
        let path = Path::new(candidate);
        if let Ok(real) = fs::canonicalize(path)
            && !found
                .iter()
                .any(|p| fs::canonicalize(p).ok().as_ref() == Some(&real))
        {
            found.push(path.to_path_buf());
        }
    }
    assert!(!found.is_empty(), "no POSIX shell found");
    found
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let stub = dir.path().join("virtwork");
        fs::write(&stub, STUB).expect("write stub");
        make_executable(&stub);
        // Files a glob would match if VIRTWORK_ARGS were ever expanded.
        fs::write(dir.path().join("glob-bait-1"), "").unwrap();
        fs::write(dir.path().join("glob-bait-2"), "").unwrap();
        Sandbox { dir }
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("argv")
    }

    fn command(&self, shell: &Path, env: &[(&str, &str)], container_args: &[&str]) -> Command {
        self.command_via(&[], shell, env, container_args)
    }

    /// The entrypoint started by `launcher` (e.g. `unshare --pid --fork`), which runs
    /// `<shell> entrypoint.sh <container_args>`.
    fn command_via(
        &self,
        launcher: &[&str],
        shell: &Path,
        env: &[(&str, &str)],
        container_args: &[&str],
    ) -> Command {
        let mut cmd = match launcher.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(shell);
                cmd
            }
            None => Command::new(shell),
        };
        cmd.arg(entrypoint())
            .args(container_args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("VIRTWORK_BIN", self.dir.path().join("virtwork"))
            .env("STUB_LOG", self.log())
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        for (key, value) in env {
            cmd.env(key, value);
        }
        crate::support::process::default_signals(&mut cmd);
        cmd
    }

    fn run(&self, shell: &Path, env: &[(&str, &str)]) -> Output {
        self.command(shell, env, &[])
            .output()
            .expect("run entrypoint")
    }

    /// The argv the stub received, or None when it was never started.
    fn argv(&self) -> Option<Vec<String>> {
        let bytes = fs::read(self.log()).ok()?;
        let text = String::from_utf8(bytes).expect("utf-8 argv");
        let mut args: Vec<String> = text.split('\0').map(str::to_owned).collect();
        assert_eq!(args.pop().as_deref(), Some(""), "argv log ends with NUL");
        Some(args)
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = fs::metadata(path).unwrap().permissions();
    perms.set_mode(0o755);
    fs::set_permissions(path, perms).unwrap();
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Waits (bounded) until `path` exists; the bound only guards against a hung test.
fn wait_for_file(path: &Path) {
    for _ in 0..600 {
        if path.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} never appeared", path.display());
}

/// Waits for the child to exit; kills it and fails after a generous bound so a broken signal
/// path fails the test instead of hanging it.
fn wait_bounded(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("entrypoint did not exit after the signal");
}

fn kill(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Reads stderr lines until one contains `needle`; returns everything read.
fn read_stderr_until(child: &mut Child, needle: &str) -> String {
    let stderr = child.stderr.as_mut().expect("piped stderr");
    let mut reader = BufReader::new(stderr);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("read stderr");
        assert!(n > 0, "stderr closed before {needle:?}; got:\n{seen}");
        seen.push_str(&line);
        if line.contains(needle) {
            return seen;
        }
    }
}

/// The parent PID of `pid`, from /proc (None once it is gone).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(1)?.parse().ok()
}

fn children_of(pid: u32) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| parent_of(*p) == Some(pid))
        .collect()
}

fn is_sleep_infinity(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
        let parts: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        parts.iter().any(|p| p.ends_with(b"sleep")) && parts.contains(&&b"infinity"[..])
    })
}

/// Whether the process has exited (gone, or a zombie nobody reaped yet).
fn has_exited(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat[stat.rfind(')').unwrap() + 1..]
                .split_whitespace()
                .next()
                == Some("Z")
        }
    }
}

/// Waits until the entrypoint (`pid`, alive as long as `alive` says) idles in
/// `sleep infinity` — itself or a child of it — and returns the sleeping process.
fn wait_until_idle(pid: u32, mut alive: impl FnMut() -> bool) -> u32 {
    for _ in 0..600 {
        assert!(alive(), "entrypoint exited instead of idling");
        if is_sleep_infinity(pid) {
            return pid;
        }
        if let Some(sleeper) = children_of(pid).into_iter().find(|c| is_sleep_infinity(*c)) {
            return sleeper;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("entrypoint never idled in `sleep infinity`");
}

fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// How long an idle entrypoint may take to end after SIGTERM: a pod deletion must not wait
/// for the grace period (120 s in deploy/), and sleeping in 1 s steps would not be prompt.
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// Sends `signal` to `target` and waits for `child` (the entrypoint or its launcher) to exit:
/// its status and how long that took, or None when it was still running after a guard well
/// beyond `STOP_WITHIN` (then it is killed).
fn signal_and_time_exit(
    child: &mut Child,
    target: u32,
    signal: &str,
) -> Option<(std::process::ExitStatus, Duration)> {
    send_signal(target, signal);
    let sent = Instant::now();
    while sent.elapsed() < STOP_WITHIN * 5 {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, sent.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The two ways the entrypoint idles.
const IDLE_MODES: [(&str, &[(&str, &str)]); 2] = [
    ("no VIRTWORK_COMMAND", &[]),
    (
        "VIRTWORK_AFTER_RUN=sleep after success",
        &[("VIRTWORK_COMMAND", "run"), ("VIRTWORK_AFTER_RUN", "sleep")],
    ),
];

/// Asserts a prompt, clean stop and that no sleeper outlives the entrypoint.
fn assert_stopped_cleanly(
    what: &str,
    outcome: Option<(std::process::ExitStatus, Duration)>,
    sleeper: u32,
) {
    let (status, took) = outcome.unwrap_or_else(|| {
        panic!(
            "{what}: still running {:?} after the signal",
            STOP_WITHIN * 5
        )
    });
    assert_eq!(
        status.code(),
        Some(0),
        "{what}: exit status {status} (a stop request on an idle pod is a clean exit)"
    );
    assert!(
        took <= STOP_WITHIN,
        "{what}: took {took:?} to exit after the signal (at most {STOP_WITHIN:?})"
    );
    for _ in 0..200 {
        if has_exited(sleeper) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{what}: the sleeper {sleeper} outlived the entrypoint");
}

#[test]
fn args_are_split_like_a_shell_but_nothing_is_expanded_or_executed() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let pwned = sandbox.dir.path().join("pwned");
        let args = format!(
            concat!(
                "--workloads cpu,memory  --ssh-key 'ssh-ed25519 AAAA user@host'",
                "\t--params \"cpu.cpu-method=all\"\n",
                "* glob-bait-? $HOME ${{HOME}} $(touch {p}) `touch {p}` \"$(touch {p})\" ",
                "'' \"\" a\\ b \\'lone\\' \"say \\\"hi\\\" \\\\ \\n\" 'it''s' ",
                "x';'y ; && | > {p} "
            ),
            p = pwned.display()
        );
        let out = sandbox.run(
            &shell,
            &[("VIRTWORK_COMMAND", "run"), ("VIRTWORK_ARGS", &args)],
        );
        assert!(out.status.success(), "{shell:?}: {}", stderr(&out));
        let pwned_arg = pwned.display().to_string();
        let mut expected = strings(&[
            "run",
            "--workloads",
            "cpu,memory",
            "--ssh-key",
            "ssh-ed25519 AAAA user@host",
            "--params",
            "cpu.cpu-method=all",
            "*",
            "glob-bait-?",
            "$HOME",
            "${HOME}",
            "$(touch",
        ]);
        expected.push(format!("{pwned_arg})"));
        expected.push("`touch".into());
        expected.push(format!("{pwned_arg}`"));
        expected.push(format!("$(touch {pwned_arg})"));
        expected.extend(strings(&[
            "",
            "",
            "a b",
            "'lone'",
            "say \"hi\" \\ \\n",
            "its",
            "x;y",
            ";",
            "&&",
            "|",
            ">",
        ]));
        expected.push(pwned_arg);
        assert_eq!(sandbox.argv(), Some(expected), "shell {shell:?}");
        assert!(!pwned.exists(), "{shell:?}: a command substitution ran");
    }
}

#[test]
fn every_allowed_command_reaches_the_binary_with_its_args() {
    for shell in shells() {
        for command in ["run", "cleanup", "validate", "status", "verify", "audit"] {
            let sandbox = Sandbox::new();
            let out = sandbox.run(
                &shell,
                &[
                    ("VIRTWORK_COMMAND", command),
                    ("VIRTWORK_ARGS", "--namespace  demo "),
                ],
            );
            assert!(
                out.status.success(),
                "{shell:?} {command}: {}",
                stderr(&out)
            );
            assert_eq!(
                sandbox.argv(),
                Some(strings(&[command, "--namespace", "demo"])),
                "{shell:?} {command}"
            );
        }
    }
}

#[test]
fn empty_args_pass_no_extra_arguments() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let out = sandbox.run(&shell, &[("VIRTWORK_COMMAND", "status")]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(sandbox.argv(), Some(strings(&["status"])));

        let sandbox = Sandbox::new();
        let out = sandbox.run(
            &shell,
            &[("VIRTWORK_COMMAND", "status"), ("VIRTWORK_ARGS", " \t\n ")],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(sandbox.argv(), Some(strings(&["status"])));
    }
}

#[test]
fn churn_is_a_command_a_job_can_run() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let out = sandbox.run(
            &shell,
            &[
                ("VIRTWORK_COMMAND", "churn"),
                (
                    "VIRTWORK_ARGS",
                    "--run-id 0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f --rate 2/m",
                ),
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            sandbox.argv(),
            Some(strings(&[
                "churn",
                "--run-id",
                "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f",
                "--rate",
                "2/m"
            ]))
        );
    }
}

#[test]
fn unknown_command_is_bad_input_and_runs_nothing() {
    for shell in shells() {
        for bad in ["version", "rm -rf /", "RUN", "run;id"] {
            let sandbox = Sandbox::new();
            let out = sandbox.run(&shell, &[("VIRTWORK_COMMAND", bad)]);
            assert_eq!(out.status.code(), Some(2), "{shell:?} {bad:?}");
            let err = stderr(&out);
            assert!(err.contains("VIRTWORK_COMMAND"), "{err}");
            assert!(
                err.contains("run, cleanup, validate, status, verify, audit, churn"),
                "{err}"
            );
            assert_eq!(sandbox.argv(), None, "stub ran for {bad:?}");
        }
    }
}

#[test]
fn unbalanced_quotes_and_trailing_backslash_are_bad_input() {
    for shell in shells() {
        for (args, what) in [
            ("--ssh-user 'bob", "unterminated single quote"),
            ("--ssh-user \"bob", "unterminated double quote"),
            ("--ssh-user bob\\", "lone backslash"),
        ] {
            let sandbox = Sandbox::new();
            let out = sandbox.run(
                &shell,
                &[("VIRTWORK_COMMAND", "run"), ("VIRTWORK_ARGS", args)],
            );
            assert_eq!(out.status.code(), Some(2), "{shell:?} {args:?}");
            let err = stderr(&out);
            assert!(err.contains("VIRTWORK_ARGS") && err.contains(what), "{err}");
            assert_eq!(sandbox.argv(), None);
        }
    }
}

#[test]
fn invalid_after_run_mode_is_bad_input() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let out = sandbox.run(
            &shell,
            &[
                ("VIRTWORK_COMMAND", "run"),
                ("VIRTWORK_AFTER_RUN", "restart"),
            ],
        );
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains("VIRTWORK_AFTER_RUN"),
            "{}",
            stderr(&out)
        );
        assert_eq!(sandbox.argv(), None);
    }
}

#[test]
fn exit_codes_of_the_binary_are_the_containers() {
    for shell in shells() {
        for after_run in ["exit", "sleep"] {
            for code in ["1", "2", "130"] {
                let sandbox = Sandbox::new();
                let out = sandbox.run(
                    &shell,
                    &[
                        ("VIRTWORK_COMMAND", "run"),
                        ("VIRTWORK_AFTER_RUN", after_run),
                        ("STUB_EXIT", code),
                    ],
                );
                assert_eq!(
                    out.status.code(),
                    Some(code.parse().unwrap()),
                    "{shell:?} after_run={after_run}"
                );
                assert_eq!(sandbox.argv(), Some(strings(&["run"])));
            }
        }
    }
}

#[test]
fn credentials_in_args_never_reach_the_entrypoint_log() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let out = sandbox.run(
            &shell,
            &[
                ("VIRTWORK_COMMAND", "run"),
                ("VIRTWORK_ARGS", "--ssh-password 'hunter2 s3cret'"),
            ],
        );
        assert!(out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("Executing: virtwork run (2 arguments"),
            "{err}"
        );
        assert!(!err.contains("hunter2") && !err.contains("s3cret"), "{err}");
        assert_eq!(out.stdout, b"", "stdout is reserved for virtwork's product");
    }
}

#[test]
fn container_arguments_are_passed_through_verbatim() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let out = sandbox
            .command(
                &shell,
                // VIRTWORK_COMMAND is ignored when the container is given arguments.
                &[("VIRTWORK_COMMAND", "cleanup")],
                &["run", "--dry-run", "--ssh-key", "ssh-ed25519 A b", "*"],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            sandbox.argv(),
            Some(strings(&[
                "run",
                "--dry-run",
                "--ssh-key",
                "ssh-ed25519 A b",
                "*"
            ]))
        );
        let err = stderr(&out);
        assert!(err.contains("with 5 arguments"), "{err}");
        assert!(
            !err.contains("ssh-ed25519"),
            "arguments are not logged: {err}"
        );
    }
}

#[test]
fn no_command_sleeps_for_oc_exec() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let mut child = sandbox
            .command(&shell, &[], &[])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let seen = read_stderr_until(&mut child, "No VIRTWORK_COMMAND set");
        assert!(seen.contains("oc exec"), "{seen}");
        let pid = child.id();
        let sleeper = wait_until_idle(pid, || child.try_wait().unwrap().is_none());
        let outcome = signal_and_time_exit(&mut child, pid, "TERM");
        assert_stopped_cleanly(&format!("{shell:?}"), outcome, sleeper);
        assert_eq!(sandbox.argv(), None, "nothing ran");
    }
}

#[test]
fn after_run_sleep_keeps_the_pod_alive_after_success() {
    for shell in shells() {
        let sandbox = Sandbox::new();
        let mut child = sandbox
            .command(
                &shell,
                &[
                    ("VIRTWORK_COMMAND", "run"),
                    ("VIRTWORK_ARGS", "--workloads cpu"),
                    ("VIRTWORK_AFTER_RUN", "sleep"),
                ],
                &[],
            )
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        read_stderr_until(&mut child, "finished successfully; sleeping");
        let pid = child.id();
        let sleeper = wait_until_idle(pid, || child.try_wait().unwrap().is_none());
        let outcome = signal_and_time_exit(&mut child, pid, "TERM");
        assert_stopped_cleanly(&format!("{shell:?}"), outcome, sleeper);
        assert_eq!(
            sandbox.argv(),
            Some(strings(&["run", "--workloads", "cpu"]))
        );
    }
}

#[test]
fn after_run_sleep_forwards_sigterm_and_returns_the_binarys_code() {
    for shell in shells() {
        for signal in ["TERM", "INT"] {
            let sandbox = Sandbox::new();
            let mut child = sandbox
                .command(
                    &shell,
                    &[
                        ("VIRTWORK_COMMAND", "run"),
                        ("VIRTWORK_AFTER_RUN", "sleep"),
                        ("STUB_MODE", "wait"),
                    ],
                    &[],
                )
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut started = sandbox.log().into_os_string();
            started.push(".started");
            wait_for_file(Path::new(&started));
            kill(&child, signal);
            let status = wait_bounded(&mut child);
            assert_eq!(status.code(), Some(130), "{shell:?} {signal}");
            // SIGINT arrives as SIGTERM: a background job of a non-interactive shell starts
            // with SIGINT ignored, so the entrypoint forwards both as SIGTERM.
            let mut got = sandbox.log().into_os_string();
            got.push(".signal");
            assert_eq!(fs::read_to_string(&got).unwrap().trim(), "TERM");
        }
    }
}

/// An idle entrypoint started directly by the test (as `podman run` without an init would)
/// ends with exit 0 within 2 s of SIGTERM or SIGINT, in both idle modes, leaving no sleeper.
#[test]
fn idle_entrypoint_exits_0_within_2s_on_sigterm_as_a_direct_child() {
    for shell in shells() {
        for (mode, env) in IDLE_MODES {
            for signal in ["TERM", "INT"] {
                let sandbox = Sandbox::new();
                let mut child = sandbox
                    .command(&shell, env, &[])
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let pid = child.id();
                let sleeper = wait_until_idle(pid, || child.try_wait().unwrap().is_none());
                let outcome = signal_and_time_exit(&mut child, pid, signal);
                assert_stopped_cleanly(
                    &format!("{shell:?}, {mode}, SIG{signal}"),
                    outcome,
                    sleeper,
                );
            }
        }
    }
}

/// `unshare --pid --fork` works here (it needs CAP_SYS_ADMIN, or user namespaces).
fn pid_namespaces_available() -> bool {
    let required = std::env::var("VIRTWORK_REQUIRE_PIDNS").as_deref() == Ok("1");
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "true"])
        .output();
    match probe {
        Ok(out) if out.status.success() => true,
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            };
            assert!(
                !required,
                "PID namespaces are required (VIRTWORK_REQUIRE_PIDNS=1) but `unshare --pid --fork` failed: {why}"
            );
            eprintln!("SKIP: cannot create a PID namespace ({why})");
            false
        }
    }
}

/// In a container the entrypoint is PID 1 of its PID namespace, where the kernel drops every
/// signal the process has no handler for: the idle entrypoint, run as that PID 1 under
/// `unshare`, must still end with exit 0 within 2 s of the SIGTERM a pod deletion sends.
#[test]
fn idle_entrypoint_as_pid_1_of_a_pid_namespace_exits_0_within_2s_on_sigterm() {
    if !pid_namespaces_available() {
        return;
    }
    for shell in shells() {
        for (mode, env) in IDLE_MODES {
            let what = format!("{shell:?}, {mode}, as PID 1");
            let sandbox = Sandbox::new();
            // --kill-child: should unshare die, the namespace goes with it.
            let mut launcher = sandbox
                .command_via(
                    &["unshare", "--pid", "--fork", "--kill-child"],
                    &shell,
                    env,
                    &[],
                )
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let unshare = launcher.id();
            let mut init = None;
            for _ in 0..600 {
                init = children_of(unshare).first().copied();
                if init.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let init = init.unwrap_or_else(|| panic!("{what}: unshare started nothing"));
            let status = fs::read_to_string(format!("/proc/{init}/status")).unwrap();
            let nspid = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .expect("NSpid in /proc/<pid>/status");
            assert_eq!(
                nspid.split_whitespace().last(),
                Some("1"),
                "{what}: the entrypoint is not PID 1 of its namespace ({nspid})"
            );
            let sleeper = wait_until_idle(init, || launcher.try_wait().unwrap().is_none());
            // unshare passes on the exit status of the namespace's init.
            let outcome = signal_and_time_exit(&mut launcher, init, "TERM");
            assert_stopped_cleanly(&what, outcome, sleeper);
        }
    }
}

#[test]
fn entrypoint_passes_shellcheck() {
    let required = std::env::var("VIRTWORK_REQUIRE_GUEST_TOOLS").as_deref() == Ok("1");
    let probe = Command::new("shellcheck").arg("--version").output();
    if probe.is_err() {
        assert!(
            !required,
            "shellcheck is required (VIRTWORK_REQUIRE_GUEST_TOOLS=1) but absent"
        );
        eprintln!("SKIP: shellcheck not installed");
        return;
    }
    let out = Command::new("shellcheck")
        .args(["--shell=sh", "--severity=style"])
        .arg(entrypoint())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shellcheck:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
