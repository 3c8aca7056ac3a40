package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the machine's busy and total CPU time since boot, summed over cores, from
// /proc/stat (Linux); ok is false elsewhere.
func cpuTimes() (busy, total time.Duration, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(s.Text()) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on every Linux architecture Go supports
	for i, v := range fields[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += time.Duration(n) * tick
		if i != 3 && i != 4 { // idle, iowait
			busy += time.Duration(n) * tick
		}
	}
	return busy, total, true
}

// cpuBusy measures the machine's busy cores from a call to the call of the function it returns:
// "1.8 of 2 cores busy", or "" where /proc/stat is missing.
func cpuBusy() func() string {
	b0, t0, ok := cpuTimes()
	start := time.Now()
	return func() string {
		b1, t1, ok1 := cpuTimes()
		wall := time.Since(start)
		if !ok || !ok1 || t1 <= t0 || wall <= 0 {
			return ""
		}
		cores := float64(t1-t0) / float64(wall)
		return strconv.FormatFloat(float64(b1-b0)/float64(wall), 'f', 1, 64) + " of " + strconv.FormatFloat(cores, 'f', 0, 64) + " cores busy"
	}
}
