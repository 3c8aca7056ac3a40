package outbox

import (
	"html/template"
	"strings"
)

// renderText renders the content as plain text, blocks separated by blank lines.
func renderText(c content) string {
	var b strings.Builder
	for _, blk := range c.Blocks {
		writeTextBlock(&b, blk)
		b.WriteString("\n")
	}
	b.WriteString("-- \n" + c.Footer + "\n")
	return b.String()
}

func writeTextBlock(b *strings.Builder, blk block) {
	if blk.Title != "" {
		b.WriteString(blk.Title + ":\n")
	}
	switch blk.Kind {
	case "list":
		for _, it := range blk.Items {
			b.WriteString("  " + it + "\n")
		}
	case "buttons":
		for _, l := range blk.Links {
			b.WriteString(l.Label + ": " + l.URL + "\n")
		}
	case "images":
		for _, im := range blk.Images {
			b.WriteString("[Picture: " + im.Alt + "]\n")
		}
	default:
		b.WriteString(strings.TrimRight(blk.Text, "\n") + "\n")
	}
}

// htmlPage escapes everything it is given (html/template), including URLs with unsafe schemes.
var htmlPage = template.Must(template.New("reply").Parse(`<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Subject}}</title></head>
<body style="font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:16px;line-height:1.5;color:#222;max-width:600px;margin:0 auto;padding:12px;overflow-wrap:anywhere">
{{- range .Blocks}}
{{- if .Title}}
<p style="margin-bottom:4px"><strong>{{.Title}}</strong></p>
{{- end}}
{{- if eq .Kind "list"}}
<ul style="margin-top:0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px">
{{- range .Items}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- else if eq .Kind "buttons"}}
<p style="margin:20px 0">{{range .Links}}<a href="{{.URL}}" style="display:inline-block;margin:0 8px 8px 0;padding:14px 24px;background:#1a5fd0;color:#ffffff;text-decoration:none;border-radius:8px;font-weight:600;font-size:17px">{{.Label}}</a>{{end}}</p>
{{- else if eq .Kind "images"}}
{{- range .Images}}
<p style="margin:0 0 16px"><img src="{{.CID}}" alt="{{.Alt}}" width="{{.Width}}" height="{{.Height}}" style="display:block;max-width:100%;height:auto;border:1px solid #ddd">
{{- if .Caption}}<br><span style="color:#666;font-size:13px">{{.Caption}}</span>{{end}}</p>
{{- end}}
{{- else if eq .Kind "pre"}}
<pre style="margin-top:0;padding:8px;background:#f5f5f5;font-size:13px;white-space:pre-wrap;overflow-wrap:anywhere">{{.Text}}</pre>
{{- else}}
<p>{{range $i, $l := .Lines}}{{if $i}}<br>{{end}}{{$l}}{{end}}</p>
{{- end}}
{{- end}}
<p style="color:#888;font-size:13px">{{.Footer}}</p>
</body>
</html>
`))

// renderHTML renders the content as an HTML page.
func renderHTML(subject string, c content) (string, error) {
	var b strings.Builder
	err := htmlPage.Execute(&b, struct {
		Subject string
		content
	}{subject, c})
	return b.String(), err
}
