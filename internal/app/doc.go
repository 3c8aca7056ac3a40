// Package app is one webordinary process, serve or worker: a Config (every setting, one
// doc comment each, defaults as exported constants), Validate (every check, before anything
// binds a port or touches the disk; errors are *FieldError naming Config fields), New (reads
// the files the Config names, binds nothing) and Run (binds every address at once, opens the
// engine by URL through broker.Open, builds the components and runs them under supervision:
// one failing stops the process, shutdown runs in reverse order of start within a bound).
//
// Each section of Config registers its settings as config keys (Config.Keys; see
// internal/conf) next to its fields and checks them in its validate. cmd/webordinary fills a
// Config from the keys and turns the field names in errors into key or flag names
// (Config.FieldKey).
package app
