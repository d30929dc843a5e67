//! Real-tool validation of every rendered guest payload: all nine built-ins (every role),
//! both shipped catalog entries, with and without SSH credentials.
//!
//! - `cloud-init schema --config-file` accepts each user-data document;
//! - `systemd-analyze verify --root` accepts each unit, with the payload's own scripts
//!   installed in a temporary root. Executables and units that the guest's *packages*
//!   provide (stress-ng, iperf3, bash, postgresql.service, ...) do not exist in that root,
//!   so they are stubbed there: verify checks that ExecStart targets exist and are
//!   executable, and this machine is not a Fedora guest;
//! - `bash -n` and `shellcheck` accept each script and each `bash -c` one-liner;
//! - `fio --parse-only` accepts each job file;
//! - the cpu and memory stress-ng command lines, as rendered, run for 1 s and exit 0.
//!
//! Each check prints a notice and skips when its tool is absent, and fails instead when
//! `VIRTWORK_REQUIRE_GUEST_TOOLS=1`.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use virtwork::model::{Secret, SshAccess};
use virtwork::workloads::{BUILTIN_NAMES, Registry, WorkloadOptions, WorkloadSettings};

/// One rendered user-data document.
struct Payload {
    label: String,
    userdata: String,
}

/// A file from a payload's write_files.
struct GuestFile {
    path: String,
    content: String,
    permissions: String,
}

fn require_tools() -> bool {
    std::env::var("VIRTWORK_REQUIRE_GUEST_TOOLS").is_ok_and(|v| v == "1")
}

/// Whether `tool` is on PATH; otherwise skip with a notice (or fail when required).
fn have(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()));
    if !found {
        assert!(
            !require_tools(),
            "{tool} is required (VIRTWORK_REQUIRE_GUEST_TOOLS=1) but not on PATH"
        );
        eprintln!("NOTICE: {tool} not found on PATH; skipping its guest payload checks");
    }
    found
}

fn options(ssh: bool) -> WorkloadOptions {
    WorkloadOptions {
        namespace: "virtwork".parse().unwrap(),
        data_disk_size: "10Gi".parse().unwrap(),
        ssh: if ssh {
            SshAccess {
                user: Some("virtwork".parse().unwrap()),
                password: Some(Secret::new("correct horse battery staple")),
                authorized_keys: vec![
                    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk4a2v5d0n3b7mN9ZQ0fake user@host"
                        .parse()
                        .unwrap(),
                ],
            }
        } else {
            SshAccess::default()
        },
        catalog_dir: catalog_dir(),
    }
}

fn catalog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}

fn settings(params: &[(&str, &str)]) -> WorkloadSettings {
    WorkloadSettings {
        vm_count: 1,
        cpu_cores: 2,
        memory: "2Gi".parse().unwrap(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// Every payload: built-ins and catalog entries, every role, with and without SSH.
fn payloads() -> Vec<Payload> {
    let names: Vec<String> = vec!["sysbench".into(), "redis-bench".into()];
    let registry = Registry::with_catalog(&catalog_dir(), &names).unwrap();
    let mut out = Vec::new();
    for ssh in [false, true] {
        for name in BUILTIN_NAMES
            .iter()
            .copied()
            .chain(["sysbench", "redis-bench"])
        {
            let workload = registry
                .create(name, &settings(&[]), &options(ssh))
                .unwrap();
            for role in workload.roles() {
                out.push(Payload {
                    label: format!(
                        "{name}/{}/{}",
                        role.role.as_deref().unwrap_or("-"),
                        if ssh { "ssh" } else { "no-ssh" }
                    ),
                    userdata: workload.userdata(role.role.as_deref()).unwrap(),
                });
            }
        }
    }
    out
}

fn files(userdata: &str) -> Vec<GuestFile> {
    let doc: serde_yaml::Value = serde_yaml::from_str(userdata).unwrap();
    doc["write_files"]
        .as_sequence()
        .map(|files| {
            files
                .iter()
                .map(|f| GuestFile {
                    path: f["path"].as_str().unwrap().to_string(),
                    content: f["content"].as_str().unwrap().to_string(),
                    permissions: f["permissions"].as_str().unwrap().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn run(cmd: &mut Command) -> (bool, String) {
    let output = cmd.output().expect("spawn");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// The bodies of `bash -c '...'` commands inside a unit's Exec lines, unescaped for systemd.
fn bash_c_bodies(unit: &str) -> Vec<String> {
    unit.lines()
        .filter(|l| l.starts_with("Exec"))
        .filter_map(|l| l.split_once("/bin/bash -c '"))
        .map(|(_, rest)| {
            rest.strip_suffix('\'')
                .expect("closing quote")
                .replace("%%", "%")
        })
        .collect()
}

#[test]
fn cloud_init_schema_accepts_every_userdata() {
    if !have("cloud-init") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads();
    // Two at a time: cloud-init starts slowly and the machine is shared.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = payloads
            .chunks(payloads.len().div_ceil(2))
            .map(|chunk| {
                let dir = dir.path();
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for p in chunk {
                        let file = dir.join(p.label.replace('/', "_") + ".yaml");
                        fs::write(&file, &p.userdata).unwrap();
                        let (ok, text) = run(Command::new("cloud-init")
                            .args(["schema", "--config-file"])
                            .arg(&file));
                        if !ok || !text.contains("Valid cloud-config") {
                            failures.push(format!("{}: {text}", p.label));
                        }
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "cloud-init schema rejected:\n{}",
        failures.join("\n")
    );
}

/// Units the guest's packages provide, stubbed in the verify root.
const PACKAGE_UNITS: &[&str] = &["postgresql.service"];
/// Units every systemd guest has that a service's default dependencies and our ordering
/// lines name; stubbed because the verify root is not a full OS tree.
const SYSTEM_UNITS: &[&str] = &[
    "-.slice",
    "system.slice",
    "sysinit.target",
    "basic.target",
    "shutdown.target",
    "multi-user.target",
    "network.target",
    "network-online.target",
    "local-fs.target",
];

#[test]
fn systemd_analyze_verifies_every_unit() {
    if !have("systemd-analyze") {
        return;
    }
    let mut failures = Vec::new();
    let mut verified = 0;
    for p in payloads() {
        let root = tempfile::tempdir().unwrap();
        let guest = files(&p.userdata);
        let mut units = Vec::new();
        let mut provided = BTreeSet::new();
        for f in &guest {
            let path = root.path().join(f.path.trim_start_matches('/'));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &f.content).unwrap();
            let mode = u32::from_str_radix(&f.permissions, 8).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            provided.insert(f.path.clone());
            if f.path.ends_with(".service") {
                units.push(f.path.clone());
            }
        }
        // Stub what packages would install (see module docs).
        for f in guest.iter().filter(|f| f.path.ends_with(".service")) {
            for line in f.content.lines().filter(|l| l.starts_with("Exec")) {
                let command = line
                    .split_once('=')
                    .unwrap()
                    .1
                    .trim_start_matches(['-', '+', '@', '!']);
                let exe = command.split_whitespace().next().unwrap();
                if exe.starts_with('/') && !provided.contains(exe) {
                    stub_executable(root.path(), exe);
                }
            }
        }
        let unit_dir = root.path().join("usr/lib/systemd/system");
        fs::create_dir_all(&unit_dir).unwrap();
        for unit in PACKAGE_UNITS {
            fs::write(
                unit_dir.join(unit),
                "[Unit]\nDescription=package stub\n\n[Service]\nExecStart=/bin/true\n",
            )
            .unwrap();
            stub_executable(root.path(), "/bin/true");
        }
        for unit in SYSTEM_UNITS {
            let body = if unit.ends_with(".slice") {
                "[Unit]\nDescription=stub\n\n[Slice]\n"
            } else {
                "[Unit]\nDescription=stub\n"
            };
            fs::write(unit_dir.join(unit), body).unwrap();
        }
        for unit in units {
            let (ok, text) = run(Command::new("systemd-analyze")
                .arg("verify")
                .arg(format!("--root={}", root.path().display()))
                .arg(root.path().join(unit.trim_start_matches('/'))));
            verified += 1;
            if !ok || !text.trim().is_empty() {
                failures.push(format!("{} {unit}: {text}", p.label));
            }
        }
    }
    assert!(verified >= 15, "only {verified} units verified");
    assert!(
        failures.is_empty(),
        "systemd-analyze verify:\n{}",
        failures.join("\n")
    );
}

fn stub_executable(root: &Path, exe: &str) {
    let path = root.join(exe.trim_start_matches('/'));
    if path.exists() {
        return;
    }
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every script (write_files starting with `#!`) and every `bash -c` body, de-duplicated.
fn shell_snippets() -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for p in payloads() {
        let mut add = |label: String, text: String| {
            if seen.insert(text.clone()) {
                out.push((label, text));
            }
        };
        for f in files(&p.userdata) {
            if f.content.starts_with("#!") {
                add(format!("{} {}", p.label, f.path), f.content.clone());
            }
            if f.path.ends_with(".service") {
                for body in bash_c_bodies(&f.content) {
                    add(
                        format!("{} {} bash -c", p.label, f.path),
                        format!("#!/bin/bash\n{body}\n"),
                    );
                }
            }
        }
        let doc: serde_yaml::Value = serde_yaml::from_str(&p.userdata).unwrap();
        let runcmd: Vec<Vec<String>> =
            serde_yaml::from_value(doc["runcmd"].clone()).unwrap_or_default();
        for argv in runcmd {
            if argv.len() == 3 && argv[0] == "bash" && argv[1] == "-c" {
                add(
                    format!("{} runcmd", p.label),
                    format!("#!/bin/bash\n{}\n", argv[2]),
                );
            }
        }
    }
    out
}

#[test]
fn bash_parses_every_script() {
    if !have("bash") {
        return;
    }
    let snippets = shell_snippets();
    assert!(
        snippets.len() >= 12,
        "only {} scripts found",
        snippets.len()
    );
    let failures: Vec<String> = snippets
        .iter()
        .filter_map(|(label, text)| {
            let (ok, out) = run(Command::new("bash").args(["-n", "-c", text]));
            (!ok).then(|| format!("{label}: {out}"))
        })
        .collect();
    assert!(failures.is_empty(), "bash -n:\n{}", failures.join("\n"));
}

#[test]
fn shellcheck_accepts_every_script() {
    if !have("shellcheck") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, (label, text)) in shell_snippets().iter().enumerate() {
        let file = dir.path().join(format!("s{i}.sh"));
        fs::write(&file, text).unwrap();
        let (ok, out) = run(Command::new("shellcheck")
            .args(["-s", "bash", "-S", "style"])
            .arg(&file));
        if !ok {
            failures.push(format!("{label}:\n{out}"));
        }
    }
    assert!(failures.is_empty(), "shellcheck:\n{}", failures.join("\n"));
}

#[test]
fn fio_parses_every_job_file() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::builtin();
    let mut checked = 0;
    for params in [
        &[][..],
        &[
            ("block-size-rw", "64k"),
            ("block-size-seq", "1m"),
            ("rwmixread", "0"),
            ("numjobs", "1"),
            ("runtime", "1"),
        ][..],
    ] {
        let w = registry
            .create("disk", &settings(params), &options(false))
            .unwrap();
        for f in files(&w.userdata(None).unwrap())
            .into_iter()
            .filter(|f| f.path.ends_with(".fio"))
        {
            let file = dir.path().join(f.path.rsplit('/').next().unwrap());
            fs::write(&file, &f.content).unwrap();
            let (ok, out) = run(Command::new("fio").arg("--parse-only").arg(&file));
            assert!(ok, "fio --parse-only {}: {out}\n{}", f.path, f.content);
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

/// The stress-ng command line of a rendered unit, unescaped, with a 1 s timeout.
fn stress_ng_line(workload: &str, params: &[(&str, &str)]) -> Vec<String> {
    let w = Registry::builtin()
        .create(workload, &settings(params), &options(false))
        .unwrap();
    let unit = files(&w.userdata(None).unwrap())
        .into_iter()
        .find(|f| f.path.ends_with(".service"))
        .unwrap();
    let exec = unit
        .content
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("%%", "%");
    assert!(exec.ends_with(" --timeout 0"), "{exec}");
    let exec = exec.replace(" --timeout 0", " --timeout 1s");
    exec.split_whitespace().map(str::to_string).collect()
}

#[test]
fn stress_ng_command_lines_run() {
    if !have("stress-ng") {
        return;
    }
    // memory-percent kept small: the machine running the tests is shared.
    for (workload, params) in [
        ("cpu", &[][..]),
        (
            "cpu",
            &[("cpu-load-percent", "10"), ("cpu-method", "matrixprod")][..],
        ),
        ("memory", &[("memory-percent", "5")][..]),
        (
            "memory",
            &[
                ("memory-percent", "5"),
                ("vm-method", "flip"),
                ("vm-stressors", "2"),
            ][..],
        ),
    ] {
        let argv = stress_ng_line(workload, params);
        assert_eq!(argv[0], "/usr/bin/stress-ng");
        let (ok, out) = run(Command::new("stress-ng").args(&argv[1..]));
        assert!(ok, "{argv:?} failed:\n{out}");
    }
}

#[test]
fn chaos_process_protects_whole_names_only() {
    if !have("bash") {
        return;
    }
    let w = Registry::builtin()
        .create("chaos-process", &settings(&[]), &options(false))
        .unwrap();
    let script = files(&w.userdata(None).unwrap())
        .into_iter()
        .find(|f| f.path == "/usr/local/bin/chaos-process.sh")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chaos-process.sh");
    fs::write(&path, &script.content).unwrap();
    let fake_ps = r#"
ps() {
  cat <<'PS'
    1     0 systemd
    2     0 kthreadd
  999     1 early
 1500     2 kworker/0:1-events
 1600     1 sshd
 1601     1 sshd-session
 1700     1 ssh-agent
 1800     1 sh
 1801     1 bash
 1802     1 crash
 1803     1 fish
 1900     1 systemd-journal
 1950     1 dbus-broker
 2000     1 virtwork-tps-se
 2100     1 chaos-process.s
 2200     1 stress-ng
 2300     1 postgres
 2400     1 my prog
 2500     1 NetworkManager
 2600     1 cloud-init
PS
}
"#;
    let program = format!("source {}\n{fake_ps}\neligible_pids", path.display());
    let (ok, out) = run(Command::new("bash").args(["-c", &program]));
    assert!(ok, "{out}");
    let pids: Vec<&str> = out.lines().collect();
    assert_eq!(
        pids,
        ["1700", "1802", "1803", "2200", "2300", "2400"],
        "{out}"
    );
}
