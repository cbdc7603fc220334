package peers

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Authentication. A node believes nothing another node says that does
// not carry an HMAC-SHA256 keyed with the job's key, and the key never
// crosses the network:
//
//   - A request's proof (authHeader) covers its method and target: the
//     file, its size and mtime, the asking node, the node asked, when it
//     was asked and a random nonce (query). A server refuses a proof it
//     cannot verify, one meant for another node, one more than
//     requestWindow from its own clock, and one whose nonce it has seen:
//     a captured request is good once, at one node, for a minute at most.
//   - An answer's tag covers the request's proof, the status and every
//     byte of the body: appended to the body of a copy, in answerHeader
//     otherwise. A client publishes a peer's bytes only once the tag that
//     follows them is right, so a stranger who took a node's address (or
//     sits at a stale one) cannot give anyone a byte, nor can a captured
//     answer serve another request.
//
// The job's key is derived from the secret and the job id (HKDF-SHA256):
// a static secret used by many jobs gives each its own key, and a request
// of one job is nothing to another.
const (
	authHeader   = "Augur-Auth"
	answerHeader = "Augur-Answer"
	tagLen       = sha256.Size
)

// requestWindow is how far from a server's clock a request's time may
// be: a job's nodes keep their clocks within milliseconds of each other
// (NTP), and a request is sent as soon as it is signed.
const requestWindow = 30 * time.Second

// jobKey derives the job's key from its secret.
func jobKey(secret, job string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, "augur peers job "+job, sha256.Size)
	if err != nil {
		panic(err) // only for a key longer than 255 hashes
	}
	return k
}

func requestMAC(key []byte, method, target string) []byte {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, "request\n"+method+"\n"+target)
	return h.Sum(nil)
}

// sign adds the proof to a request the client is about to send, and
// returns it: the answer's tag is bound to it.
func sign(req *http.Request, key []byte) []byte {
	m := requestMAC(key, req.Method, req.URL.RequestURI())
	req.Header.Set(authHeader, hex.EncodeToString(m))
	return m
}

// verify checks a received request's proof, in constant time, and
// returns it.
func verify(r *http.Request, key []byte) ([]byte, bool) {
	got, err := hex.DecodeString(r.Header.Get(authHeader))
	return got, err == nil && hmac.Equal(got, requestMAC(key, r.Method, r.RequestURI))
}

// answerTag begins the tag of the answer with status to the request whose
// proof is proof; the answer's body, if any, is written to it next.
func answerTag(key, proof []byte, status int) hash.Hash {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, "answer\n"+strconv.Itoa(status)+"\n")
	h.Write(proof)
	return h
}

// nonces remembers the nonces of the requests a server accepted, by the
// second of their time, for as long as their time is within the window:
// a request replayed within it is refused as seen, after it as expired.
// It holds what the job's own nodes asked in the last two windows (under
// 100 bytes a request); a stranger adds nothing, as it has no proof.
type nonces struct {
	mu     sync.Mutex
	by     map[int64]map[string]struct{} // second -> nonces; guarded by mu
	pruned int64                         // the second of the last prune; guarded by mu
}

// fresh records nonce, of a request made at the second at, and says
// whether it is new. now is the server's clock.
func (n *nonces) fresh(nonce string, at int64, now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sec := now.Unix(); sec != n.pruned {
		oldest := now.Add(-requestWindow).Unix() - 1
		for s := range n.by {
			if s < oldest {
				delete(n.by, s)
			}
		}
		n.pruned = sec
	}
	if n.by == nil {
		n.by = map[int64]map[string]struct{}{}
	}
	set := n.by[at]
	if set == nil {
		set = map[string]struct{}{}
		n.by[at] = set
	}
	if _, seen := set[nonce]; seen {
		return false
	}
	set[nonce] = struct{}{}
	return true
}
