// Package peers makes the tiers of a job's nodes one cache: a node gets a
// dataset file another node holds from that node instead of from the
// shared filesystem (NoPFS's distributed cache), over HTTP, without a
// service to deploy and never in a reader's way.
//
// Why: each rank of an N-node job reads a different 1/N of every epoch,
// so over the epochs every node reads most of the dataset, and what its
// own tiers do not hold it reads from the shared filesystem again and
// again. When the nodes' tiers together hold the dataset, the shared
// filesystem need serve it only once.
//
// The pieces, in the order a leader uses them:
//
//   - Config is the job's membership: this node's index, the node count,
//     the job id, and either the list of every node's address or a
//     rendezvous directory; FromEnv reads them from what the launcher
//     set (augur's variables, torchrun's, SLURM's), Validate says what
//     is wrong with them.
//   - Rendezvous is a directory on a shared filesystem where each leader
//     announces its address and where the job's secret is created once.
//   - Server serves this node's tier copies to the other nodes; Client
//     fetches a copy from another node into a file of the caller's.
//   - Model says which source, the shared filesystem or a peer, is
//     expected to deliver a file first, from measured throughput and the
//     bytes already in flight at each.
//   - Owner names the node that reads a file from the shared filesystem
//     under the reactive policy (asked for a file it has no copy of, its
//     server has it copied on demand: ServerConfig.Miss); the clairvoyant
//     policy knows instead, from every node's placement, which node holds
//     a file and from when.
//
// A fetch, as the leader's copy queue is to do it:
//
//	var st unix.Stat_t
//	candidates := []peers.Source{peers.PFS}
//	if peers.StatSource(roots, source, &st) == nil && client.Up(holder) {
//		candidates = append(candidates, peers.Source(holder))
//	}
//	if src := model.Choose(st.Size, candidates); src != peers.PFS {
//		t := model.Begin(src, st.Size)
//		n, err := client.Fetch(ctx, holder, source, st.Size, st.Mtim.Nano(), st.Ino, tmp)
//		t.Done(n)
//		if err == nil {
//			// publish tmp as a copy of source, as a copy from the shared filesystem is
//		}
//	}
//	// else, or on any error: copy from the shared filesystem
//
// The bytes land in a temporary file of the local tier and are published
// by the same atomic protocol as any copy, and only once Fetch has
// checked the answer's tag after them, so the data plane still opens
// only local files, never touches the network, and never sees a byte a
// node of the job did not vouch for.
//
// Faults stay with the peer. Every error of Fetch means "take the file
// from the shared filesystem"; a peer that refuses, times out, fails,
// sends a wrong length or an answer that fails its check is marked down
// for a backoff that doubles up to a cap, and the job goes on.
//
// Security. Everything here crosses a network and a shared filesystem,
// and a node believes only what the job's members sign (auth.go):
// requests and answers carry an HMAC-SHA256 keyed with the job's key,
// derived from the secret and the job id (the secret itself is never
// sent); a request is good once, at the node it names, within 30 s of
// its time; an answer's tag covers the request's and every byte. A
// server serves only copies of files below the job's dataset roots,
// reached from the root without a symlink and with no other name
// (source.go), of the size and mtime asked for, reached through the tier
// without following a symlink, owned by the user and written by no one
// else; it binds one address, never every interface, and keeps to a
// budget of connections and descriptors that a stranger cannot take from
// the program it lives in (conns.go). The client dials only the
// addresses of the job's nodes: no proxy, no redirect. Rendezvous
// directories are trusted only if the user's own and private, on a path
// no one else can change; their files only if the user's own and
// private. Every refusal is counted (ServerStats.NotServed,
// PeerStats.Forged) and the first of each kind logged.
//
// Caveats:
//   - Bodies travel unencrypted, as the shared filesystem's own traffic
//     usually does: whoever can read the job's network can read the
//     files the nodes exchange (but not forge a request or an answer).
//   - The nodes' clocks must agree within 30 s (requestWindow).
//   - The answer's tag is computed and checked in the leaders' processes
//     instead of sendfile: about a core-second per GB on each side
//     (BenchmarkAnswerTag).
//   - A job id must be shared by every node and by no other job: a
//     rendezvous directory reused by a later job of the same id holds
//     its predecessor's addresses until each node announces itself
//     again; a stale address is dialled, fails, and its node is marked
//     down until a fresh announcement is read.
//   - A shared filesystem may cache directory entries for seconds; the
//     rendezvous is polled, not watched.
package peers
