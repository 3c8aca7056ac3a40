package reaper

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procStat is the part of /proc/<pid>/stat the package needs.
type procStat struct {
	State     byte   // R, S, D, Z, T, ...
	PPid      int    // parent's pid (thread group id)
	PGrp      int    // process group
	StartTime uint64 // clock ticks after boot; tells a reused pid apart
}

// parseStat parses the contents of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself contain spaces and parentheses, so the
// fixed fields are read after the last ')'.
func parseStat(data []byte) (procStat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, errors.New("stat: no closing parenthesis after command name")
	}
	// After ')': state(3) ppid(4) ... starttime(22), so starttime is index 19.
	fields := bytes.Fields(data[end+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("stat: %d fields after command name, want at least 20", len(fields))
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return procStat{}, fmt.Errorf("stat: parse ppid: %w", err)
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return procStat{}, fmt.Errorf("stat: parse pgrp: %w", err)
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: parse starttime: %w", err)
	}
	return procStat{State: fields[0][0], PPid: ppid, PGrp: pgrp, StartTime: start}, nil
}

// readStat reads and parses /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	st, err := parseStat(data)
	if err != nil {
		return procStat{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return st, nil
}

// parentMap returns pid → ppid for every process currently listed in /proc.
// Processes that exit while the map is being built are skipped.
func parentMap() (map[int]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	parents := make(map[int]int, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile, or not a process directory
		}
		parents[pid] = st.PPid
	}
	return parents, nil
}

// descendants returns the pids of all current descendants of root (root
// excluded), parents before their children. It is a snapshot: processes may
// appear or disappear right after it is taken.
func descendants(root int) ([]int, error) {
	parents, err := parentMap()
	if err != nil {
		return nil, err
	}
	children := make(map[int][]int)
	for pid, ppid := range parents {
		children[ppid] = append(children[ppid], pid)
	}
	seen := map[int]bool{root: true}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, c := range children[parent] {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out, nil
}

// maxStopRounds bounds how often stopTree re-enumerates to catch processes
// forked between an enumeration and the SIGSTOP of their parent.
const maxStopRounds = 50

// stopTree sends SIGSTOP to every descendant of root, re-enumerating until no
// new descendant shows up (bounded), and returns the pids it stopped.
func stopTree(root int) (map[int]bool, error) {
	stopped := make(map[int]bool)
	for range maxStopRounds {
		pids, err := descendants(root)
		if err != nil {
			return stopped, err
		}
		fresh := 0
		for _, pid := range pids {
			if stopped[pid] {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGSTOP) // ESRCH: already gone
			stopped[pid] = true
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	return stopped, nil
}

// killTree stops and then SIGKILLs every descendant of root. It does not reap
// them; that is up to their parents (or to root, if it is a subreaper).
func killTree(root int) error {
	stopped, err := stopTree(root)
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH: already gone
	}
	if err != nil {
		return fmt.Errorf("kill descendants of %d: %w", root, err)
	}
	return nil
}

// pollInterval is how long bounded loops wait between checks of a condition.
const pollInterval = 5 * time.Millisecond
