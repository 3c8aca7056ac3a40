// Package trimmer finds the reply in an email body: it is github.com/dimiro1/reply (commit
// d0136a4c9e21, 2020-03-15), itself a line-by-line Go port of discourse's email_reply_trimmer
// (github.com/discourse/email_reply_trimmer), copied into our tree under its MIT licence (LICENSE
// in this directory: Copyright (c) Discourse, Copyright (c) Claudemiro).
//
// What changed from the original, none of it in behaviour except that a cleanup pattern that
// times out leaves the text as it was instead of emptying it (TestSameAsDimiro1 and
// FuzzSameAsDimiro1 compare the two on every corpus body and on generated ones):
//
//   - every pattern is compiled once, at package initialisation, instead of per call and per line;
//   - each regexp2 pattern carries the literals a match cannot do without and where a match can
//     start (a line's first word, four digits), so the backtracking engine runs, anchored, only
//     where a match could start;
//   - the pattern over the line classes ("tqqbe…") uses Go's regexp (the class string is ASCII);
//   - each pattern has its own one-second match timeout instead of setting regexp2's global.
//
// The package's only entry point is FromText. Package reply runs it as its first pass.
package trimmer
