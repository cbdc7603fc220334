package peers

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Blocks of large files. A node tiers a dataset file above a threshold in
// blocks (shim/blocks.go): its tiers hold some of the file's 4 MiB blocks,
// page by page. Before its leader copies a block from the shared
// filesystem (ahead of a reader that reads the file in order), it asks
// the block's owner (BlockOwner) for it:
//
//	GET /v1/block?path=<source>&size=<bytes>&mtime=<ns>&ino=<inode>&block=<b>&off=<offset>&len=<bytes>&from=<node>&to=<node>&t=<unix s>&n=<nonce>
//
// answered with the len bytes of the source at off (all within block b,
// all within size), followed by the answer's tag: exactly as a whole
// file is (auth.go). The proof covers the whole target, so the block's
// identity (path, size, mtime, inode, block, offset, length) is bound to
// the request and, through the proof, to the answer. The owner answers
// from its tier's blocks file when it holds every page of the range, else
// copies the block's missing pages from the shared filesystem into its
// own tier first if it has room (ServerConfig.Blocks, within BlockWait),
// else says "not held" (404) and the asker reads the shared filesystem.
// A range not within one block and the file is malformed (400); a file of
// another size, mtime or inode here is stale (409); every other refusal
// is the whole file's.
const blockEndpoint = "/v1/block"

// BlockSize and PageSize are the units of a large file in the tiers
// (preload/segment.h's AUGUR_BLOCK_SHIFT and AUGUR_PAGE_SHIFT; shim
// checks they agree): a request's range lies within one block.
const (
	BlockSize = 4 << 20
	PageSize  = 64 << 10
)

// BlockOwner is the node that reads block b of the large file path from
// the shared filesystem for the whole job: the others ask it. Like Owner
// it needs no traffic (a stable hash of the cleaned path and the block's
// index, modulo the node count), and it is per block, not per file: a
// single large file that every node reads is then read from the shared
// filesystem once and served by all the nodes, each link carrying a
// share, where an owner per file would put the whole file on one node's
// link and its shared-filesystem client.
func BlockOwner(path string, b int64, nodes int) int {
	if nodes <= 1 {
		return 0
	}
	return int(hashPath(filepath.Clean(path)+"\x00"+strconv.FormatInt(b, 10)) % uint64(nodes))
}

// BlockFile is the identity of the file a node's blocks are of: the
// source as its leader found it when it entered the file.
type BlockFile struct {
	Dev, Ino    uint64
	Size, Mtime int64
}

// Blocks is where a Server finds the blocks it serves: the leader's
// large files (shim/blocks.go). Both methods are safe for concurrent use;
// a file they return is the caller's to close, and holds the pages asked
// for whatever happens to the tiers after.
type Blocks interface {
	// Block opens the file that holds every byte of [off, off+n) of
	// source (within one block) if this node holds them all now (f nil
	// otherwise), and says what file they are of; entered is false if
	// source is not tiered in blocks here at all.
	Block(source string, off, n int64) (f *os.File, id BlockFile, entered bool)
	// FillBlock copies from the shared filesystem the pages of the block
	// of [off, off+n) that this node holds in no tier, into the tier the
	// block is reserved in (reserving it if the tiers have room), and
	// opens the range as Block does; nil if it cannot within ctx. st, if
	// not nil, is the source as the server found it: a file not entered
	// yet is entered as st, and an entered file of another identity is
	// not filled.
	FillBlock(ctx context.Context, source string, st *unix.Stat_t, off, n int64) *os.File
}

// defaultBlockWait bounds ServerConfig.Blocks' FillBlock; it is under the
// askers' BlockTimeout, so that they are told "not held" rather than give
// up and mark this node down.
const defaultBlockWait = 2 * time.Second

// defaultBlockTimeout bounds a block's request (ClientConfig.BlockTimeout):
// the owner's copy from the shared filesystem (BlockWait) and a block at
// 1.5 MiB/s. A reader waits for a block being copied for 2 s at most
// (preload/blocks.c) before it reads the original itself: a block that
// takes longer is lost to it anyway.
const defaultBlockTimeout = 5 * time.Second

// checkRange checks a request's block range: within block b and the file
// of size bytes, not empty.
func checkRange(size, b, off, n int64) *refusal {
	switch {
	case b < 0 || size <= 0 || b > (size-1)/BlockSize:
		return malformed("no such block")
	case n <= 0 || n > BlockSize || off < b*BlockSize:
		return malformed("a range of 1 byte to a block, from the block's start on")
	case off+n > min((b+1)*BlockSize, size):
		return malformed("a range within its block and the file")
	}
	return nil
}

// parseBlock reads a block request's own parameters into a.
func parseBlock(q url.Values, a *asked) *refusal {
	var nums [3]int64
	for i, k := range []string{"block", "off", "len"} {
		if len(q[k]) != 1 {
			return malformed("one " + k + " needed")
		}
		var err error
		if nums[i], err = strconv.ParseInt(q[k][0], 10, 64); err != nil {
			return malformed("bad " + k)
		}
	}
	a.block, a.off, a.n = true, nums[1], nums[2]
	a.b = nums[0]
	return checkRange(a.size, a.b, a.off, a.n)
}

// serveBlock answers a request for a range of a large file's block.
func (s *Server) serveBlock(w http.ResponseWriter, r *http.Request, a *asked) {
	f, why, msg := s.blockFor(r, a)
	if f == nil {
		s.refuse(w, r, a.proof, why, statusOf[why], msg)
		return
	}
	defer f.Close()
	s.send(w, r, io.NewSectionReader(f, a.off, a.n), *a)
}

// blockFor opens the blocks file to send a's range from: this node's, if
// it holds the range of the file asked for, else filled on demand. A
// file this node entered is the one asked for when it is of the inode
// the asker found (StatSource) on the dataset's filesystem, with the
// size and mtime asked; otherwise the source is checked as a whole
// file's is (checkSource) and must be the entered file. Without one it
// says why (a message).
func (s *Server) blockFor(r *http.Request, a *asked) (*os.File, reason, string) {
	if s.cfg.Blocks == nil {
		return nil, refusedMissing, "no blocks here"
	}
	f, id, entered := s.cfg.Blocks.Block(a.source, a.off, a.n)
	if entered && (id.Size != a.size || id.Mtime != a.mtime) {
		closeFile(f)
		return nil, refusedStale, "blocks of a file of another size or mtime"
	}
	rdev, ok := s.rootDev[a.root]
	trusted := entered && ok && a.ino != 0 && id.Dev == rdev && id.Ino == a.ino
	var src unix.Stat_t
	if !trusted {
		if why, msg := s.checkSource(*a, &src); msg != "" {
			closeFile(f)
			return nil, why, msg
		}
		if a.ino != 0 && src.Ino != a.ino || entered && (id.Dev != src.Dev || id.Ino != src.Ino) {
			closeFile(f)
			return nil, refusedStale, "the source is another file"
		}
	}
	if f != nil {
		return f, 0, ""
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.BlockWait)
	defer cancel()
	st := &src
	if trusted {
		st = nil // the entered file, as it was entered
	}
	if f = s.cfg.Blocks.FillBlock(ctx, a.source, st, a.off, a.n); f == nil {
		return nil, refusedMissing, "no room for the block here, or it could not be copied"
	}
	a.made = true
	return f, 0, ""
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// blockQuery is the request target for the range [off, off+n) of block b
// of source, asked by node from of node to at the time at.
func blockQuery(source string, size, mtime int64, ino uint64, b, off, n int64, from, to int, at time.Time) string {
	v := url.Values{"block": {strconv.FormatInt(b, 10)}, "off": {strconv.FormatInt(off, 10)},
		"len": {strconv.FormatInt(n, 10)}}
	return target(blockEndpoint, v, source, size, mtime, ino, from, to, at)
}

// FetchBlock asks node for the bytes [off, off+len(buf)) of block b of
// source (within the block), which the caller expects to have size bytes
// and mtime (ns) and to be the inode ino StatSource found, and reads them
// into buf. It returns nil only once the answer's tag after them is
// right: on any error buf holds no bytes of the file, and the caller
// reads the block from the shared filesystem. The peer is marked down as
// for Fetch. A request takes BlockTimeout at most.
func (c *Client) FetchBlock(ctx context.Context, node int, source string, size, mtime int64, ino uint64, b, off int64, buf []byte) error {
	p, addr, err := c.peer(node)
	if err != nil {
		return err
	}
	n := int64(len(buf))
	tctx, cancel := context.WithTimeout(ctx, c.cfg.BlockTimeout)
	defer cancel()
	got, err := c.transfer(tctx, p, addr, blockQuery(source, size, mtime, ino, b, off, n, c.cfg.Node, node, time.Now()), n, &sliceWriter{b: buf})
	if err == nil {
		p.blocksIn.Add(1)
		p.blockBytesIn.Add(got)
	}
	return c.settleFetch(ctx, p, node, addr, source, err)
}

// sliceWriter writes into a buffer of the caller's, and no further.
type sliceWriter struct {
	b []byte
	n int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.b)-w.n {
		return 0, io.ErrShortWrite
	}
	w.n += copy(w.b[w.n:], p)
	return len(p), nil
}
