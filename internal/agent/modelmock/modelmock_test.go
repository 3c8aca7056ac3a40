package modelmock_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agent/modelmock"
)

// post sends body to the mock's path and returns the status and the data of each SSE event
// (or the JSON body as one).
func post(t *testing.T, m *modelmock.Server, path, body string) (int, []string) {
	t.Helper()
	resp, err := http.Post(m.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		} else if strings.HasPrefix(sc.Text(), "{") {
			data = append(data, sc.Text())
		}
	}
	return resp.StatusCode, data
}

func TestMessagesPlaysTheScript(t *testing.T) {
	t.Parallel()
	m := modelmock.Start()
	defer m.Close()
	instruction := `Edit. [[fail 429 1 2]][[tool Read {"file_path":"/w/a.html"}]][[say All done.]]`
	first := `{"stream":true,"tools":[{}],"messages":[{"role":"user","content":` + quote(instruction) + `}]}`
	if status, _ := post(t, m, "/v1/messages", first); status != http.StatusTooManyRequests {
		t.Fatalf("first call: status %d, want 429", status)
	}
	_, events := post(t, m, "/v1/messages", first)
	if got := strings.Join(events, "\n"); !strings.Contains(got, `"name":"Read"`) || !strings.Contains(got, `\"file_path\":\"/w/a.html\"`) {
		t.Fatalf("second call: want the Read tool call:\n%s", got)
	}
	after := `{"tools":[{}],"messages":[{"role":"user","content":` + quote(instruction) + `},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`
	_, body := post(t, m, "/v1/messages", after)
	if len(body) != 1 || !strings.Contains(body[0], `"text":"All done."`) || !strings.Contains(body[0], `"stop_reason":"end_turn"`) {
		t.Fatalf("after the tool result: %v", body)
	}
	reqs := m.Requests()
	if len(reqs) != 3 || reqs[0].Status != 429 || reqs[0].Instruction != instruction {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestResponsesPlaysTheScript(t *testing.T) {
	t.Parallel()
	m := modelmock.Start()
	defer m.Close()
	instruction := `Edit. [[tool exec_command {"cmd":"true"}]][[say Done here.]]`
	input := `[{"type":"message","role":"user","content":[{"type":"input_text","text":` + quote(instruction) + `}]}`
	_, events := post(t, m, "/v1/responses", `{"stream":true,"tools":[{}],"input":`+input+`]}`)
	if got := strings.Join(events, "\n"); !strings.Contains(got, `"type":"function_call"`) || !strings.Contains(got, "response.completed") {
		t.Fatalf("first call: want a function call and a completed response:\n%s", got)
	}
	input += `,{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}`
	_, events = post(t, m, "/v1/responses", `{"stream":true,"tools":[{}],"input":`+input+`]}`)
	if got := strings.Join(events, "\n"); !strings.Contains(got, `"text":"Done here."`) {
		t.Fatalf("after the call's output: want the final answer:\n%s", got)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
