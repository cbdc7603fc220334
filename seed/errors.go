package seed

import "errors"

// Errors returned by this package, wrapped with the detail of the failure;
// test for them with errors.Is.
var (
	// ErrSpec means a Spec is inconsistent or names an unknown sampler.
	ErrSpec = errors.New("seed: bad sampler spec")

	// ErrTorchVersion means a torch version is missing or unreadable where
	// the access order depends on it.
	ErrTorchVersion = errors.New("seed: torch version")

	// ErrOrderFile means an order file could not be read or parsed, or
	// names a file or index the dataset does not have.
	ErrOrderFile = errors.New("seed: bad order file")

	// ErrLayout means a dataset layout could not be listed the way the
	// framework lists it (for example ImageFolder found no class folder).
	ErrLayout = errors.New("seed: bad layout")
)
