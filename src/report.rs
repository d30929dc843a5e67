//! Human summaries, JSON result documents and progress rendering for every command.
