// Package s3target publishes built sites to S3 and serves them from there: the preview.Target
// for previews (a thread's preview and its project's latest) and the same store, keyed by host
// name, for production sites.
//
// # Layout in the bucket
//
//	<prefix>previews/<project>/blobs/<sha256>                      content, written once
//	<prefix>previews/<project>/threads/<thread>/versions/<n>.json  manifest (preview.Manifest), written once
//	<prefix>previews/<project>/threads/<thread>/current            pointer: the key of the live manifest
//	<prefix>previews/<project>/latest                              pointer: the project's latest
//	<prefix>previews/<project>/live/versions/<n>.json              the project's live site (DeployProduction)
//	<prefix>previews/<project>/live/current                        pointer: served at <project>.<domain>
//	<prefix>production/<host>/blobs/<sha256>
//	<prefix>production/<host>/versions/<n>.json
//	<prefix>production/<host>/current
//
// A deploy hashes every file of the build output, uploads only content that the thread's live
// version and the project's latest do not already name, writes the new manifest with
// If-None-Match: * (a version number is never reused), and then switches the pointers with
// If-Match on the ETag it read (a pointer never goes back to an older version, and two
// processes cannot both "win" a switch). A pointer's metadata (x-amz-meta-fences) keeps, per
// lease holder, the newest token that switched it: a deploy fenced by an older token of the
// same holder (preview.WithFence) is refused, checked against the pointer read and written
// with it under If-Match. Objects are only ever created or replaced whole, so a
// reader that reads a pointer once sees the old version or the new one, never a mix.
// Deploys of one site are serialized within a process; across processes the conditional writes
// decide.
//
// Server answers HTTP requests by Host: one pointer GET per request, the manifest from a cache
// (manifests never change), and the file by ranged GETs. Put a CDN in front for the public.
package s3target
