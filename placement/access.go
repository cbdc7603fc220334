// What placement needs to know of the job: how it reads the dataset
// (Access, from the configuration), and the policies' defaults that
// augur sim shares with the leader.

package placement

// Access is how the training job reads the dataset: what the clairvoyant
// policy reproduces (see package seed).
type Access struct {
	Sampler      string // distributed, random, sequential, numpy, numpy-legacy, file:<path>
	Layout       string // imagefolder, flat, list:<file>
	Epochs       int    // 0: unknown; placement then looks DefaultHorizon epochs ahead
	BatchSize    int
	DropLast     bool
	Shuffle      bool
	WorldSize    int    // ranks in the job
	RanksPerNode int    // ranks on each node
	NodeRank     int    // this node's index: its ranks are NodeRank*RanksPerNode + local rank
	Torch        string // PyTorch version the job runs ("" = before 2.6)
	Lookahead    int    // files prefetched ahead of each rank
	Stage        int64  // bytes of the RAM tier for staged files (read once, then dropped)
}

// DefaultWaitMax is the reactive policy's wait_max: the largest file whose
// first reader waits for the copy instead of reading the original beside
// it. Waiting costs a reader that reads all of a file nothing (the copy
// is the read it would make), and one that reads a small part of it the
// rest of the file: up to 8 MiB, some 40 ms at 200 MB/s.
const DefaultWaitMax = 8 << 20

// DefaultHorizon is how many epochs placement considers when the job's
// epoch count is not configured.
const DefaultHorizon = 10
