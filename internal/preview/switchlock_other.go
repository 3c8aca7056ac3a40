//go:build !unix

package preview

// lockFile is a no-op where flock is missing: a Dir's switches are then serialized within a
// process only.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
