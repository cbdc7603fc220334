package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fioRunTimeout bounds one fio run; each reads 8 MiB and takes well under
// a second, so only a hang gets near it.
const fioRunTimeout = 2 * time.Minute

const (
	fioFiles    = 4
	fioFileSize = 1 << 20
	fioJobs     = 2
)

// fioOutput is the part of fio's --output-format=json the test reads.
type fioOutput struct {
	Jobs []struct {
		Name  string `json:"jobname"`
		Error int    `json:"error"`
		Read  struct {
			IOBytes int64 `json:"io_bytes"`
		} `json:"read"`
	} `json:"jobs"`
}

func parseFio(t *testing.T, r Result) fioOutput {
	t.Helper()
	var out fioOutput
	i := strings.IndexByte(r.Stdout, '{') // fio may print notes before the JSON
	if i < 0 || json.Unmarshal([]byte(r.Stdout[i:]), &out) != nil {
		t.Fatalf("fio printed no JSON:\nstdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	}
	return out
}

// TestFio runs fio over warmed dataset files with every ioengine a
// training or benchmark job uses against local files (read, pread,
// preadv, preadv2, mmap, and libaio with O_DIRECT, which tmpfs refuses
// and the shim drops for tier copies), sequential at 64 KiB and random at
// 4 KiB, with forked jobs (fio's default; the data plane runs without Go
// there) and with --thread.
//
// Content: the files are written beforehand, without the shim, by fio
// itself with --verify=crc32c, so each 4 KiB block carries a header with
// its offset and a checksum of its data. The read-only runs under the
// shim pass --verify=crc32c, and fio checks every block it reads through
// the engine under test (a wrong or shifted byte fails the run). A block
// from another file at the same offset would still pass that check, so
// the test also checks that each file's RAM copy is byte-identical to it
// and, with inotify, that fio opened exactly those copies and never an
// original. Quantity: each job must report reading all 4 MiB.
func TestFio(t *testing.T) {
	fio := needProgram(t, "fio")
	c := NewCase(t)
	dir := filepath.Join(c.Dataset, "fio")
	must(t, os.MkdirAll(dir, 0o755))
	gen := c.RunPlain(fioRunTimeout, fio, "--name=gen", "--directory="+dir,
		"--filename_format=f$filenum.bin", fmt.Sprintf("--nrfiles=%d", fioFiles),
		fmt.Sprintf("--filesize=%d", fioFileSize), fmt.Sprintf("--size=%d", fioFiles*fioFileSize),
		"--rw=write", "--bs=4k", "--verify=crc32c", "--do_verify=0", "--verify_state_save=0",
		"--ioengine=psync")
	mustPlain(t, gen)
	files := datasetFiles(t, dir)
	if len(files) != fioFiles {
		t.Fatalf("fio wrote %d files, want %d: %v", len(files), fioFiles, files)
	}
	c.Warm()
	assertHaveRAMCopies(t, c, files)
	for _, f := range files {
		if got, want := fileSHA256(t, c.CopyOf(c.RAM, f)), fileSHA256(t, f); got != want {
			t.Fatalf("%s: RAM copy differs from the original", f)
		}
	}

	engines := []struct {
		name  string
		extra []string
	}{
		{"sync", nil},
		{"psync", nil},
		{"pvsync", nil},
		{"pvsync2", nil},
		{"mmap", nil},
		{"libaio", []string{"--direct=1", "--iodepth=8"}},
	}
	patterns := []struct{ rw, bs string }{{"read", "64k"}, {"randread", "4k"}}
	for _, eng := range engines {
		for _, threads := range []bool{false, true} {
			for _, p := range patterns {
				name := eng.name + "/fork/" + p.rw
				if threads {
					name = eng.name + "/thread/" + p.rw
				}
				t.Run(name, func(t *testing.T) {
					args := []string{"--name=augur", "--readonly",
						"--filename=" + strings.Join(files, ":"),
						fmt.Sprintf("--size=%d", fioFiles*fioFileSize),
						"--rw=" + p.rw, "--bs=" + p.bs,
						"--verify=crc32c", "--verify_interval=4k",
						"--invalidate=0", fmt.Sprintf("--numjobs=%d", fioJobs),
						"--ioengine=" + eng.name, "--output-format=json"}
					if threads {
						args = append(args, "--thread")
					}
					args = append(args, eng.extra...)
					obs := Observe(t, c.Dataset, c.RAM)
					r := runIn(t, c, fioRunTimeout, fio, args...)
					obs.Stop()
					out := parseFio(t, r)
					if len(out.Jobs) != fioJobs {
						t.Fatalf("fio reported %d jobs, want %d:\n%s", len(out.Jobs), fioJobs, r.Stdout)
					}
					for i, j := range out.Jobs {
						if j.Error != 0 {
							t.Errorf("job %d: error %d\n%s", i, j.Error, r.Stderr)
						}
						if j.Read.IOBytes != fioFiles*fioFileSize {
							t.Errorf("job %d read %d bytes, want %d", i, j.Read.IOBytes, fioFiles*fioFileSize)
						}
					}
					assertServedFromRAM(t, c, obs, files)
				})
			}
		}
	}
}
