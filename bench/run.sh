#!/bin/sh
# Runs every loopd benchmark of BENCHMARKS.md in a few minutes: the Go
# micro-benchmarks (each next to its baseline), then loopbench, which
# drives the real loopd binary (see bench/loopbench).
#
#   bench/run.sh            everything
#   bench/run.sh overhead   one loopbench measure
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/loopd-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "== machine"
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr), $(go version | cut -d' ' -f3)"
df -T "${TMPDIR:-/tmp}" | awk 'NR==2 {print "TMPDIR on " $2}'

go build -o "$out/" ./cmd/loopd ./cmd/loopctl ./bench/loopbench
if [ $# -gt 0 ]; then
  # Not exec: exec replaces the shell, and its EXIT trap (which removes
  # $out) would never run.
  "$out/loopbench" -bin "$out" "$@"
  exit
fi

echo "== go benchmarks"
go test -run '^$' -bench 'BenchmarkEvaluate100$' -benchtime 20000x ./internal/stop/ | grep Benchmark
go test -run '^$' -bench 'StartTrue|ShTrue' -benchtime 500x ./internal/supervise/ | grep Benchmark
go test -run '^$' -bench 'StepWrites' -benchtime 2000x ./internal/storage/ | grep Benchmark

"$out/loopbench" -bin "$out" all
if [ -d /dev/shm ]; then
  echo "== overhead with LOOPD_HOME on tmpfs (the disk taken out)"
  "$out/loopbench" -bin "$out" -tmp /dev/shm overhead
fi
