//! PURE planning: Config + Registry -> Plan, with every Kubernetes object already rendered.
//!
//! No I/O and no async: dry-run prints a Plan, `run` applies it, and tests of "what would
//! be created" need neither a cluster nor a runtime.
