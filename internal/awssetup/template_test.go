package awssetup_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"gopkg.in/yaml.v3"

	"github.com/webordinary/webordinary/internal/awssetup"
)

// resource is one CloudFormation resource.
type resource struct {
	Type       string         `yaml:"Type"`
	Properties map[string]any `yaml:"Properties"`
}

func loadTemplate(t *testing.T) map[string]resource {
	t.Helper()
	b, err := os.ReadFile("../../deploy/aws/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]resource `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatalf("deploy/aws/template.yaml: %v", err)
	}
	return tmpl.Resources
}

// sub resolves a {"Fn::Sub": "...${Prefix}..."} or a plain string for prefix "wo".
func sub(v any) string {
	if m, ok := v.(map[string]any); ok {
		v = m["Fn::Sub"]
	}
	s, _ := v.(string)
	return strings.ReplaceAll(s, "${Prefix}", "wo")
}

// names returns the resolved name property of every resource of type typ.
func names(res map[string]resource, typ, prop string) []string {
	var out []string
	for _, r := range res {
		if r.Type == typ {
			out = append(out, sub(r.Properties[prop]))
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestTemplateNamesMatchCode: deploy/aws/template.yaml names every table, shared queue, bucket
// and topic exactly as the code does (prefix "wo"), the lease index and TTL attributes match
// awsq's, the lifecycle rules match awssetup's retention, and the IAM patterns cover the
// queues awsq creates at run time.
func TestTemplateNamesMatchCode(t *testing.T) {
	t.Parallel()
	res := loadTemplate(t)
	n := awssetup.NamesFor("wo")
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s in the template = %q, code uses %q", what, got, want)
		}
	}
	check("tables", names(res, "AWS::DynamoDB::Table", "TableName"), sorted(n.Tables...))
	check("queues", names(res, "AWS::SQS::Queue", "QueueName"), sorted(n.ClaimsQueue, n.ResultsQueue, n.InboundQueue, n.InboundDLQ))
	check("buckets", names(res, "AWS::S3::Bucket", "BucketName"), sorted(n.PayloadBucket, n.SitesBucket, n.InboundBucket))
	check("topics", names(res, "AWS::SNS::Topic", "TopicName"), []string{n.InboundTopic})
	text := fmt.Sprint(res)
	for _, want := range []string{n.ExpiryIndex, "AttributeName:" + n.TTLAttribute, "Prefix:" + awssetup.InboundKeyPrefix,
		fmt.Sprintf("ExpirationInDays:%d", awssetup.InboundDays), fmt.Sprintf("ExpirationInDays:%d", awssetup.PayloadDays),
		fmt.Sprintf("maxReceiveCount:%d", awssetup.InboundMaxReceives), "ObjectKeyPrefix:" + awssetup.InboundKeyPrefix} {
		if !strings.Contains(text, want) {
			t.Errorf("template lacks %q", want)
		}
	}
	// The payload bucket's rules expire what awssetup's do, under the same prefixes.
	var want, got []string
	for _, r := range awssetup.PayloadRules() {
		want = append(want, fmt.Sprintf("%s %d", aws.ToString(r.Filter.Prefix), aws.ToInt32(r.Expiration.Days)))
	}
	for _, r := range res {
		if r.Type != "AWS::S3::Bucket" || sub(r.Properties["BucketName"]) != n.PayloadBucket {
			continue
		}
		lc, _ := r.Properties["LifecycleConfiguration"].(map[string]any)
		rules, _ := lc["Rules"].([]any)
		for _, rule := range rules {
			m, _ := rule.(map[string]any)
			got = append(got, fmt.Sprintf("%v %v", m["Prefix"], m["ExpirationInDays"]))
		}
	}
	check("payload bucket lifecycle rules", sorted(got...), sorted(want...))
	ttl := 0
	for _, r := range res {
		if spec, ok := r.Properties["TimeToLiveSpecification"].(map[string]any); ok && spec["AttributeName"] == n.TTLAttribute {
			if !slices.Contains(n.TTLTables, sub(r.Properties["TableName"])) {
				t.Errorf("TTL on %s, which awsq does not expire", sub(r.Properties["TableName"]))
			}
			ttl++
		}
	}
	if ttl != len(n.TTLTables) {
		t.Errorf("TTL on %d tables, awsq expires items in %q", ttl, n.TTLTables)
	}
	raw, _ := os.ReadFile("../../deploy/aws/template.yaml")
	for _, pattern := range []string{n.TenantQueuePattern, n.SignalQueuePattern} {
		if !strings.Contains(strings.ReplaceAll(string(raw), "${Prefix}", "wo"), ":"+pattern+`"`) {
			t.Errorf("no IAM statement covers the run-time queues %s", pattern)
		}
	}
}
