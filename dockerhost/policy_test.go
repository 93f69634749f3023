package dockerhost

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const pinned = "127.0.0.1:5000/hostgate/busybox@sha256:fd0e0d89a671c42120185da9238484865c9ee09ce8aa0905d22672e4e0275619"

func testPolicy() *Policy {
	return &Policy{Max: Resources{CPUs: 2, MemoryBytes: 1 << 30, DiskBytes: 1 << 30, Pids: 1024, RuntimeMs: 3_600_000, MaxOutputBytes: 1 << 20}}
}

func validReq() ProvisionRequest {
	return ProvisionRequest{Image: pinned, Workspace: WorkspaceSpec{Kind: WorkspaceEmpty}, Resources: small(), Network: Network{Mode: "none"}}
}

func TestValidateProvisionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*ProvisionRequest)
		field string
		msg   string // substring of the message
	}{
		{"bad execution id", func(r *ProvisionRequest) { r.ExecutionID = "../x" }, "executionId", "must match"},
		{"no image", func(r *ProvisionRequest) { r.Image = "" }, "image", "required"},
		{"tag only", func(r *ProvisionRequest) { r.Image = "busybox:latest" }, "image", "docker inspect --format '{{index .RepoDigests 0}}' busybox:latest"},
		{"short digest", func(r *ProvisionRequest) { r.Image = "busybox@sha256:abcd" }, "image", "not pinned"},
		{"space in image", func(r *ProvisionRequest) { r.Image = "busy box" }, "image", "not a valid"},
		// Pinned, but no reference the engine parses: they reached it and
		// answered "the engine refused the container", naming no field.
		{"two dots in image", func(r *ProvisionRequest) { r.Image = "busybox..x@sha256:" + strings.Repeat("a", 64) }, "image", "is not a valid image reference (invalid reference format)"},
		{"dash ending image", func(r *ProvisionRequest) { r.Image = "reg:5000/busybox-@sha256:" + strings.Repeat("a", 64) }, "image", "is not a valid image reference"},
		{"empty path component", func(r *ProvisionRequest) { r.Image = "a//b@sha256:" + strings.Repeat("a", 64) }, "image", "is not a valid image reference"},
		{"two colons in image", func(r *ProvisionRequest) { r.Image = "a:b:c@sha256:" + strings.Repeat("a", 64) }, "image", "is not a valid image reference"},
		{"empty tag", func(r *ProvisionRequest) { r.Image = "busybox:@sha256:" + strings.Repeat("a", 64) }, "image", "is not a valid image reference"},
		{"name over 255", func(r *ProvisionRequest) { r.Image = strings.Repeat("a", 256) + "@sha256:" + strings.Repeat("a", 64) }, "image", "must not be more than 255 characters"},
		{"no workspace kind", func(r *ProvisionRequest) { r.Workspace.Kind = "" }, "workspace.kind", "required"},
		{"unknown workspace kind", func(r *ProvisionRequest) { r.Workspace.Kind = "bind" }, "workspace.kind", "unknown"},
		{"empty with repo", func(r *ProvisionRequest) { r.Workspace.RepositoryPath = "/r" }, "workspace", "no repositoryPath"},
		{"git relative path", func(r *ProvisionRequest) {
			r.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: "repo", Revision: "main"}
		}, "workspace.repositoryPath", "absolute"},
		{"git no revision", func(r *ProvisionRequest) {
			r.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: "/repo"}
		}, "workspace.revision", "required"},
		{"git option revision", func(r *ProvisionRequest) {
			r.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: "/repo", Revision: "--output=/etc/x"}
		}, "workspace.revision", "'-'"},
		{"missing cpus", func(r *ProvisionRequest) { r.Resources.CPUs = 0 }, "resources.cpus", "required"},
		{"NaN cpus", func(r *ProvisionRequest) { r.Resources.CPUs = math.NaN() }, "resources.cpus", "between"},
		{"too many cpus", func(r *ProvisionRequest) { r.Resources.CPUs = 3 }, "resources.cpus", "between"},
		{"missing memory", func(r *ProvisionRequest) { r.Resources.MemoryBytes = 0 }, "resources.memoryBytes", "required"},
		{"tiny memory", func(r *ProvisionRequest) { r.Resources.MemoryBytes = 1 << 20 }, "resources.memoryBytes", "between"},
		{"missing disk", func(r *ProvisionRequest) { r.Resources.DiskBytes = 0 }, "resources.diskBytes", "required"},
		{"negative disk", func(r *ProvisionRequest) { r.Resources.DiskBytes = -1 }, "resources.diskBytes", "between"},
		{"missing pids", func(r *ProvisionRequest) { r.Resources.Pids = 0 }, "resources.pids", "required"},
		{"upper-case digest", func(r *ProvisionRequest) { r.Image = "busybox@sha256:" + strings.Repeat("A", 64) }, "image", "lower case; use \"busybox@sha256:" + strings.Repeat("a", 64)},
		{"too few pids", func(r *ProvisionRequest) { r.Resources.Pids = 31 }, "resources.pids", "between 32 and 1024; it counts threads"},
		{"missing runtime", func(r *ProvisionRequest) { r.Resources.RuntimeMs = 0 }, "resources.runtimeMs", "required"},
		{"runtime too long", func(r *ProvisionRequest) { r.Resources.RuntimeMs = 3_600_001 }, "resources.runtimeMs", "between"},
		{"missing output", func(r *ProvisionRequest) { r.Resources.MaxOutputBytes = 0 }, "resources.maxOutputBytes", "required"},
		{"output too big", func(r *ProvisionRequest) { r.Resources.MaxOutputBytes = 1<<20 + 1 }, "resources.maxOutputBytes", "between"},
		{"missing network", func(r *ProvisionRequest) { r.Network.Mode = "" }, "network.mode", "required"},
		{"bridge network", func(r *ProvisionRequest) { r.Network.Mode = "bridge" }, "network.mode", "not supported"},
		{"host network", func(r *ProvisionRequest) { r.Network.Mode = "host" }, "network.mode", "not supported"},
		{"bad env name", func(r *ProvisionRequest) { r.Env = map[string]string{"A=B": "x"} }, "env.A=B", "not a valid"},
		{"NUL env value", func(r *ProvisionRequest) { r.Env = map[string]string{"A": "x\x00"} }, "env.A", "NUL"},
		{"secret env", func(r *ProvisionRequest) { r.Env = map[string]string{"GITHUB_TOKEN": "x"} }, "env.GITHUB_TOKEN", "credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := validReq()
			tc.edit(&req)
			err := testPolicy().ValidateProvision(&req)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != tc.field || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want invalid_request on %s with %q", err, tc.field, tc.msg)
			}
		})
	}
	req := validReq()
	if err := testPolicy().ValidateProvision(&req); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	p := testPolicy()
	p.RepositoryRoots = []string{"/srv/repos/"}
	for repo, ok := range map[string]bool{"/srv/repos/a": true, "/srv/repos": true, "/srv/repos/../etc": false, "/srv/reposx": false, "/etc": false} {
		r := validReq()
		r.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "main"}
		err := p.ValidateProvision(&r)
		var e *Error
		if ok != (err == nil) || !ok && (!errors.As(err, &e) || e.Field != "workspace.repositoryPath") {
			t.Errorf("repository %s under /srv/repos: %v, want allowed %v", repo, err, ok)
		}
	}
	p = testPolicy()
	p.AllowUnpinnedImages = true
	req.Image = "busybox:latest"
	if err := p.ValidateProvision(&req); err != nil {
		t.Fatalf("unpinned image refused with AllowUnpinnedImages: %v", err)
	}
	for _, ok := range []string{"busybox", "reg.example:5000/a/b__c-d.e:v1.2", "reg:5000/busybox:1@sha256:" + strings.Repeat("a", 64)} {
		req.Image = ok
		if err := p.ValidateProvision(&req); err != nil {
			t.Errorf("image %q refused with AllowUnpinnedImages: %v", ok, err)
		}
	}
	req.Image = "busybox..x:latest"
	if err := p.ValidateProvision(&req); err == nil {
		t.Error("a malformed image passed with AllowUnpinnedImages")
	}
}

func TestSecretEnvNames(t *testing.T) {
	for name, secret := range map[string]bool{
		"GITHUB_TOKEN": true, "token": true, "NpmToken": true, "AWS_SECRET_ACCESS_KEY": true, "client_secret": true,
		"PASSWORD": true, "DB_PASSWD": true, "MYSQL_ROOT_PASSWORD": true, "API_KEY": true, "OPENAI_APIKEY": true,
		"ApiKey": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "credential": true, "SSH_PRIVATE_KEY": true,
		"PrivateKey": true, "AWS_ACCESS_KEY_ID": true,
		"PATH": false, "HOME": false, "PWD": false, "LANG": false, "GOFLAGS": false, "NODE_ENV": false,
		"KEYBOARD": false, "API_URL": false, "TOKENIZERS_PARALLELISM": false, "HF_TOKEN": true,
		"DB_PASS": true, "MYSQL_PWD": true, "OPENAI_KEY": true, "STRIPE_KEY": true, "SIGNING_KEY": true,
		"PASSPHRASE": true, "CREDS": true, "GH_PAT": true, "AUTHORIZATION": true, "SESSION_COOKIE": true, "JWT": true,
		"NPMTOKEN": true, "PASSTHROUGH": false, "BYPASS_CACHE": false, "PUBLIC_KEY": false, "KEY": false,
		"PYTHONPATH": false, "PATCH_LEVEL": false, "COOKIE_DOMAIN": false, "nextAuthUrl": false,
		"NPM_AUTH": true, "AUTH_HEADER": true, "BEARER": true, "AUTH": true, "BASIC_AUTH": true, "ApiBearer": true,
		"NEXTAUTH_URL": false, "AUTH_URL": false, "AUTH_MODE": false, "SKIP_AUTH": false, "DISABLE_AUTH": false,
		"OAUTH_CLIENT_ID": false, "AUTHOR": false, "AUTHOR_NAME": false,
		"MOCK_AUTH": false, "FAKE_AUTH": false, "HAS_AUTH": false, "WITH_AUTH": false, "BYPASS_AUTH": false, "DEV_AUTH": false,
	} {
		if got := looksSecret(name); got != secret {
			t.Errorf("looksSecret(%q) = %v, want %v", name, got, secret)
		}
	}
}

func TestValidateExec(t *testing.T) {
	p := testPolicy()
	for _, tc := range []struct {
		req   ExecRequest
		field string
	}{
		{ExecRequest{TimeoutMs: 1}, "command"},
		{ExecRequest{Command: "ls"}, "timeoutMs"},
		{ExecRequest{Command: "ls", TimeoutMs: -5}, "timeoutMs"},
		{ExecRequest{Command: "ls", TimeoutMs: 1, Cwd: "rel"}, "cwd"},
		{ExecRequest{Command: "ls", Args: []string{"a\x00"}, TimeoutMs: 1}, "args"},
		{ExecRequest{Command: "l\x00s", TimeoutMs: 1}, "command"},
		{ExecRequest{Command: "ls", TimeoutMs: 1, Env: map[string]string{"MY_SECRET": "x"}}, "env.MY_SECRET"},
		// No execve takes one argument over MAX_ARG_STRLEN: it answered
		// 200, exit code 1, "exec /bin/sh: argument list too long".
		{ExecRequest{Command: "echo", Args: []string{"a", strings.Repeat("y", maxArgLen+1)}, TimeoutMs: 1}, "args[1]"},
		{ExecRequest{Command: strings.Repeat("y", maxArgLen+1), TimeoutMs: 1}, "command"},
		{ExecRequest{Command: "ls", Cwd: "/" + strings.Repeat("y", maxArgLen), TimeoutMs: 1}, "cwd"},
	} {
		err := p.ValidateExec(&tc.req)
		var e *Error
		if !errors.As(err, &e) || e.Field != tc.field || e.Code != CodeInvalidRequest {
			t.Errorf("%.200s: got %.300v, want invalid_request on %s", fmt.Sprintf("%+v", tc.req), err, tc.field)
		}
	}
	req := ExecRequest{Command: "ls", TimeoutMs: 1}
	if err := p.ValidateExec(&req); err != nil || req.Cwd != WorkspaceDir {
		t.Fatalf("valid exec: %v, cwd %q", err, req.Cwd)
	}
	req = ExecRequest{Command: "echo", Args: []string{strings.Repeat("y", maxArgLen)}, TimeoutMs: 1}
	if err := p.ValidateExec(&req); err != nil {
		t.Fatalf("an argument of MAX_ARG_STRLEN less its NUL: %v", err)
	}
}

func TestContainerConfig(t *testing.T) {
	p := testPolicy()
	req := validReq()
	req.Env = map[string]string{"MODE": "fast"}
	exp := time.Unix(1_800_000_000, 0)
	cfg, hc, err := p.ContainerConfig("abc", 2000000042, req, exp, map[string]string{LabelOwner: "gw1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Entrypoint; !slices.Equal(got, deadlineArgv("", "120")) || cfg.Labels[LabelDeadline] != "1" {
		t.Errorf("entrypoint %q, labels %v, want the movable runtime sleep", got, cfg.Labels)
	}
	if cfg.User != "2000000042:2000000042" || cfg.Labels[LabelUID] != "2000000042" || cfg.Labels[LabelExecution] != "abc" || cfg.Labels[LabelExpires] != "1800000000" || cfg.Labels[LabelOwner] != "gw1" {
		t.Errorf("config %+v", cfg)
	}
	if strings.Contains(cfg.Labels[LabelSpec], "fast") || !strings.Contains(cfg.Labels[LabelSpec], "MODE") {
		t.Errorf("spec label must keep env names, not values: %s", cfg.Labels[LabelSpec])
	}
	if got := hc.Tmpfs[WorkspaceDir]; got != "size=8388608,nr_inodes=29013,uid=2000000042,gid=2000000042,mode=0700,exec" {
		t.Errorf("workspace tmpfs %q", got)
	}
	if got := hc.Tmpfs["/dev/shm"]; got != "size=4194304,nr_inodes=1024,mode=1777,nosuid,nodev,noexec" {
		t.Errorf("/dev/shm tmpfs %q, want 4 MiB", got)
	}
	if hc.Memory != hc.MemorySwap || hc.NanoCPUs != 5e8 || *hc.PidsLimit != 64 || hc.NetworkMode != "none" ||
		!hc.ReadonlyRootfs || !hc.AutoRemove || hc.CapDrop[0] != "ALL" || len(hc.CapAdd) != 0 || hc.Privileged {
		t.Errorf("host config %+v", hc)
	}
}

// The workspace and /dev/shm are tmpfs mounts, whose data pages and inodes
// are charged to the memory limit: all four bounds together leave half
// the headroom to processes, whatever the disk asked for. Each bound
// alone did, and a workspace filled with data and then with empty files
// went past the limit (found by the sandboxmem audit).
func TestTmpfsBoundsFitMemoryTogether(t *testing.T) {
	for _, mem := range []int64{minResources.MemoryBytes, 8 << 20, 20 << 20, 48 << 20, 64 << 20, 256 << 20, 512 << 20, 4 << 30, 64 << 30} {
		for _, disk := range []int64{minResources.DiskBytes, 8 << 20, mem / 2, mem, 4 * mem} {
			r := Resources{MemoryBytes: mem, DiskBytes: disk}
			all := WorkspaceSize(r) + WorkspaceInodes(r)*tmpfsInodeBytes + shmSize(r) + shmInodes(r)*tmpfsInodeBytes
			if left := mem - all; left < workspaceHeadroom(mem)/2 {
				t.Errorf("memory %d, disk %d: the tmpfs mounts may hold %d, leaving %d to processes, want at least %d", mem, disk, all, left, workspaceHeadroom(mem)/2)
			}
			if disk >= mem && WorkspaceInodes(r) < WorkspaceSize(r)/workspaceInodeRatio {
				t.Errorf("memory %d, disk %d: %d inodes for %d bytes, want one per %d", mem, disk, WorkspaceInodes(r), WorkspaceSize(r), workspaceInodeRatio)
			}
		}
	}
}

// The workspace is a tmpfs, charged to the memory limit: it is held under
// that limit, with room left for processes.
func TestWorkspaceSize(t *testing.T) {
	for _, tc := range []struct{ mem, disk, want, shm int64 }{
		{256 << 20, 64 << 20, 64 << 20, 8 << 20},    // fits: diskBytes
		{64 << 20, 256 << 20, 48410624, 4 << 20},    // over: its share, less its inodes
		{32 << 20, 8 << 20, 8 << 20, 4 << 20},       // small memory, smaller disk
		{16 << 20, 4 << 20, 4 << 20, 2 << 20},       // smaller: half the memory kept
		{20 << 20, 8 << 20, 8 << 20, 10 << 20 / 4},  // half of 20 MiB kept: the 8 fit
		{512 << 20, 512 << 20, 439083008, 16 << 20}, // equal: its share, less its inodes
		{4 << 30, 10 << 30, 3719745536, 64 << 20},   // the seed's example: 3.46 GiB
		{8 << 20, 1 << 20, 1 << 20, 1 << 20},        // tiny: half of it still holds the disk
		{8 << 20, 8 << 20, 3354624, 1 << 20},        // tiny, disk as large: under half
		{1 << 30, 1 << 20, 1 << 20, 1 << 20},        // small disk, large memory
		{minResources.MemoryBytes, minResources.DiskBytes, minResources.DiskBytes, minResources.DiskBytes},
	} {
		r := Resources{MemoryBytes: tc.mem, DiskBytes: tc.disk}
		if got := WorkspaceSize(r); got != tc.want {
			t.Errorf("WorkspaceSize(memory %d, disk %d) = %d, want %d", tc.mem, tc.disk, got, tc.want)
		}
		if got := shmSize(r); got != tc.shm {
			t.Errorf("shmSize(memory %d, disk %d) = %d, want %d", tc.mem, tc.disk, got, tc.shm)
		}
	}
}

// A range is stated in plain numbers, as the caller writes them.
func TestResourceRangeWording(t *testing.T) {
	p := testPolicy()
	req := validReq()
	req.Resources.MemoryBytes = 1
	err := p.ValidateProvision(&req)
	var e *Error
	if !errors.As(err, &e) || e.Field != "resources.memoryBytes" || !strings.Contains(e.Message, "between 6291456 and 1073741824") {
		t.Fatalf("%v, want the range in plain numbers", err)
	}
}

// Commands get HOME and, when the host has one, TMPDIR in the workspace:
// the engine's HOME is the image's, on the read-only root. They get USER
// and LOGNAME too: the sandbox's uid has no passwd entry, and the engine
// set neither. A provision env that sets any wins; one of USER and
// LOGNAME names the user for both.
func TestContainerEnvHomeTempAndUser(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tempDir string
		env     map[string]string
		want    []string
	}{
		{"defaults", WorkspaceTempDir, nil, []string{"HOME=/workspace", "LOGNAME=sandbox", "TMPDIR=/workspace/.tmp", "USER=sandbox"}},
		{"no temp dir", "", nil, []string{"HOME=/workspace", "LOGNAME=sandbox", "USER=sandbox"}},
		{"the caller's", WorkspaceTempDir, map[string]string{"HOME": "/workspace/me", "TMPDIR": "/dev/shm", "PATH": "/opt/bin", "USER": "dev", "LOGNAME": "build"},
			[]string{"HOME=/workspace/me", "LOGNAME=build", "PATH=/opt/bin:" + defaultPath, "TMPDIR=/dev/shm", "USER=dev"}},
		{"the caller's USER", "", map[string]string{"USER": "dev"}, []string{"HOME=/workspace", "LOGNAME=dev", "USER=dev"}},
		{"the caller's LOGNAME", "", map[string]string{"LOGNAME": "dev"}, []string{"HOME=/workspace", "LOGNAME=dev", "USER=dev"}},
	} {
		p := testPolicy()
		p.TempDir = tc.tempDir
		req := validReq()
		req.Env = tc.env
		before := maps.Clone(tc.env)
		cfg, _, err := p.ContainerConfig("abc", 2000000042, req, time.Unix(1_800_000_000, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Env, tc.want) {
			t.Errorf("%s: env %q, want %q", tc.name, cfg.Env, tc.want)
		}
		if !maps.Equal(tc.env, before) {
			t.Errorf("%s: the request's env was changed: %v", tc.name, tc.env)
		}
	}
}

// TestRepositoryOutsideRootsSaysWhere: a git-worktree repository outside
// --repository-roots is refused naming the path and the roots, so the
// admin knows where it must be.
func TestRepositoryOutsideRootsSaysWhere(t *testing.T) {
	p := testPolicy()
	p.RepositoryRoots = []string{"/srv/repos", "/home/git"}
	req := validReq()
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: "/srv/repos/../etc", Revision: "main"}
	err := p.ValidateProvision(&req)
	want := `workspace.repositoryPath: "/srv/repos/../etc" is outside the repository roots this gateway serves (/srv/repos, /home/git, its --repository-roots): name a repository under one of them`
	var e *Error
	if !errors.As(err, &e) || e.Field+": "+e.Message != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

// TestPidsLeastSaysWhy: a caller under the least pids is told what holds
// them as the README counts it (PID 1's 12 kept, the agent's 10: about 22,
// 6 tasks left for commands at 32), not the 16 of before PID 1 became the
// deadline tool under a uid of its own.
func TestPidsLeastSaysWhy(t *testing.T) {
	p := testPolicy()
	p.deadlineTool = ToolsDir + "/agent"
	req := validReq()
	req.Resources.Pids = 31
	err := p.ValidateProvision(&req)
	want := "resources.pids: must be between 32 and 1024; it counts threads: the sandbox's init and deadline (12 kept for it) and the agent (10 threads) hold about 22, and the agent keeps an eighth of the limit (4 to 32) from commands: at 32 they get 6 tasks"
	var e *Error
	if !errors.As(err, &e) || e.Field+": "+e.Message != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	// The soft nproc ulimit at 32 is those 6 and the agent's 10.
	if got := CommandTasks(32) - p.initTasks(); got != 6+10 {
		t.Fatalf("nproc at 32 pids: %d, want 16", got)
	}
}

// TestEnvNameQuotedShort: an env name refused is named in the error cut
// short, as every other quoted input is: it was quoted whole, so an
// exec's 8 MiB body of one bad name came back as an 8 MiB error (and
// whatever logs the error held it).
func TestEnvNameQuotedShort(t *testing.T) {
	p := Policy{Max: DefaultMaxResources()}
	long := "1" + strings.Repeat("a", 1<<20)
	secret := strings.Repeat("A", 200) + "_TOKEN"
	for _, env := range []map[string]string{{long: "x"}, {"A" + strings.Repeat("-", 1<<20): "x"}, {secret: "x"}} {
		req := ExecRequest{Command: "true", TimeoutMs: 1000, Env: env}
		err := p.ValidateExec(&req)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || !strings.HasPrefix(e.Field, "env.") {
			t.Fatalf("%v, want invalid_request naming env.NAME", err)
		}
		if n := len(e.Field) + len(e.Message); n > 1024 {
			t.Errorf("error of %d bytes for a bad name (%.40q...), want it quoted short", n, e.Field)
		}
	}
}
