package conf

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// sections returns the section names in the order of their first key ("" first).
func (s *Set) sections() []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range s.keys {
		sec := k.section()
		if !seen[sec] {
			seen[sec] = true
			out = append(out, sec)
		}
	}
	return out
}

func (k *Key) section() string {
	sec, _, ok := strings.Cut(k.Name, ".")
	if !ok {
		return ""
	}
	return sec
}

// WriteExample writes a TOML file that sets every key to its default, each commented out
// under its meaning, section by section; notes, when set, says what a section is for.
func (s *Set) WriteExample(w io.Writer, notes map[string]string) error {
	var b strings.Builder
	for i, sec := range s.sections() {
		if i > 0 || sec != "" {
			b.WriteString("\n")
		}
		if sec != "" {
			if n := notes[sec]; n != "" {
				fmt.Fprintf(&b, "# %s\n", n)
			}
			fmt.Fprintf(&b, "[%s]\n", sec)
		}
		for _, k := range s.keys {
			if k.section() != sec {
				continue
			}
			fmt.Fprintf(&b, "\n%s# (%s%s)\n# %s = %s\n", comment(k.Usage), k.Env(), flagNote(k), lastPart(k.Name), k.tomlDefault())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func flagNote(k *Key) string {
	switch {
	case k.flag != "":
		return ", or --" + k.flag
	case k.was != "":
		return "; was --" + k.was
	}
	return ""
}

// tomlDefault is the key's default as a TOML value.
func (k *Key) tomlDefault() string {
	switch k.Type() {
	case "bool", "integer":
		return k.Default
	case "list":
		items := *(k.ptr.(*[]string))
		q := make([]string, len(items))
		for i, it := range items {
			q[i] = strconv.Quote(it)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return strconv.Quote(k.Default)
}

// WriteReference writes every key as Markdown: a table per section with its default, its
// environment variable and its meaning.
func (s *Set) WriteReference(w io.Writer, notes map[string]string) error {
	var b strings.Builder
	for _, sec := range s.sections() {
		title := "top level"
		if sec != "" {
			title = "[" + sec + "]"
		}
		fmt.Fprintf(&b, "#### %s\n\n", title)
		if n := notes[sec]; n != "" {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
		b.WriteString("| key | default | environment | meaning |\n|---|---|---|---|\n")
		for _, k := range s.keys {
			if k.section() != sec {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | `%s`%s | %s |\n", lastPart(k.Name), cell(k.tomlDefault()), k.Env(), flagCell(k), escapeCell(k.Usage))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(def string) string {
	if def == `""` || def == "[]" {
		return ""
	}
	return "`" + escapeCell(def) + "`"
}

func flagCell(k *Key) string {
	switch {
	case k.flag != "":
		return ", `--" + k.flag + "`"
	case k.was != "":
		return " (was `--" + k.was + "`)"
	}
	return ""
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// WriteKeys writes every key as plain text: name, default, variable (and flag), meaning.
func (s *Set) WriteKeys(w io.Writer) error {
	var b strings.Builder
	for _, k := range s.keys {
		fmt.Fprintf(&b, "%s = %s  [%s%s]\n    %s\n", k.Name, k.tomlDefault(), k.Env(), flagNote(k), k.Usage)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// comment is text as TOML comment lines of at most about 90 columns.
func comment(text string) string {
	var b, line strings.Builder
	for _, word := range strings.Fields(text) {
		if line.Len() > 0 && line.Len()+1+len(word) > 88 {
			fmt.Fprintf(&b, "# %s\n", line.String())
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(word)
	}
	fmt.Fprintf(&b, "# %s\n", line.String())
	return b.String()
}
