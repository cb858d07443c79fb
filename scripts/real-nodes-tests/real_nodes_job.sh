#!/usr/bin/env bash
# Jobs and diagnostics on real pods, with packages/job-test (busybox:1.36: prints MESSAGE, sleeps
# SLEEP seconds, prints "exiting with N", exits EXIT_CODE):
#   job-ok    EXIT_CODE=0, SLEEP=3: deploy COMPLETE, not before the container ran its 3 s; the Job succeeded,
#             its pod's container terminated with exit code 0 and its log holds the message
#   job-fail  EXIT_CODE=3: deploy FATAL_ERROR; the pod's container terminated with exit code 3 (reason Error),
#             the Job failed (BackoffLimitExceeded) and the plan status message names the failed Job
#   diagnostics collect of each Instance holds the real container log (the message, then "exiting with N")
#             in pod_<pod>/run.log.gz, and the Instance with its plan status.
# Wall time on the 2-core VM (own manager): 19–21 s.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PKG="$RN_ROOT/scripts/real-nodes-tests/packages/job-test"
rn_begin job

token="token-$$-$(date +%s)"
pod_of() { kubectl -n "$RN_NS" get pods -l "job-name=$1" -o jsonpath='{.items[0].metadata.name}'; }
terminated() { kubectl -n "$RN_NS" get pod "$1" -o jsonpath="{.status.containerStatuses[0].state.terminated.$2}"; }

# --- exit 0
t0=$(date +%s)
"$KUDO" install "$PKG" --instance job-ok -n "$RN_NS" -p MESSAGE="job-ok says $token" -p SLEEP=3 >&2
rn_plan_complete job-ok 120
took=$(( $(date +%s) - t0 ))
rn_check "deploy took at least the container's 3 s (${took}s)" test "$took" -ge 3
rn_eq "the Job succeeded" 1 "$(kubectl -n "$RN_NS" get job job-ok-run -o jsonpath='{.status.succeeded}')"
pod="$(pod_of job-ok-run)"
rn_eq "$pod's container exit code" 0 "$(terminated "$pod" exitCode)"
rn_eq "$pod's container reason" Completed "$(terminated "$pod" reason)"
rn_check "$pod's log holds the message" grep -qx "job-ok says $token" <<<"$(kubectl -n "$RN_NS" logs "$pod")"

# --- exit 3
RN_INSTANCE=job-fail
"$KUDO" install "$PKG" --instance job-fail -n "$RN_NS" -p MESSAGE="job-fail says $token" -p EXIT_CODE=3 -p SLEEP=1 >&2
plan_state() { kubectl -n "$RN_NS" get instance job-fail -o jsonpath='{.status.planStatus.deploy.status}'; }
fatal() { [[ "$(plan_state)" == FATAL_ERROR ]]; }
rn_until 120 "job-fail's deploy is FATAL_ERROR" fatal
pod="$(pod_of job-fail-run)"
rn_eq "$pod's container exit code" 3 "$(terminated "$pod" exitCode)"
rn_eq "$pod's container reason" Error "$(terminated "$pod" reason)"
rn_eq "the Job failed" BackoffLimitExceeded \
  "$(kubectl -n "$RN_NS" get job job-fail-run -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')"
status="$("$KUDO" plan status --instance job-fail -n "$RN_NS")"
echo "$status" >&2
rn_check "plan status: step run FATAL_ERROR naming the failed Job" \
  grep -q 'Step run \[FATAL_ERROR\].*job-fail-run.* has failed' <<<"$status"
message="$(kubectl -n "$RN_NS" get instance job-fail -o jsonpath='{.status.planStatus.deploy.phases[0].steps[0].message}')"
rn_log "step message: $message"
rn_check "the step message says the Job failed terminally" grep -q 'has failed terminally' <<<"$message"

# --- diagnostics collect
for inst in job-ok job-fail; do
  code=0; [[ $inst == job-fail ]] && code=3
  out="$RN_LOGS/diag-$inst"
  rm -rf "$out"
  "$KUDO" diagnostics collect --instance "$inst" -n "$RN_NS" -O "$out" >&2
  pod="$(pod_of "$inst-run")"
  log_gz="$(find "$out" -path "*/pod_$pod/run.log.gz" | head -n 1)"
  rn_check "diagnostics of $inst: $pod's container log collected ($log_gz)" test -s "$log_gz"
  collected="$(gzip -dc "$log_gz")"
  rn_eq "diagnostics of $inst: the log's lines" "$inst says $token|exiting with $code" "$(paste -sd'|' <<<"$collected")"
  inst_yaml="$(find "$out" -path "*/instance_$inst/$inst.yaml" | head -n 1)"
  rn_check "diagnostics of $inst: the Instance ($inst_yaml)" test -s "$inst_yaml"
  want=COMPLETE; [[ $inst == job-fail ]] && want=FATAL_ERROR
  rn_check "diagnostics of $inst: its plan status $want" grep -q "status: $want" "$inst_yaml"
done

# --- an image that cannot be pulled: the step waits, and plan status says why
RN_INSTANCE=job-pull
"$KUDO" install "$PKG" --instance job-pull -n "$RN_NS" -p IMAGE=example.invalid/kudo-rs/missing:1 >&2
pull_reason() {
  "$KUDO" plan status --instance job-pull -n "$RN_NS" 2>/dev/null |
    grep -E "waiting for Job $RN_NS/job-pull-run: .*; pod job-pull-run-[a-z0-9]+: (ErrImagePull|ImagePullBackOff)"
}
rn_until 90 "plan status names the Job and its pod's image pull failure" pull_reason
rn_log "$(pull_reason)"
rn_check "the Instance status holds the same line (waitingFor)" bash -c \
  "kubectl -n $RN_NS get instance job-pull -o jsonpath='{.status.planStatus.deploy.phases[0].steps[0].waitingFor[0]}' | grep -q 'ImagePull'"

"$KUDO" uninstall --instance job-ok -n "$RN_NS" >&2
"$KUDO" uninstall --instance job-fail -n "$RN_NS" >&2
"$KUDO" uninstall --instance job-pull -n "$RN_NS" >&2
