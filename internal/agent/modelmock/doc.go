// Package modelmock is a scripted model API for tests that run the real agent CLIs: it
// speaks Anthropic's Messages API (Claude Code, opencode's anthropic provider) and OpenAI's
// Responses API (Codex), streamed (SSE) or not, and plays what the instruction tells it.
//
// The script is in the owner's instruction, which reaches the model verbatim as the newest
// user message holding a directive:
//
//	[[tool NAME {"json":"input"}]]    a call of the CLI's own tool NAME with that input
//	[[custom NAME free text]]         a Responses API custom (freeform) tool call, e.g. apply_patch
//	[[say TEXT]]                      the final answer (default "Done.")
//	[[fail STATUS N SECONDS]]         answer HTTP STATUS (429, 529...) with retry-after SECONDS
//	                                  to the first N model calls carrying this instruction
//
// The mock is stateless about conversations: the number of tool results after the
// instruction says which tool call comes next; when the calls are used up it answers with the
// final text. A request without tools (a CLI's side call: a title, a quota probe) gets a short
// text answer. Every request is recorded (Requests), so a test can check what the CLI sent:
// that a resumed session carried the earlier conversation, that the key was the platform's.
package modelmock
