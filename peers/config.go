package peers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NodeUnknown is Config.Node while nothing has said which node this is.
const NodeUnknown = -1

// Config is a job's membership: which node this is, how many there are,
// and how the nodes find each other. The toml tags let the shim's
// configuration embed it as a table; FromEnv lays the launcher's
// variables over it.
//
// A job of one node (Nodes 0 or 1) has no peers, and nothing else here
// matters to it.
type Config struct {
	Node  int    `toml:"node"`  // this node's index, 0 to Nodes-1
	Nodes int    `toml:"nodes"` // nodes in the job
	Job   string `toml:"job"`   // the job id every node shares: names the rendezvous
	// Peers lists every node's address (host:port), entry i for node i;
	// each leader listens on its own entry. Either this or Rendezvous.
	Peers []string `toml:"peers"`
	// Rendezvous is a directory on a filesystem all nodes share, where
	// each leader writes its address under <Rendezvous>/<Job>/.
	Rendezvous string `toml:"rendezvous"`
	// Listen is the address this node's leader binds (host:port, port 0
	// for any); by default its entry in Peers, else this host's name.
	Listen string `toml:"listen"`
	// Secret authenticates everything between the job's nodes, through a
	// key derived from it and Job (so a secret used by many jobs gives
	// each its own key). With a rendezvous directory it may be left out:
	// the first leader then creates one there.
	Secret string `toml:"secret"`
	// PFSWeight weighs the shared filesystem's expected delivery time
	// against a peer's (ModelConfig.PFSWeight); 0 takes the default.
	PFSWeight float64 `toml:"pfs_weight"`

	// from names, per toml key, the variable that set the field, so that
	// a message about a bad value says where it came from.
	from map[string]string
}

// Defaults is the configuration before any file or variable: one node,
// its index unknown.
func Defaults() Config { return Config{Node: NodeUnknown} }

// Enabled says whether the job has peers at all.
func (c *Config) Enabled() bool { return c.Nodes > 1 }

// Launcher variables, first found wins: augur's own, then torchrun's,
// then SLURM's.
var (
	nodeVars  = []string{"AUGUR_NODE_RANK", "GROUP_RANK", "SLURM_NODEID"}
	nodesVars = []string{"AUGUR_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"}
)

// FromEnv lays the environment (read through getenv) over c: every
// variable that is set replaces what c holds, as the shim's environment
// wins over its file. A list of peers with no node count from anywhere
// gives the count. It returns an error naming each variable that is set
// but unreadable; whether the result makes sense is Validate's question.
func (c *Config) FromEnv(getenv func(string) string) error {
	var errs []error
	if k, n, err := firstInt(getenv, nodeVars, 0); err != nil {
		errs = append(errs, err)
	} else if k != "" {
		c.set("node", k, func() { c.Node = n })
	}
	errs = append(errs, c.nodesFromEnv(getenv))
	if k, job := jobFromEnv(getenv); k != "" {
		c.set("job", k, func() { c.Job = job })
	}
	if v := getenv("AUGUR_PEERS"); v != "" {
		c.set("peers", "AUGUR_PEERS", func() { c.Peers = splitList(v) })
	}
	strs := []struct {
		key, env string
		dst      *string
	}{
		{"rendezvous", "AUGUR_RENDEZVOUS", &c.Rendezvous},
		{"listen", "AUGUR_PEER_LISTEN", &c.Listen},
		{"secret", "AUGUR_PEER_SECRET", &c.Secret},
	}
	for _, s := range strs {
		if v := getenv(s.env); v != "" {
			c.set(s.key, s.env, func() { *s.dst = v })
		}
	}
	if v := getenv("AUGUR_PEER_PFS_WEIGHT"); v != "" {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("AUGUR_PEER_PFS_WEIGHT=%q is not a number", v))
		} else {
			c.set("pfs_weight", "AUGUR_PEER_PFS_WEIGHT", func() { c.PFSWeight = w })
		}
	}
	if c.Nodes == 0 && len(c.Peers) > 0 {
		c.set("nodes", c.origin("peers"), func() { c.Nodes = len(c.Peers) })
	}
	return errors.Join(errs...)
}

// nodesFromEnv takes the node count from the first count variable set,
// else from torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE.
func (c *Config) nodesFromEnv(getenv func(string) string) error {
	if k, n, err := firstInt(getenv, nodesVars, 1); k != "" {
		if err == nil {
			c.set("nodes", k, func() { c.Nodes = n })
		}
		return err
	}
	ws, lws := getenv("WORLD_SIZE"), getenv("LOCAL_WORLD_SIZE")
	if ws == "" || lws == "" {
		return nil
	}
	w, werr := strconv.Atoi(ws)
	l, lerr := strconv.Atoi(lws)
	if werr != nil || lerr != nil || w < 1 || l < 1 || w%l != 0 {
		return fmt.Errorf("WORLD_SIZE=%q and LOCAL_WORLD_SIZE=%q do not give a whole number of nodes", ws, lws)
	}
	c.set("nodes", "WORLD_SIZE/LOCAL_WORLD_SIZE", func() { c.Nodes = w / l })
	return nil
}

// firstInt reads the first of keys that is set as an integer of at least
// min. It returns the key found ("" if none) and an error if its value is
// not such an integer. SLURM writes some counts as "4(x2)": the leading
// number is taken.
func firstInt(getenv func(string) string, keys []string, min int) (string, int, error) {
	for _, k := range keys {
		v := getenv(k)
		if v == "" {
			continue
		}
		digits := v
		if i := strings.IndexByte(v, '('); i > 0 && strings.HasPrefix(k, "SLURM_") {
			digits = v[:i]
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < min {
			return k, 0, fmt.Errorf("%s=%q is not an integer of at least %d", k, v, min)
		}
		return k, n, nil
	}
	return "", 0, nil
}

// jobFromEnv is the job id every node of the job sees alike, and the
// variable it came from. A SLURM step id is added when set: two steps of
// one allocation are two jobs. torchrun's default run id "none" names no
// job.
func jobFromEnv(getenv func(string) string) (string, string) {
	if v := getenv("AUGUR_JOB"); v != "" {
		return "AUGUR_JOB", v
	}
	if v := getenv("SLURM_JOB_ID"); v != "" {
		if step := getenv("SLURM_STEP_ID"); step != "" {
			return "SLURM_JOB_ID.SLURM_STEP_ID", v + "." + step
		}
		return "SLURM_JOB_ID", v
	}
	if v := getenv("TORCHELASTIC_RUN_ID"); v != "" && v != "none" {
		return "TORCHELASTIC_RUN_ID", v
	}
	return "", ""
}

// splitList splits a comma-separated list, trimming blanks around
// entries; empty entries stay, for Validate to name.
func splitList(v string) []string {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// set runs assign and records that key came from source.
func (c *Config) set(key, source string, assign func()) {
	assign()
	if c.from == nil {
		c.from = map[string]string{}
	}
	c.from[key] = source
}

// origin names where key's value came from: a variable, or the
// configuration's key.
func (c *Config) origin(key string) string {
	if s := c.from[key]; s != "" {
		return s
	}
	return "configuration key " + key
}

// Validate says everything wrong with c, one error per problem, each
// naming the variable or key it came from.
func (c *Config) Validate() error {
	errs := []error{c.checkCounts()}
	errs = append(errs, c.checkPeers()...)
	errs = append(errs, c.checkRendezvous(), c.checkListen(), c.checkSecret())
	if c.PFSWeight != 0 && !(c.PFSWeight >= 1 && c.PFSWeight <= 1e6) {
		errs = append(errs, fmt.Errorf("pfs_weight (%s) is %g: 1 (time alone decides) to 1e6 (a peer that holds the file always), or 0 for the default 2",
			c.origin("pfs_weight"), c.PFSWeight))
	}
	return errors.Join(errs...)
}

func (c *Config) checkCounts() error {
	switch {
	case c.Nodes < 0:
		return fmt.Errorf("node count %d (%s) is negative", c.Nodes, c.origin("nodes"))
	case c.Node == NodeUnknown && c.Enabled():
		return fmt.Errorf("this node's index is unknown in a job of %d nodes (%s): set AUGUR_NODE_RANK, or run under torchrun (GROUP_RANK) or SLURM (SLURM_NODEID)",
			c.Nodes, c.origin("nodes"))
	case c.Node != NodeUnknown && (c.Node < 0 || c.Node >= max(c.Nodes, 1)):
		return fmt.Errorf("node index %d (%s) is out of range for a job of %d nodes (%s): indices run from 0 to %d",
			c.Node, c.origin("node"), max(c.Nodes, 1), c.origin("nodes"), max(c.Nodes, 1)-1)
	}
	return nil
}

// checkPeers checks the listed addresses: one per node, each a host and
// a port others can dial, none twice.
func (c *Config) checkPeers() []error {
	if len(c.Peers) == 0 {
		if c.Enabled() && c.Rendezvous == "" {
			return []error{fmt.Errorf("a job of %d nodes (%s) needs the nodes' addresses: list them (AUGUR_PEERS=host:port,...) or name a rendezvous directory on a shared filesystem (AUGUR_RENDEZVOUS)",
				c.Nodes, c.origin("nodes"))}
		}
		return nil
	}
	var errs []error
	if len(c.Peers) != c.Nodes {
		errs = append(errs, fmt.Errorf("the peers list (%s) has %d addresses, but the job has %d nodes (%s): entry i is node i's address",
			c.origin("peers"), len(c.Peers), c.Nodes, c.origin("nodes")))
	}
	if c.Rendezvous != "" {
		errs = append(errs, fmt.Errorf("both a peers list (%s) and a rendezvous directory (%s) are set: use one",
			c.origin("peers"), c.origin("rendezvous")))
	}
	seen := map[string]int{}
	for i, p := range c.Peers {
		if err := checkAddr(p, false); err != nil {
			errs = append(errs, fmt.Errorf("peers entry %d (%s): %w", i, c.origin("peers"), err))
		} else if j, dup := seen[p]; dup {
			errs = append(errs, fmt.Errorf("peers entries %d and %d (%s) are both %s: each node needs its own address", j, i, c.origin("peers"), p))
		}
		seen[p] = i
	}
	return errs
}

func (c *Config) checkRendezvous() error {
	if c.Rendezvous == "" {
		return nil
	}
	if !filepath.IsAbs(c.Rendezvous) {
		return fmt.Errorf("rendezvous directory %q (%s) is not an absolute path", c.Rendezvous, c.origin("rendezvous"))
	}
	if c.Job == "" {
		return fmt.Errorf("a rendezvous directory (%s) needs a job id shared by all nodes: set AUGUR_JOB, or run under SLURM (SLURM_JOB_ID) or torchrun with --rdzv-id (TORCHELASTIC_RUN_ID)",
			c.origin("rendezvous"))
	}
	if err := checkJob(c.Job); err != nil {
		return fmt.Errorf("job id %q (%s): %w", c.Job, c.origin("job"), err)
	}
	return nil
}

// checkJob accepts a job id that is safe as one path component.
func checkJob(job string) error {
	if job == "." || job == ".." || len(job) > 128 {
		return errors.New("is not usable as a directory name")
	}
	for _, r := range job {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("has %q: only letters, digits, '.', '_' and '-' may name a job", r)
		}
	}
	return nil
}

// checkListen checks the address to bind. With a peers list the node
// listens on its own entry, so a listen address may only pick another
// host (an interface) for that entry's port.
func (c *Config) checkListen() error {
	if c.Listen == "" {
		return nil
	}
	if err := checkAddr(c.Listen, true); err != nil {
		return fmt.Errorf("listen address (%s): %w", c.origin("listen"), err)
	}
	if c.Node < 0 || c.Node >= len(c.Peers) || checkAddr(c.Peers[c.Node], false) != nil {
		return nil
	}
	_, lport, _ := net.SplitHostPort(c.Listen)
	_, pport, _ := net.SplitHostPort(c.Peers[c.Node])
	if lport != pport {
		return fmt.Errorf("listen address %s (%s) has another port than this node's peers entry %s: the other nodes dial the entry",
			c.Listen, c.origin("listen"), c.Peers[c.Node])
	}
	return nil
}

func (c *Config) checkSecret() error {
	if c.Secret == "" {
		if c.Enabled() && c.Rendezvous == "" {
			return errors.New("a listed set of peers needs a secret (AUGUR_PEER_SECRET, at least 16 characters): without a rendezvous directory no node can create one")
		}
		return nil
	}
	if err := checkSecret(c.Secret); err != nil {
		return fmt.Errorf("peer secret (%s): %w", c.origin("secret"), err)
	}
	if c.Job == "" && c.Enabled() && c.Rendezvous == "" {
		return errors.New("a listed set of peers needs a job id shared by all nodes (AUGUR_JOB, or SLURM_JOB_ID or TORCHELASTIC_RUN_ID under their launchers): the job's key is derived from the secret and the job id, so that one job's requests are nothing to another")
	}
	if err := checkJob(c.Job); err != nil && c.Rendezvous == "" {
		return fmt.Errorf("job id %q (%s): %w", c.Job, c.origin("job"), err)
	}
	return nil
}

// minSecret is the shortest secret accepted: 16 characters drawn by a
// person still leave guessing out of reach over a network.
const minSecret = 16

// checkSecret accepts a secret of at least minSecret printable ASCII
// characters (it is a key, and a rendezvous file's line).
func checkSecret(s string) error {
	if len(s) < minSecret {
		return fmt.Errorf("has %d characters; at least %d are needed", len(s), minSecret)
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return errors.New("may hold only printable ASCII characters other than space")
		}
	}
	return nil
}

// checkAddr checks a host:port. The host must name one machine: an
// empty or unspecified host (0.0.0.0, ::) would listen on every
// interface. Port 0 (any) only with anyPort.
func checkAddr(addr string, anyPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	p, err := strconv.Atoi(port)
	switch {
	case err != nil || p < 0 || p > 65535:
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", addr, port)
	case p == 0 && !anyPort:
		return fmt.Errorf("%q: port 0 is only for a listen address with a rendezvous; the other nodes need the real port", addr)
	case host == "":
		return fmt.Errorf("%q names no host: augur listens on one address, never on every interface", addr)
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return fmt.Errorf("%q is every interface: augur listens on one address only", addr)
		}
		return nil
	}
	if !hostName(host) {
		return fmt.Errorf("%q: %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

// hostName says whether h is a syntactically valid DNS host name.
func hostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// ListenAddr is the address this node's leader binds: the listen
// address if set, else this node's peers entry, else this host's name
// with any port (the rendezvous then tells the others which).
//
// Preconditions: Validate returned nil.
func (c *Config) ListenAddr() (string, error) {
	switch {
	case c.Listen != "":
		return c.Listen, nil
	case c.Node >= 0 && c.Node < len(c.Peers):
		return c.Peers[c.Node], nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("no listen address set and no host name: %w", err)
	}
	return net.JoinHostPort(host, "0"), nil
}
