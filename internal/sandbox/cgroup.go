package sandbox

import (
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/webordinary/webordinary/internal/cgroup"
	"github.com/webordinary/webordinary/internal/reaper"
)

// pidsSlack is what a job's group holds besides the job's own processes and threads: the
// reaper's supervisor (a Go program: a handful of threads) and bwrap's two processes.
const pidsSlack = 24

// watchInterval is how often a running job's group counters are read.
const watchInterval = 100 * time.Millisecond

// removeRetry is when a group whose removal failed is tried once more.
const removeRetry = time.Minute

// openCgroups finds where job groups are made; without one, limits are rlimits (cgReason says
// why).
func (s *Sandbox) openCgroups() {
	h, err := cgroup.Open()
	if err != nil {
		s.cgReason = err.Error()
		return
	}
	s.cg = h
}

// grouped reports whether the jail's processes each run in a control group of their own.
func (j *Jail) grouped() bool { return j != nil && j.s.cg != nil }

// startGrouped starts cmd, wrapped, under the reaper in a new group with the job's limits,
// and watches the group until the process is gone (see watch).
func (j *Jail) startGrouped(cmd *exec.Cmd) (*reaper.Process, error) {
	g, err := j.s.cg.New(j.groupLimits())
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	pl := reaper.Placement{Place: g.Place} // v1: the pid written while the supervisor waits
	if fd := g.FD(); fd >= 0 {
		pl = reaper.Placement{UseCgroupFD: true, CgroupFD: fd} // v2: in the group from the start
	}
	p, err := reaper.StartWrapperIn(cmd, pl)
	if err != nil {
		_ = g.Remove()
		return nil, err
	}
	w := &watch{g: g, limits: j.limits(), done: make(chan struct{})}
	j.mu.Lock()
	j.last = w
	j.mu.Unlock()
	go w.run(p)
	return p, nil
}

// groupLimits are the job's limits as the group's: the process count with room for the
// supervisor and bwrap.
func (j *Jail) groupLimits() cgroup.Limits {
	l := j.limits()
	var g cgroup.Limits
	if l.Memory > 0 {
		g.Memory = l.Memory
	}
	if l.Procs > 0 {
		g.Pids = l.Procs + pidsSlack
	}
	return g
}

// watch follows one job process's group: over a limit (an OOM kill, a fork refused, CPU
// time past the limit) it kills the whole group, and once the process is gone it removes the
// group.
type watch struct {
	g      *cgroup.Group
	limits Limits
	done   chan struct{} // closed once the group is removed; over is final then
	over   *LimitError
}

func (w *watch) run(p *reaper.Process) {
	exited := make(chan struct{})
	go func() {
		_, _ = p.Wait()
		close(exited)
	}()
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			w.check()
			if err := w.g.Remove(); err != nil {
				// A process slow to die (in uninterruptible sleep) keeps the group busy: try
				// again later; a group still left is removed by the next platform's Open.
				time.AfterFunc(removeRetry, func() { _ = w.g.Remove() })
			}
			close(w.done)
			return
		case <-tick.C:
			if w.over == nil && w.check() != nil {
				_ = w.g.Kill()
			}
		}
	}
}

// check reads the group's counters and records the first limit they show passed.
func (w *watch) check() *LimitError {
	if w.over != nil {
		return w.over
	}
	if st, err := w.g.Stats(); err == nil {
		w.over = w.limits.passed(st)
	}
	return w.over
}

// passed is the limit the group's counters show passed, nil if none.
func (l Limits) passed(st cgroup.Stats) *LimitError {
	switch {
	case st.OOMKills > 0 && st.MemoryFull > 0 && l.Memory > 0:
		return &LimitError{Key: "mem", Value: formatSize(l.Memory), What: "the job's processes together used more than " + words(l.Memory) + " of memory, and the job was stopped"}
	case st.PidsMax > 0 && l.Procs > 0:
		return &LimitError{Key: "procs", Value: strconv.FormatInt(l.Procs, 10), What: fmt.Sprintf("the job tried to run more than %d processes and threads at once, and was stopped", l.Procs)}
	case l.CPU > 0 && st.CPU > l.CPU:
		return &LimitError{Key: "cpu", Value: l.CPU.String(), What: "the job's processes together used more than " + l.CPU.String() + " of CPU time, and the job was stopped"}
	}
	return nil
}

// groupOver is the limit the jail's last started process went over, as its group counted,
// once that group is removed (the process has exited: OverLimit is asked after Wait).
func (j *Jail) groupOver() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	w := j.last
	j.mu.Unlock()
	if w == nil {
		return nil
	}
	<-w.done
	if w.over == nil {
		return nil
	}
	return w.over
}

// limitsMode is how limits are enforced: "cgroup v1", "cgroup v2" or LimitsMode.
func (s *Sandbox) limitsMode() string {
	if s.cg != nil {
		return s.cg.String()
	}
	return LimitsMode
}
