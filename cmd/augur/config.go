package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/augur-hpc/augur/shim"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// jobFlags are the configuration flags run, warm, check and clean share.
// They are turned into the AUGUR_* variables, so that this process and
// every process of the job read the same configuration through
// shim.Load.
type jobFlags struct {
	dataset listFlag
	tiers   listFlag
	seed    string
	policy  string
	config  string
	// A job of several nodes: the nodes' addresses, or where they meet.
	peers      string
	rendezvous string
}

func (j *jobFlags) register(fs *flag.FlagSet) {
	fs.Var(&j.dataset, "dataset", "dataset root (repeatable)")
	fs.Var(&j.tiers, "tier", "tier as DIR:SIZE, fastest first (repeatable)")
	fs.StringVar(&j.seed, "seed", "", "shuffle seed of the job")
	fs.StringVar(&j.policy, "policy", "", "placement policy")
	fs.StringVar(&j.config, "config", "", "TOML configuration file")
	fs.StringVar(&j.peers, "peers", "", "a job of several nodes: every node's address, host:port,... (entry i is node i)")
	fs.StringVar(&j.rendezvous, "rendezvous", "", "a job of several nodes: a directory on a shared filesystem where the nodes meet")
}

// export sets the AUGUR_* variables the flags stand for.
func (j *jobFlags) export() {
	if j.config != "" {
		abs, _ := filepath.Abs(j.config)
		os.Setenv("AUGUR_CONFIG", abs)
	}
	if len(j.dataset) > 0 {
		var roots []string
		for _, d := range j.dataset {
			abs, _ := filepath.Abs(d)
			roots = append(roots, abs)
		}
		os.Setenv("AUGUR_DATASET", strings.Join(roots, ":"))
	}
	if len(j.tiers) > 0 {
		os.Setenv("AUGUR_TIERS", strings.Join(j.tiers, ","))
	}
	if j.seed != "" {
		os.Setenv("AUGUR_SEED", j.seed)
	}
	if j.policy != "" {
		os.Setenv("AUGUR_POLICY", j.policy)
	}
	if j.peers != "" {
		os.Setenv("AUGUR_PEERS", j.peers)
	}
	if j.rendezvous != "" {
		abs, _ := filepath.Abs(j.rendezvous)
		os.Setenv("AUGUR_RENDEZVOUS", abs)
	}
}

// load exports the flags and loads the configuration as the shim will,
// saying what is wrong with it that augur works around.
func (j *jobFlags) load() (*shim.Config, error) {
	j.export()
	cfg, err := shim.Load()
	if err == nil {
		for _, p := range cfg.Problems {
			fmt.Fprintf(os.Stderr, "augur: %s\n", p)
		}
	}
	return cfg, err
}

func itoa(i int) string { return strconv.Itoa(i) }

// bufioWriter buffers standard output for long listings.
func bufioWriter() *bufio.Writer { return bufio.NewWriterSize(os.Stdout, 1<<16) }
