package shim

import (
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"
)

// NewLogger writes "augur: message key=value" lines to stderr, or to
// file when one is given, at level and above. A file that cannot be
// opened is reported on stderr once and stderr is used instead.
func NewLogger(level, file string) zerolog.Logger {
	var out io.Writer = os.Stderr
	if file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "augur: log file: %v; logging to stderr\n", err)
		} else {
			out = f
		}
	}
	w := zerolog.ConsoleWriter{
		Out:           out,
		NoColor:       true,
		PartsOrder:    []string{zerolog.MessageFieldName},
		FormatMessage: func(i any) string { return fmt.Sprintf("augur: %s", i) },
	}
	lvl := zerolog.WarnLevel
	switch level {
	case "debug":
		lvl = zerolog.DebugLevel
	case "info":
		lvl = zerolog.InfoLevel
	case "error":
		lvl = zerolog.ErrorLevel
	case "off":
		lvl = zerolog.Disabled
	}
	return zerolog.New(w).Level(lvl)
}
