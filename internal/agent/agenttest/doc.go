// Package agenttest helps tests of packages that run agents: BuildFakeClaude builds
// fakeclaude, a stand-in for the claude CLI that performs literal edits from prompt lines (see
// package fakeclaude for the prompt language), so that tests run a real agent process, with
// real sessions, interrupts and leftover processes, without a model.
//
// A test binary that runs agents through agent.Run must call reaper.Main first thing in
// TestMain.
package agenttest
