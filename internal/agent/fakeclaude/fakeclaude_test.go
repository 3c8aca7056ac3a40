package main

import (
	"io"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--unknown", "value",
		"--other=x", "--model=m", "--max-turns", "3", "--append-system-prompt=- rule", "-r", "id",
		"--add-dir", "/a", "--add-dir=/b", "do it"}
	o, err := parseArgs(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := options{print: true, verbose: true, outputFormat: "stream-json", model: "m", maxTurns: 3,
		systemPrompt: "- rule", resume: "id", prompt: "do it", addDirs: []string{"/a", "/b"}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("options = %+v\nwant      %+v", o, want)
	}
	if _, err := parseArgs([]string{"--max-turns", "many"}, io.Discard); err == nil {
		t.Error("--max-turns many: no error")
	}
}

func TestPathStaysInside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &script{dir: dir}
	for _, p := range []string{"a.txt", "sub/b.txt", "sub/../c.txt", filepath.Join(dir, "d.txt")} {
		if _, err := s.path(p); err != nil {
			t.Errorf("path(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", ".", "..", "../x", "sub/../../x", "/etc/passwd", dir + "x/y"} {
		if got, err := s.path(p); err == nil {
			t.Errorf("path(%q) = %q, want an error", p, got)
		}
	}
}
