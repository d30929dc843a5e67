//! The one writer thread of a process's audit database: callers queue writes and return at
//! once; the thread applies them in order, each in its own `BEGIN IMMEDIATE` transaction, so a
//! database locked by another process never stalls the command. Flushing waits for what was
//! queued; dropping the last handle gives queued writes [`DRAIN_TIMEOUT`] to land.
//!
//! Must not: fail the caller (a failed write warns with its operation and carries on).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::audit::schema;

/// How long the last handle's drop waits for queued writes to land. Writes of virtwork
/// processes hold the lock for milliseconds; a database still busy after this is held by
/// something else (an open `sqlite3` shell), and the command must not hang on it.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`crate::audit::Auditor::flush`] waits: one write may wait out the whole busy timeout.
pub(super) const FLUSH_TIMEOUT: Duration = Duration::from_secs(schema::BUSY_TIMEOUT.as_secs() + 5);

/// One queued write, run on the writer thread under the caller's tracing dispatcher (so its
/// warnings land where the caller's logs go).
struct Job {
    run: Box<dyn FnOnce(&mut Connection) + Send>,
    dispatch: tracing::Dispatch,
}

/// The writer thread's queue.
pub(super) struct Store {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    /// Queued and not yet finished.
    pending: Arc<AtomicUsize>,
    /// Signalled once the writer thread has finished and closed the connection.
    finished: Mutex<Option<mpsc::Receiver<()>>>,
    pub(super) path: PathBuf,
}

impl Store {
    /// Starts the writer thread, which owns `conn` from now on.
    pub(super) fn start(conn: Connection, path: &Path) -> std::io::Result<Store> {
        let (sender, jobs) = mpsc::channel::<Job>();
        let (done, finished) = mpsc::sync_channel(1);
        let pending = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&pending);
        std::thread::Builder::new()
            .name("virtwork-audit".into())
            .spawn(move || {
                let mut conn = conn;
                for job in jobs {
                    tracing::dispatcher::with_default(&job.dispatch, || (job.run)(&mut conn));
                    counter.fetch_sub(1, Ordering::SeqCst);
                }
                drop(conn);
                let _ = done.send(());
            })?;
        Ok(Store {
            sender: Mutex::new(Some(sender)),
            pending,
            finished: Mutex::new(Some(finished)),
            path: path.to_path_buf(),
        })
    }

    /// Queues `run` for the writer thread; returns at once.
    pub(super) fn submit(&self, run: impl FnOnce(&mut Connection) + Send + 'static) {
        let job = Job {
            run: Box::new(run),
            dispatch: tracing::dispatcher::get_default(|d| d.clone()),
        };
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = sender.as_ref() {
            self.pending.fetch_add(1, Ordering::SeqCst);
            if sender.send(job).is_err() {
                self.pending.fetch_sub(1, Ordering::SeqCst);
                tracing::warn!(
                    op = "Queue",
                    "audit record failed: the writer thread is gone"
                );
            }
        }
    }

    /// Waits until everything queued before this call has been written, at most `limit`;
    /// whether it all landed in time.
    pub(super) fn flush(&self, limit: Duration) -> bool {
        let (reached, wait) = mpsc::sync_channel(1);
        self.submit(move |_| {
            let _ = reached.send(());
        });
        wait.recv_timeout(limit).is_ok()
    }
}

impl Drop for Store {
    /// Closes the queue and gives the queued writes [`DRAIN_TIMEOUT`] to land.
    fn drop(&mut self) {
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let finished = self
            .finished
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(finished) = finished
            && finished.recv_timeout(DRAIN_TIMEOUT).is_err()
        {
            tracing::warn!(
                path = %self.path.display(),
                unwritten = self.pending.load(Ordering::SeqCst),
                timeout_s = DRAIN_TIMEOUT.as_secs(),
                "audit database still busy (locked by another process?): gave up waiting; the last records of this command are not written"
            );
        }
    }
}

/// Runs one write in its own `BEGIN IMMEDIATE` transaction (on the writer thread); a failure
/// warns and yields `None`.
pub(super) fn write_logged<T>(
    conn: &mut Connection,
    op: &'static str,
    f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
) -> Option<T> {
    match try_write(conn, f) {
        Ok(value) => Some(value),
        Err(error) => {
            tracing::warn!(op, error = %error, "audit record failed");
            None
        }
    }
}

pub(super) fn try_write<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let value = f(&tx)?;
    tx.commit()?;
    Ok(value)
}
