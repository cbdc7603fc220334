package sim

import "testing"

// BenchmarkImageNet1024 is the speed case: ImageNet-1k on 1024
// nodes for 90 epochs, every policy, as `augur sim --nodes 1024 --epochs
// 90` runs it (docs/sim.md gives the time on the 2-core machine).
func BenchmarkImageNet1024(b *testing.B) { benchImageNet1024(b, 90) }

// BenchmarkImageNet1024Peers is augur's policy alone in the same job.
func BenchmarkImageNet1024Peers(b *testing.B) { benchImageNet1024(b, 90, "clairvoyant+peers") }

// BenchmarkImageNet1024x30 is the profile cmd/augur/default.pgo is made
// from (make pgo): the same job for 30 epochs, every policy. (Profiles of
// 12 epochs, a third of the samples, made 1024 x 90 slower by up to a
// tenth from one to the next: docs/sim.md.)
func BenchmarkImageNet1024x30(b *testing.B) { benchImageNet1024(b, 30) }

// benchImageNet1024 simulates Lassen's ImageNet-1k on 1024 nodes for
// epochs epochs under policies (none: every one).
func benchImageNet1024(b *testing.B, epochs int, policies ...string) {
	for range b.N {
		c := Lassen()
		c.Nodes, c.Epochs = 1024, epochs
		if len(policies) > 0 {
			c.Policies = policies
		}
		if _, err := Run(c); err != nil {
			b.Fatal(err)
		}
	}
}
