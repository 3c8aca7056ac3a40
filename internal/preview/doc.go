// Package preview publishes built sites as previews and serves them.
//
// After each edit the worker builds the site and calls Target.Deploy with the build output.
// A deploy publishes one directory twice over: as the thread's own preview (each email thread
// has a branch, and so a preview of its own) and as the project's latest preview, which follows
// whichever thread deployed last. Target is backend-neutral: Dir writes versions into a local
// directory, and an S3 target can implement the same interface later.
//
// Dir keeps every thread's versions side by side and switches between them with one atomic
// symlink rename, so a reader sees the old site or the new one, never a mix:
//
//	<root>/<project>/latest                          -> threads/<thread>/versions/<n>
//	<root>/<project>/threads/<thread>/current        -> versions/<n>
//	<root>/<project>/threads/<thread>/versions/<n>/  the site's files
//	<root>/<project>/threads/<thread>/versions/<n>.json  sha256 and size of every file
//
// A new version is built from the previous one: a file whose sha256 appears in the previous
// version's manifest is hard-linked, not rewritten (build tools rewrite every file on each
// build, so timestamps say nothing). Only the newest few versions are kept.
//
// Server serves those previews over HTTP by Host header: edit.<project>.localhost is the
// project's latest preview and <thread>.edit.<project>.localhost a thread's, with Astro-style
// path fallbacks (/about tries about.html, /about/ serves about/index.html). Server and Dir
// only share the directory layout, so they may run in different processes.
//
// URLs names the addresses a deploy reports back to the site owner.
package preview
