package reply_test

import (
	"fmt"

	"github.com/webordinary/webordinary/internal/mail/reply"
)

func ExampleExtract() {
	body := "Please make the header green.\n" +
		"\n" +
		"Thanks,\n" +
		"Ana\n" +
		"\n" +
		"Sent from my iPhone\n" +
		"\n" +
		"> On Jan 6, 2025, at 10:02 AM, Webordinary <site@webordinary.com> wrote:\n" +
		"> \n" +
		"> Your site is live.\n"
	r := reply.Extract(body)
	fmt.Println(r.Text)
	fmt.Println("signature:", r.Signature)
	// Output:
	// Please make the header green.
	//
	// Thanks,
	// Ana
	// signature: Sent from my iPhone
}

func ExampleExtract_forwarded() {
	body := "---------- Forwarded message ---------\n" +
		"From: Lee Chen <lee@chen-dental.com>\n" +
		"Subject: Opening hours\n" +
		"\n" +
		"Please put our new opening hours on the site: Mon-Fri 8-18.\n"
	r := reply.Extract(body)
	fmt.Println(r.Forwarded, r.Text)
	// Output:
	// true Please put our new opening hours on the site: Mon-Fri 8-18.
}
