package message_test

import (
	"fmt"

	"github.com/webordinary/webordinary/internal/mail/message"
)

func ExampleParse() {
	raw := "From: =?UTF-8?Q?Ana_L=C3=B3pez?= <Ana@Example.com>\r\n" +
		"Subject: Re: Your site\r\n" +
		"In-Reply-To: <abc@webordinary.com>\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"\r\n" +
		"Make the header green.\r\n"
	msg, err := message.Parse([]byte(raw))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.From.Name, msg.From.Addr)
	fmt.Println(msg.InReplyTo)
	fmt.Print(msg.Text)
	// Output:
	// Ana López ana@example.com
	// abc@webordinary.com
	// Make the header green.
}
