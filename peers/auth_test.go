package peers

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkAnswerTag is the cost of the answer's tag per byte, on each
// side of a transfer (HMAC-SHA256; crypto/sha256 uses the SHA extensions
// where the processor has them): its throughput against a link's.
func BenchmarkAnswerTag(b *testing.B) {
	buf := make([]byte, 256<<10)
	proof := requestMAC(testKey, "GET", query("/pfs/a", 1, 1, 0, 0, 1, time.Now()))
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		tag := answerTag(testKey, proof, http.StatusOK)
		tag.Write(buf)
		tag.Sum(nil)
	}
}

// TestNoncesForgetOutsideTheWindow: a nonce is remembered while its
// request's time is within the window, and forgotten after.
func TestNoncesForgetOutsideTheWindow(t *testing.T) {
	var n nonces
	now := time.Unix(1000, 0)
	if !n.fresh("a", now.Unix(), now) || n.fresh("a", now.Unix(), now.Add(requestWindow)) {
		t.Fatal("a nonce seen twice within the window was new both times")
	}
	later := now.Add(requestWindow + 2*time.Second)
	n.fresh("b", later.Unix(), later)
	if len(n.by) != 1 {
		t.Errorf("%d seconds of nonces kept after the window; want the latest only", len(n.by))
	}
}
