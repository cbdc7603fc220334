package peers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
)

// authHeader carries a request's proof that its sender knows the job's
// secret: the HMAC-SHA256, keyed with the secret, of the request's
// method, target (path and query: the file, its size and mtime, the
// asking node) and Range. The secret itself never crosses the network,
// so neither someone who reads the traffic nor a stranger listening at a
// stale address learns it; a captured proof only asks again for the
// bytes already seen.
const authHeader = "Augur-Auth"

func mac(key []byte, method, target, rng string) []byte {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, method+"\n"+target+"\n"+rng)
	return h.Sum(nil)
}

// sign adds the proof to a request the client is about to send.
func sign(req *http.Request, key []byte) {
	m := mac(key, req.Method, req.URL.RequestURI(), req.Header.Get("Range"))
	req.Header.Set(authHeader, hex.EncodeToString(m))
}

// verify checks a received request's proof, in constant time.
func verify(r *http.Request, key []byte) bool {
	got, err := hex.DecodeString(r.Header.Get(authHeader))
	return err == nil && hmac.Equal(got, mac(key, r.Method, r.RequestURI, r.Header.Get("Range")))
}
