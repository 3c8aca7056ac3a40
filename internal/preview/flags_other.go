//go:build !unix

package preview

import "os"

// readFlags opens source files for reading.
const readFlags = os.O_RDONLY
