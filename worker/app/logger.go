package app

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/subflow-dev/subflow/activities"
)

// NewLogger returns a JSON zap logger writing to stderr at level (debug, info, warn, error).
func NewLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("app: log level: %w", err)
	}
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(cfg), zapcore.Lock(os.Stderr), lvl)
	return zap.New(core), nil
}

// TemporalLogger adapts z to the Temporal SDK's logger (client.Options.Logger), so the SDK's
// own lines go to the same place as the worker's; an activity's cancellation is logged at
// info, not error (activities.QuietCancellations).
func TemporalLogger(z *zap.Logger) log.Logger {
	return activities.QuietCancellations(&temporalLogger{z: z.WithOptions(zap.AddCallerSkip(1))})
}

// temporalLogger implements log.Logger, log.WithLogger and log.WithSkipCallers over zap. The
// SDK passes alternating key/value pairs.
type temporalLogger struct{ z *zap.Logger }

var (
	_ log.Logger          = (*temporalLogger)(nil)
	_ log.WithLogger      = (*temporalLogger)(nil)
	_ log.WithSkipCallers = (*temporalLogger)(nil)
)

func (l *temporalLogger) Debug(msg string, keyvals ...any) { l.z.Debug(msg, fields(keyvals)...) }
func (l *temporalLogger) Info(msg string, keyvals ...any)  { l.z.Info(msg, fields(keyvals)...) }
func (l *temporalLogger) Warn(msg string, keyvals ...any)  { l.z.Warn(msg, fields(keyvals)...) }
func (l *temporalLogger) Error(msg string, keyvals ...any) { l.z.Error(msg, fields(keyvals)...) }

// With returns a logger whose lines carry keyvals.
func (l *temporalLogger) With(keyvals ...any) log.Logger {
	return &temporalLogger{z: l.z.With(fields(keyvals)...)}
}

// WithCallerSkip returns a logger that skips depth more stack frames when naming the caller.
func (l *temporalLogger) WithCallerSkip(depth int) log.Logger {
	return &temporalLogger{z: l.z.WithOptions(zap.AddCallerSkip(depth))}
}

// fields turns key/value pairs into zap fields; a key that is not a string is formatted, and
// a trailing key without a value is kept under "extra".
func fields(keyvals []any) []zap.Field {
	out := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		if i+1 == len(keyvals) {
			out = append(out, zap.Any("extra", keyvals[i]))
			break
		}
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		out = append(out, zap.Any(key, keyvals[i+1]))
	}
	return out
}
