// Package conf is the configuration of serve and worker: keys that the packages owning them
// register in named sections, each with its default, its meaning and its environment
// variable, like flags. A Set is filled, lowest precedence first, from the registered
// defaults, a TOML file, the environment, --set KEY=VALUE and the few keys that are also
// command-line flags; the reference and the example file are generated from the same keys.
//
// A key is added by one registration line next to the field it sets (see app's keys
// methods); its checks belong in that section's validate.
package conf

import (
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Set is the keys of one command's configuration.
type Set struct {
	keys   []*Key
	byName map[string]*Key
	// source counts the sources applied so far: a list key set by a new source starts over.
	source int
}

// NewSet returns an empty Set.
func NewSet() *Set { return &Set{byName: map[string]*Key{}} }

// Key is one setting: section.name in the file.
type Key struct {
	// Name is the key's full name, "section.name" (or "name" at the top level).
	Name string
	// Usage says what the key means.
	Usage string
	// Default is the key's default as text ("" when empty).
	Default string

	env     string
	flag    string // the command-line flag that also sets it
	was     string // the removed flag it replaced
	value   flag.Value
	ptr     any
	list    bool
	reset   func()
	changed bool
	src     int
}

// Env is the environment variable that sets the key: WO_<FLAG> for a key that is or was a
// flag (so the variables of the old flags keep working), else WO_<SECTION>_<NAME>.
func (k *Key) Env() string {
	if k.env != "" {
		return k.env
	}
	if f := k.flagName(); f != "" {
		return EnvName(f)
	}
	return EnvName(strings.ReplaceAll(k.Name, ".", "_"))
}

func (k *Key) flagName() string {
	if k.flag != "" {
		return k.flag
	}
	return k.was
}

// Flag makes the key also a command-line flag, --name.
func (k *Key) Flag(name string) *Key {
	k.flag = name
	return k
}

// FlagName is the key's command-line flag, "" when it has none.
func (k *Key) FlagName() string { return k.flag }

// Was records the command-line flag the key replaced: giving it is an error naming the key.
func (k *Key) Was(flagName string) *Key {
	k.was = flagName
	return k
}

// WasFlag is the removed flag the key replaced, "" for none.
func (k *Key) WasFlag() string { return k.was }

// WithEnv sets the key's environment variable explicitly.
func (k *Key) WithEnv(name string) *Key {
	k.env = name
	return k
}

// IsList reports whether the key takes several values (a TOML array; --set repeated).
func (k *Key) IsList() bool { return k.list }

// Type names the key's kind of value for the reference.
func (k *Key) Type() string {
	switch k.ptr.(type) {
	case *bool:
		return "bool"
	case *int, *int64:
		return "integer"
	case *time.Duration:
		return "duration"
	case *[]string:
		return "list"
	}
	return "string"
}

// set applies one value from source src; a list key set by a new source drops the values
// of the sources before.
func (k *Key) set(src int, v string) error {
	if k.list && k.src != src {
		k.reset()
	}
	k.src, k.changed = src, true
	return k.value.Set(v)
}

// Section registers keys under one name ("" for the top level).
type Section struct {
	set  *Set
	name string
}

// Section returns the section name of s.
func (s *Set) Section(name string) *Section { return &Section{set: s, name: name} }

func (s *Section) add(name, usage string, v flag.Value, ptr any) *Key {
	full := name
	if s.name != "" {
		full = s.name + "." + name
	}
	if _, dup := s.set.byName[full]; dup {
		panic("conf: key " + full + " registered twice")
	}
	k := &Key{Name: full, Usage: usage, Default: v.String(), value: v, ptr: ptr}
	s.set.keys = append(s.set.keys, k)
	s.set.byName[full] = k
	return k
}

// String registers a string key with default def.
func (s *Section) String(p *string, name, def, usage string) *Key {
	*p = def
	return s.add(name, usage, (*stringValue)(p), p)
}

// Int registers an integer key with default def.
func (s *Section) Int(p *int, name string, def int, usage string) *Key {
	*p = def
	return s.add(name, usage, (*intValue)(p), p)
}

// Int64 registers a 64-bit integer key with default def.
func (s *Section) Int64(p *int64, name string, def int64, usage string) *Key {
	*p = def
	return s.add(name, usage, (*int64Value)(p), p)
}

// Bool registers a boolean key with default def.
func (s *Section) Bool(p *bool, name string, def bool, usage string) *Key {
	*p = def
	return s.add(name, usage, (*boolValue)(p), p)
}

// Duration registers a duration key ("90s", "15m") with default def.
func (s *Section) Duration(p *time.Duration, name string, def time.Duration, usage string) *Key {
	*p = def
	return s.add(name, usage, (*durationValue)(p), p)
}

// List registers a list of strings with default def: an array in the file, one item per
// --set, one item in its environment variable.
func (s *Section) List(p *[]string, name string, def []string, usage string) *Key {
	*p = slices.Clone(def)
	k := s.add(name, usage, (*listValue)(p), p)
	k.list, k.reset = true, func() { *p = nil }
	return k
}

// Keys returns every key in the order registered.
func (s *Set) Keys() []*Key { return s.keys }

// Lookup returns the key named name, or nil.
func (s *Set) Lookup(name string) *Key { return s.byName[name] }

// ByPointer returns the key that sets *p, or nil. p may be of a named type whose key was
// registered through a conversion, such as (*string)(&mode).
func (s *Set) ByPointer(p any) *Key {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer {
		return nil
	}
	for _, k := range s.keys {
		kv := reflect.ValueOf(k.ptr)
		if kv.Pointer() == v.Pointer() && kv.Elem().Kind() == v.Elem().Kind() {
			return k
		}
	}
	return nil
}

// Changed reports whether any source set the key named name.
func (s *Set) Changed(name string) bool {
	k := s.byName[name]
	return k != nil && k.changed
}

// next starts a new source.
func (s *Set) next() int {
	s.source++
	return s.source
}

// LoadEnv sets every key whose environment variable lookup finds.
func (s *Set) LoadEnv(lookup func(string) (string, bool)) error {
	src := s.next()
	for _, k := range s.keys {
		if v, ok := lookup(k.Env()); ok {
			if err := k.set(src, v); err != nil {
				return fmt.Errorf("%s=%q (key %s): %w", k.Env(), v, k.Name, err)
			}
		}
	}
	return nil
}

// Assign applies KEY=VALUE items (--set), in order; a list key given several times gets
// every value.
func (s *Set) Assign(items []string) error {
	src := s.next()
	for _, item := range items {
		name, v, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("--set %q: want KEY=VALUE, e.g. --set worker.lease_ttl=30s", item)
		}
		k, err := s.known(strings.TrimSpace(name), "--set")
		if err != nil {
			return err
		}
		if err := k.set(src, v); err != nil {
			return fmt.Errorf("--set %s=%q: %w", k.Name, v, err)
		}
	}
	return nil
}

// known returns the key named name, or an error saying where the keys are listed.
func (s *Set) known(name, where string) (*Key, error) {
	if k := s.byName[name]; k != nil {
		return k, nil
	}
	hint := ""
	if near := s.nearest(name); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	return nil, fmt.Errorf("%s: unknown key %q%s: `webordinary config keys` lists every key", where, name, hint)
}

// nearest is the key whose last part equals name's, or that name's last part begins, if one.
func (s *Set) nearest(name string) string {
	last := name[strings.LastIndex(name, ".")+1:]
	for _, k := range s.keys {
		kl := k.Name[strings.LastIndex(k.Name, ".")+1:]
		if kl == last || strings.ReplaceAll(kl, "_", "-") == last || k.flagName() == last {
			return k.Name
		}
	}
	return ""
}

// RemovedFlag returns the key that replaced the removed flag name, or nil.
func (s *Set) RemovedFlag(name string) *Key {
	for _, k := range s.keys {
		if k.was == name {
			return k
		}
	}
	return nil
}

type stringValue string

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string     { return string(*v) }

type intValue int

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("want an integer")
	}
	*v = intValue(n)
	return nil
}
func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

type int64Value int64

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return fmt.Errorf("want an integer")
	}
	*v = int64Value(n)
	return nil
}
func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }

type boolValue bool

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*v = boolValue(b)
	return nil
}
func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

type durationValue time.Duration

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want a duration such as 90s, 15m or 1h30m")
	}
	*v = durationValue(d)
	return nil
}
func (v *durationValue) String() string { return time.Duration(*v).String() }

type listValue []string

func (v *listValue) Set(s string) error { *v = append(*v, s); return nil }
func (v *listValue) String() string     { return strings.Join(*v, ",") }

// EnvName is the environment variable of the flag --name: WO_ and the name in capitals.
func EnvName(flagName string) string {
	return "WO_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
