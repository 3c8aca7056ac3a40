package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/awssetup"
)

// runAWS dispatches `webordinary aws <subcommand>`.
func runAWS(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(usageOut, "Usage: webordinary aws setup --prefix P [--region R] [--endpoint URL]\n\n"+
			"  setup  create the queues, tables and buckets an AWS install needs, where missing\n"+
			"         (development; production uses deploy/aws/template.yaml)\n")
		if len(args) == 0 {
			return usageError{"aws", fmt.Errorf("missing subcommand: setup")}
		}
		return nil
	}
	if args[0] != "setup" {
		return usageError{"aws", fmt.Errorf("unknown subcommand %q: use setup", args[0])}
	}
	return runAWSSetup(ctx, args[1:])
}

func runAWSSetup(ctx context.Context, args []string) error {
	var cfg awssetup.Config
	fs := newFlags("aws setup", "--prefix P [--region R] [--endpoint URL]")
	fs.StringVar(&cfg.Prefix, "prefix", "wo", "prefix of every queue, table and bucket name")
	fs.StringVar(&cfg.Region, "region", "", "AWS region (default: the SDK's, AWS_REGION, else us-east-1)")
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "one endpoint for every service, such as an emulator (http://127.0.0.1:4566)")
	fs.StringVar(&cfg.DynamoDBEndpoint, "dynamodb-endpoint", "", "DynamoDB endpoint when it differs from --endpoint")
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	steps, err := awssetup.Setup(ctx, cfg)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, s := range steps {
		fmt.Fprintf(w, "%s\t%s\n", s.Resource, s.Result)
	}
	w.Flush()
	if err != nil {
		return fmt.Errorf("%w (what is listed above is in place; run again after fixing it)", err)
	}
	return nil
}
