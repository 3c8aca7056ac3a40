// Package preview publishes built sites as previews and serves them.
//
// After each edit the worker builds the site and calls Target.Deploy with the build output.
// A deploy publishes one directory twice over: as the thread's own preview (each email thread
// has a branch, and so a preview of its own) and as the project's latest preview, which follows
// whichever thread deployed last. Target is backend-neutral: Dir keeps versions in a local
// directory, and package s3target in S3, through the portable layer in portable.go.
//
// # Layout of a Dir
//
// Dir stores content by hash and describes each version with a manifest:
//
//	<root>/<project>/latest                              -> threads/<thread>/versions/<n>.json
//	<root>/<project>/threads/<thread>/current            -> versions/<n>.json
//	<root>/<project>/threads/<thread>/versions/<n>.json  path -> sha256 and size, per file
//	<root>/<project>/threads/<thread>/blobs/<sha256>     one file's content, never rewritten
//	<root>/<project>/latest.fences                       per lease holder, the newest token that switched latest
//	<root>/<project>/threads/<thread>/current.fences     the same for current
//	<root>/<project>/.switch.lock                        flocked by every process around a switch
//
// A deploy hashes every source file (build tools rewrite every file on each build, so
// timestamps say nothing), writes a blob only for content the thread does not hold yet (or
// hard-links it from the thread the project's latest shows), writes the new manifest, and
// then renames a fresh symlink over current and over latest, having checked the deploy's
// Fence against each pointer's fences under the project's switch lock. A rename is atomic,
// so a reader that resolves a symlink once sees the old version or the new one, never a
// mix. The work a deploy does on disk grows with the files that changed, not with the size
// of the site.
// Each thread keeps its newest few manifests; blobs that none of them names are deleted.
//
// # Serving
//
// Server serves previews over HTTP by Host header: edit.<project>.localhost is the project's
// latest preview and <thread>.edit.<project>.localhost a thread's, with Astro-style path
// fallbacks (/about tries about, then about.html; /about/ is about/index.html). A request
// resolves its symlink once and is answered from that version only. URL paths are looked up
// in the manifest, never on disk, so no path can reach outside the site. Server and Dir share
// only the directory layout, so they may run in different processes.
//
// URLs names the addresses a deploy reports back to the site owner.
package preview
