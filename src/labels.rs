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

/// Label selector for everything virtwork manages, optionally narrowed to one run.
pub fn managed_selector(run_id: Option<&str>) -> String {
    match run_id {
        Some(id) => format!("{MANAGED_BY}={MANAGED_BY_VALUE},{RUN_ID}={id}"),
        None => format!("{MANAGED_BY}={MANAGED_BY_VALUE}"),
    }
}
