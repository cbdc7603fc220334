package shim

import (
	"strings"
	"time"

	"github.com/augur-hpc/augur/tiering"
)

// Tidying after the namespace changed. The data plane takes copies out of
// service before a call changes what they stand for (preload/invalidate.c):
// a renamed or removed directory's copies go to its tiers' trash in one
// rename, and a copy whose file a process changed through another name is
// marked stale. What is left for the leader, beside the run goroutine:
// empty the trash, remove the stale copies and clear their marks once no
// process writes their files, and tell the policies what is gone.

// tidyWork is one change to tidy after: a directory (Tree) or a stale
// copy's file.
type tidyWork struct {
	tree  string
	stale staleFile
}

// trashed is what emptying a tier's trash removed, for the policy that
// counted those bytes in the tier.
type trashed struct {
	tier  int
	bytes int64
}

// tidyEvery is how often marks not yet cleared (their files still
// written) are tried again, and marks whose events the ring dropped
// looked for.
const tidyEvery = 100 * time.Millisecond

// removeCopy removes tree's copy of path, and its entry in the identity
// table once no tier holds a copy of path; others says whether another
// tier may (false: the caller knows none does, as for a staged copy, and
// saves the look).
func (l *Leader) removeCopy(tree *tiering.Tree, path string, others bool) error {
	cp, err := tiering.CopyPath(tree.Path, path)
	if err != nil {
		return err
	}
	id, known := tiering.CopyIdent(cp)
	if err := tree.Remove(path); err != nil {
		return err
	}
	if known && (!others || !l.holds(path)) {
		l.seg.identForget(id.Dev, id.Ino, pathKey(path))
	}
	return nil
}

// holds says whether a tier in use holds a copy of path.
func (l *Leader) holds(path string) bool {
	return tiering.LookupPath(l.open, path) >= 0
}

// changed acts on a change of the namespace the run goroutine read: a
// directory's copies are forgotten at once by the policies (their bytes
// come back when its trash is emptied), and the tidier is handed the rest.
//
// Preconditions: called from the run goroutine.
func (l *Leader) changed(w tidyWork) {
	if w.tree != "" {
		switch {
		case l.clair != nil:
			l.clair.forgetTree(w.tree)
		case l.react != nil:
			forgetTree(l.react, w.tree)
		}
	}
	select {
	case l.tidyQ <- w:
	default: // the tidier is behind: its next round finds the marks and the trash anyway
	}
}

// release gives the bytes the tidier removed from a tier's trash back to
// the policy that counted them, and recounts the tiers.
//
// Preconditions: called from the run goroutine.
func (l *Leader) release(t trashed) {
	switch {
	case l.clair != nil:
		l.clair.pool.Release(t.tier, t.bytes)
	case l.react != nil:
		l.react.pool.Release(t.tier, t.bytes)
	}
	l.recount()
}

// forgetTree forgets the reactive policy's copies under dir.
func forgetTree(r *reactive, dir string) {
	r.known.Range(func(path string, _ struct{}) bool {
		if strings.HasPrefix(path, dir+"/") {
			r.known.Delete(path)
		}
		return true
	})
}

// staleMark is a key marked stale: the files it was marked for, and
// whether its copies were removed.
type staleMark struct {
	files   []staleFile
	removed bool
}

// tidier empties trash and clears stale marks, batching what arrives
// together.
func (l *Leader) tidier() {
	defer l.workers.Done()
	tick := time.NewTicker(tidyEvery)
	defer tick.Stop()
	marks := map[uint64]*staleMark{}
	for {
		trash := false
		select {
		case <-l.stop:
			return
		case w := <-l.tidyQ:
			trash = take(w, marks)
			for drained := false; !drained; {
				select {
				case w := <-l.tidyQ:
					trash = take(w, marks) || trash
				default:
					drained = true
				}
			}
		case <-tick.C:
			if len(marks) == 0 && u64(&l.seg.s.writes.stale) == 0 {
				continue
			}
		}
		if trash {
			l.emptyTrash()
		}
		l.clearMarks(l.seg.findMarks(marks))
	}
}

// take adds w to the work of a round, and says whether it is a tree.
func take(w tidyWork, marks map[uint64]*staleMark) bool {
	if w.tree != "" {
		return true
	}
	m := marks[w.stale.key]
	if m == nil {
		m = &staleMark{}
		marks[w.stale.key] = m
	}
	m.files = append(m.files, w.stale)
	m.removed = false // a new change: its copies may have been made again meanwhile
	return false
}

// emptyTrash empties the trash of every tier this leader writes.
func (l *Leader) emptyTrash() {
	for i, t := range l.tiers {
		if t.lock == nil || t.tree == nil {
			continue
		}
		u := t.tree.EmptyTrash(func(source string, id tiering.Ident) {
			if source != "" && !l.holds(source) {
				l.seg.identForget(id.Dev, id.Ino, pathKey(source))
			}
		})
		if u.Files == 0 {
			continue
		}
		select {
		case l.released <- trashed{i, u.Bytes}:
		case <-l.stop:
			return
		}
	}
}

// clearMarks removes, once, the copies of the marked keys' paths from
// every tier, and clears each mark, and forgets it, once its files are
// written no more.
func (l *Leader) clearMarks(marks map[uint64]*staleMark) {
	remove := map[uint64]bool{} // by hold slot: a mark found without its event is known by its slot alone
	for key, m := range marks {
		if !m.removed {
			remove[key&holdMask] = true
		}
	}
	if len(remove) > 0 {
		l.removeStale(remove)
		if m := l.big.Load(); m != nil {
			m.dropStale(remove)
		}
	}
	for key, m := range marks {
		m.removed = true
		if l.seg.clearStale(key, m.files) {
			delete(marks, key)
		}
	}
}

// removeStale removes the copies of every path whose key's hold slot is
// in slots.
func (l *Leader) removeStale(slots map[uint64]bool) {
	for i, tree := range l.open {
		if tree == nil {
			continue
		}
		writes := l.tiers[i].lock != nil
		tree.Sources(func(path string, size int64) {
			if !slots[pathKey(path)&holdMask] || l.removeCopy(tree, path, true) != nil {
				return
			}
			l.log.Info().Msgf("%s was changed through another name; its copy was dropped", path)
			if !writes {
				return // another process writes this tier, and counts its bytes
			}
			select {
			case l.dropped <- dropped{path, i, size}:
			case <-l.stop:
			}
		})
	}
}
