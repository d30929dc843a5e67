//! The virtwork binary: parse arguments, dispatch, map errors to exit codes. Nothing else.

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

fn main() {
    let cli = match virtwork::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // Bare `virtwork` prints help and succeeds, as the reference does.
        Err(err) if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = virtwork::cli::Cli::command().print_help();
            std::process::exit(0);
        }
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            err.exit()
        }
        // Usage errors exit 2 with one line, like every other bad input.
        Err(err) => {
            eprintln!("Error: {}", one_line_usage_error(&err));
            std::process::exit(2);
        }
    };
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    if let Err(err) = virtwork::commands::dispatch(cli, &env) {
        // One line, always: a multi-line cause must not break log scrapers.
        let message = err.to_string().replace(['\n', '\r'], " ");
        eprintln!("Error: {message}");
        std::process::exit(err.exit_code());
    }
}

/// clap's multi-line usage error folded into one line: the problem, any tip or accepted
/// values, and where to look next.
fn one_line_usage_error(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let parts: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with("Usage:")
                && !line.starts_with("For more information")
        })
        .collect();
    let message = parts.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    format!("{message} (see --help)")
}
