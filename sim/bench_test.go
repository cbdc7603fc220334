package sim

import "testing"

// BenchmarkImageNet1024 is the speed case: ImageNet-1k on 1024
// nodes for 90 epochs under augur's policy (docs/sim.md gives the time
// on the 2-core machine).
func BenchmarkImageNet1024(b *testing.B) {
	for range b.N {
		c := Lassen()
		c.Nodes, c.Epochs, c.Policies = 1024, 90, []string{"clairvoyant+peers"}
		if _, err := Run(c); err != nil {
			b.Fatal(err)
		}
	}
}
