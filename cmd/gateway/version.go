package main

import (
	"context"
	"fmt"

	"github.com/hostgate/hostgate/internal/buildinfo"
)

func init() {
	register("version", "print the commit this gateway was built from", runVersion)
}

// runVersion prints the version; -h and --help print its usage (they
// printed the version, as any argument did).
func runVersion(_ context.Context, sio stdio, args []string) error {
	fs := newFlags("version", sio)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gateway version\n\nprints the commit this gateway was built from and the Go that built it")
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("version: unexpected arguments %q", fs.Args())
	}
	fmt.Fprintln(sio.out, "gateway", buildinfo.Version())
	return nil
}
