// Package shots takes pictures of what a job changed on its site, for the reply and the job
// page.
//
// After a preview deploy, Shoot compares the manifests of the version the deploy replaced and
// the one it published (preview.Versions), picks the pages whose built HTML changed (a change
// to a style sheet, script or image alone picks the index), at most Config.Pages, most
// relevant first (Pick), renders each at every width (desktop 1280×800, phone 390×844) from
// both versions in headless Chromium, diffs the pictures into boxes (Diff) outlined on the
// after picture (Mark), drops pages that look the same, and stores under Dir/<job>/ the
// full-size PNGs (before, after, marked) for the job page and, for the reply, one picture per
// page and width cropped around the change and scaled to a mail column, in the smaller of PNG
// and JPEG, all of them within Config.MailBytes. Store reads them back (report.json and the
// files it names).
//
// # The browser runs the site's code
//
// A page's scripts are the site's, so the browser is as untrusted as a build and is run like
// one:
//
//   - It starts through the job sandbox (sandbox.Jail.Start: bubblewrap under the reaper's
//     supervisor) as the job's uid, with an empty network namespace, a private /tmp (its
//     profile lives there) and the toolchain and fonts read-only. It sees no workspace, no
//     data directory, no secrets. Killing it kills everything it started.
//   - It has no network at all. The DevTools protocol runs over --remote-debugging-pipe (fds 3
//     and 4, moved there from stdin and stdout because the reaper passes only those), not a
//     socket, and the pages are not fetched from the preview server over TCP: every request a
//     page makes is paused (Fetch domain) and answered in this process from the pinned
//     preview.Version, the same lookup the preview server does. Requests for any other origin
//     are refused; DNS resolves nothing and the proxy refuses, for requests the Fetch domain
//     does not see (WebSockets), and in any case the namespace has no route. Serving from the
//     version rather than the live preview is also what makes "before" possible: the
//     preview server only serves the live version.
//   - Chromium's own sandbox (seccomp and namespaces for renderers) is kept where it works:
//     inside bubblewrap it needs nested user namespaces, which Debian allows. Where it cannot
//     start ("No usable sandbox", or running as root without bubblewrap), the browser is
//     restarted with --no-sandbox and bubblewrap is the boundary: a renderer that escapes
//     Chromium's sandbox is still the job uid in an empty network namespace with nothing
//     writable but its /tmp — what a build may do anyway. Without an active job sandbox
//     (--sandbox off, or auto where bwrap cannot run) the browser runs unjailed: pages still
//     get only the version's files, names resolve to nothing and the proxy refuses, but the
//     host's network is not cut — the same warning as for jobs applies.
//   - Each picture has a time budget (Config.PageBudget); a page whose script never yields is
//     cut off and its tab disposed of, which ends its renderer. Tabs are sites of their own,
//     so such a page never shares a renderer with another picture. The whole job has
//     Config.Budget. A crash, a hang or no browser at all costs only the pictures: Shoot
//     always returns a report, whose Note says what is missing and why.
//
// One browser per job: a tenant's pages never share a browser with another's. A job's
// pictures share Config.Parallel tabs, since opening a tab costs more than a render.
package shots
