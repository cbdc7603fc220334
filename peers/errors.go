package peers

import "errors"

// Errors of Client.Fetch. Every one of them means the same to the caller:
// take this file from the shared filesystem. They differ in what they say
// about the peer.
var (
	// ErrPeerDown: the peer failed recently and is left alone until its
	// backoff interval ends; no request was sent.
	ErrPeerDown = errors.New("peer marked down")
	// ErrNotHeld: the peer answered, but holds no copy of that file with
	// the size and mtime asked for (not fetched yet, evicted, or stale).
	// The peer is healthy and stays up.
	ErrNotHeld = errors.New("peer holds no matching copy")
	// ErrRefused: the peer answered with an error status (bad secret,
	// refused path, internal failure). The peer is marked down.
	ErrRefused = errors.New("peer refused the request")
	// ErrLength: the peer's body was not as long as the file and its
	// tag. Whatever reached dst must be discarded. The peer is marked
	// down.
	ErrLength = errors.New("peer sent a body of the wrong length")
	// ErrForged: the peer's answer failed its check (auth.go): not made
	// with the job's key for this request, whoever sent it. Whatever
	// reached dst must be discarded. The peer is marked down.
	ErrForged = errors.New("peer's answer failed its check")
	// ErrNoPeer: the node index names no peer (out of range, or this
	// node itself, or a node whose address is not known yet).
	ErrNoPeer = errors.New("no such peer")
)

// ErrLinked is StatSource's error for a source that is not the dataset's
// own file: it is reached through a symbolic link below its root, or it
// has other names (hard links), or it is no regular file. No peer serves
// it; each node reads it itself.
var ErrLinked = errors.New("reached through a symbolic link or has other names")
