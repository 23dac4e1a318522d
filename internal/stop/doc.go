// Package stop decides when a run stops and why: the stop condition types (the user
// reference is docs/stop-conditions.md), their JSON form (.loop/stop.json),
// validation, the pricing table, and the Evaluator the scheduler calls after every
// step.
//
// The package is pure: it never touches the database, and it reads time only through
// the Clock it is given. The scheduler derives a Context from persisted steps and asks
// for a verdict; the same steps give the same verdict before and after a restart. The
// only side effects are the ones conditions ask for: file_created and file_contains
// read the workspace, custom_script runs a script in it.
//
// # Conditions
//
// Each condition type is a small struct implementing the sealed Condition interface
// (MaxIterations{Count: 5}, All{Conditions: …}, …). Small structs rather than one
// tagged struct: each type carries exactly its fields, a type switch over them is
// checked by the compiler, and the zero values of unrelated fields cannot leak into
// JSON. The "not" condition is the struct Negation, because Not is the builder (And,
// Or, Not, with the seed's flattening).
//
// Each type is described once, by its descriptor (a kind[T] in conditions.go): its
// JSON fields, priority, description, reason, validation, evaluation and reference
// documentation. Encoding, decoding, Set.Validate, the Evaluator, Types and Reference
// (and so the generated docs/stop-conditions.md) all read the descriptors; the
// methods through which a type implements Condition are generated from them
// (kinds_gen.go, by go generate). The files say what each part is: conditions.go the
// types, kind.go the descriptor machinery, measure.go what one condition finds in a
// run's Context (pure, per condition), evaluator.go the Evaluator that runs a Set over
// a run (order, parallelism, timeouts, cache, progress, history), json.go decoding,
// set.go sets and validation.
//
// # Adding a condition type
//
// Three places, and a generator:
//
//  1. conditions.go: the Type constant, the struct, and its descriptor — fields,
//     priority, describe, reason (nil for "condition:<type>"), validate, measure,
//     slow (for a leaf that reads the workspace or runs a process), prepare (if it
//     needs compiling), and the reference summary and example. Declaration order is
//     the order of Types and of the reference.
//  2. measure.go: its measure function, named in the descriptor.
//  3. go generate ./internal/stop, which writes its Condition methods and adds it to
//     the list of descriptors; then go run ./internal/docgen/gendocs regenerates
//     docs/stop-conditions.md from the summary and example.
//
// Tests that walk Types (the JSON and reference tests) then ask for a canonical-form
// case and an everyType entry for it; the golden encoding test needs -update once.
// A new field shape (other than int, int64, float, bool, string, strings, duration,
// condition, conditions) needs a fieldKind in kind.go and its case in the decoder.
//
// JSON is the seed's tagged form, {"type":"max_iterations","count":5}. Decoding is
// strict (unknown types and fields, duplicates and wrong JSON types are errors with the
// JSON path and a "did you mean"); encoding is canonical and round-trips exactly:
// is_regex is always written, args and tests are [] when empty, on_error.pattern and
// max_cost.model are left out when empty, and max_duration is a humantime string in the
// form of FormatDuration ("2h 30m"). ParseDuration reads both humantime ("2h 30m",
// "1day", "90 sec") and Go ("2h30m") durations.
//
// # Classes and verdicts
//
// The list a condition is declared in gives its Class: Set.Conditions are limits
// (ClassLimit, the run ends ABORTED), Set.SuccessConditions complete it (ClassSuccess,
// COMPLETED) and Set.FailureConditions fail it (ClassFailure, FAILED). When several are
// met at once, failure beats success beats limit; within a class the highest priority
// wins, then declaration order. Priorities are the seed's (on_error 100, user_signal 90,
// max_iterations and max_duration 80, test_failure_streak and no_progress 70, tests 60,
// output_pattern 50, files 40, custom_script 30, all/any 20, not 10, never 0); token and
// cost limits are 80, max_consecutive_failures and stuck_task 70.
//
// The config keys are shorthands for conditions (see Shorthands): max_iterations,
// max_duration, max_tokens, max_input_tokens, max_output_tokens and max_cost add
// limits; max_consecutive_<phase>_failures, max_task_failures (stuck_task) and
// no_progress_iterations (no_progress) add failure conditions. Set.Merge puts them and
// .loop/stop.json into one Set for one Evaluator.
//
// Verdict.Reason is the machine reason of docs/reference.md (Condition.Reason):
// max_iterations:<n>, max_duration:<FormatDuration>, max_tokens:<n>,
// max_input_tokens:<n>, max_output_tokens:<n>, max_cost:<usd, 2 decimals>,
// max_consecutive_failures:<phase>:<limit>, stuck_task:<n>, no_progress:<iterations>,
// test_failure_streak:<count>, and condition:<type> for every other type (a composite
// is condition:all, condition:any or condition:not whichever child met it).
// Verdict.Description is the condition's description ("after 7 iterations") and
// Verdict.Detail the result's human detail ("Reached 7 iterations").
//
// # Tokens and cost
//
// Usage.InputTokens excludes cache reads and writes. max_input_tokens counts every input
// token the model processed, InputTokens + CacheReadTokens + CacheWriteTokens
// (Usage.InputTotal); max_output_tokens counts OutputTokens; max_tokens counts both
// (Usage.Total). Limits trigger when the count is ≥ the limit.
//
// max_cost triggers when the cost is ≥ the budget. The cost is Usage.PricedCostUSD when
// the run's model is in the pricing table (PricedKnown), else the agents' reported cost
// (ReportedKnown). With neither, and tokens used, the cost cannot be measured: the
// Result is not met, Unmeasurable is set and Reason says "cost unknown: model X is not
// in the pricing table and the agent reported no cost" — the caller surfaces it (status
// and event); it is never counted as $0. max_cost with a model re-prices the token
// totals with that model's price from Options.Prices; Set.ValidateModels rejects a
// model that is not there.
//
// # Evaluation
//
// See Evaluator for the order, parallelism, timeouts and the cache, which never reuses a
// result for a different Context.Step. Each Evaluation lists the conditions whose
// progress changed (the caller emits CONDITION_PROGRESSED), the last 100 are kept
// (History, for `loopctl status --debug`). Logging an evaluation is the caller's: it
// holds the run's secrets, which a custom_script's output may print. The Evaluator
// logs only a warning per timed-out condition (Options.Logger).
package stop

//go:generate go run ./genkinds
