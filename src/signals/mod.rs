//! What a workload's load looks like from outside the guest: the expected-signal contract per
//! workload ([`contract`]: which KubeVirt per-VMI metric, which PromQL expression, which
//! threshold) and the PromQL text it is written in ([`promql`]: escaping, selectors, the
//! templates catalog entries declare their own signals with).
//!
//! Pure and below the workloads: workloads and the plan record signal parameters and
//! validate catalog signal templates with it; `verify` and the monitoring kit judge and
//! render it. Must not: do I/O, or know about workloads, plans or the cluster.

pub mod contract;
pub mod promql;
