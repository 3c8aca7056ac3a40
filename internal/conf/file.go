package conf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// LoadFile sets the keys the TOML file at path names. A key the Set does not know, a value
// of the wrong kind or a file that is not TOML is an error naming the file and the key.
func (s *Set) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the config file: %w", err)
	}
	if err := s.LoadTOML(data); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// LoadTOML sets the keys a TOML document names (LoadFile without the file).
func (s *Set) LoadTOML(data []byte) error {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return fmt.Errorf("line %d column %d: %v", row, col, de)
		}
		return err
	}
	return s.loadTable(s.next(), "", doc)
}

// loadTable sets the keys of one table; prefix is its section ("" at the top).
func (s *Set) loadTable(src int, prefix string, table map[string]any) error {
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	slices.Sort(names) // the first error is the same on every run
	for _, n := range names {
		full := n
		if prefix != "" {
			full = prefix + "." + n
		}
		if sub, ok := table[n].(map[string]any); ok {
			if err := s.loadTable(src, full, sub); err != nil {
				return err
			}
			continue
		}
		if err := s.loadValue(src, full, table[n]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Set) loadValue(src int, name string, v any) error {
	k, err := s.known(name, "file")
	if err != nil {
		if s.isSection(name) {
			return fmt.Errorf("%s is a section: write [%s] and its keys below it", name, name)
		}
		return err
	}
	items, isList := v.([]any)
	if isList != k.list {
		if k.list {
			return fmt.Errorf("%s: want a list, e.g. %s = [\"a\", \"b\"]", name, lastPart(name))
		}
		return fmt.Errorf("%s: want one %s, not a list", name, k.Type())
	}
	if !isList {
		items = []any{v}
	}
	if isList && len(items) == 0 {
		k.reset()
		k.src, k.changed = src, true
	}
	for _, item := range items {
		text, err := scalar(item)
		if err == nil {
			err = k.set(src, text)
		}
		if err != nil {
			return fmt.Errorf("%s = %v: %w", name, tomlValue(item), err)
		}
	}
	return nil
}

// isSection reports whether name is a section of the Set (a table written as a key).
func (s *Set) isSection(name string) bool {
	for _, k := range s.keys {
		if strings.HasPrefix(k.Name, name+".") {
			return true
		}
	}
	return false
}

// scalar is a TOML value as the text a flag would take.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case time.Time, toml.LocalDate, toml.LocalDateTime, toml.LocalTime:
		return "", errors.New("dates and times are not settings here; durations are strings such as \"90s\"")
	}
	return "", fmt.Errorf("unexpected value %T", v)
}

func tomlValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

func lastPart(name string) string { return name[strings.LastIndex(name, ".")+1:] }
