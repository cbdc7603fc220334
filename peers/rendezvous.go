package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"golang.org/x/sys/unix"
)

// Rendezvous is where a job's leaders meet: the directory <dir>/<job> on
// a filesystem every node mounts. It holds node-<i>, node i's address,
// and secret, the job's key. Its whole path is checked as a tier's is (a
// shared filesystem is a shared place: another user must not be able to
// point us at their listener, or at a directory of ours they moved
// there): <dir>, <dir>/<job> and everything in them must be the user's
// and written by no one else, and every directory above <dir> root's or
// the user's, sticky where others may write it, with no symlink on the
// way (tiering.UntrustedAbove); the secret must be readable by no one
// else. Every file is written under a temporary name and renamed (or
// linked) into place, so a reader on another node sees a whole file or
// none, and each method enters <dir> and then <job> afresh with
// O_NOFOLLOW: the leader lives in a host program that may close
// descriptors it does not own.
type Rendezvous struct {
	Dir   string // <dir>/<job>
	base  string // <dir>
	job   string
	nodes int
}

// Files of a rendezvous directory.
const (
	secretName = "secret"
	tmpPrefix  = ".tmp-"
	maxEntry   = 1024 // no address or secret is longer: anything longer is not ours
)

// OpenRendezvous creates <dir> (its last component only) and <dir>/<job>
// as needed, mode 0700, and checks the whole path.
func OpenRendezvous(dir, job string, nodes int) (*Rendezvous, error) {
	if err := checkJob(job); err != nil {
		return nil, fmt.Errorf("rendezvous: job id %q %w", job, err)
	}
	base := filepath.Clean(dir)
	if base == "/" {
		return nil, errors.New("rendezvous: / is not a rendezvous directory")
	}
	r := &Rendezvous{Dir: base + "/" + job, base: base, job: job, nodes: nodes}
	if err := tiering.UntrustedAbove(base); err != nil {
		return nil, fmt.Errorf("rendezvous %s: %w", base, err)
	}
	if err := unix.Mkdir(base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("rendezvous: mkdir %s: %w", base, err)
	}
	bfd, err := tiering.OpenDir(unix.AT_FDCWD, base, base)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	err = unix.Mkdirat(bfd, job, 0o700)
	unix.Close(bfd)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("rendezvous: mkdir %s: %w", r.Dir, err)
	}
	fd, err := r.open()
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return r, nil
}

// open enters <dir> and the job's directory in it without following a
// symlink, and checks both. The caller closes the descriptor.
func (r *Rendezvous) open() (int, error) {
	bfd, err := tiering.OpenDir(unix.AT_FDCWD, r.base, r.base)
	if err != nil {
		return -1, fmt.Errorf("rendezvous: %w", err)
	}
	fd, err := tiering.OpenDir(bfd, r.job, r.Dir)
	unix.Close(bfd)
	if err != nil {
		return -1, fmt.Errorf("rendezvous: %w", err)
	}
	return fd, nil
}

func nodeName(node int) string { return "node-" + strconv.Itoa(node) }

// Announce publishes addr as node's address, replacing what an earlier
// leader of that node wrote.
func (r *Rendezvous) Announce(node int, addr string) error {
	if node < 0 || node >= r.nodes {
		return fmt.Errorf("rendezvous: node %d of a job of %d nodes", node, r.nodes)
	}
	if err := checkAddr(addr, false); err != nil {
		return fmt.Errorf("rendezvous: %w", err)
	}
	fd, err := r.open()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tmp, err := r.writeTemp(fd, addr)
	if err != nil {
		return err
	}
	if err := unix.Renameat(fd, tmp, fd, nodeName(node)); err != nil {
		unix.Unlinkat(fd, tmp, 0)
		return fmt.Errorf("rendezvous: rename %s/%s: %w", r.Dir, nodeName(node), err)
	}
	return nil
}

// writeTemp writes line to a new private file in the directory fd,
// synced so that another node never reads it short, and returns its
// name.
func (r *Rendezvous) writeTemp(fd int, line string) (string, error) {
	var b [8]byte
	rand.Read(b[:])
	name := tmpPrefix + hex.EncodeToString(b[:])
	tfd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", fmt.Errorf("rendezvous: create %s/%s: %w", r.Dir, name, err)
	}
	f := os.NewFile(uintptr(tfd), r.Dir+"/"+name)
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(fd, name, 0)
		return "", fmt.Errorf("rendezvous: %w", err)
	}
	return name, nil
}

// Addrs reads the addresses announced so far, "" for a node that has
// not announced itself. An entry that is not the user's own, not private
// to writing, or not an address is reported and left out.
func (r *Rendezvous) Addrs() ([]string, error) {
	fd, err := r.open()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	addrs := make([]string, r.nodes)
	var errs []error
	for i := range addrs {
		line, err := r.read(fd, nodeName(i), false)
		if err == nil {
			if err = checkAddr(line, false); err != nil {
				err = fmt.Errorf("%s/%s: %w", r.Dir, nodeName(i), err)
			}
		}
		switch {
		case err == nil:
			addrs[i] = line
		case !errors.Is(err, unix.ENOENT):
			errs = append(errs, fmt.Errorf("rendezvous: %w", err))
		}
	}
	return addrs, errors.Join(errs...)
}

// read reads the one line of name in the directory fd, if it is a
// regular file of the user's that no one else may write (or, private,
// read). Its errors name the file.
func (r *Rendezvous) read(fd int, name string, private bool) (string, error) {
	path := r.Dir + "/" + name
	// O_NONBLOCK: a FIFO put there must not hang the open; the checks
	// below then refuse it.
	nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(nfd)
	var st unix.Stat_t
	if err := unix.Fstat(nfd, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := tiering.Untrusted(path, &st, unix.S_IFREG); err != nil {
		return "", err
	}
	if private && st.Mode&0o077 != 0 {
		return "", fmt.Errorf("%s: mode %04o lets others read it; it must be 0600", path, st.Mode&0o7777)
	}
	buf := make([]byte, maxEntry+1)
	n, err := unix.Read(nfd, buf)
	if err != nil {
		return "", &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n > maxEntry {
		return "", fmt.Errorf("%s: too long to be augur's", path)
	}
	return strings.TrimSuffix(string(buf[:n]), "\n"), nil
}

// Secret returns the job's secret, creating it if no leader has yet. It
// is created whole under a temporary name and linked into place, which
// fails if another node was first; then everyone reads that one.
func (r *Rendezvous) Secret() (string, error) {
	fd, err := r.open()
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	s, err := r.readSecret(fd)
	if !errors.Is(err, unix.ENOENT) {
		return s, err
	}
	var b [32]byte
	rand.Read(b[:])
	tmp, err := r.writeTemp(fd, hex.EncodeToString(b[:]))
	if err != nil {
		return "", err
	}
	err = unix.Linkat(fd, tmp, fd, secretName, 0)
	unix.Unlinkat(fd, tmp, 0)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("rendezvous: link %s/%s: %w", r.Dir, secretName, err)
	}
	return r.readSecret(fd)
}

func (r *Rendezvous) readSecret(fd int) (string, error) {
	s, err := r.read(fd, secretName, true)
	if err == nil {
		if err = checkSecret(s); err != nil {
			err = fmt.Errorf("%s/%s %w", r.Dir, secretName, err)
		}
	}
	if err != nil {
		return "", fmt.Errorf("rendezvous: secret: %w", err)
	}
	return s, nil
}

// Await polls until every node has announced itself, ctx ends, or
// timeout passes, and returns the addresses. Its error names the nodes
// still missing and any entry that was refused. A shared filesystem may
// cache a directory's entries for seconds: give it time.
func (r *Rendezvous) Await(ctx context.Context, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	wait := 50 * time.Millisecond
	for {
		addrs, err := r.Addrs()
		if addrs == nil { // the directory itself is unusable
			return nil, err
		}
		missing := missingNodes(addrs)
		if err == nil && len(missing) == 0 {
			return addrs, nil
		}
		if time.Until(deadline) < wait {
			return addrs, errors.Join(fmt.Errorf("rendezvous %s: nodes %v did not announce themselves within %v", r.Dir, missing, timeout), err)
		}
		select {
		case <-ctx.Done():
			return addrs, errors.Join(fmt.Errorf("rendezvous %s: nodes %v missing: %w", r.Dir, missing, ctx.Err()), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func missingNodes(addrs []string) []int {
	var m []int
	for i, a := range addrs {
		if a == "" {
			m = append(m, i)
		}
	}
	return m
}
