//! Boot-storm control: when the next VM creation may begin under `--max-starting` (closed
//! loop on readiness) and `--ramp` (creations spread evenly over a duration).
//!
//! The decision is the sans-IO [`Pacer`]: given how long creation has been running and how
//! many VMs are ready, it says whether creation number `begun` may start now, at a later
//! instant, or only once another VM becomes ready. [`PaceGate`] is the thin async shell:
//! apply awaits [`PaceGate::admit`] before each VM unit, the readiness watch (running
//! alongside creation) publishes the ready count through a `tokio::sync::watch` channel.
//!
//! A VM counts as starting from the moment its creation begins (its Secret is sent) until
//! the readiness watch sees it meet the ready condition, so the limit holds on the cluster
//! whatever the creation latency. Must not: talk to the API server or read the settings.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::model::Pacing;

/// What the pacer says about the next creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It may begin now.
    Now,
    /// Not before this offset from the start of creation (the ramp's slot).
    At(Duration),
    /// Not until another VM becomes ready (`--max-starting` reached).
    WhenReady,
}

/// Sans-IO pacing state of one run's VM creations.
#[derive(Debug, Clone)]
pub struct Pacer {
    total: usize,
    max_starting: Option<usize>,
    ramp: Option<Duration>,
    begun: usize,
}

impl Pacer {
    /// Paces `total` VM creations under `pacing`.
    pub fn new(total: usize, pacing: Pacing) -> Self {
        Pacer {
            total,
            max_starting: pacing.max_starting.map(|n| n.get() as usize),
            ramp: pacing.ramp.map(|r| r.get()),
            begun: 0,
        }
    }

    /// Whether anything limits creation at all.
    pub fn is_paced(&self) -> bool {
        self.max_starting.is_some() || self.ramp.is_some()
    }

    /// Creations begun so far.
    pub fn begun(&self) -> usize {
        self.begun
    }

    /// VMs begun and not yet ready, given `ready` of them are ready.
    pub fn starting(&self, ready: usize) -> usize {
        self.begun.saturating_sub(ready)
    }

    /// The ramp's slot of creation `index`: index x ramp / total after the start, so the
    /// creations are spread evenly and the last one begins one interval before the end.
    pub fn slot(&self, index: usize) -> Option<Duration> {
        let ramp = self.ramp?;
        let total = self.total.max(1) as u128;
        let nanos = ramp.as_nanos() * index as u128 / total;
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// May the next creation begin `elapsed` after creation started, with `ready` VMs ready?
    pub fn admit(&self, elapsed: Duration, ready: usize) -> Admission {
        if let Some(max) = self.max_starting
            && self.starting(ready) >= max
        {
            return Admission::WhenReady;
        }
        match self.slot(self.begun) {
            Some(at) if at > elapsed => Admission::At(at),
            _ => Admission::Now,
        }
    }

    /// Records that the next creation began.
    pub fn begin(&mut self) {
        self.begun += 1;
    }
}

/// The async shell around a [`Pacer`]: waits for the ramp's slots and for readiness.
#[derive(Debug)]
pub struct PaceGate {
    pacer: Mutex<Pacer>,
    ready: watch::Receiver<usize>,
    started: Instant,
}

impl PaceGate {
    /// A gate for `pacer` whose ready count comes from `ready`; the ramp starts now.
    pub fn new(pacer: Pacer, ready: watch::Receiver<usize>) -> Self {
        PaceGate {
            pacer: Mutex::new(pacer),
            ready,
            started: Instant::now(),
        }
    }

    /// Waits until the next creation may begin and counts it as begun. Fails when `cancel`
    /// fires, when the ramp's slot lies past `deadline`, or when readiness stops being
    /// reported while creation waits for it.
    pub async fn admit(&self, cancel: &CancellationToken, deadline: Instant) -> Result<()> {
        let mut ready = self.ready.clone();
        loop {
            if cancel.is_cancelled() {
                return Err(Error::Interrupted);
            }
            let count = *ready.borrow_and_update();
            let decision = {
                let mut pacer = self.pacer.lock().expect("pacer lock");
                let decision = pacer.admit(self.started.elapsed(), count);
                if decision == Admission::Now {
                    pacer.begin();
                }
                decision
            };
            match decision {
                Admission::Now => return Ok(()),
                Admission::At(offset) => {
                    let at = self.started + offset;
                    if at > deadline {
                        return Err(Error::runtime(
                            "--timeout passed before --ramp's schedule could create every VM: \
                             raise --timeout or shorten --ramp",
                        ));
                    }
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Err(Error::Interrupted),
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                Admission::WhenReady => {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => return Err(Error::Interrupted),
                        () = tokio::time::sleep_until(deadline) => {
                            return Err(Error::runtime(
                                "--timeout passed while --max-starting held creation back \
                                 (earlier VMs did not become ready)",
                            ));
                        }
                        changed = ready.changed() => {
                            if changed.is_err() {
                                return Err(Error::runtime(
                                    "the readiness watch ended while --max-starting held \
                                     creation back",
                                ));
                            }
                        }
                    }
                }
            }
        }
    }

    /// VMs begun and not yet ready now.
    pub fn starting(&self) -> usize {
        let ready = *self.ready.borrow();
        self.pacer.lock().expect("pacer lock").starting(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MaxStarting, Ramp};

    fn pacing(max: Option<u32>, ramp_secs: Option<u64>) -> Pacing {
        Pacing {
            max_starting: max.map(|n| MaxStarting::new(n).unwrap()),
            ramp: ramp_secs.map(|s| Ramp::new(Duration::from_secs(s)).unwrap()),
        }
    }

    #[test]
    fn unpaced_creation_always_goes() {
        let mut p = Pacer::new(3, Pacing::default());
        assert!(!p.is_paced());
        for _ in 0..3 {
            assert_eq!(p.admit(Duration::ZERO, 0), Admission::Now);
            p.begin();
        }
    }

    #[test]
    fn max_starting_closes_on_readiness() {
        let mut p = Pacer::new(10, pacing(Some(2), None));
        assert_eq!(p.admit(Duration::ZERO, 0), Admission::Now);
        p.begin();
        assert_eq!(p.admit(Duration::ZERO, 0), Admission::Now);
        p.begin();
        // Two created, none ready: the third waits, whatever the time.
        assert_eq!(p.admit(Duration::from_secs(3600), 0), Admission::WhenReady);
        assert_eq!(p.starting(0), 2);
        // One became ready: one more may start, then the limit holds again.
        assert_eq!(p.admit(Duration::ZERO, 1), Admission::Now);
        p.begin();
        assert_eq!(p.admit(Duration::ZERO, 1), Admission::WhenReady);
        assert_eq!(p.starting(3), 0);
    }

    #[test]
    fn ramp_spreads_creations_evenly() {
        let mut p = Pacer::new(60, pacing(None, Some(30)));
        let slots: Vec<Duration> = (0..60).map(|i| p.slot(i).unwrap()).collect();
        assert_eq!(slots[0], Duration::ZERO);
        assert_eq!(slots[1], Duration::from_millis(500));
        assert_eq!(slots[59], Duration::from_millis(29_500));
        assert_eq!(p.admit(Duration::ZERO, 0), Admission::Now);
        p.begin();
        assert_eq!(
            p.admit(Duration::from_millis(100), 0),
            Admission::At(Duration::from_millis(500))
        );
        // Late (the previous create was slow): go at once, no catching-up burst beyond the
        // slots already due.
        assert_eq!(p.admit(Duration::from_millis(700), 0), Admission::Now);
    }

    #[test]
    fn both_limits_apply_together() {
        let mut p = Pacer::new(4, pacing(Some(1), Some(4)));
        assert_eq!(p.admit(Duration::ZERO, 0), Admission::Now);
        p.begin();
        // Slot due, but the one starting VM is not ready.
        assert_eq!(p.admit(Duration::from_secs(2), 0), Admission::WhenReady);
        // Ready, but the slot (1 s) is not due yet.
        assert_eq!(
            p.admit(Duration::from_millis(10), 1),
            Admission::At(Duration::from_secs(1))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gate_waits_for_readiness_and_slots() {
        let (tx, rx) = watch::channel(0usize);
        let gate = std::sync::Arc::new(PaceGate::new(Pacer::new(3, pacing(Some(1), None)), rx));
        let cancel = CancellationToken::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        gate.admit(&cancel, deadline).await.unwrap();
        let waiting = {
            let gate = gate.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { gate.admit(&cancel, deadline).await })
        };
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished(), "admitted with one VM starting");
        tx.send(1).unwrap();
        waiting.await.unwrap().unwrap();
        assert_eq!(gate.starting(), 1);
        // Cancelled while waiting.
        let cancelled = {
            let gate = gate.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { gate.admit(&cancel, deadline).await })
        };
        cancel.cancel();
        assert!(matches!(cancelled.await.unwrap(), Err(Error::Interrupted)));
    }
}
