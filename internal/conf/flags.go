package conf

import (
	"flag"
	"fmt"
	"strings"
)

// Command binds a Set to one command's flags: --config, --set and the keys that are flags.
// After the flags are parsed, Apply fills the Set from every source in precedence order.
type Command struct {
	set     *Set
	path    string
	assigns []string
	flags   []setting // key flags as given, applied last
}

type setting struct {
	key *Key
	v   string
}

// Bind adds --config, --set and the flag of every key that has one to fs.
func (s *Set) Bind(fs *flag.FlagSet) *Command {
	c := &Command{set: s}
	fs.StringVar(&c.path, "config", "", "TOML file with the settings that are not flags (`webordinary config example` prints one; every key is in docs/REFERENCE.md)")
	fs.Var((*listValue)(&c.assigns), "set", "KEY=VALUE: set one config file key, over the file and the environment (repeatable), e.g. --set worker.lease_ttl=30s")
	for _, k := range s.keys {
		if k.flag != "" {
			fs.Var(&keyFlag{key: k, c: c}, k.flag, k.Usage)
		}
	}
	return c
}

// Path is the config file given with --config (or its environment variable), "" for none.
func (c *Command) Path() string { return c.path }

// CheckArgs refuses the removed flags among args, naming the key that replaced each.
func (c *Command) CheckArgs(args []string) error {
	for i, a := range args {
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, v, hasV := strings.Cut(strings.TrimLeft(a, "-"), "=")
		k := c.set.RemovedFlag(name)
		if k == nil {
			continue
		}
		switch {
		case hasV:
		case k.Type() == "bool":
			v = "true"
		case i+1 < len(args):
			v = args[i+1]
		default:
			v = "VALUE"
		}
		return RemovedError{Flag: name, Key: k, Value: v}
	}
	return nil
}

// RemovedError is a flag that became a config file key.
type RemovedError struct {
	Flag  string
	Key   *Key
	Value string
}

func (e RemovedError) Error() string {
	section, name, ok := strings.Cut(e.Key.Name, ".")
	where := fmt.Sprintf("%s under [%s]", name, section)
	if !ok {
		where = fmt.Sprintf("%s at the top", section)
	}
	return fmt.Sprintf("--%s is no longer a flag: set %s of the config file (--config FILE), or give --set %s=%s; %s still works",
		e.Flag, where, e.Key.Name, e.Value, e.Key.Env())
}

// Apply fills the Set, lowest precedence first: the defaults (already in place), the config
// file, the environment (lookup), --set, then the key flags given.
func (c *Command) Apply(lookup func(string) (string, bool)) error {
	if c.path != "" {
		if err := c.set.LoadFile(c.path); err != nil {
			return err
		}
	}
	if err := c.set.LoadEnv(lookup); err != nil {
		return err
	}
	if err := c.set.Assign(c.assigns); err != nil {
		return err
	}
	src := c.set.next()
	for _, f := range c.flags {
		if err := f.key.set(src, f.v); err != nil {
			return fmt.Errorf("--%s %q: %w", f.key.flag, f.v, err)
		}
	}
	return nil
}

// keyFlag is a key's flag: it records what was given; Apply sets the key in its turn.
type keyFlag struct {
	key *Key
	c   *Command
}

// Key is the key the flag sets (its environment variable is the key's, read by Apply).
func (f *keyFlag) Key() *Key { return f.key }

func (f *keyFlag) String() string {
	if f == nil || f.key == nil {
		return ""
	}
	return f.key.Default
}

func (f *keyFlag) Set(v string) error {
	if err := checkValue(f.key, v); err != nil {
		return err
	}
	f.c.flags = append(f.c.flags, setting{f.key, v})
	return nil
}

func (f *keyFlag) IsBoolFlag() bool { return f != nil && f.key != nil && f.key.Type() == "bool" }

// checkValue checks v for k's kind without keeping it, so a bad flag fails at parse time.
func checkValue(k *Key, v string) error {
	var err error
	switch k.Type() {
	case "bool":
		err = new(boolValue).Set(v)
	case "integer":
		err = new(int64Value).Set(v)
	case "duration":
		err = new(durationValue).Set(v)
	}
	return err
}
