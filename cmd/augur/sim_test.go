package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimCommand(t *testing.T) {
	var out, errs bytes.Buffer
	if rc := runSim([]string{"--nodes", "2", "--epochs", "2", "--dataset-count", "500", "--dataset-size", "1MB,0.2MB",
		"--policy", "pfs,perfect", "--json", "-"}, &out, &errs); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errs.String())
	}
	var res struct {
		Nodes    int `json:"nodes"`
		Policies []struct {
			Policy string            `json:"policy"`
			Epochs []json.RawMessage `json:"epochs"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json -: %v\n%s", err, out.String())
	}
	if res.Nodes != 2 || len(res.Policies) != 2 || len(res.Policies[1].Epochs) != 2 {
		t.Fatalf("got %+v", res)
	}
	out.Reset()
	if rc := runSim([]string{"--nodes", "2", "--dataset-count", "100", "--policy", "perfect"}, &out, &errs); rc != 0 ||
		!strings.Contains(out.String(), "| perfect |") {
		t.Fatalf("exit %d, table:\n%s", rc, out.String())
	}
	errs.Reset()
	if rc := runSim([]string{"--policy", "bogus"}, &out, &errs); rc == 0 || !strings.Contains(errs.String(), "bogus") {
		t.Fatalf("a bogus policy: exit %d, %q", rc, errs.String())
	}
	// Several node counts: each simulated, a list in --json, a panel each.
	out.Reset()
	png := filepath.Join(t.TempDir(), "sim.png")
	if rc := runSim([]string{"--nodes", "1,3", "--epochs", "1", "--dataset-count", "200", "--policy", "pfs",
		"--json", "-", "--png", png}, &out, &errs); rc != 0 {
		t.Fatalf("--nodes 1,3: exit %d: %s", rc, errs.String())
	}
	var list []struct {
		Nodes int `json:"nodes"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) != 2 || list[0].Nodes != 1 || list[1].Nodes != 3 {
		t.Fatalf("--nodes 1,3 --json -: %v, %+v", err, list)
	}
	if info, err := os.Stat(png); err != nil || info.Size() == 0 {
		t.Fatalf("--png: %v", err)
	}
	errs.Reset()
	if rc := runSim([]string{"--nodes", "4,x"}, &out, &errs); rc != 2 || !strings.Contains(errs.String(), `"x"`) {
		t.Fatalf("--nodes 4,x: exit %d, %q", rc, errs.String())
	}
	// A number given is taken, also 0: an error, not the default.
	for flag, want := range map[string]string{"--epochs": "epochs", "--ranks-per-node": "ranks per node", "--dataset-count": "count"} {
		errs.Reset()
		if rc := runSim([]string{"--nodes", "2", "--dataset-count", "100", "--policy", "pfs", flag, "0"}, &out, &errs); rc == 0 ||
			!strings.Contains(errs.String(), want) {
			t.Errorf("%s 0: exit %d, %q", flag, rc, errs.String())
		}
	}
}

// TestSimOutputsCheckedFirst: an output that cannot be written fails the
// command before it simulates anything (no table printed), and the check
// neither truncates an existing file nor leaves a new one behind.
func TestSimOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.json")
	if err := os.WriteFile(kept, []byte("earlier results"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.json")
	for _, c := range []struct {
		args []string
		bad  string
	}{
		{[]string{"--json", filepath.Join(dir, "no", "such.json")}, "no/such.json"},
		{[]string{"--json", kept, "--png", dir}, dir},
		{[]string{"--json", fresh, "--png", filepath.Join(dir, "no", "such.png")}, "no/such.png"},
		{[]string{"--validate", "bench.json", "--png", filepath.Join(dir, "no", "v.png")}, "no/v.png"},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"--nodes", "2", "--epochs", "1", "--dataset-count", "100", "--policy", "pfs"}, c.args...)
		if rc := runSim(args, &out, &errs); rc != 1 || !strings.Contains(errs.String(), c.bad) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 1 naming %s, nothing simulated", c.args, rc, errs.String(), out.String(), c.bad)
		}
	}
	if data, err := os.ReadFile(kept); err != nil || string(data) != "earlier results" {
		t.Errorf("an existing --json file after the check: %q, %v", data, err)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a new --json file left behind by the check: %v", err)
	}
}
