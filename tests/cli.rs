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
        bad(
            &["cleanup", "--run-id", "1234"],
            &["--run-id", "first 6 hex digits"],
        ),
        bad(
            &["cleanup", "--wait", "--timeout", "0"],
            &["--timeout", "at least 1"],
        ),
        bad(
            &["status", "--run-id", "latest"],
            &["--run-id", "first 6 hex digits"],
        ),
        bad(
            &["audit", "show", "nope"],
            &["audit show", "first 6 hex digits"],
        ),
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
            "xml",
            &["VIRTWORK_OUTPUT", "text, wide, json, yaml"],
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

/// The shipped catalog.
const CATALOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/catalog");

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
        // A YAML key that is itself the key, at the top and inside a workload.
        yaml(format!("? |\n{indented}: 1\n"), &["virtwork.yaml"]),
        yaml(
            format!(
                "workloads:\n  cpu:\n    ? |\n  {}    : 1\n",
                indented.replace('\n', "\n  ")
            ),
            &["virtwork.yaml"],
        ),
        // A workload param in the YAML: an integer, a string with a rule, a param name.
        yaml(
            format!(
                "workloads:\n  disk:\n    params:\n      runtime: |\n{}",
                indented.replace("  ", "        ")
            ),
            &[
                "invalid params for workload \"disk\"",
                "\"runtime\"",
                "<redacted>",
            ],
        ),
        yaml(
            format!(
                "workloads:\n  chaos-network:\n    params:\n      target: |\n{}",
                indented.replace("  ", "        ")
            ),
            &[
                "invalid params for workload \"chaos-network\"",
                "<redacted>",
            ],
        ),
        yaml(
            format!(
                "workloads:\n  cpu:\n    params:\n      ? |\n{}      : 1\n",
                indented.replace("  ", "        ")
            ),
            &["invalid params for workload \"cpu\"", "<redacted>"],
        ),
        // A catalog entry's param, from the YAML and from --params.
        Bad {
            files: vec![(
                "virtwork.yaml",
                format!(
                    "from-catalog: [sysbench]\nworkloads:\n  sysbench:\n    params:\n      threads: |\n{}",
                    indented.replace("  ", "        ")
                ),
            )],
            ..bad(
                &["run", "--config", "virtwork.yaml", "--catalog-dir", CATALOG],
                &["invalid params for workload \"sysbench\"", "<redacted>"],
            )
        },
        bad(
            &[
                "run",
                "--catalog-dir",
                CATALOG,
                "--from-catalog",
                "sysbench",
                "--params",
                &format!("sysbench.threads={}", PRIVATE_KEY.replace('\n', " ")),
            ],
            &["<redacted>"],
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
    let title = page.lines().find(|l| l.starts_with(".TH ")).unwrap();
    assert!(
        title.contains(&format!("virtwork {}", env!("CARGO_PKG_VERSION"))),
        "the version belongs in .TH: {title}"
    );
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH COMMANDS",
    ] {
        assert!(page.contains(section), "man page lacks {section}");
    }
    for var in virtwork::config::env_keys().chain(["KUBECONFIG", "NO_COLOR"]) {
        assert!(page.contains(var), "ENVIRONMENT lacks {var}");
    }
    // One page holds everything: it must not send the reader to pages that are not installed.
    assert!(!page.contains("(1)"), "a reference to another page");
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

#[test]
fn version_flag_prints_what_the_version_command_prints() {
    let dir = tempfile::tempdir().unwrap();
    let command = virtwork(dir.path(), &["version"], &[]);
    let flag = virtwork(dir.path(), &["--version"], &[]);
    assert_eq!(flag.status.code(), Some(0), "{}", text(&flag.stderr));
    assert_eq!(text(&flag.stdout), text(&command.stdout));
}

#[test]
fn short_flags_follow_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let out = virtwork(
        dir.path(),
        &[
            "run",
            "--dry-run",
            "--no-audit",
            "--workloads",
            "cpu",
            "-n",
            "team-a",
            "-o",
            "json",
            "-v",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["namespace"], "team-a");
}

/// The lines of `help` that name a flag, in order.
fn flag_lines(help: &str) -> Vec<&str> {
    help.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .collect()
}

#[test]
fn help_shows_a_commands_own_flags_first_and_hides_flags_that_do_nothing_there() {
    let dir = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let out = virtwork(dir.path(), args, &[]);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        text(&out.stdout)
    };
    let cleanup = help(&["cleanup", "--help"]);
    let own = cleanup.find("--delete-namespace").unwrap();
    let heading = cleanup.find("Global options:").expect("a global heading");
    let global = cleanup.find("--namespace <NAME>").unwrap();
    assert!(own < heading && heading < global, "{cleanup}");
    assert!(cleanup.contains("--audit-db"), "cleanup records: {cleanup}");
    for command in ["status", "verify", "validate"] {
        let text = help(&[command, "--help"]);
        let flags = flag_lines(&text).join("\n");
        for inert in ["--no-audit", "--audit["] {
            assert!(!flags.contains(inert), "{command} offers {inert}:\n{flags}");
        }
        // status and verify read the database to resolve a --run-id prefix.
        assert_eq!(
            flags.contains("--audit-db"),
            command != "validate",
            "{command}:\n{flags}"
        );
    }
    let validate = flag_lines(&help(&["validate", "--help"])).join("\n");
    assert!(!validate.contains("--kubeconfig"), "{validate}");
    // Hidden, not refused: a wrapper passing the flag everywhere keeps working.
    let out = virtwork(
        dir.path(),
        &["--audit-db", "x.db", "validate", "--catalog-dir", "nowhere"],
        &[],
    );
    assert!(
        !text(&out.stderr).contains("unexpected argument"),
        "{}",
        text(&out.stderr)
    );
    // ... but not silently.
    let out = virtwork(
        dir.path(),
        &["status", "--no-audit", "--kubeconfig", "missing"],
        &[],
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--no-audit does nothing for `virtwork status`"),
        "{stderr}"
    );
    assert!(!stderr.contains("--kubeconfig does nothing"), "{stderr}");
    let bash = help(&["completion", "bash"]);
    let status_case = bash
        .split("virtwork__subcmd__status)")
        .nth(1)
        .and_then(|rest| rest.split(";;").next())
        .expect("a status case in the bash completion");
    assert!(!status_case.contains("--no-audit"), "{status_case}");
    assert!(status_case.contains("--run-id"), "{status_case}");
    let run_case = bash
        .split("virtwork__subcmd__run)")
        .nth(1)
        .and_then(|rest| rest.split("virtwork__subcmd__").next())
        .unwrap();
    let workloads = run_case.split("--workloads)").nth(1).unwrap();
    let workloads = &workloads[..workloads.find(";;").unwrap()];
    assert!(
        workloads.contains("cpu") && workloads.contains("chaos-network"),
        "--workloads completes the built-in names: {workloads}"
    );
}

#[test]
fn every_timeout_takes_seconds_or_a_duration() {
    let dir = tempfile::tempdir().unwrap();
    for timeout in ["600", "10m", "1h30m"] {
        let out = virtwork(
            dir.path(),
            &[
                "run",
                "--dry-run",
                "--no-audit",
                "--workloads",
                "cpu",
                "--timeout",
                timeout,
            ],
            &[],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{timeout}: {}",
            text(&out.stderr)
        );
    }
    let out = virtwork(
        dir.path(),
        &["run", "--dry-run", "--no-audit", "--workloads", "cpu"],
        &[("VIRTWORK_TIMEOUT", "5m")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Once a panic on an Instant overflow (exit 101); every command's --timeout is one type.
    for command in ["run", "cleanup", "status", "verify --wait"] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.extend(["--timeout", "18446744073709551615"]);
        let out = virtwork(dir.path(), &args, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("--timeout") && stderr.contains("10m"),
            "{stderr}"
        );
    }
    let out = virtwork(dir.path(), &["verify", "--wait", "--timeout", "0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("at least 1s"),
        "{}",
        text(&out.stderr)
    );
}

/// `run --dry-run` with `--color`/`NO_COLOR`; the stderr of the dry run's log lines.
fn dry_run_stderr(extra: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["run", "--dry-run", "--no-audit", "--workloads", "cpu"];
    args.extend_from_slice(extra);
    let out = virtwork(dir.path(), &args, env);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stderr)
}

#[test]
fn colour_follows_color_and_no_color() {
    let escape = '\u{1b}';
    assert!(!dry_run_stderr(&[], &[]).contains(escape), "not a terminal");
    assert!(dry_run_stderr(&["--color", "always"], &[]).contains(escape));
    assert!(dry_run_stderr(&["--color", "always"], &[("NO_COLOR", "1")]).contains(escape));
    assert!(!dry_run_stderr(&["--color", "never"], &[]).contains(escape));
    assert!(!dry_run_stderr(&["--color", "auto"], &[("NO_COLOR", "1")]).contains(escape));
}

#[test]
fn colour_on_a_terminal_unless_no_color() {
    // script(1) gives the binary a terminal on stderr.
    let Ok(script) = which("script") else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = |no_color: Option<&str>| {
        let mut command = Command::new(&script);
        command
            .args(["-qec"])
            .arg(format!(
                "{BIN} run --dry-run --no-audit --workloads cpu -o json >/dev/null"
            ))
            .arg("/dev/null")
            .current_dir(dir.path())
            .env_clear()
            .env("HOME", dir.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert!(run(None).contains('\u{1b}'), "a terminal gets colour");
    assert!(!run(Some("1")).contains('\u{1b}'), "NO_COLOR turns it off");
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or(())
}

#[test]
fn version_and_validate_write_documents() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["json", "yaml"] {
        let out = virtwork(dir.path(), &["version", "-o", format], &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let doc: serde_json::Value = serde_yaml::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["command"], "version", "{format}");
        assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    }
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
    let catalog = catalog.to_str().unwrap();
    let out = virtwork(
        dir.path(),
        &["validate", "--catalog-dir", catalog, "--output", "json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(doc["command"], "validate");
    assert_eq!(doc["failed"], 0);
    let entries = doc["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e["status"] != "fail"), "{doc}");
}

/// Every (subcommand path, base arguments) the hostile-value test drives; base arguments
/// satisfy required positionals so the flag under test reaches the command's own checks.
fn command_paths(command: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    let subcommands: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|sub| sub.get_name() != "help")
        .collect();
    if subcommands.is_empty() && !path.is_empty() {
        out.push(path.clone());
    }
    for sub in subcommands {
        let mut path = path.clone();
        path.push(sub.get_name().to_string());
        command_paths(sub, path, out);
    }
}

/// Values that once crashed, or could: huge and negative numbers, nothing, control
/// characters and escapes, a very long string, bytes that are not UTF-8.
fn hostile_values() -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let texts = [
        "18446744073709551615",
        "99999999999999999999999999999999999999h",
        "-1",
        "-9223372036854775808",
        "",
        "1e308",
        "NaN",
        "\u{1}\u{1b}[31m\u{7f}\r\n\t",
    ];
    let mut values: Vec<std::ffi::OsString> = texts.iter().map(Into::into).collect();
    values.push("x".repeat(100_000).into());
    values.push(std::ffi::OsString::from_vec(vec![0xff, 0xfe, b'a', 0x80]));
    values
}

/// The hostile invocations of one argument of `command`: each value as `--flag=value` (or
/// as the positional), or the switch alone.
fn hostile_invocations(
    base: &[String],
    required: &[String],
    arg: &clap::Arg,
) -> Vec<Vec<std::ffi::OsString>> {
    let base: Vec<std::ffi::OsString> = base.iter().map(Into::into).collect();
    let takes_value = !matches!(
        arg.get_action(),
        clap::ArgAction::SetTrue
            | clap::ArgAction::SetFalse
            | clap::ArgAction::Count
            | clap::ArgAction::Help
            | clap::ArgAction::HelpShort
            | clap::ArgAction::HelpLong
            | clap::ArgAction::Version
    );
    let with = |extra: Vec<std::ffi::OsString>| {
        let mut args = base.clone();
        args.extend(extra);
        args.extend(required.iter().map(Into::into));
        args
    };
    match (arg.get_long(), takes_value) {
        (Some(long), false) => vec![with(vec![format!("--{long}").into()])],
        (Some(long), true) => hostile_values()
            .into_iter()
            .map(|value| {
                let mut flag = std::ffi::OsString::from(format!("--{long}="));
                flag.push(value);
                with(vec![flag])
            })
            .collect(),
        (None, _) => hostile_values()
            .into_iter()
            .map(|value| {
                let mut args = base.clone();
                args.push(value);
                args
            })
            .collect(),
    }
}

/// Positionals a command requires, valid, so a hostile flag is judged by the command.
fn required_positionals(path: &[String]) -> Vec<String> {
    match path.join(" ").as_str() {
        "audit show" => vec!["0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f".into()],
        "completion" => vec!["bash".into()],
        _ => Vec::new(),
    }
}

#[test]
fn no_flag_value_crashes_any_command() {
    // The flag list comes from clap, so a new flag is covered without touching this test.
    let root = virtwork::cli::command();
    let mut paths = Vec::new();
    command_paths(&root, Vec::new(), &mut paths);
    let mut invocations = Vec::new();
    for path in &paths {
        let mut command = &root;
        for name in path {
            command = command.find_subcommand(name).unwrap();
        }
        let required = required_positionals(path);
        for arg in command.get_arguments() {
            invocations.extend(hostile_invocations(path, &required, arg));
        }
        for arg in root.get_arguments() {
            invocations.extend(hostile_invocations(path, &required, arg));
        }
    }
    assert!(invocations.len() > 500, "{} invocations", invocations.len());
    eprintln!("{} hostile invocations", invocations.len());
    let dir = tempfile::tempdir().unwrap();
    let crashes: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = invocations
            .chunks(invocations.len().div_ceil(4))
            .map(|chunk| {
                let dir = dir.path();
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|args| {
                            let started = std::time::Instant::now();
                            let out = Command::new(BIN)
                                .args(args)
                                .current_dir(dir)
                                .env_clear()
                                .env("HOME", dir)
                                .env("VIRTWORK_AUDIT_DB", dir.join("audit.db"))
                                .output()
                                .expect("run virtwork");
                            // A hang is a failure too: every one of these ends at once.
                            let slow = started.elapsed() > std::time::Duration::from_secs(20);
                            let crashed = slow
                                || out.status.code() == Some(101)
                                || out.status.code().is_none()
                                || text(&out.stderr).contains("panicked");
                            crashed.then(|| {
                                let shown: Vec<String> = args
                                    .iter()
                                    .map(|a| a.to_string_lossy().chars().take(60).collect())
                                    .collect();
                                format!("{shown:?}: {:?} {}", out.status, text(&out.stderr))
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        crashes.is_empty(),
        "{} crashes:\n{}",
        crashes.len(),
        crashes.join("\n")
    );
}
