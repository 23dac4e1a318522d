#!/bin/sh
# A scripted stand-in for `claude -p --output-format stream-json --verbose`:
# it prints Claude Code stream-json lines shaped like real captures (see
# internal/transcript/testdata), makes real file changes and exits with a
# real code. Behaviour comes from FAKE_* variables (the workspace's .env):
#
#   FAKE_DONE_AT=N        on iteration N (and later) create done.txt and end
#                         the final message with the completion promise
#   FAKE_DONE_FILE=F      also create done.txt and end with the promise once
#                         file F exists in the workspace (a run as long as
#                         the test needs)
#   FAKE_PROSE_PROMISE=1  mention the promise inside prose only
#   FAKE_INPUT/OUTPUT/CACHE_READ/CACHE_WRITE  tokens per invocation
#   FAKE_COST=0.25        report total_cost_usd (omitted when unset)
#   FAKE_MODEL            model name (default claude-sonnet-4-5-20250929)
#   FAKE_PARALLEL=N       repeat the assistant line N times (parallel tool calls)
#   FAKE_SLEEP=S          work for S seconds (printing) before answering
#   FAKE_WAIT_FILE=F      work until file F exists in the workspace ("%d" in
#                         F is replaced by the iteration)
#   FAKE_WAIT_ITERATION="N M" only wait in these iterations
#   FAKE_CHILD=1          leave a background process running (pid in .child-pid)
#   FAKE_EARLY_USAGE=1    print an assistant message with its usage before
#                         working (a long step's transcript shows usage early)
#   FAKE_EXIT=N           exit with N
#   FAKE_RATE_LIMIT_ONCE=S  the first invocation hits a usage limit that
#                         resets S seconds later
#
# Every invocation appends "<iteration> <step> <pid>" to .agent-invocations
# and saves its prompt to .prompt-<step>.
set -u
ws=$(pwd)
echo "${LOOP_ITERATION:-0} ${LOOP_STEP:-0} $$" >> "$ws/.agent-invocations"
cat > "$ws/.prompt-${LOOP_STEP:-0}"
it=${LOOP_ITERATION:-1}
sid="5f0c6a2e-9d1b-4c8e-a7f3-${LOOP_STEP:-0}"
model=${FAKE_MODEL:-claude-sonnet-4-5-20250929}
in=${FAKE_INPUT:-1000} out=${FAKE_OUTPUT:-200} cr=${FAKE_CACHE_READ:-0} cw=${FAKE_CACHE_WRITE:-0}
usage="{\"input_tokens\":$in,\"cache_creation_input_tokens\":$cw,\"cache_read_input_tokens\":$cr,\"output_tokens\":$out,\"service_tier\":\"standard\"}"
printf '%s\n' "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"$ws\",\"session_id\":\"$sid\",\"tools\":[\"Bash\",\"Edit\",\"Read\",\"Write\"],\"mcp_servers\":[],\"model\":\"$model\",\"permissionMode\":\"bypassPermissions\",\"claude_code_version\":\"2.1.7\"}"

if [ -n "${FAKE_RATE_LIMIT_ONCE:-}" ] && [ ! -f "$ws/.rate-limited" ]; then
  touch "$ws/.rate-limited"
  reset=$(( $(date +%s) + FAKE_RATE_LIMIT_ONCE ))
  printf '%s\n' "{\"type\":\"rate_limit_event\",\"rate_limit_info\":{\"status\":\"rejected\",\"resetsAt\":$reset,\"rateLimitType\":\"five_hour\",\"overageStatus\":\"rejected\",\"isUsingOverage\":false}}"
  printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"duration_ms\":166,\"duration_api_ms\":0,\"num_turns\":1,\"result\":\"You've hit your limit\",\"session_id\":\"$sid\",\"total_cost_usd\":0,\"usage\":{\"input_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":0}}"
  exit 1
fi

if [ "${FAKE_CHILD:-0}" = 1 ]; then
  sleep 300 &
  echo $! > "$ws/.child-pid"
fi
if [ "${FAKE_EARLY_USAGE:-0}" = 1 ]; then
  printf '%s\n' "{\"type\":\"assistant\",\"message\":{\"model\":\"$model\",\"id\":\"msg_01Early${LOOP_STEP:-0}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Looking at the code.\"}],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":$usage},\"parent_tool_use_id\":null,\"session_id\":\"$sid\"}"
fi
if [ -n "${FAKE_SLEEP:-}" ]; then
  i=0
  while [ "$i" -lt "$FAKE_SLEEP" ]; do printf '%s\n' "{\"type\":\"stream_event\",\"event\":{\"type\":\"ping\"}}"; sleep 1; i=$((i+1)); done
fi
wait_here=0
if [ -n "${FAKE_WAIT_FILE:-}" ]; then
  case " ${FAKE_WAIT_ITERATION:-$it} " in *" $it "*) wait_here=1 ;; esac
fi
if [ "$wait_here" = 1 ]; then
  wait_file=$(printf '%s' "$FAKE_WAIT_FILE" | sed "s/%d/$it/")
  printf '%s\n' "{\"type\":\"stream_event\",\"event\":{\"type\":\"waiting\"}}"
  echo "working on iteration $it"
  while [ ! -f "$ws/$wait_file" ]; do sleep 0.05; done
fi

text="Iteration $it: I changed the code."
if { [ "${FAKE_DONE_AT:-0}" -gt 0 ] && [ "$it" -ge "${FAKE_DONE_AT}" ]; } || { [ -n "${FAKE_DONE_FILE:-}" ] && [ -f "$ws/$FAKE_DONE_FILE" ]; }; then
  echo "done in iteration $it" > "$ws/done.txt"
  text="All work is finished.\\n<promise>COMPLETE</promise>"
elif [ "${FAKE_PROSE_PROMISE:-0}" = 1 ]; then
  text="I will print <promise>COMPLETE</promise> once everything passes, not yet."
fi
echo "$it" > "$ws/work-$it.txt"

n=${FAKE_PARALLEL:-1}
i=0
while [ "$i" -lt "$n" ]; do
  printf '%s\n' "{\"type\":\"assistant\",\"message\":{\"model\":\"$model\",\"id\":\"msg_01Fake${LOOP_STEP:-0}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_$i\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":$usage},\"parent_tool_use_id\":null,\"session_id\":\"$sid\"}"
  i=$((i+1))
done
cost=""
[ -n "${FAKE_COST:-}" ] && cost="\"total_cost_usd\":$FAKE_COST,"
printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":2360,\"duration_api_ms\":2325,\"num_turns\":1,\"result\":\"$text\",\"session_id\":\"$sid\",$cost\"usage\":$usage}"
exit "${FAKE_EXIT:-0}"
