package main

import (
	"context"
	"fmt"

	"github.com/hostgate/hostgate/internal/buildinfo"
)

func init() {
	register("version", "print the commit this gateway was built from", func(_ context.Context, sio stdio, _ []string) error {
		fmt.Fprintln(sio.out, "gateway", buildinfo.Version())
		return nil
	})
}
