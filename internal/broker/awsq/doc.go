// Package awsq is the AWS backend of the broker ports: SQS for queues, DynamoDB for leases,
// records and the inbox ledger, S3 for payloads too large for SQS and for blob stores.
//
//	Inbox     one SQS FIFO queue per tenant + one ledger item per tenant (exact pending set,
//	          latest receipt handle, opener) + a dead-letter table with reasons
//	Claims    broker.SharedClaims on bells: an item per outstanding request, a standard queue
//	          of bells; Waiting cached ≥ 1 s (a billed call otherwise)
//	Results   a FIFO queue, a message group per tenant, de-duplicated by job id
//	Signals   a standard queue per process, routed by a routes table
//	Leases    conditional writes, fencing tokens from an atomic counter, a sparse expiry index;
//	          a holder's record writes, settles and results are transactions with a check on
//	          its lease (a result: its job record marked, then the SQS send)
//	Jobs, Presence, Table   DynamoDB tables
//	Blobs     objects under blobs/<store>/ in the payload bucket; the version is a token in
//	          the object's metadata (an ETag repeats for the same content)
//
// No receive is ever cancelled: a cancelled SQS long poll can still take a message and hide it
// for its visibility timeout, so every receive runs detached from its caller and what it brings
// after the caller left is kept for the next caller or given back. ARCHITECTURE.md ("The awsq
// backend") says what maps where and which contracts hold only with the DynamoDB structures.
package awsq
