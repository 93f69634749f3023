// Package yamux is hostgate's copy of github.com/hashicorp/yamux v0.1.2
// (MPL-2.0, see LICENSE): the same wire protocol (spec.md) and API.
// Changes are marked "hostgate:" where they are made.
package yamux
