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
        guest_exec: false,
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

#[path = "support/test_config.rs"]
mod test_config;

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
