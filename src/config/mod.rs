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
mod resolve;
mod settings;
mod value;
mod yaml;

pub use params::parse_params;
pub use partial::{KEYS, KeySpec, Partial, env_keys};
pub use resolve::output_format;
pub use settings::{
    AuditDb, AuditSettings, CleanupSettings, ClusterAccess, GlobalSettings, PrometheusTarget,
    RunSettings, SampleBuild, StatusSettings, ValidateSettings, VerifySettings,
};
pub use value::{Source, Sourced};

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
