//! Processes the tests start begin with default signal dispositions. A test binary launched as a
//! background job of a non-interactive shell (`cmd &`, nohup-style CI runners) starts with
//! SIGINT and SIGQUIT ignored, and ignored dispositions survive `exec`: a shell started from
//! there cannot even trap them, so signal tests would measure the launcher, not the code.
//! Owns: resetting dispositions in the child between fork and exec. Must not: touch the test
//! process's own dispositions (a developer's Ctrl-C must keep working as they launched it).

use std::os::unix::process::CommandExt;
use std::process::Command;

/// The signals a shell or a job runner may leave ignored for its background children.
const RESET: [libc::c_int; 4] = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP];

/// Makes `cmd` start with the default action for SIGINT, SIGQUIT, SIGTERM and SIGHUP, whatever
/// the test process inherited.
pub fn default_signals(cmd: &mut Command) -> &mut Command {
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; signal(2) is one,
    // and the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            for signal in RESET {
                if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}
