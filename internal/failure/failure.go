// Package failure names what kind of failure ended a job, where the kind is known (the
// pipeline's stages, the agent, the build, the sandbox's limits, the egress budget), so the
// places that show it (the owner's reply, the operator's job page, status) read the kind
// instead of guessing it from the error's text. A kind travels inside the error (Mark, or an
// error type with a FailureKind method) and, once the job is over, in its stored result.
package failure

// Kind is what went wrong with a job, in the classes a site owner is told about.
type Kind string

// Kinds. Those the operator must fix say so (Operators).
const (
	Unknown Kind = ""        // the agent or the pipeline failed for a reason not known here
	Site    Kind = "site"    // the site's files could not be fetched
	Agent   Kind = "agent"   // the editing assistant stopped with an error
	Build   Kind = "build"   // the site did not build with the change
	Save    Kind = "save"    // the change could not be saved back to the site (commit, push)
	Timeout Kind = "timeout" // the edit took longer than allowed
	Model   Kind = "model"   // the AI service was unavailable or turned the agent away
	Size    Kind = "size"    // an attachment or the message was too large
	Setup   Kind = "setup"   // the machine lacks something the agent needs: retrying cannot help
	Limit   Kind = "limit"   // the job went over its memory, process, CPU or disk limit
	Budget  Kind = "budget"  // the agent's model calls reached the job's budget
)

// operators are the kinds that are the operator's to fix, not the owner's.
var operators = map[Kind]bool{Site: true, Save: true, Model: true, Setup: true, Limit: true, Budget: true}

// Operators reports whether fixing a failure of kind k is the operator's job (the owner is
// told the operator has been told).
func (k Kind) Operators() bool { return operators[k] }

// Kinded is an error that knows its kind (sandbox.LimitError, for one).
type Kinded interface {
	error
	FailureKind() Kind
}

// marked is an error given a kind by Mark.
type marked struct {
	kind Kind
	err  error
}

func (m *marked) Error() string     { return m.err.Error() }
func (m *marked) Unwrap() error     { return m.err }
func (m *marked) FailureKind() Kind { return m.kind }

// Mark returns err carrying kind; its text and what it wraps are err's. Mark(k, nil) is nil.
// A kind marked deeper in err (nearer the cause) takes precedence over this one: a build
// stopped by a memory limit is a Limit failure, though the build stage marks its errors Build.
func Mark(kind Kind, err error) error {
	if err == nil || kind == Unknown {
		return err
	}
	return &marked{kind: kind, err: err}
}

// Of returns the kind of err: the one nearest its cause (the deepest in its chain; in a
// tree of joined errors, the first branch that has one), or Unknown.
func Of(err error) Kind {
	if err == nil {
		return Unknown
	}
	var deeper Kind
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		deeper = Of(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if deeper = Of(e); deeper != Unknown {
				break
			}
		}
	}
	if deeper != Unknown {
		return deeper
	}
	if k, ok := err.(Kinded); ok {
		return k.FailureKind()
	}
	return Unknown
}
