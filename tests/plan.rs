//! Planning without a cluster: which workloads run with which effective settings, the exact
//! object names, labels and shapes, deterministic order, and the whole-plan checks that turn
//! bad input into exit-code-2 errors before anything is printed or created.

use crate::support::names;
use crate::test_config;

use std::collections::BTreeMap;
use std::path::PathBuf;

use virtwork::error::{Error, Result};
use virtwork::plan::{self, Plan, PlanInput, WorkloadOverride};
use virtwork::workloads::{
    DataDisk, RoleSpec, ServicePortSpec, ServiceSpec, VmResources, Workload, WorkloadSettings,
};

const RUN_ID: &str = test_config::RUN_ID;

/// `name` with this file's run tag where the plan puts it.
fn t(name: &str) -> String {
    names::tagged(name, RUN_ID)
}

fn config(workloads: &[&str]) -> PlanInput {
    let mut config = test_config::plan_input(workloads, 1);
    config.catalog_dir = PathBuf::from("/nonexistent");
    config
}

/// A test workload: `roles` empty means single-role with `settings.vm_count` VMs.
#[derive(Debug, Clone)]
struct FakeWorkload {
    name: String,
    settings: WorkloadSettings,
    roles: Vec<&'static str>,
    disks: Vec<DataDisk>,
    service: Option<ServiceSpec>,
    userdata_bytes: usize,
}

impl FakeWorkload {
    fn new(name: &str, settings: WorkloadSettings) -> Self {
        FakeWorkload {
            name: name.into(),
            settings,
            roles: Vec::new(),
            disks: Vec::new(),
            service: None,
            userdata_bytes: 0,
        }
    }
}

impl Workload for FakeWorkload {
    fn name(&self) -> &str {
        &self.name
    }
    fn roles(&self) -> Vec<RoleSpec> {
        if self.roles.is_empty() {
            return vec![RoleSpec {
                role: None,
                vm_count: self.settings.vm_count,
            }];
        }
        self.roles
            .iter()
            .map(|r| RoleSpec {
                role: Some(r.to_string()),
                vm_count: self.settings.vm_count,
            })
            .collect()
    }
    fn userdata(&self, role: Option<&str>) -> Result<String> {
        if role == Some("broken") {
            return Err(Error::input("param \"x\" is bad"));
        }
        let mut text = format!("#cloud-config\n# {} {:?}\n", self.name, role);
        text.push_str(&"x".repeat(self.userdata_bytes));
        Ok(text)
    }
    fn workload_units(&self, role: Option<&str>) -> Vec<String> {
        vec![format!("{}-{}.service", self.name, role.unwrap_or("main"))]
    }
    fn resources(&self) -> VmResources {
        VmResources {
            cpu_cores: self.settings.cpu_cores,
            memory: self.settings.memory.clone(),
        }
    }
    fn data_disks(&self) -> Vec<DataDisk> {
        self.disks.clone()
    }
    fn service(&self) -> Option<ServiceSpec> {
        self.service.clone()
    }
}

/// Resolves requests from `config` and builds fake workloads, customised by `customise`.
fn plan_with(config: &PlanInput, customise: impl Fn(&mut FakeWorkload)) -> Result<Plan> {
    let requests = plan::resolve_requests(config)?;
    let workloads: Vec<Box<dyn Workload>> = requests
        .planned
        .into_iter()
        .map(|r| {
            let mut w = FakeWorkload::new(&r.name, r.settings);
            customise(&mut w);
            Box::new(w) as Box<dyn Workload>
        })
        .collect();
    plan::plan_workloads(
        config,
        RUN_ID.parse().unwrap(),
        &workloads,
        requests.skipped,
    )
}

fn input_error(result: Result<Plan>) -> String {
    match result {
        Err(Error::Input(msg)) => msg,
        Err(other) => panic!("expected an input error, got {other:?}"),
        Ok(plan) => panic!(
            "expected an input error, got a plan with {} VMs",
            plan.vms.len()
        ),
    }
}

fn labels_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    meta.labels
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

fn pair_service(name: &str, component: &str) -> ServiceSpec {
    ServiceSpec {
        name: name.into(),
        selector: BTreeMap::from([
            ("app.kubernetes.io/component".into(), component.into()),
            ("virtwork/role".into(), "server".into()),
        ]),
        ports: vec![ServicePortSpec {
            name: "ctrl".into(),
            port: 5201,
            protocol: "TCP".into(),
        }],
    }
}

#[test]
fn single_role_vms_are_named_by_index_with_their_secret_and_labels() {
    let mut cfg = config(&["cpu"]);
    cfg.vm_count = 3;
    let plan = plan_with(&cfg, |_| {}).unwrap();
    let names: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "virtwork-cpu-3f1c7a-0",
            "virtwork-cpu-3f1c7a-1",
            "virtwork-cpu-3f1c7a-2"
        ]
    );
    let vm = &plan.vms[1];
    assert_eq!(vm.secret_name(), "virtwork-cpu-3f1c7a-1-cloudinit");
    assert_eq!(vm.secret().metadata.namespace.as_deref(), Some("virtwork"));
    assert_eq!(
        labels_of(&vm.secret().metadata),
        [
            "app.kubernetes.io/component=cpu",
            "app.kubernetes.io/managed-by=virtwork",
            "app.kubernetes.io/name=virtwork-cpu",
            &format!("virtwork/run-id={RUN_ID}"),
        ]
    );
    assert_eq!(
        labels_of(&vm.vm().metadata),
        labels_of(&vm.secret().metadata)
    );
    let secret = vm.secret();
    let userdata = &secret.string_data.as_ref().unwrap()["userdata"];
    assert!(userdata.starts_with("#cloud-config\n"));
    assert!(vm.secret().type_.is_none() && vm.secret().data.is_none());
    assert_eq!(plan.workloads[0].vm_count, 3);
    assert!(plan.services.is_empty());
}

#[test]
fn the_readiness_probe_is_planned_only_for_workload_readiness() {
    let mut cfg = config(&["disk"]);
    let probe = |cfg: &PlanInput| {
        let plan = plan_with(cfg, |_| {}).unwrap();
        serde_json::to_value(plan.vms[0].vm())
            .unwrap()
            .pointer("/spec/template/spec/readinessProbe")
            .cloned()
    };
    assert_eq!(probe(&cfg), None);
    cfg.workload_probe = true;
    assert_eq!(
        probe(&cfg).unwrap()["httpGet"],
        serde_json::json!({"path": "/ready", "port": 8787})
    );
}

#[test]
fn vm_spec_matches_the_reference_shape() {
    let cfg = config(&["disk"]);
    let plan = plan_with(&cfg, |w| {
        w.disks = vec![DataDisk {
            name: "datadisk".into(),
            dv_base: "virtwork-disk-data".into(),
            serial: "virtwork-disk".into(),
            size: "10Gi".parse().unwrap(),
        }]
    })
    .unwrap();
    let vm = serde_json::to_value(plan.vms[0].vm()).unwrap();
    let labels = serde_json::json!({
        "app.kubernetes.io/component": "disk",
        "app.kubernetes.io/managed-by": "virtwork",
        "app.kubernetes.io/name": "virtwork-disk",
        "virtwork/run-id": RUN_ID,
    });
    let expected = serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"labels": labels, "name": t("virtwork-disk-0"), "namespace": "virtwork"},
        "spec": {
            "dataVolumeTemplates": [{
                "metadata": {"name": t("virtwork-disk-data-virtwork-disk-0"), "labels": labels},
                "spec": {"source": {"blank": {}},
                         "storage": {"resources": {"requests": {"storage": "10Gi"}}}}
            }],
            "runStrategy": "Always",
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "domain": {
                        "cpu": {"cores": 2},
                        "devices": {
                            "disks": [
                                {"disk": {"bus": "virtio"}, "name": "containerdisk"},
                                {"disk": {"bus": "virtio"}, "name": "cloudinitdisk"},
                                {"disk": {"bus": "virtio"}, "name": "datadisk",
                                 "serial": "virtwork-disk"}
                            ],
                            "interfaces": [{"masquerade": {}, "name": "default"}]
                        },
                        "resources": {"requests": {"memory": "2Gi"}}
                    },
                    "networks": [{"name": "default", "pod": {}}],
                    "evictionStrategy": "LiveMigrateIfPossible",
                    "terminationGracePeriodSeconds": 120,
                    "volumes": [
                        {"containerDisk": {"image": "quay.io/containerdisks/fedora:42"},
                         "name": "containerdisk"},
                        {"cloudInitNoCloud": {"secretRef": {"name": t("virtwork-disk-0-cloudinit")}},
                         "name": "cloudinitdisk"},
                        {"dataVolume": {"name": t("virtwork-disk-data-virtwork-disk-0")},
                         "name": "datadisk"}
                    ]
                }
            }
        }
    });
    assert_eq!(vm, expected);
    assert_eq!(
        plan.vms[0].data_volumes,
        [t("virtwork-disk-data-virtwork-disk-0")]
    );
    assert_eq!(plan.data_volume_count(), 1);
    assert_eq!(plan.workloads[0].data_disk_size.as_deref(), Some("10Gi"));
}

#[test]
fn multi_role_vms_carry_the_role_label_and_services_are_sorted() {
    let mut cfg = config(&["tps", "network"]);
    cfg.vm_count = 2;
    let plan = plan_with(&cfg, |w| {
        w.roles = vec!["server", "client"];
        w.service = Some(pair_service(
            if w.name == "tps" {
                "virtwork-tps-server"
            } else {
                "virtwork-iperf3-server"
            },
            &w.name.clone(),
        ));
    })
    .unwrap();
    let names: Vec<String> = plan
        .vms
        .iter()
        .map(|v| v.name.replace("-3f1c7a", ""))
        .collect();
    assert!(plan.vms.iter().all(|v| v.name.contains("-3f1c7a-")));
    assert_eq!(
        names,
        [
            "virtwork-tps-server-0",
            "virtwork-tps-server-1",
            "virtwork-tps-client-0",
            "virtwork-tps-client-1",
            "virtwork-network-server-0",
            "virtwork-network-server-1",
            "virtwork-network-client-0",
            "virtwork-network-client-1",
        ]
    );
    let vm = &plan.vms[2];
    assert_eq!(vm.role.as_deref(), Some("client"));
    assert!(labels_of(&vm.vm().metadata).contains(&"virtwork/role=client".to_string()));
    // Secrets carry no role label (reference §6.1).
    assert!(
        !labels_of(&vm.secret().metadata)
            .iter()
            .any(|l| l.starts_with("virtwork/role"))
    );
    let vm_object = vm.vm();
    let template_labels = vm_object.spec.template.metadata.as_ref().unwrap();
    assert_eq!(labels_of(template_labels), labels_of(&vm.vm().metadata));

    let services: Vec<(&str, &str)> = plan
        .services
        .iter()
        .map(|s| {
            (
                s.service.metadata.name.as_deref().unwrap(),
                s.workload.as_str(),
            )
        })
        .collect();
    assert_eq!(
        services,
        [
            ("virtwork-iperf3-server", "network"),
            ("virtwork-tps-server", "tps")
        ]
    );
    let svc = &plan.services[0].service;
    assert_eq!(
        labels_of(&svc.metadata),
        [
            "app.kubernetes.io/component=network",
            "app.kubernetes.io/managed-by=virtwork",
            "app.kubernetes.io/name=virtwork",
            &format!("virtwork/run-id={RUN_ID}"),
        ]
    );
    let spec = svc.spec.as_ref().unwrap();
    assert_eq!(
        spec.selector.as_ref().unwrap()["app.kubernetes.io/component"],
        "network"
    );
    let port = &spec.ports.as_ref().unwrap()[0];
    assert_eq!((port.port, port.protocol.as_deref()), (5201, Some("TCP")));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(5201))
    );
    assert_eq!(plan.workloads[0].vm_count, 4);
    assert!(plan.workloads[0].requires_service);
}

#[test]
fn per_workload_override_beats_global_values() {
    let mut cfg = config(&["cpu", "memory"]);
    cfg.vm_count = 5;
    cfg.cpu_cores = 4;
    cfg.workload_overrides.insert(
        "cpu".into(),
        WorkloadOverride {
            vm_count: Some(2),
            cpu_cores: Some(8),
            memory: Some("4Gi".parse().unwrap()),
            params: BTreeMap::from([("cpu-method".into(), "matrixprod".into())]),
            ..Default::default()
        },
    );
    let requests = plan::resolve_requests(&cfg).unwrap();
    let cpu = &requests.planned[0].settings;
    assert_eq!(
        (cpu.vm_count, cpu.cpu_cores, cpu.memory.as_str()),
        (2, 8, "4Gi")
    );
    assert_eq!(cpu.params["cpu-method"], "matrixprod");
    let memory = &requests.planned[1].settings;
    assert_eq!(
        (memory.vm_count, memory.cpu_cores, memory.memory.as_str()),
        (5, 4, "2Gi")
    );
    assert!(memory.params.is_empty());

    let plan = plan_with(&cfg, |_| {}).unwrap();
    assert_eq!(plan.vms.len(), 7);
    let vm = &plan.vms[0].vm();
    let domain = &vm.spec.template.spec.as_ref().unwrap().domain;
    assert_eq!(domain.cpu.as_ref().unwrap().cores, Some(8));
    assert_eq!(
        domain.resources.as_ref().unwrap().requests["memory"].0,
        "4Gi"
    );
}

#[test]
fn disabled_workloads_are_skipped_and_recorded() {
    let mut cfg = config(&["cpu", "memory"]);
    cfg.workload_overrides.insert(
        "memory".into(),
        WorkloadOverride {
            enabled: Some(false),
            ..Default::default()
        },
    );
    let plan = plan_with(&cfg, |_| {}).unwrap();
    assert_eq!(plan.skipped, ["memory"]);
    assert_eq!(plan.workloads.len(), 1);
    assert_eq!(plan.vms.len(), 1);
}

#[test]
fn catalog_entries_are_planned_after_builtins() {
    let mut cfg = config(&["cpu"]);
    cfg.from_catalog = vec!["sysbench".into()];
    let plan = plan_with(&cfg, |_| {}).unwrap();
    let order: Vec<&str> = plan.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(order, ["cpu", "sysbench"]);
}

#[test]
fn duplicate_workload_names_are_rejected() {
    let msg = input_error(plan_with(&config(&["cpu", "memory", "cpu"]), |_| {}));
    assert!(msg.contains("\"cpu\" is listed more than once"), "{msg}");
    let mut cfg = config(&["cpu"]);
    cfg.from_catalog = vec!["cpu".into()];
    let msg = input_error(plan_with(&cfg, |_| {}));
    assert!(msg.contains("both as a built-in"), "{msg}");
}

#[test]
fn no_workloads_is_an_input_error() {
    let msg = input_error(plan_with(&config(&[]), |_| {}));
    assert_eq!(
        msg,
        "no workloads specified: use --workloads or --from-catalog"
    );
}

#[test]
fn colliding_vm_names_across_workloads_are_rejected() {
    // Contrived now that names carry the run tag, but still refused: a catalog entry
    // "network-3f1c7a" and a network role named like the tag make the same VM name.
    let mut cfg = config(&["network"]);
    cfg.from_catalog = vec!["network-3f1c7a".into()];
    let msg = input_error(plan_with(&cfg, |w| {
        if w.name == "network" {
            w.roles = vec!["3f1c7a"];
        }
    }));
    assert_eq!(
        msg,
        "workloads \"network\" and \"network-3f1c7a\" would both create the VM \
         \"virtwork-network-3f1c7a-3f1c7a-0\"; run them in separate namespaces or rename the \
         catalog entry"
    );
    // The run tag keeps apart what used to collide: "network-server" and network's servers.
    cfg.from_catalog = vec!["network-server".into()];
    assert!(
        plan_with(&cfg, |w| {
            if w.name == "network" {
                w.roles = vec!["server", "client"];
            }
        })
        .is_ok()
    );
}

#[test]
fn overlong_names_are_rejected_with_the_limit() {
    let long = "w".repeat(43);
    let mut cfg = config(&[]);
    cfg.from_catalog = vec![long.clone()];
    cfg.vm_count = 1;
    // virtwork-<43>-<tag>-0 = 61 chars is fine; a role pushes it past 63.
    assert!(plan_with(&cfg, |_| {}).is_ok());
    let msg = input_error(plan_with(&cfg, |w| w.roles = vec!["server"]));
    assert!(msg.starts_with("VM name (workload"), "{msg}");
    assert!(msg.contains("at most 63"), "{msg}");

    cfg.from_catalog = vec!["w".repeat(55)];
    let msg = input_error(plan_with(&cfg, |_| {}));
    assert!(
        msg.contains("too long") && msg.contains("the limit is 63"),
        "{msg}"
    );
}

#[test]
fn invalid_names_and_quantities_are_rejected() {
    let mut cfg = config(&[]);
    cfg.from_catalog = vec!["My_Entry".into()];
    let msg = input_error(plan_with(&cfg, |_| {}));
    assert!(msg.contains("not a valid DNS-1123 label"), "{msg}");

    // A bad namespace or quantity cannot reach the planner: its input holds them as types
    // that refuse such text (the configuration tests show the one-line errors users get).
    assert!(
        "Bad Namespace"
            .parse::<virtwork::model::DnsLabel>()
            .is_err()
    );
    assert!("2GB".parse::<virtwork::model::Quantity>().is_err());

    let cfg = config(&["cpu"]);
    let msg = input_error(plan_with(&cfg, |w| {
        w.disks = vec![DataDisk {
            name: "cloudinitdisk".into(),
            dv_base: "x".into(),
            serial: "x".into(),
            size: "1Gi".parse().unwrap(),
        }]
    }));
    assert!(msg.contains("is reserved"), "{msg}");
}

#[test]
fn zero_counts_are_rejected() {
    let mut cfg = config(&["cpu"]);
    cfg.workload_overrides.insert(
        "cpu".into(),
        WorkloadOverride {
            vm_count: Some(0),
            ..Default::default()
        },
    );
    let msg = input_error(plan_with(&cfg, |_| {}));
    assert_eq!(
        msg,
        "vm-count for workload \"cpu\" must be at least 1, got 0"
    );
}

#[test]
fn userdata_over_one_mebibyte_is_rejected_and_exactly_one_is_accepted() {
    let cfg = config(&["cpu"]);
    let header = "#cloud-config\n# cpu None\n".len();
    let plan = plan_with(&cfg, |w| w.userdata_bytes = 1024 * 1024 - header).unwrap();
    assert_eq!(
        plan.vms[0].secret().string_data.as_ref().unwrap()["userdata"].len(),
        1024 * 1024
    );
    let msg = input_error(plan_with(&cfg, |w| {
        w.userdata_bytes = 1024 * 1024 - header + 1
    }));
    assert!(
        msg.contains("1048577 bytes") && msg.contains("1 MiB"),
        "{msg}"
    );
}

#[test]
fn workload_userdata_errors_name_the_workload_and_role() {
    let cfg = config(&["tps"]);
    let msg = input_error(plan_with(&cfg, |w| w.roles = vec!["server", "broken"]));
    assert_eq!(
        msg,
        "generating cloud-init for workload \"tps\" role \"broken\": param \"x\" is bad"
    );
}

#[test]
fn empty_service_selector_is_rejected() {
    let cfg = config(&["network"]);
    let msg = input_error(plan_with(&cfg, |w| {
        let mut svc = pair_service("virtwork-iperf3-server", "network");
        svc.selector.clear();
        w.service = Some(svc);
    }));
    assert!(msg.contains("empty selector"), "{msg}");
}

#[test]
fn planning_is_deterministic() {
    let mut cfg = config(&["tps", "cpu", "network"]);
    cfg.vm_count = 2;
    let build = || {
        plan_with(&cfg, |w| {
            if w.name != "cpu" {
                w.roles = vec!["server", "client"];
                w.service = Some(pair_service(
                    &format!("virtwork-{}-server", w.name),
                    &w.name.clone(),
                ));
            }
        })
        .unwrap()
    };
    let render = |p: &Plan| {
        let vms: Vec<_> = p
            .vms
            .iter()
            .map(|v| serde_json::to_string(&v.vm()).unwrap())
            .collect();
        let svcs: Vec<_> = p
            .services
            .iter()
            .map(|s| serde_json::to_string(&s.service).unwrap())
            .collect();
        (vms, svcs)
    };
    assert_eq!(render(&build()), render(&build()));
}

#[test]
fn dry_run_yaml_is_a_valid_stream_in_reference_order() {
    use serde::Deserialize;
    let mut cfg = config(&["network", "cpu"]);
    cfg.vm_count = 1;
    let plan = plan_with(&cfg, |w| {
        if w.name == "network" {
            w.roles = vec!["server", "client"];
            w.service = Some(pair_service("virtwork-iperf3-server", "network"));
        }
    })
    .unwrap();
    let yaml = virtwork::render::dry_run_yaml(&plan).unwrap();
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .collect();
    let kinds_names: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("Namespace", "virtwork".to_string()),
        ("Service", "virtwork-iperf3-server".to_string()),
        ("Secret", t("virtwork-network-server-0-cloudinit")),
        ("Secret", t("virtwork-network-client-0-cloudinit")),
        ("Secret", t("virtwork-cpu-0-cloudinit")),
        ("VirtualMachine", t("virtwork-network-server-0")),
        ("VirtualMachine", t("virtwork-network-client-0")),
        ("VirtualMachine", t("virtwork-cpu-0")),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(kinds_names, expected);
    let comments: Vec<&str> = yaml.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(
        comments[0],
        "# Namespace: virtwork (for kubectl apply on a cluster without it)"
    );
    assert_eq!(
        comments[1],
        "# Service: virtwork-iperf3-server (workload: network)"
    );
    assert_eq!(
        comments[7],
        "# VirtualMachine: virtwork-cpu-3f1c7a-0 (workload: cpu)"
    );
    assert_eq!(yaml.lines().filter(|l| *l == "---").count(), docs.len() - 1);
    // Userdata survives the YAML round trip byte for byte.
    let userdata = docs[4]["stringData"]["userdata"].as_str().unwrap();
    assert_eq!(
        userdata,
        plan.vms[2].secret().string_data.as_ref().unwrap()["userdata"]
    );

    let json = virtwork::render::plan_json(&plan, "client").unwrap();
    assert_eq!(json["run_id"], RUN_ID);
    assert_eq!(json["totals"]["vms"], 3);
    assert_eq!(json["vms"][2]["metadata"]["name"], t("virtwork-cpu-0"));
    assert_eq!(json["services"][0]["kind"], "Service");
    assert_eq!(json["secrets"][0]["apiVersion"], "v1");
}

#[test]
fn full_builtin_plan_has_the_reference_counts_and_no_plain_credentials() {
    let cfg = test_config::with_ssh(test_config::plan_input(&test_config::ALL_BUILTINS, 1));
    let registry = virtwork::workloads::Registry::builtin();
    let plan = plan::build_plan(&cfg, &registry, RUN_ID.parse().unwrap()).unwrap();
    assert_eq!(
        (
            plan.vms.len(),
            plan.secrets().count(),
            plan.services.len(),
            plan.data_volume_count()
        ),
        (11, 11, 2, 3)
    );
    for svc in &plan.services {
        let selector = svc
            .service
            .spec
            .as_ref()
            .unwrap()
            .selector
            .as_ref()
            .unwrap();
        assert_eq!(selector["app.kubernetes.io/component"], svc.workload);
    }
    let json =
        serde_json::to_string(&virtwork::render::plan_json(&plan, "client").unwrap()).unwrap();
    let yaml = virtwork::render::dry_run_yaml(&plan).unwrap();
    for rendered in [&json, &yaml] {
        assert!(
            !rendered.contains("s3cret-Passw0rd"),
            "plain password leaked"
        );
        assert!(
            rendered.contains("$6$"),
            "hashed password expected in user-data"
        );
    }
}

#[test]
fn registry_param_errors_surface_as_input_errors() {
    let mut cfg = config(&["cpu"]);
    cfg.workload_overrides.insert(
        "cpu".into(),
        WorkloadOverride {
            params: BTreeMap::from([("cpu-method".into(), "$(reboot)".into())]),
            ..Default::default()
        },
    );
    let registry = virtwork::workloads::Registry::builtin();
    match plan::build_plan(&cfg, &registry, RUN_ID.parse().unwrap()) {
        Err(Error::Input(msg)) => assert!(msg.contains("cpu-method"), "{msg}"),
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn unit_names_unsafe_for_the_readiness_probe_are_rejected() {
    for bad in [
        "a b.service",
        "x;reboot.service",
        "$(id).service",
        "-x.service",
        "",
    ] {
        let err = plan::workload_probe("w", &[bad.to_string()]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad}");
        assert!(
            err.to_string()
                .contains("cannot be checked by the readiness probe"),
            "{err}"
        );
    }
    let probe = plan::workload_probe("w", &["a.service".to_string(), "b@1.service".to_string()])
        .unwrap()
        .unwrap();
    assert!(probe.exec.is_none());
    let get = probe.http_get.unwrap();
    assert_eq!(
        (get.path.as_deref(), get.port),
        (
            Some("/ready"),
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8787)
        )
    );
    assert!(plan::workload_probe("w", &[]).unwrap().is_none());
}

/// With `guest-os: auto` (the default), the family is inferred from the containerdisk image:
/// the payload follows it, and an image naming no known distribution renders for fedora
/// with a plan warning naming the image.
#[test]
fn guest_family_follows_the_container_disk_image() {
    let registry = virtwork::workloads::Registry::builtin();
    let userdata =
        |plan: &Plan| plan.vms[0].secret().string_data.as_ref().unwrap()["userdata"].clone();
    let mut input = test_config::plan_input(&["database"], 1);
    input.container_disk_image = "quay.io/containerdisks/debian:12".parse().unwrap();
    let plan = plan::build_plan(&input, &registry, RUN_ID.parse().unwrap()).unwrap();
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    let ud = userdata(&plan);
    assert!(
        ud.contains("- postgresql\n") && !ud.contains("postgresql-server"),
        "{ud}"
    );
    for (image, warned) in [
        ("quay.io/containerdisks/fedora:42", false),
        ("registry.example.com/team/golden-vm:3", true),
    ] {
        input.container_disk_image = image.parse().unwrap();
        let plan = plan::build_plan(&input, &registry, RUN_ID.parse().unwrap()).unwrap();
        assert!(userdata(&plan).contains("- postgresql-server\n"), "{image}");
        assert_eq!(plan.warnings.len(), usize::from(warned), "{image}");
        if warned {
            assert!(plan.warnings[0].contains(image), "{:?}", plan.warnings);
        }
    }
}

#[test]
fn vms_of_one_role_share_one_rendered_user_data() {
    // Memory stays flat in VM count only if the user-data is rendered once per role and
    // shared, not copied into every VM of the plan.
    let plan = plan::build_plan(
        &test_config::plan_input(&["cpu", "network"], 3),
        &virtwork::workloads::Registry::builtin(),
        RUN_ID.parse().unwrap(),
    )
    .unwrap();
    let cpu: Vec<_> = plan.vms.iter().filter(|v| v.workload == "cpu").collect();
    assert!(
        cpu.windows(2)
            .all(|w| std::sync::Arc::ptr_eq(w[0].userdata(), w[1].userdata()))
    );
    let server = plan
        .vms
        .iter()
        .find(|v| v.role.as_deref() == Some("server"))
        .unwrap();
    let client = plan
        .vms
        .iter()
        .find(|v| v.role.as_deref() == Some("client"))
        .unwrap();
    assert!(!server.shares_template_with(client));
    // Building an object twice gives the same object: the plan stays a pure value.
    assert_eq!(cpu[1].vm(), cpu[1].vm());
    assert_eq!(
        cpu[1].secret().string_data.unwrap()["userdata"],
        cpu[1].userdata().to_string()
    );
}
