//! The run a command acts on, from the run id its user typed: once per command, right after
//! the cluster is reached (or the audit database is opened).
//!
//! Owns: where a prefix's candidates come from (the `virtwork/run-id` labels of the managed
//! objects in the command's scope, and the audit database) and the refusal of a prefix that
//! begins several runs (exit 2, naming them). A whole id is taken as given, with no lookup.
//! Must not: parse text (that is [`crate::model::RunIdSelector`]) or decide what a command
//! does with a run that does not exist (an unmatched prefix behaves as an unknown id).

use std::path::Path;

use crate::audit::query::{Executions, run_ids_with_prefix};
use crate::error::{Error, Result};
use crate::k8s::scope::{ApiContext, Scope, run_ids_in_scope};
use crate::model::{RunId, RunIdSelector, RunRef};

/// Resolves `selector` (given as `input`, e.g. `--run-id`) among the runs labelled on the
/// cluster in `namespace` (`None`: every namespace) and the `run` executions recorded in `db`.
/// An unreadable database leaves the cluster's answer (with a warning).
pub async fn on_cluster(
    selector: &RunIdSelector,
    input: &str,
    ctx: &ApiContext,
    namespace: Option<&str>,
    db: &Path,
) -> Result<RunRef> {
    let Some(prefix) = selector.prefix() else {
        return decide(selector, input, []);
    };
    let mut known = run_ids_in_scope(ctx, namespace, prefix).await?;
    match run_ids_with_prefix(db, prefix, Executions::Runs) {
        Ok(recorded) => known.extend(recorded),
        Err(error) => tracing::warn!(
            %error,
            "run id {prefix} looked up on the cluster only"
        ),
    }
    decide(selector, input, known)
}

/// Resolves `selector` (given as `input`) among the executions `which` recorded in `db`.
pub fn in_database(
    selector: &RunIdSelector,
    input: &str,
    db: &Path,
    which: Executions,
) -> Result<RunRef> {
    let Some(prefix) = selector.prefix() else {
        return decide(selector, input, []);
    };
    decide(selector, input, run_ids_with_prefix(db, prefix, which)?)
}

/// `scope` narrowed to the run `selector` names (unchanged without one): the scope every
/// listing of a command with `--run-id` goes through.
pub async fn scope_on_cluster(
    scope: &Scope,
    selector: Option<&RunIdSelector>,
    ctx: &ApiContext,
    db: &Path,
) -> Result<Scope> {
    let Some(selector) = selector else {
        return Ok(scope.clone());
    };
    let run = on_cluster(selector, "--run-id", ctx, scope.namespace.as_deref(), db).await?;
    Ok(Scope {
        namespace: scope.namespace.clone(),
        run_id: Some(run.to_string()),
    })
}

fn decide(
    selector: &RunIdSelector,
    input: &str,
    known: impl IntoIterator<Item = RunId>,
) -> Result<RunRef> {
    let run = selector
        .resolve(known)
        .map_err(|ambiguous| Error::input(ambiguous.message(input)))?;
    if let (RunIdSelector::Prefix(prefix), RunRef::Id(id)) = (selector, &run) {
        tracing::info!("{input} {prefix} is run {id}");
    }
    Ok(run)
}
