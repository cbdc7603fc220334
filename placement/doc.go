// Package placement is the clairvoyant policy's decision of what goes
// where, apart from everything that runs it: the access order a job's
// configuration predicts (Predict: the dataset root walked as the layout
// lists it, the sampler of each of the node's ranks, package seed's), and
// NoPFS's placement of the files in a node's tiers by that order
// (Placer). PlaceNode places orders and sizes given without a walked
// directory; PlaceNodes and Holders are a job of several nodes.
//
// The leader (package shim), augur plan and augur sim (package sim) all
// place by this code, so that what the simulator and the plan show is what
// the leader does. It links no cgo and nothing of the data plane's ABI:
// sim builds with CGO_ENABLED=0.
package placement
