package peers

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// envOf turns a map into a getenv.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnvResolvesInOrder(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		node  int
		nodes int
		job   string
	}{
		{"nothing", nil, NodeUnknown, 0, ""},
		{"augur wins", map[string]string{"AUGUR_NODE_RANK": "2", "GROUP_RANK": "1", "SLURM_NODEID": "0",
			"AUGUR_NODES": "4", "SLURM_JOB_NUM_NODES": "8", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
			"AUGUR_JOB": "j1", "SLURM_JOB_ID": "77", "TORCHELASTIC_RUN_ID": "r"}, 2, 4, "j1"},
		{"torchrun", map[string]string{"GROUP_RANK": "1", "SLURM_NODEID": "0", "WORLD_SIZE": "16",
			"LOCAL_WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "r9"}, 1, 4, "r9"},
		{"slurm", map[string]string{"SLURM_NODEID": "3", "SLURM_JOB_NUM_NODES": "5", "SLURM_NNODES": "9",
			"SLURM_JOB_ID": "77", "TORCHELASTIC_RUN_ID": "r"}, 3, 5, "77"},
		{"slurm nnodes", map[string]string{"SLURM_NNODES": "6(x1)"}, NodeUnknown, 6, ""},
		{"slurm step", map[string]string{"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "2"}, NodeUnknown, 0, "77.2"},
		{"torchrun default run id", map[string]string{"TORCHELASTIC_RUN_ID": "none"}, NodeUnknown, 0, ""},
		{"peers give the count", map[string]string{"AUGUR_PEERS": "a:1, b:2 ,c:3"}, NodeUnknown, 3, ""},
		{"count wins over peers", map[string]string{"AUGUR_PEERS": "a:1,b:2", "AUGUR_NODES": "3"}, NodeUnknown, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			if err := c.FromEnv(envOf(tc.env)); err != nil {
				t.Fatal(err)
			}
			if c.Node != tc.node || c.Nodes != tc.nodes || c.Job != tc.job {
				t.Errorf("node %d of %d, job %q; want %d of %d, %q", c.Node, c.Nodes, c.Job, tc.node, tc.nodes, tc.job)
			}
		})
	}
}

func TestFromEnvOverridesTheFile(t *testing.T) {
	c := Config{Node: 1, Nodes: 2, Job: "file", Peers: []string{"h0:1", "h1:1"}, Secret: "from-the-file-0123"}
	err := c.FromEnv(envOf(map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "x:1,y:2",
		"AUGUR_PEER_SECRET": "from-the-environment", "AUGUR_PEER_LISTEN": "x:1", "AUGUR_RENDEZVOUS": "/r"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != 0 || c.Nodes != 2 || c.Job != "file" || !slices.Equal(c.Peers, []string{"x:1", "y:2"}) ||
		c.Secret != "from-the-environment" || c.Listen != "x:1" || c.Rendezvous != "/r" {
		t.Errorf("got %+v", c)
	}
}

func TestFromEnvNamesUnreadableVariables(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AUGUR_NODE_RANK": "x"}, `AUGUR_NODE_RANK="x" is not an integer`},
		{map[string]string{"GROUP_RANK": "-1"}, `GROUP_RANK="-1" is not an integer of at least 0`},
		{map[string]string{"AUGUR_NODES": "0"}, `AUGUR_NODES="0" is not an integer of at least 1`},
		{map[string]string{"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "4"}, "do not give a whole number of nodes"},
		{map[string]string{"WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "zero"}, "do not give a whole number of nodes"},
	}
	for _, tc := range cases {
		c := Defaults()
		err := c.FromEnv(envOf(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v; want one containing %q", tc.env, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	const secret = "0123456789abcdef"
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error; none: valid
	}{
		{"one node", nil, nil},
		{"listed", map[string]string{"AUGUR_NODE_RANK": "1", "AUGUR_PEERS": "127.0.0.1:7001,127.0.0.2:7001,n3.cluster:7001",
			"AUGUR_PEER_SECRET": secret, "TORCHELASTIC_RUN_ID": "run-1"}, nil},
		{"listed without a job", map[string]string{"AUGUR_NODE_RANK": "1", "AUGUR_PEERS": "127.0.0.1:7001,127.0.0.2:7001",
			"AUGUR_PEER_SECRET": secret}, []string{"a listed set of peers needs a job id shared by all nodes"}},
		{"listed with a bad job", map[string]string{"AUGUR_NODE_RANK": "1", "AUGUR_PEERS": "127.0.0.1:7001,127.0.0.2:7001",
			"AUGUR_PEER_SECRET": secret, "AUGUR_JOB": "a/b"}, []string{`job id "a/b" (AUGUR_JOB): has '/'`}},
		{"rendezvous", map[string]string{"SLURM_NODEID": "0", "SLURM_NNODES": "2", "SLURM_JOB_ID": "12",
			"AUGUR_RENDEZVOUS": "/shared/rdv"}, nil},
		{"rendezvous with listen", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_JOB": "a",
			"AUGUR_RENDEZVOUS": "/r", "AUGUR_PEER_LISTEN": "node7:0"}, nil},
		{"index unknown", map[string]string{"AUGUR_NODES": "2", "AUGUR_JOB": "a", "AUGUR_RENDEZVOUS": "/r"},
			[]string{"this node's index is unknown in a job of 2 nodes (AUGUR_NODES)"}},
		{"index out of range", map[string]string{"SLURM_NODEID": "4", "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_ID": "1",
			"AUGUR_RENDEZVOUS": "/r"}, []string{"node index 4 (SLURM_NODEID) is out of range for a job of 4 nodes (SLURM_JOB_NUM_NODES): indices run from 0 to 3"}},
		{"no addresses", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2"},
			[]string{"needs the nodes' addresses", "needs a secret"}},
		{"peers length", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "3", "AUGUR_PEERS": "a:1,b:1",
			"AUGUR_PEER_SECRET": secret}, []string{"the peers list (AUGUR_PEERS) has 2 addresses, but the job has 3 nodes (AUGUR_NODES)"}},
		{"bad entries", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a,b:0,:5,0.0.0.0:5,c:x,d:70000,e f:1,,a:1,a:1",
			"AUGUR_PEER_SECRET": secret}, []string{
			`peers entry 0 (AUGUR_PEERS): "a" is not host:port`,
			`entry 1 (AUGUR_PEERS): "b:0": port 0 is only for a listen address`,
			`":5" names no host`,
			`"0.0.0.0:5" is every interface`,
			`port "x" is not a number`,
			`port "70000" is not a number`,
			`"e f" is neither an IP address nor a host name`,
			`peers entry 7 (AUGUR_PEERS): "" is not host:port`,
			"peers entries 8 and 9 (AUGUR_PEERS) are both a:1"}},
		{"both", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a:1,b:1", "AUGUR_RENDEZVOUS": "/r",
			"AUGUR_JOB": "j"}, []string{"both a peers list (AUGUR_PEERS) and a rendezvous directory (AUGUR_RENDEZVOUS) are set"}},
		{"no job", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_RENDEZVOUS": "/r"},
			[]string{"a rendezvous directory (AUGUR_RENDEZVOUS) needs a job id"}},
		{"bad job", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_RENDEZVOUS": "/r", "AUGUR_JOB": "../x"},
			[]string{`job id "../x" (AUGUR_JOB): has '/'`}},
		{"dot job", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_RENDEZVOUS": "/r", "AUGUR_JOB": ".."},
			[]string{`job id ".." (AUGUR_JOB): is not usable as a directory name`}},
		{"relative rendezvous", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_RENDEZVOUS": "r", "AUGUR_JOB": "j"},
			[]string{`rendezvous directory "r" (AUGUR_RENDEZVOUS) is not an absolute path`}},
		{"listen everywhere", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_NODES": "2", "AUGUR_RENDEZVOUS": "/r", "AUGUR_JOB": "j",
			"AUGUR_PEER_LISTEN": ":7000"}, []string{`listen address (AUGUR_PEER_LISTEN): ":7000" names no host`}},
		{"listen other port", map[string]string{"AUGUR_NODE_RANK": "1", "AUGUR_PEERS": "a:1,b:1", "AUGUR_PEER_SECRET": secret,
			"AUGUR_PEER_LISTEN": "10.0.0.2:2"}, []string{"listen address 10.0.0.2:2 (AUGUR_PEER_LISTEN) has another port than this node's peers entry b:1"}},
		{"short secret", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a:1,b:1", "AUGUR_PEER_SECRET": "short"},
			[]string{"peer secret (AUGUR_PEER_SECRET): has 5 characters; at least 16 are needed"}},
		{"secret with space", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a:1,b:1", "AUGUR_PEER_SECRET": secret + " x"},
			[]string{"may hold only printable ASCII"}},
		{"pfs weight below 1", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a:1,b:1", "AUGUR_PEER_SECRET": secret,
			"AUGUR_PEER_PFS_WEIGHT": "0.5"}, []string{"pfs_weight (AUGUR_PEER_PFS_WEIGHT) is 0.5: 1 (time alone decides) to 1e6"}},
		{"pfs weight", map[string]string{"AUGUR_NODE_RANK": "0", "AUGUR_PEERS": "a:1,b:1", "AUGUR_PEER_SECRET": secret,
			"AUGUR_JOB": "j", "AUGUR_PEER_PFS_WEIGHT": "1000"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			if err := c.FromEnv(envOf(tc.env)); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func TestValidateNamesConfigurationKeys(t *testing.T) {
	c := Config{Node: 5, Nodes: 2, Peers: []string{"a:1", "b:1"}, Secret: "0123456789abcdef"}
	err := c.Validate()
	want := "node index 5 (configuration key node) is out of range for a job of 2 nodes (configuration key nodes)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v; want %q", err, want)
	}
}

func TestListenAddr(t *testing.T) {
	host, _ := os.Hostname()
	cases := []struct {
		c    Config
		want string
	}{
		{Config{Node: 1, Nodes: 2, Peers: []string{"a:1", "b:2"}}, "b:2"},
		{Config{Node: 1, Nodes: 2, Peers: []string{"a:1", "b:2"}, Listen: "10.1.1.1:2"}, "10.1.1.1:2"},
		{Config{Node: 0, Nodes: 2, Rendezvous: "/r", Listen: "127.0.0.3:0"}, "127.0.0.3:0"},
		{Config{Node: 0, Nodes: 2, Rendezvous: "/r"}, host + ":0"},
	}
	for _, tc := range cases {
		got, err := tc.c.ListenAddr()
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.c, got, err, tc.want)
		}
	}
}
