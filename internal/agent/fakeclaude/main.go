package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// started is when this run began.
var started = time.Now()

func main() {
	os.Exit(run())
}

// run is one fakeclaude invocation; it returns the exit status.
func run() int {
	opts, err := parseArgs(os.Args[1:], os.Stderr)
	if err == nil {
		err = opts.check()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	prompt, err := readPrompt(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	ctx, stop := handleSignals()
	defer stop()
	return session(ctx, opts, prompt, newEmitter(os.Stdout, opts.outputFormat))
}

func readPrompt(opts options) (string, error) {
	if opts.prompt != "" {
		return opts.prompt, nil
	}
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return "", fmt.Errorf("read prompt from stdin: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", errors.New("Input must be provided either through stdin or as a prompt argument when using --print")
	}
	return string(b), nil
}

// handleSignals returns a context cancelled by SIGINT; SIGTERM exits with status 143 at once.
func handleSignals() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM {
				os.Exit(143)
			}
			cancel()
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// session runs prompt in the session opts asks for and prints the events.
func session(ctx context.Context, opts options, prompt string, em *emitter) int {
	start := time.Now()
	store := sessionStore{dir: os.Getenv("CLAUDE_CONFIG_DIR")}
	sess, err := store.open(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		em.result(resultEvent{SessionID: opts.requestedSession(), IsError: true,
			Subtype: "error_during_execution", Result: err.Error(), Duration: time.Since(start)})
		return 1
	}
	cwd, _ := os.Getwd()
	em.init(sess.ID, cwd, opts)
	sc := &script{dir: cwd, em: em, session: sess.ID, maxTurns: opts.maxTurns, addDirs: opts.addDirs}
	sc.run(ctx, prompt)
	turn := sess.record(runRecord{Prompt: prompt, SystemPrompt: opts.systemPrompt, Model: opts.model, Dir: cwd})
	if err := store.save(sess); err != nil {
		fmt.Fprintf(os.Stderr, "fakeclaude: save session: %v\n", err)
	}
	if sc.noResult && ctx.Err() == nil && sc.failure == "" {
		return 0
	}
	em.result(sc.result(ctx, sess, turn, time.Since(start)))
	if sc.failure != "" && ctx.Err() == nil {
		return 1 // like claude after an error result; an interrupted run exits 0
	}
	return 0
}
