// Package agent runs an AI coding agent CLI (Claude Code, Codex, opencode, or any shell
// command) on a site's working tree for one edit job, and judges from the agent's own events
// whether it succeeded.
//
// Run is the whole API: a Spec (the project's agent choice and limits) and a Request (one
// run: directory, prompt, session) go in, a Result (success, summary, session id to keep for
// the thread, cost) comes out.
//
// # How a run works
//
// Each kind has a small adapter (claude.go, codex.go, opencode.go, command.go): a
// command-line builder and a parser for the lines the agent prints. The runner (runner.go) is
// shared: it starts the agent under a reaper supervisor, so that every process the agent
// starts can be killed, splits stdout and stderr into lines for the parser and the live view,
// keeps the last 4 KiB of output, and runs two watchdogs (wall clock, no output). Stopping a
// run — ctx cancelled or a watchdog firing — is always the same: SIGINT to the agent's process
// group, then, after Spec.InterruptGrace, SIGKILL to every descendant, wherever it went.
//
// Success is judged from events, not exit codes: Claude Code exits 0 when interrupted and
// reports is_error in its result; a run with permission denials edited less than asked.
//
// # Environment
//
// The agent sees an allowlist only: PATH, HOME, USER, LANG, LC_ALL, TZ, TMPDIR, TERM, the
// model credentials its kind needs when the worker has them (AWS credentials only with
// CLAUDE_CODE_USE_BEDROCK=1), Spec.PassEnv, Request.Env and the adapter's own variables. The
// worker's other secrets (git push token, mail and queue credentials) never reach it.
//
// # Tests
//
// Package fakeclaude is a small stand-in for the claude CLI that edits files from literal
// prompt lines; agenttest.BuildFakeClaude builds it for tests of this and other packages.
// Binaries and test binaries that call Run must call reaper.Main first thing.
package agent
