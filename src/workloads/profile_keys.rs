//! The names of the load-profile params (`profile`, `profile-low`, ...): the one list both the
//! profile driver (which declares and reads them) and the param checks (which name them when a
//! workload without profiles is given one) use.
//!
//! Must not: check values or know shapes (the profile driver and the schedule do).

/// The shape: `steady` (no profile, the default), `step`, `ramp`, `sine`, `spike`.
pub const PROFILE: &str = "profile";
pub const LOW: &str = "profile-low";
pub const HIGH: &str = "profile-high";
pub const PERIOD: &str = "profile-period";
pub const DUTY: &str = "profile-duty";
pub const DURATION: &str = "profile-duration";
pub const BURST: &str = "profile-burst";
/// Every key a profile reads, in the order the docs list them.
pub(super) const PROFILE_KEYS: [&str; 6] = [LOW, HIGH, PERIOD, DUTY, DURATION, BURST];

/// Whether `key` is one of the params [`super::profile_driver::param_defs`] declares (a
/// workload without profiles names them in its unknown-param error).
pub fn is_profile_key(key: &str) -> bool {
    key == PROFILE || PROFILE_KEYS.contains(&key)
}
