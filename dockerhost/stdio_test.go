package dockerhost

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func testAttachStdio(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	ctx := testCtx(t, time.Minute)

	var stderr strings.Builder
	s, err := h.AttachStdio(ctx, ex.ExecutionID, []string{"/bin/sh", "-c", "id -u; pwd; cat; echo bye >&2; exit 4"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A payload larger than any pipe buffer, written while we read.
	payload := strings.Repeat("0123456789abcdef", 64<<10)
	go func() {
		if _, err := io.WriteString(s, payload); err != nil {
			t.Errorf("write stdin: %v", err)
		}
		if err := s.CloseWrite(); err != nil {
			t.Errorf("close stdin: %v", err)
		}
	}()
	out, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := "65534\n/workspace\n" + payload; string(out) != want {
		t.Fatalf("stdout: %d bytes, want %d (prefix %q)", len(out), len(want), out[:min(len(out), 40)])
	}
	code, err := s.Wait(ctx)
	if err != nil || code != 4 {
		t.Fatalf("exit %d, %v; want 4", code, err)
	}
	if stderr.String() != "bye\n" {
		t.Fatalf("stderr %q", stderr.String())
	}

	// ctx ending closes the attachment: a reader blocked on a silent
	// command returns.
	cctx, cancel := context.WithCancel(ctx)
	s2, err := h.AttachStdio(cctx, ex.ExecutionID, []string{"cat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.ReadAll(s2)
	}()
	cancel()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("read still blocked 30 s after ctx was cancelled")
	}
	_ = s2.Close()
}

func testTools(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{Tools: []Tool{{Name: "hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho tool ran as $(id -u)\n")}}})
	ex := provision(t, h, emptyReq(img, small()))
	res := sh(t, h, ex.ExecutionID, `/opt/hostgate/hello; stat -c '%u:%g %a' /opt/hostgate /opt/hostgate/hello; touch /opt/hostgate/x 2>&1; echo > /opt/hostgate/hello 2>&1; echo rc=$?`)
	want := "tool ran as 65534\n0:0 755\n0:0 755\n"
	if !strings.HasPrefix(res.Stdout, want) || !strings.Contains(res.Stdout, "Permission denied") || !strings.Contains(res.Stdout, "rc=1") {
		t.Fatalf("tools:\n%s\nwant prefix:\n%s and permission denied", res.Stdout, want)
	}
}
