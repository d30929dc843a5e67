//! Load profiles in the guest: the `profile*` params a profiled workload takes, the checks
//! between them, and the payload parts that drive the shape.
//!
//! A profiled unit runs [`DRIVER`] instead of its load tool. The driver reads the schedule
//! (rendered by [`crate::profile_schedule`]) and runs the workload's level script with the level of
//! the moment; when a phase begins it stops that process group and starts the script again at
//! the new level, inside the same service, so the unit stays `active` throughout and
//! `systemctl` never shows a failure that is not one. The profile's clock is the time of the
//! unit's first start, written once to a file under `/var/lib/virtwork`, so a restarted unit or
//! a rebooted guest resumes the profile where the wall clock says it is.
//!
//! Must not: compute shapes (crate::profile_schedule does); know a workload's load tool (each
//! workload writes its own level script).

use std::collections::BTreeMap;

use super::params::{ParamDef, ResolvedParams, StrRule};
use super::profile_keys::{BURST, DURATION, DUTY, HIGH, LOW, PERIOD, PROFILE, PROFILE_KEYS};
use super::scripts::Unit;
use crate::cloudinit::WriteFile;
use crate::error::{Error, Result};
use crate::profile_schedule::{self, Levels, LoadProfile};

/// The in-guest driver every profiled unit runs.
pub const DRIVER: &str = "/usr/local/bin/virtwork-load-driver";

/// What a level means for one workload, its largest value and the default levels. Built-ins
/// declare theirs as constants; a catalog entry's comes from its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelScale<'a> {
    /// E.g. "percent load of each CPU"; shown in the param descriptions.
    pub meaning: &'a str,
    pub max: i64,
    pub default_low: i64,
    pub default_high: i64,
}

/// The profile params of a workload whose levels follow `scale`.
pub fn param_defs(scale: LevelScale<'_>) -> Vec<ParamDef> {
    vec![
        ParamDef::string(
            PROFILE,
            "steady",
            StrRule::OneOf(profile_schedule::SHAPES),
            "load profile: steady (constant, the other params), step, ramp, sine or spike (see docs/workloads.md)",
        ),
        ParamDef::int(
            LOW,
            scale.default_low,
            0,
            scale.max - 1,
            &format!("profile's low level, {}; 0 = no load", scale.meaning),
        ),
        ParamDef::int(
            HIGH,
            scale.default_high,
            1,
            scale.max,
            &format!("profile's high level, {}", scale.meaning),
        ),
        ParamDef::string(
            PERIOD,
            "10m",
            StrRule::Duration,
            "step, sine, spike: length of one cycle",
        ),
        ParamDef::int(
            DUTY,
            50,
            1,
            99,
            "step: percent of each period at the high level",
        ),
        ParamDef::string(
            DURATION,
            "10m",
            StrRule::Duration,
            "ramp: time from the low to the high level (then held)",
        ),
        ParamDef::string(
            BURST,
            "30s",
            StrRule::Duration,
            "spike: length of the burst at the high level in each period",
        ),
    ]
}

/// The profile keys each shape reads.
fn keys_of(shape: &str) -> &'static [&'static str] {
    match shape {
        "step" => &[LOW, HIGH, PERIOD, DUTY],
        "ramp" => &[LOW, HIGH, DURATION],
        "sine" => &[LOW, HIGH, PERIOD],
        "spike" => &[LOW, HIGH, PERIOD, BURST],
        _ => &[],
    }
}

/// The workload's load profile, or `None` for `steady`. `given` are the params the user gave:
/// a profile key the shape does not read, or one of `steady_keys` (the constant load's own
/// intensity) next to a profile, is an error instead of being silently ignored.
pub fn from_params(
    workload: &str,
    params: &ResolvedParams,
    given: &BTreeMap<String, String>,
    steady_keys: &[&str],
) -> Result<Option<LoadProfile>> {
    let shape = params.str(PROFILE);
    let reads = keys_of(shape);
    let is_given = |key: &str| given.get(key).is_some_and(|v| !v.is_empty());
    let invalid = |detail: String| {
        Error::input(format!(
            "invalid params for workload {workload:?}: {detail}"
        ))
    };
    if let Some(key) = PROFILE_KEYS
        .iter()
        .find(|key| is_given(key) && !reads.contains(key))
    {
        return Err(invalid(if reads.is_empty() {
            format!(
                "param {key:?} needs a load profile: add {workload}.profile=step (or ramp, sine, spike)"
            )
        } else {
            format!(
                "param {key:?} does not apply to profile {shape:?}, which reads {}",
                reads.join(", ")
            )
        }));
    }
    if reads.is_empty() {
        return Ok(None);
    }
    if let Some(key) = steady_keys.iter().find(|key| is_given(key)) {
        return Err(invalid(format!(
            "param {key:?} sets the steady load; with profile {shape:?} give the levels as {LOW} and {HIGH}"
        )));
    }
    let levels = Levels {
        low: params.int(LOW) as u32,
        high: params.int(HIGH) as u32,
    };
    let profile = match shape {
        "step" => LoadProfile::step(levels, params.seconds(PERIOD), params.int(DUTY) as u32),
        "ramp" => LoadProfile::ramp(levels, params.seconds(DURATION)),
        "sine" => LoadProfile::sine(levels, params.seconds(PERIOD)),
        _ => LoadProfile::spike(levels, params.seconds(PERIOD), params.seconds(BURST)),
    };
    profile
        .map(Some)
        .map_err(|why| invalid(format!("profile {shape:?}: {why}")))
}

/// The profile keys a profiled VM records for verify (with [`PROFILE`]): every key a shape
/// may read, so the recorded set does not depend on the shape.
pub const RECORDED_KEYS: [&str; 7] = [PROFILE, LOW, HIGH, PERIOD, DUTY, DURATION, BURST];

/// The load profile a VM's run recorded (its resolved params, read back from the cluster):
/// `None` for `steady` or no profile. Err: why the record is unusable, for the report; the
/// values are checked again, since anyone who may edit the VM may edit what it records.
pub fn from_recorded(
    params: &BTreeMap<String, String>,
) -> std::result::Result<Option<LoadProfile>, String> {
    let shape = params.get(PROFILE).map_or("steady", String::as_str);
    if shape == "steady" {
        return Ok(None);
    }
    let get = |key: &str| {
        params
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| format!("the recorded profile {shape:?} has no {key}"))
    };
    let number = |key: &str| -> std::result::Result<u32, String> {
        get(key)?
            .parse()
            .map_err(|_| format!("recorded {key} is not a whole number"))
    };
    let seconds = |key: &str| -> std::result::Result<u64, String> {
        let value = get(key)?;
        profile_schedule::parse_duration(value).ok_or_else(|| {
            format!(
                "recorded {key} {value:?} is not {}",
                profile_schedule::DURATION_FORM
            )
        })
    };
    let levels = Levels {
        low: number(LOW)?,
        high: number(HIGH)?,
    };
    let profile = match shape {
        "step" => LoadProfile::step(levels, seconds(PERIOD)?, number(DUTY)?),
        "ramp" => LoadProfile::ramp(levels, seconds(DURATION)?),
        "sine" => LoadProfile::sine(levels, seconds(PERIOD)?),
        "spike" => LoadProfile::spike(levels, seconds(PERIOD)?, seconds(BURST)?),
        other => {
            return Err(format!(
                "recorded profile {other:?} is not one of {}",
                profile_schedule::SHAPES.join(", ")
            ));
        }
    };
    profile
        .map(Some)
        .map_err(|why| format!("recorded profile {shape:?}: {why}"))
}

/// Where a workload's schedule goes in the guest.
pub fn schedule_path(workload: &str) -> String {
    format!("/etc/virtwork/{workload}.schedule")
}

/// Where the driver keeps the time of the unit's first start.
pub fn start_path(workload: &str) -> String {
    format!("/var/lib/virtwork/{workload}.profile-start")
}

/// Where a workload's level script goes: it runs the load tool at the level given as `$1`.
pub fn level_script_path(workload: &str) -> String {
    format!("/usr/local/bin/virtwork-{workload}-at-level")
}

/// A workload unit driven by `profile`: its ExecStart runs the driver with the workload's
/// level script (whose text is `level_script`). Returns the unit's `ExecStart=` value and the
/// files it needs (driver, schedule, level script).
pub fn driven(
    workload: &str,
    profile: &LoadProfile,
    level_script: String,
) -> (String, Vec<WriteFile>) {
    let schedule = schedule_path(workload);
    let level = level_script_path(workload);
    let comment = format!(
        "virtwork {workload} load profile: {}\nRead by {DRIVER}: repeat <period s> (0 = hold the last phase), then <offset s> <level> per phase.",
        profile.describe()
    );
    let exec_start = format!("{DRIVER} {schedule} {} {level}", start_path(workload));
    let files = vec![
        WriteFile::new(DRIVER, driver_script(), "0755"),
        WriteFile::new(&schedule, profile.schedule().render(&comment), "0644"),
        WriteFile::new(&level, level_script, "0755"),
    ];
    (exec_start, files)
}

/// What a unit running the driver needs: `/var/lib/virtwork` made by systemd and owned by the
/// unit's user (the start file; the database unit runs as `postgres`), and a stop that goes
/// through the driver: SIGTERM to it only (it stops the load's process group itself and exits
/// 0), then SIGKILL to whatever is left in the cgroup.
pub fn with_driver_settings(unit: Unit) -> Unit {
    DRIVER_SERVICE_SETTINGS
        .iter()
        .fold(unit, |unit, (key, value)| unit.service(key, *value))
}

/// The `[Service]` lines of [`with_driver_settings`].
const DRIVER_SERVICE_SETTINGS: [(&str, &str); 2] =
    [("StateDirectory", "virtwork"), ("KillMode", "mixed")];

/// A drop-in that makes a unit virtwork did not write (a catalog entry's) run the driver:
/// its `ExecStart=` lines are cleared and replaced by `exec_start`, with the driver's settings,
/// `Type=simple` (the driver stays in the foreground) and `Restart=always` (the driver ends
/// only when the load process did, and the profile goes on after a restart).
pub fn driver_drop_in(exec_start: &str, describe: &str) -> String {
    let mut text = format!(
        "# virtwork load profile ({describe}): this unit runs {DRIVER} instead of its own ExecStart.\n\
         [Service]\nType=simple\nExecStart=\nExecStart={exec_start}\nRestart=always\n"
    );
    for (key, value) in DRIVER_SERVICE_SETTINGS {
        text.push_str(&format!("{key}={value}\n"));
    }
    text
}

/// The text of [`DRIVER`].
// long: one shell script as a single literal; splitting it would scatter the script.
pub fn driver_script() -> String {
    r#"#!/bin/bash
# Usage: virtwork-load-driver SCHEDULE START_FILE LEVEL_COMMAND
# Runs LEVEL_COMMAND with the level SCHEDULE gives for now as its one argument, in a process
# group of its own, and restarts it at the new level when a phase begins (level 0: nothing
# runs). The unit running this stays active throughout. The profile's clock starts at the
# first start, kept in START_FILE, so a restart or a reboot resumes the profile where it is.
# Ends with an error when the load process exits by itself (the unit then restarts).
# Works with bash 4.3 and later: RHEL 8's 4.4 and Debian 10's 5.0 have no `wait -p` and
# ignore the ids given to `wait -n`, so the load's end is told by whether it still runs.
set -uo pipefail

if [ "${BASH_VERSINFO[0]}" -lt 4 ] || { [ "${BASH_VERSINFO[0]}" -eq 4 ] && [ "${BASH_VERSINFO[1]}" -lt 3 ]; }; then
  echo "ERROR: virtwork-load-driver needs bash 4.3 or later (wait -n); this is ${BASH_VERSION}" >&2
  exit 1
fi

SCHEDULE="$1"
START_FILE="$2"
LEVEL_COMMAND="$3"

REPEAT=0
OFFSETS=()
LEVELS=()
while read -r FIRST SECOND; do
  case "$FIRST" in
    '' | '#'*) ;;
    repeat) REPEAT="$SECOND" ;;
    *)
      OFFSETS+=("$FIRST")
      LEVELS+=("$SECOND")
      ;;
  esac
done < "$SCHEDULE"
if [ "${#OFFSETS[@]}" -eq 0 ]; then
  echo "ERROR: ${SCHEDULE} has no phases" >&2
  exit 1
fi

# The first start writes the clock's start; a missing or unreadable file starts it again, and
# so does a start bash arithmetic cannot hold, one in the future (the profile would stay in
# its first phase) or one before the guest's first boot (taken as the time cloud-init wrote
# SCHEDULE, less a day for clock corrections; a start before the current boot is what a
# reboot leaves, and resumes). Read as decimal: `08` is bad octal to bash.
start_clock() {
  START=$(date +%s)
  mkdir -p "$(dirname "$START_FILE")"
  echo "$START" > "${START_FILE}.new"
  sync "${START_FILE}.new" 2>/dev/null || sync
  mv "${START_FILE}.new" "$START_FILE"
}
START=$(head -c 64 "$START_FILE" 2>/dev/null | head -n 1)
NOW=$(date +%s)
WRITTEN=$(stat -c %Y "$SCHEDULE" 2>/dev/null || echo "$NOW")
case "$START" in
  '' | *[!0-9]*) start_clock ;;
  *)
    if [ "${#START}" -gt 18 ]; then
      echo "profile clock: start ${START:0:24} in ${START_FILE} is not a time; starting the clock again" >&2
      start_clock
    elif [ $((10#$START)) -gt "$NOW" ]; then
      echo "profile clock: start ${START} in ${START_FILE} is in the future (now ${NOW}); starting the clock again" >&2
      start_clock
    elif [ $((10#$START)) -lt $((WRITTEN - 86400)) ]; then
      echo "profile clock: start ${START} in ${START_FILE} is before the guest's first boot; starting the clock again" >&2
      start_clock
    else
      START=$((10#$START))
    fi
    ;;
esac

LOAD=""
NAP=""
CURRENT=""
# Stops the load's process group: SIGTERM, and SIGKILL for what is left after 10 s.
stop_load() {
  if [ -n "$LOAD" ]; then
    kill -TERM -- "-${LOAD}" 2>/dev/null || kill -TERM "$LOAD" 2>/dev/null
    for _ in $(seq 100); do
      kill -0 "$LOAD" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-${LOAD}" 2>/dev/null
    wait "$LOAD" 2>/dev/null
    LOAD=""
  fi
}
on_stop() {
  [ -n "$NAP" ] && kill "$NAP" 2>/dev/null
  stop_load
  exit 0
}
trap on_stop TERM INT

# The clock is read in milliseconds: in whole seconds every boundary is off by up to a second
# (the clock's start falls inside one), which can cut a short phase to nothing.
while true; do
  NOW_MS=$(date +%s%3N)
  ELAPSED_MS=$((NOW_MS - START * 1000))
  if [ "$ELAPSED_MS" -lt 0 ]; then ELAPSED_MS=0; fi
  ELAPSED=$((ELAPSED_MS / 1000))
  T_MS=$ELAPSED_MS
  if [ "$REPEAT" -gt 0 ]; then T_MS=$((ELAPSED_MS % (REPEAT * 1000))); fi
  LEVEL=${LEVELS[0]}
  UNTIL_NEXT_MS=""
  for i in "${!OFFSETS[@]}"; do
    if [ $((OFFSETS[i] * 1000)) -le "$T_MS" ]; then
      LEVEL=${LEVELS[$i]}
    else
      UNTIL_NEXT_MS=$((OFFSETS[i] * 1000 - T_MS))
      break
    fi
  done
  if [ -z "$UNTIL_NEXT_MS" ] && [ "$REPEAT" -gt 0 ]; then UNTIL_NEXT_MS=$((REPEAT * 1000 - T_MS)); fi
  if [ "$LEVEL" != "$CURRENT" ]; then
    stop_load
    echo "level ${LEVEL} at ${ELAPSED} s of the profile"
    if [ "$LEVEL" -gt 0 ]; then
      setsid "$LEVEL_COMMAND" "$LEVEL" &
      LOAD=$!
    fi
    CURRENT=$LEVEL
    # Stopping the old level can take its 10 s grace: the next phase is due by the clock,
    # not that long after it.
    if [ -n "$UNTIL_NEXT_MS" ]; then
      UNTIL_NEXT_MS=$((UNTIL_NEXT_MS - ($(date +%s%3N) - NOW_MS)))
      if [ "$UNTIL_NEXT_MS" -lt 0 ]; then UNTIL_NEXT_MS=0; fi
    fi
  fi
  # Sleep until the next phase (re-reading the clock at least every minute), waking at once
  # when the load process ends.
  SLEEP_MS=${UNTIL_NEXT_MS:-60000}
  if [ "$SLEEP_MS" -gt 60000 ]; then SLEEP_MS=60000; fi
  sleep "$((SLEEP_MS / 1000)).$(printf '%03d' $((SLEEP_MS % 1000)))" &
  NAP=$!
  if [ -n "$LOAD" ]; then
    # The nap and the load are the only jobs: wait for either, then ask which one ended.
    wait -n
    if ! kill -0 "$LOAD" 2>/dev/null; then
      wait "$LOAD"
      STATUS=$?
      kill "$NAP" 2>/dev/null
      echo "ERROR: the load process (level ${LEVEL}) exited with status ${STATUS}" >&2
      exit 1
    fi
    # The nap ended; if it was killed rather than done, reap it so the next `wait -n`
    # cannot return for it.
    kill "$NAP" 2>/dev/null && wait "$NAP" 2>/dev/null
  else
    wait "$NAP"
  fi
  NAP=""
done
"#
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::cpu;

    fn profile_of(pairs: &[(&str, &str)]) -> Result<Option<LoadProfile>> {
        let given: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let params = cpu::schema().resolve(&given)?;
        from_params("cpu", &params, &given, &["cpu-load-percent"])
    }

    fn error_of(pairs: &[(&str, &str)]) -> String {
        profile_of(pairs).unwrap_err().to_string()
    }

    #[test]
    fn steady_is_no_profile() {
        assert_eq!(profile_of(&[]).unwrap(), None);
        assert_eq!(profile_of(&[("profile", "steady")]).unwrap(), None);
        assert_eq!(profile_of(&[("cpu-load-percent", "50")]).unwrap(), None);
    }

    #[test]
    fn each_shape_reads_its_params_with_defaults() {
        let levels = Levels { low: 10, high: 90 };
        assert_eq!(
            profile_of(&[("profile", "step"), ("profile-period", "2m")]).unwrap(),
            Some(LoadProfile::step(levels, 120, 50).unwrap())
        );
        assert_eq!(
            profile_of(&[("profile", "ramp"), ("profile-high", "60")]).unwrap(),
            Some(LoadProfile::ramp(Levels { low: 10, high: 60 }, 600).unwrap())
        );
        assert_eq!(
            profile_of(&[("profile", "sine"), ("profile-period", "1h")]).unwrap(),
            Some(LoadProfile::sine(levels, 3600).unwrap())
        );
        assert_eq!(
            profile_of(&[("profile", "spike"), ("profile-burst", "45s")]).unwrap(),
            Some(LoadProfile::spike(levels, 600, 45).unwrap())
        );
    }

    #[test]
    fn params_that_would_be_ignored_are_errors() {
        assert_eq!(
            error_of(&[("profile-period", "60")]),
            "invalid params for workload \"cpu\": param \"profile-period\" needs a load profile: add cpu.profile=step (or ramp, sine, spike)"
        );
        assert_eq!(
            error_of(&[("profile", "ramp"), ("profile-duty", "20")]),
            "invalid params for workload \"cpu\": param \"profile-duty\" does not apply to profile \"ramp\", which reads profile-low, profile-high, profile-duration"
        );
        assert_eq!(
            error_of(&[("profile", "step"), ("cpu-load-percent", "50")]),
            "invalid params for workload \"cpu\": param \"cpu-load-percent\" sets the steady load; with profile \"step\" give the levels as profile-low and profile-high"
        );
    }

    #[test]
    fn bad_values_name_the_param_and_the_accepted_form() {
        assert_eq!(
            error_of(&[("profile", "stepp")]),
            "invalid params for workload \"cpu\": param \"profile\" value \"stepp\": one of: steady, step, ramp, sine, spike (did you mean \"step\"?)"
        );
        assert!(
            error_of(&[("profile", "step"), ("profile-period", "5s")])
                .ends_with("param \"profile-period\" value \"5s\": a duration in seconds, or with an s, m or h suffix (e.g. 90, 90s, 10m, 1h), from 10s to 7 days")
        );
        assert!(
            error_of(&[("profile", "step"), ("profile-high", "101")]).ends_with(
                "param \"profile-high\" value \"101\": must be an integer from 1 to 100"
            )
        );
        assert_eq!(
            error_of(&[
                ("profile", "step"),
                ("profile-low", "90"),
                ("profile-high", "50")
            ]),
            "invalid params for workload \"cpu\": profile \"step\": the low level (90) must be below the high level (50)"
        );
    }

    #[test]
    fn a_driven_unit_runs_the_driver_with_the_schedule_and_the_level_script() {
        let profile = LoadProfile::step(Levels { low: 5, high: 80 }, 60, 50).unwrap();
        let (exec, files) = driven("cpu", &profile, "#!/bin/bash\n".to_string());
        assert_eq!(
            exec,
            "/usr/local/bin/virtwork-load-driver /etc/virtwork/cpu.schedule /var/lib/virtwork/cpu.profile-start /usr/local/bin/virtwork-cpu-at-level"
        );
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                DRIVER,
                "/etc/virtwork/cpu.schedule",
                "/usr/local/bin/virtwork-cpu-at-level"
            ]
        );
        assert!(
            files[1].content.ends_with("repeat 60\n0 80\n30 5\n"),
            "{}",
            files[1].content
        );
    }
}
