//! Compatibility with the Go tool and the configuration keys added for it, through the real
//! binary: `--guest-os`, storage class and access mode, the Go tool's input spellings (boolean
//! flags with `=true|false`, signal numbers, `cleanup-mode`, space-separated lists), piped
//! cleanup confirmation, the cloud-init users section and the dry-run audit events. Cluster
//! behaviour is checked against the fake API server in tests/support.

mod support;

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
