//! The documentation cannot drift from the code.
//!
//! docs/configuration.md holds generated sections (every flag of every subcommand from the clap
//! definitions, every workload param from the registry's schemas) between
//! `<!-- BEGIN GENERATED name -->` / `<!-- END GENERATED name -->` markers; this test regenerates
//! them and fails on any difference. Regenerate with
//! `VIRTWORK_UPDATE_DOCS=1 cargo test --test integration docs::`. Also checked: every `VIRTWORK_*` variable the
//! configuration reads is documented, the documented YAML example is accepted by the real
//! binary, and every relative link and `src/` path named in docs/ exists; output-json.md's `command` list is
//! the set of commands that write a document and every such command has its section; the man
//! page's ENVIRONMENT names every variable the binary reads; the kubeconfig messages and the
//! refused-connection behaviour troubleshooting.md documents are what the binary does.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Arg, ArgAction, CommandFactory};
use virtwork::cli::Cli;
use virtwork::workloads::Registry;
use virtwork::workloads::params::{ParamType, StrRule};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn doc_path(name: &str) -> PathBuf {
    repo().join("docs").join(name)
}

fn read_doc(name: &str) -> String {
    fs::read_to_string(doc_path(name)).unwrap_or_else(|e| panic!("docs/{name}: {e}"))
}

/// Markdown-table-safe single line.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn arg_flag(arg: &Arg) -> String {
    match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("`-{s}`, `--{l}`"),
        (None, Some(l)) => format!("`--{l}`"),
        (Some(s), None) => format!("`-{s}`"),
        (None, None) => format!("`<{}>`", arg.get_id().as_str().to_ascii_uppercase()),
    }
}

fn arg_value(arg: &Arg) -> String {
    if matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count
    ) {
        return "—".into();
    }
    let name = arg
        .get_value_names()
        .and_then(|v| v.first())
        .map(|n| n.to_string())
        .unwrap_or_else(|| arg.get_id().as_str().to_ascii_uppercase());
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    if optional {
        format!("`[={name}]`")
    } else {
        format!("`{name}`")
    }
}

fn arg_help(arg: &Arg) -> String {
    let mut help = arg
        .get_long_help()
        .or_else(|| arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let is_switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(h) => format!("`{}` ({})", v.get_name(), h),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    if !values.is_empty() && !is_switch {
        help.push_str(&format!(" Values: {}.", values.join(", ")));
    }
    if let Some(default) = arg.get_default_values().first() {
        help.push_str(&format!(" [default: {}]", default.to_string_lossy()));
    }
    let aliases: Vec<String> = arg
        .get_visible_aliases()
        .unwrap_or_default()
        .iter()
        .chain(arg.get_all_aliases().unwrap_or_default().iter())
        .map(|a| format!("`--{a}`"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !aliases.is_empty() {
        help.push_str(&format!(" Alias: {}.", aliases.join(", ")));
    }
    cell(&help)
}

fn flag_table(args: &[&Arg]) -> String {
    let mut out = String::from("| Flag | Value | Meaning |\n|---|---|---|\n");
    for arg in args {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            arg_flag(arg),
            arg_value(arg),
            arg_help(arg)
        ));
    }
    out
}

/// Every flag of every subcommand, from the clap definitions.
fn generated_flags() -> String {
    let root = Cli::command();
    let is_help = |a: &&Arg| matches!(a.get_id().as_str(), "help" | "version");
    let globals: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter(|a| !is_help(a))
        .collect();
    let mut out = String::from("### Global flags (every subcommand)\n\n");
    out.push_str(&flag_table(&globals));
    let mut stack: Vec<(String, &clap::Command)> = root
        .get_subcommands()
        .map(|c| (format!("virtwork {}", c.get_name()), c))
        .collect();
    stack.reverse();
    while let Some((path, cmd)) = stack.pop() {
        if cmd.get_name() == "help" {
            continue;
        }
        let own: Vec<&Arg> = cmd
            .get_arguments()
            .filter(|a| !a.is_global_set())
            .filter(|a| !is_help(a))
            .collect();
        out.push_str(&format!("\n### `{path}`\n\n"));
        out.push_str(&cell(
            &cmd.get_about().map(|a| a.to_string()).unwrap_or_default(),
        ));
        out.push_str(".\n\n");
        if own.is_empty() {
            out.push_str("No flags of its own.\n");
        } else {
            out.push_str(&flag_table(&own));
        }
        let mut children: Vec<(String, &clap::Command)> = cmd
            .get_subcommands()
            .map(|c| (format!("{path} {}", c.get_name()), c))
            .collect();
        children.reverse();
        stack.extend(children);
    }
    out
}

fn rule_form(rule: StrRule) -> String {
    rule.describe()
}

fn param_type(kind: ParamType) -> (String, String) {
    match kind {
        ParamType::Int { min, max } => ("integer".into(), format!("{min} to {max}")),
        ParamType::Str(rule) => ("string".into(), rule_form(rule)),
        ParamType::Bool => ("boolean".into(), "`true` or `false`".into()),
        ParamType::List(rule) => (
            "list (`;`-separated)".into(),
            format!("each element: {}", rule_form(rule)),
        ),
        ParamType::Dict(rule) => (
            "dict (`;`-separated `key=value`)".into(),
            format!("each key and value: {}", rule_form(rule)),
        ),
    }
}

fn params_section(registry: &Registry, names: &[String]) -> String {
    let mut out = String::new();
    for name in names {
        let schema = registry.schema(name).unwrap();
        out.push_str(&format!("#### `{name}`\n\n"));
        if schema.is_empty() {
            out.push_str("No params.\n\n");
            continue;
        }
        out.push_str(
            "| Param | Type | Default | Accepted values | Meaning |\n|---|---|---|---|---|\n",
        );
        for def in schema.defs() {
            let (kind, accepted) = param_type(def.kind);
            out.push_str(&format!(
                "| `{}` | {} | `{}` | {} | {} |\n",
                def.key,
                kind,
                def.default,
                cell(&accepted),
                cell(&def.description)
            ));
        }
        out.push('\n');
    }
    out
}

/// Every param of every built-in and shipped catalog entry, from the registry's schemas.
fn generated_params() -> String {
    let catalog_dir = repo().join("catalog");
    let mut entries: Vec<String> = fs::read_dir(&catalog_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    let registry = Registry::with_catalog(&catalog_dir, &entries).unwrap();
    let builtins: Vec<String> = Registry::builtin()
        .names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let mut out = String::from("### Built-in workloads\n\n");
    out.push_str(&params_section(&registry, &builtins));
    out.push_str("### Shipped catalog entries (`catalog/`)\n\n");
    out.push_str(&params_section(&registry, &entries));
    out.trim_end().to_string() + "\n"
}

/// Replaces (or checks) the body of `<!-- BEGIN GENERATED name -->` … `<!-- END GENERATED name -->`.
fn sync_section(doc: &str, name: &str, body: &str, problems: &mut Vec<String>) -> String {
    let begin = format!("<!-- BEGIN GENERATED {name} -->\n");
    let end = format!("<!-- END GENERATED {name} -->");
    let Some(start) = doc.find(&begin) else {
        problems.push(format!("marker {begin:?} missing"));
        return doc.to_string();
    };
    let from = start + begin.len();
    let Some(len) = doc[from..].find(&end) else {
        problems.push(format!("marker {end:?} missing"));
        return doc.to_string();
    };
    let current = &doc[from..from + len];
    let wanted = format!("\n{}\n", body.trim_end());
    if current != wanted {
        let first_diff = current
            .lines()
            .zip(wanted.lines())
            .find(|(a, b)| a != b)
            .map(|(a, b)| format!("\n  doc:  {a}\n  code: {b}"))
            .unwrap_or_else(|| " (length differs)".into());
        problems.push(format!("section {name} is stale{first_diff}"));
    }
    format!("{}{}{}", &doc[..from], wanted, &doc[from + len..])
}

#[test]
fn configuration_md_generated_sections_match_the_code() {
    let doc = read_doc("configuration.md");
    let mut problems = Vec::new();
    let updated = sync_section(&doc, "flags", &generated_flags(), &mut problems);
    let updated = sync_section(&updated, "params", &generated_params(), &mut problems);
    if std::env::var("VIRTWORK_UPDATE_DOCS").as_deref() == Ok("1") {
        fs::write(doc_path("configuration.md"), &updated).unwrap();
        return;
    }
    assert!(
        problems.is_empty(),
        "docs/configuration.md is out of date ({}); regenerate with \
         VIRTWORK_UPDATE_DOCS=1 cargo test --test integration docs::",
        problems.join("; ")
    );
}

#[test]
fn every_environment_variable_is_documented() {
    let doc = read_doc("configuration.md");
    let keys: Vec<&str> = virtwork::config::env_keys().collect();
    assert!(keys.len() >= 20, "{keys:?}");
    for key in keys {
        assert!(
            doc.contains(&format!("`{key}`")),
            "docs/configuration.md does not document {key}"
        );
    }
    let deployment = read_doc("deployment.md");
    for key in [
        "VIRTWORK_COMMAND",
        "VIRTWORK_ARGS",
        "VIRTWORK_AFTER_RUN",
        "VIRTWORK_BIN",
    ] {
        assert!(
            deployment.contains(&format!("`{key}`")),
            "docs/deployment.md does not document {key}"
        );
    }
}

/// The fenced ```yaml block right after `<!-- yaml-example -->` in configuration.md.
fn yaml_example(doc: &str) -> String {
    let marker = doc
        .find("<!-- yaml-example -->")
        .expect("configuration.md has <!-- yaml-example -->");
    let rest = &doc[marker..];
    let start = rest.find("```yaml\n").expect("yaml block") + "```yaml\n".len();
    let len = rest[start..].find("```").expect("closed yaml block");
    rest[start..start + len].to_string()
}

#[test]
fn the_documented_yaml_example_is_accepted_and_covers_every_key() {
    let doc = read_doc("configuration.md");
    let example = yaml_example(&doc);
    let parsed: serde_yaml::Value = serde_yaml::from_str(&example).expect("example is YAML");
    let top: BTreeSet<String> = parsed
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    // Every env variable has a YAML twin, except aliases and the flag/env-only params.
    for key in virtwork::config::env_keys() {
        let yaml = key
            .trim_start_matches("VIRTWORK_")
            .to_ascii_lowercase()
            .replace('_', "-");
        if matches!(yaml.as_str(), "data-disk-size" | "params") {
            continue;
        }
        assert!(
            top.contains(&yaml),
            "the YAML example lacks `{yaml}` ({key})"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("virtwork.yaml");
    fs::write(&file, &example).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args(["run", "--dry-run", "--no-audit", "--config"])
        .arg(&file)
        .env_clear()
        .env("HOME", dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "virtwork rejects the documented YAML example:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Relative links `](path)` and backticked `src/...`/`tests/...`/`deploy/...` paths in docs/,
/// README.md and the golden-image README name files that exist (paths relative to the repo).
#[test]
fn links_and_paths_in_docs_exist() {
    let mut checked = 0;
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.push(repo().join("README.md"));
    files.push(repo().join("build/golden-image/README.md"));
    for path in files {
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(repo()).unwrap().display().to_string();
        for piece in text.split("](").skip(1) {
            let target = piece.split(')').next().unwrap();
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let file = target.split('#').next().unwrap();
            assert!(
                path.parent().unwrap().join(file).exists(),
                "{name} links to missing {target}"
            );
            checked += 1;
        }
        for piece in text.split('`').skip(1).step_by(2) {
            let looks_like_path = [
                "src/", "tests/", "deploy/", "build/", "catalog/", "benches/",
            ]
            .iter()
            .any(|p| piece.starts_with(p))
                && !piece.contains(char::is_whitespace)
                && !piece.contains(['*', '<', '{', '$']);
            if looks_like_path {
                assert!(
                    repo().join(piece.trim_end_matches('/')).exists(),
                    "{name} names missing path {piece}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "only {checked} links/paths found in docs/");
}

/// Every long flag and visible alias of every (sub)command, and every subcommand path.
fn command_line_names() -> (BTreeSet<String>, BTreeSet<String>) {
    fn walk(
        command: &clap::Command,
        path: &str,
        flags: &mut BTreeSet<String>,
        commands: &mut BTreeSet<String>,
    ) {
        for arg in command.get_arguments() {
            flags.extend(arg.get_long().map(|l| format!("--{l}")));
            flags.extend(
                arg.get_visible_aliases()
                    .into_iter()
                    .flatten()
                    .map(|a| format!("--{a}")),
            );
        }
        for sub in command.get_subcommands() {
            let name = format!("{path}{}", sub.get_name()).trim().to_string();
            commands.insert(name.clone());
            walk(sub, &format!("{name} "), flags, commands);
        }
    }
    let mut command = virtwork::cli::command();
    command.build();
    let (mut flags, mut commands) = (BTreeSet::new(), BTreeSet::new());
    walk(&command, "", &mut flags, &mut commands);
    (flags, commands)
}

#[test]
fn every_command_and_flag_named_in_readme_exists_and_every_command_is_named() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let (flags, commands) = command_line_names();
    for (number, line) in readme.lines().enumerate() {
        // Other tools' flags (cargo, the build scripts) are not ours.
        if line.contains("cargo") || line.contains(".sh") {
            continue;
        }
        for (at, _) in line.match_indices("--") {
            let flag: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if flag.len() > 2 && flag.as_bytes()[2].is_ascii_lowercase() {
                assert!(
                    flags.contains(&flag),
                    "README.md line {}: {flag} is not a virtwork flag",
                    number + 1
                );
            }
        }
    }
    let table = section(&readme, "## Commands");
    let named: BTreeSet<String> = table
        .lines()
        .filter_map(|row| row.strip_prefix("| `"))
        .map(|cell| {
            let cell = &cell[..cell.find('`').unwrap()];
            let words: Vec<&str> = cell
                .split_whitespace()
                .take_while(|w| !w.starts_with(['<', '[']))
                .collect();
            words.join(" ")
        })
        .collect();
    for name in &named {
        assert!(
            commands.contains(name),
            "README names `{name}`, not a command"
        );
    }
    for command in commands.iter().filter(|c| !c.contains(' ') && *c != "help") {
        assert!(
            named.iter().any(|n| n.split(' ').next() == Some(command)),
            "README's command table omits `{command}`"
        );
    }
}

/// The text of the section starting at `heading`, up to the next heading of its level.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let rest = &doc[start + heading.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    &rest[..end]
}

/// The cells of a Markdown table row: split on `|` not escaped as `\|`.
fn table_cells(row: &str) -> usize {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = 1;
    let mut escaped = false;
    for c in row.chars() {
        match c {
            '\\' => escaped = !escaped,
            '|' if !escaped => cells += 1,
            _ => escaped = false,
        }
        if c != '\\' {
            escaped = false;
        }
    }
    cells
}

#[test]
fn every_table_row_has_its_tables_column_count() {
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(repo().join("README.md"));
    let mut bad = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        let mut columns: Option<usize> = None;
        let mut in_code = false;
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            if in_code || !line.trim_start().starts_with('|') {
                columns = None;
                continue;
            }
            match columns {
                None => columns = Some(table_cells(line)),
                Some(expected) if table_cells(line) != expected => bad.push(format!(
                    "{}:{}: {} cells, the table has {expected}",
                    path.display(),
                    number + 1,
                    table_cells(line)
                )),
                Some(_) => {}
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every command named as `VIRTWORK_COMMAND` in the docs is one entrypoint.sh accepts.
#[test]
fn the_entrypoint_accepts_every_documented_command() {
    let script = fs::read_to_string(repo().join("entrypoint.sh")).unwrap();
    let accepted: BTreeSet<&str> = script
        .lines()
        .find(|line| line.trim_start().starts_with("run | cleanup"))
        .expect("the case of accepted commands")
        .trim()
        .trim_end_matches(";;")
        .trim_end()
        .trim_end_matches(')')
        .split('|')
        .map(str::trim)
        .collect();
    let row = read_doc("deployment.md");
    let row = row
        .lines()
        .find(|line| line.starts_with("| `VIRTWORK_COMMAND` = "))
        .unwrap();
    let cell = row.split('|').nth(1).unwrap();
    let documented: BTreeSet<&str> = cell.split('`').skip(3).step_by(2).collect();
    assert_eq!(documented, accepted, "deployment.md against entrypoint.sh");
    let (_, commands) = command_line_names();
    for command in &accepted {
        assert!(
            commands.contains(*command),
            "{command} is not a virtwork command"
        );
    }
}

/// The top-level fields of the first ```json block below `heading` in output-json.md.
fn documented_fields(doc: &str, heading: &str) -> BTreeSet<String> {
    let text = section(doc, heading);
    let start = text
        .find("```json\n")
        .unwrap_or_else(|| panic!("{heading}: no example"))
        + 8;
    let end = start + text[start..].find("```").unwrap();
    let example: serde_json::Value = serde_json::from_str(&text[start..end])
        .unwrap_or_else(|e| panic!("{heading}: example is not JSON: {e}"));
    example.as_object().unwrap().keys().cloned().collect()
}

fn fields(doc: &serde_json::Value) -> BTreeSet<String> {
    doc.as_object().unwrap().keys().cloned().collect()
}

/// `virtwork <args>` in `dir` (HOME there too), its stdout parsed as JSON.
fn document(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The document of each command that writes one, made by the real code: the binary where no
/// cluster is needed, else the function that writes the command's document.
fn real_documents(dir: &Path) -> Vec<(&'static str, serde_json::Value)> {
    use virtwork::report::{RunSummary, cleanup::CleanupSummary, run_summary_json};
    let catalog = repo().join("catalog");
    let plan = document(
        dir,
        &[
            "run",
            "--dry-run",
            "--workloads",
            "cpu",
            "-o",
            "json",
            "--audit-db",
            "a.db",
        ],
    );
    let run_id = plan["run_id"].as_str().unwrap().to_string();
    let run = RunSummary {
        status: virtwork::error::Outcome::Success,
        run_id: run_id.clone(),
        namespace: "virtwork".into(),
        server_dry_run: false,
        container_image: "img".into(),
        ready_condition: "running".into(),
        planned: Default::default(),
        created: Default::default(),
        create_duration: std::time::Duration::ZERO,
        wait_duration: None,
        vms_ready: 0,
        vms: Vec::new(),
        api_requests: 0,
        pacing: Default::default(),
        error: None,
        audit_db: Some("a.db".into()),
    };
    let cleanup =
        virtwork::report::cleanup::summary_json(&CleanupSummary::new(run_id.clone(), None, None));
    let status =
        virtwork::report::status::status_json(None, None, &[], jiff::Timestamp::UNIX_EPOCH);
    let churn = churn_document();
    vec![
        ("## `virtwork run --dry-run --output json`", plan),
        ("## `virtwork churn --output json`", churn),
        ("## `virtwork run --output json`", run_summary_json(&run)),
        (
            "## `virtwork cleanup --output json`",
            serde_json::from_str(&cleanup).unwrap(),
        ),
        (
            "## `virtwork status --output json`",
            serde_json::from_str(&status).unwrap(),
        ),
        ("## `virtwork verify --output json`", {
            let mut doc = virtwork::verify::json_report(
                None,
                None,
                &[],
                "p",
                virtwork::model::Window::DEFAULT,
                1,
            );
            // The command adds how it reached Prometheus (tests/verify.rs checks it does).
            doc["prometheus_via"] = virtwork::verify::prometheus::Via::Url.as_str().into();
            doc
        }),
        (
            "## `virtwork disruption --output json`",
            disruption_document(),
        ),
        (
            "## `virtwork validate --output json`",
            document(
                dir,
                &[
                    "validate",
                    "--catalog-dir",
                    catalog.to_str().unwrap(),
                    "-o",
                    "json",
                ],
            ),
        ),
        (
            "## `virtwork version --output json`",
            document(dir, &["version", "-o", "json"]),
        ),
        (
            "## `virtwork audit list --output json`",
            document(dir, &["audit", "list", "-o", "json", "--audit-db", "a.db"]),
        ),
        (
            "## `virtwork audit show <run-id> --output json`",
            document(
                dir,
                &["audit", "show", &run_id, "-o", "json", "--audit-db", "a.db"],
            ),
        ),
    ]
}

/// The document `virtwork disruption` prints, built by the function it prints with.
fn disruption_document() -> serde_json::Value {
    use virtwork::disruption::report::{Context, json_report};
    use virtwork::disruption::{Budget, Span};
    let context = Context {
        namespace: Some("virtwork".into()),
        run_id: None,
        span: Span {
            from: 0.0,
            to: 7200.0,
        },
        span_from: "--since 2h".into(),
        prometheus: Ok("p".into()),
        step: Some(30.0),
        scrape_interval: Some(30.0),
        budget: Budget {
            max_interruption: Some(60.0),
            max_interruption_from: "two scrape intervals of 30s".into(),
            allow_restarts: virtwork::model::AllowRestarts::None,
        },
    };
    json_report(&[], &context)
}

/// The document a completed churn prints, built by the function `virtwork churn` prints with.
fn churn_document() -> serde_json::Value {
    use virtwork::churn::{ChurnSpec, ChurnTally, ChurnVm, Schedule};
    use virtwork::report::churn::{ChurnStatus, ChurnSummary, churn_json};
    let vms: Vec<ChurnVm> = (0..2)
        .map(|i| ChurnVm {
            namespace: "virtwork".into(),
            name: format!("vm-{i}"),
            uid: format!("u{i}"),
            run_id: "r".into(),
            migratable: true,
        })
        .collect();
    let actions: virtwork::model::ChurnActions = "restart".parse().unwrap();
    let spec = ChurnSpec {
        rate: "2/s".parse().unwrap(),
        duration: std::time::Duration::from_secs(2),
        share: virtwork::model::Share::ALL,
        actions: actions.clone(),
        seed: 9,
    };
    let schedule = Schedule::new(&vms, &spec);
    let tally = ChurnTally::default();
    let summary = ChurnSummary {
        status: ChurnStatus::Completed,
        churn_id: "c".into(),
        namespace: Some("virtwork"),
        run_id_filter: None,
        seed: spec.seed,
        rate: spec.rate,
        duration: spec.duration,
        share: spec.share,
        actions: &actions,
        vms_found: 2,
        vms: &vms,
        schedule: &schedule,
        tally: &tally,
    };
    serde_json::from_str(&churn_json(&summary)).unwrap()
}

#[test]
fn every_commands_document_has_the_documented_fields() {
    let doc = read_doc("output-json.md");
    let dir = tempfile::tempdir().unwrap();
    let real = real_documents(dir.path());
    let headings: BTreeSet<&str> = doc.lines().filter(|l| l.starts_with("## ")).collect();
    let checked: BTreeSet<&str> = real.iter().map(|(heading, _)| *heading).collect();
    for heading in &headings {
        assert!(
            checked.iter().any(|c| heading.starts_with(c)),
            "output-json.md documents {heading}, which this test does not check"
        );
    }
    for (heading, document) in &real {
        let fields_written = fields(document);
        for common in ["command", "format_version"] {
            assert!(
                fields_written.contains(common),
                "{heading}: no {common}: {document}"
            );
        }
        if let Some(dry_run) = document.get("dry_run") {
            assert!(
                dry_run.is_null() || dry_run.is_string(),
                "{heading}: dry_run {dry_run}"
            );
        }
        assert_eq!(
            documented_fields(&doc, heading),
            fields_written,
            "{heading}: the example's fields against the real document's"
        );
    }
}

/// The backticked spans of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn the_command_list_names_every_command_that_writes_a_document() {
    let doc = read_doc("output-json.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `command` |"))
        .expect("output-json.md has the `command` row");
    let meaning = row.split('|').nth(3).unwrap();
    let listed: BTreeSet<&str> = backticked(meaning).into_iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let written: BTreeSet<String> = real_documents(dir.path())
        .iter()
        .map(|(_, document)| document["command"].as_str().unwrap().to_string())
        .collect();
    let written: BTreeSet<&str> = written.iter().map(String::as_str).collect();
    assert_eq!(listed, written, "the `command` row against the documents");
    // Every subcommand has its section, but those that write no document.
    let no_document = ["completion", "man", "help", "report", "audit"];
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        if no_document.contains(&name) {
            continue;
        }
        assert!(
            doc.contains(&format!("## `virtwork {name} ")),
            "output-json.md has no section for {name}"
        );
    }
}

/// `VIRTWORK_*` names in string literals of the binary's sources (tests and build-time
/// `env!` values left out), and the names it reads with `std::env::var`/`var_os`.
fn variables_the_binary_reads() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![repo().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for (i, _) in code.match_indices("\"VIRTWORK_") {
                let name: String = code[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !code[..i].ends_with("env!(") {
                    names.insert(name);
                }
            }
            for call in ["env::var(\"", "env::var_os(\""] {
                for (i, _) in code.match_indices(call) {
                    let rest = &code[i + call.len()..];
                    names.insert(rest[..rest.find('"').unwrap()].to_string());
                }
            }
        }
    }
    names
}

#[test]
fn the_man_page_names_every_variable_the_binary_reads() {
    let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
        .arg("man")
        .output()
        .unwrap();
    assert!(out.status.success());
    let man = String::from_utf8_lossy(&out.stdout);
    let environment = man
        .split(".SH ENVIRONMENT")
        .nth(1)
        .and_then(|rest| rest.split(".SH ").next())
        .expect("the man page has an ENVIRONMENT section");
    let names = variables_the_binary_reads();
    assert!(
        names.contains("VIRTWORK_ASSUME_TTY") && names.contains("HOME"),
        "{names:?}"
    );
    for name in &names {
        assert!(
            environment.contains(name.as_str()),
            "the man page's ENVIRONMENT does not name {name}, which the binary reads"
        );
    }
}

/// Whether `line` is the message `quoted` documents, where `…` stands for any text.
fn matches_documented(quoted: &str, line: &str) -> bool {
    let mut rest = line;
    for (i, part) in quoted.split('…').enumerate() {
        match rest.find(part) {
            Some(at) if i > 0 || at == 0 => rest = &rest[at + part.len()..],
            _ => return false,
        }
    }
    quoted.ends_with('…') || rest.is_empty()
}

/// The message of the troubleshooting row whose first cell begins with `start`.
fn troubleshooting_message(start: &str) -> String {
    let doc = read_doc("troubleshooting.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with(&format!("| `{start}")))
        .unwrap_or_else(|| panic!("troubleshooting.md has no row for {start}"));
    backticked(row)[0].to_string()
}

#[test]
fn the_documented_kubeconfig_messages_are_what_the_binary_says() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    let garbage = dir.path().join("garbage");
    fs::write(&garbage, "clusters: [ {").unwrap();
    let missing = dir.path().join("missing");
    let cases: [(&str, Vec<&str>); 3] = [
        ("no kubeconfig: pass", vec!["status"]),
        (
            "no kubeconfig file found at",
            vec!["--kubeconfig", missing.to_str().unwrap(), "status"],
        ),
        (
            "reading kubeconfig",
            vec!["--kubeconfig", garbage.to_str().unwrap(), "status"],
        ),
    ];
    for (start, args) in cases {
        let quoted = troubleshooting_message(start);
        let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
            .args(&args)
            .env_clear()
            .env("HOME", &home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr.trim_end().strip_prefix("Error: ").unwrap_or(&stderr);
        assert!(
            matches_documented(&quoted, line),
            "{args:?}: documented `{quoted}`, said `{line}`"
        );
    }
}

/// The commands troubleshooting.md says stop after one attempt at a refused address.
fn named_as_failing_at_once() -> Vec<String> {
    let doc = read_doc("troubleshooting.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `cannot reach …: …; check that the cluster is up"))
        .expect("troubleshooting.md has the cannot-reach row");
    let sentence = row
        .split(". ")
        .find(|s| s.contains("after one attempt"))
        .expect("the row says which commands stop after one attempt");
    let names = sentence.split(" say so").next().unwrap();
    backticked(names).into_iter().map(String::from).collect()
}

#[test]
fn the_commands_documented_to_stop_at_a_refused_connection_do() {
    let quoted = troubleshooting_message("cannot reach …: …; check that the cluster is up");
    let commands = named_as_failing_at_once();
    assert!(commands.len() >= 5, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:9\"}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n\
         current-context: x\n",
    )
    .unwrap();
    for command in commands {
        let mut args = vec![command.as_str()];
        args.extend(match command.as_str() {
            "cleanup" | "churn" => vec!["--yes"],
            "disruption" => vec!["--no-prometheus"],
            _ => vec![],
        });
        let out = Command::new(env!("CARGO_BIN_EXE_virtwork"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .env_clear()
            .env("HOME", dir.path())
            .env("VIRTWORK_AUDIT_DB", dir.path().join("a.db"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            !stderr.contains("is not answering"),
            "{command} retried: {stderr}"
        );
        let line = stderr.trim_end().lines().last().unwrap_or_default();
        let line = line.strip_prefix("Error: ").unwrap_or(line);
        assert!(
            matches_documented(&quoted, line),
            "{command}: documented `{quoted}`, said `{line}`"
        );
    }
}
