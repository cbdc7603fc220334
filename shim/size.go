package shim

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count: a plain number, or a number with a unit
// K, M, G, T (powers of 1024, as fio reads them, also written KiB, MiB,
// ...) or KB, MB, GB, TB (powers of 1000).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 512MiB, 8G, 200GB)", s)
	}
	mult, ok := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "KIB": 1 << 10, "KB": 1e3,
		"M": 1 << 20, "MIB": 1 << 20, "MB": 1e6,
		"G": 1 << 30, "GIB": 1 << 30, "GB": 1e9,
		"T": 1 << 40, "TIB": 1 << 40, "TB": 1e12,
	}[unit]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit %q (use K, M, G, T, KiB, MB, ...)", s, unit)
	}
	return int64(v * mult), nil
}

// FormatSize prints a byte count with a binary unit.
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
