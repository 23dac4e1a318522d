#!/bin/sh
# The quickstart: builds loopd and loopctl, copies the example project to a
# temporary directory (the repository is never touched), and runs a loop
# with the bundled demo agent until the project's tests pass. The demo has
# its own LOOPD_HOME, and stops its daemon at the end.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/loopd-quickstart.XXXXXX")
echo "==> building loopd and loopctl into $work/bin"
(cd "$repo" && go build -o "$work/bin/" ./cmd/loopd ./cmd/loopctl)
cp -R "$repo/examples/quickstart/project" "$work/project"
export LOOPD_HOME="$work/home"
unset LOOPD_SOCKET
loopctl="$work/bin/loopctl"
cd "$work/project"
trap '"$loopctl" daemon stop >/dev/null 2>&1 || true' EXIT

echo "==> loopctl trust   (the daemon starts in the background)"
# The project's .loop/config names the commands loopd runs (the demo agent,
# go test): loopd runs a workspace's commands only once you trusted them.
"$loopctl" trust
echo
echo "==> loopctl start --wait"
status=0
"$loopctl" start --name quickstart --wait || status=$?
echo
echo "==> loopctl steps last"
"$loopctl" steps last
echo
echo "==> loopctl status last"
"$loopctl" status last
echo
echo "==> the agent's work:"
cat calc.go
echo
echo "Everything is in $work (LOOPD_HOME=$LOOPD_HOME). Postmortem: $LOOPD_HOME/runs/*/postmortem.md"
exit $status
