// Package previewtest is the conformance suite for preview.Target implementations: what the
// Target doc comment promises, checked through the target's own way of serving a preview.
//
// A backend runs it from a one-line test:
//
//	func TestConformance(t *testing.T) { previewtest.Run(t, previewtest.Harness{New: newInstance}) }
package previewtest
