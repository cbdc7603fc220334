package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/augur-hpc/augur/shim"
)

func cmdRun(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	lib := fs.String("lib", "", "path of libaugur.so (default: next to this program)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fail("run: no command given (augur run [flags] -- CMD ARGS...)")
	}
	// A command that cannot run fails before the job is led: leading
	// validates the tiers, which takes long when they hold a dataset.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return cannotRun(argv[0], err)
	}
	libPath, err := findLib(*lib)
	if err != nil {
		return fail("run: %v", err)
	}
	cfg, err := jf.load()
	if err != nil {
		return withoutAugur(argv, err)
	}
	job := os.Getenv("AUGUR_JOB") // a script may name the job to find it later
	if job == "" {
		job = shim.NewJobID("run-")
		os.Setenv("AUGUR_JOB", job)
		os.Setenv(shim.JobMadeVar, job)
	}
	seg, err := shim.AttachSegment(job)
	if err != nil {
		return withoutAugur(argv, err)
	}
	log := shim.NewLogger(cfg.LogLevel, cfg.LogFile)
	// Lead before the command starts, so its first open already finds
	// validated tiers.
	leader, err := shim.Lead(cfg, seg, log)
	if err != nil {
		return withoutAugur(argv, err)
	}
	if leader != nil {
		defer leader.Close()
	}
	return runChild(argv, libPath)
}

// withoutAugur runs the command unaccelerated after one message saying
// why: a job is never kept from running by augur's trouble (a bad
// configuration, another user's state in the job's place).
func withoutAugur(argv []string, why error) int {
	fmt.Fprintf(os.Stderr, "augur: %v; running the command without augur\n", why)
	os.Setenv("AUGUR_DISABLE", "1")
	return runChild(argv, "")
}

// runChild runs argv with the shim lib preloaded ("": not), forwards the
// signals a terminal or batch system sends, and returns the child's exit
// status the way a shell reports it.
func runChild(argv []string, lib string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	if lib != "" {
		preload := lib
		if old := os.Getenv("LD_PRELOAD"); old != "" {
			preload = lib + ":" + old
		}
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+preload)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return cannotRun(argv[0], err)
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	if err != nil {
		return fail("run: %v", err)
	}
	return 0
}

// cannotRun reports that the command name cannot be run, err coming from
// exec.LookPath or from starting it, and returns a shell's status for it:
// 127 when there is no such command, 126 when there is one that cannot be
// executed (not executable, a directory, not a program).
func cannotRun(name string, err error) int {
	status, why := 126, err.Error()
	var lookErr *exec.Error
	var errno syscall.Errno
	switch {
	case errors.As(err, &lookErr) && (errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)):
		status, why = 127, "command not found"
	case errors.Is(err, fs.ErrNotExist): // the file is there, so execve's ENOENT is about another
		status, why = 127, "cannot execute: required file not found (its #! interpreter?)"
	case errors.Is(err, fs.ErrPermission):
		why = "permission denied"
	case errors.As(err, &errno):
		why = errno.Error() // "is a directory", "exec format error", ...
	}
	fmt.Fprintf(os.Stderr, "augur: run: %s: %s\n", name, why)
	return status
}

// findLib locates libaugur.so: the flag, AUGUR_LIB, or next to this
// program.
func findLib(flagValue string) (string, error) {
	candidates := []string{flagValue, os.Getenv("AUGUR_LIB")}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "libaugur.so"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if _, err := os.Stat(abs); err == nil {
			return abs, nil
		}
		if c == flagValue || c == os.Getenv("AUGUR_LIB") {
			return "", fmt.Errorf("%s: no such file", c)
		}
	}
	return "", errors.New("libaugur.so not found next to augur; pass --lib or set AUGUR_LIB")
}
