#!/bin/sh
# Container entrypoint for the virtwork image.
#
# Modes:
#   * arguments given to the container (`podman run IMAGE run --dry-run`): exec virtwork with
#     exactly those arguments;
#   * VIRTWORK_COMMAND=run|cleanup|validate|status|verify|audit|churn: exec `virtwork <command>` with the
#     words of VIRTWORK_ARGS. VIRTWORK_ARGS is split like a shell would split it (whitespace,
#     'single quotes', "double quotes", backslash escapes) but NOTHING is expanded: no globs,
#     no $VAR, no $(...), no backticks. It is parsed here character by character, never eval'd;
#   * VIRTWORK_COMMAND empty: print a notice and idle, so an operator can `oc exec` into the pod.
#
# VIRTWORK_AFTER_RUN=exit (default) replaces this shell with virtwork (it becomes PID 1, gets
# SIGTERM directly, and its exit code is the container's). VIRTWORK_AFTER_RUN=sleep is for a
# Deployment, whose restartPolicy Always would otherwise start the command again every time it
# finishes: after a successful command the container sleeps instead of exiting; a failed command
# still exits with virtwork's exit code so the failure is visible (restart count, logs).
#
# Idling ends with exit 0 on SIGTERM or SIGINT, at once: deleting the pod must not wait out its
# terminationGracePeriodSeconds.
#
# VIRTWORK_BIN overrides the binary path (tests point it at a stub).
#
# Exit codes: virtwork's own; 2 when VIRTWORK_COMMAND, VIRTWORK_AFTER_RUN or VIRTWORK_ARGS is
# invalid (the same "bad input" code the binary uses).

set -eu
# Belt and braces: no word below is ever unquoted, but never glob even by mistake.
set -f

VIRTWORK_BIN="${VIRTWORK_BIN:-/usr/local/bin/virtwork}"
VIRTWORK_COMMAND="${VIRTWORK_COMMAND:-}"
VIRTWORK_ARGS="${VIRTWORK_ARGS:-}"
VIRTWORK_AFTER_RUN="${VIRTWORK_AFTER_RUN:-exit}"

log() {
    printf '[entrypoint] %s\n' "$*" >&2
}

fail_input() {
    log "ERROR: $*"
    exit 2
}

# Idles until SIGTERM or SIGINT, then exits 0. Not `exec sleep infinity`: as the container's
# PID 1, sleep has no handler for TERM, and the kernel drops signals that a PID namespace's init
# does not handle, so the pod would only go after its grace period, by SIGKILL. This shell stays
# PID 1 with a trap instead; `wait` returns as soon as a trapped signal arrives. The trap also
# ends the sleeper, so a signal handled just before `wait` cannot leave it waiting forever. A
# sleeper that ends any other way is replaced: only a signal ends the idling.
idle() {
    stopping=''
    sleeper=''
    trap 'stopping=1; if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null || :; fi' TERM INT
    while [ -z "$stopping" ]; do
        sleep infinity &
        sleeper=$!
        if [ -z "$stopping" ]; then
            wait "$sleeper" || :
        fi
        kill "$sleeper" 2>/dev/null || :
        sleeper=''
    done
    log "stop signal received while idle; exiting"
    exit 0
}

# Runs virtwork with the current positional parameters according to VIRTWORK_AFTER_RUN.
run_virtwork() {
    case "$VIRTWORK_AFTER_RUN" in
        exit)
            exec "$VIRTWORK_BIN" "$@"
            ;;
        sleep)
            # Keep virtwork's stdin (a background job would get /dev/null otherwise).
            # As PID 1 this shell gets SIGTERM on pod deletion: hand it to virtwork, which
            # records the run as cancelled and exits 130. SIGINT is forwarded as SIGTERM because
            # a background job of a non-interactive shell starts with SIGINT ignored (POSIX);
            # virtwork treats both alike. A signal that arrives before virtwork started ends the
            # shell the way the signal would have.
            # A signal can also land between starting virtwork and `child=$!`: it is remembered
            # in `pending` and forwarded as soon as the child's PID is known.
            child=''
            pending=''
            trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; else pending=143; fi' TERM
            trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; else pending=130; fi' INT
            if [ -n "$pending" ]; then
                exit "$pending"
            fi
            exec 3<&0
            "$VIRTWORK_BIN" "$@" <&3 3<&- &
            child=$!
            exec 3<&-
            if [ -n "$pending" ]; then
                kill -TERM "$child" 2>/dev/null || true
            fi
            status=0
            while :; do
                status=0
                wait "$child" || status=$?
                # A trapped signal interrupts `wait` early; wait again until virtwork is gone.
                if kill -0 "$child" 2>/dev/null; then
                    continue
                fi
                break
            done
            trap - TERM INT
            if [ "$status" -ne 0 ]; then
                log "virtwork exited with status $status"
                exit "$status"
            fi
            log "virtwork finished successfully; sleeping (VIRTWORK_AFTER_RUN=sleep) so the Deployment does not run it again. Use 'oc exec' for further commands."
            idle
            ;;
    esac
}

case "$VIRTWORK_AFTER_RUN" in
    exit | sleep) ;;
    *) fail_input "invalid VIRTWORK_AFTER_RUN='$VIRTWORK_AFTER_RUN': expected 'exit' or 'sleep'" ;;
esac

# Explicit container arguments win: `podman run IMAGE run --dry-run --workloads cpu`.
if [ "$#" -gt 0 ]; then
    # Only the count: any argument may be a credential.
    log "Executing: virtwork with $# arguments from the container command line"
    run_virtwork "$@"
fi

case "$VIRTWORK_COMMAND" in
    "")
        log "No VIRTWORK_COMMAND set. Pod will sleep. Use 'oc exec' to run virtwork manually."
        idle
        ;;
    run | cleanup | validate | status | verify | audit | churn) ;;
    *)
        fail_input "invalid VIRTWORK_COMMAND='$VIRTWORK_COMMAND': expected one of run, cleanup, validate, status, verify, audit, churn (or leave it empty to sleep)"
        ;;
esac

# --- Split VIRTWORK_ARGS into positional parameters without evaluating anything. -------------
# This runs at top level (not in a function) because `set --` inside a function would only set
# the function's own parameters. States: plain (between or inside an unquoted word), single
# (inside '...'), double (inside "..."). A word exists once any character or quote pair of it
# has been seen, so '' and "" yield an empty argument, as in a shell.
set --
rest=$VIRTWORK_ARGS
word=''
in_word=0
state=plain
newline='
'
tab='	'
while [ -n "$rest" ]; do
    # First character of $rest, then drop it.
    tail=${rest#?}
    char=${rest%"$tail"}
    rest=$tail
    case "$state" in
        plain)
            case "$char" in
                ' ' | "$tab" | "$newline")
                    if [ "$in_word" -eq 1 ]; then
                        set -- "$@" "$word"
                        word=''
                        in_word=0
                    fi
                    ;;
                "'")
                    state=single
                    in_word=1
                    ;;
                '"')
                    state=double
                    in_word=1
                    ;;
                "\\")
                    if [ -z "$rest" ]; then
                        fail_input "VIRTWORK_ARGS ends with a lone backslash; escape it as \\\\ or quote it"
                    fi
                    tail=${rest#?}
                    char=${rest%"$tail"}
                    rest=$tail
                    # Backslash-newline is a line continuation, as in a shell.
                    if [ "$char" != "$newline" ]; then
                        word="$word$char"
                        in_word=1
                    fi
                    ;;
                *)
                    word="$word$char"
                    in_word=1
                    ;;
            esac
            ;;
        single)
            if [ "$char" = "'" ]; then
                state=plain
            else
                word="$word$char"
            fi
            ;;
        double)
            case "$char" in
                '"')
                    state=plain
                    ;;
                "\\")
                    # Inside double quotes a backslash only escapes " and \ (and $ and `, which
                    # are literal here anyway); before anything else it is kept.
                    tail=${rest#?}
                    next=${rest%"$tail"}
                    case "$next" in
                        '"' | "\\" | '$' | '`')
                            word="$word$next"
                            rest=$tail
                            ;;
                        *)
                            word="$word$char"
                            ;;
                    esac
                    ;;
                *)
                    word="$word$char"
                    ;;
            esac
            ;;
    esac
done
case "$state" in
    single) fail_input "VIRTWORK_ARGS has an unterminated single quote (') — close it or escape it as \\'" ;;
    double) fail_input "VIRTWORK_ARGS has an unterminated double quote (\") — close it or escape it as \\\"" ;;
esac
if [ "$in_word" -eq 1 ]; then
    set -- "$@" "$word"
fi

# The arguments may hold credentials (--ssh-password): log only their number.
log "Executing: virtwork $VIRTWORK_COMMAND ($# arguments from VIRTWORK_ARGS)"
run_virtwork "$VIRTWORK_COMMAND" "$@"
