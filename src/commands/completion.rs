//! `virtwork completion <shell>` and `virtwork man`: generated from the clap definitions, so
//! they can never drift from the real command line.

use std::io::Write;

use clap_complete::Shell;

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
    let mut command = crate::cli::documented_command();
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, "virtwork", &mut buffer);
    out.write_all(&buffer).map_err(super::write_failed)
}

/// Writes the man page (roff) of virtwork and its subcommands.
pub fn man(out: &mut dyn Write) -> Result<()> {
    let command = crate::cli::documented_command();
    let mut buffer = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut buffer)
        .map_err(super::write_failed)?;
    // One page: the subcommands follow the main page, each with its own options.
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let name = format!("virtwork-{}", sub.get_name());
        let sub = sub.clone().display_name(name.clone()).bin_name(name);
        let man = clap_mangen::Man::new(sub);
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
    out.write_all(&buffer).map_err(super::write_failed)
}
