// Command fakeclaude behaves like `claude -p --output-format stream-json --verbose` closely
// enough for tests: the agent adapter's parsing, session, resume, interrupt and watchdog paths
// run against a real process, and the edit pipeline's tests get real edits in a real working
// tree without a model. Build it with agenttest.BuildFakeClaude.
//
// # Command line
//
// It parses claude's flags: -p/--print, --output-format (stream-json, json or text),
// --verbose, --permission-mode, --model, --max-turns, --max-budget-usd,
// --append-system-prompt, --system-prompt, --session-id, -r/--resume, --add-dir (repeatable)
// (as "--flag value" or "--flag=value"). Unknown flags are ignored with a warning on stderr. Like claude,
// stream-json output in print mode requires --verbose. The prompt is a positional argument or
// stdin. CLAUDE_CONFIG_DIR must be set.
//
// # Sessions
//
// Sessions are files under $CLAUDE_CONFIG_DIR/fakeclaude/sessions. --session-id X (a UUID)
// creates session X and fails (error result, exit 1) if it exists; --resume X continues
// session X and fails ("No conversation found with session ID: X", exit 1) if it does not;
// with neither, a new session with a random id is created. Each run is recorded in the
// session file (prompt, system prompt, model) and numbered: the result text starts with
// "started session X (turn 1)" or "resumed session X (turn N)".
//
// # Prompt lines
//
// Every prompt line that matches one of these is performed, in order; other lines are
// ignored. Paths are relative to the working directory and may not leave it.
//
//	write PATH: TEXT          create or overwrite PATH with TEXT and a newline
//	append PATH: TEXT         append TEXT and a newline to PATH
//	replace OLD with NEW in PATH
//	                          replace every OLD in PATH with NEW (error if OLD is absent)
//	delete PATH               remove PATH
//	say TEXT                  an assistant message; included in the result text
//	sleep SECONDS             sleep, emitting an assistant event every 100ms
//	silent SECONDS            sleep without any output
//	spawn-orphan PIDFILE      start `sleep 300` in a new session, write its pid to PIDFILE
//	write-pid PIDFILE         write fakeclaude's own pid to PIDFILE
//	print-env PATH            write the environment to PATH, one VAR=value a line
//	deny [COMMAND]            a denied Bash call: the result has a permission_denials entry
//	fail [MESSAGE]            stop; the result has is_error true
//	api-error STATUS RETRY_AFTER TIMES
//	                          the first TIMES runs reaching this line stop like fail with the
//	                          model API's error: "API Error: STATUS {…} (retry-after: SECONDS)";
//	                          each run reaching it appends its start time to
//	                          $CLAUDE_CONFIG_DIR/fakeclaude/api-error-runs
//	no-result                 exit 0 at the end without printing the result event
//	on-images LINE            when the prompt names image files (absolute paths ending in
//	                          .png, .jpg or .jpeg), read each (a Read tool call; unreadable or
//	                          not PNG/JPEG: the run fails, like a failed edit), then perform
//	                          LINE; when it names none, skip the line. An image outside the
//	                          working directory and every --add-dir is a denied Read (print mode
//	                          cannot ask; the result lists it in permission_denials) and the
//	                          run's on-images lines are skipped
//
// Each edit emits an assistant event with a text and a tool_use block and a user event with
// the tool_result, and costs $0.01. The final result event carries session_id,
// total_cost_usd, num_turns (1 + edits), duration_ms, permission_denials and a one-line
// summary in "result". A failed edit (a path outside the working directory, a replace whose
// OLD is absent) ends the run like fail.
//
// # Signals
//
// SIGINT stops the run: the result has is_error true and terminal_reason "aborted_tools",
// and the exit status is 0. SIGTERM exits with status 143 at once, leaving any spawned
// processes behind — as claude does.
package main
