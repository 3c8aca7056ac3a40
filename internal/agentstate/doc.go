// Package agentstate carries a tenant's agent state between machines, so a worker with empty
// directories can take over any tenant and the thread's agent session resumes there.
//
// What travels is the part of the tenant's state directory (<state>/<project>/<user>) a job
// writes and needs again: agent/ (the agent's config dir: Claude Code's CLAUDE_CONFIG_DIR with
// its session transcripts, codex's CODEX_HOME, opencode's XDG_DATA_HOME) and home/ (the
// job's HOME). It travels as one tar+gzip archive per tenant in the engine's blob store
// "states" under the key "<project>.<user>" (broker.Blobs: a JetStream object store, S3 on AWS).
//
// What stays: git/ (the platform's askpass helper), build/ (the install stamp of this
// machine's node_modules), staging directories, package caches anywhere below
// (node_modules, .npm, .cache, .pnpm-store, .yarn, .bun, .node-gyp), credentials an agent
// login may have written (.credentials.json, auth.json, .git-credentials, .netrc, .ssh), and
// anything not a regular file or directory (symlinks, sockets). A restore leaves those that
// exist locally in place.
//
// Save stops with ErrTooLarge, keeping the previously stored state, once the archive grows
// over the Store's MaxBytes (default DefaultMaxBytes) or the files over MaxUnpacked bytes.
// Unpack refuses paths outside the tree, links, and more than MaxUnpacked bytes.
package agentstate
