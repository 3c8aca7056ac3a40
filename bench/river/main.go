// Command river runs issue 12's throughput cases on River (github.com/riverqueue/river) over a
// throwaway PostgreSQL, the peer for `webordinary bench --only throughput` on the same machine.
//
// Each tenant is a River queue with MaxWorkers 1 on one client, River's way to run one
// tenant's jobs one at a time and in order (two clients would each run one of a tenant's jobs
// at once). A job counts when River reports it completed, that is after its completion is
// committed; drain is timed from the first job River starts. PostgreSQL runs with fsync and
// synchronous_commit on (its defaults), listening on a Unix socket only.
//
//	cd bench/river && go run . [-cases 100x20,1000x1]
//
// It needs PostgreSQL's initdb, pg_ctl, postgres and psql, on PATH or under
// /usr/lib/postgresql/<v>/bin (Debian: apt-get install postgresql). Run as root, it runs
// PostgreSQL as the user postgres.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func main() {
	cases := flag.String("cases", "100x20,1000x1", "tenants x jobs per tenant, comma-separated")
	flag.Parse()
	if err := run(*cases); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

func run(cases string) error {
	ctx := context.Background()
	pg, err := startPostgres()
	if err != nil {
		return err
	}
	defer pg.stop()
	for _, c := range strings.Split(cases, ",") {
		tenants, jobs, ok := parseCase(c)
		if !ok {
			return fmt.Errorf("case %q: want tenants x jobs, e.g. 100x20", c)
		}
		for _, drain := range []bool{false, true} {
			if err := once(ctx, pg, tenants, jobs, drain); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseCase(c string) (int, int, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(c), "x")
	t, err1 := strconv.Atoi(a)
	j, err2 := strconv.Atoi(b)
	return t, j, ok && err1 == nil && err2 == nil && t > 0 && j > 0
}

type args struct {
	Tenant int `json:"t"`
	Seq    int `json:"s"`
}

func (args) Kind() string { return "noop" }

// noop checks each tenant's order: job s of a tenant runs only after job s-1 of it.
type noop struct {
	river.WorkerDefaults[args]
	mu       sync.Mutex
	next     map[int]int
	disorder atomic.Int64
	first    atomic.Int64 // unix nanoseconds of the first Work call
}

func (w *noop) Work(_ context.Context, j *river.Job[args]) error {
	w.first.CompareAndSwap(0, time.Now().UnixNano())
	w.mu.Lock()
	if w.next[j.Args.Tenant] != j.Args.Seq {
		w.disorder.Add(1)
	}
	w.next[j.Args.Tenant] = j.Args.Seq + 1
	w.mu.Unlock()
	return nil
}

// once runs tenants × jobs: end to end (inserting while the client works) or drain (all
// inserted first, then the client starts).
func once(ctx context.Context, pg *postgres, tenants, jobs int, drain bool) error {
	db := fmt.Sprintf("b%d", time.Now().UnixNano())
	if err := pg.createDB(db); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, pg.url(db))
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	w := &noop{next: map[int]int{}}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	queues := make(map[string]river.QueueConfig, tenants)
	for i := range tenants {
		queues[queue(i)] = river.QueueConfig{MaxWorkers: 1}
	}
	client, err := river.NewClient(driver, &river.Config{Queues: queues, Workers: workers,
		FetchCooldown: time.Millisecond})
	if err != nil {
		return err
	}
	n := tenants * jobs
	// River drops events when a subscriber's channel is full: room for all of them.
	completed, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: n})
	defer cancelSub()
	var submitted time.Duration
	if drain {
		start := time.Now()
		if err := insertAll(ctx, client, tenants, jobs); err != nil {
			return err
		}
		submitted = time.Since(start)
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	start := time.Now()
	inserted := make(chan error, 1)
	if !drain {
		go func() {
			err := insertAll(ctx, client, tenants, jobs)
			submitted = time.Since(start)
			inserted <- err
		}()
	} else {
		inserted <- nil
	}
	deadline := time.After(5 * time.Minute)
	for done := 0; done < n; {
		select {
		case <-completed:
			done++
		case <-deadline:
			return fmt.Errorf("%d of %d jobs completed in 5 minutes", done, n)
		}
	}
	took := time.Since(start)
	if drain { // from the first job River started: its producers may start before Start returns
		took = time.Since(time.Unix(0, w.first.Load()))
	}
	if err := <-inserted; err != nil {
		return err
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop the client: %w", err)
	}
	mode := "end to end"
	if drain {
		mode = "drain     "
	}
	fmt.Printf("river      %4d tenants x %2d jobs, a queue each (MaxWorkers 1), 1 client, %s: %6.0f jobs/s (%d jobs in %s; insert %.0f/s; %d out of order)\n",
		tenants, jobs, mode, float64(n)/took.Seconds(), n, took.Round(time.Millisecond), float64(n)/submitted.Seconds(), w.disorder.Load())
	pool.Close()
	if n := w.disorder.Load(); n > 0 {
		return fmt.Errorf("%d jobs ran out of their tenant's order", n)
	}
	return pg.dropDB(db)
}

func queue(i int) string { return fmt.Sprint("t", i) }

// insertAll inserts each tenant's jobs in order from 8 goroutines, round-robin over tenants,
// one insert (one transaction) per job, as webordinary's bench submits.
func insertAll(ctx context.Context, c *river.Client[pgx.Tx], tenants, jobs int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for j := range jobs {
				for i := g; i < tenants; i += 8 {
					if _, err := c.Insert(ctx, args{Tenant: i, Seq: j}, &river.InsertOpts{Queue: queue(i)}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// postgres is a throwaway server on a Unix socket in a temporary directory.
type postgres struct {
	dir, sock string
	as        []string // prefix to run PostgreSQL's binaries as an unprivileged user
}

func startPostgres() (*postgres, error) {
	dir, err := os.MkdirTemp("", "river-bench-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{dir: dir, sock: filepath.Join(dir, "sock")}
	if err := os.Mkdir(pg.sock, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 { // PostgreSQL refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root needs the user postgres to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, pg.sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
		pg.as = []string{"runuser", "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if err := pg.cmd("initdb", "-D", data, "-U", "bench", "--auth=trust", "--no-instructions"); err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses='' -k %s -c max_connections=200 -c fsync=on -c synchronous_commit=on", pg.sock)
	if err := pg.cmd("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		return nil, err
	}
	return pg, nil
}

// pgDirs is where Debian puts PostgreSQL's binaries (not on PATH).
var pgDirs = []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}

func (pg *postgres) cmd(name string, args ...string) error {
	path, err := exec.LookPath(name)
	if err != nil {
		for _, d := range pgDirs {
			if _, serr := os.Stat(filepath.Join(d, name)); serr == nil {
				path, err = filepath.Join(d, name), nil
				break
			}
		}
		if err != nil {
			return fmt.Errorf("%s not found: install PostgreSQL (apt-get install postgresql)", name)
		}
	}
	argv := append(append(append([]string{}, pg.as...), path), args...)
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

func (pg *postgres) url(db string) string {
	return fmt.Sprintf("postgres://bench@/%s?host=%s&pool_max_conns=40", db, pg.sock)
}

func (pg *postgres) createDB(db string) error {
	return pg.cmd("psql", "-h", pg.sock, "-U", "bench", "-d", "postgres", "-qc", "create database "+db)
}

func (pg *postgres) dropDB(db string) error {
	return pg.cmd("psql", "-h", pg.sock, "-U", "bench", "-d", "postgres", "-qc", "drop database "+db)
}

func (pg *postgres) stop() {
	_ = pg.cmd("pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(pg.dir)
}
