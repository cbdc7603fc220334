package test

// Words of a job's segment that tests move as the leader would. cgo is
// not allowed in _test.go files, so they live here.

/*
#include "../preload/segment.h"
*/
import "C"

import (
	"unsafe"
)

// holdOf is the writes table's entry of the dataset file path in the
// segment at seg (struct augur_hold: the data plane keys it by
// augur_path_key of the absolute path).
func holdOf(seg unsafe.Pointer, path string) *C.struct_augur_hold {
	key := C.augur_path_key((*C.char)(unsafe.Pointer(unsafe.StringData(path))), C.uint64_t(len(path)))
	s := (*C.struct_augur_segment)(seg)
	return &s.writes.hold[key&(C.AUGUR_HOLD_SLOTS-1)]
}

// publishingWord counts the leader's publications under way of path.
func publishingWord(seg unsafe.Pointer, path string) *uint32 {
	return (*uint32)(unsafe.Pointer(&holdOf(seg, path).publishing))
}

// genWord is path's change generation.
func genWord(seg unsafe.Pointer, path string) *uint32 {
	return (*uint32)(unsafe.Pointer(&holdOf(seg, path).gen))
}
