package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/hostgate/hostgate/internal/testenv"
)

// The engine merges an image's labels into those of a container made from
// it, the container's own winning only for the keys it sets. An image that
// carries hostgate.* labels must not change what this package makes of its
// containers: with LABEL hostgate.pool=1 an execution looked like an
// unclaimed warm container, which the next start's Adopt reaped; with
// LABEL hostgate.tools=OWNER it looked like a tools volume holder, which
// Close (and the next start's first provision) removed; with
// hostgate.state-dir Elsewhere named a path the image chose. Fresh, warm
// and restored containers, and the tools holder (made from the first
// image provisioned), alike.
func testImageHostgateLabels(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	testenv.RequirePeer(t, "busybox-static at /bin/busybox", err == nil)
	tools := []Tool{{Name: "hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho hello\n")}}
	poolLabels := func(owner string) map[string]string {
		return map[string]string{LabelPool: "1", LabelPoolExpires: "1", LabelStateDir: "/injected", LabelOwner: owner}
	}
	toolsLabels := func(owner string) map[string]string {
		return map[string]string{LabelTools: owner, LabelStateDir: "/injected"}
	}
	allLabels := func(owner string) map[string]string {
		l := poolLabels(owner)
		l[LabelTools] = owner
		return l
	}
	for _, tc := range []struct {
		name   string
		labels func(owner string) map[string]string
		way    string // "fresh", "pooled" or "restored"
	}{
		{"fresh/pool", poolLabels, "fresh"},
		{"fresh/tools", toolsLabels, "fresh"},
		{"pooled", allLabels, "pooled"},
		{"restored", allLabels, "restored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := uniqueOwner()
			ref := importLabelledImage(t, cli, busybox, tc.labels(owner))
			req := emptyReq(ref, small())
			cfg := func() *Config {
				c := &Config{Owner: owner, Tools: tools, AllowUnpinnedImages: true}
				if tc.way == "pooled" {
					c.Pool = &PoolConfig{Size: 1, Keys: []ProvisionRequest{req}}
				}
				return c
			}
			ctx := testCtx(t, 3*time.Minute)
			a := newTestHost(t, cli, cfg())
			if a.pool != nil {
				waitPool(t, a, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
			}
			x := provision(t, a, req)
			switch tc.way {
			case "pooled":
				if s := a.PoolStats(); s.Hits != 1 {
					t.Fatalf("want a pool hit, stats %+v", s)
				}
			case "restored":
				cp, err := a.Checkpoint(ctx, x.ExecutionID, CheckpointRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Terminate(ctx, x.ExecutionID); err != nil {
					t.Fatal(err)
				}
				if x, err = a.Restore(ctx, RestoreRequest{CheckpointID: cp.CheckpointID}); err != nil {
					t.Fatal(err)
				}
			}

			// The container carries every key of this package, none of
			// them with the image's value.
			ins, err := cli.ContainerInspect(ctx, x.ContainerID)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{LabelOwner: owner, LabelPool: "", LabelPoolExpires: "", LabelTools: "", LabelStateDir: ""}
			if tc.way == "pooled" {
				// The pool's own: a warm container's marker and TTL.
				want[LabelPool] = "1"
				want[LabelPoolExpires] = ins.Config.Labels[LabelPoolExpires]
				if want[LabelPoolExpires] == "1" {
					t.Errorf("pooled execution's %s is the image's", LabelPoolExpires)
				}
			}
			for _, k := range ownLabels {
				if _, ok := ins.Config.Labels[k]; !ok {
					t.Errorf("execution's label %s not set: an image's would show through", k)
				}
			}
			for k, w := range want {
				if got := ins.Config.Labels[k]; got != w {
					t.Errorf("execution's label %s = %q, want %q", k, got, w)
				}
			}
			// The tools holder is made from the same image: it is no
			// execution, pooled container or anyone's but the holder.
			holders, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelTools+"="+owner))})
			if err != nil {
				t.Fatal(err)
			}
			if len(holders) != 1 || holders[0].ID == x.ContainerID {
				t.Errorf("tools holders %d (the execution's container among them: %v), want 1", len(holders), len(holders) > 0 && holders[0].ID == x.ContainerID)
			}
			for _, c := range holders {
				if c.ID != x.ContainerID && (c.Labels[LabelOwner] != "" || c.Labels[LabelPool] != "") {
					t.Errorf("tools holder labelled owner %q, pool %q, want none", c.Labels[LabelOwner], c.Labels[LabelPool])
				}
			}

			// Close leaves executions running, for a restart.
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if ins, err := cli.ContainerInspect(ctx, x.ContainerID); err != nil || !ins.State.Running {
				t.Fatalf("the execution's container after Close: %v, want running (the tools holder removal took it?)", err)
			}
			// A restart adopts it.
			b := newTestHost(t, cli, cfg())
			if _, err := b.Get(ctx, x.ExecutionID); err != nil {
				t.Fatalf("after a restart: %v, want the execution adopted (reaped as an unclaimed warm container?)", err)
			}
			// The restarted host's first provision takes over the tools
			// volume (removing a previous run's holders): x stays.
			if b.pool != nil {
				waitPool(t, b, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
			}
			y := provision(t, b, req)
			if res := sh(t, b, x.ExecutionID, "echo alive"); res.Stdout != "alive\n" {
				t.Fatalf("adopted execution after the restarted host's first provision: %+v", res)
			}
			// Another owner sees it as this owner's, with no state dir.
			c := newTestHost(t, cli, &Config{})
			found, err := c.Elsewhere(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := found[x.ExecutionID], (Foreign{Owner: owner}); got != want {
				t.Errorf("Elsewhere: %+v, want %+v", got, want)
			}
			for _, id := range []string{x.ExecutionID, y.ExecutionID} {
				if err := b.Terminate(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// importLabelledImage imports busybox as sh, sleep and tar, with labels.
func importLabelledImage(t *testing.T, cli *client.Client, busybox []byte, labels map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(busybox))})
	_, _ = tw.Write(busybox)
	for _, l := range []string{"sh", "sleep", "tar"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for k, v := range labels {
		changes = append(changes, "LABEL "+k+"="+v)
	}
	ref := "hostgate-test/labelled:" + uniqueOwner()
	rc, err := cli.ImageImport(testCtx(t, time.Minute), image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	_ = rc.Close()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true})
	})
	ins, err := cli.ImageInspect(testCtx(t, time.Minute), ref)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		if ins.Config == nil || ins.Config.Labels[k] != v {
			t.Fatalf("imported image lacks label %s=%s", k, v)
		}
	}
	return ref
}

// TestOwnLabelsComplete: every hostgate.* label key of this package is in
// ownLabels, so a key added later is set on every container too, and
// ContainerConfig sets them all.
func TestOwnLabelsComplete(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(v, "hostgate.") {
					keys = append(keys, v)
				}
			}
			return true
		})
	}
	if len(keys) < len(ownLabels) {
		t.Fatalf("found %d hostgate.* keys in the source, fewer than ownLabels' %d", len(keys), len(ownLabels))
	}
	for _, k := range keys {
		if !slices.Contains(ownLabels, k) {
			t.Errorf("label %q is not in ownLabels: an image's value for it reaches containers", k)
		}
	}
	p := &Policy{AllowUnpinnedImages: true, Max: DefaultMaxResources()}
	cfg, _, err := p.ContainerConfig("0123456789abcdef0123456789abcdef", sandboxUIDBase, emptyReq("img", small()), time.Now(), map[string]string{LabelOwner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ownLabels {
		if _, ok := cfg.Labels[k]; !ok {
			t.Errorf("ContainerConfig leaves %s unset", k)
		}
	}
}
