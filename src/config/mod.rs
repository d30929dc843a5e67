//! Configuration: flags, `VIRTWORK_*` environment, the YAML file given with `--config` and the
//! built-in defaults, parsed into typed layers, merged by precedence and resolved into the
//! settings of each command.
//!
//! Flow: each source becomes a [`Partial`] whose values are already typed (model types) and
//! remember the input that gave them → the layers merge key by key, flags > environment >
//! file > defaults → `RunSettings::resolve`, `CleanupSettings::resolve`, ... take what their
//! command needs. An error is one line naming the input as the user spelled it
//! (`--cpu-cores`, `VIRTWORK_CPU_CORES`, `cpu_cores in ./virtwork.yaml`), exit code 2.
//!
//! Files: `partial.rs` the key table (every key once: type, YAML and env spellings),
//! `value.rs` sources and text → typed values, `flags.rs`, `env.rs`, `yaml.rs` and
//! `defaults.rs` the four sources, `params.rs` the `--params` grammar, `settings.rs` the
//! per-command settings, `resolve.rs` layers → settings. The only I/O is reading the YAML file,
//! `--ssh-key-file`s and `verify --prometheus-token-file`.
//!
//! Must not: be read below `commands/` (lower layers take the plain inputs they need).

mod defaults;
mod env;
mod flags;
mod params;
mod partial;
mod prometheus;
mod resolve;
mod settings;
mod value;
mod yaml;

pub use params::parse_params;
pub use partial::{KEYS, KeySpec, Partial, env_keys};
pub use resolve::output_format;
pub use settings::{
    AuditDb, AuditSettings, ChurnSettings, CleanupSettings, ClusterAccess, DisruptionSettings,
    DisruptionSpan, GlobalSettings, PrometheusCredential, PrometheusTarget, ReportSettings,
    RunSettings, SampleBuild, StatusSettings, ValidateSettings, VerifySettings,
};
pub use value::{Source, Sourced};

/// The largest `--config` file read: 1 MiB (a configuration is a few KiB; this only stops a
/// wrong path such as `/dev/zero` from filling memory).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of the regular file at `path` (links followed, as for any path the user names),
/// at most `max_bytes` long. A FIFO, device, socket or directory is refused without blocking
/// or reading it. The error is the reason, for a message naming the input.
pub(crate) fn read_regular_file(path: &std::path::Path, max_bytes: u64) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking, so opening a FIFO returns at once instead of waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_reason(&e))?;
    let meta = file.metadata().map_err(|e| io_reason(&e))?;
    if meta.is_dir() {
        return Err("is a directory".to_string());
    }
    if !meta.is_file() {
        return Err("is not a regular file (a FIFO, device or socket); give a file".to_string());
    }
    let too_big = || {
        format!(
            "is larger than {} KiB, the most virtwork reads",
            max_bytes / 1024
        )
    };
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|_| "not valid UTF-8 text".to_string())
}

/// The reason of an I/O error without the "(os error N)" noise.
fn io_reason(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_string(),
        std::io::ErrorKind::InvalidData => "not valid UTF-8 text".to_string(),
        _ => err.to_string(),
    }
}
