// Package demo holds the quick-start pieces: a sample site to edit, sample mail, and the
// built-in demo agent, which performs literal edits so that a newcomer without an AI coding
// agent installed can see the whole flow (mail in, edit on a branch, build, preview, reply).
//
// The demo agent is not AI and never says it is: its summary, the line the owner's reply
// quotes, always starts with "Demo agent (literal edits, not AI): " (SummaryPrefix). It
// understands a small language, refuses everything else with the list of what it can do, and
// never pretends.
//
// # The edit language
//
// One edit per sentence or line; several edits in one sentence may be joined with "and",
// "then" or a comma. Words are case-insensitive; polite filler ("please", "could you",
// "thanks"), greetings, sign-offs, quoted reply lines (">") and a signature after "-- " are
// ignored. Values may be quoted with "…", “…”, '…' or ‘…’; quote a value that contains a full
// stop, "?", "!" or ";" followed by a space, or "and" followed by another edit ("… and make
// the …"). Text after "saying" runs to the end of the sentence, final full stop included.
//
//	replace OLD with NEW              in every .html, .htm, .md, .css, .txt and .astro file of the site
//	replace OLD with NEW in FILE      in one file, e.g. "in about.html"
//	set the title to TEXT             the <title> of index.html, and its first <h1> when that
//	                                  showed the old title
//	set the heading to TEXT           the first <h1> of index.html (also "change the header
//	                                  to TEXT"; an unquoted colour name there sets the colour)
//	make the header COLOUR            the text colour of h1 in the site's stylesheet
//	make the background COLOUR        the page (body) background in the site's stylesheet
//	add a paragraph saying TEXT       a new <p> at the end of index.html's <main> (or <body>)
//	add a page called NAME            NAME.html in index.html's layout, linked from its <nav>
//
// COLOUR is a CSS colour name (green, navy, light blue) or a hex code (#2e7d32); it is set on
// the last top-level rule for h1 (or body) in the first local stylesheet index.html links to,
// and a rule is added when there is none (a style.css, linked from index.html, when the page
// links no stylesheet). In HTML,
// replace only changes text, never tags or attributes, and matches case-sensitively first,
// then ignoring case. New text is HTML-escaped.
//
// # Safety
//
// Edits only touch regular files inside the site directory, opened through an os.Root:
// paths that leave the directory, hidden paths (.git) and symbolic links are refused. An
// instruction is applied all or nothing: every edit is checked and made in memory first, and
// files are written only when all of them succeeded.
//
// # Agent protocol
//
// RunAgent is the body of the hidden `webordinary demo-agent` subcommand, run through the
// agent package's "command" kind: it reads the instruction on stdin, prints one line per
// edit and a final summary line, and exits 0 when every edit was made, 1 otherwise.
package demo
