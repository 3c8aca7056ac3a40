package demo_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/webordinary/webordinary/internal/demo"
)

func ExampleEdit() {
	dir, _ := os.MkdirTemp("", "demo-site-*")
	defer os.RemoveAll(dir)
	_ = demo.WriteSampleSite(dir)

	summary, changed, err := demo.Edit(dir, demo.SampleInstruction)
	fmt.Println(summary)
	fmt.Println(changed, err)

	_, _, err = demo.Edit(dir, "Make it pop!")
	fmt.Println(errors.Is(err, demo.ErrNotUnderstood))
	// Output:
	// Demo agent (literal edits, not AI): made the header (h1) green in style.css; added a paragraph to index.html: "Fresh bread every morning."
	// [index.html style.css] <nil>
	// true
}
