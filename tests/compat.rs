//! Compatibility with the Go tool and the configuration keys added for it, through the real
//! binary: `--guest-os`, storage class and access mode, the Go tool's input spellings (boolean
//! flags with `=true|false`, signal numbers, `cleanup-mode`, space-separated lists), piped
//! cleanup confirmation, the cloud-init users section and the dry-run audit events. Cluster
//! behaviour is checked against the fake API server in tests/support.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde::Deserialize;
use serde_yaml::Value;

/// The binary in `dir` with a clean environment (no VIRTWORK_* from the developer's shell, no
/// kubeconfig) plus `env`.
fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBECONFIG", dir.join("no-such-kubeconfig"))
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn virtwork(args: &[&str], env: &[(&str, &str)]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    command(dir.path(), args, env).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `run --dry-run --no-audit <args>`: the parsed YAML documents and stderr.
fn dry_run(args: &[&str], env: &[(&str, &str)]) -> (Vec<Value>, String) {
    let mut full = vec!["run", "--dry-run", "--no-audit"];
    full.extend_from_slice(args);
    let out = virtwork(&full, env);
    assert_exit(&out, 0);
    let docs = serde_yaml::Deserializer::from_str(&text(&out.stdout))
        .map(|doc| Value::deserialize(doc).expect("every document parses"))
        .collect();
    (docs, text(&out.stderr))
}

/// The cloud-init user-data of the first VM of `workload` in a dry-run stream.
fn userdata(docs: &[Value], workload: &str) -> String {
    let secret = docs
        .iter()
        .find(|d| {
            d["kind"] == "Secret"
                && d["metadata"]["labels"]["app.kubernetes.io/component"] == workload
        })
        .unwrap_or_else(|| panic!("no Secret for {workload}"));
    secret["stringData"]["userdata"]
        .as_str()
        .expect("userdata")
        .to_string()
}

fn yaml_file(dir: &Path, content: &str) -> String {
    let path = dir.join("virtwork.yaml");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    path.display().to_string()
}

const FEDORA_DB: &str = "- postgresql-server\n";
const DEBIAN_DB: &str = "- postgresql\n";

fn is_debian_database(userdata: &str) -> bool {
    userdata.contains(DEBIAN_DB) && !userdata.contains(FEDORA_DB)
}

#[test]
fn guest_os_flag_env_and_yaml_choose_the_payload_family() {
    let fedora_image = ["--workloads", "database,cpu"];
    // auto with a fedora image: fedora, no warning.
    let (docs, stderr) = dry_run(&fedora_image, &[]);
    assert!(userdata(&docs, "database").contains(FEDORA_DB));
    assert!(!stderr.contains("guest OS"), "{stderr}");

    // The flag names the family whatever the image says.
    let mut args = fedora_image.to_vec();
    args.extend(["--guest-os", "debian"]);
    let (docs, _) = dry_run(&args, &[]);
    assert!(is_debian_database(&userdata(&docs, "database")));

    // The environment variable.
    let (docs, _) = dry_run(&fedora_image, &[("VIRTWORK_GUEST_OS", "debian")]);
    assert!(is_debian_database(&userdata(&docs, "database")));

    // auto infers debian from a debian image; an explicit fedora beats the image name.
    let debian_image = [
        "--workloads",
        "database",
        "--container-disk-image",
        "quay.io/containerdisks/debian:12",
    ];
    let (docs, _) = dry_run(&debian_image, &[]);
    assert!(is_debian_database(&userdata(&docs, "database")));
    let mut args = debian_image.to_vec();
    args.extend(["--guest-os", "fedora"]);
    let (docs, _) = dry_run(&args, &[]);
    assert!(userdata(&docs, "database").contains(FEDORA_DB));

    // YAML: global fedora, one workload debian.
    let dir = tempfile::tempdir().unwrap();
    let config = yaml_file(
        dir.path(),
        "guest-os: fedora\nworkloads:\n  database:\n    guest_os: debian\n",
    );
    let (docs, _) = dry_run(
        &[
            "--config",
            &config,
            "--workloads",
            "database,chaos-network",
            "--container-disk-image",
            "quay.io/containerdisks/debian:12",
        ],
        &[],
    );
    assert!(is_debian_database(&userdata(&docs, "database")));
    let other = userdata(&docs, "chaos-network");
    assert!(other.contains("- iproute-tc\n"), "{other}");
}

#[test]
fn guest_os_auto_warns_once_for_an_unknown_image_and_an_explicit_family_does_not() {
    let image = "registry.example.com/team/golden-vm:3";
    let args = [
        "--workloads",
        "database,cpu",
        "--container-disk-image",
        image,
    ];
    let (docs, stderr) = dry_run(&args, &[]);
    assert!(userdata(&docs, "database").contains(FEDORA_DB));
    assert_eq!(
        stderr.matches("cannot tell the guest OS family").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains(image), "{stderr}");

    let mut explicit = args.to_vec();
    explicit.extend(["--guest-os", "fedora"]);
    let (_, stderr) = dry_run(&explicit, &[]);
    assert!(!stderr.contains("cannot tell"), "{stderr}");
}

#[test]
fn bad_guest_os_values_are_refused_naming_their_input() {
    let dir = tempfile::tempdir().unwrap();
    let config = yaml_file(dir.path(), "workloads:\n  cpu:\n    guest-os: ubuntu\n");
    for (args, env, input) in [
        (vec!["--guest-os", "ubuntu"], vec![], "--guest-os"),
        (
            vec![],
            vec![("VIRTWORK_GUEST_OS", "suse")],
            "VIRTWORK_GUEST_OS",
        ),
        (
            vec!["--config", config.as_str()],
            vec![],
            "workloads.cpu.guest-os in",
        ),
    ] {
        let mut full = vec!["run", "--dry-run", "--no-audit"];
        full.extend(args);
        let out = virtwork(&full, &env);
        assert_exit(&out, 2);
        let stderr = text(&out.stderr);
        assert!(stderr.contains(input), "{input}: {stderr}");
        assert!(stderr.contains("auto, fedora or debian"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

// ---------------------------------------------------------------------------------------------
// Against the fake API server
// ---------------------------------------------------------------------------------------------

use support::{FakeApiServer, Options};

const NS: &str = "virtwork";

/// A scratch directory with a kubeconfig for the fake server and an audit database.
struct Cluster {
    server: FakeApiServer,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let server = FakeApiServer::start(Options::default());
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .unwrap();
        Cluster { server, dir }
    }

    /// `virtwork --kubeconfig .. --audit-db .. <args>` with a clean environment plus `env`.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let kubeconfig = self.dir.path().join("kubeconfig");
        let db = self.dir.path().join("audit.db");
        let mut full = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--audit-db",
            db.to_str().unwrap(),
        ];
        full.extend_from_slice(args);
        let mut cmd = command(self.dir.path(), &full, env);
        cmd.env("RUST_LOG", "info");
        cmd
    }

    fn virtwork(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().unwrap()
    }

    fn storage_class(&self, name: &str, annotations: serde_json::Value) {
        self.server.insert(serde_json::json!({
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "annotations": annotations},
            "provisioner": "fake.virtwork.test/hostpath"
        }));
    }

    /// CDI's StorageProfile of class `name` with these claim property sets
    /// (`[[access modes], volume mode]`).
    fn storage_profile(&self, name: &str, sets: &[(&[&str], &str)]) {
        let sets: Vec<serde_json::Value> = sets
            .iter()
            .map(|(modes, volume)| serde_json::json!({"accessModes": modes, "volumeMode": volume}))
            .collect();
        self.server.insert(serde_json::json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "StorageProfile",
            "metadata": {"name": name},
            "spec": {},
            "status": {"storageClass": name, "provisioner": "fake.virtwork.test/hostpath",
                       "claimPropertySets": sets}
        }));
    }

    /// (accessModes, volumeMode) of every PVC the fake CDI created.
    fn pvc_modes(&self) -> Vec<(Vec<String>, String)> {
        self.server
            .objects("persistentvolumeclaims", Some(NS))
            .iter()
            .map(|p| {
                (
                    p["spec"]["accessModes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|m| m.as_str().unwrap().to_string())
                        .collect(),
                    p["spec"]["volumeMode"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    fn without_default_class(self) -> Cluster {
        self.server
            .remove("storageclasses", "", "standard")
            .expect("the fake seeds a default class");
        self
    }

    /// Requests that change the cluster (access reviews write nothing).
    fn writes(&self) -> Vec<String> {
        self.server
            .request_log()
            .iter()
            .filter(|r| {
                matches!(
                    r.verb.as_str(),
                    "create" | "update" | "patch" | "delete" | "deletecollection"
                ) && r.resource != "selfsubjectaccessreviews"
            })
            .map(|r| format!("{} {}", r.verb, r.resource))
            .collect()
    }

    /// (storageClassName, accessModes) of every DataVolume template of the VMs of `workload`.
    fn vm_storage(&self, workload: &str) -> Vec<(Option<String>, Vec<String>)> {
        let mut found = Vec::new();
        for vm in self.server.objects("virtualmachines", Some(NS)) {
            if vm["metadata"]["labels"]["app.kubernetes.io/component"] != workload {
                continue;
            }
            for template in vm["spec"]["dataVolumeTemplates"].as_array().unwrap() {
                let storage = &template["spec"]["storage"];
                found.push((
                    storage["storageClassName"].as_str().map(str::to_string),
                    storage["accessModes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|m| m.as_str().unwrap().to_string())
                        .collect(),
                ));
            }
        }
        found
    }

    /// The class of every PVC the fake CDI created, sorted.
    fn pvc_classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self
            .server
            .objects("persistentvolumeclaims", Some(NS))
            .iter()
            .map(|p| {
                p["spec"]["storageClassName"]
                    .as_str()
                    .unwrap_or("-")
                    .to_string()
            })
            .collect();
        classes.sort();
        classes
    }
}

fn virt_default() -> serde_json::Value {
    serde_json::json!({"storageclass.kubevirt.io/is-default-virt-class": "true"})
}

#[test]
fn preflight_accepts_a_cluster_whose_only_default_is_the_virtualization_default() {
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("rbd-virt", virt_default());
    cluster.storage_class("other", serde_json::json!({}));
    let out = cluster.virtwork(
        &["run", "--workloads", "disk,database", "--timeout", "60"],
        &[],
    );
    assert_exit(&out, 0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("StorageClass rbd-virt, the cluster's virtualization default class"),
        "{stderr}"
    );
    // The disks name no class and no access mode; CDI (faked) bound them to the
    // virtualization default.
    assert_eq!(cluster.vm_storage("disk"), [(None, vec![])]);
    assert_eq!(cluster.pvc_classes(), ["rbd-virt", "rbd-virt"]);
}

#[test]
fn the_virtualization_default_is_named_over_the_kubernetes_default() {
    let cluster = Cluster::start();
    cluster.storage_class("rbd-virt", virt_default());
    let out = cluster.virtwork(&["run", "--workloads", "disk", "--timeout", "60"], &[]);
    assert_exit(&out, 0);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("StorageClass rbd-virt"), "{stderr}");
    assert!(!stderr.contains("StorageClass standard"), "{stderr}");
}

#[test]
fn storage_class_and_access_mode_reach_every_data_volume_and_need_no_default() {
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("fast", serde_json::json!({}));
    cluster.storage_class("slow", serde_json::json!({}));
    let config = yaml_file(
        cluster.dir.path(),
        "storage-class: slow\nworkloads:\n  database:\n    storage-class: fast\n",
    );
    let out = cluster.virtwork(
        &[
            "--config",
            &config,
            "run",
            "--workloads",
            "disk,database,chaos-disk,cpu",
            "--access-mode",
            "ReadWriteMany",
            "--timeout",
            "60",
        ],
        &[],
    );
    assert_exit(&out, 0);
    let rwx = || vec!["ReadWriteMany".to_string()];
    assert_eq!(cluster.vm_storage("disk"), [(Some("slow".into()), rwx())]);
    assert_eq!(
        cluster.vm_storage("chaos-disk"),
        [(Some("slow".into()), rwx())]
    );
    assert_eq!(
        cluster.vm_storage("database"),
        [(Some("fast".into()), rwx())]
    );
    assert_eq!(cluster.pvc_classes(), ["fast", "slow", "slow"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("data disks use StorageClass fast"),
        "{stderr}"
    );

    // The environment variable, for a class that does not exist: refused before any write,
    // naming the classes there are.
    let cluster = Cluster::start();
    cluster.storage_class("fast", serde_json::json!({}));
    let out = cluster.virtwork(
        &["run", "--workloads", "disk"],
        &[("VIRTWORK_STORAGE_CLASS", "gold")],
    );
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("StorageClass \"gold\" given with storage-class does not exist; available: fast, standard (default)"),
        "{stderr}"
    );
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());
}

/// Without `--access-mode` the DataVolumes name none and CDI gives the class's StorageProfile's
/// first choice (here ReadWriteMany Block, what OpenShift Virtualization's Ceph RBD class
/// offers): preflight says so, and the disks are shared.
#[test]
fn the_storage_profile_chooses_the_access_mode_unless_one_is_given() {
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("rbd-virt", virt_default());
    cluster.storage_profile(
        "rbd-virt",
        &[
            (&["ReadWriteMany"], "Block"),
            (&["ReadWriteOnce"], "Filesystem"),
        ],
    );
    let out = cluster.virtwork(&["run", "--workloads", "disk", "--timeout", "60"], &[]);
    assert_exit(&out, 0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "data disks of workload \"disk\" get ReadWriteMany (Block) on StorageClass rbd-virt, its StorageProfile's first choice"
        ),
        "{stderr}"
    );
    assert_eq!(cluster.vm_storage("disk"), [(None, vec![])]);
    assert_eq!(
        cluster.pvc_modes(),
        [(vec!["ReadWriteMany".to_string()], "Block".to_string())]
    );
    let vm = cluster
        .server
        .objects("virtualmachines", Some(NS))
        .remove(0);
    assert_eq!(
        vm["spec"]["template"]["spec"]["evictionStrategy"], "LiveMigrateIfPossible",
        "the plan cannot know the mode CDI picks; KubeVirt's LiveMigratable decides"
    );

    // Given, it reaches the DataVolumes and wins over the profile's first choice.
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("rbd-virt", virt_default());
    cluster.storage_profile(
        "rbd-virt",
        &[
            (&["ReadWriteMany"], "Block"),
            (&["ReadWriteOnce"], "Filesystem"),
        ],
    );
    let out = cluster.virtwork(
        &[
            "run",
            "--workloads",
            "disk",
            "--access-mode",
            "ReadWriteOnce",
            "--timeout",
            "60",
        ],
        &[],
    );
    assert_exit(&out, 0);
    assert_eq!(
        cluster.vm_storage("disk"),
        [(None, vec!["ReadWriteOnce".to_string()])]
    );
    assert_eq!(cluster.pvc_modes()[0].0, ["ReadWriteOnce"]);
}

/// An access mode the class's StorageProfile does not offer, or no mode on a profile that
/// names none, is refused before any write, naming what the class offers.
#[test]
fn an_access_mode_the_class_cannot_provide_is_refused_before_any_write() {
    let cluster = Cluster::start();
    cluster.storage_profile("standard", &[(&["ReadWriteOnce"], "Filesystem")]);
    let config = yaml_file(
        cluster.dir.path(),
        "workloads:\n  database:\n    access-mode: ReadWriteMany\n",
    );
    let out = cluster.virtwork(
        &["--config", &config, "run", "--workloads", "disk,database"],
        &[],
    );
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "StorageClass standard cannot provide access mode ReadWriteMany for the data disks of workload \"database\" \
             (its StorageProfile offers ReadWriteOnce (Filesystem)): choose one of those with --access-mode \
             (or workloads.database.access-mode), or another --storage-class"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("workload \"disk\" (its"), "{stderr}");
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());

    // A profile without claim property sets (a provisioner CDI does not know) and no mode.
    let cluster = Cluster::start();
    cluster.storage_profile("standard", &[]);
    let out = cluster.virtwork(&["run", "--workloads", "chaos-disk"], &[]);
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the StorageProfile of StorageClass standard names no access mode")
            && stderr.contains("no accessMode specified in StorageProfile standard"),
        "{stderr}"
    );
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());
}

/// `--volume-mode` reaches the DataVolumes (and the per-workload YAML key beats it); CDI
/// completes the access mode from the StorageProfile's first set with that volume mode; a
/// volume mode the class has no set for is refused before any write.
#[test]
fn a_volume_mode_reaches_the_data_volumes_and_the_profile_must_offer_it() {
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("rbd-virt", virt_default());
    cluster.storage_profile(
        "rbd-virt",
        &[
            (&["ReadWriteMany"], "Block"),
            (&["ReadWriteOnce"], "Filesystem"),
        ],
    );
    let config = yaml_file(
        cluster.dir.path(),
        "workloads:\n  database:\n    volume-mode: Filesystem\n",
    );
    let out = cluster.virtwork(
        &[
            "--config",
            &config,
            "run",
            "--workloads",
            "disk,database",
            "--volume-mode",
            "Block",
            "--timeout",
            "60",
        ],
        &[],
    );
    assert_exit(&out, 0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "data disks of workload \"disk\" get ReadWriteMany (Block) on StorageClass rbd-virt (volume-mode; the access mode is its StorageProfile's)"
        ),
        "{stderr}"
    );
    let volume_modes = |workload: &str| -> Vec<serde_json::Value> {
        cluster
            .server
            .objects("virtualmachines", Some(NS))
            .iter()
            .filter(|vm| vm["metadata"]["labels"]["app.kubernetes.io/component"] == workload)
            .flat_map(|vm| {
                vm["spec"]["dataVolumeTemplates"]
                    .as_array()
                    .unwrap()
                    .clone()
            })
            .map(|t| t["spec"]["storage"]["volumeMode"].clone())
            .collect()
    };
    assert_eq!(volume_modes("disk"), [serde_json::json!("Block")]);
    assert_eq!(volume_modes("database"), [serde_json::json!("Filesystem")]);
    // The access mode is left to CDI, which takes it from the set with that volume mode.
    assert_eq!(cluster.vm_storage("disk"), [(None, vec![])]);
    let mut pvcs = cluster.pvc_modes();
    pvcs.sort();
    assert_eq!(
        pvcs,
        [
            (vec!["ReadWriteMany".to_string()], "Block".to_string()),
            (vec!["ReadWriteOnce".to_string()], "Filesystem".to_string()),
        ]
    );

    // A class offering no Block volumes: refused before any write, with CDI's own words.
    let cluster = Cluster::start();
    cluster.storage_profile("standard", &[(&["ReadWriteOnce"], "Filesystem")]);
    let out = cluster.virtwork(
        &["run", "--workloads", "chaos-disk"],
        &[("VIRTWORK_VOLUME_MODE", "Block")],
    );
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "StorageClass standard cannot provide volume mode Block for the data disks of workload \"chaos-disk\" \
             (its StorageProfile offers ReadWriteOnce (Filesystem); CDI: \"no matching accessMode specified in StorageProfile standard\"): \
             choose one of those with --volume-mode (or workloads.chaos-disk.volume-mode), or another --storage-class"
        ),
        "{stderr}"
    );
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());
}

/// A bad volume mode from any layer is one line naming the input and the accepted forms,
/// exit 2; the short spelling and any case are accepted; unset, no volumeMode is written.
#[test]
fn bad_volume_mode_values_are_one_line_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = yaml_file(dir.path(), "workloads:\n  disk:\n    volume-mode: raw\n");
    for (args, env, needle) in [
        (
            vec!["--volume-mode", "raw"],
            vec![],
            "for --volume-mode: expected one of Filesystem, Block",
        ),
        (
            vec![],
            vec![("VIRTWORK_VOLUME_MODE", "ext4")],
            "invalid value \"ext4\" for VIRTWORK_VOLUME_MODE: expected Filesystem or Block",
        ),
        (
            vec!["--config", config.as_str()],
            vec![],
            "invalid value \"raw\" for workloads.disk.volume-mode in",
        ),
    ] {
        let mut full = vec!["run", "--dry-run", "--no-audit", "--workloads", "disk"];
        full.extend(args);
        if full.contains(&"--config") {
            full.rotate_right(2);
        }
        let out = virtwork(&full, &env);
        assert_exit(&out, 2);
        let stderr = text(&out.stderr);
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "nothing planned: {}",
            text(&out.stdout)
        );
    }
    let storage = |docs: &[Value]| {
        let vm = docs.iter().find(|d| d["kind"] == "VirtualMachine").unwrap();
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"].clone()
    };
    let (docs, _) = dry_run(&["--workloads", "disk", "--volume-mode", "block"], &[]);
    assert_eq!(storage(&docs)["volumeMode"], "Block");
    let (docs, _) = dry_run(&["--workloads", "disk"], &[("VIRTWORK_VOLUME_MODE", "fs")]);
    assert_eq!(storage(&docs)["volumeMode"], "Filesystem");
    let (docs, _) = dry_run(&["--workloads", "disk"], &[]);
    assert!(
        storage(&docs).get("volumeMode").is_none(),
        "left to the StorageProfile: {:?}",
        storage(&docs)
    );
}

#[test]
fn without_any_default_class_preflight_refuses_and_names_the_choices() {
    let cluster = Cluster::start().without_default_class();
    cluster.storage_class("fast", serde_json::json!({}));
    let out = cluster.virtwork(&["run", "--workloads", "chaos-disk"], &[]);
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no default StorageClass"), "{stderr}");
    assert!(
        stderr.contains("--storage-class (available: fast)"),
        "{stderr}"
    );
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());
}

#[test]
fn bad_storage_class_and_access_mode_values_are_input_errors() {
    for (args, env, needle) in [
        (
            vec!["--access-mode", "ReadOnlyMany"],
            vec![],
            "for --access-mode: expected one of ReadWriteOnce, ReadWriteMany, ReadWriteOncePod",
        ),
        (
            vec![],
            vec![("VIRTWORK_ACCESS_MODE", "ReadOnlyMany")],
            "ReadOnlyMany cannot be used",
        ),
        (
            vec![],
            vec![("VIRTWORK_ACCESS_MODE", "shared")],
            "invalid value \"shared\" for VIRTWORK_ACCESS_MODE",
        ),
        (
            vec!["--storage-class", "Fast_Disks"],
            vec![],
            "invalid value \"Fast_Disks\" for --storage-class: expected a StorageClass name",
        ),
    ] {
        let mut full = vec!["run", "--dry-run", "--no-audit", "--workloads", "disk"];
        full.extend(args);
        let out = virtwork(&full, &env);
        assert_exit(&out, 2);
        let stderr = text(&out.stderr);
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    // The short forms are accepted.
    let (docs, _) = dry_run(&["--workloads", "disk", "--access-mode", "rwx"], &[]);
    let vm = docs.iter().find(|d| d["kind"] == "VirtualMachine").unwrap();
    assert_eq!(
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["storage"]["accessModes"][0],
        "ReadWriteMany"
    );
}

// ---------------------------------------------------------------------------------------------
// Cloud-init users section
// ---------------------------------------------------------------------------------------------

fn cloud_config(userdata: &str) -> serde_yaml::Value {
    serde_yaml::from_str(userdata.strip_prefix("#cloud-config\n").unwrap()).unwrap()
}

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example.com";

#[test]
fn users_section_only_with_ssh_credentials() {
    // Defaults: a user name (virtwork) but no key or password: the image's default user is
    // left alone, so no users section at all.
    let (docs, _) = dry_run(&["--workloads", "cpu,disk"], &[]);
    for workload in ["cpu", "disk"] {
        let ud = userdata(&docs, workload);
        assert!(cloud_config(&ud).get("users").is_none(), "{ud}");
        assert!(!ud.contains("lock_passwd"), "{ud}");
    }
    // A key from the environment: the account, password locked.
    let (docs, _) = dry_run(
        &["--workloads", "cpu"],
        &[("VIRTWORK_SSH_AUTHORIZED_KEYS", KEY)],
    );
    let config = cloud_config(&userdata(&docs, "cpu"));
    assert_eq!(config["users"][0]["name"], "virtwork");
    assert_eq!(config["users"][0]["lock_passwd"], true);
    assert_eq!(config["users"][0]["ssh_authorized_keys"][0], KEY);
    // A password: the account with a hashed password and password login.
    let (docs, _) = dry_run(
        &["--workloads", "cpu", "--ssh-user", "ops"],
        &[("VIRTWORK_SSH_PASSWORD", "s3cret-pass")],
    );
    let ud = userdata(&docs, "cpu");
    let config = cloud_config(&ud);
    assert_eq!(config["users"][0]["name"], "ops");
    assert_eq!(config["users"][0]["lock_passwd"], false);
    assert_eq!(config["ssh_pwauth"], true);
    assert!(!ud.contains("s3cret-pass"));
}

// ---------------------------------------------------------------------------------------------
// Inputs the Go tool accepted
// ---------------------------------------------------------------------------------------------

#[test]
fn go_boolean_flag_syntax_is_accepted_with_a_deprecation_warning() {
    // --dry-run=true is --dry-run (client): objects on stdout.
    let (_, stderr) = dry_run(&["--workloads", "cpu"], &[]);
    assert!(!stderr.contains("deprecated"), "{stderr}");
    let out = virtwork(
        &[
            "run",
            "--dry-run=true",
            "--audit=false",
            "--workloads",
            "cpu",
        ],
        &[],
    );
    assert_exit(&out, 0);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("kind: VirtualMachine"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "--dry-run=true is the Go tool's boolean flag syntax and is deprecated; write --dry-run"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "--audit=false is the Go tool's boolean flag syntax and is deprecated; write --no-audit"
        ),
        "{stderr}"
    );

    // Against a cluster: --dry-run=false beats VIRTWORK_DRY_RUN, --no-wait=true skips the
    // readiness watch, --audit=false writes no audit database.
    let cluster = Cluster::start();
    let out = cluster.virtwork(
        &[
            "--audit=false",
            "run",
            "--dry-run=false",
            "--no-wait=true",
            "--workloads",
            "cpu",
        ],
        &[("VIRTWORK_DRY_RUN", "true")],
    );
    assert_exit(&out, 0);
    assert_eq!(cluster.server.objects("virtualmachines", Some(NS)).len(), 1);
    assert_eq!(cluster.server.count("watch", "virtualmachineinstances"), 0);
    assert!(!cluster.dir.path().join("audit.db").exists());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("write no --dry-run"), "{stderr}");
    assert!(stderr.contains("--no-wait=true"), "{stderr}");

    // --no-wait=false waits; cleanup --dry-run=true previews and deletes nothing.
    let out = cluster.virtwork(
        &[
            "run",
            "--no-wait=false",
            "--workloads",
            "memory",
            "--timeout",
            "60",
        ],
        &[],
    );
    assert_exit(&out, 0);
    assert!(cluster.server.count("watch", "virtualmachineinstances") >= 1);
    let out = cluster.virtwork(&["cleanup", "--dry-run=true"], &[]);
    assert_exit(&out, 0);
    assert!(text(&out.stderr).contains("deprecated"));
    assert_eq!(cluster.server.count("delete", "virtualmachines"), 0);

    // Anything else is still refused.
    for bad in ["--audit=maybe", "--no-wait=yes"] {
        let out = virtwork(&["run", "--dry-run", bad], &[]);
        assert_exit(&out, 2);
        assert!(text(&out.stderr).contains(bad.split('=').next().unwrap()));
    }
    let out = virtwork(&["run", "--dry-run=perhaps"], &[]);
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("expected one of client, server"));
}

#[test]
fn cleanup_mode_from_the_go_config_is_accepted_and_warned_as_without_effect() {
    let dir = tempfile::tempdir().unwrap();
    let config = yaml_file(dir.path(), "namespace: virtwork\ncleanup_mode: all\n");
    let out = command(
        dir.path(),
        &[
            "--config",
            &config,
            "run",
            "--dry-run",
            "--no-audit",
            "--workloads",
            "cpu",
        ],
        &[("VIRTWORK_CLEANUP_MODE", "run-id")],
    )
    .output()
    .unwrap();
    assert_exit(&out, 0);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cleanup_mode in {config} has no effect")),
        "{stderr}"
    );
    assert!(
        stderr.contains("VIRTWORK_CLEANUP_MODE has no effect"),
        "{stderr}"
    );
    // Other unknown keys are still errors.
    let config = yaml_file(dir.path(), "cleanup-modes: all\n");
    let out = command(dir.path(), &["--config", &config, "run", "--dry-run"], &[])
        .output()
        .unwrap();
    assert_exit(&out, 2);
}

#[test]
fn chaos_process_signals_take_numbers_and_short_names_and_reach_the_guest_canonical() {
    for given in ["9", "KILL", "kill", "SIGKILL", "sigkill"] {
        let param = format!("chaos-process.signal={given}");
        let (docs, _) = dry_run(&["--workloads", "chaos-process", "--params", &param], &[]);
        let ud = userdata(&docs, "chaos-process");
        assert!(ud.contains("CHAOS_SIGNAL=SIGKILL"), "{given}: {ud}");
    }
    let (docs, _) = dry_run(
        &[
            "--workloads",
            "chaos-process",
            "--params",
            "chaos-process.signal=15",
        ],
        &[],
    );
    assert!(userdata(&docs, "chaos-process").contains("CHAOS_SIGNAL=SIGTERM"));
    // Still a closed list: other signals, unknown numbers and anything else are refused.
    for bad in ["SEGV", "11", "64", "9;reboot", "-9", "SIG"] {
        let param = format!("chaos-process.signal={bad}");
        let out = virtwork(
            &[
                "run",
                "--dry-run",
                "--no-audit",
                "--workloads",
                "chaos-process",
                "--params",
                &param,
            ],
            &[],
        );
        assert_exit(&out, 2);
        let stderr = text(&out.stderr);
        assert!(stderr.contains("param \"signal\""), "{bad}: {stderr}");
        assert!(stderr.contains("e.g. KILL or 9"), "{bad}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

/// The workloads of the VMs in a dry-run stream, sorted and deduplicated.
fn planned_workloads(docs: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] == "VirtualMachine")
        .map(|d| {
            d["metadata"]["labels"]["app.kubernetes.io/component"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn workload_and_catalog_lists_in_the_environment_take_blanks_and_commas() {
    for list in [
        "cpu memory disk",
        "cpu, memory,disk",
        "cpu,memory disk",
        " cpu\tmemory  disk ",
    ] {
        let (docs, _) = dry_run(&[], &[("VIRTWORK_WORKLOADS", list)]);
        assert_eq!(
            planned_workloads(&docs),
            ["cpu", "disk", "memory"],
            "{list:?}"
        );
    }
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    for list in ["sysbench redis-bench", "sysbench, redis-bench"] {
        let (docs, _) = dry_run(
            &[],
            &[
                ("VIRTWORK_FROM_CATALOG", list),
                ("VIRTWORK_CATALOG_DIR", catalog.to_str().unwrap()),
            ],
        );
        assert_eq!(
            planned_workloads(&docs),
            ["redis-bench", "sysbench"],
            "{list:?}"
        );
    }
    // A bad name in a blank-separated list is still named.
    let out = virtwork(
        &["run", "--dry-run", "--no-audit"],
        &[("VIRTWORK_WORKLOADS", "cpu memroy")],
    );
    assert_exit(&out, 2);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("VIRTWORK_WORKLOADS") && stderr.contains("memroy"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Dry-run audit events
// ---------------------------------------------------------------------------------------------

/// (event_type, message) of every event in the audit database at `db`, in order.
fn audit_events(db: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT event_type, COALESCE(message, '') FROM events ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn dry_run_audit_records_skipped_workloads_and_the_planned_event() {
    let dir = tempfile::tempdir().unwrap();
    let config = yaml_file(
        dir.path(),
        "workloads:\n  memory:\n    enabled: false\n  network:\n    vm-count: 2\n",
    );
    let db = dir.path().join("audit.db");
    let out = command(
        dir.path(),
        &[
            "--config",
            &config,
            "--audit-db",
            db.to_str().unwrap(),
            "run",
            "--dry-run",
            "--workloads",
            "cpu,memory,network",
        ],
        &[],
    )
    .output()
    .unwrap();
    assert_exit(&out, 0);
    let events = audit_events(&db);
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    // cpu 1 + network 2 servers + 2 clients = 5 VMs; 3 workloads requested, memory skipped.
    assert!(
        events.contains(&(
            "workload_skipped".into(),
            "Workload \"memory\" disabled via config (enabled: false)".into()
        )),
        "{events:?}"
    );
    assert!(
        events.contains(&(
            "execution_started".into(),
            "Planned 5 VMs across 3 workloads".into()
        )),
        "{events:?}"
    );
    assert_eq!(types.first(), Some(&"execution_started"), "{events:?}");
    assert!(
        events[0].1.starts_with("Starting dry-run with run-id "),
        "{events:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// docs/migrating-from-go.md against deploy/ and the binary
// ---------------------------------------------------------------------------------------------

/// The upgrade steps name the objects the manifests really create: if a rename in deploy/
/// leaves the guide behind, a user would copy the wrong data or delete the wrong thing.
#[test]
fn the_migration_guide_names_what_deploy_creates() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(repo.join("docs/migrating-from-go.md")).unwrap();
    let tool: String = ["namespace", "pvc", "secret", "configmap", "deployment"]
        .iter()
        .map(|f| std::fs::read_to_string(repo.join(format!("deploy/tool/{f}.yaml"))).unwrap())
        .collect();
    for name in [
        "name: virtwork-system",
        "name: virtwork-audit-data",
        "name: virtwork-secrets",
        "name: virtwork-config",
        "VIRTWORK_AUDIT_DB: /data/virtwork.db",
        "VIRTWORK_LOG_FORMAT: json",
    ] {
        assert!(tool.contains(name), "deploy/tool no longer has {name:?}");
        let value = name.split(": ").last().unwrap();
        assert!(
            guide.contains(value),
            "the guide does not mention {value:?}"
        );
    }
    assert!(
        !tool.contains("app.kubernetes.io/managed-by"),
        "the guide says the tool's objects carry no managed-by label"
    );
    // The exit codes the guide lists are the ones bad input and a good dry run give.
    assert!(guide.contains("| 2 | bad input"));
    assert_exit(
        &virtwork(&["run", "--dry-run", "--cpu-cores", "0x10"], &[]),
        2,
    );
    assert_exit(
        &virtwork(
            &["run", "--dry-run", "--no-audit", "--workloads", "cpu"],
            &[],
        ),
        0,
    );
}

// ---------------------------------------------------------------------------------------------
// 403 Forbidden
// ---------------------------------------------------------------------------------------------

use support::{FaultAction, ScriptedFault};

#[test]
fn a_forbidden_create_is_one_line_naming_verb_resource_namespace_and_the_check() {
    let cluster = Cluster::start();
    cluster.server.update_faults(|f| {
        f.scripted.push(
            ScriptedFault::new("create", "virtualmachines", FaultAction::Fail(403)).times(100),
        )
    });
    let out = cluster.virtwork(&["run", "--workloads", "cpu", "--timeout", "60"], &[]);
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    eprintln!("{error}");
    assert!(error.contains("forbidden"), "{error}");
    assert!(
        error.contains("cannot create virtualmachines.kubevirt.io in namespace virtwork"),
        "{error}"
    );
    assert!(
        error.contains("oc auth can-i create virtualmachines.kubevirt.io -n virtwork"),
        "{error}"
    );
    assert!(!error.contains("Status {"), "no debug dump: {error}");
    // Not retried: one attempt per VM.
    assert_eq!(cluster.server.count("create", "virtualmachines"), 1);
}

#[test]
fn a_forbidden_readiness_watch_ends_the_wait_at_once() {
    let cluster = Cluster::start();
    cluster.server.update_faults(|f| {
        // The initial list succeeds; the watch that follows is refused.
        f.scripted.push(
            ScriptedFault::new("watch", "virtualmachineinstances", FaultAction::Fail(403))
                .times(1000),
        );
    });
    let started = std::time::Instant::now();
    let out = cluster.virtwork(&["run", "--workloads", "cpu", "--timeout", "120"], &[]);
    assert_exit(&out, 1);
    let stderr = text(&out.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or(&stderr);
    eprintln!("{error}");
    assert!(error.contains("forbidden"), "{error}");
    assert!(
        error.contains("virtualmachineinstances.kubevirt.io"),
        "{error}"
    );
    assert!(error.contains("oc auth can-i"), "{error}");
    let attempts = cluster.server.count("watch", "virtualmachineinstances");
    assert_eq!(attempts, 1, "a 403 is final, not retried");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

// ---------------------------------------------------------------------------------------------
// verify's settings come from the configuration layer like every command's
// ---------------------------------------------------------------------------------------------

#[test]
fn verify_settings_resolve_in_the_configuration_layer() {
    use clap::Parser;
    use virtwork::cli::{Cli, Command as Sub};
    use virtwork::config::{PrometheusCredential, PrometheusTarget, VerifySettings};

    let resolve = |args: &[&str], env: &[(&str, &str)]| {
        let cli =
            Cli::try_parse_from(std::iter::once("virtwork").chain(args.iter().copied())).unwrap();
        let Sub::Verify(verify) = cli.command else {
            panic!("not verify")
        };
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        VerifySettings::resolve(&cli.global, &verify, &env)
    };
    let settings = resolve(&["verify", "--wait"], &[("VIRTWORK_NAMESPACE", "team-a")]).unwrap();
    assert_eq!(settings.scope.namespace.as_deref(), Some("team-a"));
    assert_eq!(settings.wait, Some(std::time::Duration::from_secs(600)));
    assert_eq!(settings.prometheus, PrometheusTarget::Discover);
    assert_eq!(settings.global.namespace.to_string(), "team-a");
    let settings = resolve(&["verify", "-A", "--output", "json"], &[]).unwrap();
    assert_eq!(settings.scope.namespace, None);
    assert_eq!(settings.output.to_string(), "json");

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "abc.def\n").unwrap();
    let settings = resolve(
        &[
            "verify",
            "--prometheus",
            "https://prom.example.com",
            "--prometheus-token-file",
            token.to_str().unwrap(),
        ],
        &[],
    )
    .unwrap();
    let PrometheusTarget::Url {
        credential: PrometheusCredential::Token(secret),
        ..
    } = settings.prometheus
    else {
        panic!("expected a URL target with a token")
    };
    assert_eq!(secret.expose(), "abc.def");

    // Bad input through the binary: exit 2 before any request, naming the flag.
    let missing = dir.path().join("nope");
    let out = virtwork(
        &[
            "verify",
            "--prometheus",
            "https://prom.example.com",
            "--prometheus-token-file",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("--prometheus-token-file"));
    // A bad configuration value is refused by verify like by every command.
    let out = virtwork(&["verify"], &[("VIRTWORK_QPS", "fast")]);
    assert_exit(&out, 2);
    assert!(text(&out.stderr).contains("VIRTWORK_QPS"));
}

// ---------------------------------------------------------------------------------------------
// README's packaging claim
// ---------------------------------------------------------------------------------------------

/// The README says which glibc the binary needs; that must be the newest GLIBC_ symbol
/// version the built binary really references (and it must not claim a static binary).
#[test]
fn the_readme_states_the_glibc_the_binary_really_needs() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    assert!(
        !readme.contains("static binary"),
        "the binary is not static"
    );
    let Ok(out) = Command::new("objdump")
        .arg("-T")
        .arg(env!("CARGO_BIN_EXE_virtwork"))
        .output()
    else {
        eprintln!("SKIP: objdump (binutils) not installed");
        return;
    };
    let dump = text(&out.stdout);
    let newest = dump
        .split("GLIBC_")
        .skip(1)
        .map(|piece| {
            let version: String = piece
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
        })
        .max()
        .expect("the binary links glibc");
    let claim = format!("glibc {}.{} or newer", newest.0, newest.1);
    assert!(readme.contains(&claim), "README should say {claim:?}");
}
