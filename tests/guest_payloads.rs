//! Real-tool validation of every rendered guest payload: all nine built-ins (every role),
//! both shipped catalog entries, for every guest family, with and without SSH credentials.
//!
//! - `cloud-init schema --config-file` accepts each user-data document;
//! - `systemd-analyze verify --root` accepts each unit, with the payload's own scripts
//!   installed in a temporary root. Executables and units that the guest's *packages*
//!   provide (stress-ng, iperf3, bash, postgresql.service, ...) do not exist in that root,
//!   so they are stubbed there: verify checks that ExecStart targets exist and are
//!   executable, and this machine is not a Fedora guest;
//! - `bash -n` and `shellcheck` accept each script and each `bash -c` one-liner;
//! - `fio --parse-only` accepts each job file;
//! - `python3 -m py_compile` accepts each Python script;
//! - the cpu and memory stress-ng command lines, as rendered, run for 1 s and exit 0;
//! - the load-profile driver, as rendered, follows a schedule with a recording level command,
//!   resumes its clock from the start file (read as decimal; an impossible start replaced) and
//!   fails when the load process ends, also with bash 4.4/5.0's `wait`; the cpu level
//!   script keeps stress-ng running, the disk level script writes rate-limited job files
//!   that fio parses, and the catalog sysbench level script runs sysbench at the rate.
//!
//! Each check prints a notice and skips when its tool is absent, and fails instead when
//! `VIRTWORK_REQUIRE_GUEST_TOOLS=1`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use virtwork::model::{Secret, SshAccess};
use virtwork::workloads::{
    BUILTIN_NAMES, GuestFamily, Registry, WorkloadOptions, WorkloadSettings,
};

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
        planned_workloads: Vec::new(),
        ready_endpoint: true,
        run_tag: String::new(),
    }
}

fn catalog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}

fn settings(params: &[(&str, &str)]) -> WorkloadSettings {
    settings_for(GuestFamily::Fedora, params)
}

fn settings_for(guest_family: GuestFamily, params: &[(&str, &str)]) -> WorkloadSettings {
    WorkloadSettings {
        vm_count: 1,
        cpu_cores: 2,
        memory: "2Gi".parse().unwrap(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        guest_family,
    }
}

/// Every payload: built-ins and catalog entries, every role, every family, with and
/// without SSH; plus the param variants that render different units or scripts.
fn payloads() -> Vec<Payload> {
    let names: Vec<String> = vec!["sysbench".into(), "redis-bench".into()];
    let registry = Registry::with_catalog(&catalog_dir(), &names).unwrap();
    let mut out = Vec::new();
    let variants: &[(&str, &[(&str, &str)])] = &[
        ("chaos-disk", &[("mount", "/var/lib/my-chaos.d")]),
        ("chaos-network", &[("target", "10.0.2.100:80")]),
        ("chaos-process", &[("mode", "random"), ("victims", "32")]),
        // Load profiles: the driver, the schedule and each workload's level script.
        ("cpu", &[("profile", "step")]),
        ("cpu", &[("profile", "sine"), ("profile-low", "0")]),
        ("disk", &[("profile", "ramp")]),
        ("memory", &[("profile", "step")]),
        ("network", &[("profile", "spike")]),
        ("database", &[("profile", "sine")]),
        // A catalog entry's profile: its level script and the drop-in on its own unit.
        ("sysbench", &[("profile", "step")]),
    ];
    for family in GuestFamily::ALL {
        for ssh in [false, true] {
            let defaults = BUILTIN_NAMES
                .iter()
                .copied()
                .chain(["sysbench", "redis-bench"])
                .map(|name| (name, &[][..]));
            let extra = variants.iter().filter(|_| !ssh).copied();
            for (name, params) in defaults.chain(extra) {
                let workload = registry
                    .create(name, &settings_for(family, params), &options(ssh))
                    .unwrap();
                for role in workload.roles() {
                    out.push(Payload {
                        label: format!(
                            "{family}/{name}{}/{}/{}",
                            if params.is_empty() { "" } else { "+params" },
                            role.role.as_deref().unwrap_or("-"),
                            if ssh { "ssh" } else { "no-ssh" }
                        ),
                        userdata: workload.userdata(role.role.as_deref()).unwrap(),
                    });
                }
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
const PACKAGE_UNITS: &[&str] = &["postgresql.service", "qemu-guest-agent.service"];
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
    "local-fs-pre.target",
    "umount.target",
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
            let is_template = f.path.ends_with("@.service");
            if (f.path.ends_with(".service") || f.path.ends_with(".mount")) && !is_template {
                units.push(f.path.clone());
            } else if is_template {
                // A template is verified through an instance named after it.
                let instance = f.path.replace("@.service", "@1.service");
                std::os::unix::fs::symlink(
                    &path,
                    root.path().join(instance.trim_start_matches('/')),
                )
                .unwrap();
                units.push(instance);
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
    assert!(verified >= 100, "only {verified} units verified");
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
            if f.content.starts_with("#!/bin/bash") || f.content.starts_with("#!/usr/bin/env bash")
            {
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
        let mut commands: Vec<Vec<String>> =
            serde_yaml::from_value(doc["runcmd"].clone()).unwrap_or_default();
        commands.extend(
            serde_yaml::from_value::<Vec<Vec<String>>>(doc["bootcmd"].clone()).unwrap_or_default(),
        );
        for argv in commands {
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

/// The stress-ng command line of a rendered unit, unescaped, with a 1 s timeout: its
/// `ExecStart=`, or the `exec` line of the level script it runs at the level it gives (cpu's).
fn stress_ng_line(workload: &str, params: &[(&str, &str)]) -> Vec<String> {
    let w = Registry::builtin()
        .create(workload, &settings(params), &options(false))
        .unwrap();
    let rendered = files(&w.userdata(None).unwrap());
    let unit = rendered
        .iter()
        .find(|f| f.path.ends_with(".service"))
        .unwrap();
    let mut exec = unit
        .content
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("%%", "%");
    if let Some(script) = rendered
        .iter()
        .find(|f| exec.starts_with(&format!("{} ", f.path)))
    {
        // The level the unit gives the script is its `$1`.
        let level = exec[script.path.len()..].trim().to_string();
        exec = script
            .content
            .lines()
            .find_map(|l| l.strip_prefix("exec "))
            .unwrap()
            .replace("\"$1\"", &level);
    }
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
fn python_compiles_every_python_script() {
    if !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut seen = BTreeSet::new();
    let mut checked = 0;
    for p in payloads() {
        for f in files(&p.userdata) {
            if !f.content.starts_with("#!/usr/bin/python3") || !seen.insert(f.content.clone()) {
                continue;
            }
            let file = dir.path().join(format!("p{checked}.py"));
            fs::write(&file, &f.content).unwrap();
            let (ok, out) = run(Command::new("python3")
                .args(["-m", "py_compile"])
                .arg(&file));
            assert!(ok, "{} {}: {out}", p.label, f.path);
            checked += 1;
        }
    }
    assert!(checked >= 1, "no Python script found");
}

/// The chaos-network probe measures what netem does: run against a local listener, it logs
/// a window with every probe answered; against a closed local port (refused = answered) too;
/// and `--device` names the loopback interface for a loopback target.
#[test]
fn chaos_network_probe_reports_windows_against_a_local_listener() {
    if !have("python3") || !have("ip") {
        return;
    }
    let w = Registry::builtin()
        .create("chaos-network", &settings(&[]), &options(false))
        .unwrap();
    let probe = files(&w.userdata(None).unwrap())
        .into_iter()
        .find(|f| f.path == "/usr/local/bin/virtwork-chaos-network-probe")
        .unwrap();
    // A 3-probe window keeps the test short; everything else is the shipped script.
    let script = probe.content.replace("WINDOW = 60", "WINDOW = 3");
    assert_ne!(script, probe.content, "window constant not found");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.py");
    fs::write(&path, &script).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (ok, out) = run(Command::new("python3")
        .arg(&path)
        .args(["--device", "127.0.0.1", &port]));
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "lo");
    let mut child = Command::new("python3")
        .arg(&path)
        .args(["127.0.0.1", &port, "0.05"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        lines.push(line);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        lines[0].starts_with(&format!(
            "probing 127.0.0.1 (127.0.0.1) port {port} through lo"
        )),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "probe window=1 target=127.0.0.1:{port} dev=lo sent=3 answered=3 lost=0 loss_pct=0.0 rtt_ms_avg="
        )),
        "{lines:?}"
    );
}

/// Debian's netperf is in `non-free` (Ubuntu's in `multiverse`): the tps bootcmd adds that
/// component to the guest's own sources, both one-line and deb822, once.
#[test]
fn tps_bootcmd_adds_the_netperf_component_to_existing_sources() {
    if !have("bash") || !have("sed") {
        return;
    }
    let w = Registry::builtin()
        .create(
            "tps",
            &settings_for(GuestFamily::Debian, &[]),
            &options(false),
        )
        .unwrap();
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&w.userdata(Some("client")).unwrap()).unwrap();
    let bootcmd: Vec<Vec<String>> = serde_yaml::from_value(doc["bootcmd"].clone()).unwrap();
    let script = &bootcmd[0][2];
    for (os_release, component) in [
        ("ID=debian\nVERSION_ID=\"12\"\n", "non-free"),
        ("ID=ubuntu\nID_LIKE=debian\n", "multiverse"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        fs::create_dir_all(etc.join("apt/sources.list.d")).unwrap();
        fs::write(etc.join("os-release"), os_release).unwrap();
        fs::write(
            etc.join("apt/sources.list"),
            "deb http://10.0.2.100/debian bookworm main\ndeb http://10.0.2.100/flat ./\n",
        )
        .unwrap();
        fs::write(
            etc.join("apt/sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n",
        )
        .unwrap();
        let rooted = script.replace("/etc/", &format!("{}/", etc.display()));
        for _ in 0..2 {
            let (ok, out) = run(Command::new("bash").args(["-c", &rooted]));
            assert!(ok, "{out}");
        }
        assert_eq!(
            fs::read_to_string(etc.join("apt/sources.list")).unwrap(),
            format!(
                "deb http://10.0.2.100/debian bookworm main {component}\ndeb http://10.0.2.100/flat ./\n"
            )
        );
        assert_eq!(
            fs::read_to_string(etc.join("apt/sources.list.d/debian.sources")).unwrap(),
            format!(
                "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main {component}\n"
            )
        );
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
 2700     1 qemu-ga
 2800     1 dhclient
 2900     1 chaos-victim
 3000     1 python3
 3100     1 python3
PS
}
unit_of() {
  case "$1" in
    2900) echo "virtwork-chaos-victim@1.service" ;;
    3000) echo "cloud-final.service" ;;
    3100) echo "session-4.scope" ;;
    2400) echo "qemu-guest-agent.service" ;;
    *) echo "app.service" ;;
  esac
}
"#;
    let program = format!("source {}\n{fake_ps}\neligible_pids", path.display());
    let (ok, out) = run(Command::new("bash").args(["-c", &program]));
    assert!(ok, "{out}");
    let pids: Vec<&str> = out.lines().collect();
    // 2400 runs in the guest agent's unit whatever its name; 3000 and 3100 are protected by
    // their units; the victim is eligible.
    assert_eq!(
        pids,
        ["1700", "1802", "1803", "2200", "2300", "2900"],
        "{out}"
    );
}

/// The victims-mode loop as shipped, against a stand-in for systemd: the script signals the
/// victim unit's main process (a real `sleep`, which dies), logs `KILL n=1`, and once the unit
/// reports a new main PID logs `RESTART n=1` with both PIDs.
#[test]
fn chaos_process_kills_a_victim_and_counts_its_restart() {
    if !have("bash") {
        return;
    }
    let w = Registry::builtin()
        .create(
            "chaos-process",
            &settings(&[("victims", "1")]),
            &options(false),
        )
        .unwrap();
    let script = files(&w.userdata(None).unwrap())
        .into_iter()
        .find(|f| f.path == "/usr/local/bin/chaos-process.sh")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chaos-process.sh");
    fs::write(&path, &script.content).unwrap();
    let program = format!(
        r#"source {script}
set +e
CHAOS_VICTIMS=1
sleep 300 &
VICTIM=$!
MAIN_PID_FILE={dir}/main-pid
echo "$VICTIM" > "$MAIN_PID_FILE"
systemctl() {{
  [ "$*" = "show -p MainPID --value virtwork-chaos-victim@1.service" ] || return 1
  cat "$MAIN_PID_FILE"
}}
kill_victim
wait "$VICTIM" 2>/dev/null
echo "victim exit $?"
check_restart
echo 4242 > "$MAIN_PID_FILE"
check_restart
check_restart
# A victim that never runs again: after MAX_MISSING rounds the workload fails.
echo 0 > "$MAIN_PID_FILE"
( for _ in $(seq 1 "$MAX_MISSING"); do kill_victim; done ) >/dev/null
echo "missing exit $?"
"#,
        script = path.display(),
        dir = dir.path().display(),
    );
    let (ok, out) = run(Command::new("bash").args(["-c", &program]));
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[3], "missing exit 1", "{out}");
    assert!(
        lines[0].contains("] KILL n=1 signal=SIGTERM pid=")
            && lines[0].ends_with(" victim=virtwork-chaos-victim@1.service"),
        "{out}"
    );
    // 128 + SIGTERM: the victim really died of the signal.
    assert_eq!(lines[1], "victim exit 143", "{out}");
    assert!(
        lines[2].contains("] RESTART n=1 victim=virtwork-chaos-victim@1.service old_pid=")
            && lines[2].ends_with(" new_pid=4242"),
        "{out}"
    );
}

/// What keeps chaos-disk and fio off the root disk, run for real: the shipped chaos-disk
/// loop pointed at a directory that is not a mount (as /mnt/data is when the data disk is
/// missing) stops before allocating anything, and the guard names the reason; with the
/// device missing too, it says so.
#[test]
fn chaos_disk_refuses_a_mount_point_that_is_not_its_data_disk() {
    if !have("bash") || !have("findmnt") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("data");
    fs::create_dir(&target).unwrap();
    let w = Registry::builtin()
        .create(
            "chaos-disk",
            &settings(&[("mount", "/mnt/data"), ("fill-sleep", "1")]),
            &options(false),
        )
        .unwrap();
    let guest = files(&w.userdata(None).unwrap());
    let content = |path: &str| {
        guest
            .iter()
            .find(|f| f.path == path)
            .unwrap()
            .content
            .clone()
    };
    let guard = dir.path().join("virtwork-require-mount");
    fs::write(&guard, content("/usr/local/bin/virtwork-require-mount")).unwrap();
    fs::set_permissions(&guard, fs::Permissions::from_mode(0o755)).unwrap();
    // The same script, pointed at the scratch directory and the scratch guard; the device is
    // one that exists (so the mount-point check is what refuses).
    let script = content("/usr/local/bin/chaos-disk.sh")
        .replace("/mnt/data", &target.display().to_string())
        .replace(
            "/usr/local/bin/virtwork-require-mount",
            &guard.display().to_string(),
        )
        .replace("/dev/disk/by-id/virtio-virtwork-chdisk", "/dev/null");
    let path = dir.path().join("chaos-disk.sh");
    fs::write(&path, script).unwrap();
    let (ok, out) = run(Command::new("timeout").arg("20").arg("bash").arg(&path));
    assert!(!ok, "the fill loop ran against a plain directory:\n{out}");
    assert!(
        out.contains(&format!(
            "ERROR: {} is not a mount point; refusing to write to the root file system",
            target.display()
        )),
        "{out}"
    );
    assert!(!out.contains("filling"), "{out}");
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        0,
        "nothing allocated"
    );

    // A real mount point, but of another device (the root file system): refused too.
    let (ok, out) = run(Command::new(&guard).arg("/").arg("/dev/null"));
    assert!(!ok, "{out}");
    assert!(out.contains("ERROR: / is mounted from "), "{out}");
    assert!(out.contains("not from the data disk /dev/null"), "{out}");

    let (ok, out) = run(Command::new(&guard)
        .arg(&target)
        .arg("/dev/disk/by-id/virtio-absent"));
    assert!(!ok);
    assert!(
        out.contains("ERROR: data disk /dev/disk/by-id/virtio-absent is missing"),
        "{out}"
    );
}

/// The rendered write_files of `workload` with `params`, by path.
fn rendered_files(workload: &str, params: &[(&str, &str)]) -> BTreeMap<String, GuestFile> {
    let w = Registry::builtin()
        .create(workload, &settings(params), &options(false))
        .unwrap();
    files(&w.userdata(None).unwrap())
        .into_iter()
        .map(|f| (f.path.clone(), f))
        .collect()
}

/// Writes `text` as an executable file.
fn executable(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A level command that logs `start <level> <pid>` and `stop <level>` (on SIGTERM).
const RECORDING_LEVEL: &str = "#!/bin/bash\necho \"start $1 $$\" >> \"$(dirname \"$0\")/levels.log\"\nexec 2>/dev/null\ntrap 'echo \"stop $1\" >> \"$(dirname \"$0\")/levels.log\"; exit 0' TERM\nwhile :; do sleep 0.2; done\n";

/// Lines of the recording level command's log.
fn level_log(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("levels.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn load_driver_follows_the_schedule_and_resumes_its_clock() {
    if !have("bash") || !have("setsid") {
        return;
    }
    let rendered = rendered_files("cpu", &[("profile", "step")]);
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver");
    executable(
        &driver,
        &rendered["/usr/local/bin/virtwork-load-driver"].content,
    );
    let level = dir.path().join("level");
    executable(&level, RECORDING_LEVEL);
    // Level 7 for 3 s, then 3 for 1 s, repeating; the unit first started 5 s ago, so the
    // driver resumes 1 (or 2) s into a period at level 7, not at the profile's start.
    let schedule = dir.path().join("schedule");
    fs::write(&schedule, "# test\nrepeat 4\n0 7\n3 3\n").unwrap();
    let start_file = dir.path().join("state/start");
    fs::create_dir_all(start_file.parent().unwrap()).unwrap();
    let started = now_secs() - 5;
    fs::write(&start_file, format!("{started}\n")).unwrap();
    let child = Command::new(&driver)
        .args([&schedule, &start_file, &level])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Three levels take 3 s by the schedule; a loaded machine gets 30 (the loop ends as soon
    // as they are seen).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while level_log(dir.path())
        .iter()
        .filter(|l| l.starts_with("start"))
        .count()
        < 3
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "driver exit {:?}: {stdout}",
        out.status
    );
    assert!(
        stdout.starts_with("level 7 at 5 s of the profile") || stdout.starts_with("level 7 at 6 s"),
        "{stdout}"
    );
    let log = level_log(dir.path());
    let events: Vec<&str> = log
        .iter()
        .map(|l| l.rsplit_once(' ').map_or(l.as_str(), |(head, _)| head))
        .collect();
    // Started at 7, switched to 3 and back to 7 within 3 s, stopped by SIGTERM at the end.
    assert!(events.len() >= 5, "{log:?}");
    assert_eq!(
        events[..5],
        ["start 7", "stop", "start 3", "stop", "start 7"][..],
        "{log:?}"
    );
    assert_eq!(log.last().unwrap(), "stop 7", "{log:?}");
    // Each level ran as a process of its own, and none is left.
    let pids: BTreeSet<&str> = log
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert!(pids.len() >= 3, "{log:?}");
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "level process {pid} left running"
        );
    }
    assert_eq!(
        fs::read_to_string(&start_file).unwrap(),
        format!("{started}\n"),
        "the clock's start is kept"
    );
}

/// A level command that takes 3 s to stop on SIGTERM, as stress-ng can in a loaded guest.
const SLOW_STOPPING_LEVEL: &str =
    "#!/bin/bash\nexec 2>/dev/null\ntrap 'sleep 3; exit 0' TERM\nwhile :; do sleep 0.2; done\n";

/// The live-migration case found this: the driver slept the whole time to the next phase
/// after the old level had stopped, so every change came as late as the previous one took.
#[test]
fn load_driver_keeps_its_schedule_when_a_level_is_slow_to_stop() {
    if !have("bash") || !have("setsid") {
        return;
    }
    let rendered = rendered_files("cpu", &[("profile", "step")]);
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver");
    executable(
        &driver,
        &rendered["/usr/local/bin/virtwork-load-driver"].content,
    );
    let level = dir.path().join("level");
    executable(&level, SLOW_STOPPING_LEVEL);
    // Level 7 for 4 s, then 3 for 4 s, repeating, from now.
    let schedule = dir.path().join("schedule");
    fs::write(&schedule, "# test\nrepeat 8\n0 7\n4 3\n").unwrap();
    let start_file = dir.path().join("state/start");
    fs::create_dir_all(start_file.parent().unwrap()).unwrap();
    fs::write(&start_file, format!("{}\n", now_secs())).unwrap();
    let mut child = Command::new(&driver)
        .args([&schedule, &start_file, &level])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read the driver's decisions as it logs them: the first level and two changes (at 4 and
    // 8 s by the schedule; each change's stop takes 3 s).
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.starts_with("level "))
            .take(3)
            .collect::<Vec<_>>()
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !reader.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    let decisions = reader.join().unwrap();
    assert_eq!(decisions.len(), 3, "{decisions:?}");
    let at: Vec<u64> = decisions
        .iter()
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    // Whole seconds on both sides: a change is decided in the second its phase starts or the
    // next; without the fix the second one came at 11 s (8 + the 3 s stop of the first).
    assert!(at[0] <= 1, "{decisions:?}");
    assert!((4..=5).contains(&at[1]), "{decisions:?}");
    assert!((8..=9).contains(&at[2]), "{decisions:?}");
}

#[test]
fn load_driver_starts_its_clock_once_and_fails_when_the_load_ends() {
    if !have("bash") || !have("setsid") {
        return;
    }
    let rendered = rendered_files("disk", &[("profile", "step")]);
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver");
    executable(
        &driver,
        &rendered["/usr/local/bin/virtwork-load-driver"].content,
    );
    let level = dir.path().join("level");
    executable(&level, "#!/bin/bash\nsleep 0.5\nexit 3\n");
    let schedule = dir.path().join("schedule");
    fs::write(&schedule, "repeat 0\n0 40\n").unwrap();
    let start_file = dir.path().join("new/dir/start");
    let before = now_secs();
    let (ok, out) = run(Command::new(&driver).args([&schedule, &start_file, &level]));
    assert!(!ok, "{out}");
    // The driver reads the clock again after writing the start: on a busy machine a second
    // boundary may fall in between, so a fresh clock reads 0 or 1 s.
    assert!(
        fresh_clock(&out)
            && out.contains("ERROR: the load process (level 40) exited with status 3"),
        "{out}"
    );
    let written: u64 = fs::read_to_string(&start_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((before..=now_secs()).contains(&written), "{written}");
    // A start file that holds no time (a torn write) starts the clock again instead of
    // failing the unit on every start.
    fs::write(&start_file, "garb\n").unwrap();
    let before = now_secs();
    let (_, out) = run(Command::new(&driver).args([&schedule, &start_file, &level]));
    assert!(fresh_clock(&out), "{out}");
    let rewritten: u64 = fs::read_to_string(&start_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((before..=now_secs()).contains(&rewritten), "{rewritten}");
}

#[test]
fn profiled_stress_ng_level_scripts_keep_stress_ng_running_at_the_level() {
    if !have("stress-ng") || !have("timeout") {
        return;
    }
    // Small levels: the machine running the tests is shared.
    for (workload, params, level, fragment) in [
        (
            "cpu",
            &[("profile", "step"), ("cpu-method", "matrixprod")][..],
            "5",
            "--cpu-load \"$1\" --cpu-load-slice 20 --cpu-method matrixprod",
        ),
        (
            "memory",
            &[("profile", "step"), ("vm-method", "flip")][..],
            "3",
            "--vm-bytes \"$1\"% --vm-keep --vm-populate --vm-method flip",
        ),
    ] {
        let rendered = rendered_files(workload, params);
        let script = &rendered[&format!("/usr/local/bin/virtwork-{workload}-at-level")].content;
        assert!(script.contains(fragment), "{script}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("level");
        executable(&path, script);
        // The cpu script asks systemd for the unit's cap: a stand-in systemctl on PATH
        // records what it was asked (this host has no virtwork-cpu.service).
        let calls = systemctl_stand_in(dir.path(), 0);
        // Still running after 2 s (timeout's 124): stress-ng accepted the level and kept going.
        let out = Command::new("timeout")
            .arg("2")
            .arg(&path)
            .arg(level)
            .env("PATH", path_with(dir.path()))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(124),
            "{workload}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if workload == "cpu" {
            assert_eq!(
                fs::read_to_string(&calls).unwrap(),
                format!(
                    "set-property --runtime virtwork-cpu.service CPUQuota={}%\n",
                    (5 + 10) * online_cpus()
                )
            );
        }
    }
}

/// The cpu level script: a level whose cap (10 points above it) reaches 100 % lifts the
/// unit's quota (an empty `CPUQuota=`), and a cap systemd refuses ends the script before any
/// load runs, so the unit restarts instead of running without it.
#[test]
fn cpu_level_script_lifts_the_cap_at_high_levels_and_fails_when_systemd_refuses_it() {
    if !have("timeout") {
        return;
    }
    let rendered = rendered_files("cpu", &[]);
    let script = &rendered["/usr/local/bin/virtwork-cpu-at-level"].content;
    let dir = tempfile::tempdir().unwrap();
    // A stand-in stress-ng records what the script execs and returns at once: the cap is what
    // is judged here (stress_ng_command_lines_run runs the real one), and no deadline races a
    // loaded machine.
    let load_calls = dir.path().join("stress-ng.calls");
    let stand_in = dir.path().join("stress-ng");
    executable(
        &stand_in,
        &format!("#!/bin/sh\necho \"$*\" >> '{}'\n", load_calls.display()),
    );
    assert!(script.contains("exec /usr/bin/stress-ng "), "{script}");
    let path = dir.path().join("level");
    executable(
        &path,
        &script.replace(
            "exec /usr/bin/stress-ng ",
            &format!("exec {} ", stand_in.display()),
        ),
    );
    let run_level = |level: &str| {
        fs::write(&load_calls, "").unwrap();
        // Hang guard only.
        let out = Command::new("timeout")
            .arg("60")
            .arg(&path)
            .arg(level)
            .env("PATH", path_with(dir.path()))
            .output()
            .unwrap();
        (out, fs::read_to_string(&load_calls).unwrap())
    };
    for (level, cap) in [
        ("100", String::new()),
        ("90", String::new()),
        ("89", format!("{}%", 99 * online_cpus())),
    ] {
        let calls = systemctl_stand_in(dir.path(), 0);
        let (out, load) = run_level(level);
        assert_eq!(out.status.code(), Some(0), "{level}: {out:?}");
        assert_eq!(
            fs::read_to_string(&calls).unwrap(),
            format!("set-property --runtime virtwork-cpu.service CPUQuota={cap}\n"),
            "{level}"
        );
        assert!(
            load.contains(&format!("--cpu-load {level} ")),
            "{level}: {load}"
        );
    }
    // Refused: the script ends with systemctl's status and never starts the load.
    systemctl_stand_in(dir.path(), 1);
    let (out, load) = run_level("10");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(load, "", "no load after a refused cap");
}

/// Writes a `systemctl` into `dir` that appends its arguments to `dir/systemctl.calls` and
/// exits `code`; returns the calls file (emptied).
fn systemctl_stand_in(dir: &Path, code: i32) -> PathBuf {
    let calls = dir.join("systemctl.calls");
    fs::write(&calls, "").unwrap();
    let stand_in = dir.join("systemctl");
    executable(
        &stand_in,
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexit {code}\n",
            calls.display()
        ),
    );
    calls
}

/// `dir` first, then this process's PATH.
fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// What `nproc` says: the online CPUs the script multiplies the level by.
fn online_cpus() -> u32 {
    let out = Command::new("nproc").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The catalog sysbench entry's level script, as rendered: sysbench 1.0 takes `--time=0` and
/// `--rate`, keeps running at a level the threads can compute, and stops with an error at one
/// they cannot (the driver then ends and the unit restarts, as docs/workloads.md says).
#[test]
fn profiled_sysbench_level_script_runs_sysbench_at_the_rate() {
    if !have("sysbench") || !have("timeout") {
        return;
    }
    let registry = Registry::with_catalog(&catalog_dir(), &["sysbench".into()]).unwrap();
    let w = registry
        .create(
            "sysbench",
            &settings(&[("profile", "step"), ("threads", "1")]),
            &options(false),
        )
        .unwrap();
    let script = files(&w.userdata(None).unwrap())
        .into_iter()
        .find(|f| f.path == "/usr/local/bin/virtwork-sysbench-at-level")
        .expect("level script")
        .content;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("level");
    executable(&path, &script);
    // A small rate: still running after 3 s (timeout's 124), throttled to the level.
    let out = Command::new("timeout")
        .arg("3")
        .arg(&path)
        .arg("20")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(124), "{stdout}");
    assert!(
        stdout.contains("Number of threads: 1")
            && stdout.contains("Target transaction rate: 20/sec"),
        "{stdout}"
    );
    // A rate no thread can compute: the event queue fills within a second and sysbench fails.
    let out = Command::new("timeout")
        .arg("30")
        .arg(&path)
        .arg("1000000")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("The event queue is full"), "{text}");
}

#[test]
fn profiled_disk_level_script_writes_rate_limited_job_files() {
    if !have("fio") {
        return;
    }
    let rendered = rendered_files("disk", &[("profile", "step"), ("numjobs", "3")]);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    for job in ["/etc/fio/mixed-rw.fio", "/etc/fio/seq-write.fio"] {
        fs::write(
            dir.path().join(Path::new(job).file_name().unwrap()),
            &rendered[job].content,
        )
        .unwrap();
    }
    // The rendered script with its paths moved into the temporary directory; the mount guard
    // (absent here) then stops it right after it wrote the job files.
    let script = rendered["/usr/local/bin/virtwork-disk-at-level"]
        .content
        .replace("/etc/fio/", &format!("{root}/"))
        .replace("/run/virtwork-disk-jobs", &format!("{root}/rated"))
        .replace(
            "/usr/local/bin/virtwork-require-mount",
            &format!("{root}/no-such-guard"),
        );
    let path = dir.path().join("level");
    executable(&path, &script);
    let (ok, out) = run(Command::new(&path).arg("1000"));
    assert!(!ok && out.contains("no-such-guard"), "{out}");
    // The mixed job's share, split 70/30 (rwmixread's default) into reads and writes: fio
    // would apply one value to each direction.
    for (job, rate) in [
        ("mixed-rw.fio", "rate_iops=233,100"),
        ("seq-write.fio", "rate_iops=500"),
    ] {
        let file = dir.path().join("rated").join(job);
        let text = fs::read_to_string(&file).unwrap();
        assert!(text.ends_with(&format!("{rate}\n")), "{text}");
        let (ok, out) = run(Command::new("fio").arg("--parse-only").arg(&file));
        assert!(ok, "{job}: {out}");
    }
    // A level below the number of processes still lets each one do I/O.
    let (_, _) = run(Command::new(&path).arg("2"));
    let text = fs::read_to_string(dir.path().join("rated/mixed-rw.fio")).unwrap();
    assert!(text.ends_with("rate_iops=1,1\n"), "{text}");
}

/// The driver's first level line says the profile's clock has just started (0 or 1 s).
fn fresh_clock(out: &str) -> bool {
    out.contains("level 40 at 0 s of the profile") || out.contains("level 40 at 1 s of the profile")
}

/// A value of `min..=max` with an 8 or a 9 in it (bad octal to bash), else the smallest.
fn octal_trap(min: i64, max: i64) -> i64 {
    [8, 9, 18, 80, 90, 800, 8_000]
        .into_iter()
        .find(|v| (min..=max).contains(v))
        .unwrap_or(min)
}

/// Every integer param of every built-in and shipped catalog workload, given with leading
/// zeros (`08`, `0080`), reaches the guest in canonical decimal: no rendered file holds the
/// zero-padded spelling, where guest bash would read it as (bad) octal and the unit would
/// restart for ever or, for `010`, silently run with 8. Profiled workloads are checked with a
/// profile too, so their level scripts are covered.
#[test]
fn integer_params_reach_the_guest_in_canonical_decimal() {
    use virtwork::workloads::params::ParamType;
    let names: Vec<String> = fs::read_dir(catalog_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let registry = Registry::with_catalog(&catalog_dir(), &names).unwrap();
    let mut checked = 0;
    for workload in registry.names() {
        let schema = registry.schema(workload).unwrap();
        let shapes: &[&[(&str, &str)]] = if schema.get("profile").is_some() {
            &[&[], &[("profile", "step")]]
        } else {
            &[&[]]
        };
        for shape in shapes {
            for def in schema.defs() {
                let ParamType::Int { min, max } = def.kind else {
                    continue;
                };
                if def.key.starts_with("profile") && shape.is_empty() {
                    continue;
                }
                let value = octal_trap(min.max(0), max);
                let canonical = value.to_string();
                let padded = format!("00{canonical}");
                let with = |v: &str| {
                    let mut params = shape.to_vec();
                    params.push((def.key.as_str(), v));
                    registry.create(workload, &settings(&params), &options(false))
                };
                // A value another param's rule forbids is not this test's business.
                if with(&canonical).is_err() {
                    continue;
                }
                let rendered = with(&padded)
                    .unwrap_or_else(|e| panic!("{workload} {}={padded}: {e}", def.key))
                    .userdata(None)
                    .unwrap();
                for file in files(&rendered) {
                    let tokens = file
                        .content
                        .split(|c: char| !c.is_ascii_alphanumeric())
                        .any(|t| t == padded);
                    assert!(
                        !tokens,
                        "{workload} {shape:?}: {}={padded} reached {} as written:\n{}",
                        def.key, file.path, file.content
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} integer params checked");
}

/// `wait` as bash 4.4 (RHEL 8 family) and 5.0 (Debian 10, Ubuntu 20.04) have it, loaded into
/// the driver through BASH_ENV: `-n` without `-p` (5.1+), which is an invalid option there,
/// and `wait -n` waits for any job, ignoring the ids it is given (5.1 added waiting for one
/// of the given ids).
const BASH_44_WAIT: &str = r#"wait() {
  local arg
  case "${1:-}" in
    -n)
      shift
      for arg in "$@"; do
        case "$arg" in
          -*) echo "bash: wait: ${arg}: invalid option" >&2
              echo "wait: usage: wait [-n] [id ...]" >&2
              return 2 ;;
        esac
      done
      builtin wait -n ;;
    -*) echo "bash: wait: ${1}: invalid option" >&2
        echo "wait: usage: wait [-n] [id ...]" >&2
        return 2 ;;
    *) builtin wait "$@" ;;
  esac
}
"#;

/// The driver as rendered, in `dir`, run with bash 4.4/5.0's `wait` when `old_bash`.
fn driver_in(dir: &Path, old_bash: bool) -> Command {
    let rendered = rendered_files("cpu", &[("profile", "step")]);
    let driver = dir.join("driver");
    executable(
        &driver,
        &rendered["/usr/local/bin/virtwork-load-driver"].content,
    );
    let mut cmd = Command::new(driver);
    if old_bash {
        let shim = dir.join("bash44-wait.sh");
        fs::write(&shim, BASH_44_WAIT).unwrap();
        cmd.env("BASH_ENV", shim);
    }
    cmd
}

/// Pids whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> usize {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let stat = fs::read_to_string(e.ok()?.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().nth(1)?.parse::<u32>().ok()
        })
        .filter(|&ppid| ppid == pid)
        .count()
}

/// With bash 4.4/5.0's `wait` the driver still follows the schedule (7, 3, 7) with a nap and
/// one load process at a time, instead of looping on a refused `wait -p` and forking a
/// `sleep` each round (1,213 processes in 2 s), and it still ends with the load's status when
/// the load ends. The same checks run with this machine's bash.
#[test]
fn load_driver_works_with_the_wait_of_bash_4_4_and_5_0() {
    if !have("bash") || !have("setsid") || !have("timeout") {
        return;
    }
    for old_bash in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let level = dir.path().join("level");
        executable(&level, RECORDING_LEVEL);
        let schedule = dir.path().join("schedule");
        fs::write(&schedule, "repeat 3\n0 7\n2 3\n").unwrap();
        let start_file = dir.path().join("start");
        let mut child = driver_in(dir.path(), old_bash)
            .args([&schedule, &start_file, &level])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Three levels take 4 s by the schedule; a loaded machine gets 30 (the loop ends as
        // soon as they are seen).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut most_children = 0;
        while level_log(dir.path())
            .iter()
            .filter(|l| l.starts_with("start"))
            .count()
            < 3
            && std::time::Instant::now() < deadline
            && child.try_wait().unwrap().is_none()
        {
            most_children = most_children.max(children_of(child.id()));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let events: Vec<String> = level_log(dir.path())
            .iter()
            .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
            .collect();
        assert!(
            events.len() >= 5
                && events[..5] == ["start 7", "stop 7", "start 3", "stop 3", "start 7"],
            "old bash {old_bash}: {events:?}\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        // The nap, the load, and a `kill`/`date` in passing.
        assert!(
            most_children <= 4,
            "old bash {old_bash}: {most_children} children at once\n{stderr}"
        );
        assert!(!stderr.contains("invalid option"), "{stderr}");

        // The load ending by itself ends the driver with its status.
        let failing = dir.path().join("failing");
        executable(&failing, "#!/bin/bash\nsleep 0.5\nexit 3\n");
        let once = dir.path().join("once");
        fs::write(&once, "repeat 0\n0 40\n").unwrap();
        let (ok, out) = run(Command::new("timeout")
            .arg("20")
            .arg(dir.path().join("driver"))
            .args([&once, &start_file, &failing])
            .envs(old_bash.then(|| ("BASH_ENV", dir.path().join("bash44-wait.sh")))));
        assert!(!ok, "{out}");
        assert!(
            out.contains("ERROR: the load process (level 40) exited with status 3"),
            "old bash {old_bash}: {out}"
        );
    }
}

/// The profile clock's start file is read as decimal (`0<digits>` with an 8 in it resumes
/// where it says instead of failing as bad octal); a start in the future, one before the
/// guest's first boot and one bash cannot hold are replaced by a fresh start, each with a
/// log line; a new start is synced before it is renamed into place.
#[test]
fn load_driver_reads_its_clock_as_decimal_and_replaces_an_impossible_start() {
    if !have("bash") || !have("setsid") || !have("timeout") || !have("sync") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let failing = dir.path().join("failing");
    executable(&failing, "#!/bin/bash\nsleep 0.3\nexit 3\n");
    let schedule = dir.path().join("schedule");
    fs::write(&schedule, "repeat 0\n0 40\n").unwrap();
    let start_file = dir.path().join("state/start");
    fs::create_dir_all(start_file.parent().unwrap()).unwrap();
    // `sync` and `mv` that log their arguments, then do the real thing.
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let calls = dir.path().join("calls.log");
    for tool in ["sync", "mv"] {
        let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap();
        executable(
            &bin.join(tool),
            &format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}'\nexec '{}' \"$@\"\n",
                calls.display(),
                real.display()
            ),
        );
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let drive = || {
        run(Command::new("timeout")
            .arg("20")
            .arg(dir.path().join("driver"))
            .args([&schedule, &start_file, &failing])
            .env("PATH", &path))
    };
    driver_in(dir.path(), false);

    // Leading zeros, and a digit octal does not have: still 5 s into the profile.
    let mut five_ago = now_secs() - 5;
    while !five_ago.to_string().contains(['8', '9']) {
        five_ago -= 1;
    }
    let spelled = format!("00{five_ago}\n");
    fs::write(&start_file, &spelled).unwrap();
    let elapsed = now_secs() - five_ago;
    let (_, out) = drive();
    assert!(
        (elapsed..=elapsed + 2).any(|s| out.contains(&format!("level 40 at {s} s of the profile"))),
        "{elapsed}: {out}"
    );
    assert!(!out.contains("profile clock:"), "{out}");
    assert_eq!(fs::read_to_string(&start_file).unwrap(), spelled, "kept");

    for (start, says) in [
        ((now_secs() + 3_600).to_string(), "is in the future"),
        ("0000000042".to_string(), "is before the guest's first boot"),
        ("9".repeat(40), "is not a time"),
    ] {
        fs::write(&start_file, format!("{start}\n")).unwrap();
        let _ = fs::remove_file(&calls);
        let before = now_secs();
        let (_, out) = drive();
        assert!(
            out.contains(&format!(
                "profile clock: start {}",
                &start[..start.len().min(24)]
            )) && out.contains(says)
                && out.contains("starting the clock again"),
            "{start}: {out}"
        );
        assert!(fresh_clock(&out), "{start}: {out}");
        let written: u64 = fs::read_to_string(&start_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            (before..=now_secs()).contains(&written),
            "{start}: {written}"
        );
        let log = fs::read_to_string(&calls).unwrap();
        let new = format!("{}.new", start_file.display());
        let sync = log.find(&format!("sync {new}"));
        let mv = log.find(&format!("mv {new} {}", start_file.display()));
        assert!(
            matches!((sync, mv), (Some(s), Some(m)) if s < m),
            "the new start must be synced before the rename:\n{log}"
        );
    }
}
