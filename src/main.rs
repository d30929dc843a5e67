//! The virtwork binary: parse arguments, dispatch, map errors to exit codes. Nothing else.

use clap::Parser;

fn main() {
    let cli = virtwork::cli::Cli::parse();
    let _ = cli;
    eprintln!("Error: not implemented yet (issue #2)");
    std::process::exit(1);
}
