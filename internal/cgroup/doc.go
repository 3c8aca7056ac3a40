// Package cgroup gives each job process tree a control group of its own, where the kernel
// bounds the whole tree's memory (swap off) and processes, and counts its CPU time: rlimits,
// which bound each process alone, let a job's children add up past its limit.
//
// Open finds a hierarchy the platform can create groups in, once per process: cgroup v2 where
// the memory and pids controllers are available (at the root of the unified hierarchy as root,
// or in a subtree systemd delegated to the service, found from /proc/self/cgroup), else the
// cgroup v1 memory and pids controllers (hybrid hosts). All job groups live under one parent,
// "webordinary" (v2 delegated: the service's own group, the platform moved to a leaf); on v2
// they together take one share of the CPU against the platform's own group.
//
// A Group is made per job process (New), the process placed in it before it can fork: on v2
// atomically, by starting it with the group's directory (clone3 CLONE_INTO_CGROUP, FD); on v1
// by writing its pid (Place) while it waits for its command (the reaper's supervisor reads its
// command from a pipe first). Stats reads what the kernel counted (OOM kills, forks refused at
// the process limit, CPU time); Remove kills what is left and removes the group.
//
// The package is Linux-only.
package cgroup
