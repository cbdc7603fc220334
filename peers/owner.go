package peers

import "path/filepath"

// Owner is the node that reads path from the shared filesystem under the
// reactive policy (HVAC): the others, when they read it, ask the owner.
// It needs no traffic between nodes: every node computes the same owner
// from the path alone, a stable hash of the lexically cleaned path (so
// /d//a and /d/./a agree) modulo the node count. Node counts of one or
// less have node 0 own everything.
func Owner(path string, nodes int) int {
	if nodes <= 1 {
		return 0
	}
	return int(hashPath(filepath.Clean(path)) % uint64(nodes))
}

// hashPath is FNV-1a 64 followed by MurmurHash3's finaliser. FNV-1a
// alone will not do modulo a power of two: its low k bits depend only on
// the low k bits of the bytes (the multiplier is odd), so on two nodes
// the owner would be the parity of the bytes' sum and every name that is
// an anagram of another would land with it. The finaliser mixes the high
// bits down.
func hashPath(p string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(p); i++ {
		h ^= uint64(p[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
