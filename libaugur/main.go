// Command libaugur is built with -buildmode=c-shared into libaugur-go.so,
// the Go half of augur. Users preload libaugur.so, the data plane
// (intercept.c and preload/, plain C); it loads this library only in a process that
// finds no live leader with a published configuration (intercept.c,
// load_control_plane). Here the configuration is read and handed to the
// data plane, and the one process that wins the job's leader lock runs
// the control plane and publishes the configuration for the others.
package main

/*
#cgo CFLAGS: -O2 -Wall -Wextra -Werror -fno-strict-aliasing -I${SRCDIR}/..
#cgo LDFLAGS: -Wl,--unresolved-symbols=ignore-all
#include <stdlib.h>
#include "preload/segment.h"
const char *augur_job(void);
int augur_disabled(void);
int augur_add_root(const char *path);
int augur_add_tier(const char *path);
void augur_set_segment(struct augur_segment *seg);
void augur_set_every_open(int on);
void augur_start(int on);
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/augur-hpc/augur/shim"
)

// campaignInterval is how often a process that is not the leader checks
// whether the leader has gone.
const campaignInterval = 2 * time.Second

func init() {
	if os.Getenv("AUGUR_DEBUG_GC_STRESS") == "1" {
		go gcStress()
	}
	if C.augur_disabled() != 0 {
		return
	}
	if !start() {
		C.augur_start(0)
	}
}

// start configures the data plane and reports whether it may intercept.
// Any failure is one message on stderr; the host then runs unaccelerated.
func start() bool {
	cfg, err := shim.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "augur: %v; passing through\n", err)
		return false
	}
	log := shim.NewLogger(cfg.LogLevel, cfg.LogFile)
	for _, p := range cfg.Problems {
		log.Warn().Msg(p.String())
	}
	seg, err := shim.AttachSegment(C.GoString(C.augur_job()))
	if err != nil {
		log.Error().Msgf("%v; passing through", err)
		return false
	}
	// Lead now, before interception turns on, as augur run does: the
	// first process of a job otherwise raced its own leader goroutine,
	// and a program that opened its dataset early (cat, sha256sum, cp)
	// read every original because the tiers were not validated yet. The
	// host's first path call waits for this within wait_for_go's bound.
	l, err := shim.Lead(cfg, seg, log)
	if err != nil {
		log.Warn().Msgf("leader lock: %v", err)
	}
	tiers := make([]string, len(cfg.Tiers))
	for i, t := range cfg.Tiers {
		tiers[i] = t.Path
	}
	if l != nil {
		tiers = l.ServedTiers() // "" where the leader found a tier unusable
	} else if err == nil {
		go shim.Campaign(cfg, seg, log, campaignInterval)
	}
	for _, r := range cfg.RootForms() {
		if !cCall(func(s *C.char) C.int { return C.augur_add_root(s) }, r) {
			log.Error().Msgf("too many dataset roots; %s not accelerated", r)
		}
	}
	for _, t := range tiers {
		if !cCall(func(s *C.char) C.int { return C.augur_add_tier(s) }, t) {
			log.Error().Msgf("tier path %s too long; not used", t)
		}
	}
	if cfg.Revalidate == 0 {
		C.augur_set_every_open(1)
	}
	C.augur_set_segment((*C.struct_augur_segment)(seg.Ptr()))
	C.augur_start(1)
	return true
}

// gcStress is a testing aid, switched on by AUGUR_DEBUG_GC_STRESS=1: it
// runs the garbage collector back to back for the life of the process, so
// that a fork() of the host almost always happens while the Go runtime
// holds its locks and has threads stopped or marking. A forked child that
// entered Go then would hang; test/fork_test.go uses it to show that
// children never do. It costs a core: never set it in production.
func gcStress() {
	for {
		runtime.GC()
	}
}

func cCall(fn func(*C.char) C.int, s string) bool {
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	return fn(cs) == 0
}

func main() {}
