package main

import (
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // the pictures on-images reads
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// heartbeat is how often sleep emits an assistant event.
const heartbeat = 100 * time.Millisecond

// script performs the prompt's lines and remembers what it did.
type script struct {
	dir      string
	session  string
	em       *emitter
	maxTurns int

	done     []string // one item per thing done, for the result text
	edits    int
	denials  []denial
	failure  string // why the run failed; "" if it did not
	subtype  string // the result subtype of the failure
	noResult bool
	addDirs  []string // --add-dir: directories besides dir that may be read
	images   []string // the image files the prompt names (absolute paths)
	looked   bool     // the images were read (by an on-images line)
	blind    bool     // reading them was denied: on-images lines are skipped
}

// run performs each prompt line in turn until one fails or ctx ends.
func (s *script) run(ctx context.Context, prompt string) {
	s.images = imagePaths.FindAllString(prompt, -1)
	for _, line := range strings.Split(prompt, "\n") {
		if ctx.Err() != nil || s.failure != "" {
			return
		}
		if err := s.step(ctx, strings.TrimSpace(line)); err != nil {
			s.fail("error_during_execution", err.Error())
		}
	}
}

func (s *script) fail(subtype, msg string) {
	s.failure, s.subtype = msg, subtype
	s.em.text(s.session, "Error: "+msg)
}

// step performs one line; lines that are not commands are ignored.
func (s *script) step(ctx context.Context, line string) error {
	verb, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch verb {
	case "write", "append":
		return s.writeFile(verb, arg)
	case "replace":
		return s.replace(arg)
	case "delete":
		return s.delete(arg)
	case "say":
		s.em.text(s.session, arg)
		s.done = append(s.done, "said "+strconv.Quote(arg))
	case "sleep", "silent":
		return s.sleep(ctx, verb, arg)
	case "spawn-orphan":
		return s.spawnOrphan(arg)
	case "write-pid":
		return s.writePid(arg)
	case "print-env":
		return s.printEnv(arg)
	case "deny":
		s.deny(arg)
	case "fail":
		s.fail("error_during_execution", firstNonEmpty(arg, "failed as asked"))
	case "api-error":
		return s.apiError(arg)
	case "no-result":
		s.noResult = true
	case "on-images":
		return s.onImages(ctx, arg)
	}
	return nil
}

// imagePaths finds the image files a prompt names: absolute paths ending in .png, .jpg or .jpeg.
var imagePaths = regexp.MustCompile(`/[^\s:'"<>]+\.(?:png|jpe?g)\b`)

// onImages handles "on-images LINE": when the prompt names image files, each must be readable
// and decode as PNG or JPEG (else the run fails); then LINE is performed. When it names none,
// the line is skipped.
func (s *script) onImages(ctx context.Context, line string) error {
	if len(s.images) == 0 {
		return nil
	}
	if !s.looked && !s.blind {
		if err := s.readImages(); err != nil {
			return err
		}
	}
	if s.blind {
		return nil
	}
	return s.step(ctx, line)
}

// denyRead records a Read the permission mode refused: p is outside the working directories.
func (s *script) denyRead(p string) {
	input := map[string]any{"file_path": p}
	id := s.em.toolUse(s.session, "I'll look at "+p+".", "Read", input)
	s.em.toolResult(s.session, id, fmt.Errorf("permission to read %s has been denied: it is outside the working directories", p))
	s.denials = append(s.denials, denial{ToolName: "Read", ToolUseID: id, ToolInput: input})
	s.done = append(s.done, "was denied reading "+p)
	s.blind = true
}

// readable reports whether p is inside the working directory or an --add-dir directory, where
// Claude Code reads without asking (print mode cannot ask: elsewhere is a denial).
func (s *script) readable(p string) bool {
	for _, d := range append([]string{s.dir}, s.addDirs...) {
		if rel, err := filepath.Rel(d, p); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
}

// readImages reads the prompt's images as Claude Code's Read tool would.
func (s *script) readImages() error {
	var sizes []string
	for _, p := range s.images {
		if !s.readable(p) {
			s.denyRead(p)
			return nil
		}
		err := s.tool("I'll look at "+p+".", "Read", map[string]any{"file_path": p}, func() error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			cfg, format, err := image.DecodeConfig(f)
			if err != nil {
				return fmt.Errorf("%s is not an image: %w", p, err)
			}
			sizes = append(sizes, fmt.Sprintf("%s %dx%d", format, cfg.Width, cfg.Height))
			return nil
		})
		if err != nil {
			return err
		}
	}
	s.edits -= len(s.images) // reading is free: only edits cost and count as turns
	s.looked = true
	s.done = append(s.done, fmt.Sprintf("looked at %d pictures (%s)", len(s.images), strings.Join(sizes, ", ")))
	return nil
}

// tool runs do as one tool call: an assistant event announcing it, then its result.
func (s *script) tool(text, name string, input map[string]any, do func() error) error {
	if s.maxTurns > 0 && s.edits+1 >= s.maxTurns {
		s.failure, s.subtype = fmt.Sprintf("Reached maximum number of turns (%d)", s.maxTurns), "error_max_turns"
		return nil
	}
	id := s.em.toolUse(s.session, text, name, input)
	err := do()
	s.em.toolResult(s.session, id, err)
	if err == nil {
		s.edits++
	}
	return err
}

// path resolves p inside the working directory.
func (s *script) path(p string) (string, error) {
	if p == "" {
		return "", errors.New("no path given")
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(s.dir, p)
	}
	rel, err := filepath.Rel(s.dir, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %s is outside the working directory", p)
	}
	return filepath.Clean(abs), nil
}

// writeFile handles "write PATH: TEXT" and "append PATH: TEXT".
func (s *script) writeFile(verb, arg string) error {
	p, text, ok := strings.Cut(arg, ":")
	if !ok {
		return fmt.Errorf("%s needs PATH: TEXT", verb)
	}
	p, text = strings.TrimSpace(p), strings.TrimSpace(text)
	input := map[string]any{"file_path": p, "content": text}
	tool, past := "Write", "wrote "+p
	if verb == "append" {
		tool, past = "Edit", "appended to "+p
	}
	return s.tool(fmt.Sprintf("I'll %s %s.", verb, p), tool, input, func() error {
		if err := s.put(p, text+"\n", verb == "append"); err != nil {
			return err
		}
		s.done = append(s.done, past)
		return nil
	})
}

func (s *script) put(p, content string, appending bool) error {
	abs, err := s.path(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appending {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(abs, flags, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	return errors.Join(err, f.Close())
}

// replace handles "replace OLD with NEW in PATH".
func (s *script) replace(arg string) error {
	i := strings.LastIndex(arg, " in ")
	old, repl, ok := strings.Cut(arg[:max(i, 0)], " with ")
	if i < 0 || !ok {
		return errors.New("replace needs OLD with NEW in PATH")
	}
	p := strings.TrimSpace(arg[i+len(" in "):])
	input := map[string]any{"file_path": p, "old_string": old, "new_string": repl, "replace_all": true}
	return s.tool(fmt.Sprintf("I'll replace %q with %q in %s.", old, repl, p), "Edit", input, func() error {
		if err := s.replaceIn(p, old, repl); err != nil {
			return err
		}
		s.done = append(s.done, "edited "+p)
		return nil
	})
}

func (s *script) replaceIn(p, old, repl string) error {
	abs, err := s.path(p)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	if old == "" || !strings.Contains(string(b), old) {
		return fmt.Errorf("%q not found in %s", old, p)
	}
	return os.WriteFile(abs, []byte(strings.ReplaceAll(string(b), old, repl)), 0o644)
}

func (s *script) delete(p string) error {
	return s.tool("I'll delete "+p+".", "Bash", map[string]any{"command": "rm " + p}, func() error {
		abs, err := s.path(p)
		if err != nil {
			return err
		}
		if err := os.Remove(abs); err != nil {
			return err
		}
		s.done = append(s.done, "deleted "+p)
		return nil
	})
}

// sleep handles "sleep SECONDS" (with a heartbeat event) and "silent SECONDS" (without).
// It returns early, without error, when ctx ends.
func (s *script) sleep(ctx context.Context, verb, arg string) error {
	secs, err := strconv.ParseFloat(arg, 64)
	if err != nil || secs < 0 {
		return fmt.Errorf("%s needs a number of seconds, not %q", verb, arg)
	}
	d := time.Duration(secs * float64(time.Second))
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			s.done = append(s.done, fmt.Sprintf("%s for %ss", verb, arg))
			return nil
		case <-tick.C:
			if verb == "sleep" {
				s.em.text(s.session, fmt.Sprintf("Still working (%.1fs of %ss).", time.Since(start).Seconds(), arg))
			}
		}
	}
}

// spawnOrphan starts `sleep 300` in a new session (as `setsid sleep 300` would) and leaves it.
func (s *script) spawnOrphan(pidfile string) error {
	return s.tool("I'll start a background process.", "Bash", map[string]any{"command": "setsid sleep 300 &"}, func() error {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		pid := cmd.Process.Pid
		_ = cmd.Process.Release()
		s.done = append(s.done, fmt.Sprintf("spawned pid %d", pid))
		return s.put(pidfile, strconv.Itoa(pid)+"\n", false)
	})
}

func (s *script) writePid(pidfile string) error {
	return s.tool("I'll note my pid.", "Bash", map[string]any{"command": "echo $$ > " + pidfile}, func() error {
		return s.put(pidfile, strconv.Itoa(os.Getpid())+"\n", false)
	})
}

func (s *script) printEnv(p string) error {
	return s.tool("I'll save the environment.", "Bash", map[string]any{"command": "env > " + p}, func() error {
		env := os.Environ()
		slices.Sort(env)
		if err := s.put(p, strings.Join(env, "\n")+"\n", false); err != nil {
			return err
		}
		s.done = append(s.done, "printed the environment to "+p)
		return nil
	})
}

// deny records a Bash call the permission mode refused.
func (s *script) deny(command string) {
	command = firstNonEmpty(command, "rm -rf /")
	input := map[string]any{"command": command}
	id := s.em.toolUse(s.session, "I'll run "+command+".", "Bash", input)
	s.em.toolResult(s.session, id, fmt.Errorf("permission to use Bash with command %s has been denied", command))
	s.denials = append(s.denials, denial{ToolName: "Bash", ToolUseID: id, ToolInput: input})
	s.done = append(s.done, "was denied "+command)
}

// result is the final event of the run.
func (s *script) result(ctx context.Context, sess *sessionFile, turn int, d time.Duration) resultEvent {
	r := resultEvent{SessionID: s.session, NumTurns: 1 + s.edits, TotalCostUSD: 0.01 * float64(s.edits),
		PermissionDenials: s.denials, Duration: d, DurationAPIMS: d.Milliseconds()}
	switch {
	case ctx.Err() != nil:
		r.IsError, r.Subtype, r.TerminalReason = true, "error_during_execution", "aborted_tools"
		r.Result = "Request interrupted by user"
	case s.failure != "":
		r.IsError, r.Subtype, r.Result = true, s.subtype, s.failure
	default:
		r.Subtype, r.Result = "success", s.summary(sess, turn)
	}
	return r
}

// summary is the one-line result text, e.g.
// "resumed session X (turn 2): wrote a.txt, edited b.txt".
func (s *script) summary(sess *sessionFile, turn int) string {
	how := "started"
	if sess.resumed() {
		how = "resumed"
	}
	did := "nothing to do"
	if len(s.done) > 0 {
		did = strings.Join(s.done, ", ")
	}
	return fmt.Sprintf("%s session %s (turn %d): %s", how, s.session, turn, did)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// apiError handles "api-error STATUS RETRY_AFTER TIMES": the first TIMES runs that reach this
// line (counted in $CLAUDE_CONFIG_DIR/fakeclaude/api-errors) stop with the model API's error
// STATUS (429 rate limited, 529 overloaded, ...), saying "retry-after: RETRY_AFTER" (seconds);
// later runs go on. Every run that reaches it appends its start time (RFC 3339, nanoseconds) to
// $CLAUDE_CONFIG_DIR/fakeclaude/api-error-runs.
func (s *script) apiError(arg string) error {
	var status, retryAfter, times int
	if _, err := fmt.Sscanf(arg, "%d %d %d", &status, &retryAfter, &times); err != nil {
		return errors.New("api-error needs STATUS RETRY_AFTER TIMES")
	}
	dir := filepath.Join(os.Getenv("CLAUDE_CONFIG_DIR"), "fakeclaude")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	runs, err := os.OpenFile(filepath.Join(dir, "api-error-runs"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(runs, started.Format(time.RFC3339Nano))
	if err = errors.Join(err, runs.Close()); err != nil {
		return err
	}
	count := filepath.Join(dir, "api-errors")
	b, _ := os.ReadFile(count)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if n >= times {
		return nil
	}
	if err := os.WriteFile(count, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		return err
	}
	kind, msg := "rate_limit_error", "This request would exceed your rate limit"
	if status == 529 {
		kind, msg = "overloaded_error", "Overloaded"
	}
	s.fail("error_during_execution", fmt.Sprintf(`API Error: %d {"type":"error","error":{"type":%q,"message":%q}} (retry-after: %d)`,
		status, kind, msg, retryAfter))
	return nil
}
