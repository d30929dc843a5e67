//! `virtwork report` through the real binary: a recorded fleet (with failures, churn and
//! hostile names and messages in the database) becomes one HTML page, which headless
//! Chromium renders: the test looks at what a reader gets (headings, tables beside charts,
//! hostile text shown as text, no blank screenshot, no console error, nothing fetched).
//!
//! Chromium (Debian's `chromium`) is optional on a developer machine: without it the
//! rendering tests print SKIP, unless `VIRTWORK_REQUIRE_CHROMIUM=1` (CI) makes that a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::{Connection, params};
use serde_json::json;

use crate::support::promstub::{Answer, PromStub, percent_decoded};
use uuid::Uuid;
use virtwork::audit::{
    Auditor, CommandKind, Event, EventType, ExecutionParams, ExecutionStatus, VmRecord,
    WorkloadRecord, WorkloadStatus,
};

/// Text a hostile cluster or database could hold, in every kind of field the page shows.
const HOSTILE_VM: &str = "virtwork-cpu-<img src=x onerror=alert(1)>";
const HOSTILE_ERROR: &str =
    "admission webhook \"<script>alert('pwned')</script>\" denied the request \u{202e}gnp.exe";
const HOSTILE_CONTEXT: &str = "\"><svg onload=alert(2)>";

/// When the recorded run started.
const T0: i64 = 1_772_359_200; // 2026-03-01T10:00:00Z

fn at(offset: i64) -> String {
    jiff::Timestamp::from_second(T0 + offset)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn run_params(vms: u32, context: &str) -> ExecutionParams {
    ExecutionParams {
        command: CommandKind::Run,
        namespace: "virtwork".into(),
        kubeconfig_path: None,
        cluster_context: Some(context.into()),
        container_disk_image: Some("quay.io/containerdisks/fedora:42".into()),
        default_cpu_cores: Some(2),
        default_memory: Some("2Gi".into()),
        data_disk_size: Some("10Gi".into()),
        workloads: vec!["cpu".into(), "memory".into()],
        total_vm_count: Some(vms + 1),
        total_workload_count: Some(2),
        dry_run: false,
        ssh_auth_configured: false,
        cleanup_mode: None,
        wait_for_ready: true,
        ready_timeout_seconds: Some(900),
    }
}

/// A deterministic spread: VM `i`'s (created, scheduled, running, ready) offsets in seconds
/// from the run's start; `None` ready for the few that never became ready.
fn timeline(i: usize, n: usize) -> (i64, i64, i64, Option<i64>) {
    let jitter = |k: usize| ((i * 7919 + k * 104_729) % 97) as i64;
    let created = 6 + (i as i64 * 120) / n as i64;
    let scheduled = created + 1 + jitter(1) % 6;
    let running = scheduled + 18 + jitter(2) / 2 + if i.is_multiple_of(89) { 150 } else { 0 };
    let ready = (i % 331 != 7).then(|| running + jitter(3) % 12);
    (created, scheduled, running, ready)
}

fn vm_name(i: usize) -> String {
    if i == 5 {
        HOSTILE_VM.to_string()
    } else {
        let kind = if i.is_multiple_of(2) { "cpu" } else { "memory" };
        format!("virtwork-{kind}-3f1c7a-{i}")
    }
}

/// Records a run of `n` VMs (plus one the API server refused) and a churn execution on it,
/// as `virtwork run` and `virtwork churn` record them, then sets the times a real fleet
/// takes (the recorder stamps the wall clock, which a test cannot wait for).
fn record_fleet(db: &Path, n: usize, started: i64) -> (Uuid, Uuid) {
    let auditor = Auditor::open_path(db).unwrap();
    let run_id = Uuid::new_v4();
    let exec = auditor.start_execution(run_id, &run_params(n as u32, HOSTILE_CONTEXT));
    exec.record_event(&Event::execution_started(CommandKind::Run, run_id));
    for (kind, count) in [("cpu", n.div_ceil(2)), ("memory", n / 2 + 1)] {
        exec.record_workload(&WorkloadRecord {
            workload_type: kind.into(),
            vm_count: count as u32,
            cpu_cores: 2,
            memory: "2Gi".into(),
            data_disk_size: None,
            requires_service: false,
        });
    }
    for i in 0..n {
        let name = vm_name(i);
        let component = if i.is_multiple_of(2) { "cpu" } else { "memory" };
        exec.record_vm(&VmRecord {
            vm_name: name.clone(),
            namespace: "virtwork".into(),
            component: component.into(),
            role: None,
            cpu_cores: 2,
            memory: "2Gi".into(),
            container_disk_image: "quay.io/containerdisks/fedora:42".into(),
            data_disk_size: None,
            phase: None,
        });
        exec.record_event(&Event::vm_created(&name));
        match timeline(i, n).3 {
            Some(_) => {
                exec.update_vm_ready(&name, "Running", jiff::Timestamp::now());
                exec.record_event(&Event::vm_ready(&name));
            }
            None => {
                exec.update_vm_failed(&name, Some("Scheduling"));
                exec.record_event(&Event::vm_timeout(&name, HOSTILE_ERROR));
            }
        }
    }
    exec.record_event(
        &Event::vm_failed("virtwork-memory-3f1c7a-refused", HOSTILE_ERROR).with_workload("memory"),
    );
    exec.set_workload_status("cpu", WorkloadStatus::Created);
    exec.set_workload_status("memory", WorkloadStatus::Failed);
    exec.complete_execution(ExecutionStatus::Failed, Some(HOSTILE_ERROR));

    let churn_id = Uuid::new_v4();
    let churn = auditor.start_execution(
        churn_id,
        &virtwork::audit::churn::churn_params("virtwork", None, false),
    );
    churn.link_cleanup_to_runs(&[run_id.to_string()]);
    for k in 0..30 {
        let action = ["restart", "stop-start", "migrate"][k % 3];
        let vm = format!("virtwork/{}", vm_name(k * 3));
        let event = if k % 11 == 4 {
            Event {
                event_type: EventType::ChurnActionFailed,
                message: format!("{action} {vm}: failed"),
                error_detail: Some(HOSTILE_ERROR.into()),
                vm_name: None,
                workload_name: None,
            }
        } else {
            Event {
                event_type: EventType::ChurnAction,
                message: format!("{action} {vm}: succeeded"),
                error_detail: None,
                vm_name: None,
                workload_name: None,
            }
        };
        churn.record_event(&event);
    }
    churn.complete_execution(ExecutionStatus::Success, None);
    assert!(auditor.flush(), "the audit writes finished");
    drop(auditor);
    set_times(db, run_id, churn_id, n, started);
    (run_id, churn_id)
}

fn set_times(db: &Path, run_id: Uuid, churn_id: Uuid, n: usize, started: i64) {
    let mut conn = Connection::open(db).unwrap();
    let tx = conn.transaction().unwrap();
    let shifted = |offset: i64| at(started + offset);
    let last = (0..n).filter_map(|i| timeline(i, n).3).max().unwrap_or(0);
    tx.execute(
        "UPDATE audit_log SET started_at = ?2, completed_at = ?3 WHERE run_id = ?1",
        params![run_id.to_string(), shifted(0), shifted(last + 4)],
    )
    .unwrap();
    for i in 0..n {
        let (created, scheduled, running, ready) = timeline(i, n);
        tx.execute(
            "UPDATE vm_details SET created_at = ?2, scheduled_at = ?3, running_at = ?4,
                 ready_at = ?5 WHERE vm_name = ?1",
            params![
                vm_name(i),
                shifted(created),
                shifted(scheduled),
                shifted(running),
                ready.map(shifted)
            ],
        )
        .unwrap();
    }
    tx.execute(
        "UPDATE audit_log SET started_at = ?2, completed_at = ?3 WHERE run_id = ?1",
        params![
            churn_id.to_string(),
            shifted(last + 60),
            shifted(last + 400)
        ],
    )
    .unwrap();
    // The run's failures are recorded when it gave up waiting, at its end.
    tx.execute(
        "UPDATE events SET occurred_at = ?2 WHERE audit_id =
             (SELECT id FROM audit_log WHERE run_id = ?1)",
        params![run_id.to_string(), shifted(last + 4)],
    )
    .unwrap();
    let ids: Vec<i64> = {
        let mut stmt = tx
            .prepare(
                "SELECT e.id FROM events e JOIN audit_log a ON a.id = e.audit_id
                 WHERE a.run_id = ?1 ORDER BY e.id",
            )
            .unwrap();
        stmt.query_map([churn_id.to_string()], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    for (k, id) in ids.iter().enumerate() {
        let offset = last + 70 + 11 * k as i64;
        tx.execute(
            "UPDATE events SET occurred_at = ?2 WHERE id = ?1",
            params![id, shifted(offset)],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

fn virtwork(db: &Path, args: &[&str]) -> Output {
    let home = db.parent().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    for (name, _) in std::env::vars() {
        if name.starts_with("VIRTWORK_") || name == "KUBECONFIG" {
            cmd.env_remove(name);
        }
    }
    cmd.env("HOME", home)
        .current_dir(home)
        .arg("--audit-db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A recorded fleet of `n` VMs and the page `virtwork report` wrote about it.
struct Fixture {
    dir: tempfile::TempDir,
    db: PathBuf,
    run_id: Uuid,
    page: PathBuf,
}

fn fixture(n: usize) -> Fixture {
    fixture_with(n, &[])
}

/// The same, `extra` added to the report command (e.g. `--prometheus URL`).
fn fixture_with(n: usize, extra: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    let (run_id, _) = record_fleet(&db, n, 0);
    let page = dir.path().join("report.html");
    let run = run_id.to_string();
    let mut args = vec!["report", "--run-id", &run, "--html", page.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = virtwork(&db, &args);
    assert!(out.status.success(), "report failed: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(&format!("wrote {}", page.display())),
        "{}",
        text(&out.stdout)
    );
    Fixture {
        dir,
        db,
        run_id,
        page,
    }
}

#[test]
fn the_page_shows_the_run_with_hostile_text_escaped() {
    let f = fixture(40);
    let html = std::fs::read_to_string(&f.page).unwrap();
    assert_inert(&html);
    assert!(html.contains("virtwork-cpu-&lt;img src=x onerror=alert(1)&gt;"));
    assert!(html.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;svg onload=alert(2)&gt;"));
    assert!(
        html.contains("\\u{202e}gnp.exe"),
        "the bidi override is shown, not obeyed"
    );
    // Every part is there, and the ones without data say why.
    for heading in [
        "What was asked and done",
        "Time to ready",
        "Load",
        "Churn and disruption",
        "Alerts",
    ] {
        assert!(html.contains(&format!("\">{heading}</h3>")), "{heading}");
    }
    // No kubeconfig and no --prometheus: the sections say that no Prometheus was reachable.
    assert!(
        html.contains("No load data: no Prometheus reachable: "),
        "{}",
        &html[html.find("-load\"").unwrap()..][..600]
    );
    assert!(html.contains("No alert history: no Prometheus reachable: "));
    // Nor a cluster: the timeline is the churn actions', and says what it lacks.
    assert!(
        html.contains(
            "Migrations, restarts and interruptions not measured: no cluster reachable: "
        )
    );
    assert!(html.contains("<summary>All 30 events</summary>"));
    let charts = html.matches("<svg ").count();
    assert_eq!(charts, 3, "progress, histogram, churn timeline");
    assert!(html.contains(&f.run_id.to_string()));
    assert_charts_have_tables(&html);

    // With Prometheus answering for the hostile VM (a memory VM), its name reaches the load
    // section's chart and tables, escaped; without a cluster the page says why there are no
    // verdicts and that the thresholds are the defaults.
    let hostile = |level: f64| {
        (
            json!({"name": HOSTILE_VM, "namespace": "virtwork"}),
            (0..5).map(|k| (T0 + k * STEP, level)).collect::<Vec<_>>(),
        )
    };
    let stub = PromStub::start(
        Answer::ByQuery {
            rules: vec![(
                "kubevirt_vmi_memory".into(),
                matrix(&[
                    hostile(0.2),
                    (json!({"name": "virtwork-memory-3f1c7a-1"}), vec![(T0, 0.9)]),
                ]),
            )],
            otherwise: matrix(&[]),
        },
        false,
    );
    let page = f.dir.path().join("loaded.html");
    let out = virtwork(
        &f.db,
        &[
            "report",
            "--run-id",
            &f.run_id.to_string(),
            "--html",
            page.to_str().unwrap(),
            "--prometheus",
            stub.url(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_inert(&html);
    assert_charts_have_tables(&html);
    let load = html.split_once("id=\"run-1-load\"").unwrap().1;
    let load = load.split_once("id=\"run-1-churn\"").unwrap().0;
    let escaped = "virtwork-cpu-&lt;img src=x onerror=alert(1)&gt;";
    // The lowest mean leads the memory VMs' table (no verdicts without a cluster).
    let memory = load.split_once("<h4>memory: memory-used</h4>").unwrap().1;
    assert!(
        memory.contains(&format!(
            "<tbody><tr><td>{escaped}</td><td class=\"num\">20.0%</td>"
        )),
        "{memory}"
    );
    assert!(load.contains(
        "No verdicts: verify needs the run&#39;s VMs in the cluster: no cluster reachable: "
    ));
    assert!(load.contains("from the workloads&#39; default params"));
}

/// Nothing in `html` a reader's browser would fetch or run.
fn assert_inert(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    // (The hostile text holds `src=x` and `onerror=` as text; as markup every attribute is
    // written `name="..."`, and the only URL is the SVG namespace.)
    let without_namespace = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for forbidden in [
        "<script",
        "<img",
        "<link",
        "<iframe",
        "<object",
        " src=\"",
        " onerror=\"",
        " onload=\"",
        "http://",
        "https://",
        "url(",
    ] {
        assert!(
            !without_namespace.contains(forbidden),
            "page holds {forbidden:?}"
        );
    }
    for link in html.split(" href=\"").skip(1) {
        assert!(
            link.starts_with('#'),
            "a link out of the page: {}",
            &link[..40]
        );
    }
}

/// Every chart is a labelled image followed by a table of its data.
fn assert_charts_have_tables(html: &str) {
    let charts = html.matches("<svg ").count();
    assert_eq!(
        html.matches("role=\"img\" aria-labelledby=").count(),
        charts
    );
    for chart in html.split("<svg ").skip(1) {
        let after = chart.split_once("</svg>").unwrap().1;
        assert!(
            after.trim_start().starts_with("<table>")
                || after.trim_start().starts_with("<details><summary>"),
            "a chart without its table: {}",
            &after[..after.len().min(120)]
        );
    }
}

/// The page of a 1,000-VM run stays under 2 MiB (a CI artifact, a mail attachment). Prints
/// the size, the time `virtwork report` took and, with Chromium, the time to render it, for
/// docs/performance.md (`cargo test --test integration report::a_thousand -- --nocapture`).
#[test]
fn a_thousand_vm_page_stays_under_two_mib() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    let (run_id, _) = record_fleet(&db, 1000, 0);
    let page = dir.path().join("fleet.html");
    let stub = prometheus_stub();
    let started = std::time::Instant::now();
    let out = virtwork(
        &db,
        &[
            "report",
            "--run-id",
            &run_id.to_string(),
            "--html",
            page.to_str().unwrap(),
            "--prometheus",
            stub.url(),
        ],
    );
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let size = std::fs::metadata(&page).unwrap().len();
    eprintln!(
        "1000-VM page: {size} bytes ({} KiB), virtwork report took {took:.2?}",
        size / 1024
    );
    assert!(size < 2 * 1024 * 1024, "{size} bytes");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<summary>All 1000 VMs</summary>"));
    assert!(
        html.contains("<h4>cpu: vcpu-busy</h4>"),
        "with the load section"
    );
    if let Some(browser) = chromium() {
        let profile = dir.path().join("profile");
        std::fs::create_dir_all(&profile).unwrap();
        let started = std::time::Instant::now();
        let shot = dir.path().join("fleet.png");
        let out = headless(
            browser,
            &profile,
            &page,
            &[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1200,2600",
            ],
        );
        eprintln!(
            "chromium rendered it in {:.2?} (process start to exit)",
            started.elapsed()
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(console_messages(&text(&out.stderr)), Vec::<&str>::new());
    }
}

/// A Prometheus range answer (matrix) of `series`: (labels, samples as (unix time, value)).
fn matrix(series: &[(serde_json::Value, Vec<(i64, f64)>)]) -> String {
    let result: Vec<serde_json::Value> = series
        .iter()
        .map(|(metric, samples)| {
            json!({
                "metric": metric,
                "values": samples.iter().map(|(t, v)| json!([t, v.to_string()])).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"status": "success", "data": {"resultType": "matrix", "result": result}}).to_string()
}

/// A run's window runs a week from its start when it was never cleaned up: 2,520 s steps.
const STEP: i64 = 7 * 24 * 3600 / 240;

/// A Prometheus answering for the fixture's cpu VMs 0, 2 and 4 (2 far below the threshold,
/// and a VM of another run beside them) and one alert with a hostile name firing for VM 2.
fn prometheus_stub() -> PromStub {
    let step = STEP;
    let busy = |name: &str, level: f64| {
        (
            json!({"name": name, "namespace": "virtwork"}),
            (0..5).map(|k| (T0 + k * step, level)).collect::<Vec<_>>(),
        )
    };
    let vcpu = matrix(&[
        busy("virtwork-cpu-3f1c7a-0", 0.9),
        busy("virtwork-cpu-3f1c7a-2", 0.05),
        busy("virtwork-cpu-3f1c7a-4", 0.85),
        busy("someone-elses-vm", 0.5),
    ]);
    let alerts = matrix(&[(
        json!({"name": "<b>Hot</b>|virtwork-cpu-3f1c7a-2", "alertstate": "firing"}),
        vec![(T0 + step, 1.0), (T0 + 2 * step, 1.0)],
    )]);
    PromStub::start(
        Answer::ByQuery {
            rules: vec![
                ("ALERTS".into(), alerts),
                ("kubevirt_vmi_vcpu".into(), vcpu),
            ],
            otherwise: matrix(&[]),
        },
        false,
    )
}

#[test]
fn load_and_alerts_come_from_prometheus_over_the_runs_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    let (run_id, _) = record_fleet(&db, 6, 0);
    let stub = prometheus_stub();
    let step = STEP;
    let page = dir.path().join("load.html");
    let out = virtwork(
        &db,
        &[
            "report",
            "--run-id",
            &run_id.to_string(),
            "--html",
            page.to_str().unwrap(),
            "--prometheus",
            stub.url(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    let load = html.split_once("id=\"run-1-load\"").unwrap().1;
    let load = load.split_once("id=\"run-1-churn\"").unwrap().0;
    assert!(load.contains("<h4>cpu: vcpu-busy</h4>"), "{load}");
    assert!(
        load.contains("3 VMs with samples"),
        "only the run's VMs: {load}"
    );
    assert!(!load.contains("someone-elses-vm"));
    // The laggard leads the table, marked below the threshold in words.
    let first_row = load.split("<tbody><tr>").nth(1).unwrap();
    assert!(
        first_row.starts_with("<td>virtwork-cpu-3f1c7a-2</td>"),
        "{first_row}"
    );
    assert!(first_row.contains("class=\"bad\">below</span>"));
    assert!(load.contains(">highest VM</text>") && load.contains(">lowest VM</text>"));
    let alerts_part = html.split_once("id=\"run-1-alerts\"").unwrap().1;
    assert!(alerts_part.contains("<td>&lt;b&gt;Hot&lt;/b&gt;</td><td>virtwork-cpu-3f1c7a-2</td>"));
    assert!(!html.contains("<b>Hot"));
    // Every query stayed in the run's namespace and window.
    let seen: Vec<String> = stub
        .requests()
        .iter()
        .map(|r| percent_decoded(&r.path_and_query))
        .collect();
    assert!(seen.iter().any(|q| q.contains("ALERTS{")), "{seen:?}");
    // Besides the one first contact a direct Prometheus gets (a constant, not retried).
    let first_contact = "/api/v1/query?query=vector(1)";
    assert!(
        seen.iter().filter(|q| *q == first_contact).count() <= 1,
        "{seen:?}"
    );
    for query in seen.iter().filter(|q| *q != first_contact) {
        assert!(query.contains("/api/v1/query_range?"), "{query}");
        assert!(
            query.contains(&format!("start={T0}&end={}&step={step}", T0 + 240 * step)),
            "{query}"
        );
        assert!(query.contains("namespace=\"virtwork\""), "{query}");
    }
}

#[test]
fn unknown_runs_and_unwritable_pages_are_bad_input() {
    let f = fixture(3);
    let page = f.dir.path().join("other.html");
    let unknown = Uuid::new_v4().to_string();
    let out = virtwork(
        &f.db,
        &[
            "report",
            "--run-id",
            &unknown,
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        format!(
            "Error: --run-id {unknown}: no execution with this run id in {}: list recorded runs with `virtwork audit list`",
            f.db.display()
        )
    );
    assert!(!page.exists(), "no page written");

    let missing_dir = f.dir.path().join("nope").join("r.html");
    let out = virtwork(
        &f.db,
        &[
            "report",
            "--run-id",
            &f.run_id.to_string(),
            "--html",
            missing_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("does not exist; create it"));

    let out = virtwork(&f.db, &["report", "--html", page.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--run-id"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn several_runs_are_compared_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    let (first, _) = record_fleet(&db, 12, 0);
    let (second, _) = record_fleet(&db, 12, 3600);
    let page = dir.path().join("compare.html");
    let out = virtwork(
        &db,
        &[
            "report",
            "--run-id",
            &first.to_string(),
            "--run-id",
            &second.to_string(),
            "--html",
            page.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2 id=\"compare-h\">Runs compared</h2>"));
    let compare = html.split_once("id=\"compare\"").unwrap().1;
    let compare = compare.split_once("</section>").unwrap().0;
    assert!(compare.contains(&first.to_string()) && compare.contains(&second.to_string()));
    assert!(compare.contains(&format!(">run {}</text>", &first.to_string()[..8])));
    assert_eq!(html.matches("<section id=\"run-").count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Headless Chromium
// ---------------------------------------------------------------------------------------------

/// Debian's chromium, or None (skip) when absent and not required.
fn chromium() -> Option<&'static str> {
    let required = std::env::var("VIRTWORK_REQUIRE_CHROMIUM").as_deref() == Ok("1");
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        assert!(
            !required,
            "chromium is required (VIRTWORK_REQUIRE_CHROMIUM=1) but not found: apt-get install chromium"
        );
        eprintln!("SKIP: chromium not installed");
    }
    found
}

/// Runs headless Chromium on `page` with `args`, logging the console to stderr.
fn headless(browser: &str, profile: &Path, page: &Path, args: &[&str]) -> Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", profile)
        .output()
        .unwrap()
}

/// Console messages Chromium logged for the page (errors, CSP refusals, failed loads).
fn console_messages(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| line.contains(":CONSOLE") || line.contains("Refused to"))
        .collect()
}

/// Decodes `png` and counts the pixels that differ from the page background (white).
fn ink_pixels(png_path: &Path) -> (usize, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let total = (info.width * info.height) as usize;
    let ink = pixels
        .filter(|p| p.iter().take(3).any(|&c| c < 200))
        .count();
    (ink, total)
}

#[test]
fn chromium_renders_the_page_without_errors_or_fetches() {
    let Some(browser) = chromium() else {
        return;
    };
    let stub = prometheus_stub();
    let f = fixture_with(200, &["--prometheus", stub.url()]);
    let profile = f.dir.path().join("chromium-profile");
    std::fs::create_dir_all(&profile).unwrap();

    let dom = headless(browser, &profile, &f.page, &["--dump-dom"]);
    assert!(dom.status.success(), "{}", text(&dom.stderr));
    let dom_text = text(&dom.stdout);
    let stderr = text(&dom.stderr);
    assert_eq!(
        console_messages(&stderr),
        Vec::<&str>::new(),
        "console:\n{stderr}"
    );
    // What the reader's browser built: the headings, tables and charts, and the hostile text
    // as text (serialised escaped), never as an element.
    assert!(dom_text.contains(&format!("<h1>virtwork report: run {}</h1>", f.run_id)));
    assert!(dom_text.contains("<h3 id=\"run-1-ready\">Time to ready</h3>"));
    assert!(dom_text.contains("virtwork-cpu-&lt;img src=x onerror=alert(1)&gt;"));
    assert!(!dom_text.contains("<img"));
    assert!(!dom_text.contains("<script"));
    // Ready over time, the histogram, cpu's vcpu-busy band, churn, alerts.
    assert_eq!(dom_text.matches("<svg ").count(), 5);
    assert!(dom_text.contains("<h4>cpu: vcpu-busy</h4>"));

    let shot = f.dir.path().join("page.png");
    let out = headless(
        browser,
        &profile,
        &f.page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,2600",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(
        console_messages(&stderr),
        Vec::<&str>::new(),
        "console:\n{stderr}"
    );
    let (ink, total) = ink_pixels(&shot);
    // Text, tables and charts cover a few percent of a page; a blank or failed render none.
    assert!(
        ink * 100 > total,
        "the screenshot is nearly blank: {ink} of {total} pixels hold ink"
    );
    // docs/report.md's screenshot is this one: VIRTWORK_REPORT_SCREENSHOT=docs/report.png
    // (the page itself is kept beside it, as .html, to look at).
    if let Ok(dest) = std::env::var("VIRTWORK_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, &dest).unwrap();
        std::fs::copy(&f.page, Path::new(&dest).with_extension("html")).unwrap();
    }
}

#[test]
fn a_page_that_fetches_is_caught_by_the_console_check() {
    // The console check above must be able to fail: a page that tries to load an external
    // image is refused by the same Content-Security-Policy and logged.
    let Some(browser) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = fixture(3);
    let html = std::fs::read_to_string(&f.page).unwrap().replace(
        "<main>",
        "<main><img src=\"https://example.invalid/x.png\" alt=\"\">",
    );
    let page = dir.path().join("fetching.html");
    std::fs::write(&page, html).unwrap();
    let out = headless(browser, dir.path(), &page, &["--dump-dom"]);
    let stderr = text(&out.stderr);
    assert!(
        !console_messages(&stderr).is_empty(),
        "no console message for a refused load:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// The timeline against a cluster: the fake API server and a real Prometheus
// ---------------------------------------------------------------------------------------------

/// The cells of each row of the page's event table (tags stripped, entities as written).
fn event_rows(html: &str) -> Vec<Vec<String>> {
    let table = html
        .split_once("</summary><table><caption>Every churn action, migration, restart")
        .map(|(_, t)| t.split_once("</table>").unwrap().0)
        .unwrap_or_else(|| panic!("no event table in the page"));
    table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = cell.split_once('>').unwrap().1;
                    let inner = inner.split_once("</td>").unwrap().0;
                    let mut text = String::new();
                    let mut in_tag = false;
                    for c in inner.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => text.push(c),
                            _ => {}
                        }
                    }
                    text
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_timeline_shows_churn_restarts_and_migrations_from_the_cluster_and_prometheus() {
    use crate::disruption::{Env, assert_ok};
    use std::time::Duration;
    let env = Env::start();
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    let out = env.run(&[
        "--output",
        "json",
        "run",
        "--workloads",
        "cpu",
        "--vm-count",
        "3",
        "--timeout",
        "60",
    ]);
    assert_ok(&out, "run");
    let run_id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let vms = env.vms_of(&out);
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            3,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the VMIs:\n{}",
        prometheus.log()
    );
    std::thread::sleep(Duration::from_secs(6));
    let churn = env.run(&[
        "churn",
        "--run-id",
        &run_id,
        "--actions",
        "restart",
        "--duration",
        "1s",
        "--rate",
        "60/m",
        "--seed",
        "1",
    ]);
    assert_ok(&churn, "churn");
    let source = env.vmi_field(&vms[0], "/status/nodeName");
    env.migrate(&vms[0], "move-1");
    let target = env.vmi_field(&vms[0], "/status/nodeName");
    assert_ne!(source, target, "the fake moved the VMI");
    std::thread::sleep(Duration::from_secs(5));

    let page = env.dir.path().join("run.html");
    let out = env.run(&[
        "report",
        "--run-id",
        &run_id,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_ok(&out, "report");
    let html = std::fs::read_to_string(&page).unwrap();
    let part = html.split_once("id=\"run-1-churn\"").unwrap().1;
    let part = part.split_once("id=\"run-1-alerts\"").unwrap().0;
    assert!(
        part.contains("of the 3 VMs of the run in the cluster"),
        "{part}"
    );
    assert!(
        part.contains("interruptions measured with"),
        "Prometheus was found through the cluster: {part}"
    );
    let rows = event_rows(part);
    eprintln!("{rows:#?}");
    let of_kind =
        |kind: &str| -> Vec<&Vec<String>> { rows.iter().filter(|r| r[3] == kind).collect() };
    // The migration: its nodes, its object, how long it took.
    let migration = of_kind("migration")
        .into_iter()
        .find(|r| r[2] == vms[0])
        .unwrap_or_else(|| panic!("no migration of {}: {rows:#?}", vms[0]));
    assert!(
        migration[4].starts_with(&format!(
            "{source} → {target}, succeeded, read from migration-object (move-1)"
        )),
        "{migration:?}"
    );
    assert_ne!(migration[1], "-", "a start and an end");
    // Every VM churn restarted has its churn action and the restart the analysis found,
    // caused by that action.
    let churned: Vec<&String> = of_kind("churn action").iter().map(|r| &r[2]).collect();
    assert!(!churned.is_empty(), "{rows:#?}");
    for vm in churned {
        let restart = of_kind("restart")
            .into_iter()
            .find(|r| &r[2] == vm)
            .unwrap_or_else(|| panic!("no restart of {vm}: {rows:#?}"));
        assert!(restart[4].contains("cause: churn restart"), "{restart:?}");
    }
    // On the timeline itself: a row per disturbed VM with the items' tooltips.
    let svg = part
        .split_once("<svg ")
        .unwrap()
        .1
        .split_once("</svg>")
        .unwrap()
        .0;
    assert!(svg.contains(&format!("<title>{}</title>", vms[0])), "{svg}");
    assert!(svg.contains(&format!("<title>migration of virtwork/{} at ", vms[0])));
    assert!(svg.contains("<title>restart of virtwork/"));
    assert!(svg.contains("<title>churn action of virtwork/"));
    assert!(part.contains("VMs disturbed</summary>"));
    // The VMs nothing happened to have no row and no event: their workload was measured
    // throughout (a window reaching past the last scrape would read as an interruption).
    let untouched: Vec<&String> = vms
        .iter()
        .filter(|vm| !rows.iter().any(|r| &&r[2] == vm && r[3] != "interruption"))
        .collect();
    assert!(!untouched.is_empty(), "churn restarted every VM: {rows:#?}");
    assert!(
        rows.iter().all(|r| !untouched.contains(&&r[2])),
        "an interruption of an untouched VM: {rows:#?}"
    );
}

/// A recorded 1,000-VM run and its disruption analysis, made by `disturb(i)` for VM `i`.
fn analysed_fleet(
    db: &Path,
    disturb: impl Fn(usize, &mut virtwork::disruption::Findings),
) -> virtwork::htmlreport::RunRecord {
    use virtwork::disruption::evidence::VmiFacts;
    use virtwork::disruption::{Budget, Findings, assess};
    use virtwork::htmlreport::data::{Disruption, Fetched};
    let (run_id, _) = record_fleet(db, 1000, 0);
    let id: virtwork::model::RunId = run_id.to_string().parse().unwrap();
    let mut run = virtwork::commands::report::read_runs(db, &[virtwork::model::RunRef::Id(id)])
        .unwrap()
        .remove(0);
    let budget = Budget {
        max_interruption: Some(30.0),
        max_interruption_from: "two scrape intervals of 15s".into(),
        allow_restarts: virtwork::model::AllowRestarts::None,
    };
    let vms = (0..1000)
        .map(|i| {
            let mut f = Findings {
                namespace: "virtwork".into(),
                name: vm_name(i),
                workload: if i.is_multiple_of(2) { "cpu" } else { "memory" }.into(),
                run_id: Some(run_id.to_string()),
                vmi: Some(VmiFacts {
                    phase: Some("Running".into()),
                    ..VmiFacts::default()
                }),
                migrations: Vec::new(),
                restarts: Vec::new(),
                interruption: Some(virtwork::disruption::interruption::Interruption {
                    intervals: Vec::new(),
                    longest_seconds: 0.0,
                    total_seconds: 0.0,
                }),
                measured_by: vec!["vcpu-busy".into()],
            };
            disturb(i, &mut f);
            assess(f, &budget, true)
        })
        .collect();
    let span = virtwork::disruption::Span {
        from: T0 as f64,
        to: (T0 + 7200) as f64,
    };
    run.disruption = Fetched::Data(Disruption {
        vms,
        context: virtwork::disruption::report::Context {
            namespace: Some("virtwork".into()),
            run_id: Some(run_id.to_string()),
            span,
            span_from: "the run's window".into(),
            prometheus: Ok("prometheus-k8s in monitoring (service proxy)".into()),
            step: Some(15.0),
            scrape_interval: Some(15.0),
            budget,
        },
    });
    run
}

fn migration(
    i: usize,
    at: i64,
    from: virtwork::disruption::evidence::Source,
) -> virtwork::disruption::evidence::Migration {
    virtwork::disruption::evidence::Migration {
        name: Some(format!("{}-m{at}", vm_name(i))),
        start: Some((T0 + at) as f64),
        end: Some((T0 + at + 12) as f64),
        source_node: Some(format!("worker-{}.example.internal", i % 10)),
        target_node: Some(format!("worker-{}.example.internal", (i + 1) % 10)),
        result: virtwork::disruption::evidence::MigrationResult::Succeeded,
        from,
    }
}

fn interrupted(f: &mut virtwork::disruption::Findings, from: i64, seconds: i64) {
    let i = f.interruption.as_mut().unwrap();
    i.intervals
        .push(virtwork::disruption::interruption::Interval {
            start: (T0 + from) as f64,
            end: (T0 + from + seconds) as f64,
            ongoing: false,
        });
    i.longest_seconds = i.longest_seconds.max(seconds as f64);
    i.total_seconds += seconds as f64;
}

/// The page of a 1,000-VM run with its disruption timeline stays under 2 MiB, for the
/// shape an upgrade gives (`disruption`'s bench: 100 VMs migrated twice or once, 20
/// restarted, 10 silent for 10 minutes) and for the worst case, every VM migrated twice,
/// restarted once and interrupted twice. Prints both sizes for docs/performance.md
/// (`cargo test --test integration report::a_thousand_vm_timeline -- --nocapture`); with
/// Chromium, renders the worst case and checks its console.
#[test]
fn a_thousand_vm_timeline_stays_under_two_mib() {
    use virtwork::disruption::evidence::{Restart, RestartEvidence, Source};
    let provenance = virtwork::htmlreport::Provenance {
        database: "virtwork.db".into(),
        generated_at: at(7200),
        generator: "virtwork test".into(),
    };
    let restart = |i: usize, at: i64| Restart {
        at: (T0 + at) as f64,
        evidence: RestartEvidence::NewVmiAndCounterReset,
        vmi_uid: Some(format!("0b6c4a8e-3f1d-4d2a-9c7e-{i:012}")),
        cause: Some(format!(
            "churn restart (execution 0b6c4a8e-3f1d-4d2a-9c7e-{i:012})"
        )),
    };
    let dir = tempfile::tempdir().unwrap();
    let upgrade = analysed_fleet(&dir.path().join("upgrade.db"), |i, f| {
        let at = 1800 + (i as i64 % 50) * 30;
        match i {
            0..=49 => {
                f.migrations
                    .push(migration(i, at, Source::PrometheusMigrationMetrics));
                f.migrations
                    .push(migration(i, at + 2400, Source::MigrationObject));
            }
            50..=99 => f.migrations.push(migration(i, at, Source::VmiStatus)),
            100..=119 => {
                f.restarts.push(restart(i, at));
                interrupted(f, at - 30, 90);
            }
            120..=129 => interrupted(f, at, 600),
            _ => {}
        }
    });
    let worst = analysed_fleet(&dir.path().join("worst.db"), |i, f| {
        let at = 600 + (i as i64 % 100) * 50;
        f.migrations.push(migration(i, at, Source::MigrationObject));
        f.migrations
            .push(migration(i, at + 900, Source::PrometheusNodeChange));
        f.restarts.push(restart(i, at + 1800));
        interrupted(f, at + 1790, 45);
        interrupted(f, at + 2400, 20);
    });
    for (name, mut run) in [("upgrade", upgrade), ("worst", worst)] {
        // Every VM judged too, with its own threshold: the load section at its largest.
        run.load = virtwork::htmlreport::data::Fetched::Data(fleet_load());
        let started = std::time::Instant::now();
        let html = virtwork::htmlreport::page(std::slice::from_ref(&run), &provenance);
        let took = started.elapsed();
        let size = html.as_str().len();
        eprintln!(
            "1000-VM page with the {name} timeline: {size} bytes ({} KiB), built in {took:.2?}",
            size / 1024
        );
        assert!(size < 2 * 1024 * 1024, "{name}: {size} bytes");
        let load = html.as_str().split_once("id=\"run-1-load\"").unwrap().1;
        let load = load.split_once("id=\"run-1-churn\"").unwrap().0;
        eprintln!("  of which the load section: {} bytes", load.len());
        assert!(
            load.contains("Verdicts of the run&#39;s VM signals: 950 PASS, 40 BELOW, 10 NO DATA."),
            "{}",
            &load[..2000]
        );
        assert!(load.contains("<summary>All 500 VMs of cpu: vcpu-busy</summary>"));
        assert!(load.contains(">threshold 0.15 vCPU (167 VMs)</text>"));
        assert_eq!(load.matches("<summary>Expected shape of ").count(), 2);
        let timeline = html
            .as_str()
            .split_once("id=\"run-1-timeline-t\"")
            .unwrap()
            .1;
        let timeline = timeline.split_once("</svg>").unwrap().0;
        let rows = timeline
            .matches("text-anchor=\"end\" fill=\"#1a1a1a\"><title>")
            .count();
        assert_eq!(rows, 40, "{name}: at most 40 rows drawn");
        assert!(timeline.contains("Not drawn: "), "{name}");
        let page = dir.path().join(format!("{name}.html"));
        std::fs::write(&page, html.as_str()).unwrap();
        if name == "upgrade"
            && let Ok(dest) = std::env::var("VIRTWORK_REPORT_TIMELINE_SCREENSHOT")
            && let Some(browser) = chromium()
        {
            part_screenshot(
                browser,
                html.as_str(),
                dir.path(),
                Path::new(&dest),
                ("churn", "alerts"),
            );
        }
        if name == "upgrade"
            && let Ok(dest) = std::env::var("VIRTWORK_REPORT_LOAD_SCREENSHOT")
            && let Some(browser) = chromium()
        {
            part_screenshot(
                browser,
                html.as_str(),
                dir.path(),
                Path::new(&dest),
                ("load", "churn"),
            );
        }
        if name == "worst"
            && let Some(browser) = chromium()
        {
            let profile = dir.path().join("profile");
            std::fs::create_dir_all(&profile).unwrap();
            let started = std::time::Instant::now();
            let out = headless(browser, &profile, &page, &["--dump-dom"]);
            eprintln!(
                "chromium built its DOM in {:.2?} (process start to exit)",
                started.elapsed()
            );
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_eq!(console_messages(&text(&out.stderr)), Vec::<&str>::new());
            // The table stops at 2,000 events, the rest counted by kind.
            assert!(text(&out.stdout).contains("<summary>2000 of 5030 events ("));
            assert!(text(&out.stdout).contains("3030 more events not listed"));
        }
    }
}

/// The load section of the 1,000-VM fleet: cpu VMs (every third at 30 %, so two thresholds)
/// and memory VMs, 240 samples each, every VM judged (40 BELOW with verify's note, 10 NO
/// DATA without samples), two cpu VMs profiled (a 20-minute step).
fn fleet_load() -> virtwork::htmlreport::data::Load {
    use std::collections::BTreeMap;
    use virtwork::htmlreport::data::{
        Expected, Judged, Load, SignalSeries, VmSignal, expected_points,
    };
    use virtwork::profile_schedule::{Levels, LoadProfile};
    use virtwork::signals::contract::{LevelMapping, ProfiledCheck, Unit};
    use virtwork::verify::evaluate::Verdict;
    let profile = LoadProfile::step(Levels { low: 10, high: 90 }, 1200, 50).unwrap();
    let profiled = ProfiledCheck {
        profile,
        mapping: LevelMapping::Absolute {
            idle: 0.0,
            per_level: 0.01,
        },
        quiet_gap_secs: 0.0,
    };
    let mut cpu = BTreeMap::new();
    let mut memory = BTreeMap::new();
    for i in 0..1000 {
        let threshold = if i % 6 == 0 { 0.15 } else { 0.5 };
        let level = threshold + 0.1 + (i % 40) as f64 / 100.0;
        let (verdict, note, samples) = match i {
            _ if i % 50 == 7 || i % 50 == 8 => (
                Verdict::Below,
                Some("observed below the threshold over the whole 2h window".to_string()),
                (0..240).map(|k| (30.0 * k as f64, 0.05)).collect(),
            ),
            _ if i % 100 == 13 => (Verdict::NoData, None, Vec::new()),
            _ => (
                Verdict::Pass,
                None,
                (0..240)
                    .map(|k| {
                        let wobble = 0.04 * ((k + i) as f64 / 9.0).sin();
                        (30.0 * k as f64, level + wobble)
                    })
                    .collect(),
            ),
        };
        let expected = (i < 4 && i % 2 == 0).then(|| Expected {
            shape: profile.describe(),
            clock_from: "the clock verify fitted to the series".into(),
            points: expected_points(&profiled, None, 40.0 + 5.0 * i as f64, 0.0, 7200.0).unwrap(),
        });
        // A profiled VM's samples follow its profile (a little under full effect).
        let samples = match &expected {
            Some(e) => samples
                .iter()
                .map(|&(t, _)| {
                    let at = e
                        .points
                        .iter()
                        .rev()
                        .find(|p| p.0 <= t)
                        .map_or(0.0, |p| p.2);
                    (t, 0.92 * at + 0.02)
                })
                .collect(),
            None => samples,
        };
        let vm = VmSignal {
            samples,
            threshold: Some(threshold),
            verdict: Some(Judged {
                verdict,
                observed: Some(level),
                note,
            }),
            expected,
        };
        match i % 2 {
            0 => cpu.insert(vm_name(i), vm),
            _ => memory.insert(vm_name(i), vm),
        };
    }
    let series = |workload: &str, signal: &str, unit, vms| SignalSeries {
        workload: workload.into(),
        signal: signal.into(),
        description: signal.into(),
        unit,
        catalog: false,
        note: None,
        vms,
    };
    Load {
        series: vec![
            series("cpu", "vcpu-busy", Unit::VcpuFraction, cpu),
            series("memory", "memory-used", Unit::Ratio, memory),
        ],
        params_from: "each VM's own params".into(),
        verdicts: Ok("`virtwork verify --window 2h`".into()),
        undrawn: Vec::new(),
    }
}

/// docs/report-timeline.png (parts `("churn", "alerts")`) and docs/report-load.png
/// (`("load", "churn")`): one part of `page` alone (its head, style sheet and that part's
/// markup as generated), rendered by Chromium into `dest`, the page beside it as .html.
fn part_screenshot(browser: &str, page: &str, dir: &Path, dest: &Path, (from, to): (&str, &str)) {
    let head = page.split_once("<body>").unwrap().0;
    let part = page
        .split_once(&format!("<h3 id=\"run-1-{from}\">"))
        .unwrap()
        .1;
    let part = part
        .split_once(&format!("<h3 id=\"run-1-{to}\">"))
        .unwrap()
        .0;
    let alone = format!("{head}<body><main><h3 id=\"run-1-{from}\">{part}</main></body></html>");
    let file = dir.join(format!("{from}.html"));
    std::fs::write(&file, &alone).unwrap();
    let profile = dir.join("shot-profile");
    std::fs::create_dir_all(&profile).unwrap();
    let shot = dir.join(format!("{from}.png"));
    let out = headless(
        browser,
        &profile,
        &file,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,1900",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(console_messages(&text(&out.stderr)), Vec::<&str>::new());
    std::fs::copy(&shot, dest).unwrap();
    std::fs::copy(&file, dest.with_extension("html")).unwrap();
}

/// A 10/90 % cpu step of 60 s (as tests/verify.rs profiles its VMs).
const CPU_STEP: &str =
    "cpu.profile=step,cpu.profile-low=10,cpu.profile-high=90,cpu.profile-period=60s";

/// The rows of the first table after `marker` in `html`, as cell texts.
fn rows_after(html: &str, marker: &str) -> Vec<Vec<String>> {
    let part = html
        .split_once(marker)
        .unwrap_or_else(|| panic!("no {marker}"))
        .1;
    let body = part
        .split_once("<tbody>")
        .unwrap()
        .1
        .split_once("</tbody>")
        .unwrap()
        .0;
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = cell.split_once('>').unwrap().1;
                    let inner = inner.split_once("</td>").unwrap().0;
                    // The text of the cell without its markup (a verdict's span).
                    let mut text = String::new();
                    let mut in_tag = false;
                    for c in inner.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => text.push(c),
                            _ => {}
                        }
                    }
                    text
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_load_shows_each_vms_own_threshold_verify_verdicts_and_the_expected_shape() {
    use crate::disruption::{Env, assert_ok};
    use std::time::Duration;
    let env = Env::start();
    let Some(prometheus) = env.prometheus() else {
        return;
    };
    // A catalog entry whose one signal counts the VM's vCPU series (the default catalog
    // directory under HOME, which run and report both read).
    crate::disruption::write_web_entry(
        &env.dir.path().join(".virtwork/catalog"),
        "  - name: vcpu-series\n    query: 'count by (namespace, name) (kubevirt_vmi_vcpu_seconds_total{namespace=\"{{namespace}}\",name=\"{{name}}\"})'\n    threshold: 1\n    description: the VM's vCPUs are reported\n",
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["--output", "json", "run", "--timeout", "60"];
        args.extend_from_slice(extra);
        let out = env.run(&args);
        assert_ok(&out, "run");
        let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        (id, env.vms_of(&out))
    };
    // cpu at 30 %: each VM is held to 0.15 vCPU, not the default 0.5 (the fake serves 0.29).
    let (steady, steady_vms) = run(&[
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--params",
        "cpu.cpu-load-percent=30",
    ]);
    let (profiled, profiled_vms) = run(&["--workloads", "cpu", "--params", CPU_STEP]);
    let (catalog, catalog_vms) = run(&["--from-catalog", "web"]);
    let flat = &steady_vms[1];
    env.server.set_metrics_flat("virtwork", flat, true);
    // The passing VM's node counts vCPU time in milliseconds (a virt-handler rollout): verify
    // judges it in seconds, and its line and mean must be drawn in seconds too.
    env.server.set_vcpu_millis_for("virtwork", &steady_vms[0]);
    assert!(
        prometheus.wait_for_series(
            "count by (name) (kubevirt_vmi_vcpu_seconds_total)",
            4,
            Duration::from_secs(60)
        ),
        "Prometheus never saw the VMIs:\n{}",
        prometheus.log()
    );
    // The runs' windows are mostly scraped: a rate over a window twice the series' age reads
    // half the load, which verify calls too young.
    std::thread::sleep(Duration::from_secs(30));
    let page = env.dir.path().join("load.html");
    let out = env.run(&[
        "report",
        "--run-id",
        &steady,
        "--run-id",
        &profiled,
        "--run-id",
        &catalog,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_ok(&out, "report");
    let html = std::fs::read_to_string(&page).unwrap();
    let load_of = |run: usize| -> &str {
        let part = html
            .split_once(&format!("id=\"run-{run}-load\""))
            .unwrap()
            .1;
        part.split_once(&format!("id=\"run-{run}-churn\""))
            .unwrap()
            .0
    };

    // Run 1: each VM against its own threshold, verify's verdicts in words and counted.
    let steady_load = load_of(1);
    assert!(
        steady_load.contains("from each VM&#39;s own params"),
        "{steady_load}"
    );
    assert!(
        steady_load.contains("Verdicts of the run&#39;s VM signals: 1 PASS, 1 BELOW."),
        "{steady_load}"
    );
    assert!(
        steady_load.contains(">threshold 0.15 vCPU</text>"),
        "{steady_load}"
    );
    assert!(
        !steady_load.contains("0.50 vCPU"),
        "no default threshold: {steady_load}"
    );
    let rows = rows_after(steady_load, "<caption>The VMs verify failed");
    eprintln!("{rows:#?}");
    assert_eq!(rows.len(), 2, "{rows:#?}");
    // The flat VM first, BELOW its own threshold; the other passes it.
    assert_eq!(rows[0][0], *flat);
    assert_eq!(
        (rows[0][2].as_str(), rows[0][4].as_str()),
        ("0.15 vCPU", "BELOW")
    );
    assert_eq!(rows[1][0], steady_vms[0]);
    assert_eq!(
        (rows[1][2].as_str(), rows[1][4].as_str()),
        ("0.15 vCPU", "PASS")
    );
    let mean: f64 = rows[1][1]
        .trim_end_matches(" vCPU")
        .parse()
        .unwrap_or_else(|_| panic!("a mean in vCPU: {rows:#?}"));
    // In seconds, not 1000 times that (its first samples, scraped before the switch, read
    // near 0 once divided, so the mean is below the 0.29 served).
    assert!(
        mean > 0.0 && mean <= 1.2,
        "the milliseconds VM drawn in seconds: {rows:#?}"
    );
    assert!(rows[1][5].contains("values divided by 1000"), "{rows:#?}");
    // On the chart: the flat VM's line, marked by a cross and the word.
    let svg = steady_load
        .split_once("<svg ")
        .unwrap()
        .1
        .split_once("</svg>")
        .unwrap()
        .0;
    assert!(
        svg.contains(&format!(
            "<title>{flat}: BELOW (threshold 0.15 vCPU)</title><path d=\"M"
        )),
        "{svg}"
    );

    // Run 2: the profiled VM's expected shape beside its measured line, and as rows.
    let vm = &profiled_vms[0];
    let profiled_load = load_of(2);
    let svg = profiled_load
        .split_once("<svg ")
        .unwrap()
        .1
        .split_once("</svg>")
        .unwrap()
        .0;
    assert!(
        svg.contains(&format!("<title>{vm} expected</title>")),
        "{svg}"
    );
    assert!(svg.contains(&format!("<title>{vm} measured</title>")));
    assert!(
        profiled_load.contains(&format!("<summary>Expected shape of {vm}: step")),
        "{profiled_load}"
    );
    let phases = rows_after(profiled_load, "phase by phase</caption>");
    eprintln!("{phases:#?}");
    let levels: Vec<&str> = phases.iter().map(|r| r[1].as_str()).collect();
    assert!(
        levels.contains(&"90") && levels.contains(&"10"),
        "{phases:#?}"
    );
    assert!(
        phases.iter().any(|r| r[1] == "90" && r[2] == "0.90 vCPU"),
        "level 90 at full effect: {phases:#?}"
    );

    // Run 3: the catalog entry's signal drawn and judged like a built-in.
    let catalog_load = load_of(3);
    assert!(
        catalog_load.contains("<h4>web: vcpu-series (catalog signal)</h4>"),
        "{catalog_load}"
    );
    assert_eq!(catalog_load.matches("<svg ").count(), 1, "{catalog_load}");
    let rows = rows_after(catalog_load, "<caption>The VMs verify failed");
    assert_eq!(rows[0][0], catalog_vms[0]);
    assert_eq!(
        (rows[0][2].as_str(), rows[0][4].as_str()),
        ("1", "PASS"),
        "{rows:#?}"
    );
}

/// The load part of run `run` (1-based) of a page.
fn load_part(html: &str, run: usize) -> &str {
    let part = html
        .split_once(&format!("id=\"run-{run}-load\""))
        .unwrap()
        .1;
    part.split_once(&format!("id=\"run-{run}-churn\""))
        .unwrap()
        .0
}

#[test]
fn after_cleanup_each_vm_is_drawn_against_the_params_its_run_recorded() {
    use crate::disruption::{Env, assert_ok};
    // The usual CI order: run, (verify,) cleanup, report. The VMs are gone from the cluster,
    // so the page can only read their params from the audit database.
    let env = Env::start();
    let run = |extra: &[&str]| {
        let mut args = vec!["--output", "json", "run", "--timeout", "60"];
        args.extend_from_slice(extra);
        let out = env.run(&args);
        assert_ok(&out, "run");
        let id = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        (id, env.vms_of(&out))
    };
    let started = jiff::Timestamp::now().as_second();
    let (steady, steady_vms) = run(&[
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--params",
        "cpu.cpu-load-percent=30",
    ]);
    let (profiled, profiled_vms) = run(&["--workloads", "cpu", "--params", CPU_STEP]);
    for id in [&steady, &profiled] {
        assert_ok(&env.run(&["cleanup", "--yes", "--run-id", id]), "cleanup");
    }
    assert!(
        env.server
            .objects("virtualmachines", Some("virtwork"))
            .is_empty(),
        "the VMs are deleted"
    );
    // Prometheus still holds their series.
    let busy = |name: &str| {
        (
            json!({"name": name, "namespace": "virtwork"}),
            (1..8).map(|k| (started + k * 15, 0.29)).collect::<Vec<_>>(),
        )
    };
    let all: Vec<_> = steady_vms
        .iter()
        .chain(&profiled_vms)
        .map(|n| busy(n))
        .collect();
    let stub = PromStub::start(
        Answer::ByQuery {
            rules: vec![("kubevirt_vmi_vcpu".into(), matrix(&all))],
            otherwise: matrix(&[]),
        },
        false,
    );
    let db = env.dir.path().join("audit.db");
    let report_args = |page: &Path| {
        vec![
            "report".to_string(),
            "--run-id".into(),
            steady.clone(),
            "--run-id".into(),
            profiled.clone(),
            "--html".into(),
            page.display().to_string(),
            "--prometheus".into(),
            stub.url().to_string(),
        ]
    };
    // The cluster reachable but empty, then not reachable at all (no kubeconfig).
    let reachable = env.dir.path().join("reachable.html");
    let args = report_args(&reachable);
    let out = env.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ok(&out, "report");
    let unreachable = env.dir.path().join("unreachable.html");
    let args = report_args(&unreachable);
    let out = virtwork(&db, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (page, why) in [
        (reachable, "no VM of the run is left in namespace virtwork"),
        (unreachable, "no cluster reachable"),
    ] {
        let html = std::fs::read_to_string(&page).unwrap();
        let steady_load = load_part(&html, 1);
        // 30 % of a vCPU is held to half of it, as verify holds it: not the default 0.5.
        assert!(
            steady_load.contains(">threshold 0.15 vCPU</text>"),
            "{steady_load}"
        );
        assert!(!steady_load.contains("0.50 vCPU"), "{steady_load}");
        assert!(
            steady_load.contains(
                "from each VM&#39;s own params, as its run recorded them in the audit database; \
                 the VMs could not be read: "
            ) && steady_load.contains(why),
            "{steady_load}"
        );
        assert!(!steady_load.contains("default params"), "{steady_load}");
        assert!(
            steady_load.contains("No verdicts: verify needs the run&#39;s VMs in the cluster"),
            "{steady_load}"
        );
        let rows = rows_after(steady_load, "<caption>");
        assert!(
            rows.iter()
                .filter(|r| r.contains(&"0.15 vCPU".to_string()))
                .count()
                == 2,
            "each VM's own threshold in the table: {rows:#?}"
        );
        // The profiled VM: its expected step shape drawn from the recorded profile.
        let vm = &profiled_vms[0];
        let profiled_load = load_part(&html, 2);
        assert!(
            profiled_load.contains(&format!("<title>{vm} expected</title>")),
            "{profiled_load}"
        );
        assert!(
            profiled_load.contains(&format!("<summary>Expected shape of {vm}: step")),
            "{profiled_load}"
        );
        let phases = rows_after(profiled_load, "phase by phase</caption>");
        assert!(
            phases.iter().any(|r| r[1] == "90" && r[2] == "0.90 vCPU"),
            "{phases:#?}"
        );
    }
}

#[test]
fn html_replaces_only_a_regular_file_and_dash_is_standard_output() {
    let f = fixture(3);
    let run = f.run_id.to_string();
    let report = |html: &Path| {
        virtwork(
            &f.db,
            &["report", "--run-id", &run, "--html", html.to_str().unwrap()],
        )
    };
    let refused = |html: &Path, kind: &str| {
        let out = report(html);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr).trim(),
            format!(
                "Error: --html {}: is {kind}; expected the path of an HTML file to create or \
                 replace (a regular file), or - to write the page to standard output",
                html.display()
            )
        );
        assert!(out.stdout.is_empty());
    };
    // A fifo (a reader waiting on it would otherwise find a regular file in its place).
    let fifo = f.dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    refused(&fifo, "a fifo");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A link to a device (as root, the rename put a regular file in place of /dev/full).
    let device = f.dir.path().join("null.html");
    std::os::unix::fs::symlink("/dev/null", &device).unwrap();
    refused(&device, "a character device");
    assert_eq!(std::fs::read_link(&device).unwrap(), Path::new("/dev/null"));
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device(),
        "/dev/null untouched"
    );
    // A link to nothing.
    let dangling = f.dir.path().join("gone.html");
    std::os::unix::fs::symlink(f.dir.path().join("nowhere"), &dangling).unwrap();
    refused(&dangling, "a symbolic link to nothing");
    assert!(!f.dir.path().join("nowhere").exists());
    // A link to a regular file: the page is written to that file, the link stays.
    let linked = f.dir.path().join("latest.html");
    std::os::unix::fs::symlink(&f.page, &linked).unwrap();
    std::fs::write(&f.page, "old").unwrap();
    let out = report(&linked);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::symlink_metadata(&linked)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(&f.page)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    // `-`: the page on standard output, nothing else there, no file named `-`.
    let out = virtwork(&f.db, &["report", "--run-id", &run, "--html", "-"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "{}",
        &page[..page.len().min(200)]
    );
    assert!(page.trim_end().ends_with("</html>"));
    assert!(page.contains(&run));
    assert!(!f.dir.path().join("-").exists(), "no file named -");
}

#[test]
fn no_prometheus_builds_the_page_without_contacting_the_cluster() {
    let env = crate::disruption::Env::start();
    let db = env.dir.path().join("audit.db");
    let (run_id, _) = record_fleet(&db, 4, 0);
    let page = env.dir.path().join("alone.html");
    let before = env.server.request_log().len();
    // The kubeconfig names the fake API server: with --no-prometheus it gets no request.
    let out = env.run(&[
        "report",
        "--run-id",
        &run_id.to_string(),
        "--html",
        page.to_str().unwrap(),
        "--no-prometheus",
    ]);
    crate::disruption::assert_ok(&out, "report");
    let seen = env.server.request_log();
    assert_eq!(
        seen.len(),
        before,
        "requests: {:?}",
        seen[before..]
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("left out with --no-prometheus (the audit database alone)"));
    assert!(
        html.contains("<h2 id=\"run-1-h\">"),
        "the run's records are there"
    );
}

#[test]
fn sixteen_thousand_churn_actions_keep_the_page_under_two_mib() {
    // A long churn of a 1,000-VM run, from the audit database alone (no cluster, no
    // Prometheus): every action is an event of the timeline's table.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    let n = 1_000;
    let (run_id, _) = record_fleet(&db, n, 0);
    let auditor = Auditor::open_path(&db).unwrap();
    let churn_id = Uuid::new_v4();
    let churn = auditor.start_execution(
        churn_id,
        &virtwork::audit::churn::churn_params("virtwork", None, false),
    );
    churn.link_cleanup_to_runs(&[run_id.to_string()]);
    let actions = 16_000;
    for k in 0..actions {
        let action = ["restart", "stop-start", "migrate"][k % 3];
        // Most on 50 VMs (more than the chart's 40 rows), so rows are crowded too.
        let vm = format!("virtwork/{}", vm_name(2 * (k % 50) + 10));
        let failed = k % 400 == 7;
        churn.record_event(&Event {
            event_type: match failed {
                true => EventType::ChurnActionFailed,
                false => EventType::ChurnAction,
            },
            message: format!(
                "{action} {vm}: {}",
                if failed { "failed" } else { "succeeded" }
            ),
            error_detail: failed.then(|| "the VMI did not come back".to_string()),
            vm_name: None,
            workload_name: None,
        });
    }
    churn.complete_execution(ExecutionStatus::Success, None);
    assert!(auditor.flush());
    drop(auditor);
    // Spread over ten hours from the run's third minute.
    let conn = Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE events SET occurred_at = strftime('%Y-%m-%dT%H:%M:%SZ', ?2 + 180 + (id * 9) % 36000, 'unixepoch')
         WHERE audit_id = (SELECT id FROM audit_log WHERE run_id = ?1)",
        params![churn_id.to_string(), T0],
    )
    .unwrap();
    conn.execute(
        "UPDATE audit_log SET started_at = ?2, completed_at = ?3 WHERE run_id = ?1",
        params![churn_id.to_string(), at(170), at(36_200)],
    )
    .unwrap();
    drop(conn);
    let page = dir.path().join("churned.html");
    let out = virtwork(
        &db,
        &[
            "report",
            "--run-id",
            &run_id.to_string(),
            "--html",
            page.to_str().unwrap(),
            "--no-prometheus",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    eprintln!("page: {} KiB", html.len() / 1024);
    assert!(html.len() < 2 * 1024 * 1024, "{} bytes", html.len());
    // The fixture's own 30 actions (3 failed) and these 16,000 (40 failed).
    let total = actions + 30;
    let failed = 40 + 3;
    let churn_part = html.split_once("id=\"run-1-churn\"").unwrap().1;
    assert!(
        churn_part.contains(&format!(
            "<summary>2000 of {total} events (interruptions, restarts, migrations and failed \
             churn actions first)</summary>"
        )),
        "{}",
        &churn_part[..2000]
    );
    assert_eq!(event_rows(churn_part).len(), 2000);
    assert!(
        churn_part.contains(&format!(
            "{} more events not listed (the table stops at 2000 rows); by kind: churn action: {}.",
            total - 2000,
            total - 2000
        )),
        "every failed action is listed, the rest counted"
    );
    assert_eq!(
        event_rows(churn_part)
            .iter()
            .filter(|r| r[3] == "churn action failed")
            .count(),
        failed
    );
    // The chart's crowded rows are thinned, and say so.
    let svg = churn_part.split_once("<svg ").unwrap().1;
    let svg = svg.split_once("</svg>").unwrap().0;
    let marks = svg.matches("<title>churn action").count();
    assert!(marks <= 40 * 100, "{marks} marks");
    let after = churn_part.split_once("</svg>").unwrap().1;
    assert!(
        after.starts_with("<p class=\"note\">")
            && after.contains("marks on crowded rows are not drawn (at most 100 a row"),
        "{}",
        &after[..300]
    );
    assert_inert(&html);
}

#[test]
fn catalog_dir_names_the_catalog_that_judges_catalog_vms() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("virtwork.db");
    // A catalog entry outside the default directory (~/.virtwork/catalog is empty).
    let catalog = dir.path().join("team-catalog");
    crate::disruption::write_web_entry(
        &catalog,
        "  - name: vcpu-series\n    query: 'count by (namespace, name) (kubevirt_vmi_vcpu_seconds_total{namespace=\"{{namespace}}\",name=\"{{name}}\"})'\n    threshold: 1\n    description: the VM's vCPUs are reported\n",
    );
    let auditor = Auditor::open_path(&db).unwrap();
    let run_id = Uuid::new_v4();
    let exec = auditor.start_execution(run_id, &run_params(1, "ctx"));
    exec.record_vm(&VmRecord {
        vm_name: "virtwork-web-1".into(),
        namespace: "virtwork".into(),
        component: "web".into(),
        role: None,
        cpu_cores: 2,
        memory: "2Gi".into(),
        container_disk_image: "quay.io/containerdisks/fedora:42".into(),
        data_disk_size: None,
        phase: None,
    });
    exec.complete_execution(ExecutionStatus::Success, None);
    assert!(auditor.flush());
    drop(auditor);
    let now = jiff::Timestamp::now().as_second();
    let stub = PromStub::start(
        Answer::ByQuery {
            rules: vec![(
                "kubevirt_vmi_vcpu".into(),
                matrix(&[(
                    json!({"name": "virtwork-web-1", "namespace": "virtwork"}),
                    (0..4).map(|k| (now + k * 15, 2.0)).collect(),
                )]),
            )],
            otherwise: matrix(&[]),
        },
        false,
    );
    let page = dir.path().join("catalog.html");
    let report = |extra: &[&str]| {
        let run = run_id.to_string();
        let mut args = vec![
            "report",
            "--run-id",
            &run,
            "--html",
            page.to_str().unwrap(),
            "--prometheus",
            stub.url(),
        ];
        args.extend_from_slice(extra);
        let out = virtwork(&db, &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let html = std::fs::read_to_string(&page).unwrap();
        load_part(&html, 1).to_string()
    };
    let heading = "<h4>web: vcpu-series (catalog signal)</h4>";
    // The default catalog has no such entry: nothing of it is drawn.
    assert!(!report(&[]).contains(heading));
    let load = report(&["--catalog-dir", catalog.to_str().unwrap()]);
    assert!(load.contains(heading), "{load}");
    assert!(load.contains(">threshold 1</text>"), "{load}");
}
