//! Label keys and values virtwork puts on every object it creates, and the selectors that
//! find them again. Cleanup, status and the audit linking all rely on these exact strings.

/// `app.kubernetes.io/managed-by`; value [`MANAGED_BY_VALUE`] on everything virtwork creates.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "virtwork";
/// `app.kubernetes.io/name`: `virtwork-<workload>` on VMs/Secrets, `virtwork` on Services.
pub const NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/component`: the workload name.
pub const COMPONENT: &str = "app.kubernetes.io/component";
/// `virtwork/run-id`: the UUID v4 of the run that created the object.
pub const RUN_ID: &str = "virtwork/run-id";
/// `virtwork/role`: the role of a VM in a multi-role workload.
pub const ROLE: &str = "virtwork/role";
/// `virtwork/load-profile`: the shape of the load profile a VM's load follows (absent on a
/// steady VM). KubeVirt copies it onto the VMI's series, so an alert can tell a low phase from
/// a load that stopped.
pub const LOAD_PROFILE: &str = "virtwork/load-profile";
/// `virtwork/churn-id`: the UUID of the `virtwork churn` execution that created the object
/// (its live migrations), next to the run id of the VM it migrates.
pub const CHURN_ID: &str = "virtwork/churn-id";

/// Label selector for everything virtwork manages, optionally narrowed to one run.
///
/// Without a run, the run-id label must still be present (with any value, the Go tool's
/// `--no-audit` runs left it empty): every object a run creates carries it, while objects
/// that only carry the managed-by label — the Go tool's deployment labelled its own Secret
/// and audit PVC that way — were not made by a run and are never touched.
pub fn managed_selector(run_id: Option<&str>) -> String {
    match run_id {
        Some(id) => format!("{MANAGED_BY}={MANAGED_BY_VALUE},{RUN_ID}={id}"),
        None => format!("{MANAGED_BY}={MANAGED_BY_VALUE},{RUN_ID}"),
    }
}

/// Whether `labels` mark an object a virtwork run created: what [`managed_selector`] selects
/// without a run.
pub fn made_by_a_run(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels.is_some_and(|l| {
        l.get(MANAGED_BY).map(String::as_str) == Some(MANAGED_BY_VALUE) && l.contains_key(RUN_ID)
    })
}
