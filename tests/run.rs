//! `virtwork run` against the fake API server: the real binary, real HTTP, assertions on the
//! server's object state and request log (creation, plan fidelity, faults, readiness through
//! one watch, preflight refusals, the client rate limit, interrupts).

use crate::binary;
use crate::support;
use crate::test_config;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use binary::Env;
use serde_json::Value;
use support::names::{tag_of, tagged};
use support::{
    ControllerOptions, Denial, FakeApiServer, FaultAction, Faults, Options, RequestRecord,
    SchemaMode, ScriptedFault,
};

const NS: &str = "virtwork";

/// The real binary against `server`; every command of this file runs `virtwork run`.
fn run_env(server: &FakeApiServer) -> Env {
    Env::for_subcommand(server, "run")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_output(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            stdout(out),
            stderr(out)
        )
    })
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["labels"][key].as_str()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn names(objects: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = objects.iter().map(|o| name(o).to_string()).collect();
    names.sort();
    names
}

/// Mutating requests other than access reviews (which write nothing).
fn writes(log: &[RequestRecord]) -> Vec<&RequestRecord> {
    log.iter()
        .filter(|r| {
            matches!(
                r.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .filter(|r| r.resource != "selfsubjectaccessreviews")
        .collect()
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        stdout(out),
        stderr(out)
    );
}

/// The run id of the VMs a run created in `NS` (one run).
fn run_id_in(server: &FakeApiServer) -> String {
    let vms = server.objects("virtualmachines", Some(NS));
    label(&vms[0], "virtwork/run-id")
        .expect("run id label")
        .to_string()
}

/// `name` as the run that created the VMs in `NS` named it.
fn tagged_in(server: &FakeApiServer, name: &str) -> String {
    tagged(name, &run_id_in(server))
}

fn fast_server() -> FakeApiServer {
    FakeApiServer::start(Options::default())
}

// ---------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------

#[test]
fn cpu_only_creates_one_vm_with_its_secret_and_prints_the_cleanup_command() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu", "--timeout", "60"]);
    assert_success(&out);
    // The summary says where the run was recorded.
    assert!(
        stdout(&out).contains(&format!("  Audit DB:  {}\n", env.db().display())),
        "{}",
        stdout(&out)
    );

    let vms = server.objects("virtualmachines", Some(NS));
    let id = run_id_in(&server);
    assert_eq!(names(&vms), vec![tagged("virtwork-cpu-0", &id)]);
    let secrets = server.objects("secrets", Some(NS));
    assert_eq!(
        names(&secrets),
        vec![tagged("virtwork-cpu-0-cloudinit", &id)]
    );
    assert!(server.objects("services", Some(NS)).is_empty());
    let namespace = server.get("namespaces", "", NS).expect("namespace created");
    assert_eq!(
        label(&namespace, "app.kubernetes.io/managed-by"),
        Some("virtwork")
    );

    let run_id = label(&vms[0], "virtwork/run-id")
        .expect("run id label")
        .to_string();
    assert_eq!(label(&secrets[0], "virtwork/run-id"), Some(run_id.as_str()));
    let text = stdout(&out);
    assert!(text.contains("Deployment complete."), "{text}");
    assert!(
        text.contains(&format!(
            "virtwork cleanup --namespace {NS} --run-id {run_id}"
        )),
        "{text}"
    );
    let logs = stderr(&out);
    for message in [
        "namespace ensured",
        "creating VMs",
        "waiting for VMs to become ready",
        "all VMs ready",
        "deployment summary",
    ] {
        assert!(logs.contains(message), "missing log {message:?}:\n{logs}");
    }
    // Per-object lines are DEBUG (--verbose): at INFO a large run stays readable.
    for message in ["secret created", "vm created"] {
        assert!(!logs.contains(message), "{message:?} at INFO:\n{logs}");
    }
}

#[test]
fn full_default_run_creates_every_object_and_reports_json() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&["--output", "json", "--timeout", "120"]);
    assert_success(&out);
    let doc = json_output(&out);
    assert_eq!(doc["status"], "success");
    assert_eq!(doc["created"]["vms"], 11);
    assert_eq!(doc["created"]["secrets"], 11);
    assert_eq!(doc["created"]["services"], 2);
    assert_eq!(doc["vms_ready"], 11);

    assert_eq!(server.objects("virtualmachines", Some(NS)).len(), 11);
    assert_eq!(server.objects("secrets", Some(NS)).len(), 11);
    assert_eq!(server.objects("services", Some(NS)).len(), 2);
    let dvs = server.objects("datavolumes", Some(NS));
    assert_eq!(
        Value::from(dvs.len()),
        doc["created"]["data_volumes"],
        "DataVolumes made by the simulated controller"
    );
    assert!(!dvs.is_empty());
    for vm in doc["vms"].as_array().unwrap() {
        assert_eq!(vm["phase"], "Running", "{vm}");
        assert_eq!(vm["ready"], true);
        assert!(vm["ready_at"].is_string());
    }
    let run_id = doc["run_id"].as_str().unwrap();
    for kind in ["virtualmachines", "secrets", "services"] {
        for object in server.objects(kind, Some(NS)) {
            assert_eq!(
                label(&object, "virtwork/run-id"),
                Some(run_id),
                "{kind} {}",
                name(&object)
            );
        }
    }
}

#[test]
fn vm_count_multiplies_vms_per_workload() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu,network",
        "--vm-count",
        "3",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let vms = names(&server.objects("virtualmachines", Some(NS)));
    // network has a server and a client role per count.
    assert_eq!(vms.len(), 3 + 6, "{vms:?}");
    assert!(vms.contains(&tagged_in(&server, "virtwork-cpu-2")));
    assert_eq!(server.objects("services", Some(NS)).len(), 1);
}

#[test]
fn running_again_grows_the_fleet_and_two_runs_started_together_both_succeed() {
    let server = fast_server();
    let env = run_env(&server);
    let args = [
        "--workloads",
        "cpu,network",
        "--output",
        "json",
        "--timeout",
        "60",
    ];
    let first = env.run(&args);
    assert_success(&first);
    // Two more runs of the same workloads into the same namespace, at the same moment.
    let spawn = || {
        env.command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outputs = [
        first,
        a.wait_with_output().unwrap(),
        b.wait_with_output().unwrap(),
    ];
    let mut run_ids = Vec::new();
    for out in &outputs {
        assert_success(out);
        run_ids.push(json_output(out)["run_id"].as_str().unwrap().to_string());
    }
    let vms = server.objects("virtualmachines", Some(NS));
    assert_eq!(vms.len(), 3 * 3, "{:?}", names(&vms));
    for run_id in &run_ids {
        // Each run's VMs carry its tag in their names; none was lost to another run.
        let own: Vec<String> = vms
            .iter()
            .filter(|vm| label(vm, "virtwork/run-id") == Some(run_id.as_str()))
            .map(|vm| name(vm).to_string())
            .collect();
        let mut expected: Vec<String> = [
            "virtwork-cpu-0",
            "virtwork-network-client-0",
            "virtwork-network-server-0",
        ]
        .iter()
        .map(|n| tagged(n, run_id))
        .collect();
        expected.sort();
        assert_eq!(own, expected);
        // Its network clients reach its own server Service, which selects only its VMs.
        let service_name = tagged("virtwork-iperf3-server", run_id);
        let service = server
            .get("services", NS, &service_name)
            .unwrap_or_else(|| panic!("{service_name} missing"));
        assert_eq!(
            service["spec"]["selector"]["virtwork/run-id"],
            run_id.as_str()
        );
        let client = server
            .get(
                "secrets",
                NS,
                &tagged("virtwork-network-client-0-cloudinit", run_id),
            )
            .unwrap();
        assert!(
            secret_userdata(&client).contains(&format!("{service_name}.{NS}.svc.cluster.local")),
            "{run_id}"
        );
    }
    assert_eq!(server.objects("services", Some(NS)).len(), 3);
}

#[test]
fn catalog_entries_are_created_like_built_ins() {
    let server = fast_server();
    let env = run_env(&server);
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    let out = env.run(&[
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "sysbench",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let vms = server.objects("virtualmachines", Some(NS));
    assert!(!vms.is_empty());
    for vm in &vms {
        assert_eq!(label(vm, "app.kubernetes.io/component"), Some("sysbench"));
    }
}

#[test]
fn a_single_role_catalog_service_selects_only_this_runs_vms() {
    let server = fast_server();
    let env = run_env(&server);
    let catalog = env.dir.path().join("catalog");
    let entry = catalog.join("webapp");
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(
        entry.join("webapp.service"),
        "[Service]\nExecStart=/usr/bin/true\n",
    )
    .unwrap();
    std::fs::write(
        entry.join("workload.yaml"),
        "service: {ports: [{name: http, port: 8080}]}\n",
    )
    .unwrap();
    // Workloads that merely share the component label: a foreign VMI and another run's VMI.
    let other_run = "7d3e2f10-8a4b-4c5d-9e6f-0a1b2c3d4e5f";
    for (vmi, labels) in [
        (
            "foreign-webapp",
            serde_json::json!({"app.kubernetes.io/component": "webapp"}),
        ),
        (
            "virtwork-webapp-9",
            serde_json::json!({
                "app.kubernetes.io/component": "webapp",
                "app.kubernetes.io/managed-by": "virtwork",
                "virtwork/run-id": other_run,
            }),
        ),
    ] {
        server.insert(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": vmi, "namespace": NS, "labels": labels},
            "spec": {"domain": {"devices": {}}},
        }));
    }

    let dry = env.run(&[
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "webapp",
        "--dry-run",
        "--output",
        "json",
    ]);
    assert_success(&dry);
    let plan = json_output(&dry);
    let planned_id = plan["run_id"].as_str().unwrap();
    assert_eq!(
        plan["services"][0]["spec"]["selector"],
        serde_json::json!({
            "app.kubernetes.io/component": "webapp",
            "app.kubernetes.io/managed-by": "virtwork",
            "virtwork/run-id": planned_id,
        }),
        "rendered selector"
    );

    let out = env.run(&[
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--from-catalog",
        "webapp",
        "--vm-count",
        "2",
        "--output",
        "json",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let run_id = json_output(&out)["run_id"].as_str().unwrap().to_string();
    // Catalog Services keep their entry's name: its clients are written against it.
    let service = server.get("services", NS, "virtwork-webapp").unwrap();
    let selector: Vec<String> = service["spec"]["selector"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect();
    // Ask the API server which VMIs the Service's selector matches.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let matched: Vec<String> = runtime.block_on(async {
        let client = server.client().await;
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            client,
            NS,
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstance"),
                "virtualmachineinstances",
            ),
        );
        let params = kube::api::ListParams::default().labels(&selector.join(","));
        let mut names: Vec<String> = api
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| o.metadata.name.unwrap_or_default())
            .collect();
        names.sort();
        names
    });
    assert_eq!(
        matched,
        vec![
            tagged("virtwork-webapp-0", &run_id),
            tagged("virtwork-webapp-1", &run_id)
        ]
    );
    for vmi in &matched {
        let object = server.get("virtualmachineinstances", NS, vmi).unwrap();
        assert_eq!(label(&object, "virtwork/run-id"), Some(run_id.as_str()));
    }
}

#[test]
fn a_run_into_an_existing_namespace_leaves_it_untouched() {
    let server = fast_server();
    // Another tool's namespace; this user may not patch namespaces at all.
    server.insert(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": "team-a",
            "labels": { "app.kubernetes.io/managed-by": "Helm", "team": "a" },
            "annotations": { "meta.helm.sh/release-name": "team-a" },
        },
    }));
    server.update_faults(|f| f.denials.push(Denial::new("patch", "namespaces")));
    let before = server.get("namespaces", "", "team-a").unwrap();
    let env = run_env(&server);
    let out = env.run(&[
        "--namespace",
        "team-a",
        "--workloads",
        "cpu",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    assert_eq!(server.objects("virtualmachines", Some("team-a")).len(), 1);
    let after = server.get("namespaces", "", "team-a").unwrap();
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"]);
    assert_eq!(
        after["metadata"]["annotations"],
        before["metadata"]["annotations"]
    );
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "the namespace was written to"
    );
    let namespace_writes: Vec<_> = writes(&server.request_log())
        .into_iter()
        .filter(|r| r.resource == "namespaces" && r.verb != "create")
        .cloned()
        .collect();
    assert!(namespace_writes.is_empty(), "{namespace_writes:?}");

    // A namespace the run creates records the run as its creator.
    let out = env.run(&[
        "--namespace",
        "made-by-run",
        "--workloads",
        "cpu",
        "--output",
        "json",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let run_id = json_output(&out)["run_id"].as_str().unwrap().to_string();
    let created = server.get("namespaces", "", "made-by-run").unwrap();
    assert_eq!(
        created["metadata"]["annotations"]["virtwork/created-by-run"],
        run_id.as_str()
    );
    assert_eq!(
        label(&created, "app.kubernetes.io/managed-by"),
        Some("virtwork")
    );
}

#[test]
fn ssh_key_reaches_every_cloud_init_secret() {
    let server = fast_server();
    let env = run_env(&server);
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvirtworkTestKeyOnlyForTests tester@example";
    let out = env.run(&[
        "--workloads",
        "cpu,memory",
        "--ssh-key",
        key,
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let secrets = server.objects("secrets", Some(NS));
    assert_eq!(secrets.len(), 2);
    for secret in secrets {
        let userdata = secret_userdata(&secret);
        assert!(userdata.contains(key), "{userdata}");
    }
}

fn secret_userdata(secret: &Value) -> String {
    if let Some(text) = secret["stringData"]["userdata"].as_str() {
        return text.to_string();
    }
    let encoded = secret["data"]["userdata"].as_str().expect("userdata key");
    String::from_utf8(base64_decode(encoded)).unwrap()
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[test]
fn created_objects_match_the_dry_run_plan_and_the_kubevirt_schema() {
    // The fake server checks every KubeVirt object against KubeVirt's swagger in strict mode
    // (unknown fields rejected with 400) whenever the schema is present.
    let Some(validator) = support::apiserver::kubevirt_schema() else {
        return; // load_schema printed the SKIPPED notice (and panics under VIRTWORK_REQUIRE_SCHEMA=1)
    };
    let server = FakeApiServer::start(Options {
        schema: Some(validator),
        schema_mode: SchemaMode::Strict,
        ..Options::default()
    });
    let env = run_env(&server);
    let plan = env.run(&["--dry-run", "--output", "json"]);
    assert_success(&plan);
    let plan = json_output(&plan);
    let out = env.run(&["--output", "json", "--timeout", "120"]);
    assert_success(&out);
    let run_id = json_output(&out)["run_id"].as_str().unwrap().to_string();
    let planned_id = plan["run_id"].as_str().unwrap();
    assert!(
        server.schema_violations().is_empty(),
        "{:?}",
        server.schema_violations()
    );

    for (kind, resource) in [
        ("vms", "virtualmachines"),
        ("secrets", "secrets"),
        ("services", "services"),
    ] {
        for planned in plan[kind].as_array().unwrap() {
            let planned_text = planned.to_string().replace(planned_id, &run_id).replace(
                &format!("-{}", tag_of(planned_id)),
                &format!("-{}", tag_of(&run_id)),
            );
            let planned: Value = serde_json::from_str(&planned_text).unwrap();
            let live = server
                .get(resource, NS, name(&planned))
                .unwrap_or_else(|| panic!("{resource} {} missing", name(&planned)));
            assert_eq!(
                live["metadata"]["labels"], planned["metadata"]["labels"],
                "{resource}"
            );
            if kind == "secrets" {
                assert_eq!(
                    secret_userdata(&live),
                    planned["stringData"]["userdata"].as_str().unwrap()
                );
            } else {
                assert_eq!(
                    live["spec"]["template"], planned["spec"]["template"],
                    "{resource} template"
                );
                if kind == "vms" {
                    assert_eq!(live["spec"]["runStrategy"], planned["spec"]["runStrategy"]);
                    assert_eq!(
                        live["spec"]["dataVolumeTemplates"], planned["spec"]["dataVolumeTemplates"],
                        "DataVolume templates"
                    );
                } else {
                    assert_eq!(live["spec"]["selector"], planned["spec"]["selector"]);
                    assert_eq!(live["spec"]["ports"], planned["spec"]["ports"]);
                }
            }
        }
    }
}

#[test]
fn server_dry_run_submits_everything_with_dry_run_all_and_persists_nothing() {
    let server = fast_server();
    server.insert(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    let env = run_env(&server);
    let out = env.run(&["--dry-run=server", "--workloads", "cpu,network"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("nothing was persisted"), "{text}");
    assert!(!text.contains("virtwork cleanup"), "{text}");
    assert!(server.objects("virtualmachines", Some(NS)).is_empty());
    assert!(server.objects("secrets", Some(NS)).is_empty());
    assert!(server.objects("services", Some(NS)).is_empty());
    let namespace = server.get("namespaces", "", NS).unwrap();
    assert_eq!(
        label(&namespace, "app.kubernetes.io/managed-by"),
        None,
        "label not persisted"
    );
    let log = server.request_log();
    let submitted: Vec<&RequestRecord> = writes(&log)
        .into_iter()
        .filter(|r| r.resource != "namespaces")
        .collect();
    // 1 Service, 3 Secrets, 3 VMs.
    assert_eq!(submitted.len(), 7, "{submitted:?}");
    for r in writes(&log) {
        assert!(
            r.query.contains("dryRun=All"),
            "{} {} {}",
            r.verb,
            r.resource,
            r.query
        );
        assert!(!r.committed);
    }
    assert_eq!(
        server.count("watch", "virtualmachineinstances"),
        0,
        "no readiness wait"
    );
}

#[test]
fn server_dry_run_into_a_missing_namespace_is_refused_before_any_write() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&["--dry-run=server", "--workloads", "cpu"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--dry-run=server needs namespace virtwork to exist"),
        "{}",
        stderr(&out)
    );
    assert!(writes(&server.request_log()).is_empty());
}

#[test]
fn no_wait_skips_the_readiness_watch() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu", "--no-wait", "--output", "json"]);
    assert_success(&out);
    let doc = json_output(&out);
    assert!(doc["durations_ms"]["wait"].is_null());
    assert_eq!(server.objects("virtualmachines", Some(NS)).len(), 1);
    assert_eq!(server.count("watch", "virtualmachineinstances"), 0);
    assert_eq!(server.count("list", "virtualmachineinstances"), 0);
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

#[test]
fn transient_faults_are_retried_and_every_vm_is_created_exactly_once() {
    let server = FakeApiServer::start(Options {
        faults: Faults {
            error_rate: 0.2,
            error_codes: vec![500, 503, 429],
            after_commit_rate: 0.05,
            drop_rate: 0.02,
            retry_after_secs: 1,
            seed: 7,
            ..Faults::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&["--output", "json", "--timeout", "300"]);
    assert_success(&out);
    let run_id = json_output(&out)["run_id"].as_str().unwrap().to_string();
    let vms = server.objects("virtualmachines", Some(NS));
    assert_eq!(vms.len(), 11);
    for vm in &vms {
        assert_eq!(label(vm, "virtwork/run-id"), Some(run_id.as_str()));
    }
    let log = server.request_log();
    for vm in &vms {
        let commits = log
            .iter()
            .filter(|r| r.verb == "create" && r.resource == "virtualmachines" && r.committed)
            .filter(|r| r.name == name(vm))
            .count();
        assert!(commits <= 1, "{} committed {commits} times", name(vm));
    }
    let committed_vm_creates = log
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "virtualmachines" && r.committed)
        .count();
    assert_eq!(committed_vm_creates, 11, "each VM committed exactly once");
    let failed = log
        .iter()
        .filter(|r| r.status >= 500 || r.status == 429 || r.status == 0)
        .count();
    assert!(failed > 0, "the fault injection must have fired");
}

#[test]
fn permanent_forbidden_on_virtualmachines_stops_the_run_with_the_servers_message() {
    let server = fast_server();
    server.update_faults(|f| {
        f.scripted.push(
            ScriptedFault::new("create", "virtualmachines", FaultAction::Fail(403)).times(1000),
        );
    });
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu,memory,disk",
        "--vm-concurrency",
        "1",
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Error: creating VirtualMachine virtwork/virtwork-"),
        "{err}"
    );
    assert!(
        err.contains("403") || err.to_lowercase().contains("forbidden"),
        "{err}"
    );
    assert_eq!(
        server.count("create", "virtualmachines"),
        1,
        "a 403 is not retried"
    );
    assert!(server.objects("virtualmachines", Some(NS)).is_empty());
}

#[test]
fn missing_namespace_for_a_secret_is_reported_not_retried_forever() {
    let server = fast_server();
    server.update_faults(|f| {
        f.scripted
            .push(ScriptedFault::new("create", "secrets", FaultAction::Fail(404)).times(1000));
    });
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu", "--timeout", "60"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("namespace virtwork not found"), "{err}");
    assert_eq!(server.count("create", "secrets"), 1);
    assert_eq!(server.count("create", "virtualmachines"), 0);
}

// ---------------------------------------------------------------------------------------------
// Readiness
// ---------------------------------------------------------------------------------------------

#[test]
fn readiness_uses_one_watch_and_no_per_vm_polling() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu,memory",
        "--vm-count",
        "3",
        "--timeout",
        "60",
    ]);
    assert_success(&out);
    let log = server.request_log();
    let vmi: Vec<&RequestRecord> = log
        .iter()
        .filter(|r| r.resource == "virtualmachineinstances")
        .collect();
    assert_eq!(
        vmi.iter().filter(|r| r.verb == "get").count(),
        0,
        "no per-VM GETs"
    );
    let watches = vmi.iter().filter(|r| r.verb == "watch").count();
    let lists = vmi.iter().filter(|r| r.verb == "list").count();
    assert!((1..=2).contains(&watches), "watches: {watches}");
    assert!(lists <= 2, "lists: {lists}");
    for r in &vmi {
        assert!(
            r.query.contains("labelSelector=virtwork%2Frun-id%3D"),
            "{}",
            r.query
        );
    }
}

#[test]
fn a_watch_that_drops_every_two_seconds_still_completes() {
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            scheduled_delay: Duration::from_millis(4500),
            ..ControllerOptions::default()
        },
        faults: Faults {
            watch_max_duration: Some(Duration::from_secs(2)),
            ..Faults::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu", "--vm-count", "2", "--timeout", "60"]);
    assert_success(&out);
    let watches = server.count("watch", "virtualmachineinstances");
    assert!(watches >= 2, "the stream was resumed: {watches} watches");
}

/// Run strategy `Always`: KubeVirt replaces a failed VMI after a back-off, so a failure is a
/// CrashLoopBackOff given the `--fail-fast` grace (and, without it, the wait goes on to the
/// timeout), never the end of the wait at the first failure.
#[test]
fn a_failed_vmi_kubevirt_retries_gets_the_crash_loop_grace() {
    let start = || {
        FakeApiServer::start(Options {
            controllers: ControllerOptions {
                fail_image_pattern: Some("broken".into()),
                crash_restart_delay: Some(Duration::from_millis(300)),
                ..ControllerOptions::default()
            },
            ..Options::default()
        })
    };
    let args = |extra: &[&'static str]| {
        let mut args = vec![
            "--workloads",
            "cpu",
            "--container-disk-image",
            "quay.io/example/broken:1",
        ];
        args.extend_from_slice(extra);
        args
    };
    let server = start();
    let env = run_env(&server);
    let out = env.run(&args(&["--fail-fast=3s", "--timeout", "120"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let vm = tagged_in(&server, "virtwork-cpu-0");
    assert!(!err.contains(&format!("VM virtwork/{vm} failed")), "{err}");
    let last = err.lines().last().unwrap_or_default();
    // The VM controller replaces the failed VMI every 300 ms, so at the 3 s mark the VM reads
    // CrashLoopBackOff or, with the replacement just created, Starting; either way the crash
    // is what the line names.
    let stuck_as = |state: &str| {
        last.contains(&format!(
            "--fail-fast: VM virtwork/{vm} has been {state} for 3s"
        ))
    };
    assert!(
        (stuck_as("CrashLoopBackOff") || stuck_as("Starting"))
            && last.contains("crashed while booting"),
        "{last}"
    );
    // The VM controller does retry: the failed VMI is replaced by a new one (a new uid).
    let uid = |s: &FakeApiServer| {
        s.get("virtualmachineinstances", "virtwork", &vm)
            .and_then(|v| v["metadata"]["uid"].as_str().map(str::to_string))
    };
    let first = uid(&server);
    assert!(
        server.wait_until(Duration::from_secs(10), |s| {
            uid(s).is_some_and(|u| Some(&u) != first.as_ref())
        }),
        "the failed VMI {first:?} was never replaced"
    );

    let server = start();
    let env = run_env(&server);
    let out = env.run(&args(&["--timeout", "4"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("readiness timeout after 4s") && last.contains("crashed while booting"),
        "{last}"
    );
}

#[test]
fn readiness_timeout_names_the_vms_not_ready_and_their_phases() {
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            unschedulable_image_pattern: Some("stuck".into()),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--container-disk-image",
        "quay.io/example/stuck:1",
        "--timeout",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("readiness timeout after 2s: 2 of 2 VMs not running"),
        "{err}"
    );
    // Each VM with its state as `kubectl get vm` shows it, and the scheduler's reason.
    for vm in ["virtwork-cpu-0", "virtwork-cpu-1"] {
        let vm = tagged_in(&server, vm);
        assert!(
            err.contains(&format!(
                "{vm} (ErrorUnschedulable: 0/3 nodes are available: 3 Insufficient \
                 devices.kubevirt.io/kvm.)"
            )),
            "{err}"
        );
    }
    // The summary still offers the undo command.
    assert!(stdout(&out).contains("virtwork cleanup --namespace virtwork --run-id"));
}

/// The `error_detail` of the run's `vm_timeout` audit events, by VM.
fn vm_timeout_details(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT error_detail FROM events WHERE event_type = 'vm_timeout' ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, Option<String>>(0))
        .unwrap()
        .map(|d| d.unwrap().unwrap_or_default())
        .collect()
}

#[test]
fn an_unpullable_image_is_named_with_the_pull_error_everywhere() {
    let server = fast_server();
    let env = run_env(&server);
    let image = "quay.io/example/unpullable:1";
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--container-disk-image",
        image,
        "--output",
        "json",
        "--timeout",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let backoff = format!("ImagePullBackOff: Back-off pulling image \"{image}\"");
    // As soon as it happens: a warning naming the VM, the status and the kubelet's error.
    let err = stderr(&out);
    let vm = tagged_in(&server, "virtwork-cpu-0");
    assert!(
        err.contains(&format!(
            "VM {vm} is ErrImagePull: rpc error: code = NotFound"
        )) && err.contains(&format!("{image}: not found")),
        "{err}"
    );
    // The progress line (every 5 s without a terminal) counts VMs per state.
    assert!(
        err.contains("waiting: 0/1 VMs ready; ImagePullBackOff 1; slowest: ")
            && err.contains(&format!("{vm} ImagePullBackOff ")),
        "{err}"
    );
    // The timeout error.
    assert!(
        err.contains(&format!("1 of 1 VMs not running: {vm} ({backoff})")),
        "{err}"
    );
    // --output json.
    let doc = json_output(&out);
    let vm = &doc["vms"][0];
    assert_eq!(vm["status"], "ImagePullBackOff", "{vm}");
    assert_eq!(vm["phase"], "Scheduling", "{vm}");
    assert_eq!(
        vm["message"],
        format!("Back-off pulling image \"{image}\""),
        "{vm}"
    );
    // The audit record.
    let details = vm_timeout_details(&env.db());
    assert_eq!(details.len(), 1, "{details:?}");
    assert!(
        details[0].contains("not running after 7s") && details[0].contains(&backoff),
        "{details:?}"
    );
}

/// One `run` of a workload against a fresh fake server: the result, how long it took, and
/// the run id of what it created.
fn run_timed(prepare: impl FnOnce(&FakeApiServer), args: &[&str]) -> (Output, Duration, String) {
    let server = fast_server();
    prepare(&server);
    let env = run_env(&server);
    let started = std::time::Instant::now();
    let out = env.run(args);
    (out, started.elapsed(), run_id_in(&server))
}

#[test]
fn fail_fast_stops_waiting_on_a_vm_that_needs_someone_to_act() {
    let failing_class = |server: &FakeApiServer| {
        server.insert(serde_json::json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "failing-ssd"}, "provisioner": "fake.virtwork.test/hostpath",
        }));
    };
    // A class with no StorageProfile while others have one: CDI cannot tell the access mode
    // and refuses the claim (preflight only warns: the profile may not be reconciled yet).
    let profile_for_other_class = |server: &FakeApiServer| {
        server.insert(serde_json::json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "StorageProfile",
            "metadata": {"name": "other"}, "spec": {},
            "status": {"claimPropertySets": [{"accessModes": ["ReadWriteOnce"]}]},
        }));
    };
    let cases: [(&str, Vec<&str>, &str, &str); 5] = [
        (
            "virtwork-cpu-0",
            vec!["--container-disk-image", "quay.io/example/unpullable:1"],
            "ImagePullBackOff",
            "Back-off pulling image",
        ),
        (
            "virtwork-cpu-0",
            vec!["--container-disk-image", "quay.io/example/unschedulable:1"],
            "ErrorUnschedulable",
            "0/3 nodes are available",
        ),
        (
            "virtwork-disk-0",
            vec!["--storage-class", "failing-ssd"],
            "DataVolumeError",
            "No space left on device",
        ),
        (
            "virtwork-cpu-0",
            vec!["--container-disk-image", "quay.io/example/ioerror:1"],
            "Paused",
            "VMI was paused, low-level IO error detected",
        ),
        (
            "virtwork-chaos-disk-0",
            vec![],
            "Provisioning",
            "no accessMode specified in StorageProfile standard",
        ),
    ];
    for (vm, extra, status, why) in cases {
        let workload = vm
            .strip_prefix("virtwork-")
            .and_then(|w| w.strip_suffix("-0"))
            .unwrap();
        let mut args = vec![
            "--workloads",
            workload,
            "--fail-fast=1s",
            "--timeout",
            "120",
        ];
        args.extend(&extra);
        let (out, took, id) = run_timed(
            |server| match workload {
                "disk" => failing_class(server),
                "chaos-disk" => profile_for_other_class(server),
                _ => {}
            },
            &args,
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{status}: {err}");
        assert!(took < Duration::from_secs(30), "{status}: took {took:?}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.contains(&format!(
                "--fail-fast: VM virtwork/{} has been {status} for 1s",
                tagged(vm, &id)
            )) && last.contains(why),
            "{status}: {last}"
        );
        assert!(
            stdout(&out).contains("virtwork cleanup --namespace virtwork --run-id"),
            "the summary still offers the undo command"
        );
    }
}

#[test]
fn with_workload_readiness_every_vm_gets_a_probe_checking_each_workload_unit() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "database,network",
        "--ready-condition",
        "workload",
        "--no-wait",
    ]);
    assert_success(&out);
    let probe = |vm: &str| {
        server
            .get("virtualmachines", NS, vm)
            .unwrap_or_else(|| panic!("{vm} missing"))
            .pointer("/spec/template/spec/readinessProbe")
            .cloned()
            .unwrap_or_else(|| panic!("{vm} has no readinessProbe"))
    };
    let db = probe(&tagged_in(&server, "virtwork-database-0"));
    assert_eq!(
        db["httpGet"],
        serde_json::json!({"path": "/ready", "port": 8787})
    );
    assert_eq!(db["periodSeconds"], 15);
    assert_eq!(db["timeoutSeconds"], 10);
    assert_eq!(db["failureThreshold"], 3);
    // Each VM's readiness endpoint checks that VM's own units.
    for (vm, units) in [
        (
            "virtwork-database-0",
            "virtwork-database-setup.service virtwork-database.service",
        ),
        ("virtwork-network-server-0", "virtwork-network.service"),
        ("virtwork-network-client-0", "virtwork-network.service"),
    ] {
        let name = tagged_in(&server, vm);
        assert_eq!(
            probe(&name)["httpGet"],
            serde_json::json!({"path": "/ready", "port": 8787})
        );
        let vm = server.get("virtualmachines", NS, &name).unwrap();
        let secret = vm["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v["cloudInitNoCloud"]["secretRef"]["name"].as_str())
            .unwrap()
            .to_string();
        let secret = server.get("secrets", NS, &secret).unwrap();
        let userdata = secret["stringData"]["userdata"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| {
                let b64 = secret["data"]["userdata"].as_str().unwrap();
                String::from_utf8(
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                        .unwrap(),
                )
                .unwrap()
            });
        assert!(
            userdata.contains(&format!("for unit in {units}; do")),
            "{name}: {userdata}"
        );
    }
}

#[test]
fn workload_condition_waits_for_the_probe_to_pass() {
    // The probe passes 1.5 s after the guest agent connects: a run waiting for `running`
    // finishes before that, one waiting for `workload` only after.
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            workload_ready_delay: Duration::from_millis(1500),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--ready-condition",
        "workload",
        "--timeout",
        "60",
        "--output",
        "json",
    ]);
    assert_success(&out);
    let doc = json_output(&out);
    assert_eq!(doc["ready_condition"], "workload");
    assert_eq!(doc["vms_ready"], 2);
    // Everything the run reported ready is Ready=True on the server.
    for i in 0..2 {
        let vmi = server
            .get(
                "virtualmachineinstances",
                NS,
                &tagged_in(&server, &format!("virtwork-cpu-{i}")),
            )
            .unwrap();
        let ready = vmi["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{vmi}");
    }
    let waited_ms = doc["durations_ms"]["wait"].as_u64().unwrap();
    assert!(waited_ms >= 1500, "returned before the probe passed: {doc}");
}

#[test]
fn a_vm_whose_workload_unit_never_starts_is_never_workload_ready() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--container-disk-image",
        "quay.io/example/brokenunit:1",
        "--ready-condition",
        "workload",
        "--timeout",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "readiness timeout after 3s: 1 of 1 VMs not running its workload (readiness probe \
             not passing): {} (Running)",
            tagged_in(&server, "virtwork-cpu-0")
        )),
        "{err}"
    );
    // The same VM satisfies `running`: the guest is up, only the workload is not.
    let env = run_env(&server);
    let out = env.run(&[
        "--namespace",
        "other",
        "--workloads",
        "cpu",
        "--container-disk-image",
        "quay.io/example/brokenunit:1",
        "--timeout",
        "30",
    ]);
    assert_success(&out);
}

// ---------------------------------------------------------------------------------------------
// Preflight
// ---------------------------------------------------------------------------------------------

fn assert_preflight_refused(server: &FakeApiServer, out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
    let err = stderr(out);
    assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    let log = server.request_log();
    assert!(
        writes(&log).is_empty(),
        "preflight must not write: {:?}",
        writes(&log)
    );
}

#[test]
fn preflight_refuses_a_cluster_without_kubevirt() {
    let server = FakeApiServer::start(Options {
        virtualization_installed: false,
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu"]);
    assert_preflight_refused(
        &server,
        &out,
        "KubeVirt (OpenShift Virtualization) is not installed",
    );
    // The document of a refused run: it created nothing, so there is nothing to clean up.
    let out = env.run(&["--workloads", "cpu", "--output", "json"]);
    assert_preflight_refused(&server, &out, "is not installed");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "failed", "{doc}");
    assert_eq!(doc["command"], "run", "{doc}");
    assert_eq!(doc["cleanup_command"], serde_json::Value::Null, "{doc}");
}

#[test]
fn preflight_refuses_when_rbac_denies_creating_vms() {
    let server = FakeApiServer::start(Options {
        faults: Faults {
            denials: vec![Denial::new("create", "virtualmachines")],
            ..Faults::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu"]);
    assert_preflight_refused(
        &server,
        &out,
        "not allowed to create virtualmachines.kubevirt.io in namespace virtwork",
    );
}

/// Names are the run's own (its tag), so only a run id we choose can meet objects with
/// its names: preflight is driven as `run` drives it, over HTTP, for a planned fleet.
#[tokio::test(flavor = "multi_thread")]
async fn preflight_refuses_objects_of_another_run_with_our_names() {
    let server = fast_server();
    let other = "11111111-2222-4333-8444-555555555555";
    let run_id: virtwork::model::RunId = "3f1c7a2e-9b4d-4c1a-8e2f-0a9b8c7d6e5f".parse().unwrap();
    let plan = virtwork::plan::build_plan(
        &test_config::plan_input(&["cpu"], 2),
        &virtwork::workloads::Registry::builtin(),
        run_id,
    )
    .unwrap();
    server.insert(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    // Another run (with the same tag, by chance) holds this run's names.
    for vm in &plan.vms {
        let labels = serde_json::json!({"app.kubernetes.io/managed-by": "virtwork", "virtwork/run-id": other});
        server.insert(serde_json::json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": vm.name, "namespace": NS, "labels": labels},
            "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}
        }));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let limit = virtwork::k8s::client::RateLimit {
        qps: 50.0,
        burst: 100,
    };
    let cluster = virtwork::k8s::client::connect(&[kubeconfig], false, limit)
        .await
        .unwrap();
    let needs = virtwork::k8s::preflight::PreflightNeeds::from_plan(&plan, true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let cancel = tokio_util::sync::CancellationToken::new();
    let err = virtwork::k8s::preflight::preflight(&cluster, &needs, deadline, &cancel)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("preflight failed, nothing was created")
            && err.contains(&format!("virtwork run {other}"))
            && err.contains(
                "VirtualMachine virtwork-cpu-3f1c7a-0, VirtualMachine virtwork-cpu-3f1c7a-1"
            )
            && err.contains(&format!(
                "virtwork cleanup --namespace {NS} --run-id {other}"
            )),
        "{err}"
    );
    assert!(writes(&server.request_log()).is_empty());
}

#[test]
fn preflight_requires_a_default_storage_class_only_for_data_disks() {
    let server = fast_server();
    server
        .remove("storageclasses", "", "standard")
        .expect("the fake seeds a default class");
    let env = run_env(&server);
    let out = env.run(&["--workloads", "disk"]);
    assert_preflight_refused(&server, &out, "no default StorageClass");
    // Without a data disk the class does not matter.
    let out = env.run(&["--workloads", "cpu", "--timeout", "60"]);
    assert_success(&out);
}

#[test]
fn preflight_names_an_unreachable_server_and_the_kubeconfig() {
    // A port nobody listens on: bind, learn the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: dead\nclusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: dead\n  context:\n    cluster: dead\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--no-audit", "run", "--workloads", "cpu"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot reach API server http://127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains(kubeconfig.to_str().unwrap()), "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
}

#[test]
fn preflight_reports_a_rejected_token() {
    let server = FakeApiServer::start(Options {
        token: Some("the-right-token".into()),
        ..Options::default()
    });
    let env = run_env(&server);
    let text = std::fs::read_to_string(&env.kubeconfig).unwrap();
    assert!(text.contains("the-right-token"));
    std::fs::write(
        &env.kubeconfig,
        text.replace("the-right-token", "a-wrong-token"),
    )
    .unwrap();
    let out = env.run(&["--workloads", "cpu"]);
    assert_preflight_refused(&server, &out, "rejected the credentials");
    assert!(stderr(&out).contains("401"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("a-wrong-token"),
        "no credential in messages"
    );
}

// ---------------------------------------------------------------------------------------------
// Rate limit
// ---------------------------------------------------------------------------------------------

#[test]
fn qps_limit_holds_over_every_window_of_the_request_log() {
    let server = fast_server();
    let env = run_env(&server);
    let (qps, burst) = (20.0_f64, 5_usize);
    let out = env.run(&[
        "--qps",
        "20",
        "--burst",
        "5",
        "--workloads",
        "cpu,memory,database",
        "--vm-count",
        "4",
        "--timeout",
        "120",
    ]);
    assert_success(&out);
    let log = server.request_log();
    let mut times: Vec<f64> = log
        .iter()
        .map(|r| {
            r.timestamp
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    assert!(
        times.len() > 30,
        "enough requests to exercise the bucket: {}",
        times.len()
    );
    // Token bucket: any window of length w admits at most burst + qps*w requests. The
    // server stamps arrival, not admission: allow 250 ms of client-to-server skew (a busy
    // machine can delay one request and not the next) plus one request. Without the limit
    // the same run sends all its requests within well under a second and fails this.
    let skew = 0.25;
    for (i, start) in times.iter().enumerate() {
        for (j, end) in times.iter().enumerate().skip(i) {
            let window = end - start;
            let count = j - i + 1;
            let allowed = burst as f64 + qps * (window + skew) + 1.0;
            assert!(
                count as f64 <= allowed,
                "{count} requests within {window:.3}s exceed burst {burst} + {qps}/s"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Interrupts
// ---------------------------------------------------------------------------------------------

#[test]
fn sigint_during_creation_exits_130_records_cancelled_and_labels_everything() {
    interrupt_creation_and_check_the_record(1, Duration::from_millis(150), Duration::ZERO);
}

/// Several creates are on the wire when the interrupt lands: their answers are awaited, so the
/// reported counts are what the cluster holds, not what had answered before the signal.
#[test]
fn sigint_with_creates_in_flight_reports_exactly_what_exists() {
    interrupt_creation_and_check_the_record(4, Duration::ZERO, Duration::from_millis(400));
}

fn interrupt_creation_and_check_the_record(
    concurrency: usize,
    latency: Duration,
    response_latency: Duration,
) {
    let server = FakeApiServer::start(Options {
        faults: Faults {
            latency,
            response_latency,
            ..Faults::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let concurrency = concurrency.to_string();
    let child = env
        .command(&[
            "--vm-concurrency",
            &concurrency,
            "--output",
            "json",
            "--timeout",
            "120",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = server.wait_until(Duration::from_secs(60), |s| {
        s.objects("virtualmachines", Some(NS)).len() >= 2
    });
    assert!(started, "creation began");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let doc = json_output(&out);
    assert_eq!(doc["status"], "cancelled");
    let run_id = doc["run_id"].as_str().unwrap().to_string();
    let vms = server.objects("virtualmachines", Some(NS));
    assert!(vms.len() < 11, "creation stopped early: {}", vms.len());
    assert_eq!(doc["created"]["vms"].as_u64().unwrap() as usize, vms.len());
    assert_eq!(
        doc["created"]["secrets"].as_u64().unwrap() as usize,
        server.objects("secrets", Some(NS)).len()
    );
    for kind in ["virtualmachines", "secrets", "services"] {
        for object in server.objects(kind, Some(NS)) {
            assert_eq!(
                label(&object, "virtwork/run-id"),
                Some(run_id.as_str()),
                "{kind} {}",
                name(&object)
            );
        }
    }
    let db = rusqlite::Connection::open(env.db()).unwrap();
    let status: String = db
        .query_row(
            "SELECT status FROM audit_log WHERE run_id = ?1",
            [&run_id],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(status, "cancelled");
}

// ---------------------------------------------------------------------------------------------
// The audit database: private files, and a locked database never holds up a run
// ---------------------------------------------------------------------------------------------

/// Spawns `cmd` with stderr streamed into a channel of lines (stdout collected at the end).
fn spawn_streaming(
    mut cmd: Command,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<String>,
) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn virtwork");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    (child, rx, out)
}

/// Waits (hang guard `guard`) for the child to exit.
fn exit_within(child: &mut std::process::Child, guard: Duration) -> Option<i32> {
    let deadline = std::time::Instant::now() + guard;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

#[test]
fn a_locked_audit_database_never_stops_readiness_and_catches_up_when_released() {
    let server = fast_server();
    let env = run_env(&server);
    // An existing, current database that another process holds the write lock on.
    drop(virtwork::audit::Auditor::open_path(&env.db()).unwrap());
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let (mut child, lines, stdout_text) = spawn_streaming(env.command(&[
        "--workloads",
        "cpu",
        "--vm-count",
        "2",
        "--output",
        "json",
        "--timeout",
        "120",
    ]));
    // Readiness completes while the lock is held (the guard is below SQLite's 60 s busy
    // timeout, so a run that waited for the database could not pass).
    let mut seen = Vec::new();
    let ready = loop {
        match lines.recv_timeout(Duration::from_secs(45)) {
            Ok(line) => {
                let done = line.contains("all VMs ready");
                seen.push(line);
                if done {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    assert!(
        ready,
        "readiness did not complete while the database was locked: {seen:#?}"
    );
    holder.execute_batch("COMMIT").unwrap();
    let code = exit_within(&mut child, Duration::from_secs(60));
    let stdout = stdout_text.join().unwrap();
    assert_eq!(code, Some(0), "{stdout}\n{seen:#?}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["status"], "success");
    assert_eq!(doc["vms_ready"], 2);
    // Everything queued while locked was written once the lock went away.
    let (status, ready_vms): (String, i64) = holder
        .query_row(
            "SELECT a.status, (SELECT COUNT(*) FROM vm_details v WHERE v.audit_id = a.id AND v.status = 'ready')
             FROM audit_log a WHERE a.run_id = ?1",
            [doc["run_id"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((status.as_str(), ready_vms), ("success", 2));
}

#[test]
fn a_database_locked_for_good_delays_the_exit_only_boundedly() {
    let server = fast_server();
    let env = run_env(&server);
    drop(virtwork::audit::Auditor::open_path(&env.db()).unwrap());
    let holder = rusqlite::Connection::open(env.db()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (mut child, lines, stdout_text) = spawn_streaming(env.command(&[
        "--workloads",
        "cpu",
        "--output",
        "json",
        "--timeout",
        "120",
    ]));
    // Hang guard: the documented bound is 10 s after the work is done.
    let code = exit_within(&mut child, Duration::from_secs(50));
    let stderr: Vec<String> = lines.try_iter().collect();
    let stdout = stdout_text.join().unwrap();
    assert_eq!(code, Some(0), "{stdout}\n{stderr:#?}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["status"], "success", "the run itself succeeded");
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("audit database still busy") && l.contains("not written")),
        "{stderr:#?}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn the_audit_database_and_its_directory_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let server = FakeApiServer::start(Options {
        controllers: ControllerOptions {
            unschedulable_image_pattern: Some("stuck".into()),
            ..ControllerOptions::default()
        },
        ..Options::default()
    });
    let env = run_env(&server);
    let db = env
        .dir
        .path()
        .join("audit")
        .join("runs")
        .join("virtwork.db");
    // A run that keeps the database open while it waits for a VM that never schedules.
    let (mut child, _lines, _stdout) = spawn_streaming(env.command_with_db(
        &db,
        &[
            "--workloads",
            "cpu",
            "--container-disk-image",
            "quay.io/example/stuck:1",
            "--timeout",
            "20",
        ],
    ));
    let files: Vec<PathBuf> = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| PathBuf::from(format!("{}{suffix}", db.display())))
        .collect();
    let all_there = server.wait_until(Duration::from_secs(30), |_| {
        files.iter().all(|f| f.exists())
    });
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let modes: Vec<u32> = files
        .iter()
        .filter(|f| f.exists())
        .map(|f| mode(f))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(all_there, "database files: {files:?}");
    assert_eq!(modes[0], 0o600, "database file mode {:o}", modes[0]);
    for m in &modes[1..] {
        assert_eq!(m & 0o077, 0, "-wal/-shm readable by others: {m:o}");
    }
    for dir in [
        env.dir.path().join("audit"),
        env.dir.path().join("audit/runs"),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
}

// ---------------------------------------------------------------------------------------------
// --params prefixes
// ---------------------------------------------------------------------------------------------

#[test]
fn a_params_prefix_naming_no_workload_is_refused_with_a_suggestion_before_any_request() {
    let server = fast_server();
    let env = run_env(&server);
    let out = env.run(&["--workloads", "cpu", "--params", "cpuu.cpu-load-percent=50"]);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(r#"invalid workload "cpuu" in --params"#),
        "{err}"
    );
    assert!(err.contains(r#"did you mean "cpu"?"#), "{err}");
    assert!(
        server.request_log().is_empty(),
        "nothing sent for bad input"
    );
    // The environment variable is named as such.
    let out = env
        .command(&["--workloads", "cpu"])
        .env("VIRTWORK_PARAMS", "memroy.memory-percent=50")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(r#"invalid workload "memroy" in VIRTWORK_PARAMS"#)
            && stderr(&out).contains(r#"did you mean "memory"?"#),
        "{}",
        stderr(&out)
    );
}

/// A configuration file's `workloads.<name>` section is checked like a `--params` prefix:
/// a name that is no workload is refused (exit 2, the key named, a did-you-mean) before any
/// request; a known workload this run does not plan is a warning, and a section that
/// disables a listed workload is accounted for by the skip.
#[test]
fn a_config_section_naming_no_workload_is_refused_and_one_not_planned_is_a_warning() {
    let server = fast_server();
    let env = run_env(&server);
    let config = env.dir.path().join("virtwork.yaml");
    std::fs::write(
        &config,
        "workloads:\n  cpuu:\n    params:\n      cpu-load-percent: 50\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let out = env.run(&["--config", config, "--workloads", "cpu"]);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!(
            r#"invalid workload "cpuu" in workloads.cpuu of --config {config}"#
        )) && err.contains(r#"did you mean "cpu"?"#),
        "{err}"
    );
    assert!(
        server.request_log().is_empty(),
        "nothing sent for bad input"
    );
    // Also a section without params, and under --dry-run.
    std::fs::write(
        env.dir.path().join("virtwork.yaml"),
        "workloads:\n  memroy:\n    vm-count: 2\n",
    )
    .unwrap();
    let out = env.run(&["--config", config, "--workloads", "cpu,memory", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"did you mean "memory"?"#),
        "{}",
        stderr(&out)
    );

    std::fs::write(
        env.dir.path().join("virtwork.yaml"),
        "workloads:\n  memory:\n    params:\n      memory-percent: 50\n  \
         disk:\n    enabled: false\n  cpu:\n    vm-count: 1\n",
    )
    .unwrap();
    let out = env.run(&["--config", config, "--workloads", "cpu,disk", "--no-wait"]);
    assert_success(&out);
    let err = stderr(&out);
    let warned = |workload: &str| {
        err.lines().any(|l| {
            l.contains("WARN")
                && l.contains(&format!("workloads.{workload} of --config"))
                && l.contains(&format!(
                    "sets settings for workload \"{workload}\", which this run does not plan"
                ))
        })
    };
    assert!(warned("memory"), "warning for memory:\n{err}");
    assert!(!warned("disk") && !warned("cpu"), "{err}");
    assert_eq!(server.objects("virtualmachines", Some(NS)).len(), 1);
}

#[test]
fn params_for_a_known_workload_this_run_does_not_plan_are_a_warning() {
    let server = fast_server();
    let env = run_env(&server);
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    let out = env.run(&[
        "--workloads",
        "cpu",
        "--catalog-dir",
        catalog.to_str().unwrap(),
        "--params",
        "cpu.cpu-load-percent=50,memory.memory-percent=50,sysbench.threads=2",
        "--no-wait",
    ]);
    assert_success(&out);
    let err = stderr(&out);
    for workload in ["memory", "sysbench"] {
        assert!(
            err.lines().any(|l| l.contains("WARN")
                && l.contains(&format!("workload \"{workload}\""))
                && l.contains("does not plan")),
            "warning for {workload}:\n{err}"
        );
    }
    assert!(!err.contains("workload \"cpu\", which"), "{err}");
    assert_eq!(server.objects("virtualmachines", Some(NS)).len(), 1);
}
