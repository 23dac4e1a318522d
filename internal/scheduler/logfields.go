package scheduler

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/loopd/loopd/internal/stop"
)

// logEvaluation logs one evaluation of the stop conditions at debug level (info with
// debug set, for tracing one run without turning the whole daemon to debug), with the
// run, step, iteration, duration and every condition's result. redact rewrites each
// result's text (reason, error) for the log — a custom_script's output may print a
// secret; the evaluation itself is not changed.
func logEvaluation(log *zap.Logger, debug bool, ev stop.Evaluation, redact func(string) string) {
	level := zap.DebugLevel
	if debug {
		level = zap.InfoLevel
	}
	ce := log.Check(level, "stop conditions evaluated")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("run", ev.RunID),
		zap.Int64("step", ev.Step),
		zap.Int("iteration", ev.Iteration),
		zap.Duration("duration", ev.Duration),
		zap.Array("conditions", resultsLog{ev.Results, redact}),
	}
	if ev.Stop != nil {
		fields = append(fields, zap.String("stop", ev.Stop.Reason), zap.String("class", string(ev.Stop.Class)))
	}
	ce.Write(fields...)
}

// resultsLog writes stop results as a zap array, their text redacted.
type resultsLog struct {
	results []stop.Result
	redact  func(string) string // nil: none
}

func (rs resultsLog) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	for _, r := range rs.results {
		if rs.redact != nil {
			r.Reason, r.Err = rs.redact(r.Reason), rs.redact(r.Err)
		}
		if err := enc.AppendObject(resultLog(r)); err != nil {
			return err
		}
	}
	return nil
}

// resultLog writes one stop result as a zap object.
type resultLog stop.Result

func (r resultLog) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	var typ stop.Type
	if r.Condition != nil {
		typ = r.Condition.Type()
	}
	enc.AddString("type", string(typ))
	enc.AddString("class", string(r.Class))
	enc.AddInt("index", r.Index)
	enc.AddBool("met", r.Met)
	if r.Progress != nil {
		enc.AddFloat64("progress", *r.Progress)
	}
	enc.AddString("reason", r.Reason)
	enc.AddDuration("duration", r.Duration)
	if r.Cached {
		enc.AddBool("cached", true)
	}
	if r.TimedOut {
		enc.AddBool("timed_out", true)
	}
	if r.Unmeasurable {
		enc.AddBool("unmeasurable", true)
	}
	if r.Err != "" {
		enc.AddString("error", r.Err)
	}
	return nil
}
