// Package egress is the only way out of a job's network: an HTTP proxy run by the platform
// that a sandboxed job reaches through a UNIX socket bound into its jail (see sandbox.Egress,
// whose bridge turns the socket into 127.0.0.1:Port inside the job's network namespace).
//
// Each job gets a Session with a socket of its own, so the proxy knows which job every
// connection belongs to. A session
//
//   - tunnels HTTPS (CONNECT host:port) and forwards plain HTTP (absolute-URI requests) to the
//     hosts its Policy allows: the npm registry, the git host of the project's remote, the
//     project's --egress-allow hosts. A name is resolved once, every address checked, and the
//     checked address dialled (no DNS rebinding): loopback, private, link-local and other
//     non-public addresses are refused unless the exact host:port is allowed on purpose
//     (Policy.Private). Refusals are counted per target (Session.Denied) for the job's report;
//   - serves the model APIs under /anthropic/ and /openai/ in plain HTTP: the agent's base URL
//     points there and its API key is the session's Token, which the proxy swaps for the
//     platform's real credential before forwarding over HTTPS to the real endpoint. The real
//     key never enters the jail, and the token is worthless once the session is closed. The
//     tokens the model API reports in its responses are counted (Session.Usage).
//
// A session serves at most 256 connections at a time, and closing it cuts them all.
package egress
