// Package execapi serves the gateway's executions API (/v1/executions…,
// /v1/restores) over an ExecutionHost, and makes every execution a host:
// Agents starts `agent serve --stdio --mux --keys-stdin` inside each
// execution over a Docker exec attachment, hands it a fresh host key, the
// gateway's CA key and the host id on that stdin, pins the key in the
// gateway's store and registers the attachment's yamux session as the
// host's tunnel, so /v1/hosts/{executionId}/ssh reaches the container.
package execapi
