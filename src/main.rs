//! The virtwork binary: parse arguments, dispatch, map errors to exit codes. Nothing else.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::FromArgMatches;
use clap::error::ErrorKind;
use virtwork::cli::Cli;
use virtwork::terminal::{LINE_CHARS, safe, to_stderr};
use virtwork::usage::without_secrets;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let parsed = virtwork::cli::command()
        .try_get_matches_from(&args)
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let cli = match parsed {
        Ok((cli, matches)) => {
            let mut cli = cli;
            cli.global.inert_flags = virtwork::usage::inert_flag_notices(&matches);
            cli
        }
        Err(err) => return usage_error(&err, &args, &env),
    };
    match virtwork::commands::dispatch(cli, &env) {
        Ok(()) => ExitCode::SUCCESS,
        // `virtwork ... | head -1`: the reader has what it wanted.
        Err(err) if err.is_closed_stdout() => ExitCode::SUCCESS,
        Err(err) => {
            // One line, always: a multi-line cause must not break log scrapers, and text from
            // the cluster (a webhook's message, an object's name) must not drive the terminal.
            let message = without_secrets(&err.to_string(), &args, &env);
            let message = safe(&message, LINE_CHARS);
            to_stderr(&format!("Error: {message}\n"));
            ExitCode::from(err.exit_code())
        }
    }
}

/// Help and version succeed; every other usage error exits 2 with one line.
fn usage_error(err: &clap::Error, args: &[OsString], env: &[(String, String)]) -> ExitCode {
    match err.kind() {
        // Bare `virtwork` prints help and succeeds, as the Go tool does.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = virtwork::cli::command().print_help();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        _ => {
            let message = without_secrets(&virtwork::usage::one_line(err, args), args, env);
            to_stderr(&format!("Error: {}\n", safe(&message, LINE_CHARS)));
            ExitCode::from(2)
        }
    }
}
