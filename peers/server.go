package peers

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/augur-hpc/augur/tiering"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// copyEndpoint is what a Server serves of a whole file:
//
//	GET /v1/copy?path=<source>&size=<bytes>&mtime=<ns>&ino=<inode>&from=<node>&to=<node>&t=<unix s>&n=<nonce>
//
// answered with the bytes of this node's copy of the source, if it has
// one of that size and mtime, followed by the answer's tag (auth.go). Of
// a large file, tiered in blocks, it serves ranges of a block instead
// (blockEndpoint, blocks.go).
const copyEndpoint = "/v1/copy"

// ServerConfig is what a Server serves and to whom.
type ServerConfig struct {
	Roots  []string // the job's dataset roots, absolute: only copies of files below them are served
	Tiers  []string // this node's tier directories, fastest first
	Secret string   // the job's secret
	Job    string   // the job id: with the secret, the job's key
	Node   int      // this node's index: requests meant for another are refused
	Nodes  int      // nodes in the job (requests name the asking node)
	Log    zerolog.Logger
	// MaxConns and MaxConnsPerAddr bound the connections kept open, in
	// all and from one remote address (0: the defaults; see conns.go).
	MaxConns, MaxConnsPerAddr int
	// Miss, if set, is asked to make this node's copy of a file a request
	// finds none of at all (a stale or untrusted copy is refused as it
	// is): the reactive policy's owner of the file copies it from the
	// shared filesystem on demand (HVAC). It reports whether a copy is
	// published now; the request is then served from it. Its ctx ends
	// with the request, or after MissWait.
	Miss func(ctx context.Context, source string, size, mtime int64) bool
	// MissWait bounds Miss (default 5 s). It must be shorter than the
	// askers' wait for an answer (ClientConfig.Timeout, 10 s by default):
	// an asker told "missing" reads the file itself, one that gives up
	// waiting marks this node down.
	MissWait time.Duration
	// Blocks, if set, serves ranges of large files' blocks (blocks.go),
	// filled on demand within BlockWait (default 2 s), which must be
	// shorter than the askers' ClientConfig.BlockTimeout (5 s).
	Blocks    Blocks
	BlockWait time.Duration
}

const defaultMissWait = 5 * time.Second

// Server serves this node's tier copies to the job's other nodes. It
// reads the tiers only, with the same trust rules as the data plane: a
// copy is served only if every directory on the way and the copy itself
// are this user's, written by no one else, and no symlink; only if it
// has the size and mtime the asker expects of the source (a copy keeps
// its source's mtime), so a stale copy never leaves the node; and only
// if the source is one of the dataset's files and no other's (source.go).
// The body is read from the tier file and hashed into the answer's tag
// on the way to the socket. A copy it lacks it may first have made
// (ServerConfig.Miss); that copy is found and checked as any.
type Server struct {
	cfg     ServerConfig
	key     []byte
	out     []flow // per asking node
	refused [nReasons]atomic.Int64
	said    [nReasons]atomic.Bool // each notable reason is logged once
	seen    nonces
	rootDev map[string]uint64 // each root's device, when NewServer could stat it
	now     func() time.Time  // the clock requests' times are held to; tests move it
	ln      *limitListener
	srv     *http.Server

	// fetched are the requests served from a copy Miss made for them,
	// fetchedBlocks those of blocks from pages Blocks copied for them.
	fetched, fetchedBlocks atomic.Int64
}

// reason is why a request was not served.
type reason int

const (
	refusedAuth         reason = iota // no proof of the job's key, or a wrong one: 403
	refusedMisdirected                // a proof for another node: 403
	refusedExpired                    // a request's time too far from this node's clock: 403
	refusedReplay                     // a request this node has answered already: 403
	refusedRequest                    // malformed: bad method, endpoint, parameter or path, a Range: 400, 405
	refusedOutside                    // a path outside the dataset roots: 403
	refusedLinked                     // a source reached through a symlink, or with other names: 404
	refusedMissing                    // no copy here: 404
	refusedStale                      // a copy, but of another size, mtime or file: 409
	refusedUntrusted                  // a copy this node would not serve itself (symlink, another user's): 404
	refusedFailed                     // an I/O error here: 500
	refusedAborted                    // the body was cut: the asker hung up, or took too long
	refusedConns                      // a connection over the cap, or over the descriptor budget: closed
	refusedConnsPerAddr               // a connection over the cap of one address: closed
	refusedFds                        // a connection in the last eighth of the descriptor limit: closed
	nReasons
)

var reasonNames = [nReasons]string{"auth", "misdirected", "expired", "replay", "request", "outside", "linked",
	"missing", "stale", "untrusted", "failed", "aborted", "conns", "conns_per_addr", "fds"}

// notable reasons are logged (once): they mean a misconfiguration or an
// attack, not a file a peer does not hold yet.
var notable = [nReasons]bool{refusedAuth: true, refusedMisdirected: true, refusedExpired: true, refusedReplay: true,
	refusedOutside: true, refusedLinked: true, refusedUntrusted: true, refusedFailed: true,
	refusedConns: true, refusedConnsPerAddr: true, refusedFds: true}

// keepsConn are the reasons whose refusal leaves the connection open:
// answers to the job's own nodes about files. Any other refusal closes
// it, so that a stranger's connection ends with its first request.
var keepsConn = [nReasons]bool{refusedMissing: true, refusedStale: true, refusedLinked: true}

// NewServer checks cfg and returns a Server that serves nothing until
// Listen.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := checkSecret(cfg.Secret); err != nil {
		return nil, fmt.Errorf("peer server: secret %w", err)
	}
	if cfg.Nodes < 1 || cfg.Node < 0 || cfg.Node >= cfg.Nodes {
		return nil, fmt.Errorf("peer server: node %d of %d", cfg.Node, cfg.Nodes)
	}
	if err := checkJob(cfg.Job); err != nil || cfg.Job == "" {
		return nil, fmt.Errorf("peer server: job id %q: a job needs one, usable as a directory name", cfg.Job)
	}
	for _, dirs := range [][]string{cfg.Roots, cfg.Tiers} {
		for _, d := range dirs {
			if !filepath.IsAbs(d) {
				return nil, fmt.Errorf("peer server: %q is not an absolute path", d)
			}
		}
	}
	s := &Server{cfg: cfg, key: jobKey(cfg.Secret, cfg.Job), out: make([]flow, cfg.Nodes), now: time.Now}
	if s.cfg.MissWait <= 0 {
		s.cfg.MissWait = defaultMissWait
	}
	if s.cfg.BlockWait <= 0 {
		s.cfg.BlockWait = defaultBlockWait
	}
	if s.cfg.MaxConns <= 0 {
		s.cfg.MaxConns = defaultMaxConns(cfg.Nodes)
	}
	if s.cfg.MaxConnsPerAddr <= 0 {
		s.cfg.MaxConnsPerAddr = defaultMaxConnsPerAddr
	}
	s.cfg.Roots = make([]string, len(cfg.Roots))
	s.rootDev = map[string]uint64{}
	for i, r := range cfg.Roots {
		s.cfg.Roots[i] = filepath.Clean(r)
		var st unix.Stat_t
		if tiering.Stat(r, &st) == nil {
			s.rootDev[s.cfg.Roots[i]] = st.Dev
		}
	}
	return s, nil
}

// Listen binds addr, one address (never every interface), and serves on
// it until Close. It returns the address for the other nodes to dial:
// addr's host with the port bound. Call it once.
func (s *Server) Listen(addr string) (string, error) {
	if err := checkAddr(addr, true); err != nil {
		return "", fmt.Errorf("peer server: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("peer server: %w", err)
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		// net/http would print to the host program's stderr.
		ErrorLog: log.New(debugWriter{s.cfg.Log}, "", 0),
	}
	s.ln = &limitListener{Listener: ln, s: s, maxConns: s.cfg.MaxConns, perAddr: s.cfg.MaxConnsPerAddr, by: map[string]int{}}
	go s.srv.Serve(s.ln)
	host, _, _ := net.SplitHostPort(addr)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port), nil
}

// Close stops serving and closes every connection.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// debugWriter turns net/http's log lines into debug messages.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg("peer server: " + strings.TrimSpace(string(p)))
	return len(p), nil
}

// asked is a parsed request.
type asked struct {
	proof       []byte // its proof, which the answer's tag covers
	source      string
	root        string // the dataset root source lies below
	size, mtime int64
	ino         uint64 // the source's inode, as the asker found it (StatSource); 0: not checked
	from, to    int
	at          int64  // when it was asked (unix seconds)
	nonce       string // the asker's, unique to the request
	made        bool   // the copy (the block) was made for it (ServerConfig.Miss, Blocks)
	block       bool   // a range of a block (blockEndpoint): block b's bytes [off, off+n)
	b, off, n   int64
}

// ServeHTTP implements http.Handler. The proof of the job's key is
// checked before anything else, so that a stranger learns nothing, not
// even whether a path is well formed.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proof, ok := verify(r, s.key)
	if !ok {
		s.refuse(w, r, nil, refusedAuth, statusOf[refusedAuth], "missing or wrong "+authHeader)
		return
	}
	if r.Method != http.MethodGet {
		s.refuse(w, r, proof, refusedRequest, http.StatusMethodNotAllowed, "GET only")
		return
	}
	a, bad := s.parse(r)
	if bad == nil {
		a.proof = proof
		bad = s.bound(a)
	}
	if bad != nil {
		s.refuse(w, r, proof, bad.why, statusOf[bad.why], bad.msg)
		return
	}
	if a.block {
		s.serveBlock(w, r, &a)
		return
	}
	f, why, msg := s.copyFor(r, &a)
	if f == nil {
		s.refuse(w, r, proof, why, statusOf[why], msg)
		return
	}
	defer f.Close()
	s.send(w, r, f, a)
}

// copyFor opens the copy to send for a: one whose source was found to be
// the dataset's own file, by the asker or by this node, now or before
// (source.go), made on demand if there is none. Without one it says why
// (a message).
func (s *Server) copyFor(r *http.Request, a *asked) (*os.File, reason, string) {
	f, why := s.find(*a)
	if f != nil && (s.madeFromAsked(f, *a) || vouched(f)) {
		return f, 0, ""
	}
	var src unix.Stat_t
	if why, msg := s.checkSource(*a, &src); msg != "" {
		if f != nil {
			f.Close()
		}
		return nil, why, msg
	}
	if f == nil && why == refusedMissing && s.cfg.Miss != nil {
		f, why = s.fetch(r, a)
	}
	if f != nil && !copiedFrom(f, &src) {
		f.Close()
		f, why = nil, refusedStale
	}
	if f == nil {
		return nil, why, "no copy of " + a.source + " with that size and mtime"
	}
	vouch(f, &src)
	return f, 0, ""
}

// statusOf is the HTTP status of each reason. An untrusted copy is
// "not found": the asker goes to the shared filesystem for that file,
// and the peer is not to blame.
var statusOf = [nReasons]int{
	refusedAuth:        http.StatusForbidden,
	refusedMisdirected: http.StatusForbidden,
	refusedExpired:     http.StatusForbidden,
	refusedReplay:      http.StatusForbidden,
	refusedRequest:     http.StatusBadRequest,
	refusedOutside:     http.StatusForbidden,
	refusedLinked:      http.StatusNotFound,
	refusedMissing:     http.StatusNotFound,
	refusedStale:       http.StatusConflict,
	refusedUntrusted:   http.StatusNotFound,
	refusedFailed:      http.StatusInternalServerError,
}

// refusal is a malformed or forbidden request: why, and what the asker
// is told.
type refusal struct {
	why reason
	msg string
}

func malformed(msg string) *refusal { return &refusal{refusedRequest, msg} }

// parse reads the request's parameters.
func (s *Server) parse(r *http.Request) (asked, *refusal) {
	if r.URL.Path != copyEndpoint && r.URL.Path != blockEndpoint {
		return asked{}, malformed("no such endpoint")
	}
	if r.Header.Get("Range") != "" {
		return asked{}, malformed("no Range: a block's range is in the target, which the proof covers")
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return asked{}, malformed("bad query")
	}
	var nums [5]int64
	for i, k := range []string{"size", "mtime", "from", "to", "t"} {
		if len(q[k]) != 1 {
			return asked{}, malformed("one " + k + " needed")
		}
		if nums[i], err = strconv.ParseInt(q[k][0], 10, 64); err != nil {
			return asked{}, malformed("bad " + k)
		}
	}
	a := asked{size: nums[0], mtime: nums[1], from: int(nums[2]), to: int(nums[3]), at: nums[4]}
	if len(q["ino"]) != 1 {
		return asked{}, malformed("one ino needed")
	}
	if a.ino, err = strconv.ParseUint(q["ino"][0], 10, 64); err != nil {
		return asked{}, malformed("bad ino")
	}
	if nums[2] < 0 || nums[2] >= int64(len(s.out)) || a.size < 0 {
		return asked{}, malformed("bad size or node")
	}
	if len(q["n"]) != 1 || len(q["n"][0]) < 16 || len(q["n"][0]) > 64 {
		return asked{}, malformed("one nonce of 16 to 64 characters needed")
	}
	a.nonce = q["n"][0]
	if r.URL.Path == blockEndpoint {
		if bad := parseBlock(q, &a); bad != nil {
			return asked{}, bad
		}
	}
	if len(q["path"]) != 1 {
		return asked{}, malformed("one path needed")
	}
	var bad *refusal
	if a.source, a.root, bad = s.sourcePath(q["path"][0]); bad != nil {
		return asked{}, bad
	}
	return a, nil
}

// bound checks that a request is meant for this node, now, and for the
// first time.
func (s *Server) bound(a asked) *refusal {
	now := s.now()
	switch {
	case a.to != s.cfg.Node:
		return &refusal{refusedMisdirected, fmt.Sprintf("meant for node %d, this is node %d", a.to, s.cfg.Node)}
	case time.Duration(max(a.at-now.Unix(), now.Unix()-a.at))*time.Second > requestWindow:
		return &refusal{refusedExpired, fmt.Sprintf("asked at %s, this node's clock says %s: more than %v apart",
			time.Unix(a.at, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), requestWindow)}
	case !s.seen.fresh(a.nonce, a.at, now):
		return &refusal{refusedReplay, "a request answered already"}
	}
	return nil
}

// madeFromAsked says whether the copy f was made from the inode the
// asker found at the source's path, on the dataset's filesystem.
func (s *Server) madeFromAsked(f *os.File, a asked) bool {
	rdev, ok := s.rootDev[a.root]
	id, err := tiering.FileIdent(int(f.Fd()))
	return ok && a.ino != 0 && err == nil && id.Dev == rdev && id.Ino == a.ino
}

// checkSource stats the source below its root without following a
// symlink (statSource) and checks it is the file asked for. It says why
// not (a message, "" if it is).
func (s *Server) checkSource(a asked, st *unix.Stat_t) (reason, string) {
	err := statSource(a.root, strings.TrimPrefix(strings.TrimPrefix(a.source, a.root), "/"), st)
	switch {
	case errors.Is(err, ErrLinked):
		return refusedLinked, a.source + " is " + err.Error() + ": each node reads it itself"
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return refusedMissing, "no such file"
	case err != nil:
		return refusedFailed, err.Error()
	case st.Size != a.size || st.Mtim.Nano() != a.mtime:
		return refusedStale, "the source has another size or mtime"
	}
	return 0, ""
}

// sourcePath checks a requested source path: absolute, without NUL or
// "..", and below a dataset root once cleaned; it returns it cleaned, and
// the root. The copy is found from it lexically (tiering.CopyPath), and
// the source from the root without following a symlink (checkSource).
func (s *Server) sourcePath(raw string) (string, string, *refusal) {
	if !strings.HasPrefix(raw, "/") || strings.IndexByte(raw, 0) >= 0 {
		return "", "", malformed("path must be absolute, without NUL")
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", "", malformed("path must not hold ..")
		}
	}
	p := path.Clean(raw)
	for _, root := range s.cfg.Roots {
		if within(root, p) {
			return p, root, nil
		}
	}
	return "", "", &refusal{refusedOutside, "path outside the dataset"}
}

// within says whether the clean path p lies strictly below root.
func within(root, p string) bool {
	if root == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, root+"/")
}

// find opens the copy of a.source in the fastest tier that holds one of
// a's size and mtime. Without one (nil) it says why: the worst of what
// the tiers had (a stale or untrusted copy, a failure) over none at all.
func (s *Server) find(a asked) (*os.File, reason) {
	why := refusedMissing
	for _, tier := range s.cfg.Tiers {
		f, st, err := openCopy(tier, a.source)
		if err != nil {
			why = max(why, classify(err))
			continue
		}
		if st.Size == a.size && st.Mtim.Nano() == a.mtime {
			return f, 0
		}
		f.Close()
		why = max(why, refusedStale)
	}
	return nil, why
}

// fetch has this node make the copy a request found none of
// (ServerConfig.Miss), within the request's life and MissWait, and opens
// it as find does.
func (s *Server) fetch(r *http.Request, a *asked) (*os.File, reason) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.MissWait)
	defer cancel()
	if !s.cfg.Miss(ctx, a.source, a.size, a.mtime) {
		return nil, refusedMissing
	}
	a.made = true
	return s.find(*a)
}

// classify names the reason an openCopy error gives the asker.
func classify(err error) reason {
	var unsafe *tiering.UnsafeError
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, tiering.ErrNotCopyable):
		return refusedMissing
	case errors.As(err, &unsafe) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
		return refusedUntrusted
	}
	return refusedFailed
}

// openCopy opens the copy of source in tier, walking from the tier's
// directory one component at a time with O_NOFOLLOW, each directory
// checked (tiering.Untrusted) before it is entered, and checks the copy:
// a regular file of this user's that no one else may write. The caller
// closes the file.
func openCopy(tier, source string) (*os.File, *unix.Stat_t, error) {
	p, err := tiering.CopyPath(tier, source)
	if err != nil {
		return nil, nil, err
	}
	parts := strings.Split(strings.TrimPrefix(p, tier+"/"), "/")
	fd, _, err := openChecked(unix.AT_FDCWD, tier, tier, unix.O_DIRECTORY, unix.S_IFDIR)
	if err != nil {
		return nil, nil, err
	}
	at := tier
	for _, dir := range parts[:len(parts)-1] {
		at += "/" + dir
		sub, _, err := openChecked(fd, dir, at, unix.O_DIRECTORY, unix.S_IFDIR)
		unix.Close(fd)
		if err != nil {
			return nil, nil, err
		}
		fd = sub
	}
	// O_NONBLOCK: a FIFO must not hang the open; the check refuses it.
	ffd, st, err := openChecked(fd, parts[len(parts)-1], p, unix.O_NONBLOCK, unix.S_IFREG)
	unix.Close(fd)
	if err != nil {
		return nil, nil, err
	}
	unix.SetNonblock(ffd, false)
	return os.NewFile(uintptr(ffd), p), st, nil
}

// openChecked opens name (below dirfd; path in messages) read-only with
// flags, without following a symlink, and checks it is a trusted kind.
func openChecked(dirfd int, name, path string, flags int, kind uint32) (int, *unix.Stat_t, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := tiering.Untrusted(path, &st, kind); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, &st, nil
}

// minWriteRate bounds how slowly an asker may take a file: a dead one
// would otherwise hold the tier file and a goroutine until TCP gives up.
const minWriteRate = 1 << 20 // bytes per second

// sendBufs are the buffers a body goes through on its way from the copy
// to the socket, hashed into the tag as it goes.
var sendBufs = sync.Pool{New: func() any { return new([256 << 10]byte) }}

// send serves what a asks for from body: the copy's a.size bytes, or
// the block's a.n, then the answer's tag. A body that ends short (a copy
// cut by someone with access to the tier) cuts the connection: the asker
// sees a short body, never a tag over it.
func (s *Server) send(w http.ResponseWriter, r *http.Request, body io.Reader, a asked) {
	size := a.size
	if a.block {
		size = a.n
	}
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30*time.Second + time.Duration(size/minWriteRate)*time.Second))
	w.Header().Set("Content-Type", "application/octet-stream") // not sniffed from the content
	w.Header().Set("Content-Length", strconv.FormatInt(size+tagLen, 10))
	w.WriteHeader(http.StatusOK)
	tag := answerTag(s.key, a.proof, http.StatusOK)
	n, err := copyHashed(w, body, size, tag)
	if err == nil {
		_, err = w.Write(tag.Sum(nil))
	}
	var rerr *readError
	switch {
	case errors.As(err, &rerr):
		s.count(r.RemoteAddr, r.RequestURI, refusedFailed, rerr.Error())
		panic(http.ErrAbortHandler)
	case err != nil:
		s.count(r.RemoteAddr, r.RequestURI, refusedAborted, err.Error())
	case a.block:
		s.out[a.from].blocks.Add(1)
		s.out[a.from].blockBytes.Add(n)
		if a.made {
			s.fetchedBlocks.Add(1)
		}
	default:
		s.out[a.from].files.Add(1)
		s.out[a.from].bytes.Add(n)
		if a.made {
			s.fetched.Add(1)
		}
	}
}

// readError is a failure reading the copy, as opposed to writing the
// answer.
type readError struct{ err error }

func (e *readError) Error() string { return "reading the copy: " + e.err.Error() }

// copyHashed writes size bytes of f to w and to h, and returns how many
// it wrote to w.
func copyHashed(w io.Writer, f io.Reader, size int64, h hash.Hash) (int64, error) {
	buf := sendBufs.Get().(*[256 << 10]byte)
	defer sendBufs.Put(buf)
	var n int64
	for n < size {
		r, err := f.Read(buf[:min(int64(len(buf)), size-n)])
		if r == 0 {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, &readError{err}
		}
		h.Write(buf[:r])
		wn, err := w.Write(buf[:r])
		n += int64(wn)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// refuse answers a request that is not served, and counts it. An answer
// to a request with a proof (proof not nil) carries its tag, so that the
// asker can tell it from a stranger's; a refusal but of a file closes the
// connection.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, proof []byte, why reason, status int, msg string) {
	s.count(r.RemoteAddr, r.RequestURI, why, msg)
	if proof != nil {
		w.Header().Set(answerHeader, hex.EncodeToString(answerTag(s.key, proof, status).Sum(nil)))
	}
	if !keepsConn[why] {
		w.Header().Set("Connection", "close")
	}
	http.Error(w, msg, status)
}

// count counts a request (or a connection) not served, and logs the first
// of each notable reason.
func (s *Server) count(from, target string, why reason, msg string) {
	s.refused[why].Add(1)
	if notable[why] && s.said[why].CompareAndSwap(false, true) {
		e := s.cfg.Log.Warn().Str("from", from)
		if target != "" {
			e = e.Str("request", target)
		}
		e.Msgf("peer server: refused a request (%s): %s; further ones are only counted", reasonNames[why], msg)
	}
}

// flow counts what this node served to one other node.
type flow struct {
	files, bytes       atomic.Int64 // whole files
	blocks, blockBytes atomic.Int64 // ranges of large files' blocks
}

// ServerStats is what a Server did: per asking node, the files and bytes
// served, and the blocks (ranges of them) and their bytes; of those, the
// files and the blocks served from a copy made for the request; per
// reason, the requests not served.
type ServerStats struct {
	Files         []int64          `json:"peer_files_out"`
	Bytes         []int64          `json:"peer_bytes_out"`
	Blocks        []int64          `json:"peer_blocks_out"`
	BlockBytes    []int64          `json:"peer_block_bytes_out"`
	Fetched       int64            `json:"fetched_for_peers"`
	FetchedBlocks int64            `json:"blocks_fetched_for_peers"`
	NotServed     map[string]int64 `json:"peer_not_served"`
}

// Stats reads the counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{Fetched: s.fetched.Load(), FetchedBlocks: s.fetchedBlocks.Load(), NotServed: map[string]int64{}}
	for i := range s.out {
		st.Files = append(st.Files, s.out[i].files.Load())
		st.Bytes = append(st.Bytes, s.out[i].bytes.Load())
		st.Blocks = append(st.Blocks, s.out[i].blocks.Load())
		st.BlockBytes = append(st.BlockBytes, s.out[i].blockBytes.Load())
	}
	for why := range nReasons {
		if n := s.refused[why].Load(); n > 0 {
			st.NotServed[reasonNames[why]] = n
		}
	}
	return st
}
