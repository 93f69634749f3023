package dockerhost

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
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
	if want := uidOf(t, h, ex.ExecutionID) + "\n/workspace\n" + payload; string(out) != want {
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
	want := "tool ran as " + uidOf(t, h, ex.ExecutionID) + "\n0:0 755\n0:0 755\n"
	if !strings.HasPrefix(res.Stdout, want) || !strings.Contains(res.Stdout, "Read-only file system") || !strings.Contains(res.Stdout, "rc=1") {
		t.Fatalf("tools:\n%s\nwant prefix:\n%s and a read-only file system", res.Stdout, want)
	}
}

// testToolsVolume: the tools live in one volume per content, written once
// (a volume left without its completion mark is written again) and shared
// by every container of the owner. A holder keeps it from a volume prune
// while its host lives; a container prune of the holder is noticed. A host
// that closes removes the owner's tools volumes no container uses, the
// older build's included, and keeps the ones its executions use.
func testToolsVolume(t *testing.T) {
	cli, img := engine(t)
	ctx := testCtx(t, 3*time.Minute)
	owner := uniqueOwner()
	tools := func(v string) []Tool {
		return []Tool{{Name: "hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho " + v + "\n")}}
	}
	volumes := func() []string {
		t.Helper()
		list, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+owner))})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range list.Volumes {
			names = append(names, v.Name)
		}
		slices.Sort(names)
		return names
	}
	holders := func() int {
		t.Helper()
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+owner))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	hello := func(h *Docker, ex *Execution, want string) {
		t.Helper()
		if res := sh(t, h, ex.ExecutionID, ToolsDir+"/hello"); res.Stdout != want+"\n" {
			t.Fatalf("tool in %s: %q, want %q", ex.ExecutionID, res.Stdout, want)
		}
	}
	end := func(h *Docker, exs ...*Execution) {
		t.Helper()
		for _, ex := range exs {
			if err := h.Terminate(ctx, ex.ExecutionID); err != nil {
				t.Fatal(err)
			}
			waitRemoved(t, cli, ex.ContainerID, time.Minute)
		}
	}
	v1, err := newToolsVolume(owner, tools("v1"))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := newToolsVolume(owner, tools("v2"))
	if err != nil {
		t.Fatal(err)
	}
	// An empty volume under the right name: what a gateway stopped while
	// writing leaves.
	if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: v1.name, Labels: map[string]string{LabelTools: owner}}); err != nil {
		t.Fatal(err)
	}
	a := newTestHost(t, cli, &Config{Owner: owner, Tools: tools("v1")})
	x, y := provision(t, a, emptyReq(img, small())), provision(t, a, emptyReq(img, small()))
	hello(a, x, "v1")
	hello(a, y, "v1")
	if got := volumes(); !slices.Equal(got, []string{v1.name}) || holders() != 1 {
		t.Fatalf("volumes %v, %d holders; want only %s and its holder", got, holders(), v1.name)
	}
	// Closed with x and y alive: their volume stays, for a restart.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := volumes(); !slices.Equal(got, []string{v1.name}) || holders() != 0 {
		t.Fatalf("after Close with executions: volumes %v, %d holders", got, holders())
	}

	// A new build adopts x and y; its own volume is new.
	b := newTestHost(t, cli, &Config{Owner: owner, Tools: tools("v2")})
	z := provision(t, b, emptyReq(img, small()))
	hello(b, z, "v2")
	hello(b, x, "v1")
	want := []string{v1.name, v2.name}
	slices.Sort(want)
	if got := volumes(); !slices.Equal(got, want) {
		t.Fatalf("volumes %v, want both: the old one is in use", got)
	}
	// A volume prune is refused while the holder lives.
	end(b, z)
	if err := cli.VolumeRemove(ctx, v2.name, false); !cerrdefs.IsConflict(err) {
		t.Fatalf("removing the tools volume of a live host: %v, want a conflict (in use)", err)
	}
	// A container prune takes the holder: the next create notices.
	if err := cli.ContainerRemove(ctx, v2.name+"-holder", container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := cli.VolumeRemove(ctx, v2.name, false); err != nil {
		t.Fatal(err)
	}
	z = provision(t, b, emptyReq(img, small()))
	hello(b, z, "v2")
	end(b, x, y, z)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := volumes(); len(got) != 0 || holders() != 0 {
		t.Fatalf("after Close: volumes %v, %d holders; want none", got, holders())
	}

	// A run killed (never closed) leaves its holder and volume; the next
	// run removes them at its Close even when it provisioned nothing.
	c := newTestHost(t, cli, &Config{Owner: owner, Tools: tools("v3")})
	end(c, provision(t, c, emptyReq(img, small())))
	d := newTestHost(t, cli, &Config{Owner: owner, Tools: tools("v3")})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := volumes(); len(got) != 0 || holders() != 0 {
		t.Fatalf("after a killed run and a run that provisioned nothing: volumes %v, %d holders; want none", got, holders())
	}
}

// testImageCheckedOnce: a digest-pinned image is checked (one exec of
// tar) at its first create only; its later containers start no check.
func testImageCheckedOnce(t *testing.T) {
	cli, img := engine(t)
	check := &countingAPI{DockerAPI: cli, argv: []string{"tar", "-cf", "/dev/null", "-C", "/", "bin/sh"}}
	owner := uniqueOwner()
	h, err := NewDocker(testCtx(t, time.Minute), slog.New(slog.DiscardHandler), check, &Config{Owner: owner, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Close()
		reapOwner(t, cli, owner)
	})
	for i := range 3 {
		ex := provision(t, h, emptyReq(img, small()))
		if n := check.count(); n != 1 {
			t.Fatalf("provision %d: %d image checks, want 1 in all", i+1, n)
		}
		if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
			t.Fatal(err)
		}
	}
}
