package devserver

import (
	"fmt"
	"io"
	"os"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger builds the logger the server and ClientOptions share, and the gate Stop
// raises. The embedded server logs hundreds of lines at info level while it starts, so the
// default level is warn and the default sink is stderr, never stdout (which belongs to the
// program). While it stops, every internal poller fails with "context canceled" or
// "connection refused" at warn and error level; raising the gate to DPanic drops that noise.
func newZapLogger(opts Options) (*zap.Logger, zap.AtomicLevel, error) {
	base, err := baseZapLogger(opts)
	if err != nil {
		return nil, zap.AtomicLevel{}, err
	}
	gate := zap.NewAtomicLevelAt(zapcore.LevelOf(base.Core()))
	return base.WithOptions(zap.IncreaseLevel(gate)), gate, nil
}

func baseZapLogger(opts Options) (*zap.Logger, error) {
	if opts.Logger != nil {
		return opts.Logger, nil
	}
	level := zapcore.WarnLevel
	if opts.LogLevel != "" {
		var err error
		if level, err = zapcore.ParseLevel(opts.LogLevel); err != nil {
			return nil, fmt.Errorf("devserver: log level %q: %w", opts.LogLevel, err)
		}
	}
	var w io.Writer = os.Stderr
	if opts.LogWriter != nil {
		w = opts.LogWriter
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(dropNoise{core}), nil
}

// noise are warnings the server logs in normal operation that tell a user of the embedded
// server nothing: the first is logged whenever a Worker Deployment version is created, i.e.
// every time `starter dev` or `starter demo` starts its versioned worker (docs/deployment.md).
var noise = []string{"TrailerToContextMetadataInterceptor: Trailer had metadata but context not wrapped"}

// dropNoise is a zapcore.Core that drops the noise entries.
type dropNoise struct{ zapcore.Core }

func (d dropNoise) With(fields []zapcore.Field) zapcore.Core { return dropNoise{d.Core.With(fields)} }

func (d dropNoise) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if slices.Contains(noise, e.Message) {
		return ce
	}
	return d.Core.Check(e, ce)
}
