//! `virtwork version`: the version, commit and build date embedded at build time (build.rs).

use std::io::Write;

use crate::error::Result;

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git commit, or `(unknown)`.
pub const COMMIT: &str = env!("VIRTWORK_COMMIT");
/// Commit date (or `VIRTWORK_BUILD_DATE`), or `(unknown)`.
pub const BUILD_DATE: &str = env!("VIRTWORK_DATE");

/// Writes the three version lines.
pub fn version(out: &mut dyn Write) -> Result<()> {
    write!(
        out,
        "virtwork version {VERSION}\n  commit: {COMMIT}\n  built:  {BUILD_DATE}\n"
    )
    .map_err(super::write_failed)
}
