package shots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// ErrNoBrowser means no Chromium was found; a job then gets no pictures.
var ErrNoBrowser = errors.New("no headless browser")

// FindBrowser returns the Chromium to run (see capability.Browser); "" when none is installed.
func FindBrowser() string { return capability.Browser() }

// browserFlags make a headless Chromium quiet and deterministic and close every way out but
// the DevTools pipe: no DNS (every name resolves to nothing), a proxy that refuses, no
// background services. The pages' own requests never reach the network stack: the Fetch
// domain pauses each one and the shooter answers it from the preview version.
var browserFlags = []string{
	"--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
	"--disable-default-apps", "--disable-breakpad", "--disable-crash-reporter", "--mute-audio", "--hide-scrollbars",
	"--disable-dev-shm-usage", "--force-color-profile=srgb", "--password-store=basic", "--use-mock-keychain",
	"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
	"--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,site-per-process,IsolateOrigins",
	"--disable-site-isolation-trials",
	"--renderer-process-limit=16",
}

// browser is one running Chromium: the job's pages render in it, each in a browser context
// of its own.
type browser struct {
	proc    *reaper.Process
	c       *conn
	stderr  *limitedBuffer
	profile string // a host directory to remove after, when unjailed
}

// launcher starts browsers for jobs. It remembers whether Chromium's own sandbox works here.
type launcher struct {
	path string
	sb   *sandbox.Sandbox

	mu        sync.Mutex
	noSandbox bool // Chromium's sandbox failed once: start every later browser without it
}

// start starts a browser and waits until it answers, at most until ctx ends. When Chromium
// refuses to start because its own sandbox cannot work here, it retries once without it (see
// the package doc: bubblewrap is then the boundary).
func (l *launcher) start(ctx context.Context) (*browser, error) {
	l.mu.Lock()
	noSandbox := l.noSandbox
	l.mu.Unlock()
	b, err := l.startOnce(ctx, noSandbox)
	if err == nil || noSandbox || !b.sandboxFailed() {
		return b, err
	}
	l.mu.Lock()
	l.noSandbox = true
	l.mu.Unlock()
	return l.startOnce(ctx, true)
}

func (l *launcher) startOnce(ctx context.Context, noSandbox bool) (*browser, error) {
	jail := l.sb.Jail(sandbox.Spec{NoNetwork: true, ReadOnly: fontPaths()})
	b := &browser{stderr: &limitedBuffer{max: 16 << 10}}
	profile := "/tmp/profile" // the jail's private /tmp
	if !jail.Active() {
		dir, err := os.MkdirTemp("", "wo-shots-")
		if err != nil {
			return b, err
		}
		b.profile, profile = dir, dir
	}
	args := append([]string{"--user-data-dir=" + profile}, browserFlags...)
	if noSandbox {
		args = append(args, "--no-sandbox")
	}
	if err := b.launch(jail, l.path, args); err != nil {
		b.cleanup()
		return b, err
	}
	if err := b.ready(ctx); err != nil {
		b.kill()
		return b, fmt.Errorf("start %s: %w: %s", l.path, err, b.stderr.tail())
	}
	return b, nil
}

// launch starts the browser process with the DevTools pipe on its fds 3 and 4. The reaper
// passes only stdin and stdout through, so a shell moves them into place: fd 0 (what we
// write) becomes 3, fd 1 (what we read) becomes 4.
func (b *browser) launch(jail *sandbox.Jail, path string, args []string) error {
	toBrowserR, toBrowserW, err := os.Pipe()
	if err != nil {
		return err
	}
	fromBrowserR, fromBrowserW, err := os.Pipe()
	if err != nil {
		toBrowserR.Close()
		toBrowserW.Close()
		return err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null`, path}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = toBrowserR, fromBrowserW, b.stderr
	cmd.Env = []string{"HOME=/tmp", "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC"}
	if !jail.Active() {
		cmd.Env[0] = "HOME=" + b.profile
	}
	b.proc, err = jail.Start(cmd)
	toBrowserR.Close()
	fromBrowserW.Close()
	if err != nil {
		toBrowserW.Close()
		fromBrowserR.Close()
		return err
	}
	b.c = newConn(fromBrowserR, toBrowserW)
	go func() { <-b.c.done; fromBrowserR.Close() }()
	return nil
}

// ready waits for the browser's first answer.
func (b *browser) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return b.c.call(ctx, "", "Browser.getVersion", nil, nil)
}

// sandboxFailed reports whether the browser died because its own sandbox could not start.
func (b *browser) sandboxFailed() bool {
	s := b.stderr.String()
	return strings.Contains(s, "No usable sandbox") || strings.Contains(s, "--no-sandbox")
}

// close asks the browser to exit and kills it if it does not within a second.
func (b *browser) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = b.c.call(ctx, "", "Browser.close", nil, nil)
	select {
	case <-b.c.done:
	case <-ctx.Done():
	}
	b.kill()
}

// kill ends the browser and everything it started, and removes a host profile.
func (b *browser) kill() {
	if b.c != nil {
		b.c.close()
	}
	if b.proc != nil {
		_ = b.proc.Kill()
		_, _ = b.proc.Wait()
	}
	b.cleanup()
}

func (b *browser) cleanup() {
	if b.profile != "" {
		_ = os.RemoveAll(b.profile)
	}
}

// fontPaths are the font configuration a browser needs to draw text (the sandbox shows /usr,
// not /etc/fonts).
func fontPaths() []string {
	return []string{"/etc/fonts", "/var/cache/fontconfig"}
}

// limitedBuffer keeps the last max bytes written (a browser's stderr).
type limitedBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if over := l.b.Len() - l.max; over > 0 {
		l.b.Next(over)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the last lines of stderr, for an error message.
func (l *limitedBuffer) tail() string {
	s := strings.TrimSpace(l.String())
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}
