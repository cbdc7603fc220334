// Package tiering keeps copies of dataset files in node-local tiers (a
// RAM-backed directory, a local SSD) and decides whether a copy may be
// served.
//
// The filesystem is the placement table: a file is in a tier if and only
// if its copy exists at CopyPath(tier, source). Copies are written under a
// temporary name in <tier>/tmp, given the source's size, mode and mtime,
// and renamed into <tier>/files, so a reader never sees a partial copy and
// any process can find a copy with plain opens — which is exactly what
// the C data plane does. A copy's bytes are read from its source
// (Publish) or come from elsewhere, another node's copy (PublishFrom);
// either way it is published only if the source kept the size and mtime
// it had when the copy began. A copy is fresh while its size and mtime equal
// the source's; Validate removes the others.
//
// One process per node writes a tier at a time: it holds the tier's
// Lock. Everything else only reads.
package tiering
