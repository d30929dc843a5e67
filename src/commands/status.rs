//! `virtwork status`: the runs present on the cluster and the phases of their VMs.
//!
//! Owns: reading the runs (label-selected VMs and VMIs, see k8s/status.rs) once, or under
//! `--watch` again and again with bounded backoff until `k8s/follow.rs` says they are settled,
//! and writing what changed: on a terminal the view redrawn in place, elsewhere a line per
//! changed run (or a document per change); following stops when stdout's reader has gone
//! (exit 0, as any command whose reader went away). No runs is not an error; a namespace that does not
//! exist is (exit 1), said as such rather than as "no runs".
//! Must not: write to the cluster; decide when following is over (follow.rs does).

use std::io::IsTerminal;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::StatusSettings;
use crate::error::{Error, Result};
use crate::k8s::follow::{Follow, MIN_INTERVAL, Settled, next_interval};
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope};
use crate::k8s::status::{RunStatus, RunSummary, collect};
use crate::model::OutputFormat;
use crate::report::status::{
    format_age, place, run_change_key, run_line, status_json, status_text, status_wide_text,
};

/// Runs `virtwork status` with its resolved settings.
pub async fn status(settings: &StatusSettings) -> Result<()> {
    let (cluster, cancel) = super::connect_interruptible(&settings.global.cluster).await?;
    let deadline = Instant::now() + Duration::from_secs(settings.timeout.get().max(1));
    let ctx = ApiContext {
        client: cluster.client.clone(),
        // --timeout bounds the whole command: every attempt, retry and page (under --watch,
        // every read).
        policy: RetryPolicy::until(deadline),
        cancel,
    };
    crate::k8s::reach::reach(&cluster, &ctx.policy, &ctx.cancel).await?;
    let everything = Scope {
        namespace: (!settings.all_namespaces).then(|| settings.global.namespace.to_string()),
        run_id: None,
    };
    let db = &settings.global.audit.path;
    let scope =
        super::run_ids::scope_on_cluster(&everything, settings.run_id.as_ref(), &ctx, db).await?;
    let runs = collect(&ctx, &scope).await?;
    if runs.is_empty()
        && let Some(ns) = scope.namespace.as_deref()
    {
        check_namespace_exists(&ctx, ns).await?;
    }
    if settings.watch {
        return Watch::new(settings, &scope)
            .follow(&ctx, runs, deadline)
            .await;
    }
    super::write_stdout(&render(settings, &scope, &runs, jiff::Timestamp::now())?)
}

/// The runs as `--output` asks: one line per run, one row per VM (`wide`), or the document.
fn render(
    settings: &StatusSettings,
    scope: &Scope,
    runs: &[RunStatus],
    now: jiff::Timestamp,
) -> Result<String> {
    let namespace = scope.namespace.as_deref();
    let run_id = scope.run_id.as_deref();
    Ok(match settings.global.output {
        format @ (OutputFormat::Json | OutputFormat::Yaml) => {
            super::document_text(format, &status_json(namespace, run_id, runs, now))?
        }
        OutputFormat::Text if settings.wide => status_wide_text(namespace, run_id, runs, now),
        OutputFormat::Text => status_text(namespace, run_id, runs, now),
    })
}

/// `--watch`: what was last shown, and how to show the next change.
struct Watch<'a> {
    settings: &'a StatusSettings,
    scope: &'a Scope,
    /// Redraw the view in place (text on a terminal) instead of writing changes as lines.
    redraw: bool,
    /// What was last shown: the view (redraw, documents, wide), or each run's change key.
    shown: Vec<(Option<String>, String)>,
    /// A write found stdout's reader gone (a broken pipe).
    reader_gone: bool,
}

/// Clears a terminal and puts the cursor home, as `watch(1)` redraws: a view wider than the
/// terminal wraps, so moving up by its line count would not find its top.
const CLEAR: &str = "\x1b[H\x1b[2J";

impl<'a> Watch<'a> {
    fn new(settings: &'a StatusSettings, scope: &'a Scope) -> Self {
        Watch {
            settings,
            scope,
            redraw: settings.global.output == OutputFormat::Text && std::io::stdout().is_terminal(),
            shown: Vec::new(),
            reader_gone: false,
        }
    }

    /// Writes `text` to stdout, noting a reader that has gone.
    fn write(&mut self, text: &str) -> Result<()> {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let result = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush());
        if matches!(&result, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            self.reader_gone = true;
        }
        super::written(result)
    }

    /// Reads the runs again and again (bounded backoff: [`next_interval`]) until they are
    /// settled, `deadline` passes or the command is cancelled; `runs` is the first read.
    async fn follow(
        mut self,
        ctx: &ApiContext,
        mut runs: Vec<RunStatus>,
        deadline: Instant,
    ) -> Result<()> {
        let mut follow = Follow::new(self.settings.fail_fast);
        let mut interval = MIN_INTERVAL;
        loop {
            let now = jiff::Timestamp::now();
            let changed = self.show(&runs, now)?;
            if self.reader_gone || stdout_reader_gone() {
                // Nobody is left to show a change to (`status --watch | head -3`): stop
                // instead of following to the end; as any command whose reader went away,
                // it exits 0 without a message.
                tracing::debug!("stdout's reader has gone: no longer following");
                return Ok(());
            }
            if let Some(settled) = follow.observe(&runs, now) {
                return self.settled(settled);
            }
            interval = next_interval(interval, changed);
            let next = (Instant::now() + interval).min(deadline);
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(Error::Interrupted),
                () = tokio::time::sleep_until(next) => {}
            }
            if next == deadline {
                return Err(self.timed_out(&runs, now));
            }
            runs = collect(ctx, self.scope).await?;
        }
    }

    /// Writes what changed since the last read; whether anything did.
    fn show(&mut self, runs: &[RunStatus], now: jiff::Timestamp) -> Result<bool> {
        if self.redraw || self.settings.wide || self.settings.global.output.is_document() {
            // The whole view; ages alone are no change (the key leaves them out).
            let key = runs
                .iter()
                .map(|r| (r.run_id.clone(), run_change_key(r, self.settings.wide)));
            let key: Vec<_> = key.collect();
            if key == self.shown {
                return Ok(false);
            }
            self.shown = key;
            let mut text = render(self.settings, self.scope, runs, now)?;
            if self.redraw {
                text.insert_str(0, CLEAR);
                text.push_str("Following until every VM runs and is ready; Ctrl-C stops.\n");
            } else if self.settings.global.output == OutputFormat::Text {
                text.insert_str(0, &format!("{}\n", clock(now)));
            } else if self.settings.global.output == OutputFormat::Yaml {
                text.insert_str(0, "---\n");
            }
            self.write(&text)?;
            return Ok(true);
        }
        // A line per run that changed (or appeared).
        let mut lines = String::new();
        let mut shown = Vec::with_capacity(runs.len());
        for run in runs {
            let entry = (run.run_id.clone(), run_change_key(run, false));
            if !self.shown.contains(&entry) {
                lines.push_str(&format!("{} {}\n", clock(now), run_line(run, now)));
            }
            shown.push(entry);
        }
        for (gone, _) in self
            .shown
            .iter()
            .filter(|(id, _)| !runs.iter().any(|r| &r.run_id == id))
        {
            let id = gone.as_deref().unwrap_or("(none)");
            lines.push_str(&format!("{} {id}: no VMs left\n", clock(now)));
        }
        self.shown = shown;
        if lines.is_empty() {
            return Ok(false);
        }
        self.write(&lines)?;
        Ok(true)
    }

    /// The end of following: a sentence (exit 0) or the error that says why not.
    fn settled(&self, settled: Settled) -> Result<()> {
        match settled {
            Settled::AllReady { vms, runs } => {
                if self.settings.global.output.is_document() {
                    return Ok(());
                }
                super::write_stdout(&format!(
                    "All {vms} VM(s) of {runs} run(s) are running and ready.\n"
                ))
            }
            Settled::Failed { namespace, vm, why } => Err(Error::runtime(format!(
                "VM {vm} in namespace {namespace} failed: {}",
                crate::terminal::safe(&why, crate::terminal::LINE_CHARS)
            ))),
            Settled::Stuck {
                namespace,
                vm,
                why,
                grace,
            } => Err(Error::runtime(format!(
                "VM {vm} in namespace {namespace} stayed {} for {} (--fail-fast); \
                 `virtwork status -o wide` shows every VM",
                crate::terminal::safe(&why, crate::terminal::LINE_CHARS),
                format_age(Some(grace.as_secs() as i64))
            ))),
            Settled::Nothing if self.shown.is_empty() => {
                let what = match self.scope.run_id.as_deref() {
                    Some(id) => format!("no VMs of run {id}"),
                    None => "no virtwork runs".to_string(),
                };
                Err(Error::runtime(format!(
                    "{what} in {}: nothing to follow",
                    place(self.scope.namespace.as_deref())
                )))
            }
            Settled::Nothing => Err(Error::runtime(format!(
                "every VM followed in {} is gone (deleted while following)",
                place(self.scope.namespace.as_deref())
            ))),
        }
    }

    /// `--timeout` passed with VMs not ready: how far the runs got, and the oldest VM not
    /// ready with its reason.
    fn timed_out(&self, runs: &[RunStatus], now: jiff::Timestamp) -> Error {
        let total: usize = runs.iter().map(|r| r.vms.len()).sum();
        let summaries: Vec<RunSummary<'_>> = runs.iter().map(RunSummary::of).collect();
        let ready: usize = summaries.iter().map(|s| s.ready).sum();
        let oldest = summaries
            .iter()
            .filter_map(|s| s.oldest_not_ready)
            .min_by_key(|vm| (vm.created_at.is_none(), vm.created_at));
        let mut message = format!(
            "{ready} of {total} VM(s) ready when --timeout {} ran out",
            format_age(Some(self.settings.timeout.get() as i64))
        );
        if let Some(vm) = oldest {
            let age = vm
                .created_at
                .map(|created| (now.as_second() - created.as_second()).max(0));
            message.push_str(&format!(
                "; oldest not ready: {} in namespace {} ({}): {}",
                vm.name,
                vm.namespace,
                format_age(age),
                crate::terminal::safe(&vm.why(), crate::terminal::LINE_CHARS)
            ));
        }
        Error::runtime(message)
    }
}

/// Whether stdout is a pipe or socket whose reader has gone, asked without writing: a
/// fleet that does not change writes nothing, so `status --watch | head -1` would otherwise
/// go on polling until it settles. poll(2) with no events asked still reports POLLERR (a
/// pipe whose read end closed) and POLLHUP (a socket whose peer closed); a terminal or a
/// file reports neither.
fn stdout_reader_gone() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout; poll(2) only writes `revents`.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// `16:40:02`: when a change was seen (UTC).
fn clock(now: jiff::Timestamp) -> String {
    now.strftime("%H:%M:%S").to_string()
}

/// An empty answer for a namespace that does not exist is a typo more often than a cleaned-up
/// fleet: say which it is.
async fn check_namespace_exists(ctx: &ApiContext, ns: &str) -> Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(ctx.client.clone());
    let what = format!("reading namespace {ns}");
    match ctx.call(&what, || api.get_opt(ns)).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Error::runtime(format!(
            "namespace {ns} does not exist; give the namespace of a run with --namespace, or \
             see every namespace with `virtwork status -A`"
        ))),
        Err(crate::k8s::retry::RetryError::Cancelled) => Err(Error::Interrupted),
        // A user who may not read namespaces (namespace-scoped RBAC): "no runs" stands.
        Err(_) => Ok(()),
    }
}
