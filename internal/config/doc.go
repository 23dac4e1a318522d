// Package config resolves the configuration of a run, which is frozen when the
// run is created: a later edit of .loop/config does not change a running run.
//
// # Layers
//
// From lowest to highest precedence:
//
//  1. built-in defaults ([Default]);
//  2. the user config file, $XDG_CONFIG_HOME/loop/config, else
//     ~/.config/loop/config ([UserConfigPath]); a missing file is fine;
//  3. the workspace config file, <workspace>/.loop/config; a missing file is
//     fine;
//  4. --set key=value arguments (loopctl start --set), in order.
//
// A key set in a higher layer overrides the lower ones; within one layer the
// last line wins. Three keys layer differently:
//
//   - verify_command is repeatable: within one layer its entries append, in
//     order; a layer that sets it at all replaces the list of the layers
//     below (so a workspace can drop the user's checks); an empty value
//     (verify_command=) clears the list built so far.
//   - prompt and prompt_file are one setting, the goal: a layer that sets one
//     clears the other from the layers below, and one layer that sets both is
//     an error.
//   - price.<model> overrides one model's price; the other models keep
//     theirs. An empty value removes the override.
//
// After the layers, workspace defaults apply to keys that no layer set:
// prompt_file is PROMPT.md when the workspace has one and no prompt is set,
// stop_file is .loop/stop.json and env_file is .env when present. Setting
// such a key to an empty value (env_file=) turns its default off.
// [Config.With] applies more --set arguments to a frozen config as a new top
// layer, with the same rules (loopctl resume --set).
//
// # Paths
//
// prompt_file, spec_file, plan_file, verify_report, stop_file and env_file
// are relative to the workspace (in every layer, the user config included)
// unless absolute, and are stored absolute in the resolved [Config], so code
// that runs the loop uses them as they are. Files that are set must exist
// (verify_report excepted: the verify commands write it); a default applies
// only when its file is present.
//
// # File format
//
// One key=value per line, as in
//
//	# the goal and the checks
//	prompt_file = GOAL.md
//	verify_command = go test ./...
//	verify_command = go vet ./...
//	step_timeout = 30m
//
// A line whose first non-blank character is '#' is a comment, and a value may
// end with one: "max_cost=10  # USD". A '#' starts a trailing comment only
// after a space or tab and outside quotes, so "grep -c '#' log", "a#b" and
// prompt="fix # 12" keep theirs; quote a value to keep a " #" in it (see
// [StripComment]). Whitespace around keys and values is trimmed. A value wholly in double quotes is unquoted with \" and \\
// escapes; a value wholly in single quotes is literal; see [Parse] for the
// details. Durations are humantime ("1h 30m", "90s", "1day") or Go ("1h30m",
// "1.5h") strings; counts are whole numbers, optionally grouped as 1_000_000;
// amounts in USD may start with "$".
//
// # Errors
//
// Every problem is reported at once, as errors.Join of *[ConfigError], each
// naming the file and line (or the --set position), the key, and what is
// wrong, with "did you mean" for a misspelt key. Bad input changes nothing:
// the functions here only read files.
package config
