//! Per-workload payload tests: rendered user-data, units, scripts, params wiring, roles,
//! services and data disks of the nine built-ins, plus the registry and param validation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use virtwork::error::Error;
use virtwork::model::{Secret, SshAccess};
use virtwork::workloads::params::validate_params;
use virtwork::workloads::{
    BUILTIN_NAMES, Registry, Workload, WorkloadOptions, WorkloadSettings, check_builtin_names,
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
    }
}

fn build(name: &str, vm_count: u32, params: &[(&str, &str)]) -> Box<dyn Workload> {
    Registry::builtin()
        .create(name, &settings(vm_count, params), &options())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn userdata(name: &str, role: Option<&str>, params: &[(&str, &str)]) -> String {
    build(name, 1, params).userdata(role).unwrap()
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
    assert_eq!(packages(&ud), ["stress-ng"]);
    let (unit, mode) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert_eq!(mode, "0644");
    assert!(unit.contains("Description=Virtwork CPU stress workload\nAfter=network.target\n"));
    assert_eq!(
        exec_start(&unit),
        "/usr/bin/stress-ng --cpu 0 --cpu-load 100 --cpu-method all --timeout 0"
    );
    assert!(unit.contains("Restart=always\nRestartSec=10\n"));
    assert!(unit.contains("[Install]\nWantedBy=multi-user.target\n"));
    assert_eq!(
        runcmd(&ud),
        [
            cmd(&["systemctl", "daemon-reload"]),
            cmd(&["systemctl", "enable", "--now", "virtwork-cpu.service"])
        ]
    );
    let ud = userdata(
        "cpu",
        None,
        &[("cpu-load-percent", "55"), ("cpu-method", "matrixprod")],
    );
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert_eq!(
        exec_start(&unit),
        "/usr/bin/stress-ng --cpu 0 --cpu-load 55 --cpu-method matrixprod --timeout 0"
    );
    // Partial override keeps the other default.
    let ud = userdata("cpu", None, &[("cpu-method", "fft")]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-cpu.service");
    assert!(exec_start(&unit).contains("--cpu-load 100 --cpu-method fft"));
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

#[test]
fn memory_unit_escapes_the_percent_for_systemd() {
    let ud = userdata("memory", None, &[]);
    assert_eq!(packages(&ud), ["stress-ng"]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-memory.service");
    assert!(unit.contains("Description=Virtwork memory stress workload\n"));
    assert_eq!(
        exec_start(&unit),
        "/usr/bin/stress-ng --vm 1 --vm-bytes 80%% --vm-method all --timeout 0"
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
        "/usr/bin/stress-ng --vm 2 --vm-bytes 50%% --vm-method flip --timeout 0"
    );
}

#[test]
fn disk_payload_fio_jobs_and_data_disk() {
    let w = build("disk", 2, &[]);
    let disks = w.data_disks();
    assert_eq!(disks.len(), 1);
    assert_eq!(disks[0].name, "datadisk");
    assert_eq!(disks[0].dv_base, "virtwork-disk-data");
    assert_eq!(disks[0].serial, "virtwork-disk");
    assert_eq!(disks[0].size.as_str(), "10Gi");
    let ud = w.userdata(None).unwrap();
    assert_eq!(packages(&ud), ["fio"]);
    let (setup, mode) = file(&ud, "/usr/local/bin/virtwork-disk-setup.sh");
    assert_eq!(mode, "0755");
    assert!(setup.contains("DISK=\"/dev/disk/by-id/virtio-virtwork-disk\""));
    assert!(setup.contains("MOUNT_POINT=\"/mnt/data\""));
    // fstab uses the stable by-id path, not the resolved /dev/vdX.
    assert!(
        setup.contains("echo \"${DISK} ${MOUNT_POINT} xfs defaults,nofail 0 0\" >> /etc/fstab")
    );
    let (mixed, _) = file(&ud, "/etc/fio/mixed-rw.fio");
    assert_eq!(
        mixed,
        "[global]\nioengine=libaio\ndirect=1\ndirectory=/mnt/data\nsize=1G\n\n[mixed-rw]\nrw=randrw\nrwmixread=70\nbs=4k\nnumjobs=4\nruntime=300\ntime_based\ngroup_reporting\n"
    );
    let (seq, _) = file(&ud, "/etc/fio/seq-write.fio");
    assert!(seq.contains("[seq-write]\nrw=write\nbs=128k\nnumjobs=2\nruntime=300\n"));
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-disk.service");
    assert!(unit.contains("After=network.target local-fs.target\n"));
    assert_eq!(
        exec_start(&unit),
        "/bin/bash -c 'while true; do fio /etc/fio/mixed-rw.fio; sleep 10; fio /etc/fio/seq-write.fio; sleep 10; done'"
    );
    assert_eq!(
        runcmd(&ud),
        [
            cmd(&["/usr/local/bin/virtwork-disk-setup.sh"]),
            cmd(&["systemctl", "daemon-reload"]),
            cmd(&["systemctl", "enable", "--now", "virtwork-disk.service"])
        ]
    );
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
fn database_initialises_as_root_before_postgres_and_loops_as_postgres() {
    let w = build(
        "database",
        1,
        &[("scale-factor", "7"), ("clients", "3"), ("duration", "42")],
    );
    let ud = w.userdata(None).unwrap();
    assert!(packages(&ud).contains(&"postgresql-server".to_string()));
    let (setup_unit, _) = file(&ud, "/etc/systemd/system/virtwork-database-setup.service");
    assert!(setup_unit.contains("Before=postgresql.service\n"));
    assert!(setup_unit.contains("Type=oneshot\nRemainAfterExit=yes\n"));
    assert!(!setup_unit.contains("User="), "setup runs as root");
    let (setup, _) = file(&ud, "/usr/local/bin/virtwork-db-setup.sh");
    assert!(setup.contains("DISK=\"/dev/disk/by-id/virtio-virtwork-dbdisk\""));
    assert!(setup.contains("postgresql-setup --initdb"));
    assert!(setup.contains(">> /etc/fstab"));
    let (prepare, _) = file(&ud, "/usr/local/bin/virtwork-db-prepare.sh");
    assert!(prepare.contains("pgbench -i -s 7 pgbench"));
    assert!(prepare.contains("createdb pgbench"));
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-database.service");
    assert!(unit.contains("User=postgres\n"));
    assert!(unit.contains(
        "After=network.target local-fs.target postgresql.service virtwork-database-setup.service\n"
    ));
    assert!(unit.contains("ExecStartPre=/usr/local/bin/virtwork-db-prepare.sh\n"));
    assert_eq!(
        exec_start(&unit),
        "/bin/bash -c 'while true; do pgbench -c 3 -j 2 -T 42 pgbench; sleep 10; done'"
    );
    // Order: storage + initdb, then postgres, then the loop.
    assert_eq!(
        runcmd(&ud),
        [
            cmd(&["systemctl", "daemon-reload"]),
            cmd(&[
                "systemctl",
                "enable",
                "--now",
                "virtwork-database-setup.service"
            ]),
            cmd(&["systemctl", "enable", "--now", "postgresql.service"]),
            cmd(&["systemctl", "enable", "--now", "virtwork-database.service"]),
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
    assert_eq!(packages(&server), ["iperf3"]);
    let (unit, _) = file(&server, "/etc/systemd/system/virtwork-network.service");
    assert!(unit.contains("Description=Virtwork iperf3 server\n"));
    assert_eq!(exec_start(&unit), "/usr/bin/iperf3 -s");
    let client = w.userdata(Some("client")).unwrap();
    let (unit, _) = file(&client, "/etc/systemd/system/virtwork-network.service");
    assert!(unit.contains("Description=Virtwork iperf3 client\n"));
    assert_eq!(
        exec_start(&unit),
        "/bin/bash -c 'while true; do iperf3 -c virtwork-iperf3-server.virtwork.svc.cluster.local -t 30 -P 8 --bidir; sleep 10; done'"
    );
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
    assert_eq!(packages(&server), ["netperf", "python3"]);
    let (script, mode) = file(&server, "/usr/local/bin/virtwork-tps-server.sh");
    assert_eq!(mode, "0755");
    assert!(script.contains("netserver -D -p 12865 &"));
    assert!(script.contains(
        "dd if=/dev/urandom of=/srv/virtwork/testfile bs=1M count=10 iflag=fullblock 2>&1"
    ));
    assert!(script.contains("python3 -m http.server 8080 --directory /srv/virtwork &"));
    let (unit, _) = file(&server, "/etc/systemd/system/virtwork-tps.service");
    assert!(unit.contains("RestartSec=10\n"));
    let client = w.userdata(Some("client")).unwrap();
    assert_eq!(packages(&client), ["netperf", "curl"]);
    let (script, _) = file(&client, "/usr/local/bin/virtwork-tps-client.sh");
    assert!(script.contains("SERVER=\"virtwork-tps-server.virtwork.svc.cluster.local\""));
    assert!(script.contains("ITERATIONS=30\n"));
    assert!(script.contains("DURATION=60\n"));
    assert!(script.contains(&format!("FILE_SIZE_BYTES={}\n", 10 * 1024 * 1024)));
    assert!(script.contains("netperf -H \"$SERVER\" -p 12865 -t TCP_RR -l \"$DURATION\" -- -r \"$MSG_SIZE,$MSG_SIZE\" -P ,12866"));
    let (unit, _) = file(&client, "/etc/systemd/system/virtwork-tps.service");
    assert!(unit.contains("RestartSec=30\n"));
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
fn chaos_disk_payload() {
    let w = build(
        "chaos-disk",
        1,
        &[
            ("mount", "/var/lib/chaos"),
            ("fill-percent", "75"),
            ("fill-sleep", "5"),
            ("release-sleep", "6"),
        ],
    );
    let ud = w.userdata(None).unwrap();
    assert!(packages(&ud).is_empty());
    let (setup, _) = file(&ud, "/usr/local/bin/virtwork-disk-setup.sh");
    assert!(setup.contains("DISK=\"/dev/disk/by-id/virtio-virtwork-chdisk\""));
    assert!(setup.contains("MOUNT_POINT=\"/var/lib/chaos\""));
    let (script, _) = file(&ud, "/usr/local/bin/chaos-disk.sh");
    assert!(script.contains("MOUNT_POINT=\"/var/lib/chaos\"\nFILL_PERCENT=75\n"));
    assert!(script.contains("FILL_SLEEP=5\nRELEASE_SLEEP=6\n"));
    assert!(script.contains("fallocate -l \"${FILL_KB}K\" \"$FILL_FILE\""));
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-disk.service");
    assert_eq!(exec_start(&unit), "/usr/local/bin/chaos-disk.sh");
    assert_eq!(
        runcmd(&ud)[0],
        cmd(&["/usr/local/bin/virtwork-disk-setup.sh"])
    );
}

#[test]
fn chaos_network_keeps_its_qdisc() {
    let ud = userdata(
        "chaos-network",
        None,
        &[("latency-ms", "250"), ("packet-loss-percent", "0.5")],
    );
    assert_eq!(packages(&ud), ["iproute-tc"]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-network.service");
    assert!(unit.contains("Type=oneshot\nRemainAfterExit=yes\n"));
    assert!(unit.contains("ExecStart=/usr/local/bin/virtwork-chaos-network-start.sh\n"));
    assert!(unit.contains("ExecStop=/usr/local/bin/virtwork-chaos-network-stop.sh\n"));
    assert!(!unit.contains("Restart=always"));
    let (start, _) = file(&ud, "/usr/local/bin/virtwork-chaos-network-start.sh");
    assert!(start.contains(
        "/usr/sbin/tc qdisc replace dev \"$DEV\" root netem delay 250ms loss 0.5% limit 1000"
    ));
    let (stop, _) = file(&ud, "/usr/local/bin/virtwork-chaos-network-stop.sh");
    assert!(stop.contains("/usr/sbin/tc qdisc del dev \"$DEV\" root"));
    assert_eq!(
        runcmd(&ud)[0],
        cmd(&[
            "bash",
            "-c",
            "dnf install -y \"kernel-modules-extra-$(uname -r)\""
        ])
    );
}

#[test]
fn chaos_process_environment() {
    let ud = userdata(
        "chaos-process",
        None,
        &[
            ("signal", "SIGKILL"),
            ("interval", "5"),
            ("min-pid", "2000"),
        ],
    );
    assert_eq!(packages(&ud), ["procps-ng"]);
    let (unit, _) = file(&ud, "/etc/systemd/system/virtwork-chaos-process.service");
    assert!(unit.contains("Environment=\"CHAOS_SIGNAL=SIGKILL\"\nEnvironment=\"CHAOS_INTERVAL=5\"\nEnvironment=\"CHAOS_MIN_PID=2000\"\n"));
    assert!(unit.contains("StandardOutput=journal\nStandardError=journal\n"));
    let (script, _) = file(&ud, "/usr/local/bin/chaos-process.sh");
    assert!(script.contains("PROTECTED_NAMES=\"bash sh "));
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
    // Default user without credentials: locked, no ssh_pwauth.
    let ud = userdata("cpu", None, &[]);
    let d = doc(&ud);
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
        "invalid params for workload \"cpu\": unknown param \"cpu-metod\" (did you mean \"cpu-method\"?); known params: cpu-load-percent, cpu-method"
    );
    let err = create_err("cpu", &[("cpu-method", "matrixprd")]);
    assert!(err.contains("(did you mean \"matrixprod\"?)"), "{err}");
    let err = create_err("disk", &[("block-size-rw", "1000")]);
    assert!(err.contains("multiple of 512"), "{err}");
    let err = create_err("chaos-process", &[("signal", "TERM")]);
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
