package test

// Words of a job's segment that tests move as the leader would. cgo is
// not allowed in _test.go files, so they live here.

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"hash/fnv"
	"unsafe"
)

// holdOf is the writes table's entry of the dataset file path in the
// segment at seg (struct augur_hold: the data plane keys it by the FNV-1a
// of the absolute path).
func holdOf(seg unsafe.Pointer, path string) *C.struct_augur_hold {
	h := fnv.New64a()
	h.Write([]byte(path))
	s := (*C.struct_augur_segment)(seg)
	return &s.writes.hold[h.Sum64()&(C.AUGUR_HOLD_SLOTS-1)]
}

// publishingWord counts the leader's publications under way of path.
func publishingWord(seg unsafe.Pointer, path string) *uint32 {
	return (*uint32)(unsafe.Pointer(&holdOf(seg, path).publishing))
}

// genWord is path's change generation.
func genWord(seg unsafe.Pointer, path string) *uint32 {
	return (*uint32)(unsafe.Pointer(&holdOf(seg, path).gen))
}
