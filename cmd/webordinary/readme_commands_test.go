package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCommandsAreAccepted takes every webordinary command the README and docs/ show — in
// shell blocks and in the text — and gives it, as written, to the command it names: each must
// be accepted (its flags, its arguments, and for serve and worker the config file it names),
// stopping before it acts. A placeholder stays as written (PROJECT, …); [--flag] is the flag.
// A config file a command names is made first, as the README does, with `config example`.
// (The commands that act are run for real elsewhere: the demo, mail send, doctor, bench.)
func TestDocsCommandsAreAccepted(t *testing.T) {
	cmds := docsCommands(t)
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in the docs: %q", len(cmds), cmds)
	}
	parseOnly = true
	defer func() { parseOnly = false }()
	for _, c := range cmds {
		args := shellWords(c.line)
		if len(args) < 2 || args[1] == "COMMAND" {
			continue
		}
		makeConfigFiles(t, args)
		run, ok := commands[args[1]]
		if !ok {
			t.Errorf("%s shows `%s`: there is no command %q", c.file, c.line, args[1])
			continue
		}
		err := run(context.Background(), args[2:])
		if err != nil && !errors.Is(err, errParsedOnly) && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s shows `%s`; it is refused: %v", c.file, c.line, err)
		}
	}
}

// docCommand is one command shown in a document.
type docCommand struct{ file, line string }

// docsCommands returns the webordinary commands in README.md and docs/*.md (not the generated
// reference): shell-block lines (continuations joined, comments and redirections cut) and code
// spans in the text.
func docsCommands(t *testing.T) []docCommand {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	block := regexp.MustCompile("(?s)```(?:sh|bash)?\n(.*?)```")
	span := regexp.MustCompile("`(webordinary [^`]+)`")
	var out []docCommand
	for _, f := range files {
		if filepath.Base(f) == "REFERENCE.md" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, text := filepath.Base(f), string(data)
		for _, b := range block.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(strings.ReplaceAll(b[1], "\\\n", " "), "\n") {
				if line = strings.TrimSpace(cutComment(line)); strings.HasPrefix(line, "webordinary ") {
					line, _, _ = strings.Cut(line, " > ")
					out = append(out, docCommand{name, line})
				}
			}
		}
		prose := block.ReplaceAllString(text, "")
		for _, m := range span.FindAllStringSubmatch(strings.ReplaceAll(prose, "\n", " "), -1) {
			out = append(out, docCommand{name, strings.NewReplacer("[", "", "]", "").Replace(m[1])})
		}
	}
	return out
}

// cutComment drops a shell comment (a # outside quotes that starts a word).
func cutComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// shellWords splits line as sh would a simple command: words separated by blanks, with '…'
// and "…" quoting.
func shellWords(line string) []string {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words, in = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// makeConfigFiles writes the config file a command names with --config, as the docs have the
// reader do: `webordinary config example > FILE`.
func makeConfigFiles(t *testing.T, args []string) {
	t.Helper()
	for i, a := range args {
		if a != "--config" || i+1 == len(args) {
			continue
		}
		if _, err := os.Stat(args[i+1]); err == nil {
			continue
		}
		cmd := exec.Command(os.Args[0], "config", "example")
		cmd.Env = append(os.Environ(), "WO_TEST_AS_MAIN=1")
		example, err := cmd.Output()
		if err != nil {
			t.Fatalf("webordinary config example: %v", err)
		}
		if err := os.WriteFile(args[i+1], example, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
