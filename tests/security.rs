//! What a broken or hostile API server, or a damaged kubeconfig, can do to the real binary:
//! bounded reads, text from the cluster that cannot drive the terminal, transport failures
//! named for what they are, and no panics. Each test runs `virtwork` against the fake API
//! server (docs/fake-apiserver.md).

use crate::seed;
use crate::support;

use std::time::Duration;

use seed::{Cluster, NS, RUN_A, run_guarded, text};
use serde_json::json;
use support::{ControllerOptions, FaultAction, Options, ScriptedFault};

/// A terminal escape (set the window title, then clear the screen) and a bidi override, as
/// an admission webhook or a hostile server could write them.
const HOSTILE: &str = "denied by policy\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}gnp.exe\r\nfake: line";

fn any_list(action: FaultAction) -> ScriptedFault {
    ScriptedFault {
        verb: Some("list".into()),
        resource: None,
        name: None,
        times: 1,
        action,
    }
}

/// Text a terminal would act on: ESC, BEL, CR, C1 controls, bidi overrides.
fn drives_the_terminal(output: &str) -> bool {
    output
        .chars()
        .any(|c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
}

/// A 300 MB object: the command stops reading at the documented cap, fails naming the
/// server, and its memory stays far below what holding the body would take (817 MB before).
#[test]
fn an_oversized_response_is_refused_at_the_cap_with_bounded_memory() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server
        .update_faults(|f| f.scripted.push(any_list(FaultAction::Oversized(300 << 20))));
    let mut cmd = c.command(&["--namespace", NS, "status"]);
    cmd.env("RUST_LOG", "off");
    let guarded = run_guarded(cmd, Duration::from_secs(120), 600 << 10);
    let out = guarded
        .output
        .expect("virtwork was killed (hang or over 600 MB)");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!(
            "the API server {} sent a response larger than 64 MiB",
            c.server.url()
        )),
        "{last}"
    );
    eprintln!(
        "peak RSS with a 300 MB response: {} KiB",
        guarded.peak_rss_kib
    );
    assert!(
        guarded.peak_rss_kib < 300 << 10,
        "peak RSS {} KiB",
        guarded.peak_rss_kib
    );
}

/// An admission webhook's message with escapes reaches the user as text: in the cleanup
/// summary's warnings, in the error line, and in `audit show`.
#[test]
fn a_hostile_status_message_is_escaped_in_every_human_writer() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.update_faults(|f| {
        f.scripted.push(
            ScriptedFault::new(
                "delete",
                "virtualmachines",
                FaultAction::Deny {
                    code: 400,
                    message: HOSTILE,
                    times: 1,
                },
            )
            .times(20),
        )
    });
    let out = c.run(&["--namespace", NS, "cleanup", "--yes"], None, &[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("\\u{1b}]0;owned\\u{7}"), "{stdout}");
    assert!(stdout.contains("\\u{202e}gnp.exe fake: line"), "{stdout}");
    for (name, output) in [("stdout", &stdout), ("stderr", &stderr)] {
        assert!(!drives_the_terminal(output), "{name}: {output:?}");
    }
    let conn = rusqlite::Connection::open(c.db()).unwrap();
    let run_id: String = conn
        .query_row(
            "SELECT run_id FROM audit_log WHERE command LIKE 'cleanup%' ORDER BY id DESC",
            [],
            |r| r.get(0),
        )
        .expect("the cleanup was recorded");
    let show = c.run(&["audit", "show", &run_id], None, &[]);
    let shown = text(&show.stdout);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    assert!(shown.contains("\\u{1b}]0;owned"), "{shown}");
    assert!(!drives_the_terminal(&shown), "{shown:?}");
}

/// A 50 MB Status message (under the body cap) is cut to one short line.
#[test]
fn a_huge_status_message_is_capped() {
    let c = Cluster::start();
    c.server.update_faults(|f| {
        f.scripted.push(any_list(FaultAction::Deny {
            code: 422,
            message: "xxxxxxxxxxxxxxxxxxx\u{1b}",
            times: 2_500_000,
        }))
    });
    let out = c.run(&["--namespace", NS, "status"], None, &[("RUST_LOG", "off")]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        &stderr[..stderr.len().min(300)]
    );
    assert!(stderr.len() < 8 << 10, "{} bytes of stderr", stderr.len());
    assert_eq!(stderr.lines().count(), 1, "{}", &stderr[..300]);
    assert!(
        stderr.contains("xxxxxxxxxxxxxxxxxxx\\u{1b}x") && stderr.contains('…'),
        "{stderr}"
    );
    assert!(!drives_the_terminal(&stderr));
}

fn kubeconfig(server: &str, cluster_extra: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n{cluster_extra}contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n    namespace: {NS}\nusers:\n- name: u\n  user:\n{user}"
    )
}

fn run_with_kubeconfig(c: &Cluster, yaml: &str, args: &[&str]) -> std::process::Output {
    let path = c.dir.path().join("kubeconfig");
    std::fs::write(&path, yaml).unwrap();
    c.run(args, None, &[])
}

/// A token with a control character cannot go in an HTTP header: a clear input error (exit
/// 2, nothing sent), not a panic (exit 101).
#[test]
fn a_kubeconfig_token_with_a_control_character_is_an_input_error() {
    let c = Cluster::start();
    let yaml = kubeconfig(c.server.url(), "", "    token: \"abc\\x01secret-part\"\n");
    let before = c.server.request_log().len();
    let out = run_with_kubeconfig(&c, &yaml, &["status"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("Error: the token of the user of context \"fake\" in kubeconfig ")
            && stderr.contains("holds a control character or line break"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret-part"), "{stderr}");
    assert_eq!(c.server.request_log().len(), before, "a request was sent");
}

/// A server whose certificate the kubeconfig does not trust: the error says it was the
/// certificate, not just "client error (Connect)".
#[test]
fn an_untrusted_certificate_is_named() {
    let c = Cluster::with(Options {
        tls: true,
        ..Options::default()
    });
    let yaml = kubeconfig(c.server.url(), "", "    token: t\n");
    let out = run_with_kubeconfig(&c, &yaml, &["status"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("TLS: the server's certificate was not accepted")
            && last.contains("certificate-authority"),
        "{last}"
    );
}

/// `insecure-skip-tls-verify: true` works, with one warning on stderr saying what it costs.
#[test]
fn insecure_skip_tls_verify_is_used_with_one_warning() {
    let c = Cluster::with(Options {
        tls: true,
        ..Options::default()
    });
    let yaml = kubeconfig(
        c.server.url(),
        "    insecure-skip-tls-verify: true\n",
        "    token: t\n",
    );
    let out = run_with_kubeconfig(&c, &yaml, &["--namespace", NS, "status"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("insecure-skip-tls-verify"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with("Warning: ") && warnings[0].contains("certificate is not verified"),
        "{stderr}"
    );
}

/// A redirect is named as one (kube does not follow it, and credentials must not either).
#[test]
fn a_redirect_is_named() {
    let c = Cluster::start();
    c.server
        .update_faults(|f| f.scripted.push(any_list(FaultAction::Fail(302))));
    let out = c.run(&["--namespace", NS, "status"], None, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("answered with a redirect (HTTP 302 to https://elsewhere.example/login)")
            && last.contains("does not follow redirects"),
        "{last}"
    );
}

/// Status fields anyone allowed to patch a VM's status can write (printableStatus, the VMI's
/// node) reach the `status` table as text.
#[test]
fn hostile_status_fields_are_escaped_in_the_status_table() {
    let c = Cluster::with(Options {
        controllers: ControllerOptions {
            enabled: false,
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let labels = json!({
        "app.kubernetes.io/managed-by": "virtwork",
        "app.kubernetes.io/component": "cpu",
        "virtwork/run-id": RUN_A,
    });
    c.server.insert(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": { "name": "virtwork-cpu-0", "namespace": NS, "labels": labels },
        "spec": { "runStrategy": "Always", "template": { "spec": { "domain": { "devices": {} } } } },
        "status": { "printableStatus": HOSTILE },
    }));
    c.server.insert(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": { "name": "virtwork-cpu-0", "namespace": NS, "labels": labels },
        "spec": { "domain": { "devices": {} } },
        "status": { "phase": "Running", "nodeName": "node\u{1b}[8m-hidden" },
    }));
    // The one-line-per-run summary shows the oldest VM not ready and why: escaped too.
    let summary = c.run(&["--namespace", NS, "status"], None, &[]);
    assert_eq!(summary.status.code(), Some(0), "{}", text(&summary.stderr));
    let summary = text(&summary.stdout);
    assert!(!drives_the_terminal(&summary), "{summary:?}");
    let out = c.run(&["--namespace", NS, "status", "-o", "wide"], None, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("denied by policy\\u{1b}]0;owned\\u{7}"),
        "{stdout}"
    );
    assert!(stdout.contains("node\\u{1b}[8m-hidden"), "{stdout}");
    assert!(!drives_the_terminal(&stdout), "{stdout:?}");
}

/// A webhook's message, as an audit record holds it, in `audit show --output json` and
/// `--output yaml`: the documents keep it exactly (a reader gets the server's text back), but
/// the bidi override, C1 control and zero-width characters are written as `\u` escapes, so a
/// document shown on a terminal cannot reorder or hide what follows, as the text renderer
/// does.
#[test]
fn hidden_characters_in_a_hostile_message_are_escaped_in_json_and_yaml() {
    const HIDING: &str = "denied\u{202e}gnp.exe\u{200b}\u{85}\u{2066}by policy";
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 1);
    c.server.update_faults(|f| {
        f.scripted.push(
            ScriptedFault::new(
                "delete",
                "virtualmachines",
                FaultAction::Deny {
                    code: 400,
                    message: HIDING,
                    times: 1,
                },
            )
            .times(20),
        )
    });
    let out = c.run(&["--namespace", NS, "cleanup", "--yes"], None, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let conn = rusqlite::Connection::open(c.db()).unwrap();
    let run_id: String = conn
        .query_row(
            "SELECT run_id FROM audit_log WHERE command LIKE 'cleanup%' ORDER BY id DESC",
            [],
            |r| r.get(0),
        )
        .expect("the cleanup was recorded");
    // The recorder stores what the terminal renderer made of the message; a database others
    // may write (used with a warning) or an older version's holds it raw.
    conn.execute(
        "UPDATE audit_log SET error_summary = ?1 WHERE run_id = ?2",
        rusqlite::params![HIDING, run_id],
    )
    .unwrap();
    for output in ["json", "yaml"] {
        let out = c.run(&["--output", output, "audit", "show", &run_id], None, &[]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{output}: {}",
            text(&out.stderr)
        );
        assert!(
            !stdout
                .chars()
                .any(|c| matches!(c, '\u{202e}' | '\u{200b}' | '\u{85}' | '\u{2066}')),
            "{output}: {stdout:?}"
        );
        assert!(
            stdout.contains("denied\\u202egnp.exe\\u200b\\u0085\\u2066by policy"),
            "{output}: {stdout}"
        );
        let doc: serde_json::Value = if output == "json" {
            serde_json::from_str(&stdout).unwrap()
        } else {
            serde_yaml::from_str(&stdout).unwrap()
        };
        assert!(
            doc.to_string().contains(HIDING),
            "{output}: the message does not read back: {doc}"
        );
    }
}

/// The churn schedule: accepted flags once allowed 100000/s for a week,
/// whose dry run built every slot in memory (22.5 GB after 18 minutes). The number of actions
/// is capped when the flags are read (exit 2, one line, nothing contacted), and a dry run at
/// half the cap streams its schedule with bounded memory.
#[test]
fn a_churn_schedule_is_bounded_and_its_dry_run_streams() {
    let c = Cluster::start();
    c.seed_run(NS, RUN_A, "cpu", 2);
    c.server.clear_request_log();
    let out = c.run(
        &[
            "--namespace",
            NS,
            "churn",
            "--run-id",
            RUN_A,
            "--dry-run",
            "--rate",
            "100000/s",
            "--duration",
            "168h",
        ],
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--rate 100000/s")
            && stderr.contains("60480000000 actions")
            && stderr.contains("at most 1000000"),
        "{stderr}"
    );
    assert!(
        c.server.request_log().is_empty(),
        "the server was contacted"
    );

    let running = c.server.wait_until(seed::SETTLE, |s| {
        let vmis = s.objects("virtualmachineinstances", Some(NS));
        vmis.len() == 2 && vmis.iter().all(|v| v["status"]["phase"] == "Running")
    });
    assert!(running);
    // 500,000 slots as one JSON document, written to a file while its memory is watched.
    let file = c.dir.path().join("schedule.json");
    let mut child = c
        .command(&[
            "--namespace",
            NS,
            "--output",
            "json",
            "churn",
            "--run-id",
            RUN_A,
            "--dry-run",
            "--rate",
            "500/s",
            "--duration",
            "1000s",
        ])
        .env("RUST_LOG", "off")
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&file).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        peak = peak.max(seed::rss_kib(child.id()).unwrap_or(0));
        assert!(std::time::Instant::now() < deadline, "the dry run hung");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let schedule = doc["schedule"].as_array().unwrap();
    assert_eq!(schedule.len(), 500_000);
    assert_eq!(schedule[499_999]["at_seconds"], 999.998);
    eprintln!("peak RSS of a 500,000-slot JSON dry run: {peak} KiB");
    assert!(
        peak < 64 << 10,
        "peak RSS {peak} KiB: the schedule was held in memory"
    );
}
