//! Catalog tests: the shipped entries, manifest validation, placeholder substitution and
//! injection, registry conflicts, and `virtwork validate`'s report and exit code.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use virtwork::cli::{GlobalArgs, ValidateArgs};
use virtwork::commands::validate;
use virtwork::config::ValidateSettings;
use virtwork::error::Error;
use virtwork::model::SshAccess;
use virtwork::workloads::params::validate_params;
use virtwork::workloads::{GuestFamily, Registry, Workload, WorkloadOptions, WorkloadSettings};

/// `virtwork validate` with these flags and environment, its report written to `out`.
fn run_validate(
    args: &ValidateArgs,
    env: &[(String, String)],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let settings = ValidateSettings::resolve(&GlobalArgs::default(), args, env)?;
    validate::run(&settings, out)
}

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}

fn options(dir: &Path) -> WorkloadOptions {
    WorkloadOptions {
        namespace: "virtwork".parse().unwrap(),
        data_disk_size: "10Gi".parse().unwrap(),
        ssh: SshAccess::default(),
        catalog_dir: dir.to_path_buf(),
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

fn build(dir: &Path, entry: &str, vm_count: u32, params: &[(&str, &str)]) -> Box<dyn Workload> {
    let registry = Registry::with_catalog(dir, &[entry.to_string()]).unwrap();
    registry
        .create(entry, &settings(vm_count, params), &options(dir))
        .unwrap()
}

fn unit_content(userdata: &str, path: &str) -> String {
    let doc: serde_yaml::Value = serde_yaml::from_str(userdata).unwrap();
    doc["write_files"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str() == Some(path))
        .unwrap_or_else(|| panic!("{path} missing in {userdata}"))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn entry(dir: &Path, name: &str, files: &[(&str, &str)]) {
    let d = dir.join(name);
    fs::create_dir_all(&d).unwrap();
    for (file, content) in files {
        fs::write(d.join(file), content).unwrap();
    }
}

const SIMPLE_UNIT: &str = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/echo {{word}}\n\n[Install]\nWantedBy=multi-user.target\n";

fn input_err<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    match r {
        Err(Error::Input(m)) => {
            assert!(!m.contains('\n'), "{m}");
            m
        }
        other => panic!("expected input error, got {other:?}"),
    }
}

#[test]
fn sysbench_single_role_scales_and_substitutes() {
    let w = build(&shipped(), "sysbench", 3, &[("threads", "8")]);
    let roles = w.roles();
    assert_eq!(roles.len(), 1);
    assert_eq!((roles[0].role.as_deref(), roles[0].vm_count), (None, 3));
    assert!(w.service().is_none());
    let ud = w.userdata(None).unwrap();
    assert!(ud.starts_with("#cloud-config\n"));
    let unit = unit_content(&ud, "/etc/systemd/system/workload.service");
    assert!(unit.contains(
        "ExecStart=/bin/bash -c 'while true; do sysbench cpu --threads=8 --time=60 --cpu-max-prime=10000 run; sleep 10; done'"
    ), "{unit}");
    assert!(ud.contains("- sysbench\n"));
    assert!(
        ud.contains("- - systemctl\n  - enable\n  - --now\n  - --no-block\n  - workload.service\n")
    );
    assert_eq!(w.workload_units(None), ["workload.service"]);
    // Every payload brings the guest agent; no storage, so no xfsprogs.
    assert!(
        ud.contains("packages:\n- qemu-guest-agent\n- sysbench\nruncmd:"),
        "{ud}"
    );
}

#[test]
fn redis_bench_roles_service_storage_and_list_param() {
    let w = build(
        &shipped(),
        "redis-bench",
        3,
        &[("test-mode", "set;get;lpush")],
    );
    let roles = w.roles();
    assert_eq!(
        (roles[0].role.as_deref(), roles[0].vm_count),
        (Some("server"), 1)
    );
    assert_eq!(
        (roles[1].role.as_deref(), roles[1].vm_count),
        (Some("client"), 3),
        "clients follow --vm-count"
    );
    let svc = w.service().unwrap();
    assert_eq!(svc.name, "virtwork-redis-bench");
    assert_eq!(
        svc.selector,
        BTreeMap::from([
            (
                "app.kubernetes.io/component".to_string(),
                "redis-bench".to_string()
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
        ("redis", 6379, "TCP")
    );
    let disks = w.data_disks();
    assert_eq!(disks.len(), 1);
    assert_eq!(
        (
            disks[0].name.as_str(),
            disks[0].dv_base.as_str(),
            disks[0].serial.as_str(),
            disks[0].size.as_str()
        ),
        ("redis-data", "redis-data", "vw-redis", "10Gi")
    );
    let client = w.userdata(Some("client")).unwrap();
    let unit = unit_content(&client, "/etc/systemd/system/client.service");
    // Each round waits for the server, and a failed round still sleeps.
    assert!(
        unit.contains("until redis-cli -h virtwork-redis-bench -p 6379 ping 2>/dev/null | grep -q PONG; do sleep 2; done; redis-benchmark"),
        "{unit}"
    );
    assert!(unit.contains("-t set,get,lpush; sleep 30;"), "{unit}");
    // The storage is a mount unit every service file of the entry requires (via a drop-in).
    let mount = unit_content(&client, "/etc/systemd/system/var-lib-redis.mount");
    assert!(mount.contains("What=/dev/disk/by-id/virtio-vw-redis\nWhere=/var/lib/redis\n"));
    let drop_in = unit_content(
        &client,
        "/etc/systemd/system/client.service.d/virtwork-storage.conf",
    );
    assert_eq!(drop_in, "[Unit]\nRequiresMountsFor=/var/lib/redis\n");
    assert!(client.contains("- xfsprogs\n"), "mkfs.xfs is installed");
    assert!(!client.contains("/etc/fstab"));
    assert_eq!(w.workload_units(Some("client")), ["client.service"]);
    assert_eq!(w.workload_units(Some("server")), ["server.service"]);
    let server = w.userdata(Some("server")).unwrap();
    let unit = unit_content(&server, "/etc/systemd/system/server.service");
    assert!(unit.contains("--maxmemory 256mb --maxmemory-policy allkeys-lru"));
    // Clients on other VMs must get answers, not Redis 7's protected-mode DENIED.
    assert!(
        unit.contains("--bind 0.0.0.0 --protected-mode no "),
        "{unit}"
    );
    // Default list value is written comma-joined.
    let w = build(&shipped(), "redis-bench", 1, &[]);
    let unit = unit_content(
        &w.userdata(Some("client")).unwrap(),
        "/etc/systemd/system/client.service",
    );
    assert!(unit.contains("-t set,get; sleep"), "{unit}");
    assert!(w.userdata(Some("observer")).is_err());
}

#[test]
fn catalog_values_reject_injection() {
    let registry =
        Registry::with_catalog(&shipped(), &["sysbench".into(), "redis-bench".into()]).unwrap();
    let payloads = [
        "sum; reboot",
        "$(reboot)",
        "`reboot`",
        "a'b",
        "a\"b",
        "a\nb",
        "%h",
        "a|b",
        "a&b",
        "a<b",
        "a>b",
        "a\\b",
        "a b",
        "${x}",
        "-rf",
        "{{threads}}",
    ];
    for name in ["sysbench", "redis-bench"] {
        let schema = registry.schema(name).unwrap();
        for def in schema.defs() {
            for payload in payloads {
                let params = BTreeMap::from([(def.key.clone(), payload.to_string())]);
                let err = validate_params(schema, &params)
                    .expect_err(&format!("{name}.{} accepted {payload:?}", def.key));
                assert!(matches!(err, Error::Input(_)));
            }
        }
    }
    let err = input_err(registry.create(
        "redis-bench",
        &settings(1, &[("test-mode", "set;;get")]),
        &options(&shipped()),
    ));
    assert!(err.contains("param \"test-mode\""), "{err}");
}

#[test]
fn conflicts_and_duplicates_have_their_own_messages() {
    let tmp = tempfile::tempdir().unwrap();
    entry(
        tmp.path(),
        "cpu",
        &[("a.service", "[Service]\nExecStart=/bin/true\n")],
    );
    entry(
        tmp.path(),
        "mine",
        &[("a.service", "[Service]\nExecStart=/bin/true\n")],
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["cpu".into()]));
    assert_eq!(
        err,
        "catalog entry \"cpu\": catalog entry conflicts with built-in workload name; rename the entry directory"
    );
    let err = input_err(Registry::with_catalog(
        tmp.path(),
        &["mine".into(), "mine".into()],
    ));
    assert!(err.contains("listed more than once"), "{err}");
    assert!(!err.contains("built-in"), "{err}");
    let err = input_err(Registry::with_catalog(tmp.path(), &["nope".into()]));
    assert!(err.contains("catalog entry not found"), "{err}");
    let registry = Registry::with_catalog(tmp.path(), &["mine".into()]).unwrap();
    assert!(registry.names().contains(&"mine"));
}

#[test]
fn manifest_errors_name_the_key_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    entry(
        tmp.path(),
        "typo",
        &[
            ("a.service", SIMPLE_UNIT),
            ("workload.yaml", "pakages: [x]\n"),
        ],
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["typo".into()]));
    assert!(
        err.contains("pakages") && err.contains("workload.yaml"),
        "{err}"
    );
    entry(tmp.path(), "Bad_Name", &[("a.service", SIMPLE_UNIT)]);
    let err = input_err(Registry::with_catalog(tmp.path(), &["Bad_Name".into()]));
    assert!(err.contains("DNS-1123"), "{err}");
    entry(tmp.path(), "empty", &[("workload.yaml", "")]);
    let err = input_err(Registry::with_catalog(tmp.path(), &["empty".into()]));
    assert!(err.contains("no .service files"), "{err}");
    for (manifest, expected) in [
        (
            "storage: [{name: datadisk, size: 1Gi, serial: s, mount: /d}]",
            "conflicts with reserved disk name",
        ),
        (
            "storage: [{name: d, size: lots, serial: s, mount: /d}]",
            "storage size must be a valid quantity",
        ),
        (
            "storage: [{name: d, size: 1000Ki, serial: s, mount: /d}]",
            "\"1000Ki\": storage size must be at least 1Mi (CDI aligns disk images to 1Mi",
        ),
        (
            "storage: [{name: d, size: 1Gi, serial: abcdefghijklmnopqrstu, mount: /d}]",
            "at most 20 characters",
        ),
        (
            "storage: [{name: d, size: 1Gi, serial: s, mount: rel}]",
            "must be an absolute path",
        ),
        ("service: {ports: []}", "at least one port"),
        (
            "service: {ports: [{name: p, port: 70000}]}",
            "between 1 and 65535",
        ),
        (
            "service: {ports: [{name: p, port: 80, protocol: sctp}]}",
            "TCP or UDP",
        ),
        (
            "params: [{key: word, type: strng, default: x}]",
            "unknown type",
        ),
        (
            "params: [{key: word, type: int, default: abc}]",
            "must be an integer",
        ),
        ("params: [{key: word, default: \"a b\"}]", "no spaces"),
    ] {
        entry(
            tmp.path(),
            "m",
            &[("a.service", SIMPLE_UNIT), ("workload.yaml", manifest)],
        );
        let err = input_err(Registry::with_catalog(tmp.path(), &["m".into()]));
        assert!(err.contains(expected), "{manifest}: {err}");
    }
}

#[test]
fn single_role_selector_role_selects_the_entry_vms() {
    let tmp = tempfile::tempdir().unwrap();
    entry(
        tmp.path(),
        "web",
        &[
            ("a.service", SIMPLE_UNIT),
            (
                "workload.yaml",
                "params: [{key: word, default: hi}]\nroles: [{name: server}]\nservice: {selector-role: server, ports: [{name: http, port: 80}]}\n",
            ),
        ],
    );
    let w = build(tmp.path(), "web", 2, &[]);
    assert_eq!(w.roles()[0].role, None);
    let svc = w.service().unwrap();
    assert_eq!(
        svc.selector,
        BTreeMap::from([("app.kubernetes.io/component".to_string(), "web".to_string())])
    );
}

#[test]
fn undeclared_placeholders_fail_the_run_and_validate() {
    let tmp = tempfile::tempdir().unwrap();
    entry(tmp.path(), "bad", &[("a.service", SIMPLE_UNIT)]);
    entry(
        tmp.path(),
        "good",
        &[
            ("a.service", SIMPLE_UNIT),
            (
                "workload.yaml",
                "params: [{key: word, default: hi}, {key: spare, default: x}]\n",
            ),
        ],
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["bad".into()]));
    assert!(
        err.contains("placeholder {{word}} in a.service does not match any declared param"),
        "{err}"
    );

    let args = ValidateArgs {
        entries: vec![],
        catalog_dir: Some(tmp.path().to_path_buf()),
    };
    let mut out = Vec::new();
    let err = run_validate(&args, &[], &mut out).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert_eq!(err.to_string(), "1 of 2 entries: catalog validation failed");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "FAIL  bad: placeholder {{word}} in a.service does not match any declared param\n\
         WARN  good: declared param \"spare\" is not used in any service file\n\
         OK    good\n"
    );
}

#[test]
fn validate_accepts_the_shipped_catalog_and_resolves_the_dir() {
    let args = ValidateArgs {
        entries: vec![],
        catalog_dir: None,
    };
    let env = vec![(
        "VIRTWORK_CATALOG_DIR".to_string(),
        shipped().display().to_string(),
    )];
    let mut out = Vec::new();
    run_validate(&args, &env, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "OK    redis-bench\nOK    sysbench\n"
    );

    let home = tempfile::tempdir().unwrap();
    let env = vec![("HOME".to_string(), home.path().display().to_string())];
    assert_eq!(
        ValidateSettings::resolve(&GlobalArgs::default(), &args, &env)
            .unwrap()
            .catalog_dir,
        home.path().join(".virtwork/catalog")
    );
    let err = run_validate(&args, &env, &mut Vec::new()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string().starts_with("reading catalog directory"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let args = ValidateArgs {
        entries: vec![],
        catalog_dir: Some(empty.path().to_path_buf()),
    };
    let err = run_validate(&args, &[], &mut Vec::new()).unwrap_err();
    assert!(
        err.to_string().ends_with(": no catalog entries found"),
        "{err}"
    );

    let args = ValidateArgs {
        entries: vec!["sysbench".into(), "missing".into()],
        catalog_dir: Some(shipped()),
    };
    let mut out = Vec::new();
    let err = run_validate(&args, &[], &mut out).unwrap_err();
    assert_eq!(err.to_string(), "1 of 2 entries: catalog validation failed");
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with(
            "OK    sysbench\nFAIL  missing: catalog entry \"missing\": catalog entry not found"
        ),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// What an entry may read: regular files inside the entry, bounded in size, safe unit names
// ---------------------------------------------------------------------------------------------

/// Runs the real binary with `args` (HOME and the catalog variables cleared).
fn virtwork(home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(home)
        .output()
        .unwrap()
}

/// Both entry points that read an entry: `validate <entry>` and `run --dry-run --from-catalog`.
/// Each must refuse with exit 2 and one line naming the entry, the file and `needle`, and
/// (`secret`) nothing of the refused file's content may reach stdout or stderr.
fn assert_refused(catalog: &Path, entry: &str, file: &str, needle: &str, secret: Option<&str>) {
    let home = catalog.parent().unwrap();
    let dir = catalog.to_str().unwrap();
    for args in [
        vec!["validate", "--catalog-dir", dir, entry],
        vec![
            "--no-audit",
            "run",
            "--catalog-dir",
            dir,
            "--from-catalog",
            entry,
            "--dry-run",
        ],
    ] {
        let out = virtwork(home, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{stdout}\n{stderr}");
        let error = stderr.lines().last().unwrap_or_default();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        let report = format!("{stdout}{error}");
        let parts = [
            format!("catalog entry {entry:?}"),
            format!("{file:?}"),
            needle.to_string(),
        ];
        for part in &parts {
            assert!(
                report.contains(part.as_str()),
                "{args:?}: {part} in {report}"
            );
        }
        if let Some(secret) = secret {
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "{args:?}"
            );
        }
    }
}

#[test]
fn a_symlinked_unit_or_manifest_is_refused_and_never_read() {
    let home = tempfile::tempdir().unwrap();
    let catalog = home.path().join("catalog");
    let kubeconfig = home.path().join("kubeconfig");
    fs::write(&kubeconfig, "token: super-secret-token-4711\n").unwrap();
    entry(&catalog, "leaky", &[("main.service", SIMPLE_UNIT)]);
    std::os::unix::fs::symlink(&kubeconfig, catalog.join("leaky").join("creds.service")).unwrap();
    assert_refused(
        &catalog,
        "leaky",
        "creds.service",
        "symbolic link",
        Some("super-secret-token-4711"),
    );

    // A link that stays inside the entry is refused just the same: only regular files count.
    entry(&catalog, "inner", &[("main.service", SIMPLE_UNIT)]);
    std::os::unix::fs::symlink("main.service", catalog.join("inner").join("copy.service")).unwrap();
    assert_refused(&catalog, "inner", "copy.service", "symbolic link", None);

    entry(&catalog, "manifest", &[("main.service", SIMPLE_UNIT)]);
    std::os::unix::fs::symlink(&kubeconfig, catalog.join("manifest").join("workload.yaml"))
        .unwrap();
    assert_refused(
        &catalog,
        "manifest",
        "workload.yaml",
        "symbolic link",
        Some("super-secret-token-4711"),
    );
}

/// A linked entry directory is refused like a linked file: it could point at any directory
/// (here one holding a key), and its files would ship to every guest.
#[test]
fn a_symlinked_entry_directory_is_refused_and_never_read() {
    let home = tempfile::tempdir().unwrap();
    let catalog = home.path().join("catalog");
    let elsewhere = home.path().join("elsewhere");
    entry(
        &elsewhere,
        "keys",
        &[(
            "main.service",
            "[Unit]\nDescription=super-secret-token-4711\n\n[Service]\nExecStart=/bin/true\n",
        )],
    );
    fs::create_dir_all(&catalog).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("keys"), catalog.join("linked")).unwrap();
    let dir = catalog.to_str().unwrap();
    for args in [
        vec!["validate", "--catalog-dir", dir, "linked"],
        vec!["validate", "--catalog-dir", dir],
        vec![
            "--no-audit",
            "run",
            "--catalog-dir",
            dir,
            "--from-catalog",
            "linked",
            "--dry-run",
        ],
    ] {
        let out = virtwork(home.path(), &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{stdout}\n{stderr}");
        let report = format!("{stdout}{stderr}");
        assert!(
            report.contains("catalog entry \"linked\"") && report.contains("is a symbolic link"),
            "{args:?}: {report}"
        );
        assert!(
            !report.contains("super-secret-token-4711"),
            "{args:?}: {report}"
        );
    }
}

#[test]
fn special_files_oversized_files_and_oversized_entries_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let catalog = home.path().join("catalog");
    entry(&catalog, "dir-unit", &[("main.service", SIMPLE_UNIT)]);
    fs::create_dir(catalog.join("dir-unit").join("nested.service")).unwrap();
    assert_refused(
        &catalog,
        "dir-unit",
        "nested.service",
        "not a regular file",
        None,
    );

    // A FIFO would block a naive reader forever.
    entry(&catalog, "fifo", &[("main.service", SIMPLE_UNIT)]);
    let fifo = catalog.join("fifo").join("pipe.service");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        assert_refused(&catalog, "fifo", "pipe.service", "not a regular file", None);
    } else {
        eprintln!("skipping the FIFO case: mkfifo(1) not available");
    }

    let big = format!(
        "[Service]\nExecStart=/usr/bin/true\n#{}\n",
        "x".repeat(300 * 1024)
    );
    entry(&catalog, "big-file", &[("main.service", &big)]);
    assert_refused(&catalog, "big-file", "main.service", "256 KiB limit", None);

    // Five files of 250 KiB each are fine one by one but exceed the 1 MiB entry total.
    let chunk = format!(
        "[Service]\nExecStart=/usr/bin/true\n#{}\n",
        "y".repeat(250 * 1024)
    );
    let files: Vec<(String, &str)> = (1..=5)
        .map(|i| (format!("u{i}.service"), chunk.as_str()))
        .collect();
    let files: Vec<(&str, &str)> = files.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    entry(&catalog, "big-entry", &files);
    assert_refused(
        &catalog,
        "big-entry",
        "u5.service",
        "1024 KiB in total",
        None,
    );
}

#[test]
fn unit_file_names_that_could_break_a_guest_command_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let catalog = home.path().join("catalog");
    for (entry_name, file) in [
        ("dash", "-now.service"),
        ("space", "my unit.service"),
        ("semicolon", "x;reboot.service"),
        ("dollar", "$(id).service"),
        ("at", "@.service"),
        ("bare", ".service"),
    ] {
        let plain = "[Service]\nExecStart=/usr/bin/true\n";
        entry(
            &catalog,
            entry_name,
            &[("ok.service", plain), (file, plain)],
        );
        // ".service" alone is a hidden file: ignored, so that entry loads.
        if file == ".service" {
            continue;
        }
        assert_refused(
            &catalog,
            entry_name,
            file,
            "not a usable unit file name",
            None,
        );
    }
    // Template-style and dotted names stay usable.
    entry(
        &catalog,
        "fine",
        &[
            ("worker@1.service", "[Service]\nExecStart=/usr/bin/true\n"),
            ("a.b_c-d.service", "[Service]\nExecStart=/usr/bin/true\n"),
        ],
    );
    let out = virtwork(
        home.path(),
        &[
            "validate",
            "--catalog-dir",
            catalog.to_str().unwrap(),
            "fine",
            "bare",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

use crate::test_config;

/// A DataVolume is named `<storage name>-<vm>`: longer than a DNS label when both are long,
/// which Kubernetes and CDI accept (a DNS-1123 subdomain of at most 253 characters).
#[test]
fn long_storage_names_make_valid_data_volume_names_over_63_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = "s".repeat(60);
    entry(
        tmp.path(),
        "longdisk",
        &[
            ("a.service", SIMPLE_UNIT),
            (
                "workload.yaml",
                &format!(
                    "params: [{{key: word, default: x}}]\nstorage: [{{name: {storage}, size: 1Gi, serial: s, mount: /d}}]\n"
                ),
            ),
        ],
    );
    let mut input = test_config::plan_input(&[], 1);
    input.catalog_dir = tmp.path().to_path_buf();
    input.from_catalog = vec!["longdisk".into()];
    let registry = Registry::with_catalog(&input.catalog_dir, &input.from_catalog).unwrap();
    let run_id: virtwork::model::RunId = test_config::RUN_ID.parse().unwrap();
    let plan = virtwork::plan::build_plan(&input, &registry, run_id).unwrap();
    let dv = &plan.vms[0].data_volumes[0];
    let tag = run_id.name_tag();
    assert_eq!(*dv, format!("{storage}-virtwork-longdisk-{tag}-0"));
    assert!(dv.len() > 63, "{dv}");
}

/// A copy of the shipped sysbench entry in `dir` without its `profile` section and level
/// script: what the entry was before it opted in to load profiles.
fn sysbench_without_profile(dir: &Path) {
    let shipped_dir = shipped().join("sysbench");
    let mut manifest: serde_yaml::Mapping =
        serde_yaml::from_str(&fs::read_to_string(shipped_dir.join("workload.yaml")).unwrap())
            .unwrap();
    assert!(manifest.remove("profile").is_some());
    entry(
        dir,
        "sysbench",
        &[
            (
                "workload.service",
                &fs::read_to_string(shipped_dir.join("workload.service")).unwrap(),
            ),
            ("workload.yaml", &serde_yaml::to_string(&manifest).unwrap()),
        ],
    );
}

/// Opting in changes nothing for a steady run: the user-data is byte for byte what the entry
/// renders without a profile section (what the guest tier's sysbench case boots).
#[test]
fn sysbench_steady_user_data_is_unchanged_by_the_profile_section() {
    let tmp = tempfile::tempdir().unwrap();
    sysbench_without_profile(tmp.path());
    for params in [
        &[][..],
        &[("profile", "steady")],
        &[("profile", ""), ("threads", "8"), ("loop-delay", "5")],
    ] {
        // The entry without the section does not know the profile param.
        let steady: Vec<(&str, &str)> = params
            .iter()
            .copied()
            .filter(|(key, _)| *key != "profile")
            .collect();
        let before = build(tmp.path(), "sysbench", 1, &steady)
            .userdata(None)
            .unwrap();
        let after = build(&shipped(), "sysbench", 1, params)
            .userdata(None)
            .unwrap();
        assert_eq!(after, before, "{params:?}");
        assert!(!after.contains("virtwork-load-driver"), "{after}");
    }
}

#[test]
fn a_sysbench_profile_drives_its_unit_with_the_level_script() {
    let w = build(
        &shipped(),
        "sysbench",
        2,
        &[
            ("profile", "step"),
            ("profile-low", "200"),
            ("profile-high", "3000"),
            ("profile-period", "2m"),
            ("threads", "8"),
        ],
    );
    let ud = w.userdata(None).unwrap();
    // The entry's unit is installed as written; a drop-in replaces its ExecStart.
    let unit = unit_content(&ud, "/etc/systemd/system/workload.service");
    assert!(
        unit.contains("while true; do sysbench cpu --threads=8"),
        "{unit}"
    );
    let drop_in = unit_content(
        &ud,
        "/etc/systemd/system/workload.service.d/virtwork-load-profile.conf",
    );
    assert!(
        drop_in.contains(
            "[Service]\nType=simple\nExecStart=\nExecStart=/usr/local/bin/virtwork-load-driver /etc/virtwork/sysbench.schedule /var/lib/virtwork/sysbench.profile-start /usr/local/bin/virtwork-sysbench-at-level\nRestart=always\nStateDirectory=virtwork\nKillMode=mixed\n"
        ),
        "{drop_in}"
    );
    let level = unit_content(&ud, "/usr/local/bin/virtwork-sysbench-at-level");
    assert!(level.starts_with("#!/bin/bash\n"), "{level}");
    assert!(
        level.contains(
            "\nexec sysbench cpu --threads=8 --cpu-max-prime=10000 --time=0 --rate=\"$1\" --report-interval=60 run\n"
        ),
        "{level}"
    );
    assert!(!level.contains("{{"), "{level}");
    let schedule = unit_content(&ud, "/etc/virtwork/sysbench.schedule");
    assert!(
        schedule.ends_with("repeat 120\n0 3000\n60 200\n"),
        "{schedule}"
    );
    assert!(unit_content(&ud, "/usr/local/bin/virtwork-load-driver").starts_with("#!/bin/bash"));
    // Still one unit to enable and probe.
    assert_eq!(w.workload_units(None), ["workload.service"]);
    assert!(
        ud.contains("- - systemctl\n  - enable\n  - --now\n  - --no-block\n  - workload.service\n")
    );
}

#[test]
fn sysbench_profile_params_are_checked_like_the_built_ins() {
    let registry = Registry::with_catalog(&shipped(), &["sysbench".into()]).unwrap();
    let create = |params: &[(&str, &str)]| {
        input_err(registry.create("sysbench", &settings(1, params), &options(&shipped())))
    };
    assert_eq!(
        create(&[("profile", "step"), ("test-duration", "30")]),
        "invalid params for workload \"sysbench\": param \"test-duration\" sets the steady load; with profile \"step\" give the levels as profile-low and profile-high"
    );
    assert_eq!(
        create(&[("profile-period", "5m")]),
        "invalid params for workload \"sysbench\": param \"profile-period\" needs a load profile: add sysbench.profile=step (or ramp, sine, spike)"
    );
    assert_eq!(
        create(&[("profile", "ramp"), ("profile-high", "1000001")]),
        "invalid params for workload \"sysbench\": param \"profile-high\" value \"1000001\": must be an integer from 1 to 1000000"
    );
    assert_eq!(
        create(&[("profile", "sine"), ("profile-low", "5000")]),
        "invalid params for workload \"sysbench\": profile \"sine\": the low level (5000) must be below the high level (1000)"
    );
    let schema = registry.schema("sysbench").unwrap();
    assert!(
        schema
            .get("profile-high")
            .unwrap()
            .description
            .contains("sysbench cpu events per second (--rate)")
    );
}

#[test]
fn a_profile_key_on_an_entry_without_profiles_says_it_is_not_supported() {
    let registry = Registry::with_catalog(&shipped(), &["redis-bench".into()]).unwrap();
    let err = input_err(registry.create(
        "redis-bench",
        &settings(1, &[("profile", "step")]),
        &options(&shipped()),
    ));
    assert_eq!(
        err,
        "invalid params for workload \"redis-bench\": param \"profile\" sets a load profile, and workload \"redis-bench\" does not support load profiles (see \"Load profiles\" in docs/workloads.md)"
    );
}

const LEVEL_SCRIPT: &str = "#!/bin/bash\nexec /usr/bin/echo {{word}} \"$1\"\n";

/// A single-role entry with a unit using `{{word}}`, a level script and this profile section.
fn profiled_entry(dir: &Path, name: &str, profile: &str, level_script: Option<&str>) {
    let manifest = format!(
        "params:\n  - key: word\n    default: hi\n  - key: pause\n    type: int\n    default: 1\nprofile:\n{profile}"
    );
    let mut files = vec![("a.service", SIMPLE_UNIT), ("workload.yaml", &manifest)];
    if let Some(text) = level_script {
        files.push(("level.sh", text));
    }
    entry(dir, name, &files);
}

const GOOD_PROFILE: &str = "  unit: a.service\n  level-script: level.sh\n  meaning: echoes per second\n  max: 100\n  default-low: 1\n  default-high: 50\n";

#[test]
fn profile_section_errors_name_the_entry_the_field_and_the_form() {
    let tmp = tempfile::tempdir().unwrap();
    profiled_entry(tmp.path(), "good", GOOD_PROFILE, Some(LEVEL_SCRIPT));
    Registry::with_catalog(tmp.path(), &["good".into()]).unwrap();
    let replace = |field: &str, line: &str| {
        GOOD_PROFILE
            .lines()
            .map(|l| {
                if l.trim_start().starts_with(&format!("{field}:")) {
                    line.to_string()
                } else {
                    l.to_string()
                }
            })
            .filter(|l| !l.is_empty())
            .map(|l| l + "\n")
            .collect::<String>()
    };
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (
            GOOD_PROFILE.to_string(),
            None,
            "profile level-script \"level.sh\": no such file in ",
        ),
        (
            GOOD_PROFILE.to_string(),
            Some("exec echo \"$1\"\n"),
            "profile level-script \"level.sh\" must start with a #! line (e.g. #!/bin/bash)",
        ),
        (
            replace("unit", "  unit: b.service"),
            Some(LEVEL_SCRIPT),
            "profile unit \"b.service\" is not a service file the entry installs (expected one of: a.service)",
        ),
        (
            replace("unit", "  unit: \"-x.service\""),
            Some(LEVEL_SCRIPT),
            "profile unit \"-x.service\": not a usable unit file name",
        ),
        (
            replace("level-script", "  level-script: ../level.sh"),
            Some(LEVEL_SCRIPT),
            "profile level-script \"../level.sh\" must be the name of a file in the entry directory",
        ),
        (
            replace("level-script", "  level-script: a.service"),
            Some(LEVEL_SCRIPT),
            "not a .service/.timer file or workload.yaml (e.g. level.sh)",
        ),
        (
            replace("max", "  max: 0"),
            Some(LEVEL_SCRIPT),
            "profile max 0 must be an integer from 1 to 1000000000 (the largest level)",
        ),
        (
            replace("default-low", "  default-low: 100"),
            Some(LEVEL_SCRIPT),
            "profile default-low 100 must be an integer from 0 to 99 (below max)",
        ),
        (
            replace("default-high", "  default-high: 1"),
            Some(LEVEL_SCRIPT),
            "profile default-high 1 must be an integer above default-low (1) and at most max (100)",
        ),
        (
            replace("default-high", "  default-high: 101"),
            Some(LEVEL_SCRIPT),
            "profile default-high 101 must be an integer above default-low (1) and at most max (100)",
        ),
        (
            replace("meaning", "  meaning: \"two\\nlines\""),
            Some(LEVEL_SCRIPT),
            "profile meaning \"two\\nlines\" must be one line of at most 120 characters",
        ),
        (
            replace("meaning", ""),
            Some(LEVEL_SCRIPT),
            "missing field `meaning`",
        ),
        (
            format!("{GOOD_PROFILE}  steady-params: [pause, nope]\n"),
            Some(LEVEL_SCRIPT),
            "profile steady-params: \"nope\" is not a declared param",
        ),
        (
            format!("{GOOD_PROFILE}  levels: 3\n"),
            Some(LEVEL_SCRIPT),
            "unknown field `levels`",
        ),
    ];
    for (i, (profile, level_script, expected)) in cases.into_iter().enumerate() {
        let name = format!("bad-{i}");
        profiled_entry(tmp.path(), &name, &profile, level_script);
        let err = input_err(Registry::with_catalog(
            tmp.path(),
            std::slice::from_ref(&name),
        ));
        assert!(
            err.starts_with(&format!("catalog entry \"{name}\": ")),
            "{err}"
        );
        assert!(err.contains(expected), "{profile}: {err}");
    }
    // A declared param may not take a profile param's name once the entry opts in.
    entry(
        tmp.path(),
        "reserved",
        &[
            ("a.service", SIMPLE_UNIT),
            ("level.sh", LEVEL_SCRIPT),
            (
                "workload.yaml",
                &format!(
                    "params:\n  - key: word\n    default: hi\n  - key: profile-low\n    type: int\n    default: 1\nprofile:\n{GOOD_PROFILE}"
                ),
            ),
        ],
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["reserved".into()]));
    assert!(
        err.contains("param \"profile-low\" takes the name of a load-profile param; rename it"),
        "{err}"
    );
}

#[test]
fn level_script_placeholders_are_substituted_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    profiled_entry(tmp.path(), "good", GOOD_PROFILE, Some(LEVEL_SCRIPT));
    let w = build(
        tmp.path(),
        "good",
        1,
        &[("profile", "spike"), ("word", "loud")],
    );
    let ud = w.userdata(None).unwrap();
    assert_eq!(
        unit_content(&ud, "/usr/local/bin/virtwork-good-at-level"),
        "#!/bin/bash\nexec /usr/bin/echo loud \"$1\"\n"
    );
    // An unused manifest param warns; the profile params never do.
    let entry_report = virtwork::workloads::catalog::CatalogEntry::load(tmp.path(), "good")
        .unwrap()
        .placeholder_report();
    assert_eq!(
        entry_report.warnings,
        ["declared param \"pause\" is not used in any service file"]
    );
    assert!(entry_report.errors.is_empty());
    profiled_entry(
        tmp.path(),
        "typo",
        GOOD_PROFILE,
        Some("#!/bin/bash\nexec /usr/bin/echo {{wrod}} \"$1\"\n"),
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["typo".into()]));
    assert_eq!(
        err,
        "catalog entry \"typo\": placeholder {{wrod}} in level.sh does not match any declared param"
    );
    // A hostile value never reaches the level script.
    let registry = Registry::with_catalog(tmp.path(), &["good".into()]).unwrap();
    input_err(registry.create(
        "good",
        &settings(1, &[("profile", "step"), ("word", "$(reboot)")]),
        &options(tmp.path()),
    ));
}

#[test]
fn a_multi_role_profile_drives_only_its_role() {
    let tmp = tempfile::tempdir().unwrap();
    let unit = "[Unit]\nDescription=x\n\n[Service]\nExecStart=/usr/bin/true\n\n[Install]\nWantedBy=multi-user.target\n";
    let roles = "roles:\n  - name: server\n    vm-count: 1\n  - name: client\n";
    let profile = "profile:\n  unit: client.service\n  level-script: level.sh\n  meaning: requests per second\n  max: 1000\n  default-low: 10\n  default-high: 100\n";
    entry(
        tmp.path(),
        "pair",
        &[
            ("server.service", unit),
            ("client.service", unit),
            ("extra.service", unit),
            ("level.sh", "#!/bin/bash\nexec /usr/bin/sleep \"$1\"\n"),
            ("workload.yaml", &format!("{roles}{profile}")),
        ],
    );
    let w = build(tmp.path(), "pair", 2, &[("profile", "sine")]);
    let client = w.userdata(Some("client")).unwrap();
    let server = w.userdata(Some("server")).unwrap();
    assert!(
        client.contains("/etc/systemd/system/client.service.d/virtwork-load-profile.conf"),
        "{client}"
    );
    assert!(!server.contains("virtwork-load-driver"), "{server}");
    // A unit no role installs cannot be driven.
    entry(
        tmp.path(),
        "pair-extra",
        &[
            ("server.service", unit),
            ("client.service", unit),
            ("extra.service", unit),
            ("level.sh", "#!/bin/bash\nexec /usr/bin/sleep \"$1\"\n"),
            (
                "workload.yaml",
                &format!(
                    "{roles}{}",
                    profile.replace("client.service", "extra.service")
                ),
            ),
        ],
    );
    let err = input_err(Registry::with_catalog(tmp.path(), &["pair-extra".into()]));
    assert!(
        err.contains("profile unit \"extra.service\" is not a service file the entry installs (expected one of: server.service, client.service)"),
        "{err}"
    );
}
