#!/usr/bin/env bash
# generate.sh regenerates the runner-output fixtures in this directory by running the REAL test runners
# on the small projects in projects/. The tests never run it: they read the saved *.txt / *.xml files.
#
# Requirements (see README.md for the exact versions used): go, python3 with pytest
# (Debian: apt-get install -y python3-pytest), node 20 + npm (jest, jest-junit, vitest@3, mocha are
# installed into a scratch directory), cargo (offline; the crates have no dependencies), perl
# (Test::More), gcc + make.
#
# Only the runner outputs are rewritten; the *.want.json truth files are maintained by hand and must be
# re-checked against the projects if a fixture changes. Timings inside outputs differ on every run.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${TESTREPORT_WORK:-/tmp/testreport-gen}
rm -rf "$work"
mkdir -p "$work"
cp -r "$here/projects/." "$work/"

export RUST_BACKTRACE=0 CI=1
pytest=(/usr/bin/python3 -m pytest -p no:cacheprovider)

# out FILE CMD...: run CMD (stdout+stderr together, as loopd captures a step) and save to FILE.
out() {
	local file=$1
	shift
	mkdir -p "$(dirname "$here/$file")"
	"$@" >"$here/$file" 2>&1
	echo "$file: exit $?"
}

# nocolor CMD...: run with colour explicitly off.
nocolor() { env -u FORCE_COLOR NO_COLOR=1 "$@"; }

# ---- go ------------------------------------------------------------------------------------------------
(
	cd "$work/go-good" || exit 1
	out go/pass.txt go test ./...
	out go/pass_verbose.txt go test -v ./...
	out go-json/pass.txt go test -json ./...
	cd "$work/go-bad" || exit 1
	out go/fail.txt go test ./...
	out go/fail_verbose.txt go test -v ./...
	out go/build_failed.txt go test ./broken/
	out go-json/fail.txt go test -json ./...
	cd "$work/go-setup" || exit 1
	out go/setup_failed.txt go test ./...
	out go-json/setup_failed.txt go test -json ./...
)

# ---- pytest --------------------------------------------------------------------------------------------
(
	cd "$work/pytest" || exit 1
	out pytest/pass.txt nocolor "${pytest[@]}" tests/test_strs.py
	out pytest/fail.txt nocolor "${pytest[@]}"
	out pytest/quiet.txt nocolor "${pytest[@]}" -q
	out pytest/verbose.txt nocolor "${pytest[@]}" -v
	out pytest/ra.txt nocolor "${pytest[@]}" -rA
	out pytest/color.txt "${pytest[@]}" --color=yes
	"${pytest[@]}" -q --junitxml="$here/junit/pytest.xml" >/dev/null 2>&1
	echo "junit/pytest.xml: written"
	cd "$work/pytest-broken" || exit 1
	out pytest/collection_error.txt nocolor "${pytest[@]}"
)

# ---- JavaScript ----------------------------------------------------------------------------------------
js="$work/node_modules_root"
mkdir -p "$js"
(cd "$js" && npm init -y >/dev/null && npm install --no-audit --no-fund jest@30 jest-junit@16 vitest@3 mocha@12 >/dev/null 2>&1) ||
	echo "npm install failed" >&2
for p in jest jest-broken vitest vitest-broken vitest-unhandled mocha mocha-broken; do ln -s "$js/node_modules" "$work/$p/node_modules"; done
bin="$js/node_modules/.bin"
(
	cd "$work/jest" || exit 1
	echo '{"name":"jestp","private":true}' >package.json
	out jest/pass.txt nocolor "$bin/jest" strs.test.js
	out jest/fail.txt nocolor "$bin/jest"
	out jest/verbose.txt nocolor "$bin/jest" --verbose
	out jest/color.txt env FORCE_COLOR=1 "$bin/jest"
	cd "$work/jest-broken" && echo '{"name":"jestb","private":true}' >package.json || exit 1
	out jest/suite_failed.txt nocolor "$bin/jest"
	cd "$work/jest" || exit 1
	JEST_JUNIT_OUTPUT_DIR="$here/junit" JEST_JUNIT_OUTPUT_NAME=jest-junit.xml \
		nocolor "$bin/jest" --reporters=default --reporters=jest-junit >/dev/null 2>&1
	echo "junit/jest-junit.xml: written"
)
(
	cd "$work/vitest" || exit 1
	out vitest/pass.txt nocolor "$bin/vitest" run strs.test.js
	out vitest/fail.txt nocolor "$bin/vitest" run
	out vitest/verbose.txt nocolor "$bin/vitest" run --reporter=verbose
	out vitest/color.txt env FORCE_COLOR=1 "$bin/vitest" run
	nocolor "$bin/vitest" run --reporter=junit --outputFile="$here/junit/vitest.xml" >/dev/null 2>&1
	echo "junit/vitest.xml: written"
	cd "$work/vitest-broken" || exit 1
	out vitest/suite_failed.txt nocolor "$bin/vitest" run
	cd "$work/vitest-unhandled" || exit 1
	out vitest/unhandled_error.txt nocolor "$bin/vitest" run
)
(
	cd "$work/mocha" || exit 1
	out mocha/pass.txt nocolor "$bin/mocha" test/strs.test.js
	out mocha/fail.txt nocolor "$bin/mocha"
	out mocha/color.txt "$bin/mocha" --color
	out mocha/tap_pass.txt nocolor "$bin/mocha" --reporter tap test/strs.test.js
	out mocha/tap_fail.txt nocolor "$bin/mocha" --reporter tap
	nocolor "$bin/mocha" --reporter xunit --reporter-option output="$here/junit/mocha-xunit.xml" >/dev/null 2>&1
	echo "junit/mocha-xunit.xml: written"
	cd "$work/mocha-broken" || exit 1
	out unknown/mocha_load_error.txt nocolor "$bin/mocha"
)
(
	cd "$work/nodetest" || exit 1
	out node-test/spec_pass.txt nocolor node --test --test-reporter=spec strs.test.mjs
	out node-test/spec_fail.txt nocolor node --test --test-reporter=spec
	out node-test/spec_color.txt env FORCE_COLOR=1 node --test --test-reporter=spec
	out node-test/tap_pass.txt nocolor node --test --test-reporter=tap strs.test.mjs
	out node-test/tap_fail.txt nocolor node --test --test-reporter=tap
)

# ---- TAP (Perl Test::More) -----------------------------------------------------------------------------
(
	cd "$work/tap" || exit 1
	out tap/perl_pass.txt perl t/strs.t
	out tap/perl_fail.txt perl t/calc.t
	out tap/perl_two_files.txt sh -c 'perl t/calc.t; perl t/strs.t'
)

# ---- cargo ---------------------------------------------------------------------------------------------
(
	cd "$work/cargo" || exit 1
	cargo build --offline --tests >/dev/null 2>&1
	out cargo/pass.txt cargo test --offline --test integration -- --skip panics
	out cargo/fail_fast.txt cargo test --offline
	out cargo/fail.txt cargo test --offline --no-fail-fast
	out cargo/color.txt env CARGO_TERM_COLOR=always cargo test --offline --no-fail-fast -- --color=always
	cd "$work/cargo-broken" || exit 1
	out cargo/build_failed.txt cargo test --offline
)

# ---- mixed: several commands in one step, with loopd's "$ <command>" headers -----------------------------
(
	cd "$work" || exit 1
	mixed() {
		echo "\$ make -C mixed build"
		make -C mixed build 2>&1
		echo "\$ go test ./..."
		(cd go-bad && go test ./... 2>&1)
		echo "\$ python3 -m pytest"
		(cd pytest && nocolor "${pytest[@]}" 2>&1)
	}
	out mixed/make_go_pytest.txt mixed
	mixed2() {
		echo "\$ cargo test"
		(cd cargo && cargo test --offline --no-fail-fast 2>&1)
		echo "\$ npx jest"
		(cd jest && nocolor "$bin/jest" 2>&1)
		echo "\$ node --test"
		(cd nodetest && nocolor node --test 2>&1)
	}
	out mixed/cargo_jest_node.txt mixed2
	mixed3() {
		echo "\$ go test -json ./..."
		(cd go-bad && go test -json ./... 2>&1)
		echo "\$ perl t/calc.t"
		(cd tap && perl t/calc.t 2>&1)
	}
	out mixed/gojson_tap.txt mixed3
)

# ---- unknown: a build log with no tests in it --------------------------------------------------------------
(
	cd "$work/mixed" || exit 1
	out unknown/make.txt make build
)

# ---- gotestsum --rerun-fails (fetched through the Go module proxy, not a dependency) --------------------
(
	cd "$work/go-flaky" || exit 1
	for f in standard-verbose testname; do
		rm -f "$work/flaky-marker"
		out "go/gotestsum_rerun_${f//-/_}.txt" env FLAKY_MARKER="$work/flaky-marker" \
			go run gotest.tools/gotestsum@v1.13.0 --format "$f" --rerun-fails=2 --packages ./... -- -count=1
	done
)

# ---- Python unittest -----------------------------------------------------------------------------------
(
	export PYTHONDONTWRITEBYTECODE=1
	cd "$work/unittest" || exit 1
	out unittest/fail.txt python3 -m unittest
	out unittest/fail_verbose.txt python3 -m unittest -v
	out unittest/pass.txt python3 -m unittest tests.test_calc.TestStrings
	cd "$work/unittest-broken" || exit 1
	out unittest/import_error.txt python3 -m unittest -v
)

# ---- TAP directives from Test::More ---------------------------------------------------------------------
(
	cd "$work/tap" || exit 1
	out tap/perl_directives.txt perl t/directives.t
)

# ---- the exact tool versions that produced the fixtures ------------------------------------------------
{
	echo "go:        $(go version)"
	echo "pytest:    $(/usr/bin/python3 -m pytest --version 2>&1) on $(/usr/bin/python3 --version)"
	echo "node:      $(node --version) (node --test)"
	echo "jest:      $("$bin/jest" --version)"
	echo "jest-junit: $(node -p "require('$js/node_modules/jest-junit/package.json').version")"
	echo "vitest:    $("$bin/vitest" --version)"
	echo "mocha:     $("$bin/mocha" --version)"
	echo "cargo:     $(cargo --version); $(rustc --version)"
	echo "perl:      $(perl -e 'print $^V') Test::More $(perl -MTest::More -e 'print $Test::More::VERSION')"
	echo "gotestsum: $(go run gotest.tools/gotestsum@v1.13.0 --version)"
	echo "python3:   $(python3 --version 2>&1) (unittest)"
	echo "gcc/make:  $(gcc --version | head -1); $(make --version | head -1)"
} >"$here/versions.txt"
echo "versions.txt: written"
