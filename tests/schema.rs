//! Generated KubeVirt objects against KubeVirt's published OpenAPI schema, with unknown fields
//! rejected, and the schema validator itself (it must catch the mistakes it exists for).

use crate::support::schema;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use virtwork::kubevirt::*;

/// A VM shaped exactly like the reference's `--workloads disk` dry-run (inventory §6).
fn disk_vm() -> VirtualMachine {
    let labels: BTreeMap<String, String> = [
        ("app.kubernetes.io/component", "disk"),
        ("app.kubernetes.io/managed-by", "virtwork"),
        ("app.kubernetes.io/name", "virtwork-disk"),
        ("virtwork/run-id", "0b3c2f8e-6f0a-4b8e-9a51-1f2d3c4b5a69"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let disk = |name: &str, serial: Option<&str>| Disk {
        name: name.into(),
        disk: Some(DiskTarget {
            bus: Some("virtio".into()),
        }),
        serial: serial.map(Into::into),
    };
    VirtualMachine {
        metadata: ObjectMeta {
            name: Some("virtwork-disk-0".into()),
            namespace: Some("virtwork".into()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: VirtualMachineSpec {
            run_strategy: Some("Always".into()),
            template: VirtualMachineInstanceTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(VirtualMachineInstanceSpec {
                    domain: DomainSpec {
                        cpu: Some(Cpu { cores: Some(2) }),
                        devices: Devices {
                            disks: vec![
                                disk("containerdisk", None),
                                disk("cloudinitdisk", None),
                                disk("datadisk", Some("virtwork-disk")),
                            ],
                            interfaces: vec![Interface {
                                name: "default".into(),
                                masquerade: Some(InterfaceMasquerade {}),
                            }],
                        },
                        resources: Some(ResourceRequirements {
                            requests: [("memory".to_string(), Quantity("2Gi".into()))].into(),
                            ..Default::default()
                        }),
                    },
                    readiness_probe: virtwork::plan::workload_probe(
                        "disk",
                        &["virtwork-disk.service".to_string()],
                    )
                    .unwrap(),
                    eviction_strategy: Some("LiveMigrate".into()),
                    termination_grace_period_seconds: Some(120),
                    networks: vec![Network {
                        name: "default".into(),
                        pod: Some(PodNetwork {}),
                    }],
                    volumes: vec![
                        Volume {
                            name: "containerdisk".into(),
                            container_disk: Some(ContainerDiskSource {
                                image: "quay.io/containerdisks/fedora:42".into(),
                            }),
                            ..Default::default()
                        },
                        Volume {
                            name: "cloudinitdisk".into(),
                            cloud_init_no_cloud: Some(CloudInitNoCloudSource {
                                secret_ref: Some(LocalObjectReference {
                                    name: "virtwork-disk-0-cloudinit".into(),
                                }),
                            }),
                            ..Default::default()
                        },
                        Volume {
                            name: "datadisk".into(),
                            data_volume: Some(DataVolumeVolumeSource {
                                name: "virtwork-disk-data-virtwork-disk-0".into(),
                            }),
                            ..Default::default()
                        },
                    ],
                }),
            },
            data_volume_templates: vec![DataVolumeTemplateSpec {
                metadata: ObjectMeta {
                    name: Some("virtwork-disk-data-virtwork-disk-0".into()),
                    labels: Some(labels),
                    ..Default::default()
                },
                spec: DataVolumeSpec {
                    source: Some(DataVolumeSource {
                        blank: Some(DataVolumeBlankImage {}),
                    }),
                    storage: Some(StorageSpec {
                        access_modes: vec!["ReadWriteMany".into()],
                        volume_mode: Some("Block".into()),
                        storage_class_name: Some("ocs-storagecluster-ceph-rbd".into()),
                        resources: Some(StorageResources {
                            requests: [("storage".to_string(), Quantity("10Gi".into()))].into(),
                        }),
                    }),
                },
            }],
        },
        status: None,
    }
}

fn disk_vm_json() -> Value {
    serde_json::to_value(disk_vm()).unwrap()
}

/// Applies `edit` to a copy of the reference disk VM and returns the violations found.
fn violations_after(schema_doc: &Value, edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut vm = disk_vm_json();
    edit(&mut vm);
    schema::validate(schema_doc, "v1.VirtualMachine", &vm, true)
}

fn volumes(vm: &mut Value) -> &mut Vec<Value> {
    vm.pointer_mut("/spec/template/spec/volumes")
        .unwrap()
        .as_array_mut()
        .unwrap()
}

#[test]
fn reference_disk_vm_shape_is_what_the_types_serialize() {
    let vm = disk_vm_json();
    assert_eq!(vm["apiVersion"], "kubevirt.io/v1");
    assert_eq!(vm["kind"], "VirtualMachine");
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    assert_eq!(
        vm.pointer("/spec/template/spec/volumes/1/cloudInitNoCloud/secretRef/name"),
        Some(&json!("virtwork-disk-0-cloudinit"))
    );
    assert_eq!(
        vm.pointer("/spec/dataVolumeTemplates/0/spec/storage/resources/requests/storage"),
        Some(&json!("10Gi"))
    );
    assert_eq!(
        vm.pointer("/spec/template/spec/domain/devices/interfaces/0"),
        Some(&json!({"masquerade": {}, "name": "default"}))
    );
    assert_eq!(
        vm.pointer("/spec/template/spec/readinessProbe"),
        Some(&json!({
            "httpGet": {"path": "/ready", "port": 8787},
            "periodSeconds": 15,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
            "successThreshold": 1,
        }))
    );
    assert_eq!(
        vm.pointer("/spec/template/spec/terminationGracePeriodSeconds"),
        Some(&json!(120))
    );
    assert_eq!(
        vm.pointer("/spec/template/spec/evictionStrategy"),
        Some(&json!("LiveMigrate"))
    );
    assert!(vm.get("status").is_none(), "unset status must not be sent");
    // Round trip: what we send parses back to the same value.
    let back: VirtualMachine = serde_json::from_value(vm).unwrap();
    assert_eq!(back, disk_vm());
}

#[test]
fn reference_disk_vm_validates_against_kubevirt_schema() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let errors = schema::validate(&doc, "v1.VirtualMachine", &disk_vm_json(), true);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn validator_rejects_user_data_secret_ref_in_place_of_secret_ref() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let errors = violations_after(&doc, |vm| {
        volumes(vm)[1] = json!({
            "name": "cloudinitdisk",
            "cloudInitNoCloud": {"userDataSecretRef": {"name": "virtwork-disk-0-cloudinit"}}
        });
    });
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("unknown field \"userDataSecretRef\"")
            && errors[0].contains("secretRef"),
        "{errors:#?}"
    );
    // Non-strict mode tolerates unknown fields (what a lenient reader would accept).
    let mut vm = disk_vm_json();
    volumes(&mut vm)[1]["cloudInitNoCloud"]["userDataSecretRef"] = json!({"name": "x"});
    assert!(schema::validate(&doc, "v1.VirtualMachine", &vm, false).is_empty());
}

#[test]
fn validator_rejects_wrong_types() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let errors = violations_after(&doc, |vm| {
        vm["spec"]["template"]["spec"]["domain"]["cpu"]["cores"] = json!("2");
    });
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("$.spec.template.spec.domain.cpu.cores: expected integer"),
        "{errors:#?}"
    );

    let errors = violations_after(&doc, |vm| {
        vm["spec"]["template"]["spec"]["networks"] = json!({"name": "default"});
    });
    assert!(errors[0].contains("expected array"), "{errors:#?}");

    let errors = violations_after(&doc, |vm| {
        vm["metadata"]["labels"]["virtwork/run-id"] = json!(7);
    });
    assert!(
        errors[0].starts_with("$.metadata.labels.virtwork/run-id: expected string"),
        "{errors:#?}"
    );
}

#[test]
fn validator_rejects_missing_required_fields() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let errors = violations_after(&doc, |vm| {
        vm["spec"].as_object_mut().unwrap().remove("template");
    });
    assert_eq!(
        errors,
        vec!["$.spec: missing required field \"template\"".to_string()]
    );

    let errors = violations_after(&doc, |vm| {
        volumes(vm)[0]["containerDisk"]
            .as_object_mut()
            .unwrap()
            .remove("image");
    });
    assert_eq!(
        errors,
        vec![
            "$.spec.template.spec.volumes[0].containerDisk: missing required field \"image\""
                .to_string()
        ]
    );
}

#[test]
fn validator_rejects_bad_quantities_enums_and_fields_on_empty_objects() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let errors = violations_after(&doc, |vm| {
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["resources"]["requests"]["storage"] =
            json!("10GB");
    });
    assert!(
        errors.len() == 1 && errors[0].contains("\"10GB\" is not a Kubernetes quantity"),
        "{errors:#?}"
    );

    let errors = violations_after(&doc, |vm| {
        volumes(vm)[0]["containerDisk"]["imagePullPolicy"] = json!("Sometimes");
    });
    assert!(
        errors.len() == 1 && errors[0].contains("is not one of"),
        "{errors:#?}"
    );

    // The probe's HTTP action is the core HTTPGetAction: no `url`.
    let errors = violations_after(&doc, |vm| {
        vm["spec"]["template"]["spec"]["readinessProbe"]["httpGet"]["url"] = json!("/ready");
        vm["spec"]["template"]["spec"]["readinessProbe"]["periodSeconds"] = json!("15");
    });
    assert_eq!(errors.len(), 2, "{errors:#?}");

    // `masquerade: {}` takes no fields.
    let errors = violations_after(&doc, |vm| {
        vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["masquerade"]["ports"] =
            json!([]);
    });
    assert!(
        errors.len() == 1 && errors[0].contains("unknown field \"ports\""),
        "{errors:#?}"
    );

    // The reference's outdated docs showed `running: true` plus CPU under requests; the
    // first is a real (deprecated) field, the second a valid map entry — both validate,
    // but an invented top-level field does not.
    let errors = violations_after(&doc, |vm| {
        vm["spec"]["userData"] = json!("#cloud-config");
    });
    assert!(
        errors.len() == 1 && errors[0].starts_with("$.spec: unknown field \"userData\""),
        "{errors:#?}"
    );
}

#[test]
fn validator_checks_integer_formats_and_int_or_string() {
    let doc = json!({"definitions": {
        "t.Obj": {"type": "object", "required": ["a"], "properties": {
            "a": {"type": "integer", "format": "int32"},
            "port": {"$ref": "#/definitions/t.IntOrString"},
            "q": {"$ref": "#/definitions/k8s.io.apimachinery.pkg.api.resource.Quantity"},
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "maybe": {"type": ["string", "null"]}
        }},
        "t.IntOrString": {"type": "string", "format": "int-or-string"},
        "k8s.io.apimachinery.pkg.api.resource.Quantity": {"type": ["string", "integer", "number"]}
    }});
    let ok = json!({"a": 1, "port": "http", "q": "1.5Gi", "tags": {"x": "y"}, "maybe": null});
    assert!(schema::validate(&doc, "t.Obj", &ok, true).is_empty());
    let ok = json!({"a": -5, "port": 8080, "q": 3});
    assert!(schema::validate(&doc, "t.Obj", &ok, true).is_empty());

    let bad = json!({"a": 4_294_967_296_u64, "port": true, "q": "2GB", "tags": {"x": 1}});
    let errors = schema::validate(&doc, "t.Obj", &bad, true);
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors[0].contains("out of range"), "{errors:#?}");
    assert!(
        errors[1].starts_with("$.port: expected string"),
        "{errors:#?}"
    );
    assert!(
        errors[2].contains("not a Kubernetes quantity"),
        "{errors:#?}"
    );
    assert!(
        errors[3].starts_with("$.tags.x: expected string"),
        "{errors:#?}"
    );

    assert_eq!(
        schema::validate(&doc, "t.Missing", &ok, true),
        vec!["$: schema has no definition \"t.Missing\"".to_string()]
    );
}

#[test]
fn quantity_grammar() {
    for good in [
        "2Gi", "10Gi", "512Mi", "4G", "1.5Gi", "100m", "1e3", "+1", "0", ".5",
    ] {
        assert!(schema::is_quantity(good), "{good}");
    }
    for bad in ["", "2GB", "10MiB", "Gi", "1.2.3", "1e", "abc", "1 Gi", "1x"] {
        assert!(!schema::is_quantity(bad), "{bad}");
    }
}

use crate::test_config;

/// Every VirtualMachine of a full plan — all nine built-ins at vm-count 2, SSH on, both
/// shipped catalog entries — validates against `v1.VirtualMachine` with unknown fields
/// rejected; so does every DataVolume template against `v1.DataVolumeTemplateSpec`.
#[test]
fn every_planned_vm_validates_against_kubevirt_schema() {
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let mut config = test_config::with_ssh(test_config::plan_input(&test_config::ALL_BUILTINS, 2));
    config.from_catalog = vec!["sysbench".into(), "redis-bench".into()];
    // A named class and access mode, so the optional storage fields are checked too.
    config.storage_class = Some("ocs-storagecluster-ceph-rbd".parse().unwrap());
    config.access_mode = Some(virtwork::model::AccessMode::ReadWriteMany);
    config.volume_mode = Some(virtwork::model::VolumeMode::Block);
    // `--ready-condition workload`, so the readiness probe is validated too.
    config.workload_probe = true;
    let registry =
        virtwork::workloads::Registry::with_catalog(&config.catalog_dir, &config.from_catalog)
            .unwrap();
    let run_id = test_config::RUN_ID.parse().unwrap();
    let plan = virtwork::plan::build_plan(&config, &registry, run_id).unwrap();
    // 7 single-role x2 + network/tps 2 roles x2 + sysbench x2 + redis-bench 1 server and
    // 2 clients (its server count is pinned, clients scale with vm-count).
    assert_eq!(plan.vms.len(), 7 * 2 + 2 * 4 + 2 + 3);
    let mut templates = 0;
    for vm in &plan.vms {
        let value = serde_json::to_value(vm.vm()).unwrap();
        let errors = schema::validate(&doc, "v1.VirtualMachine", &value, true);
        assert!(errors.is_empty(), "{}: {errors:#?}", vm.name);
        // ReadWriteMany disks migrate: `auto` lets every VM live-migrate.
        assert_eq!(
            value["spec"]["template"]["spec"]["evictionStrategy"], "LiveMigrate",
            "{}",
            vm.name
        );
        let probe = &value["spec"]["template"]["spec"]["readinessProbe"];
        assert_eq!(
            probe["httpGet"],
            json!({"path": "/ready", "port": 8787}),
            "{}",
            vm.name
        );
        for template in value["spec"]["dataVolumeTemplates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let errors = schema::validate(&doc, "v1.DataVolumeTemplateSpec", template, true);
            assert!(errors.is_empty(), "{}: {errors:#?}", vm.name);
            templates += 1;
        }
    }
    // disk, database, chaos-disk x2 and redis-bench's three VMs.
    assert_eq!(templates, 3 * 2 + 3);
}

/// Every eviction strategy virtwork can write validates as `v1.VirtualMachine`'s
/// `evictionStrategy`, and `auto` gives ReadWriteOnce data-disk VMs `None`, the others
/// `LiveMigrate`.
#[test]
fn every_eviction_strategy_validates_against_kubevirt_schema() {
    use virtwork::model::EvictionStrategy;
    let Some(doc) = schema::load_schema() else {
        return;
    };
    let registry = virtwork::workloads::Registry::builtin();
    let run_id = test_config::RUN_ID.parse().unwrap();
    for (strategy, cpu, disk) in [
        (
            EvictionStrategy::Auto,
            "LiveMigrate",
            "LiveMigrateIfPossible",
        ),
        (EvictionStrategy::LiveMigrate, "LiveMigrate", "LiveMigrate"),
        (
            EvictionStrategy::LiveMigrateIfPossible,
            "LiveMigrateIfPossible",
            "LiveMigrateIfPossible",
        ),
        (EvictionStrategy::None, "None", "None"),
    ] {
        let mut config = test_config::plan_input(&["cpu", "disk"], 1);
        config.eviction_strategy = strategy;
        let plan = virtwork::plan::build_plan(&config, &registry, run_id).unwrap();
        for (vm, expected) in plan.vms.iter().zip([cpu, disk]) {
            let value = serde_json::to_value(vm.vm()).unwrap();
            let errors = schema::validate(&doc, "v1.VirtualMachine", &value, true);
            assert!(errors.is_empty(), "{}: {errors:#?}", vm.name);
            assert_eq!(
                value["spec"]["template"]["spec"]["evictionStrategy"], expected,
                "{strategy}: {}",
                vm.name
            );
        }
        // On a single-node cluster `auto` gives None; a strategy chosen by hand stays.
        let single_node = plan.for_topology(1);
        for ((vm, expected), multi) in single_node.vms.iter().zip([cpu, disk]).zip(&plan.vms) {
            let value = serde_json::to_value(vm.vm()).unwrap();
            let errors = schema::validate(&doc, "v1.VirtualMachine", &value, true);
            assert!(errors.is_empty(), "{}: {errors:#?}", vm.name);
            let expected = if strategy == EvictionStrategy::Auto {
                "None"
            } else {
                expected
            };
            assert_eq!(
                value["spec"]["template"]["spec"]["evictionStrategy"], expected,
                "{strategy} on one node: {}",
                vm.name
            );
            // Nothing but the strategy depends on the topology.
            let mut multi = serde_json::to_value(multi.vm()).unwrap();
            multi["spec"]["template"]["spec"]["evictionStrategy"] = json!(expected);
            assert_eq!(value, multi);
        }
    }
}
