// The memory the kernel says is available: what a RAM tier's default
// capacity is a share of, and what augur sim checks a run against.

package tiering

import (
	"bufio"
	"fmt"
	"os"
)

// MemAvailable is the memory the kernel says is available now
// (/proc/meminfo's MemAvailable), 0 if it does not say.
func MemAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}
