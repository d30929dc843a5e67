//! Paginated LISTs that always end: every list call of cleanup, status and preflight goes
//! through [`list_pages`], which asks for [`LIST_PAGE_SIZE`] items at a time and stops with a
//! clear error when the server repeats a continue token or keeps paging past
//! [`MAX_LIST_PAGES`], when the command's deadline has passed (no page starts or runs past
//! it), or when the command is cancelled. Callers keep only what they need from each page (metadata-only lists where the
//! metadata is enough, so Secret data is never even transferred).
//!
//! [`Pager`] is the sans-IO bookkeeping, tested without a server; [`list_pages`] is the thin
//! async loop around it.

use std::collections::BTreeSet;
use std::future::Future;

use kube::api::{ListParams, ObjectList};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::k8s::retry::{RetryPolicy, retry};

/// Page size of every list call (`limit`/`continue`).
pub const LIST_PAGE_SIZE: u32 = 500;
/// Most pages one list may take: 100,000 objects of one kind at [`LIST_PAGE_SIZE`], far beyond
/// any fleet virtwork creates, yet a bound on time and memory when a server never stops.
pub const MAX_LIST_PAGES: u32 = 200;

/// Why a paginated list was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStop {
    /// The server handed out a continue token it had handed out before (a loop).
    RepeatedToken,
    /// More than [`MAX_LIST_PAGES`] pages.
    TooManyPages,
}

/// Bookkeeping of one paginated list: counts pages and remembers every continue token.
#[derive(Debug, Default)]
pub struct Pager {
    tokens: BTreeSet<String>,
    pages: u32,
}

impl Pager {
    /// Records a page whose list metadata carried `token`; returns the token to ask for next,
    /// None when the list is complete, or why to stop.
    pub fn next_token(
        &mut self,
        token: Option<String>,
    ) -> std::result::Result<Option<String>, PageStop> {
        self.pages = self.pages.saturating_add(1);
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        if !self.tokens.insert(token.clone()) {
            return Err(PageStop::RepeatedToken);
        }
        if self.pages >= MAX_LIST_PAGES {
            return Err(PageStop::TooManyPages);
        }
        Ok(Some(token))
    }

    /// Pages received so far.
    pub fn pages(&self) -> u32 {
        self.pages
    }
}

/// The one-line error for a list stopped after `pages` pages.
pub fn stop_error(what: &str, stop: PageStop, pages: u32) -> Error {
    Error::runtime(match stop {
        PageStop::RepeatedToken => format!(
            "{what}: the API server returned the same continue token twice (after {pages} pages); \
             stopped instead of listing in a loop"
        ),
        PageStop::TooManyPages => format!(
            "{what}: the API server was still returning continue tokens after {pages} pages \
             ({} objects per page); stopped (a list this long is not virtwork's)",
            LIST_PAGE_SIZE
        ),
    })
}

/// Lists page by page: `fetch` makes one LIST call with the given parameters (label
/// `selector`, [`LIST_PAGE_SIZE`], the continue token), retried under `policy`; `keep`
/// receives each page's items and keeps what it needs. Between pages the deadline and
/// cancellation are checked.
pub async fn list_pages<T, F, Fut>(
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    what: &str,
    selector: &str,
    mut fetch: F,
    mut keep: impl FnMut(Vec<T>),
) -> Result<()>
where
    T: Clone,
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = std::result::Result<ObjectList<T>, kube::Error>>,
{
    let mut pager = Pager::default();
    let mut token: Option<String> = None;
    loop {
        // The deadline is checked by `retry` before every page: no page starts after it, and
        // none runs past it.
        if cancel.is_cancelled() {
            return Err(Error::Interrupted);
        }
        let mut params = ListParams::default().labels(selector).limit(LIST_PAGE_SIZE);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = retry(policy, cancel, what, || fetch(params.clone()))
            .await
            .map_err(|e| e.into_error(what.to_string()))?;
        let next = page.metadata.continue_.clone();
        keep(page.items);
        match pager.next_token(next) {
            Ok(Some(next)) => token = Some(next),
            Ok(None) => return Ok(()),
            Err(stop) => return Err(stop_error(what, stop, pager.pages())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_ends_without_a_token() {
        let mut pager = Pager::default();
        assert_eq!(pager.next_token(Some("a".into())), Ok(Some("a".into())));
        assert_eq!(pager.next_token(Some(String::new())), Ok(None));
        assert_eq!(pager.pages(), 2);
    }

    #[test]
    fn a_token_seen_before_stops_the_list() {
        let mut pager = Pager::default();
        assert_eq!(pager.next_token(Some("a".into())), Ok(Some("a".into())));
        assert_eq!(pager.next_token(Some("b".into())), Ok(Some("b".into())));
        assert_eq!(
            pager.next_token(Some("a".into())),
            Err(PageStop::RepeatedToken)
        );
    }

    #[test]
    fn fresh_tokens_forever_stop_at_the_page_cap() {
        let mut pager = Pager::default();
        let mut pages = 0;
        let stop = loop {
            match pager.next_token(Some(format!("t{pages}"))) {
                Ok(Some(_)) => pages += 1,
                Ok(None) => unreachable!(),
                Err(stop) => break stop,
            }
        };
        assert_eq!(stop, PageStop::TooManyPages);
        assert_eq!(pager.pages(), MAX_LIST_PAGES);
        let msg = stop_error("listing secrets in ns", stop, pager.pages()).to_string();
        assert!(
            msg.starts_with("listing secrets in ns: ") && msg.contains("200 pages"),
            "{msg}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn pages_stop_at_the_deadline_and_on_cancellation() {
        use tokio::time::Instant;
        let start = Instant::now();
        let policy = RetryPolicy::until(start + std::time::Duration::from_secs(10));
        let cancel = CancellationToken::new();
        let mut calls = 0u32;
        let err = list_pages::<u32, _, _>(
            &policy,
            &cancel,
            "listing things",
            "",
            |_| {
                calls += 1;
                let n = calls;
                async move {
                    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                    let mut list: ObjectList<u32> = serde_json::from_value(serde_json::json!({
                        "metadata": {"continue": format!("t{n}")}, "items": []
                    }))
                    .unwrap();
                    list.items = vec![n];
                    Ok(list)
                }
            },
            |_| {},
        )
        .await
        .unwrap_err();
        // Pages end at 3, 6 and 9 s; the fourth may only run until the 10 s deadline.
        assert_eq!(Instant::now(), start + std::time::Duration::from_secs(10));
        assert_eq!(calls, 4);
        assert!(err.to_string().starts_with("listing things: "), "{err}");

        cancel.cancel();
        let err = list_pages::<u32, _, _>(
            &RetryPolicy::until(Instant::now() + std::time::Duration::from_secs(10)),
            &cancel,
            "listing things",
            "",
            |_| async { unreachable!() },
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Interrupted));
    }
}
