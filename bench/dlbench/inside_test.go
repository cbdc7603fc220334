package dlbench

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/augur-hpc/augur/bench/pfsemu"
)

// Records after a header start at the header and follow each other;
// nothing reads the header.
func TestRecordsAfterAHeader(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "rec"), GenSpec{Layout: LayoutRecords, Count: 10, Size: 1000, Files: 2, Header: 2148})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Samples) != 10 || ds.Files != 2 || ds.Bytes != 10*1000 {
		t.Fatalf("%d samples in %d files, %d bytes", len(ds.Samples), ds.Files, ds.Bytes)
	}
	if s := ds.Samples[6]; s.Path != "shard-0001.rec" || s.Offset != 2148+1000 || s.Length != 1000 || !s.Record {
		t.Errorf("sample 6 = %+v, want the second record of the second file, at 3148", s)
	}
	fi, err := os.Stat(filepath.Join(ds.Root, "shard-0000.rec"))
	if err != nil || fi.Size() != 2148+5*1000 {
		t.Errorf("a file of 5 records: %v, %v", fi.Size(), err)
	}
	if _, err := Generate(t.TempDir(), GenSpec{Layout: LayoutFlat, Count: 2, Size: 10, Header: 5}); err == nil {
		t.Error("a header on a flat layout accepted")
	}
}

// A tar layout is real tar: Go's archive/tar reads back every member, and
// each member's bytes are the sample's, at the sample's offset.
func TestTarShards(t *testing.T) {
	ds, err := Generate(filepath.Join(t.TempDir(), "tar"), GenSpec{Layout: LayoutTar, Count: 9, Size: 3000, SizeStddev: 700, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Samples) != 9 || ds.Files != 2 {
		t.Fatalf("%d samples in %d files", len(ds.Samples), ds.Files)
	}
	i := 0
	for _, shard := range []string{"shard-0000.tar", "shard-0001.tar"} {
		data, err := os.ReadFile(filepath.Join(ds.Root, shard))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(bytes.NewReader(data))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			member, _ := io.ReadAll(tr)
			s := ds.Samples[i]
			if s.Path != shard || s.Offset%512 != 0 || s.Length != h.Size ||
				!bytes.Equal(data[s.Offset:s.Offset+s.Length], member) {
				t.Errorf("member %s of %s: sample %d is %+v", h.Name, shard, i, s)
			}
			i++
		}
	}
	if i != 9 {
		t.Errorf("the shards hold %d members, want 9", i)
	}
}

// Group orders read shuffled groups of contiguous samples of one file,
// each front to back, every sample once an epoch; shard orders give each
// worker whole shards, read front to back, its batches in turn with the
// other worker's.
func TestGroupAndShardOrders(t *testing.T) {
	ds := &Dataset{}
	for f := 0; f < 4; f++ {
		for k := 0; k < 8; k++ {
			ds.Samples = append(ds.Samples, Sample{Path: string(rune('a' + f)), Offset: int64(k), Record: true})
		}
	}
	w := Workload{Epochs: 2, Seed: 4, Sampler: "distributed", Ranks: 1, Workers: 2, Batch: 2, Order: OrderGroups, Group: 4}
	o, err := jobOrders(w, ds, 1)
	if err != nil {
		t.Fatal(err)
	}
	for e, ranks := range o {
		got := ranks[0]
		if len(got) != 32 || !slices.Equal(slices.Sorted(slices.Values(got)), seq(0, 32)) {
			t.Fatalf("epoch %d reads %v: want every sample once", e, got)
		}
		for g := 0; g < 32; g += 4 {
			if got[g]%4 != 0 || !slices.Equal(got[g:g+4], seq(got[g], got[g]+4)) {
				t.Errorf("epoch %d: group at %d is %v, want 4 contiguous samples of a group", e, g, got[g:g+4])
			}
		}
		if slices.Equal(got, seq(0, 32)) {
			t.Errorf("epoch %d: groups in index order", e)
		}
	}
	if slices.Equal(o[0][0], o[1][0]) {
		t.Error("the same group order in both epochs")
	}

	w.Order = OrderShards
	if o, err = jobOrders(w, ds, 1); err != nil {
		t.Fatal(err)
	}
	for e, ranks := range o {
		got := ranks[0]
		// Batch b goes to worker b%2: each worker's samples, in the
		// order it reads them, are two whole shards front to back.
		var mine [2][]int
		for b := 0; b*2 < len(got); b++ {
			mine[b%2] = append(mine[b%2], got[b*2:b*2+2]...)
		}
		for k, m := range mine {
			if len(m) != 16 || !slices.Equal(m[:8], seq(m[0], m[0]+8)) || !slices.Equal(m[8:], seq(m[8], m[8]+8)) || m[0]%8 != 0 || m[8]%8 != 0 {
				t.Errorf("epoch %d: worker %d reads %v, want two whole shards", e, k, m)
			}
		}
	}
	if slices.Equal(o[0][0], o[1][0]) {
		t.Error("the same shard order in both epochs")
	}
	w.Batch = 3 // 16 samples per worker are not whole batches of 3
	if _, err := jobOrders(w, ds, 1); err == nil || !strings.Contains(err.Error(), "whole batches") {
		t.Errorf("shards that cannot be dealt in whole batches: %v", err)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Every read mode returns the samples' bytes, checked by the reader
// against the dataset's sums; a byte changed after the sums were taken is
// a wrong sample the reader names, in every mode.
func TestVerifyEveryMode(t *testing.T) {
	rec, err := Generate(filepath.Join(t.TempDir(), "rec"), GenSpec{Layout: LayoutRecords, Count: 24, Size: 5000, Files: 4, Header: 777})
	if err != nil {
		t.Fatal(err)
	}
	shards, err := Generate(filepath.Join(t.TempDir(), "tar"), GenSpec{Layout: LayoutTar, Count: 24, Size: 5000, SizeStddev: 1500, Files: 4})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(filepath.Join(t.TempDir(), "flat"), GenSpec{Layout: LayoutFlat, Count: 16, Size: 5000, SizeStddev: 1500})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ds *Dataset, mode, order string) *Epoch {
		t.Helper()
		w := Workload{Epochs: 1, Seed: 1, Sampler: "distributed", Ranks: 1, Workers: 2, Batch: 4, Prefetch: 1,
			ReadMode: mode, Order: order, Verify: true}
		res, err := Run(context.Background(), mode, ds, w, Exec{Reader: reader(t)})
		if err != nil {
			t.Fatalf("%s %s: %v", ds.Layout, mode, err)
		}
		return &res.Epochs[0]
	}
	for _, ds := range []*Dataset{rec, shards, files} {
		for _, mode := range []string{ReadWhole, ReadPread, ReadMmap, ReadStream} {
			for _, order := range []string{OrderSamples, OrderGroups, OrderShards} {
				if e := run(ds, mode, order); e.Bytes != ds.Bytes || e.Errors != 0 || e.Corrupt != 0 {
					t.Errorf("%s, %s, order %s: %d bytes, %d errors, %d wrong; want %d, 0, 0",
						ds.Layout, mode, order, e.Bytes, e.Errors, e.Corrupt, ds.Bytes)
				}
			}
		}
		s := ds.Samples[len(ds.Samples)/2]
		f, err := os.OpenFile(filepath.Join(ds.Root, s.Path), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		f.ReadAt(b, s.Offset+s.Length-1)
		b[0] ^= 0x40
		f.WriteAt(b, s.Offset+s.Length-1)
		f.Close()
		for _, mode := range []string{ReadWhole, ReadPread, ReadMmap, ReadStream} {
			w := Workload{Epochs: 1, Seed: 1, Sampler: "sequential", Ranks: 1, Workers: 1, Batch: 4, Prefetch: 1,
				ReadMode: mode, Verify: true}
			res, err := Run(context.Background(), mode, ds, w, Exec{Reader: reader(t)})
			if err != nil {
				t.Fatal(err)
			}
			if e := res.Epochs[0]; e.Corrupt != 1 || e.Errors != 0 || !strings.Contains(res.Stderr, "wrong bytes") {
				t.Errorf("%s, %s, one byte changed: %d wrong, %d errors, stderr %q", ds.Layout, mode, e.Corrupt, e.Errors, res.Stderr)
			}
		}
	}
	w := Workload{Epochs: 1, Seed: 1, Sampler: "sequential", Ranks: 1, Workers: 1, Batch: 4, Prefetch: 1, ReadMode: ReadHead, Verify: true}
	if err := w.Validate(); err == nil {
		t.Error("verify with the head read mode accepted")
	}
}

// The stream mode reads each tar shard once, front to back, through one
// descriptor: the emulated PFS serves one open per shard and each
// shard's bytes up to its last member, once.
func TestShardsAreReadThroughOnce(t *testing.T) {
	requireFUSE(t)
	ds, err := Generate(filepath.Join(t.TempDir(), "tar"), GenSpec{Layout: LayoutTar, Count: 32, Size: 40000, SizeStddev: 5000, Files: 4})
	if err != nil {
		t.Fatal(err)
	}
	var through int64 // each shard up to the end of its last member
	for i, s := range ds.Samples {
		if i+1 == len(ds.Samples) || ds.Samples[i+1].Path != s.Path {
			through += s.Offset + s.Length
		}
	}
	mnt := t.TempDir()
	srv, err := pfsemu.Mount(pfsemu.Options{Source: ds.Root, Mount: mnt, DirectIO: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Unmount()
	w := Workload{Epochs: 2, Seed: 9, Sampler: "distributed", Ranks: 1, Workers: 2, Batch: 4, Prefetch: 2,
		ReadMode: ReadStream, Order: OrderShards, Verify: true}
	res, err := Run(context.Background(), "shards", ds, w, Exec{Reader: reader(t), Root: mnt,
		Counters: func() (pfsemu.Stats, error) { return srv.Stats(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Epochs {
		if e.PFS.Opens != 4 || e.PFS.ReadBytes != through || e.Bytes != ds.Bytes || e.Corrupt != 0 {
			t.Errorf("epoch %d: %d opens, %d bytes from the PFS, %d read, %d wrong; want 4, %d, %d, 0",
				e.Epoch, e.PFS.Opens, e.PFS.ReadBytes, e.Bytes, e.Corrupt, through, ds.Bytes)
		}
	}
}
