package demo

import (
	"errors"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	header, background, text := targets["header"], targets["background"], targets["text"]
	tests := []struct {
		name        string
		instruction string
		want        []edit
	}{
		{"sample", SampleInstruction, []edit{colourEdit{header, "green"}, paragraphEdit{"Fresh bread every morning."}}},
		{"and inside a value", "replace salt and pepper with herbs", []edit{replaceEdit{old: "salt and pepper", new: "herbs"}}},
		{"quoted value keeps stops and verbs", `add a paragraph saying "We bake. And make the cakes."`, []edit{paragraphEdit{"We bake. And make the cakes."}}},
		{"and plus a non-edit stays in the value", "add a paragraph saying Bread, and make your own pizza", []edit{paragraphEdit{"Bread, and make your own pizza"}}},
		{"semicolon", "Set the title to A; set the heading to B", []edit{titleEdit{"A"}, headingEdit{"B"}}},
		{"comma then", "make the header green, then make the background white", []edit{colourEdit{header, "green"}, colourEdit{background, "white"}}},
		{"polite question with curly quotes", "Could you please replace “Open” with ‘Closed’?", []edit{replaceEdit{old: "Open", new: "Closed"}}},
		{"swap", "swap cake for pie", []edit{replaceEdit{old: "cake", new: "pie"}}},
		{"change quoted", `change "Rye" to "Spelt" in about.html`, []edit{replaceEdit{old: "Rye", new: "Spelt", file: "about.html"}}},
		{"quoted file", "replace A with B in `sub/page.md`", []edit{replaceEdit{old: "A", new: "B", file: "sub/page.md"}}},
		{"paragraph with colon", "add a paragraph: We're open!", []edit{paragraphEdit{"We're open!"}}},
		{"greeting in the sentence", "Hello Ann, please set the heading to Hi.", []edit{headingEdit{"Hi"}}},
		{"title say", "make the title say Bakery", []edit{titleEdit{"Bakery"}}},
		{"heading say", "make the header say Welcome", []edit{headingEdit{"Welcome"}}},
		{"quoted colour is text", `change the header to "Green"`, []edit{headingEdit{"Green"}}},
		{"turn background", "turn the background light blue", []edit{colourEdit{background, "lightblue"}}},
		{"background colour hex", "set the background colour to #FFF", []edit{colourEdit{background, "#fff"}}},
		{"text colour", "colour the text dark grey", []edit{colourEdit{text, "darkgrey"}}},
		{"header text colour", "make the header text a navy colour", []edit{colourEdit{header, "navy"}}},
		{"page named", "add a page named “Opening hours”", []edit{pageEdit{name: "Opening hours", file: "opening-hours.html"}}},
		{"page non-ascii", "add a page called Über uns!", []edit{pageEdit{name: "Über uns", file: "über-uns.html"}}},
		{"page lower case", "create a page called menu.html", []edit{pageEdit{name: "Menu", file: "menu.html"}}},
		{"quoted reply and signature", "> make the header blue\nmake the header red\n--\nadd a page called X", []edit{colourEdit{header, "red"}}},
		{"attachments list", "make the header red\n\nAttached files (already saved in the repository):\n- assets/a.png\n", []edit{colourEdit{header, "red"}}},
		{"sign-off then more edits", "Cheers!\nmake the header red", []edit{colourEdit{header, "red"}}},
		{"sign-off ends", "make the header red\nThanks,\nAnn Baker\nSunrise Bakery", []edit{colourEdit{header, "red"}}},
		{"crlf and blank lines", "make the header red\r\n\r\n  please.\r\n", []edit{colourEdit{header, "red"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clauses, err := parse(tt.instruction)
			if err != nil {
				t.Fatal(err)
			}
			var got []edit
			for _, c := range clauses {
				got = append(got, c.edit)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parse(%q) =\n %#v\nwant\n %#v", tt.instruction, got, tt.want)
			}
		})
	}
}

func TestParseRefused(t *testing.T) {
	t.Parallel()
	for _, instruction := range []string{
		"", "make it pop", "add a new page", "make the header bigger", "set the title to \"\"",
		"Thanks,\nAnn", "Hi!\nThe header should be green.", "add a paragraph saying hi and delete the old menu", "Thanks, and remove the menu",
	} {
		t.Run(instruction, func(t *testing.T) {
			t.Parallel()
			if _, err := parse(instruction); !errors.Is(err, ErrNotUnderstood) {
				t.Errorf("parse(%q) error = %v, want ErrNotUnderstood", instruction, err)
			}
		})
	}
}
