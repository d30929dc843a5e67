//! Per-workload payload tests: rendered user-data, units, scripts, params wiring, roles,
//! services and data disks of the nine built-ins, plus the registry and param validation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use virtwork::error::Error;
use virtwork::model::{Secret, SshAccess};
use virtwork::workloads::params::validate_params;
use virtwork::workloads::{
    BUILTIN_NAMES, GuestFamily, Registry, Workload, WorkloadOptions, WorkloadSettings,
    check_builtin_names,
};

fn options() -> WorkloadOptions {
    WorkloadOptions {
        namespace: "virtwork".parse().unwrap(),
        data_disk_size: "10Gi".parse().unwrap(),
        ssh: SshAccess {
            user: Some("virtwork".parse().unwrap()),
            password: None,
            authorized_keys: vec![],
        },
        catalog_dir: PathBuf::from("catalog"),
        planned_workloads: Vec::new(),
        ready_endpoint: false,
        run_tag: String::new(),
    }
}

fn settings(vm_count: u32, params: &[(&str, &str)]) -> WorkloadSettings {
    WorkloadSettings {
        vm_count,
        cpu_cores: 2,
        memory: "2Gi".parse().unwrap(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        guest_family: GuestFamily::Fedora,
    }
}

fn build(name: &str, vm_count: u32, params: &[(&str, &str)]) -> Box<dyn Workload> {
    build_for(GuestFamily::Fedora, name, vm_count, params)
}

fn build_for(
    family: GuestFamily,
    name: &str,
    vm_count: u32,
    params: &[(&str, &str)],
) -> Box<dyn Workload> {
    let mut settings = settings(vm_count, params);
    settings.guest_family = family;
    Registry::builtin()
        .create(name, &settings, &options())
        .unwrap_or_else(|e| panic!("{name} ({family}): {e}"))
}

fn userdata(name: &str, role: Option<&str>, params: &[(&str, &str)]) -> String {
    build(name, 1, params).userdata(role).unwrap()
}

fn userdata_for(
    family: GuestFamily,
    name: &str,
    role: Option<&str>,
    params: &[(&str, &str)],
) -> String {
    build_for(family, name, 1, params).userdata(role).unwrap()
}

/// Every (family, workload, role) with its user-data.
fn every_payload() -> Vec<(GuestFamily, &'static str, Option<String>, String)> {
    let mut out = Vec::new();
    for family in GuestFamily::ALL {
        for name in BUILTIN_NAMES {
            let w = build_for(family, name, 1, &[]);
            for role in w.roles() {
                let ud = w.userdata(role.role.as_deref()).unwrap();
                out.push((family, name, role.role.clone(), ud));
            }
        }
    }
    out
}

/// Paths of every write_files entry.
fn paths(userdata: &str) -> Vec<String> {
    doc(userdata)["write_files"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

/// `[Unit]`/`[Service]` values of `key` in a unit file.
fn values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

/// The guest agent, then the workload's own commands.
fn agent_first() -> Vec<String> {
    cmd(&[
        "systemctl",
        "enable",
        "--now",
        "--no-block",
        "qemu-guest-agent.service",
    ])
}

fn enable(unit: &str) -> Vec<String> {
    cmd(&["systemctl", "enable", "--now", "--no-block", unit])
}

/// The parsed cloud-config document.
fn doc(userdata: &str) -> serde_yaml::Value {
    assert!(userdata.starts_with("#cloud-config\n"), "{userdata}");
    serde_yaml::from_str(userdata).unwrap()
}

/// Content of the write_files entry at `path`, with its permissions.
fn file(userdata: &str, path: &str) -> (String, String) {
    let d = doc(userdata);
    for f in d["write_files"].as_sequence().unwrap() {
        if f["path"].as_str() == Some(path) {
            return (
                f["content"].as_str().unwrap().to_string(),
                f["permissions"].as_str().unwrap().to_string(),
            );
        }
    }
    panic!("no write_files entry {path} in\n{userdata}");
}

fn packages(userdata: &str) -> Vec<String> {
    doc(userdata)["packages"]
        .as_sequence()
        .map(|s| s.iter().map(|p| p.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn runcmd(userdata: &str) -> Vec<Vec<String>> {
    serde_yaml::from_value(doc(userdata)["runcmd"].clone()).unwrap()
}

fn cmd(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn exec_start(unit: &str) -> &str {
    unit.lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart line")
}

fn input_message(result: Result<Box<dyn Workload>, Error>) -> String {
    match result {
        Err(Error::Input(msg)) => {
            assert!(!msg.contains('\n'), "one-line error expected: {msg}");
            msg
        }
        Err(other) => panic!("expected an input error, got {other}"),
        Ok(w) => panic!("expected an input error, built {w:?}"),
    }
}

fn create_err(name: &str, params: &[(&str, &str)]) -> String {
    input_message(Registry::builtin().create(name, &settings(1, params), &options()))
}

#[test]
fn registry_lists_the_nine_builtins_sorted() {
    let registry = Registry::builtin();
    assert_eq!(registry.names(), BUILTIN_NAMES.to_vec());
    let err = registry.get("cpuu").unwrap_err().to_string();
    assert_eq!(
        err,
        "workload \"cpuu\" not found; available: chaos-disk, chaos-network, chaos-process, cpu, database, disk, memory, network, tps; workload not found"
    );
}

#[test]
fn unknown_builtin_names_get_suggestions() {
    let err = check_builtin_names(&["cpuu".into(), "zzzzzz".into()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "unknown workload(s): \"cpuu\" (did you mean \"cpu\"?), \"zzzzzz\"; available: chaos-disk, chaos-network, chaos-process, cpu, database, disk, memory, network, tps; workload not found"
    );
    check_builtin_names(&["cpu".into(), "tps".into()]).unwrap();
}

#[test]
fn cpu_unit_defaults_and_overrides() {
    let ud = userdata("cpu", None, &[]);
    assert_eq!(packages(&ud), ["qemu-guest-agent", "stress-ng"]);
    let (unit, mode) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert_eq!(mode, "0644");
    assert!(unit.starts_with("[Unit]\nDescription=Virtwork CPU stress workload\n\n[Service]\n"));
    // Steady and profiled loads share the level script: stress-ng at the level, capped in a
    // cgroup of its own inside the delegated unit (systemd's CPUQuota where that cannot be).
    assert_eq!(
        exec_start(&unit),
        "/usr/local/bin/virtwork-cpu-at-level 100"
    );
    let (script, mode) = file(&ud, "/usr/local/bin/virtwork-cpu-at-level");
    assert_eq!(mode, "0755");
    assert!(
        script.ends_with(
            "if [ -n \"$UNIT_CGROUP\" ] && [ -f \"$UNIT_CGROUP/load/cpu.max\" ]; then\n\
             \x20 echo \"$MAX\" > \"$UNIT_CGROUP/load/cpu.max\"\n\
             else\n\
             \x20 systemctl set-property --runtime virtwork-cpu.service \"CPUQuota=${CAP}\"\n\
             fi\n\
             exec /usr/bin/stress-ng --cpu 0 --cpu-load \"$1\" --cpu-load-slice 20 --cpu-method all --timeout 0\n"
        ),
        "{script}"
    );
    assert!(unit.contains("Restart=always\nRestartSec=10\nDelegate=yes\n"));
    assert!(unit.contains("[Install]\nWantedBy=multi-user.target\n"));
    assert_eq!(
        runcmd(&ud),
        [
            agent_first(),
            cmd(&["systemctl", "daemon-reload"]),
            enable("virtwork-cpu.service")
        ]
    );
    let ud = userdata(
        "cpu",
        None,
        &[("cpu-load-percent", "55"), ("cpu-method", "matrixprod")],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert_eq!(exec_start(&unit), "/usr/local/bin/virtwork-cpu-at-level 55");
    let (script, _) = file(&ud, "/usr/local/bin/virtwork-cpu-at-level");
    assert!(
        script.contains("--cpu-load-slice 20 --cpu-method matrixprod --timeout 0\n"),
        "{script}"
    );
    // Partial override keeps the other default.
    let ud = userdata("cpu", None, &[("cpu-method", "fft")]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert_eq!(
        exec_start(&unit),
        "/usr/local/bin/virtwork-cpu-at-level 100"
    );
    let (script, _) = file(&ud, "/usr/local/bin/virtwork-cpu-at-level");
    assert!(script.contains("--cpu-method fft --timeout 0"), "{script}");
}

#[test]
fn single_role_workloads_scale_with_vm_count() {
    for name in [
        "cpu",
        "memory",
        "disk",
        "database",
        "chaos-disk",
        "chaos-network",
        "chaos-process",
    ] {
        let w = build(name, 3, &[]);
        assert_eq!(w.roles().len(), 1, "{name}");
        assert_eq!(w.roles()[0].role, None);
        assert_eq!(w.vm_count(), 3, "{name}");
        assert!(w.service().is_none(), "{name}");
        assert_eq!(
            build(name, 0, &[]).vm_count(),
            1,
            "{name}: vm-count 0 means 1"
        );
    }
}

/// The packages each payload installs, per family: the contract the guest images and the
/// real-guest suite's local package repository are built from.
#[test]
fn packages_per_family_come_from_each_workloads_table() {
    // (workload, role, fedora packages, debian packages)
    type Row = (
        &'static str,
        Option<&'static str>,
        &'static [&'static str],
        &'static [&'static str],
    );
    let expected: &[Row] = &[
        ("cpu", None, &["stress-ng"], &["stress-ng"]),
        ("memory", None, &["stress-ng"], &["stress-ng"]),
        ("disk", None, &["fio", "xfsprogs"], &["fio", "xfsprogs"]),
        (
            "database",
            None,
            &["postgresql-server", "postgresql-contrib", "xfsprogs"],
            &["postgresql", "xfsprogs"],
        ),
        ("network", Some("server"), &["iperf3"], &["iperf3"]),
        ("network", Some("client"), &["iperf3"], &["iperf3"]),
        (
            "tps",
            Some("server"),
            &["netperf", "python3"],
            &["netperf", "python3"],
        ),
        (
            "tps",
            Some("client"),
            &["netperf", "curl"],
            &["netperf", "curl"],
        ),
        ("chaos-disk", None, &["xfsprogs"], &["xfsprogs"]),
        (
            "chaos-network",
            None,
            &["iproute-tc", "python3"],
            &["iproute2", "python3"],
        ),
        ("chaos-process", None, &["procps-ng"], &["procps"]),
    ];
    for (name, role, fedora, debian) in expected {
        for (family, wanted) in [(GuestFamily::Fedora, fedora), (GuestFamily::Debian, debian)] {
            let ud = userdata_for(family, name, *role, &[]);
            let mut all = vec!["qemu-guest-agent".to_string()];
            all.extend(wanted.iter().map(|p| p.to_string()));
            assert_eq!(packages(&ud), all, "{name} {role:?} on {family}");
        }
    }
}

#[test]
fn every_payload_installs_and_starts_the_guest_agent_first() {
    for (family, name, role, ud) in every_payload() {
        assert_eq!(
            packages(&ud)[0],
            "qemu-guest-agent",
            "{name} {role:?} {family}"
        );
        assert_eq!(runcmd(&ud)[0], agent_first(), "{name} {role:?} {family}");
    }
}

#[test]
fn workload_units_are_what_the_readiness_probe_checks() {
    let expected: &[(&str, Option<&str>, &[&str])] = &[
        ("cpu", None, &["virtwork-cpu.service"]),
        ("memory", None, &["virtwork-memory.service"]),
        ("disk", None, &["virtwork-disk.service"]),
        (
            "database",
            None,
            &[
                "virtwork-database-setup.service",
                "virtwork-database.service",
            ],
        ),
        ("network", Some("server"), &["virtwork-network.service"]),
        ("network", Some("client"), &["virtwork-network.service"]),
        ("tps", Some("server"), &["virtwork-tps.service"]),
        ("tps", Some("client"), &["virtwork-tps.service"]),
        ("chaos-disk", None, &["virtwork-chaos-disk.service"]),
        (
            "chaos-network",
            None,
            &[
                "virtwork-chaos-network.service",
                "virtwork-chaos-network-probe.service",
            ],
        ),
        ("chaos-process", None, &["virtwork-chaos-process.service"]),
    ];
    for family in GuestFamily::ALL {
        for (name, role, units) in expected {
            let w = build_for(family, name, 1, &[]);
            assert_eq!(w.workload_units(*role), units.to_vec(), "{name} {role:?}");
            // Each unit is written by the payload and enabled by its runcmd.
            let ud = w.userdata(*role).unwrap();
            for unit in *units {
                assert!(
                    paths(&ud).contains(&format!("/etc/systemd/system/{unit}")),
                    "{name}: {unit} not written"
                );
                assert!(
                    runcmd(&ud).contains(&enable(unit))
                        || *unit == "virtwork-database-setup.service",
                    "{name}: {unit} not enabled"
                );
            }
        }
    }
    assert!(
        build("network", 1, &[])
            .workload_units(Some("observer"))
            .is_empty()
    );
}

#[test]
fn memory_unit_escapes_the_percent_for_systemd() {
    let ud = userdata("memory", None, &[]);
    assert_eq!(packages(&ud), ["qemu-guest-agent", "stress-ng"]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-memory.service");
    assert!(unit.contains("Description=Virtwork memory stress workload\n"));
    assert_eq!(
        exec_start(&unit),
        "/usr/bin/stress-ng --vm 1 --vm-bytes 80%% --vm-keep --vm-populate --vm-method all --timeout 0"
    );
    let ud = userdata(
        "memory",
        None,
        &[
            ("memory-percent", "50"),
            ("vm-stressors", "2"),
            ("vm-method", "flip"),
        ],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-memory.service");
    assert_eq!(
        exec_start(&unit),
        "/usr/bin/stress-ng --vm 2 --vm-bytes 50%% --vm-keep --vm-populate --vm-method flip --timeout 0"
    );
}

/// The data-disk contract shared by disk, database and chaos-disk: a mount unit on the
/// by-id device (never an fstab line, never the root disk), a format unit before it, the
/// workload unit requiring the mount and checking it before it starts.
fn assert_data_disk(ud: &str, serial: &str, mount: &str, mount_unit: &str, unit: &str) {
    let device = format!("/dev/disk/by-id/virtio-{serial}");
    let (mount_text, mode) = file(ud, &format!("/etc/systemd/system/{mount_unit}"));
    assert_eq!(mode, "0644");
    assert!(mount_text.contains("\n[Mount]\n"), "{mount_text}");
    assert_eq!(values(&mount_text, "What"), [device.as_str()]);
    assert_eq!(values(&mount_text, "Where"), [mount]);
    assert_eq!(values(&mount_text, "Type"), ["xfs"]);
    assert_eq!(values(&mount_text, "Options"), ["defaults,nofail"]);
    let format_unit = format!("virtwork-format-{serial}.service");
    assert_eq!(values(&mount_text, "Requires"), [format_unit.as_str()]);
    assert_eq!(values(&mount_text, "After"), [format_unit.as_str()]);
    assert!(
        !mount_text.contains("[Install]"),
        "pulled in only by its users"
    );
    let (format_text, _) = file(ud, &format!("/etc/systemd/system/{format_unit}"));
    assert_eq!(values(&format_text, "Before"), [mount_unit]);
    assert!(format_text.contains("Type=oneshot\nRemainAfterExit=yes\n"));
    assert!(
        exec_start(&format_text).starts_with(&format!(
            "/usr/local/bin/virtwork-format-data-disk {device} {mount}"
        )),
        "{format_text}"
    );
    let (format_script, mode) = file(ud, "/usr/local/bin/virtwork-format-data-disk");
    assert_eq!(mode, "0755");
    assert!(format_script.contains("mkfs.xfs -q \"$REAL_DEV\""));
    assert!(format_script.contains("already has a file system; not formatting"));
    let (guard, _) = file(ud, "/usr/local/bin/virtwork-require-mount");
    assert!(guard.contains("findmnt -n -o SOURCE --mountpoint \"$MOUNT_POINT\""));
    assert!(guard.contains("refusing to write to the root file system"));
    let (unit_text, _) = file(ud, &format!("/etc/systemd/system/{unit}"));
    assert!(
        values(&unit_text, "RequiresMountsFor").contains(&mount),
        "{unit}: {unit_text}"
    );
    assert!(
        values(&unit_text, "ExecStartPre")
            .contains(&format!("/usr/local/bin/virtwork-require-mount {mount} {device}").as_str()),
        "{unit}: {unit_text}"
    );
    assert!(packages(ud).contains(&"xfsprogs".to_string()));
    // Nothing writes fstab, and no first-boot script mounts behind systemd's back.
    assert!(!ud.contains("/etc/fstab"), "fstab must not be written");
    assert!(!ud.contains("virtwork-disk-setup"), "{ud}");
}

#[test]
fn disk_payload_fio_jobs_and_data_disk() {
    for family in GuestFamily::ALL {
        let w = build_for(family, "disk", 2, &[]);
        let disks = w.data_disks();
        assert_eq!(disks.len(), 1);
        assert_eq!(disks[0].name, "datadisk");
        assert_eq!(disks[0].dv_base, "virtwork-disk-data");
        assert_eq!(disks[0].serial, "virtwork-disk");
        assert_eq!(disks[0].size.as_str(), "10Gi");
        let ud = w.userdata(None).unwrap();
        assert_data_disk(
            &ud,
            "virtwork-disk",
            "/mnt/data",
            "mnt-data.mount",
            "virtwork-disk.service",
        );
        let (mixed, _) = file(&ud, "/etc/fio/mixed-rw.fio");
        assert_eq!(
            mixed,
            "[global]\nioengine=libaio\ndirect=1\ndirectory=/mnt/data\nsize=1G\n\n[mixed-rw]\nrw=randrw\nrwmixread=70\nbs=4k\nnumjobs=4\nruntime=300\ntime_based\ngroup_reporting\n"
        );
        let (seq, _) = file(&ud, "/etc/fio/seq-write.fio");
        assert!(seq.contains("[seq-write]\nrw=write\nbs=128k\nnumjobs=2\nruntime=300\n"));
        let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-disk.service");
        assert_eq!(exec_start(&unit), "/usr/local/bin/virtwork-disk-load.sh");
        // The loop re-checks the mount before each fio run and stops on a failed run.
        let (load, _) = file(&ud, "/usr/local/bin/virtwork-disk-load.sh");
        assert!(load.contains("set -euo pipefail"));
        let guard = "/usr/local/bin/virtwork-require-mount /mnt/data /dev/disk/by-id/virtio-virtwork-disk\n  fio /etc/fio/";
        assert_eq!(load.matches(guard).count(), 2, "{load}");
        assert_eq!(
            runcmd(&ud),
            [
                agent_first(),
                cmd(&["systemctl", "daemon-reload"]),
                enable("virtwork-disk.service")
            ]
        );
    }
    let ud = userdata(
        "disk",
        None,
        &[
            ("block-size-rw", "16k"),
            ("block-size-seq", "1m"),
            ("rwmixread", "30"),
            ("numjobs", "8"),
            ("runtime", "60"),
        ],
    );
    let (mixed, _) = file(&ud, "/etc/fio/mixed-rw.fio");
    assert!(mixed.contains("rwmixread=30\nbs=16k\nnumjobs=8\nruntime=60\n"));
    let (seq, _) = file(&ud, "/etc/fio/seq-write.fio");
    assert!(seq.contains("bs=1m\nnumjobs=2\nruntime=60\n"));
}

/// Under a load profile the unit lays out fio's files once, after the mount check and before
/// the driver starts its clock: the driver restarts fio at every phase change, and a layout
/// left to fio's rated runs starts over each time.
#[test]
fn profiled_disk_lays_out_its_files_before_the_driver_starts() {
    let ud = userdata("disk", None, &[("profile", "step")]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-disk.service");
    let pre: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("ExecStartPre="))
        .collect();
    assert_eq!(
        pre,
        [
            "/usr/local/bin/virtwork-require-mount /mnt/data /dev/disk/by-id/virtio-virtwork-disk",
            "/usr/bin/fio --create_only=1 /etc/fio/mixed-rw.fio",
        ],
        "{unit}"
    );
    assert!(unit.contains("\nTimeoutStartSec=infinity\n"), "{unit}");
    assert!(
        exec_start(&unit).starts_with("/usr/local/bin/virtwork-load-driver "),
        "{unit}"
    );
    // Without a profile fio's own run lays the files out; nothing runs before the loop.
    let (steady, _) = file(
        &userdata("disk", None, &[]),
        "/etc/systemd/system/virtwork-disk.service",
    );
    assert!(!steady.contains("create_only"), "{steady}");
}

#[test]
fn data_disk_size_follows_the_option() {
    let mut opts = options();
    opts.data_disk_size = "25Gi".parse().unwrap();
    for (name, base, serial) in [
        ("disk", "virtwork-disk-data", "virtwork-disk"),
        ("database", "virtwork-database-data", "virtwork-dbdisk"),
        ("chaos-disk", "virtwork-chaos-disk-data", "virtwork-chdisk"),
    ] {
        let w = Registry::builtin()
            .create(name, &settings(1, &[]), &opts)
            .unwrap();
        let disks = w.data_disks();
        assert_eq!(disks.len(), 1);
        assert_eq!(
            (
                disks[0].name.as_str(),
                disks[0].dv_base.as_str(),
                disks[0].serial.as_str(),
                disks[0].size.as_str()
            ),
            ("datadisk", base, serial, "25Gi")
        );
    }
    for name in [
        "cpu",
        "memory",
        "network",
        "tps",
        "chaos-network",
        "chaos-process",
    ] {
        assert!(build(name, 1, &[]).data_disks().is_empty(), "{name}");
    }
}

#[test]
fn database_on_fedora_initdbs_on_the_mounted_data_dir() {
    let ud = userdata_for(
        GuestFamily::Fedora,
        "database",
        None,
        &[("scale-factor", "7"), ("clients", "3"), ("duration", "42")],
    );
    assert_data_disk(
        &ud,
        "virtwork-dbdisk",
        "/var/lib/pgsql/data",
        "var-lib-pgsql-data.mount",
        "virtwork-database.service",
    );
    let (format, _) = file(
        &ud,
        "/etc/systemd/system/virtwork-format-virtwork-dbdisk.service",
    );
    assert!(
        !format.contains("--seed"),
        "an empty data dir needs no seed"
    );
    let (setup_unit, _) = file(&ud, "/etc/systemd/system/virtwork-database-setup.service");
    assert_eq!(values(&setup_unit, "Before"), ["postgresql.service"]);
    assert_eq!(
        values(&setup_unit, "RequiresMountsFor"),
        ["/var/lib/pgsql/data"]
    );
    assert!(setup_unit.contains("Type=oneshot\nRemainAfterExit=yes\n"));
    assert!(!setup_unit.contains("User="), "setup runs as root");
    let (setup, _) = file(&ud, "/usr/local/bin/virtwork-db-setup.sh");
    let guard = setup
        .find("virtwork-require-mount /var/lib/pgsql/data /dev/disk/by-id/virtio-virtwork-dbdisk")
        .unwrap();
    let initdb = setup.find("postgresql-setup --initdb").unwrap();
    assert!(guard < initdb, "the mount is checked before initdb");
    // PostgreSQL itself cannot start without the data disk and the setup.
    let (drop_in, _) = file(
        &ud,
        "/etc/systemd/system/postgresql.service.d/virtwork-data-disk.conf",
    );
    assert_eq!(
        drop_in,
        "[Unit]\nRequiresMountsFor=/var/lib/pgsql/data\nRequires=virtwork-database-setup.service\nAfter=virtwork-database-setup.service\n"
    );
    let (prepare, _) = file(&ud, "/usr/local/bin/virtwork-db-prepare.sh");
    assert!(prepare.contains("pgbench -i -s 7 pgbench"));
    assert!(prepare.contains("createdb pgbench"));
    assert!(prepare.contains("MARKER=\"/var/lib/pgsql/data/.virtwork-initialized\""));
    assert!(prepare.contains("pg_isready -q"));
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-database.service");
    assert!(unit.contains("User=postgres\n"));
    assert_eq!(
        values(&unit, "Requires"),
        ["postgresql.service virtwork-database-setup.service"]
    );
    assert_eq!(
        values(&unit, "After"),
        ["postgresql.service virtwork-database-setup.service"]
    );
    assert_eq!(
        values(&unit, "ExecStartPre")[1],
        "/usr/local/bin/virtwork-db-prepare.sh"
    );
    assert_eq!(exec_start(&unit), "/usr/local/bin/virtwork-db-bench.sh");
    let (bench, _) = file(&ud, "/usr/local/bin/virtwork-db-bench.sh");
    assert!(
        bench.contains("set -euo pipefail"),
        "a failed pgbench ends the unit"
    );
    assert!(bench.contains("pgbench -c 3 -j 2 -T 42 pgbench\n"));
    assert_eq!(
        runcmd(&ud),
        [
            agent_first(),
            cmd(&["systemctl", "daemon-reload"]),
            cmd(&["systemctl", "enable", "postgresql.service"]),
            enable("virtwork-database.service"),
        ]
    );
}

#[test]
fn database_on_debian_moves_the_package_cluster_onto_the_data_disk() {
    let ud = userdata_for(GuestFamily::Debian, "database", None, &[]);
    assert_data_disk(
        &ud,
        "virtwork-dbdisk",
        "/var/lib/postgresql",
        "var-lib-postgresql.mount",
        "virtwork-database.service",
    );
    // Version-independent: the whole /var/lib/postgresql is the disk, seeded with the
    // cluster the package created there.
    assert!(
        !ud.contains("/15/") && !ud.contains("postgresql-15"),
        "{ud}"
    );
    let (format, _) = file(
        &ud,
        "/etc/systemd/system/virtwork-format-virtwork-dbdisk.service",
    );
    assert_eq!(
        exec_start(&format),
        "/usr/local/bin/virtwork-format-data-disk /dev/disk/by-id/virtio-virtwork-dbdisk /var/lib/postgresql --seed"
    );
    let (setup, _) = file(&ud, "/usr/local/bin/virtwork-db-setup.sh");
    assert!(!setup.contains("postgresql-setup"), "{setup}");
    assert!(setup.contains("compgen -G \"${DATA_DIR}/*/main/PG_VERSION\""));
    let (prepare, _) = file(&ud, "/usr/local/bin/virtwork-db-prepare.sh");
    assert!(prepare.contains("MARKER=\"/var/lib/postgresql/.virtwork-initialized\""));
    let (drop_in, _) = file(
        &ud,
        "/etc/systemd/system/postgresql.service.d/virtwork-data-disk.conf",
    );
    assert!(drop_in.contains("RequiresMountsFor=/var/lib/postgresql\n"));
    // The package's cluster is stopped before the disk is seeded with it and mounted.
    assert_eq!(
        runcmd(&ud),
        [
            agent_first(),
            cmd(&["systemctl", "daemon-reload"]),
            cmd(&["systemctl", "stop", "postgresql.service"]),
            cmd(&["systemctl", "enable", "postgresql.service"]),
            enable("virtwork-database.service"),
        ]
    );
}

#[test]
fn network_roles_service_and_client_command() {
    let w = build(
        "network",
        2,
        &[("parallel-streams", "8"), ("test-duration", "30")],
    );
    let roles = w.roles();
    assert_eq!(roles.len(), 2);
    assert_eq!(
        (roles[0].role.as_deref(), roles[0].vm_count),
        (Some("server"), 2)
    );
    assert_eq!(
        (roles[1].role.as_deref(), roles[1].vm_count),
        (Some("client"), 2)
    );
    assert_eq!(w.vm_count(), 4);
    let svc = w.service().unwrap();
    assert_eq!(svc.name, "virtwork-iperf3-server");
    assert_eq!(
        svc.selector,
        BTreeMap::from([
            (
                "app.kubernetes.io/component".to_string(),
                "network".to_string()
            ),
            ("virtwork/role".to_string(), "server".to_string())
        ])
    );
    assert_eq!(
        (
            svc.ports[0].name.as_str(),
            svc.ports[0].port,
            svc.ports[0].protocol.as_str()
        ),
        ("iperf3", 5201, "TCP")
    );
    let server = w.userdata(Some("server")).unwrap();
    assert_eq!(
        server,
        w.userdata(None).unwrap(),
        "default user-data is the server's"
    );
    let (unit, _) = file(&server, "/etc/systemd/system/virtwork-network.service");
    assert!(unit.contains("Description=Virtwork iperf3 server\n"));
    assert_eq!(values(&unit, "After"), ["network.target"]);
    assert_eq!(exec_start(&unit), "/usr/bin/iperf3 -s");
    let client = w.userdata(Some("client")).unwrap();
    let (unit, _) = file(&client, "/etc/systemd/system/virtwork-network.service");
    assert!(unit.contains("Description=Virtwork iperf3 client\n"));
    assert_eq!(values(&unit, "Wants"), ["network-online.target"]);
    assert_eq!(values(&unit, "After"), ["network-online.target"]);
    // Activating (not active, not ready) until the Service answers.
    assert_eq!(
        values(&unit, "ExecStartPre"),
        ["/usr/local/bin/virtwork-wait-tcp virtwork-iperf3-server.virtwork.svc.cluster.local 5201"]
    );
    assert_eq!(values(&unit, "TimeoutStartSec"), ["infinity"]);
    assert_eq!(
        exec_start(&unit),
        "/usr/local/bin/virtwork-network-client.sh"
    );
    let (script, _) = file(&client, "/usr/local/bin/virtwork-network-client.sh");
    assert!(script.contains(
        "if iperf3 -c virtwork-iperf3-server.virtwork.svc.cluster.local -t 30 -P 8 --bidir; then"
    ));
    assert!(script.contains("if [ \"$FAILURES\" -ge 6 ]; then"));
    let err = w.userdata(Some("observer")).unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown network workload role: \"observer\"; expected 'server' or 'client'"
    );
}

#[test]
fn tps_roles_service_and_scripts() {
    let w = build("tps", 1, &[]);
    assert_eq!(w.vm_count(), 2);
    let svc = w.service().unwrap();
    assert_eq!(svc.name, "virtwork-tps-server");
    assert_eq!(svc.selector["app.kubernetes.io/component"], "tps");
    assert_eq!(svc.selector["virtwork/role"], "server");
    let ports: Vec<(&str, u16)> = svc
        .ports
        .iter()
        .map(|p| (p.name.as_str(), p.port))
        .collect();
    assert_eq!(
        ports,
        [
            ("netperf-ctrl", 12865),
            ("netperf-data", 12866),
            ("http-data", 8080)
        ]
    );
    let server = w.userdata(Some("server")).unwrap();
    let (script, mode) = file(&server, "/usr/local/bin/virtwork-tps-server.sh");
    assert_eq!(mode, "0755");
    assert!(script.contains("netserver -D -p 12865 &"));
    assert!(script.contains(
        "dd if=/dev/urandom of=/srv/virtwork/testfile bs=1M count=10 iflag=fullblock 2>&1"
    ));
    assert!(script.contains("python3 -m http.server 8080 --directory /srv/virtwork &"));
    assert!(
        script.contains("wait -n\n"),
        "either server dying ends the unit"
    );
    let (unit, _) = file(&server, "/etc/systemd/system/virtwork-tps.service");
    assert!(unit.contains("RestartSec=10\n"));
    let client = w.userdata(Some("client")).unwrap();
    let (script, _) = file(&client, "/usr/local/bin/virtwork-tps-client.sh");
    assert!(script.contains("SERVER=\"virtwork-tps-server.virtwork.svc.cluster.local\""));
    assert!(script.contains("ITERATIONS=30\n"));
    assert!(script.contains("DURATION=60\n"));
    assert!(script.contains(&format!("FILE_SIZE_BYTES={}\n", 10 * 1024 * 1024)));
    assert!(script.contains("netperf -H \"$SERVER\" -p 12865 -t TCP_RR -l \"$DURATION\" -- -r \"$MSG_SIZE,$MSG_SIZE\" -P ,12866"));
    // Cycles forever instead of exiting (which would make it inactive between cycles).
    assert!(script.contains("while true; do\n"));
    assert!(script.contains("if [ \"$FAILED_CYCLES\" -ge 3 ]; then"));
    let (unit, _) = file(&client, "/etc/systemd/system/virtwork-tps.service");
    assert!(unit.contains("RestartSec=30\n"));
    assert_eq!(
        values(&unit, "ExecStartPre"),
        ["/usr/local/bin/virtwork-wait-tcp virtwork-tps-server.virtwork.svc.cluster.local 8080"]
    );
}

#[test]
fn tps_on_debian_enables_the_netperf_component_and_stops_the_package_netserver() {
    for role in ["server", "client"] {
        let fedora = userdata_for(GuestFamily::Fedora, "tps", Some(role), &[]);
        assert!(doc(&fedora).get("bootcmd").is_none(), "{fedora}");
        assert!(!fedora.contains("netperf.service"));
        let debian = userdata_for(GuestFamily::Debian, "tps", Some(role), &[]);
        let bootcmd: Vec<Vec<String>> =
            serde_yaml::from_value(doc(&debian)["bootcmd"].clone()).unwrap();
        assert_eq!(bootcmd.len(), 1);
        assert_eq!(bootcmd[0][..2], ["bash", "-c"]);
        assert!(bootcmd[0][2].contains("COMPONENT=non-free"));
        assert!(bootcmd[0][2].contains("*\" ubuntu \"*) COMPONENT=multiverse"));
        let commands = runcmd(&debian);
        let disable = cmd(&["systemctl", "disable", "--now", "netperf.service"]);
        let at = commands.iter().position(|c| *c == disable).unwrap();
        assert!(
            at < commands
                .iter()
                .position(|c| *c == enable("virtwork-tps.service"))
                .unwrap()
        );
    }
}

#[test]
fn tps_file_size_bytes_agree_between_server_and_client() {
    for (size, dd, bytes) in [
        ("512K", "bs=1K count=512", 512u64 * 1024),
        ("3k", "bs=1K count=3", 3 * 1024),
        ("10M", "bs=1M count=10", 10 << 20),
        ("2G", "bs=1M count=2048", 2 << 30),
    ] {
        let w = build("tps", 1, &[("file-size", size)]);
        let (server, _) = file(
            &w.userdata(Some("server")).unwrap(),
            "/usr/local/bin/virtwork-tps-server.sh",
        );
        assert!(
            server.contains(&format!("of=/srv/virtwork/testfile {dd} iflag=fullblock")),
            "{size}: {server}"
        );
        let (client, _) = file(
            &w.userdata(Some("client")).unwrap(),
            "/usr/local/bin/virtwork-tps-client.sh",
        );
        assert!(
            client.contains(&format!("FILE_SIZE_BYTES={bytes}\n")),
            "{size}"
        );
    }
}

#[test]
fn tps_file_size_errors_use_the_reference_text() {
    let err = create_err("tps", &[("file-size", "10X")]);
    assert!(err.contains("invalid file-size format: must be a positive integer followed by K, M, or G (e.g. '10M') (unrecognized suffix \"X\")"), "{err}");
    for bad in ["1.5G", "2GB", "10MiB", "M", "garbage", "0M", "-5M"] {
        let err = create_err("tps", &[("file-size", bad)]);
        assert!(err.contains("param \"file-size\""), "{bad}: {err}");
    }
}

#[test]
fn chaos_disk_fills_only_its_mounted_data_disk() {
    for family in GuestFamily::ALL {
        let w = build_for(
            family,
            "chaos-disk",
            1,
            &[
                ("mount", "/var/lib/my-chaos"),
                ("fill-percent", "75"),
                ("fill-sleep", "5"),
                ("release-sleep", "6"),
            ],
        );
        let ud = w.userdata(None).unwrap();
        // systemd names the mount unit after the escaped path.
        assert_data_disk(
            &ud,
            "virtwork-chdisk",
            "/var/lib/my-chaos",
            "var-lib-my\\x2dchaos.mount",
            "virtwork-chaos-disk.service",
        );
        let (script, _) = file(&ud, "/usr/local/bin/chaos-disk.sh");
        assert!(script.contains("MOUNT_POINT=\"/var/lib/my-chaos\"\nFILL_PERCENT=75\n"));
        assert!(script.contains("FILL_SLEEP=5\nRELEASE_SLEEP=6\n"));
        // The mount is checked at the top of every cycle, before anything is allocated.
        let guard = script
            .find("/usr/local/bin/virtwork-require-mount /var/lib/my-chaos /dev/disk/by-id/virtio-virtwork-chdisk")
            .unwrap();
        let fill = script
            .find("fallocate -l \"${FILL_KB}K\" \"$FILL_FILE\"")
            .unwrap();
        assert!(guard < fill);
        assert!(script.find("while true; do").unwrap() < guard);
        let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-disk.service");
        assert_eq!(exec_start(&unit), "/usr/local/bin/chaos-disk.sh");
        assert_eq!(
            runcmd(&ud),
            [
                agent_first(),
                cmd(&["systemctl", "daemon-reload"]),
                enable("virtwork-chaos-disk.service")
            ]
        );
    }
}

#[test]
fn chaos_network_impairs_the_interface_its_probe_flow_uses() {
    let ud = userdata(
        "chaos-network",
        None,
        &[
            ("latency-ms", "250"),
            ("packet-loss-percent", "0.5"),
            ("target", "10.0.2.100:80"),
            ("probe-interval", "2"),
        ],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-network.service");
    assert!(unit.contains("Type=oneshot\nRemainAfterExit=yes\n"));
    assert_eq!(values(&unit, "Wants"), ["network-online.target"]);
    assert_eq!(values(&unit, "After"), ["network-online.target"]);
    assert!(unit.contains("ExecStart=/usr/local/bin/virtwork-chaos-network-start.sh\n"));
    assert!(unit.contains("ExecStop=/usr/local/bin/virtwork-chaos-network-stop.sh\n"));
    assert!(!unit.contains("Restart=always"));
    let (start, _) = file(&ud, "/usr/local/bin/virtwork-chaos-network-start.sh");
    assert!(
        start.contains("DEV=$(/usr/local/bin/virtwork-chaos-network-probe --device 10.0.2.100 80)")
    );
    assert!(
        start.contains("tc qdisc replace dev \"$DEV\" root netem delay 250ms loss 0.5% limit 1000")
    );
    let (stop, _) = file(&ud, "/usr/local/bin/virtwork-chaos-network-stop.sh");
    assert!(stop.contains("tc qdisc del dev \"$DEV\" root"));
    let (probe_unit, _) = file(
        &ud,
        "/etc/systemd/system/virtwork-chaos-network-probe.service",
    );
    assert_eq!(
        values(&probe_unit, "Requires"),
        ["virtwork-chaos-network.service"]
    );
    assert_eq!(
        values(&probe_unit, "After"),
        ["virtwork-chaos-network.service"]
    );
    assert_eq!(
        exec_start(&probe_unit),
        "/usr/local/bin/virtwork-chaos-network-probe 10.0.2.100 80 2"
    );
    let (probe, mode) = file(&ud, "/usr/local/bin/virtwork-chaos-network-probe");
    assert_eq!(mode, "0755");
    assert!(probe.starts_with("#!/usr/bin/python3\n"));
    assert!(probe.contains("loss_pct="));
    assert!(probe.contains("rtt_ms_avg="));
    // Fedora: tc from iproute-tc, netem from kernel-modules-extra of the running kernel.
    assert_eq!(
        runcmd(&ud)[1],
        cmd(&[
            "bash",
            "-c",
            "dnf install -y \"kernel-modules-extra-$(uname -r)\""
        ])
    );
    let debian = userdata_for(GuestFamily::Debian, "chaos-network", None, &[]);
    assert!(!debian.contains("dnf"), "{debian}");
    assert!(!debian.contains("kernel-modules-extra"));
}

#[test]
fn chaos_network_probe_target_defaults() {
    let probe_exec = |opts: &WorkloadOptions, params: &[(&str, &str)]| {
        let ud = Registry::builtin()
            .create("chaos-network", &settings(1, params), opts)
            .unwrap()
            .userdata(None)
            .unwrap();
        let (unit, _) = file(
            &ud,
            "/etc/systemd/system/virtwork-chaos-network-probe.service",
        );
        exec_start(&unit).to_string()
    };
    // Alone: the guest's own DNS server, which every cluster provides.
    let mut opts = options();
    opts.planned_workloads = vec!["chaos-network".into(), "cpu".into()];
    assert_eq!(
        probe_exec(&opts, &[]),
        "/usr/local/bin/virtwork-chaos-network-probe - 53 1"
    );
    // With the network workload in the same plan: its server Service.
    opts.planned_workloads.push("network".into());
    opts.namespace = "load".parse().unwrap();
    assert_eq!(
        probe_exec(&opts, &[]),
        "/usr/local/bin/virtwork-chaos-network-probe virtwork-iperf3-server.load.svc.cluster.local 5201 1"
    );
    // An explicit target always wins.
    assert_eq!(
        probe_exec(&opts, &[("target", "db.example.org:5432")]),
        "/usr/local/bin/virtwork-chaos-network-probe db.example.org 5432 1"
    );
    let err = create_err("chaos-network", &[("target", "10.0.0.1")]);
    assert!(
        err.contains("param \"target\" value \"10.0.0.1\": \"auto\" or <host>:<port>"),
        "{err}"
    );
}

#[test]
fn chaos_process_ships_and_targets_victim_services() {
    let ud = userdata(
        "chaos-process",
        None,
        &[("signal", "SIGKILL"), ("interval", "5"), ("victims", "2")],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-process.service");
    assert!(unit.contains("Environment=\"CHAOS_SIGNAL=SIGKILL\"\nEnvironment=\"CHAOS_INTERVAL=5\"\nEnvironment=\"CHAOS_MODE=victims\"\nEnvironment=\"CHAOS_VICTIMS=2\"\nEnvironment=\"CHAOS_MIN_PID=1000\"\n"));
    assert!(unit.contains("StandardOutput=journal\nStandardError=journal\n"));
    let victims = "virtwork-chaos-victim@1.service virtwork-chaos-victim@2.service";
    assert_eq!(values(&unit, "Wants"), [victims]);
    assert_eq!(values(&unit, "After"), [victims]);
    let (template, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-victim@.service");
    assert!(template.contains("ExecStart=/usr/local/bin/chaos-victim %i\n"));
    assert!(template.contains("Restart=always\nRestartSec=2\n"));
    assert!(template.contains("Nice=19\n"));
    let (victim, _) = file(&ud, "/usr/local/bin/chaos-victim");
    assert!(
        victim.contains("echo \"chaos victim ${1:-?} started (pid $$)\"\nexec sleep infinity\n")
    );
    let (script, _) = file(&ud, "/usr/local/bin/chaos-process.sh");
    assert!(script.contains("log \"KILL n=${KILLS} signal=${CHAOS_SIGNAL} pid=${pid} ${what}\""));
    assert!(script.contains("log \"RESTART n=${RESTARTS} victim=${PENDING_UNIT}"));
    // The guest agent and DHCP clients survive random mode, by name and by unit.
    for name in ["qemu-ga", "dhclient", "dhcpcd"] {
        assert!(script.contains(&format!(" {name} ")), "{name}");
    }
    assert!(script.contains("qemu-guest-agent.service|"));
    assert_eq!(
        runcmd(&ud),
        [
            agent_first(),
            cmd(&["systemctl", "daemon-reload"]),
            enable("virtwork-chaos-victim@1.service"),
            enable("virtwork-chaos-victim@2.service"),
            enable("virtwork-chaos-process.service"),
        ]
    );
    let ud = userdata(
        "chaos-process",
        None,
        &[("mode", "random"), ("min-pid", "300")],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-process.service");
    assert!(unit.contains("Environment=\"CHAOS_MODE=random\"\n"));
    assert!(unit.contains("Environment=\"CHAOS_MIN_PID=300\"\n"));
    let err = create_err("chaos-process", &[("mode", "all")]);
    assert!(err.contains("one of: victims, random"), "{err}");
    let err = create_err("chaos-process", &[("victims", "0")]);
    assert!(err.contains("from 1 to 32"), "{err}");
}

#[test]
fn guest_family_is_inferred_from_the_image_name() {
    use virtwork::workloads::family::infer_family;
    for (image, family) in [
        ("quay.io/containerdisks/fedora:42", GuestFamily::Fedora),
        (
            "quay.io/containerdisks/centos-stream:9",
            GuestFamily::Fedora,
        ),
        (
            "registry.redhat.io/rhel9/rhel-guest-image:9.4",
            GuestFamily::Fedora,
        ),
        ("quay.io/containerdisks/almalinux:9", GuestFamily::Fedora),
        ("docker.io/rockylinux/rockylinux:9", GuestFamily::Fedora),
        ("quay.io/containerdisks/debian:12", GuestFamily::Debian),
        ("quay.io/containerdisks/ubuntu:24.04", GuestFamily::Debian),
        (
            "localhost:5000/my-debian-golden@sha256:0123",
            GuestFamily::Debian,
        ),
        ("ubuntu", GuestFamily::Debian),
    ] {
        let inferred = infer_family(image);
        assert_eq!(inferred.family, family, "{image}");
        assert_eq!(inferred.warning, None, "{image}");
    }
    // A registry host or tag naming a distribution does not count; unknown -> fedora, warned.
    for image in [
        "debian.example.com/tools/golden:ubuntu",
        "quay.io/me/vm-image:1",
    ] {
        let inferred = infer_family(image);
        assert_eq!(inferred.family, GuestFamily::Fedora, "{image}");
        let warning = inferred.warning.expect(image);
        assert!(warning.contains(image), "{warning}");
        assert!(
            warning.contains("rendering payloads for fedora"),
            "{warning}"
        );
    }
}

#[test]
fn ssh_block_in_every_workload() {
    let mut opts = options();
    opts.ssh = SshAccess {
        user: Some("ops".parse().unwrap()),
        password: Some(Secret::new("pa55-word!")),
        authorized_keys: vec![
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 ops@laptop"
                .parse()
                .unwrap(),
        ],
    };
    for name in BUILTIN_NAMES {
        let w = Registry::builtin()
            .create(name, &settings(1, &[]), &opts)
            .unwrap();
        for role in w.roles() {
            let ud = w.userdata(role.role.as_deref()).unwrap();
            assert!(!ud.contains("pa55-word!"), "{name}: plain password leaked");
            let d = doc(&ud);
            assert_eq!(d["ssh_pwauth"].as_bool(), Some(true));
            let user = &d["users"][0];
            assert_eq!(user["name"].as_str(), Some("ops"));
            assert_eq!(user["sudo"].as_str(), Some("ALL=(ALL) NOPASSWD:ALL"));
            assert_eq!(user["shell"].as_str(), Some("/bin/bash"));
            assert_eq!(user["lock_passwd"].as_bool(), Some(false));
            assert!(user["passwd"].as_str().unwrap().starts_with("$6$"));
            assert_eq!(
                user["ssh_authorized_keys"][0].as_str(),
                Some("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 ops@laptop")
            );
        }
    }
    // No account at all when the user is explicitly empty.
    opts.ssh = SshAccess::default();
    let ud = Registry::builtin()
        .create("cpu", &settings(1, &[]), &opts)
        .unwrap()
        .userdata(None)
        .unwrap();
    assert!(doc(&ud).get("users").is_none());
    // A user without credentials: no users section, so the image's own default user stays.
    let ud = userdata("cpu", None, &[]);
    let d = doc(&ud);
    assert!(d.get("users").is_none(), "{ud}");
    assert!(d.get("ssh_pwauth").is_none());
    // Keys only: the account exists with its password locked, no password login.
    opts.ssh = SshAccess {
        user: Some("ops".parse().unwrap()),
        password: None,
        authorized_keys: vec![
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0 ops@laptop"
                .parse()
                .unwrap(),
        ],
    };
    let ud = Registry::builtin()
        .create("cpu", &settings(1, &[]), &opts)
        .unwrap()
        .userdata(None)
        .unwrap();
    let d = doc(&ud);
    assert_eq!(d["users"][0]["name"].as_str(), Some("ops"));
    assert_eq!(d["users"][0]["lock_passwd"].as_bool(), Some(true));
    assert!(d.get("ssh_pwauth").is_none());
}

#[test]
fn bad_ssh_inputs_are_rejected() {
    // Workloads receive the SSH account as types that refuse these values, so they cannot
    // reach a guest's cloud-init.
    assert!("root;reboot".parse::<virtwork::model::UserName>().is_err());
    assert!(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0\nruncmd: [reboot]"
            .parse::<virtwork::model::PublicKey>()
            .is_err()
    );
}

#[test]
fn param_errors_name_workload_key_value_and_form() {
    assert_eq!(
        create_err("cpu", &[("cpu-load-percent", "150")]),
        "invalid params for workload \"cpu\": param \"cpu-load-percent\" value \"150\": must be an integer from 1 to 100"
    );
    assert_eq!(
        create_err("cpu", &[("cpu-metod", "all")]),
        "invalid params for workload \"cpu\": unknown param \"cpu-metod\" (did you mean \"cpu-method\"?); known params: cpu-load-percent, cpu-method, profile, profile-burst, profile-duration, profile-duty, profile-high, profile-low, profile-period"
    );
    let err = create_err("cpu", &[("cpu-method", "matrixprd")]);
    assert!(err.contains("(did you mean \"matrixprod\"?)"), "{err}");
    let err = create_err("disk", &[("block-size-rw", "1000")]);
    assert!(err.contains("multiple of 512"), "{err}");
    let err = create_err("chaos-process", &[("signal", "SEGV")]);
    assert!(err.contains("one of: SIGTERM, SIGKILL"), "{err}");
    let err = create_err("network", &[("parallel-streams", "0")]);
    assert!(err.contains("from 1 to 128"), "{err}");
    // Deterministic: the first key in sorted order is reported.
    let err = create_err("disk", &[("runtime", "x"), ("numjobs", "y")]);
    assert!(err.contains("param \"numjobs\""), "{err}");
    // An empty value means "use the default".
    let w = build("cpu", 1, &[("cpu-method", "")]);
    assert!(w.userdata(None).unwrap().contains("--cpu-method all"));
}

#[test]
fn every_string_param_rejects_injection() {
    let payloads = [
        "all; reboot",
        "all && reboot",
        "$(reboot)",
        "`reboot`",
        "all'",
        "all\"",
        "all\nExecStartPre=/bin/rm -rf /",
        "%h",
        "a|b",
        "a>b",
        "a<b",
        "a\\b",
        "${HOME}",
        " all",
    ];
    let registry = Registry::builtin();
    for name in BUILTIN_NAMES {
        let schema = registry.schema(name).unwrap();
        for def in schema.defs() {
            for payload in payloads {
                let params = BTreeMap::from([(def.key.clone(), payload.to_string())]);
                let err = validate_params(schema, &params)
                    .expect_err(&format!("{name}.{} accepted {payload:?}", def.key));
                assert!(matches!(err, Error::Input(_)));
                assert!(!err.to_string().contains('\n'), "{err}");
            }
        }
    }
}

#[test]
fn defaults_of_every_builtin_validate() {
    let registry = Registry::builtin();
    for name in BUILTIN_NAMES {
        let schema = registry.schema(name).unwrap();
        let defaults: BTreeMap<String, String> = schema
            .defs()
            .map(|d| (d.key.clone(), d.default.clone()))
            .collect();
        validate_params(schema, &defaults).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// The guest agent and the workload readiness probe
// ---------------------------------------------------------------------------------------------

use virtwork::workloads::scripts::{READY_PORT, READY_RESPONDER, READY_SOCKET};

fn userdata_with_probe(family: GuestFamily, ready_endpoint: bool) -> String {
    let mut settings = settings(1, &[]);
    settings.guest_family = family;
    let options = WorkloadOptions {
        ready_endpoint,
        ..options()
    };
    Registry::builtin()
        .create("cpu", &settings, &options)
        .unwrap()
        .userdata(None)
        .unwrap()
}

/// A probed payload serves the readiness endpoint from its first runcmd lines and leaves the
/// guest agent's configuration as the image ships it, on every family.
#[test]
fn a_probed_payload_serves_the_readiness_endpoint_and_leaves_the_agent_alone() {
    for family in [GuestFamily::Fedora, GuestFamily::Debian] {
        let probed = userdata_with_probe(family, true);
        assert_eq!(
            runcmd(&probed)[..3],
            [
                cmd(&["systemctl", "daemon-reload"]),
                enable(READY_SOCKET),
                agent_first()
            ],
            "{family:?}"
        );
        let (socket, _) = file(&probed, &format!("/etc/systemd/system/{READY_SOCKET}"));
        assert_eq!(values(&socket, "ListenStream"), [READY_PORT.to_string()]);
        assert_eq!(values(&socket, "Accept"), ["yes"]);
        let (service, _) = file(&probed, "/etc/systemd/system/virtwork-ready@.service");
        assert_eq!(exec_start(&service), READY_RESPONDER);
        assert_eq!(values(&service, "StandardOutput"), ["socket"]);
        let (script, mode) = file(&probed, READY_RESPONDER);
        assert_eq!(mode, "0755");
        assert!(
            script.contains("for unit in virtwork-cpu.service; do"),
            "{script}"
        );
        assert!(
            !probed.contains("qemu-ga"),
            "the agent's config is untouched:\n{probed}"
        );

        let unprobed = userdata_with_probe(family, false);
        assert_eq!(runcmd(&unprobed)[0], agent_first());
        assert!(!paths(&unprobed).contains(&READY_RESPONDER.to_string()));
    }
}

/// The responder, run as systemd runs it per connection (the request on stdin, the answer on
/// stdout) against a stub `systemctl`: 200 while every unit is active, 503 naming the
/// inactive one otherwise, whatever the request.
#[test]
fn the_readiness_responder_answers_200_only_while_every_unit_is_active() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // `systemctl is-active --quiet UNIT` succeeds when UNIT is listed in the file `active`.
    let systemctl = bin.join("systemctl");
    std::fs::write(
        &systemctl,
        "#!/bin/sh\ngrep -qx \"$3\" \"$(dirname \"$0\")/active\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &systemctl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script = virtwork::workloads::scripts::ready_responder_script(&[
        "a.service".to_string(),
        "b.service".to_string(),
    ]);
    let answer = |active: &str, request: &str| -> String {
        std::fs::write(bin.join("active"), active).unwrap();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let get = "GET /ready HTTP/1.1\r\nHost: 10.0.2.2:8787\r\nUser-Agent: kube-probe/1.31\r\n\r\n";
    let ok = answer("a.service\nb.service\n", get);
    assert!(ok.starts_with("HTTP/1.0 200 OK\r\n"), "{ok}");
    let body = "active: a.service b.service\n";
    assert!(
        ok.ends_with(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )),
        "{ok}"
    );
    let down = answer("a.service\n", get);
    assert!(
        down.starts_with("HTTP/1.0 503 Service Unavailable\r\n"),
        "{down}"
    );
    assert!(down.ends_with("\r\n\r\ninactive: b.service\n"), "{down}");
    assert!(answer("", get).ends_with("inactive: a.service b.service\n"));
    // A client that sends nothing (or only part of a request) still gets its answer.
    assert!(answer("a.service\nb.service\n", "").starts_with("HTTP/1.0 200 OK\r\n"));
}

/// The data-disk format script, run with stub `blkid`/`mkfs.xfs`: a blank disk is formatted,
/// an xfs one is kept, and a foreign file system (what a recycled Block volume may carry, as
/// CDI writes nothing on a blank Block DataVolume) is named and left alone, failing the unit.
#[test]
fn the_format_script_formats_blank_disks_keeps_xfs_and_refuses_foreign_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let device = dir.path().join("virtio-virtwork-disk");
    std::fs::write(&device, b"").unwrap();
    let stub = |name: &str, body: &str| {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    let found = bin.join("found");
    let formatted = bin.join("formatted");
    stub(
        "blkid",
        &format!("[ -s {0} ] || exit 2\ncat {0}", found.display()),
    );
    stub(
        "mkfs.xfs",
        &format!("echo \"$@\" > {}", formatted.display()),
    );
    let script = virtwork::workloads::scripts::format_data_disk_script();
    let run = |signature: &str| {
        std::fs::write(&found, signature).unwrap();
        let _ = std::fs::remove_file(&formatted);
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .arg("virtwork-format-data-disk")
            .arg(&device)
            .arg("/mnt/data")
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            std::fs::read_to_string(&formatted).ok(),
        )
    };
    let real = std::fs::canonicalize(&device).unwrap();
    let (code, _, mkfs) = run("");
    assert_eq!(code, Some(0));
    assert_eq!(
        mkfs,
        Some(format!("-q {}\n", real.display())),
        "blank: formatted"
    );
    let (code, _, mkfs) = run("xfs\n");
    assert_eq!((code, mkfs), (Some(0), None), "xfs: kept as it is");
    let (code, stderr, mkfs) = run("ext4\n");
    assert_eq!((code, mkfs.as_deref()), (Some(1), None), "{stderr}");
    assert!(
        stderr.contains("already carries ext4, not xfs") && stderr.contains("wipefs -a"),
        "{stderr}"
    );
}
