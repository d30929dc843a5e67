//! Label-scoped discovery, deletion and `--wait` for `virtwork cleanup`: what is found
//! ([`mod@discover`]), whether `--delete-namespace` may take the namespace ([`namespace_check`]),
//! the deletes ([`delete`]) and the wait for everything to be gone ([`wait`]). Where and how
//! objects are listed is [`crate::k8s::scope`].
//!
//! Only objects carrying `app.kubernetes.io/managed-by=virtwork` (and, with `--run-id`, that
//! run's id) are ever listed, deleted or waited on: the label selector does the filtering on
//! the server and [`crate::k8s::scope::Scope::matches`] checks it again on every returned object, so a
//! server that ignored the selector still cannot make us delete a foreign object. Deletes carry
//! a uid precondition, so an object replaced between listing and deleting is not touched either.
//!
//! The decisions (what is managed, which VMIs are orphans, deletion phases, outcome
//! aggregation, the wait bookkeeping) are plain functions and types tested without a cluster;
//! the async functions of each file only move objects between the API server and them.
//!
//! Must not: create anything; touch an object outside its scope or without a uid
//! precondition; decide the namespace verdict itself (that is
//! [`crate::k8s::namespace::namespace_delete_decision`]).

pub mod delete;
pub mod discover;
pub mod namespace_check;
pub mod wait;

pub use delete::{
    CleanupOutcome, DELETE_CONCURRENCY, DeleteFailure, DeleteOutcome, classify_delete, execute,
};
pub use discover::{Discovery, Unlisted, count_kinds, discover};
pub use namespace_check::{NamespaceCheck, namespace_verdict};
pub use wait::{GoneTracker, WaitResult, wait_until_gone};
