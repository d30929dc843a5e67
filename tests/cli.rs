//! The real binary's command-line contract: bad input of every kind exits 2 with exactly one
//! stderr line naming the input, help renders for every subcommand, completions and the man
//! page generate, `version` has the reference's shape, bare `virtwork` prints help.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_virtwork");

/// Runs the binary with a clean environment (plus `extra_env`) in `dir`.
fn virtwork(dir: &Path, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in extra_env {
        command.env(name, value);
    }
    command.output().expect("run virtwork")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One bad input: arguments, environment, files to create first, and what the single error
/// line must contain (the offending input and, where useful, the accepted form).
struct Bad {
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    files: Vec<(&'static str, String)>,
    expect: Vec<String>,
}

fn bad(args: &[&str], expect: &[&str]) -> Bad {
    Bad {
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        files: Vec::new(),
        expect: expect.iter().map(|s| s.to_string()).collect(),
    }
}

fn bad_env(name: &'static str, value: &str, expect: &[&str]) -> Bad {
    Bad {
        env: vec![(name, value.to_string())],
        ..bad(&["run"], expect)
    }
}

/// A YAML config file named `virtwork.yaml` passed with `--config`.
fn bad_yaml(content: &str, expect: &[&str]) -> Bad {
    Bad {
        files: vec![("virtwork.yaml", content.to_string())],
        ..bad(&["run", "--config", "virtwork.yaml"], expect)
    }
}

fn cases() -> Vec<Bad> {
    vec![
        // Flags.
        bad(&["run", "--cpu-cores", "0"], &["--cpu-cores", "at least 1"]),
        bad(&["run", "--cpu-cores", "two"], &["--cpu-cores", "\"two\""]),
        bad(
            &["run", "--vm-count=-1"],
            &["--vm-count", "from 1 to 10000"],
        ),
        bad(
            &["run", "--vm-count", "4000000000"],
            &["--vm-count", "from 1 to 10000"],
        ),
        bad(
            &["run", "--memory", "2GB"],
            &["--memory", "Kubernetes quantity"],
        ),
        bad(&["run", "--memory", "0"], &["--memory", "positive"]),
        // Bounded to what Kubernetes can represent (2^63-1), with the same one-line error.
        bad(
            &["run", "--memory", "1e999"],
            &[
                r#"invalid value "1e999" for --memory: expected a positive Kubernetes quantity"#,
                "largest value Kubernetes can represent",
            ],
        ),
        bad(
            &["run", "--disk-size", "99999999999999999999Ei"],
            &[
                "--disk-size",
                "positive Kubernetes quantity",
                "largest value",
            ],
        ),
        bad(&["run", "--memory", "8Ei"], &["--memory", "largest value"]),
        bad(
            &["run", "--memory", "9223372036854775808"],
            &["--memory", "largest value"],
        ),
        bad(
            &["run", "--disk-size", "lots"],
            &["--disk-size", "quantity"],
        ),
        bad(
            &["run", "--data-disk-size=-5Gi"],
            &["disk-size", "positive"],
        ),
        bad(
            &["run", "--namespace", "Bad_NS"],
            &["--namespace", "DNS-1123"],
        ),
        bad(&["run", "--namespace", ""], &["--namespace", "DNS-1123"]),
        bad(&["run", "--timeout", "0"], &["--timeout", "at least 1"]),
        bad(
            &["run", "--timeout", "18446744073709551615"],
            &["--timeout", "7 days"],
        ),
        bad(&["run", "--timeout", "soon"], &["--timeout", "seconds"]),
        bad(&["run", "--qps", "0"], &["--qps", "from 1 to"]),
        bad(&["run", "--qps", "1e300"], &["--qps", "from 1 to"]),
        bad(&["run", "--burst", "many"], &["--burst", "whole number"]),
        bad(
            &["run", "--vm-concurrency", "0"],
            &["--vm-concurrency", "from 1 to 1000"],
        ),
        bad(
            &["run", "--container-disk-image", ""],
            &["--container-disk-image", "image"],
        ),
        bad(
            &["run", "--ssh-user", "Bad User"],
            &["--ssh-user", "Linux user name"],
        ),
        bad(
            &["run", "--ssh-key", "not-a-key"],
            &["--ssh-key", "<type> <base64>"],
        ),
        bad(
            &["run", "--ssh-user", "", "--ssh-password", "pw"],
            &["--ssh-user"],
        ),
        bad(
            &["run", "--workloads", "cpux,bogus"],
            &[
                "--workloads",
                r#"unknown workload(s): "cpux" (did you mean "cpu"?), "bogus"; available: chaos-disk, chaos-network, chaos-process, cpu, database, disk, memory, network, tps; workload not found"#,
            ],
        ),
        bad(
            &["run", "--workloads", "cpu,cpu"],
            &["--workloads", "\"cpu\" is listed twice"],
        ),
        bad(
            &["run", "--workloads", ""],
            &["no workloads specified", "--workloads"],
        ),
        bad(
            &["run", "--from-catalog", "../etc"],
            &["--from-catalog", "\"../etc\""],
        ),
        bad(
            &["run", "--log-format", "xml"],
            &["--log-format", "text, json"],
        ),
        bad(
            &["run", "--dry-run=maybe"],
            &["--dry-run", "client, server"],
        ),
        bad(&["run", "--frobnicate"], &["--frobnicate"]),
        bad(&["frobnicate"], &["frobnicate"]),
        bad(
            &["run", "--config", "missing.yaml"],
            &["--config", "missing.yaml", "no such file"],
        ),
        bad(
            &["run", "--config", "settings.toml"],
            &["--config", "settings.toml", "YAML"],
        ),
        bad(&["cleanup", "--run-id", "1234"], &["--run-id", "UUID"]),
        bad(
            &["cleanup", "--wait", "--timeout", "0"],
            &["--timeout", "at least 1"],
        ),
        bad(&["status", "--run-id", "latest"], &["--run-id", "UUID"]),
        bad(&["audit", "show", "nope"], &["audit show", "UUID"]),
        bad(&["audit", "list", "--limit", "lots"], &["--limit", "lots"]),
        // Environment.
        bad_env(
            "VIRTWORK_CPU_CORES",
            "abc",
            &["VIRTWORK_CPU_CORES", "\"abc\""],
        ),
        bad_env(
            "VIRTWORK_VM_COUNT",
            "0x10",
            &["VIRTWORK_VM_COUNT", "whole number"],
        ),
        bad_env(
            "VIRTWORK_AUDIT",
            "maybe",
            &["VIRTWORK_AUDIT", "true or false"],
        ),
        bad_env(
            "VIRTWORK_VERBOSE",
            "sometimes",
            &["VIRTWORK_VERBOSE", "true or false"],
        ),
        bad_env(
            "VIRTWORK_WAIT_FOR_READY",
            "nah",
            &["VIRTWORK_WAIT_FOR_READY", "true or false"],
        ),
        bad_env(
            "VIRTWORK_DRY_RUN",
            "perhaps",
            &["VIRTWORK_DRY_RUN", "client, server"],
        ),
        bad_env("VIRTWORK_MEMORY", "2 Gi", &["VIRTWORK_MEMORY", "quantity"]),
        bad_env(
            "VIRTWORK_MEMORY",
            "1e999",
            &["VIRTWORK_MEMORY", "largest value Kubernetes can represent"],
        ),
        bad_env(
            "VIRTWORK_DATA_DISK_SIZE",
            "0",
            &["VIRTWORK_DATA_DISK_SIZE", "positive"],
        ),
        bad_env(
            "VIRTWORK_NAMESPACE",
            "UPPER",
            &["VIRTWORK_NAMESPACE", "DNS-1123"],
        ),
        bad_env(
            "VIRTWORK_QPS",
            "fast",
            &["VIRTWORK_QPS", "requests per second"],
        ),
        bad_env(
            "VIRTWORK_WORKLOADS",
            "cpu,nope",
            &["VIRTWORK_WORKLOADS", "\"nope\""],
        ),
        bad_env(
            "VIRTWORK_FROM_CATALOG",
            "a,a",
            &["VIRTWORK_FROM_CATALOG", "listed twice"],
        ),
        bad_env(
            "VIRTWORK_LOG_FORMAT",
            "xml",
            &["VIRTWORK_LOG_FORMAT", "text, json"],
        ),
        bad_env(
            "VIRTWORK_OUTPUT",
            "yaml",
            &["VIRTWORK_OUTPUT", "text, json"],
        ),
        bad_env(
            "VIRTWORK_READY_CONDITION",
            "up",
            &["VIRTWORK_READY_CONDITION", "agent-connected"],
        ),
        bad_env(
            "VIRTWORK_SSH_AUTHORIZED_KEYS",
            "garbage",
            &["VIRTWORK_SSH_AUTHORIZED_KEYS"],
        ),
        bad_env("VIRTWORK_SSH_USER", "root user", &["VIRTWORK_SSH_USER"]),
        bad_env(
            "VIRTWORK_PARAMS",
            "nodot",
            &[
                r#"parsing VIRTWORK_PARAMS: missing workload prefix (expected workload.key=value): "nodot""#,
            ],
        ),
        // YAML.
        bad_yaml(
            "cpu_core: 2\n",
            &[
                "virtwork.yaml",
                "unknown key \"cpu_core\"",
                "did you mean \"cpu-cores\"",
            ],
        ),
        bad_yaml(
            "workloads:\n  cpu:\n    vmcount: 2\n",
            &[
                "virtwork.yaml",
                "workloads.cpu.vmcount",
                "did you mean \"vm-count\"",
            ],
        ),
        bad_yaml("memory: 2GB\n", &["memory in virtwork.yaml", "quantity"]),
        bad_yaml(
            "disk_size: 99999999999999999999Ei\n",
            &["disk_size in virtwork.yaml", "largest value"],
        ),
        bad_yaml(
            "workloads:\n  cpu:\n    memory: 1e999\n",
            &["workloads.cpu.memory in virtwork.yaml", "largest value"],
        ),
        bad_yaml(
            "cpu_cores: two\n",
            &["cpu_cores in virtwork.yaml", "whole number"],
        ),
        bad_yaml(
            "namespace: [a\n",
            &["virtwork.yaml", "not valid YAML", "line 2"],
        ),
        bad_yaml("- a\n- b\n", &["virtwork.yaml", "mapping"]),
        bad_yaml(
            "cpu-cores: 2\ncpu_cores: 3\n",
            &["virtwork.yaml", "repeats"],
        ),
        bad_yaml(
            "workloads: [cpu]\n",
            &["workloads in virtwork.yaml", "mapping"],
        ),
        bad_yaml(
            "workloads:\n  cpu:\n    memory: -1Gi\n",
            &["workloads.cpu.memory in virtwork.yaml", "positive"],
        ),
        bad_yaml(
            "workloads:\n  cpu:\n    enabled: sometimes\n",
            &["workloads.cpu.enabled in virtwork.yaml", "true or false"],
        ),
        bad_yaml(
            "timeout: {a: 1}\n",
            &["timeout in virtwork.yaml", "mapping"],
        ),
        bad_yaml(
            "params: cpu.x=1\n",
            &["virtwork.yaml", "workloads.<name>.params"],
        ),
        bad_yaml(
            "dry-run: later\n",
            &["dry-run in virtwork.yaml", "client, server"],
        ),
        // Key files.
        Bad {
            files: vec![("id.pub", "this is not a key\n".into())],
            ..bad(
                &["run", "--ssh-key-file", "id.pub"],
                &["--ssh-key-file id.pub line 1"],
            )
        },
        Bad {
            files: vec![(
                "id",
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n"
                    .into(),
            )],
            ..bad(
                &["run", "--ssh-key-file", "id"],
                &["--ssh-key-file id", "private key"],
            )
        },
        bad(
            &["run", "--ssh-key-file", "absent.pub"],
            &["--ssh-key-file absent.pub", "no such file"],
        ),
        // Params: the reference's exact texts.
        bad(
            &["run", "--params", "cpu"],
            &[r#"parsing --params: missing workload prefix (expected workload.key=value): "cpu""#],
        ),
        bad(
            &["run", "--params", ".load=1"],
            &[r#"parsing --params: empty workload name in ".load=1""#],
        ),
        bad(
            &["run", "--params", "cpu.load"],
            &[
                r#"parsing --params: missing '=' in param (expected workload.key=value): "cpu.load""#,
            ],
        ),
        bad(
            &["run", "--params", "cpu.=1"],
            &[r#"parsing --params: empty param key in "cpu.=1""#],
        ),
    ]
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_input() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for case in &cases {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in &case.files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = virtwork(dir.path(), &args, &env);
        let stderr = text(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let ok = out.status.code() == Some(2)
            && out.stdout.is_empty()
            && lines.len() == 1
            && lines[0].starts_with("Error: ")
            && case.expect.iter().all(|e| lines[0].contains(e.as_str()));
        if !ok {
            failures.push(format!(
                "args {:?} env {:?}: exit {:?}, stderr {stderr:?}, expected to contain {:?}",
                case.args,
                case.env,
                out.status.code(),
                case.expect
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn params_errors_are_exactly_the_reference_lines() {
    let dir = tempfile::tempdir().unwrap();
    for (params, reference) in [
        (
            "nodot",
            r#"missing workload prefix (expected workload.key=value): "nodot""#,
        ),
        (" .k=v ", r#"empty workload name in ".k=v""#),
        (
            "cpu.k",
            r#"missing '=' in param (expected workload.key=value): "cpu.k""#,
        ),
        ("cpu.x=1, cpu.=v", r#"empty param key in "cpu.=v""#),
    ] {
        let out = virtwork(dir.path(), &["run", "--params", params], &[]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            text(&out.stderr),
            format!("Error: parsing --params: {reference}\n")
        );
    }
}

/// A realistic OpenSSH private key, as `"$(cat ~/.ssh/id_ed25519)"` pastes it.
const PRIVATE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB1L9RIvNE
VUxTveLruM0rfj0WAK1jHDhaXXzOI8d4VFmtvBtMkA/+SNV1tdpcY4BAEl9l2w/j4kSUt2
6phkV9mGCE/tCLl4r019GWp0RqhrWACeY2thHbFiEbZamq3/KcXlLZxQjFAjRzRNjAetkc
vWBor8df9ikvBioJyjgcieced7mprp4wsNvbb1EKJk753ngVAde2uSronrBZxat0PbZ1hu
mPrSfaC5lovAOaHvNMk5ubjlI6i++J1HhgjF7PbKNYdY9tJ+bPRScpN5d6dI/Yg5HbZ5zt
p9x78fAF7oeb7q13mUz1czQewXtYu/frNNJxHJk8HZdrEosxiNwYKaK0w0L1Qz6+WRodp3
4BPRtyR1Vi1IV43Ki4S6xmUcPLkBukcZyAtv6RGwkafAUSS2Tu7Olk4JwFjvj5gF2spUa+
fPRqB4/tT6/QteOv8USAK4U/iuRZpPDBSt0zFLfMOm
-----END OPENSSH PRIVATE KEY-----
";

/// Whether `text` shows any part of [`PRIVATE_KEY`] (its armour or any line of its body).
fn shows_key_material(text: &str) -> bool {
    PRIVATE_KEY.lines().any(|line| {
        let line = line.trim_matches('-');
        // Any 12-character window of a body line is enough to identify it.
        line.as_bytes()
            .windows(12)
            .any(|w| text.contains(std::str::from_utf8(w).unwrap()))
    }) || text.contains("BEGIN OPENSSH")
}

#[test]
fn a_pasted_private_key_is_never_echoed_from_any_source() {
    let unquoted: Vec<&str> = PRIVATE_KEY.split_whitespace().collect();
    let with = |flag: &'static str| [vec!["run", flag], unquoted.clone()].concat();
    let key_eq = format!("--ssh-key={PRIVATE_KEY}");
    let password_eq = format!("--ssh-password={PRIVATE_KEY}");
    let vm_count_eq = format!("--vm-count={PRIVATE_KEY}");
    let output_eq = format!("--output={PRIVATE_KEY}");
    let workloads_eq = format!("--workloads={PRIVATE_KEY}");
    let params_eq = format!("--params={PRIVATE_KEY}");
    let kubeconfig_eq = format!("--kubeconfig={PRIVATE_KEY}");
    let namespace_eq = format!("--namespace={PRIVATE_KEY}");
    let indented: String = PRIVATE_KEY.lines().map(|l| format!("  {l}\n")).collect();
    let yaml = |content: String, expect: &[&str]| Bad {
        files: vec![("virtwork.yaml", content)],
        ..bad(&["run", "--config", "virtwork.yaml"], expect)
    };
    let private_key_error = "holds a private key; give the public key";
    let cases = vec![
        bad(
            &["run", "--ssh-key", PRIVATE_KEY],
            &["--ssh-key", private_key_error],
        ),
        bad(&["run", &key_eq], &["--ssh-key", private_key_error]),
        bad(
            &[
                "run",
                "--workloads",
                "cpu",
                "--ssh-key",
                PRIVATE_KEY,
                "--no-wait",
            ],
            &["--ssh-key holds a private key"],
        ),
        // An unquoted `$(cat key)`: the shell splits the key into many arguments.
        bad(&with("--ssh-key"), &["<redacted>"]),
        bad(&["run", "--ssh-password", PRIVATE_KEY], &["<redacted>"]),
        bad(
            &["run", &password_eq],
            &["invalid value for --ssh-password"],
        ),
        bad(&with("--ssh-password"), &["<redacted>"]),
        bad(&["run", PRIVATE_KEY], &["<redacted>"]),
        bad_env(
            "VIRTWORK_SSH_AUTHORIZED_KEYS",
            PRIVATE_KEY,
            &["VIRTWORK_SSH_AUTHORIZED_KEYS", private_key_error],
        ),
        bad_env(
            "VIRTWORK_SSH_PASSWORD",
            PRIVATE_KEY,
            &["invalid value for VIRTWORK_SSH_PASSWORD"],
        ),
        yaml(
            format!("ssh-authorized-keys:\n- |\n{indented}"),
            &["ssh-authorized-keys in virtwork.yaml", private_key_error],
        ),
        yaml(
            format!("ssh-password: |\n{indented}"),
            &["invalid value for ssh-password in virtwork.yaml"],
        ),
        // Pasted into any other input: `--vm-count="$(cat key)"`, any VIRTWORK_* variable,
        // any YAML key, a flag with a fixed set of choices.
        bad(
            &["run", &vm_count_eq],
            &["invalid value <redacted> for --vm-count"],
        ),
        bad(&["run", "--vm-count", PRIVATE_KEY], &["<redacted>"]),
        bad(
            &["run", "--dry-run", &output_eq],
            &["invalid value for --output: expected one of"],
        ),
        bad(&["run", &namespace_eq], &["--namespace"]),
        bad_env(
            "VIRTWORK_VM_COUNT",
            PRIVATE_KEY,
            &["invalid value <redacted> for VIRTWORK_VM_COUNT"],
        ),
        bad_env("VIRTWORK_MEMORY", PRIVATE_KEY, &["VIRTWORK_MEMORY"]),
        // Inputs whose errors quote them in their own words: lists, params, paths.
        bad_env("VIRTWORK_WORKLOADS", PRIVATE_KEY, &["VIRTWORK_WORKLOADS"]),
        bad_env("VIRTWORK_PARAMS", PRIVATE_KEY, &["VIRTWORK_PARAMS"]),
        bad(&["run", &workloads_eq], &["<redacted>"]),
        bad(&["run", &params_eq], &["<redacted>"]),
        bad(&[&kubeconfig_eq, "status"], &["<redacted>"]),
        yaml(
            format!("memory: |\n{indented}"),
            &["invalid value <redacted> for memory in virtwork.yaml"],
        ),
    ];
    let mut failures = Vec::new();
    for case in &cases {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in &case.files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = virtwork(dir.path(), &args, &env);
        let stderr = text(&out.stderr);
        let ok = out.status.code() == Some(2)
            && out.stdout.is_empty()
            && stderr.lines().count() == 1
            && stderr.starts_with("Error: ")
            && case.expect.iter().all(|e| stderr.contains(e.as_str()))
            && !shows_key_material(&stderr);
        if !ok {
            // The arguments hold the key: name the case by its first words only.
            let shown: Vec<&str> = args.iter().map(|a| &a[..a.len().min(16)]).collect();
            let vars: Vec<&str> = env.iter().map(|(k, _)| *k).collect();
            failures.push(format!(
                "{shown:?} env {vars:?}: exit {:?}, stderr {stderr:?}, expected {:?}",
                out.status.code(),
                case.expect
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_closed_stdout_pipe_exits_0_without_an_error() {
    // `virtwork run --dry-run | head -1`: read one line, then close the pipe while the dry
    // run still writes (the stream is far larger than a pipe buffer).
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["run", "--dry-run", "--no-audit", "--vm-count", "40"])
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run virtwork");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: the pipe is closed.
    assert!(!first.is_empty(), "the dry run wrote its first line");
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Error"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn valid_input_passes_config_loading() {
    // Good input gets past the configuration (the command itself may then need a cluster):
    // the exit code is never 2.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.yaml"),
        "namespace: ok\ncpu_cores: 2\nworkloads:\n  cpu:\n    params:\n      cpu-load-percent: 50\n",
    )
    .unwrap();
    let out = virtwork(
        dir.path(),
        &["audit", "--config", "ok.yaml", "list", "--limit", "1"],
        &[("VIRTWORK_AUDIT_DB", "audit.db")],
    );
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn bare_virtwork_prints_help_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(dir.path(), &[], &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("Usage: virtwork") && stdout.contains("cleanup"),
        "{stdout}"
    );
}

#[test]
fn help_renders_for_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for (args, must_mention) in [
        (vec!["--help"], "run"),
        (vec!["run", "--help"], "--workloads"),
        (vec!["run", "--help"], "--dry-run"),
        (vec!["run", "--help"], "--data-disk-size"),
        (vec!["cleanup", "--help"], "--delete-namespace"),
        (vec!["cleanup", "--help"], "--wait"),
        (vec!["validate", "--help"], "--catalog-dir"),
        (vec!["status", "--help"], "--run-id"),
        (vec!["audit", "--help"], "show"),
        (vec!["audit", "list", "--help"], "--limit"),
        (vec!["audit", "show", "--help"], "RUN_ID"),
        (vec!["version", "--help"], "version"),
        (vec!["completion", "--help"], "powershell"),
        (vec!["man", "--help"], "man page"),
        (vec!["help", "run"], "--vm-count"),
    ] {
        let out = virtwork(dir.path(), &args, &[]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(stdout.contains("Usage:"), "{args:?}: {stdout}");
        assert!(
            stdout.contains(must_mention),
            "{args:?} lacks {must_mention}: {stdout}"
        );
    }
}

#[test]
fn global_flags_appear_in_subcommand_help() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = text(&virtwork(dir.path(), &["cleanup", "--help"], &[]).stdout);
    for flag in [
        "--namespace",
        "--kubeconfig",
        "--config",
        "--no-audit",
        "--log-format",
        "--qps",
    ] {
        assert!(stdout.contains(flag), "cleanup --help lacks {flag}");
    }
}

#[test]
fn completions_generate_for_all_four_shells() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef virtwork"),
        ("fish", "complete -c virtwork"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = virtwork(dir.path(), &["completion", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(
            script.contains("--workloads") || script.contains("workloads"),
            "{shell}"
        );
        assert!(out.stderr.is_empty(), "{shell}");
    }
}

#[test]
fn man_page_renders_with_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(dir.path(), &["man"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    assert!(page.contains(".TH virtwork 1"), "{page}");
    for sub in [
        "virtwork\\-run",
        "virtwork\\-cleanup",
        "virtwork\\-status",
        "virtwork\\-audit",
    ] {
        assert!(page.contains(sub), "man page lacks {sub}");
    }
    assert!(page.contains("\\-\\-workloads"));
}

#[test]
fn version_has_the_reference_shape() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(dir.path(), &["version"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(
        lines[0],
        format!("virtwork version {}", env!("CARGO_PKG_VERSION"))
    );
    let commit = lines[1].strip_prefix("  commit: ").expect("commit line");
    assert!(
        commit == "(unknown)"
            || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    let built = lines[2].strip_prefix("  built:  ").expect("built line");
    assert!(!built.is_empty());
}

#[test]
fn json_logs_go_to_stderr_one_object_per_line_and_stdout_keeps_only_the_product() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(
        dir.path(),
        &["run", "--dry-run", "--workloads", "cpu", "--no-audit"],
        &[("VIRTWORK_LOG_FORMAT", "json")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(!stderr.is_empty(), "a dry run logs at least its mode");
    for line in stderr.lines() {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for key in ["time", "level", "msg"] {
            assert!(object.get(key).is_some(), "{key} missing: {line}");
        }
        assert!(line.starts_with("{\"time\":"), "{line}");
    }
    let stdout = text(&out.stdout);
    assert!(stdout.contains("kind: VirtualMachine"), "{stdout}");
    assert!(!stdout.contains("\"msg\""), "log line on stdout: {stdout}");
}

#[test]
fn text_logs_are_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(
        dir.path(),
        &["run", "--dry-run", "--workloads", "cpu", "--no-audit"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("INFO"), "{stderr}");
    assert!(!stderr.contains("\"msg\""), "{stderr}");
}
