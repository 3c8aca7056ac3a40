package main

import (
	"flag"

	"github.com/webordinary/webordinary/internal/app"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/message"
)

// registerMail registers serve's mail flags into m; --mail-domain goes to domains (a
// comma-separated list).
func registerMail(fs *flag.FlagSet, m *app.Mail, domains *string) {
	fs.StringVar(&m.SMTPAddr, "smtp", app.DefaultSMTPAddr, "SMTP listener for instructions by email; empty = no mail")
	fs.StringVar(domains, "mail-domain", app.DefaultMailDomain, "domain(s) we receive mail for, comma-separated; the first is used in our addresses")
	fs.StringVar(&m.Local, "mail-local", app.DefaultMailLocal, "local part of our address (edit@<domain>)")
	fs.StringVar(&m.Secret, "mail-secret", "", "secret that signs reply tokens (default: generated once and kept in the engine)")
	fs.StringVar(&m.TrustedAuthServ, "mail-trusted-authserv", "", "behind a relay (Postfix, a filter): trust only its Authentication-Results with this authserv-id, and only on mail from --mail-trusted-relay")
	fs.Var((*listFlag)(&m.TrustedRelays), "mail-trusted-relay", "with --mail-trusted-authserv (required): IP or CIDR the relay connects from (comma-separated or repeatable); any other client's mail is checked as if straight from the internet")
	fs.StringVar(&m.DNSFixture, "mail-dns-fixture", "", "JSON file of DNS records used instead of real DNS for sender checks (tests, offline demos)")
	fs.StringVar(&m.TLSCert, "smtp-tls-cert", "", "certificate file: offer STARTTLS")
	fs.StringVar(&m.TLSKey, "smtp-tls-key", "", "key file for --smtp-tls-cert")
	fs.Int64Var(&m.MaxBytes, "smtp-max-bytes", app.DefaultMailMaxBytes, "largest message accepted")
	fs.StringVar(&m.Relay, "smtp-relay", "", "host:port of the SMTP relay replies go through (default: .eml files in <data>/outbox)")
	fs.StringVar(&m.RelayUser, "smtp-relay-user", "", "relay user")
	fs.StringVar(&m.RelayPassword, "smtp-relay-password", "", "relay password")
	fs.StringVar(&m.RelayTLS, "smtp-relay-tls", app.DefaultRelayTLS, "relay TLS: starttls, opportunistic, tls or none")
	fs.IntVar(&m.PerSender, "mail-per-sender", app.DefaultPerSender, "instructions per sender per hour; more are held for the operator (webordinary mail held), never dropped")
	fs.IntVar(&m.PerTenant, "mail-per-tenant", app.DefaultPerTenant, "instructions per project+user per hour")
	fs.DurationVar(&m.HeldNoticeAfter, "mail-held-notice-after", inbound.DefaultHeldNoticeAfter, "a sender whose mail was held gets one notice per hour listing it, once none of theirs was held for this long")
	fs.IntVar(&m.Parse.MaxDepth, "mail-max-depth", message.DefaultMaxDepth, "deepest MIME nesting parsed; deeper mail is quarantined")
	fs.BoolVar(&m.LocalTesting, "mail-local-testing", false, "local testing: accept mail from `webordinary mail send` on this machine as authenticated; needs --smtp on loopback; no real DNS for sender checks")
	fs.DurationVar(&m.Parse.Timeout, "mail-parse-timeout", message.DefaultTimeout, "time budget to parse one message; slower mail is quarantined")
	fs.BoolVar(&m.SES, "mail-ses", false, "send replies through Amazon SES v2 (see --aws-region, --aws-ses-endpoint) instead of a relay or <data>/outbox")
	fs.StringVar(&m.SESConfigurationSet, "mail-ses-configuration-set", "", "with --mail-ses: SES configuration set named on every send")
	fs.StringVar(&m.SESQueue, "mail-ses-queue", "", "take mail from SES: URL of the SQS queue its receipt rule notifies (S3 + SNS); needs --smtp ''; trusts only SES's Authentication-Results")
}

// registerAWS registers the flags of the AWS services previews and mail use (serve, worker).
func registerAWS(fs *flag.FlagSet, a *app.AWS) {
	fs.StringVar(&a.Region, "aws-region", "", "AWS region of S3 previews and SES mail (default: the SDK's, AWS_REGION, else us-east-1)")
	fs.StringVar(&a.Endpoint, "aws-endpoint", "", "one endpoint for S3, SQS and SES, such as an emulator (http://127.0.0.1:4566)")
	fs.StringVar(&a.S3Endpoint, "aws-s3-endpoint", "", "S3 endpoint when it differs from --aws-endpoint")
	fs.StringVar(&a.SQSEndpoint, "aws-sqs-endpoint", "", "SQS endpoint (SES inbound queue) when it differs from --aws-endpoint")
	fs.StringVar(&a.SESEndpoint, "aws-ses-endpoint", "", "SES endpoint when it differs from --aws-endpoint")
}
