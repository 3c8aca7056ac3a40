// Package hostile is the platform's only way into a tree that a job controls: a site's
// workspace, its build output, the attachments folder. Jobs run sandboxed as another user,
// but the platform runs as root, so a symlink, FIFO or device left in such a tree must never
// make the platform read, write or wait where the job itself could not.
//
// A Tree is an os.Root over the directory, so no path resolves outside it, plus these rules:
//
//   - No symbolic link is followed on the job's behalf: a link as any component of a name
//     is refused (ErrSymlink), not resolved. (A link swapped in after the check is still
//     resolved by os.Root beneath the tree, so a race can only lead to another file of the
//     same tree, which the job could have written anyway.)
//   - Reads Lstat the name and refuse anything but a regular file (ErrNotRegular) before
//     opening it, open with O_NOFOLLOW|O_NONBLOCK (a FIFO cannot stall the open), then fstat
//     the descriptor and refuse it unless it is the same regular file the Lstat saw, so what
//     is read is what was checked.
//   - Every read is bounded twice: by a size in bytes (ErrTooLarge; the file's size at open
//     and the bytes actually read both count) and by the context, checked between chunks.
//   - Writes create new files only (O_EXCL), after creating missing parent directories one
//     component at a time through the root.
//
// Errors name the path within the tree and say what to do, so they can reach the site's
// owner; the operator's logs get the tree's directory from Tree.Dir.
//
// Platform-owned directories (the data directory, spools, the preview store) do not need
// this package; anything a job can write to does.
package hostile
