//! `virtwork completion <shell>` and `virtwork man`: generated from the clap definitions, so
//! they can never drift from the real command line.

use std::io::Write;

use clap_complete::Shell;

use super::version::{BUILD_DATE, VERSION};
use crate::cli::CompletionShell;
use crate::error::Result;

/// Writes the completion script for `shell`.
pub fn completion(shell: CompletionShell, out: &mut dyn Write) -> Result<()> {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
        CompletionShell::Powershell => Shell::PowerShell,
    };
    let mut command = with_workload_names(crate::cli::documented_command());
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, "virtwork", &mut buffer);
    super::written(out.write_all(&buffer))
}

/// `run --workloads` completes the built-in workload names. (Catalog entries and run ids
/// would need the binary called at each TAB, clap_complete's dynamic mode: not done.)
fn with_workload_names(command: clap::Command) -> clap::Command {
    command.mut_subcommand("run", |run| {
        run.mut_arg("workloads", |arg| {
            arg.value_parser(clap::builder::PossibleValuesParser::new(
                crate::workloads::BUILTIN_NAMES,
            ))
        })
    })
}

/// Writes the man page (roff): the main page with EXIT STATUS, ENVIRONMENT and FILES, then
/// each subcommand with its own options, all in one file (so it names no other page).
pub fn man(out: &mut dyn Write) -> Result<()> {
    let command = crate::cli::documented_command();
    let page = |command: clap::Command, title: String| {
        clap_mangen::Man::new(command)
            .title(title)
            .source(format!("virtwork {VERSION}"))
            .date(BUILD_DATE.get(..10).unwrap_or(BUILD_DATE))
            .manual("virtwork manual")
    };
    let mut buffer = Vec::new();
    let main = page(command.clone(), "virtwork".to_string());
    main.render_title(&mut buffer)
        .map_err(super::write_failed)?;
    main.render_name_section(&mut buffer)
        .map_err(super::write_failed)?;
    main.render_synopsis_section(&mut buffer)
        .map_err(super::write_failed)?;
    main.render_description_section(&mut buffer)
        .map_err(super::write_failed)?;
    main.render_options_section(&mut buffer)
        .map_err(super::write_failed)?;
    buffer.extend(main_sections(&command).as_bytes());
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let name = format!("virtwork-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(name.clone())
            .bin_name(name.clone());
        let man = page(sub, name);
        man.render_title(&mut buffer).map_err(super::write_failed)?;
        man.render_name_section(&mut buffer)
            .map_err(super::write_failed)?;
        man.render_synopsis_section(&mut buffer)
            .map_err(super::write_failed)?;
        man.render_description_section(&mut buffer)
            .map_err(super::write_failed)?;
        man.render_options_section(&mut buffer)
            .map_err(super::write_failed)?;
    }
    super::written(out.write_all(&buffer))
}

/// Text for roff: backslashes and hyphens escaped.
fn roff(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

/// `.TP` entries: a bold term, then its description.
fn entries(items: &[(String, String)]) -> String {
    items
        .iter()
        .map(|(term, text)| format!(".TP\n\\fB{}\\fR\n{}\n", roff(term), roff(text)))
        .collect()
}

/// COMMANDS, EXIT STATUS, ENVIRONMENT and FILES of the main page.
fn main_sections(command: &clap::Command) -> String {
    let commands: Vec<(String, String)> = command
        .get_subcommands()
        .filter(|sub| sub.get_name() != "help")
        .map(|sub| {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            (format!("virtwork {}", sub.get_name()), about)
        })
        .collect();
    let exit: Vec<(String, String)> = [
        ("0", "success"),
        (
            "1",
            "a runtime failure: the cluster, a VM or Prometheus did not do what was asked",
        ),
        (
            "2",
            "bad input: a flag, variable or file key (nothing was created)",
        ),
        ("130", "interrupted by SIGINT or SIGTERM"),
    ]
    .iter()
    .map(|(code, text)| (code.to_string(), text.to_string()))
    .collect();
    let mut environment: Vec<(String, String)> = crate::config::KEYS
        .iter()
        .flat_map(|spec| {
            spec.env.iter().map(move |var| {
                (
                    var.to_string(),
                    format!("the configuration key {}", spec.key),
                )
            })
        })
        .collect();
    environment.extend(
        [
            ("KUBECONFIG", "kubeconfig files (colon-separated) when --kubeconfig and VIRTWORK_KUBECONFIG are not set"),
            ("NO_COLOR", "when set and not empty, no colour in log lines (--color always overrides it)"),
            ("HOME", "where ~/.kube/config and ~/.virtwork/catalog are"),
            ("HTTPS_PROXY, HTTP_PROXY, NO_PROXY", "the proxy to the API server, as kubectl reads them"),
            ("XDG_STATE_HOME", "where the audit database is by default (see FILES)"),
            ("KUBERNETES_SERVICE_HOST", "set in a pod: its service account is the credential when no kubeconfig is found"),
            ("VIRTWORK_ASSUME_TTY", "when 1, the prompts of cleanup and churn treat stdin as a terminal (for tests and expect scripts)"),
            ("VIRTWORK_CLEANUP_MODE", "read only to warn that it has no effect (the Go tool's variable; cleanup's mode comes from --run-id and --dry-run)"),
        ]
        .iter()
        .map(|(var, text)| (var.to_string(), text.to_string())),
    );
    let files: Vec<(String, String)> = [
        (
            "~/.kube/config",
            "the kubeconfig used when none is given; in a pod without one, the service account",
        ),
        (
            "~/.local/state/virtwork/virtwork.db",
            "the audit database (--audit-db; $XDG_STATE_HOME/virtwork/virtwork.db when \
             XDG_STATE_HOME is set)",
        ),
        ("~/.virtwork/catalog", "catalog entries (--catalog-dir)"),
    ]
    .iter()
    .map(|(path, text)| (path.to_string(), text.to_string()))
    .collect();
    format!(
        ".SH COMMANDS\n{}.SH \"EXIT STATUS\"\n{}.SH ENVIRONMENT\nEvery setting is also read from a YAML file (\\fB\\-\\-config\\fR); a flag wins over a variable, a variable over the file.\n{}.SH FILES\n{}",
        entries(&commands),
        entries(&exit),
        entries(&environment),
        entries(&files)
    )
}
