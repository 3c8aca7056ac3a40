package sandbox

// WithoutCgroups makes s give its jobs rlimits only, as where no control group can be made.
func WithoutCgroups(s *Sandbox) {
	s.cg, s.cgReason = nil, "turned off by a test"
}
