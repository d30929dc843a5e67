//! Human summaries, JSON result documents and progress rendering for every command.

// Each command's rendering lives in its own submodule so that parallel work does not collide.
pub mod cleanup;
pub mod status;
