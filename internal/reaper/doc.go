// Package reaper runs a command so that every process it starts can be
// killed, even processes that left its process group or session (setsid) and
// even when the calling process itself dies abruptly (kill -9).
//
// Workers run AI coding agents and arbitrary commands. Agents start tool
// shells in their own sessions, so killing a process group is not enough: an
// orphaned agent that keeps editing a workspace after its owner is gone would
// corrupt the workspace for the next owner.
//
// # Design
//
// Start re-executes the current binary (via /proc/self/exe) as a supervisor
// process, marked by an environment variable; Main, called first thing in
// main, detects the marker and runs the supervisor instead of the program.
// The supervisor:
//
//   - makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so
//     every orphaned descendant of the command is reparented to it and stays
//     findable;
//   - starts the command in its own process group, with the caller's
//     arguments, environment, directory and standard streams;
//   - holds the read end of a liveness pipe whose write end only the caller
//     holds; the kernel closes that end when the caller dies for any reason,
//     so EOF on the pipe means "caller gone". A parent-death signal (SIGTERM)
//     is a second trigger;
//   - forwards SIGINT to the command's process group (a soft interrupt);
//   - on SIGTERM, SIGHUP or caller death sweeps every descendant and exits;
//   - when the command exits by itself, sweeps whatever it left behind and
//     exits with the command's exit code (128+signal if it was signalled).
//
// A sweep enumerates the supervisor's descendants from /proc, stops them with
// SIGSTOP (so they cannot fork while being killed), kills them with SIGKILL
// and reaps them, repeating until the supervisor has no children left or a
// deadline passes.
//
// StartWrapperIn also places the supervisor, before its command starts, in a control group
// (the sandbox's per-job group): started in it on cgroup v2, or its pid written there (v1)
// while it still waits for its command on the liveness pipe. Everything the command starts
// is then in the group, whose limits bound them all together.
//
// The mechanism is Linux-only.
package reaper
