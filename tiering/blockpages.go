package tiering

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A blocks file outlives its job: the leader saves which of its pages
// the tier holds on the file itself (PagesXattr), and the next job's
// leader takes them back (KeptBlocks) if the file still stands for its
// source. The map lives and dies with the blocks file (a change of the
// source removes the file, and its map with it), so no map can outlive
// the bytes it describes. Pages are only ever added to a blocks file
// while its entry lives, and each is written before its bit is set: a
// map saved at any moment claims only pages the file holds, and an older
// one (a leader killed after it) claims fewer.

// PagesXattr holds a blocks file's page map (encodePages).
const PagesXattr = "user.augur.pages"

// pagesMagic begins a page map; a map of another layout is no map.
const pagesMagic = "augurpg1"

// PageWord is the page word of a block whose every page is present: a
// map stores such blocks as one bit each, the others as their words.
const PageWord = ^uint64(0)

// encodePages is words (one per block; PageWord for a whole block) as a
// map: the magic, the block and page shifts, the block count, a bit per
// block that is whole, then the count and (index, word) of the others
// that hold any page. partial false leaves those out: a smaller map that
// claims fewer pages.
func encodePages(words []uint64, blockShift, pageShift uint8, partial bool) []byte {
	le := binary.LittleEndian
	b := append([]byte(pagesMagic), blockShift, pageShift, 0, 0)
	b = le.AppendUint32(b, uint32(len(words)))
	whole := make([]byte, (len(words)+7)/8)
	var parts []byte
	n := uint32(0)
	for i, w := range words {
		switch {
		case w == PageWord:
			whole[i/8] |= 1 << (i % 8)
		case w != 0 && partial:
			parts = le.AppendUint64(le.AppendUint32(parts, uint32(i)), w)
			n++
		}
	}
	b = append(b, whole...)
	b = le.AppendUint32(b, n)
	return append(b, parts...)
}

// decodePages is the words of a map of nblocks blocks, or false if b is
// no such map.
func decodePages(b []byte, nblocks int, blockShift, pageShift uint8) ([]uint64, bool) {
	le := binary.LittleEndian
	head := len(pagesMagic) + 8
	if len(b) < head || string(b[:len(pagesMagic)]) != pagesMagic || b[8] != blockShift || b[9] != pageShift ||
		int(le.Uint32(b[12:])) != nblocks {
		return nil, false
	}
	b = b[head:]
	nw := (nblocks + 7) / 8
	if len(b) < nw+4 {
		return nil, false
	}
	words := make([]uint64, nblocks)
	for i := range words {
		if b[i/8]>>(i%8)&1 == 1 {
			words[i] = PageWord
		}
	}
	n := int(le.Uint32(b[nw:]))
	b = b[nw+4:]
	if len(b) != 12*n {
		return nil, false
	}
	for k := 0; k < n; k++ {
		i := int(le.Uint32(b[12*k:]))
		if i >= nblocks || words[i] != 0 {
			return nil, false
		}
		words[i] = le.Uint64(b[12*k+4:])
	}
	return words, true
}

// SaveBlocks records words, the page map of f (a blocks file of this
// tier; one word per block, PageWord for a whole block), on f, after an
// fsync of f on a tier that fsyncs its copies. A map too large for the
// filesystem's attributes is saved without its partial blocks; one that
// cannot be saved at all is removed, so that what is saved is always a
// map of the file as it is.
func (tr *Tree) SaveBlocks(f *os.File, words []uint64, blockShift, pageShift uint8) error {
	fd := int(f.Fd())
	if tr.Fsync {
		if err := unix.Fsync(fd); err != nil {
			return err
		}
	}
	err := unix.Fsetxattr(fd, PagesXattr, encodePages(words, blockShift, pageShift, true), 0)
	if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ERANGE) {
		err = unix.Fsetxattr(fd, PagesXattr, encodePages(words, blockShift, pageShift, false), 0)
	}
	if err != nil {
		unix.Fremovexattr(fd, PagesXattr)
	}
	return err
}

// keptBlock is a blocks file KeptBlocks found, and what it records.
type keptBlock struct {
	source string
	id     Ident
	pages  []byte
	bst    unix.Stat_t
}

// KeptBlocks hands keep every blocks file of the tier that still stands
// for its source (the identity it records is the source's now, it is the
// user's, private and of the source's size), with the source's stat and
// its page map (one word per block of 1<<blockShift bytes), the blocks
// the map does not claim punched out of it first; keep says whether it
// took the file. Every other blocks file is removed: one of a source gone
// or changed, one without a map or identity, one keep did not take. The
// caller must hold the tier's Lock.
func (tr *Tree) KeptBlocks(blockShift, pageShift uint8, keep func(source string, src *unix.Stat_t, words []uint64) bool) Report {
	var rep Report
	var found []keptBlock
	tr.walk(blocksDir, func(e *entry) {
		k, ok := tr.readBlocks(e)
		if !ok {
			unix.Unlinkat(e.dirfd, e.name, 0)
			rep.Stale++
			return
		}
		found = append(found, k)
	}, nil, func(err error) { rep.Errors = append(rep.Errors, err) })
	stats := statSources(found)
	for i, k := range found {
		words, ok := tr.standing(k, stats[i], blockShift, pageShift)
		if ok && tr.punch(k.source, words, blockShift) == nil && keep(k.source, stats[i], words) {
			rep.Files++
			rep.Bytes += k.bst.Blocks * 512
			continue
		}
		if err := tr.RemoveBlocks(k.source); err != nil {
			rep.Errors = append(rep.Errors, err)
		}
		rep.Stale++
	}
	// The directories left empty go (one that is not fails to).
	tr.walk(blocksDir, func(*entry) {}, func(e *entry) { unix.Unlinkat(e.dirfd, e.name, unix.AT_REMOVEDIR) }, func(error) {})
	return rep
}

// readBlocks reads the identity and the page map of the blocks file e,
// if it is one of the user's.
func (tr *Tree) readBlocks(e *entry) (keptBlock, bool) {
	src, ok := sourceOf(filesDir + strings.TrimPrefix(e.rel, blocksDir))
	if !ok || untrusted(tr.Path+"/"+e.rel, &e.st, unix.S_IFREG, tr.uid) != nil {
		return keptBlock{}, false
	}
	fd, err := unix.Openat(e.dirfd, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return keptBlock{}, false
	}
	defer unix.Close(fd)
	k := keptBlock{source: src}
	var ierr error
	k.id, ierr = FileIdent(fd)
	buf := make([]byte, 64<<10)
	n, perr := unix.Fgetxattr(fd, PagesXattr, buf)
	if ierr != nil || perr != nil || unix.Fstat(fd, &k.bst) != nil || k.bst.Ino != e.st.Ino {
		return keptBlock{}, false
	}
	k.pages = buf[:n]
	return k, true
}

// statSources stats the sources of found, statWorkers at a time (each a
// metadata round trip to the shared filesystem); a source that cannot be
// stat'ed gets nil.
func statSources(found []keptBlock) []*unix.Stat_t {
	out := make([]*unix.Stat_t, len(found))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < statWorkers; w++ {
		wg.Go(func() {
			for i := range work {
				var st unix.Stat_t
				if Stat(found[i].source, &st) == nil {
					out[i] = &st
				}
			}
		})
	}
	for i := range found {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// standing is k's page map if k still stands for its source, whose stat
// is src (nil: unknown).
func (tr *Tree) standing(k keptBlock, src *unix.Stat_t, blockShift, pageShift uint8) ([]uint64, bool) {
	if src == nil || src.Mode&unix.S_IFMT != unix.S_IFREG || !k.id.Full || k.id != IdentOf(src) || k.bst.Size != src.Size {
		return nil, false
	}
	nblocks := int((src.Size + 1<<blockShift - 1) >> blockShift)
	return decodePages(k.pages, nblocks, blockShift, pageShift)
}

// punch frees the blocks words claims none of in source's blocks file:
// the tier's room is counted by the blocks claimed, and a leader killed
// after its last save left pages no map claims.
func (tr *Tree) punch(source string, words []uint64, blockShift uint8) error {
	f, err := tr.OpenBlocks(source)
	if err != nil {
		return err
	}
	defer f.Close()
	size := int64(1) << blockShift
	for b := 0; b < len(words); {
		if words[b] != 0 {
			b++
			continue
		}
		end := b
		for end < len(words) && words[end] == 0 {
			end++
		}
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(b)*size, int64(end-b)*size)
		if err != nil {
			return err
		}
		b = end
	}
	return nil
}
