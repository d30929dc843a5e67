//! tracing subscriber set-up: human-readable or one-JSON-object-per-line logs on stderr.
