//! The yes/no confirmation prompt cleanup and churn ask before acting on more than one named
//! run: whether to ask at all, how a line is read, and asking again on a terminal.
//!
//! Owns: [`Confirmation`] (not needed, ask on a terminal, read from a pipe), [`answer`]
//! (`y`/`yes` confirm, `n`/`no`/an empty line decline, any case; anything else is unclear),
//! and [`ask_until_clear`], which writes the prompt to stderr (stdout carries only the
//! command's document) and re-asks an unclear answer on a terminal, never from a pipe.
//! Testing hook: `VIRTWORK_ASSUME_TTY=1` makes stdin count as a terminal. Must not: decide
//! what a "no" or an unanswered pipe means for the command (each command words its own
//! refusal and exit code).

use std::io::Write;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Environment variable that makes stdin count as a terminal (testing hook).
pub const ASSUME_TTY_ENV: &str = "VIRTWORK_ASSUME_TTY";

/// Whether the user must confirm before the command acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// `--yes` or `--run-id` was given: act without asking.
    NotNeeded,
    /// Ask on the terminal.
    Ask,
    /// Read the answer from stdin, which is not a terminal (a pipe or a file); EOF before
    /// any answer refuses.
    Piped,
}

/// What was read at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `y` or `yes`, any case.
    Yes,
    /// `n`, `no` (any case) or an empty line: the prompt's default.
    No,
    /// Any other line: asked again on a terminal, a refusal from a pipe.
    Unclear,
    /// End of input before any answer.
    Nothing,
}

/// Decides whether to prompt. `--run-id` skips the prompt: naming one run is already a
/// deliberate choice (`run_scoped` is false when more than the run would be acted on).
pub fn confirmation(yes: bool, run_scoped: bool, stdin_is_terminal: bool) -> Confirmation {
    if yes || run_scoped {
        Confirmation::NotNeeded
    } else if stdin_is_terminal {
        Confirmation::Ask
    } else {
        Confirmation::Piped
    }
}

/// Whether stdin counts as a terminal (`VIRTWORK_ASSUME_TTY=1` is the testing hook).
pub fn stdin_counts_as_terminal(is_terminal: bool, assume_tty: Option<&str>) -> bool {
    is_terminal || assume_tty.is_some_and(|v| v.trim() == "1")
}

/// Whether this process's stdin counts as a terminal.
pub fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal;
    stdin_counts_as_terminal(
        std::io::stdin().is_terminal(),
        std::env::var(ASSUME_TTY_ENV).ok().as_deref(),
    )
}

/// The answer in one read line (`None`: EOF before any byte): `y`/`yes` confirm and
/// `n`/`no`/an empty line decline (trimmed, any case); anything else is unclear.
pub fn answer(line: Option<&str>) -> Answer {
    let Some(line) = line else {
        return Answer::Nothing;
    };
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Yes,
        "" | "n" | "no" => Answer::No,
        _ => Answer::Unclear,
    }
}

/// Asked again after an unclear answer on a terminal.
pub const ASK_AGAIN: &str = "Please answer yes or no.\n";

/// Asks `prompt` in `mode` (never [`Confirmation::NotNeeded`]) until the answer is clear: on
/// a terminal an unclear line is asked again, from a pipe it stands (a refusal). A piped
/// yes ends the prompt's line, which the terminal would have echoed.
pub async fn ask_until_clear(
    prompt: &str,
    mode: Confirmation,
    cancel: &CancellationToken,
) -> Result<Answer> {
    let mut reply = ask(prompt, cancel).await?;
    while mode == Confirmation::Ask && reply == Answer::Unclear {
        crate::terminal::to_stderr(ASK_AGAIN);
        reply = ask(prompt, cancel).await?;
    }
    if mode == Confirmation::Piped && reply == Answer::Yes {
        crate::terminal::to_stderr("\n");
    }
    Ok(reply)
}

/// Prints `prompt` on stderr and reads one line from stdin. The read runs on its own thread
/// so Ctrl-C at the prompt interrupts at once (and an unanswered read cannot keep the
/// process alive).
async fn ask(prompt: &str, cancel: &CancellationToken) -> Result<Answer> {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(prompt.as_bytes());
    let _ = stderr.flush();
    drop(stderr);
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = match std::io::stdin().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line)),
            Err(e) => Err(e),
        };
        let _ = tx.send(read);
    });
    tokio::select! {
        () = cancel.cancelled() => Err(Error::Interrupted),
        read = rx => match read {
            Ok(Ok(line)) => Ok(answer(line.as_deref())),
            Ok(Err(e)) => Err(Error::Io { context: "reading the confirmation from", path: "stdin".into(), source: e }),
            Err(_) => Ok(Answer::Nothing),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_and_run_id_skip_the_prompt() {
        assert_eq!(confirmation(true, false, false), Confirmation::NotNeeded);
        assert_eq!(confirmation(false, true, false), Confirmation::NotNeeded);
        assert_eq!(confirmation(false, false, true), Confirmation::Ask);
        assert_eq!(confirmation(false, false, false), Confirmation::Piped);
    }

    #[test]
    fn eof_before_an_answer_is_nothing_and_an_empty_line_is_no() {
        assert_eq!(answer(None), Answer::Nothing);
        assert_eq!(answer(Some("\n")), Answer::No);
        assert_eq!(answer(Some("yes\n")), Answer::Yes);
    }

    #[test]
    fn y_and_yes_confirm_n_and_no_decline_the_rest_is_unclear() {
        for yes in ["yes", "YES", "  yes  \n", "Yes\r\n", "y", "Y\n"] {
            assert_eq!(answer(Some(yes)), Answer::Yes, "{yes:?}");
        }
        for no in ["no", "", "\n", "n", "N\n", "NO"] {
            assert_eq!(answer(Some(no)), Answer::No, "{no:?}");
        }
        for unclear in ["maybe", "yes please", "ye", "nope"] {
            assert_eq!(answer(Some(unclear)), Answer::Unclear, "{unclear:?}");
        }
    }

    #[test]
    fn the_tty_hook_needs_exactly_one() {
        assert!(stdin_counts_as_terminal(true, None));
        assert!(stdin_counts_as_terminal(false, Some("1")));
        assert!(!stdin_counts_as_terminal(false, Some("0")));
        assert!(!stdin_counts_as_terminal(false, Some("")));
        assert!(!stdin_counts_as_terminal(false, None));
    }
}
